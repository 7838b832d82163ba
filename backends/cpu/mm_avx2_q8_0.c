/* AVX2 weight kernels (cpu_mm.h) for Q8_0: blocks of an f16 scale d and 32
 * int8 q (34 bytes); value j = q[j] * d, exact in f32. */
#include "config.h"

#include "cpu_simd.h"

#if CPU_HAVE_AVX2_KERNELS
#include "mm_avx2.h"

#define Q8_0_BLOCK(row, b, SINK)                                                                   \
  {                                                                                                \
    const uint8_t *p_ = (row) + (b) * 34;                                                          \
    const __m256 d_ = _mm256_set1_ps(cpu_mm_f16(p_));                                              \
    CPU_MM_UNROLL for (int j_ = 0; j_ < 4; j_++) {                                                 \
      const __m128i q_ = _mm_loadl_epi64((const __m128i *)(const void *)(p_ + 2 + 8 * j_));        \
      const __m256 w_ = _mm256_mul_ps(cpu_mm_i8x8(q_), d_);                                        \
      SINK(w_, (b) * 32 + 8 * j_)                                                                  \
    }                                                                                              \
  }

/* Each half widened straight from memory (a load folded into vpmovsxbw). */
#define Q8_0_QBLOCK(row, b)                                                                        \
  {                                                                                                \
    const uint8_t *p_ = (row) + (b) * 34;                                                          \
    const __m256i wa_ = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(p_ + 2))); \
    const __m256i wb_ = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(p_ + 18))); \
    CPU_MM_QSINK1(wa_, wb_, cpu_mm_f16(p_), (b))                                                   \
  }

CPU_MM_DEFINE_Q(cpu_mm_avx2_q8_0, 32, Q8_0_BLOCK, Q8_0_QBLOCK)

#endif
