/* AVX2 weight kernels (cpu_mm.h) for the float weight types: F32, F16
 * (F16C's exact conversion) and BF16 (the top half of an f32). Their rows
 * may have any length, so the last group of fewer than 8 values goes
 * through TAIL with zeros past the row. */
#include "config.h"

#include "cpu_simd.h"

#if CPU_HAVE_AVX2_KERNELS
#include "mm_avx2.h"

/* One group of 8 values is a block; the last n < 8 values are the tail. */
#define F32_BLOCK(row, b, SINK)                                                                    \
  {                                                                                                \
    const __m256 w_ = _mm256_loadu_ps((const float *)(const void *)(row) + 8 * (b));               \
    SINK(w_, 8 * (b))                                                                              \
  }
#define F32_TAIL(row, k0, n, TAIL)                                                                 \
  {                                                                                                \
    const __m256 w_ = _mm256_maskload_ps((const float *)(const void *)(row) + (k0), cpu_mm_tail_mask(n)); \
    TAIL(w_, (k0), (n))                                                                            \
  }

/* 8 halves or bfloats from p (n of them, zeros after, when n < 8). */
CPU_AVX2_INLINE __m128i load_u16x8(const uint8_t *p, int n) {
  if (n == 8) return _mm_loadu_si128((const __m128i *)(const void *)p);
  uint16_t v[8] = {0};
  memcpy(v, p, (size_t)n * 2);
  return _mm_loadu_si128((const __m128i *)(const void *)v);
}

#define F16_CONVERT(h) _mm256_cvtph_ps(h)
#define BF16_CONVERT(h) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
#define HALF_BLOCK(row, b, SINK, CONVERT)                                                          \
  {                                                                                                \
    const __m256 w_ = CONVERT(load_u16x8((row) + 16 * (b), 8));                                    \
    SINK(w_, 8 * (b))                                                                              \
  }
#define HALF_TAIL(row, k0, n, TAIL, CONVERT)                                                       \
  {                                                                                                \
    const __m256 w_ = CONVERT(load_u16x8((row) + 2 * (k0), (n)));                                  \
    TAIL(w_, (k0), (n))                                                                            \
  }
#define F16_BLOCK(row, b, SINK) HALF_BLOCK(row, b, SINK, F16_CONVERT)
#define F16_TAIL(row, k0, n, TAIL) HALF_TAIL(row, k0, n, TAIL, F16_CONVERT)
#define BF16_BLOCK(row, b, SINK) HALF_BLOCK(row, b, SINK, BF16_CONVERT)
#define BF16_TAIL(row, k0, n, TAIL) HALF_TAIL(row, k0, n, TAIL, BF16_CONVERT)

CPU_MM_DEFINE_F(cpu_mm_avx2_f32, 8, F32_BLOCK, F32_TAIL)
CPU_MM_DEFINE_F(cpu_mm_avx2_f16, 8, F16_BLOCK, F16_TAIL)
CPU_MM_DEFINE_F(cpu_mm_avx2_bf16, 8, BF16_BLOCK, BF16_TAIL)

#endif
