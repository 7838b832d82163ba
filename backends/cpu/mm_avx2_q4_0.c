/* AVX2 weight kernels (cpu_mm.h) for Q4_0: blocks of an f16 scale d and 16
 * bytes whose low nibbles are values 0..15 and high nibbles 16..31 (18
 * bytes); value = (q - 8) * d, exact in f32. */
#include "config.h"

#include "cpu_simd.h"

#if CPU_HAVE_AVX2_KERNELS
#include "mm_avx2.h"

/* Values 0..15 (lo) and 16..31 (hi) of the block at p as q - 8, int8. */
#define Q4_0_INTS(p_, lo_, hi_)                                                                    \
  const __m128i q_ = _mm_loadu_si128((const __m128i *)(const void *)((p_) + 2));                   \
  const __m128i m4_ = _mm_set1_epi8(0x0f), e8_ = _mm_set1_epi8(8);                                 \
  const __m128i lo_ = _mm_sub_epi8(_mm_and_si128(q_, m4_), e8_);                                   \
  const __m128i hi_ = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q_, 4), m4_), e8_);

#define Q4_0_BLOCK(row, b, SINK)                                                                   \
  {                                                                                                \
    const uint8_t *p_ = (row) + (b) * 18;                                                          \
    const __m256 d_ = _mm256_set1_ps(cpu_mm_f16(p_));                                              \
    Q4_0_INTS(p_, lo_, hi_)                                                                        \
    const __m128i h_[4] = {lo_, _mm_srli_si128(lo_, 8), hi_, _mm_srli_si128(hi_, 8)};              \
    CPU_MM_UNROLL for (int j_ = 0; j_ < 4; j_++) {                                                 \
      const __m256 w_ = _mm256_mul_ps(cpu_mm_i8x8(h_[j_]), d_);                                    \
      SINK(w_, (b) * 32 + 8 * j_)                                                                  \
    }                                                                                              \
  }

#define Q4_0_QBLOCK(row, b)                                                                        \
  {                                                                                                \
    const uint8_t *p_ = (row) + (b) * 18;                                                          \
    Q4_0_INTS(p_, lo_, hi_)                                                                        \
    CPU_MM_QSINK1(_mm256_cvtepi8_epi16(lo_), _mm256_cvtepi8_epi16(hi_), cpu_mm_f16(p_), (b))       \
  }

CPU_MM_DEFINE_Q(cpu_mm_avx2_q4_0, 32, Q4_0_BLOCK, Q4_0_QBLOCK)

#endif
