/* AVX2 weight kernels (cpu_mm.h) for Q4_K: super-blocks of 256 values (144
 * bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins for eight
 * sub-blocks of 32, 128 bytes of nibbles). Value = d1 * q - m1 with
 * d1 = d * sc and m1 = dmin * m, in that order as kiln_dequantize: d1 * q
 * is exact (17 + 4 bits), so the subtraction rounds the same way whether
 * or not a compiler fuses it. */
#include "config.h"

#include "cpu_simd.h"

#if CPU_HAVE_AVX2_KERNELS
#include "mm_avx2.h"

/* Sub-block 2*j_ is the low nibbles of the 32 bytes at q + 32*j_, 2*j_+1
 * their high nibbles. */
#define Q4_K_BLOCK(row, b, SINK)                                                                   \
  {                                                                                                \
    const uint8_t *p_ = (row) + (b) * 144;                                                         \
    const float d_ = cpu_mm_f16(p_), dmin_ = cpu_mm_f16(p_ + 2);                                   \
    const __m256i m4_ = _mm256_set1_epi8(0x0f);                                                    \
    CPU_MM_UNROLL for (int j_ = 0; j_ < 4; j_++) {                                                 \
      const __m256i q_ = _mm256_loadu_si256((const __m256i *)(const void *)(p_ + 16 + 32 * j_));   \
      const __m256i nib_[2] = {_mm256_and_si256(q_, m4_),                                          \
                               _mm256_and_si256(_mm256_srli_epi16(q_, 4), m4_)};                   \
      CPU_MM_UNROLL for (int s_ = 0; s_ < 2; s_++) {                                               \
        int sc_, mn_;                                                                              \
        cpu_mm_kq_scale_min(2 * j_ + s_, p_ + 4, &sc_, &mn_);                                      \
        const __m256 d1_ = _mm256_set1_ps(d_ * (float)sc_);                                        \
        const __m256 m1_ = _mm256_set1_ps(dmin_ * (float)mn_);                                     \
        const __m128i lo_ = _mm256_castsi256_si128(nib_[s_]);                                      \
        const __m128i hi_ = _mm256_extracti128_si256(nib_[s_], 1);                                 \
        const __m128i c_[4] = {lo_, _mm_srli_si128(lo_, 8), hi_, _mm_srli_si128(hi_, 8)};          \
        CPU_MM_UNROLL for (int c = 0; c < 4; c++) {                                                \
          const __m256 w_ = _mm256_sub_ps(_mm256_mul_ps(d1_, cpu_mm_u8x8(c_[c])), m1_);            \
          SINK(w_, (b) * 256 + 64 * j_ + 32 * s_ + 8 * c)                                          \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }

/* Group 2j+s (sub-block) as 32 int16 nibbles, multiplier d * sc x the
 * column's scale, min dmin * m. */
#define Q4_K_QBLOCK(row, b)                                                                        \
  {                                                                                                \
    const uint8_t *p_ = (row) + (b) * 144;                                                         \
    __m256 sc8_, mn8_;                                                                             \
    cpu_mm_kq_scales8(p_ + 4, &sc8_, &mn8_);                                                       \
    float mult_[CPU_MM_MAX_DOT_X][8] __attribute__((aligned(32)));                                 \
    CPU_MM_QSCALES8(mult_, _mm256_mul_ps(_mm256_set1_ps(cpu_mm_f16(p_)), sc8_), (b))               \
    CPU_MM_QMINS8(_mm256_mul_ps(_mm256_set1_ps(cpu_mm_f16(p_ + 2)), mn8_), (b))                    \
    CPU_MM_QCOLS256(b)                                                                             \
    const __m256i m4_ = _mm256_set1_epi8(0x0f);                                                    \
    CPU_MM_UNROLL for (int j_ = 0; j_ < 4; j_++) {                                                 \
      const __m256i q_ = _mm256_loadu_si256((const __m256i *)(const void *)(p_ + 16 + 32 * j_));   \
      const __m256i nib_[2] = {_mm256_and_si256(q_, m4_),                                          \
                               _mm256_and_si256(_mm256_srli_epi16(q_, 4), m4_)};                   \
      CPU_MM_UNROLL for (int s_ = 0; s_ < 2; s_++) {                                               \
        const __m256i wa_ = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(nib_[s_]));                \
        const __m256i wb_ = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(nib_[s_], 1));           \
        CPU_MM_QSINK1M(wa_, wb_, mult_, 2 * j_ + s_)                                               \
      }                                                                                            \
    }                                                                                              \
  }

CPU_MM_DEFINE_Q(cpu_mm_avx2_q4_k, 256, Q4_K_BLOCK, Q4_K_QBLOCK)

#endif
