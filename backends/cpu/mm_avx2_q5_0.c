/* AVX2 weight kernels (cpu_mm.h) for Q5_0: blocks of an f16 scale d, a u32
 * whose bit j is the fifth bit of value j, and 16 bytes of nibbles laid
 * out as Q4_0's (22 bytes); value = (q - 16) * d, exact in f32. */
#include "config.h"

#include "cpu_simd.h"

#if CPU_HAVE_AVX2_KERNELS
#include "mm_avx2.h"

/* 16 bytes holding 0 where bit `first + i` of qh is set, else -16: the
 * fifth bit and the offset of values first .. first+15 at once, so a
 * value is its nibble plus this (one add instead of an or and a sub). */
CPU_AVX2_INLINE __m128i q5_high_minus16(uint32_t qh, int first) {
  const __m128i bits = _mm_set1_epi64x((long long)0x8040201008040201ull);
  const __m128i pick = first ? _mm_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3)
                             : _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m128i by = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)qh), pick);
  const __m128i set = _mm_cmpeq_epi8(_mm_and_si128(by, bits), bits);
  return _mm_andnot_si128(set, _mm_set1_epi8(-16));
}

/* Values 0..15 (lo) and 16..31 (hi) of the block at p as q - 16, int8. */
#define Q5_0_INTS(p_, lo_, hi_)                                                                    \
  uint32_t qh_;                                                                                    \
  memcpy(&qh_, (p_) + 2, 4);                                                                       \
  const __m128i q_ = _mm_loadu_si128((const __m128i *)(const void *)((p_) + 6));                   \
  const __m128i m4_ = _mm_set1_epi8(0x0f);                                                         \
  const __m128i lo_ = _mm_add_epi8(_mm_and_si128(q_, m4_), q5_high_minus16(qh_, 0));               \
  const __m128i hi_ = _mm_add_epi8(_mm_and_si128(_mm_srli_epi16(q_, 4), m4_), q5_high_minus16(qh_, 16));

#define Q5_0_BLOCK(row, b, SINK)                                                                   \
  {                                                                                                \
    const uint8_t *p_ = (row) + (b) * 22;                                                          \
    const __m256 d_ = _mm256_set1_ps(cpu_mm_f16(p_));                                              \
    Q5_0_INTS(p_, lo_, hi_)                                                                        \
    const __m128i h_[4] = {lo_, _mm_srli_si128(lo_, 8), hi_, _mm_srli_si128(hi_, 8)};              \
    CPU_MM_UNROLL for (int j_ = 0; j_ < 4; j_++) {                                                 \
      const __m256 w_ = _mm256_mul_ps(cpu_mm_i8x8(h_[j_]), d_);                                    \
      SINK(w_, (b) * 32 + 8 * j_)                                                                  \
    }                                                                                              \
  }

#define Q5_0_QBLOCK(row, b)                                                                        \
  {                                                                                                \
    const uint8_t *p_ = (row) + (b) * 22;                                                          \
    Q5_0_INTS(p_, lo_, hi_)                                                                        \
    CPU_MM_QSINK1(_mm256_cvtepi8_epi16(lo_), _mm256_cvtepi8_epi16(hi_), cpu_mm_f16(p_), (b))       \
  }

CPU_MM_DEFINE_Q(cpu_mm_avx2_q5_0, 32, Q5_0_BLOCK, Q5_0_QBLOCK)

#endif
