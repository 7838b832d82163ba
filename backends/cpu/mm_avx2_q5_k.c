/* AVX2 weight kernels (cpu_mm.h) for Q5_K: super-blocks of 256 values (176
 * bytes: f16 d, f16 dmin, Q4_K's 12 bytes of 6-bit scales and mins for
 * eight sub-blocks of 32, 32 bytes qh of fifth bits, 128 bytes of nibbles
 * laid out as Q4_K's). Value l of sub-block g has its fifth bit at bit g
 * of qh[l]. Value = d1 * q - m1 with d1 = d * sc and m1 = dmin * m, in
 * that order as kiln_dequantize: d1 * q is exact (17 + 5 bits), so the
 * subtraction rounds the same way whether or not a compiler fuses it. */
#include "config.h"

#include "cpu_simd.h"

#if CPU_HAVE_AVX2_KERNELS
#include "mm_avx2.h"

/* The 32 levels (0..31, bytes) of sub-block g_ = 2 j_ + s_: the low (s_ 0)
 * or high (s_ 1) nibbles of the 32 qs bytes at 48 + 32 j_, with 16 added
 * where bit g_ of the qh byte of the same index is set. */
#define Q5_K_LEVELS(p_, hb_, j_, s_, lv_)                                                          \
  __m256i lv_;                                                                                     \
  {                                                                                                \
    const __m256i m4_ = _mm256_set1_epi8(0x0f);                                                    \
    const __m256i q_ = _mm256_loadu_si256((const __m256i *)(const void *)((p_) + 48 + 32 * (j_))); \
    const __m256i nib_ = (s_) ? _mm256_and_si256(_mm256_srli_epi16(q_, 4), m4_)                   \
                              : _mm256_and_si256(q_, m4_);                                         \
    const __m256i bit_ = _mm256_set1_epi8((char)(1 << (2 * (j_) + (s_))));                         \
    const __m256i on_ = _mm256_cmpeq_epi8(_mm256_and_si256((hb_), bit_), bit_);                    \
    lv_ = _mm256_or_si256(nib_, _mm256_and_si256(on_, _mm256_set1_epi8(16)));                      \
  }

#define Q5_K_BLOCK(row, b, SINK)                                                                   \
  {                                                                                                \
    const uint8_t *p_ = (row) + (b) * 176;                                                         \
    const float d_ = cpu_mm_f16(p_), dmin_ = cpu_mm_f16(p_ + 2);                                   \
    const __m256i hb_ = _mm256_loadu_si256((const __m256i *)(const void *)(p_ + 16));             \
    CPU_MM_UNROLL for (int j_ = 0; j_ < 4; j_++) {                                                 \
      CPU_MM_UNROLL for (int s_ = 0; s_ < 2; s_++) {                                               \
        Q5_K_LEVELS(p_, hb_, j_, s_, lv_)                                                          \
        int sc_, mn_;                                                                              \
        cpu_mm_kq_scale_min(2 * j_ + s_, p_ + 4, &sc_, &mn_);                                      \
        const __m256 d1_ = _mm256_set1_ps(d_ * (float)sc_);                                        \
        const __m256 m1_ = _mm256_set1_ps(dmin_ * (float)mn_);                                     \
        const __m128i lo_ = _mm256_castsi256_si128(lv_);                                           \
        const __m128i hi_ = _mm256_extracti128_si256(lv_, 1);                                      \
        const __m128i c_[4] = {lo_, _mm_srli_si128(lo_, 8), hi_, _mm_srli_si128(hi_, 8)};          \
        CPU_MM_UNROLL for (int c = 0; c < 4; c++) {                                                \
          const __m256 w_ = _mm256_sub_ps(_mm256_mul_ps(d1_, cpu_mm_u8x8(c_[c])), m1_);            \
          SINK(w_, (b) * 256 + 64 * j_ + 32 * s_ + 8 * c)                                          \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }

/* Sub-block 2j+s as 32 int16 levels (0..31), multiplier d * sc x the
 * column's scale, min dmin * m: a level times an int16 activation is
 * below 2^20 and a pmaddwd pair below 2^21, so the int32 sums are exact. */
#define Q5_K_QBLOCK(row, b)                                                                        \
  {                                                                                                \
    const uint8_t *p_ = (row) + (b) * 176;                                                         \
    __m256 sc8_, mn8_;                                                                             \
    cpu_mm_kq_scales8(p_ + 4, &sc8_, &mn8_);                                                       \
    float mult_[CPU_MM_MAX_DOT_X][8] __attribute__((aligned(32)));                                 \
    CPU_MM_QSCALES8(mult_, _mm256_mul_ps(_mm256_set1_ps(cpu_mm_f16(p_)), sc8_), (b))               \
    CPU_MM_QMINS8(_mm256_mul_ps(_mm256_set1_ps(cpu_mm_f16(p_ + 2)), mn8_), (b))                    \
    CPU_MM_QCOLS256(b)                                                                             \
    const __m256i hb_ = _mm256_loadu_si256((const __m256i *)(const void *)(p_ + 16));             \
    CPU_MM_UNROLL for (int j_ = 0; j_ < 4; j_++) {                                                 \
      CPU_MM_UNROLL for (int s_ = 0; s_ < 2; s_++) {                                               \
        Q5_K_LEVELS(p_, hb_, j_, s_, lv_)                                                          \
        const __m256i wa_ = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(lv_));                     \
        const __m256i wb_ = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(lv_, 1));                \
        CPU_MM_QSINK1M(wa_, wb_, mult_, 2 * j_ + s_)                                               \
      }                                                                                            \
    }                                                                                              \
  }

CPU_MM_DEFINE_Q(cpu_mm_avx2_q5_k, 256, Q5_K_BLOCK, Q5_K_QBLOCK)

#endif
