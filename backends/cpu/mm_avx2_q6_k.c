/* AVX2 weight kernels (cpu_mm.h) for Q6_K: super-blocks of 256 values (210
 * bytes: 128 bytes of low nibbles ql, 64 bytes of 2-bit high parts qh, 16
 * int8 scales, f16 d). Each half of 128 values takes 64 ql and 32 qh
 * bytes: values l, l+32, l+64, l+96 (l < 32) are ql[l] low, ql[l+32] low,
 * ql[l] high, ql[l+32] high with qh[l] bits 0-1, 2-3, 4-5, 6-7 on top,
 * minus 32, each group of 16 with its own scale. Value = (d * sc) * q, the
 * association kiln_dequantize uses (d * sc is exact, the product with q
 * rounds). */
#include "config.h"

#include "cpu_simd.h"

#if CPU_HAVE_AVX2_KERNELS
#include "mm_avx2.h"

/* The four 32-value groups q_[0..3] of half h_ of the block at p_, each as
 * 32 int8 values q - 32 (values 32 i .. 32 i + 31 of the half). */
#define Q6_K_INTS(p_, h_, q_)                                                                      \
  __m256i q_[4];                                                                                   \
  {                                                                                                \
    const __m256i m4_ = _mm256_set1_epi8(0x0f), m2_ = _mm256_set1_epi8(3);                         \
    const __m256i e32_ = _mm256_set1_epi8(32);                                                     \
    const uint8_t *ql_ = (p_) + 64 * (h_), *qh_ = (p_) + 128 + 32 * (h_);                          \
    const __m256i a_ = _mm256_loadu_si256((const __m256i *)(const void *)ql_);                     \
    const __m256i b2_ = _mm256_loadu_si256((const __m256i *)(const void *)(ql_ + 32));             \
    const __m256i hb_ = _mm256_loadu_si256((const __m256i *)(const void *)qh_);                    \
    q_[0] = _mm256_or_si256(_mm256_and_si256(a_, m4_),                                             \
                            _mm256_slli_epi16(_mm256_and_si256(hb_, m2_), 4));                     \
    q_[1] = _mm256_or_si256(_mm256_and_si256(b2_, m4_),                                            \
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb_, 2), m2_), 4)); \
    q_[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a_, 4), m4_),                       \
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb_, 4), m2_), 4)); \
    q_[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2_, 4), m4_),                      \
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb_, 6), m2_), 4)); \
    CPU_MM_UNROLL for (int u_ = 0; u_ < 4; u_++) q_[u_] = _mm256_sub_epi8(q_[u_], e32_);           \
  }

#define Q6_K_BLOCK(row, b, SINK)                                                                   \
  {                                                                                                \
    const uint8_t *p_ = (row) + (b) * 210;                                                         \
    const float d_ = cpu_mm_f16(p_ + 208);                                                         \
    const int8_t *sc_ = (const int8_t *)(const void *)(p_ + 192);                                  \
    CPU_MM_UNROLL for (int h_ = 0; h_ < 2; h_++) {                                                 \
      Q6_K_INTS(p_, h_, q_)                                                                        \
      CPU_MM_UNROLL for (int g_ = 0; g_ < 4; g_++) {                                               \
        const __m128i lo_ = _mm256_castsi256_si128(q_[g_]);                                        \
        const __m128i hi_ = _mm256_extracti128_si256(q_[g_], 1);                                   \
        const __m128i c_[4] = {lo_, _mm_srli_si128(lo_, 8), hi_, _mm_srli_si128(hi_, 8)};          \
        CPU_MM_UNROLL for (int c = 0; c < 4; c++) {                                                \
          const __m256 ds_ = _mm256_set1_ps(d_ * (float)sc_[8 * h_ + 2 * g_ + c / 2]);             \
          const __m256 w_ = _mm256_mul_ps(ds_, cpu_mm_i8x8(c_[c]));                                \
          SINK(w_, (b) * 256 + 128 * h_ + 32 * g_ + 8 * c)                                         \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }

/* The 16 scales as floats, split by group half: a[g] = sc[2g] (values
 * 0..15 of group g), b[g] = sc[2g+1] (16..31). */
CPU_AVX2_INLINE void q6k_scales8(const uint8_t *s, __m256 *a, __m256 *b) {
  const __m128i v = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)s),
                                     _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
  *a = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
  *b = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)));
}

/* Group g = 4h + i (32 values of half h): 16 + 16 values with multipliers
 * d * sc[2g] and d * sc[2g + 1] x the column's scale. */
#define Q6_K_QBLOCK(row, b)                                                                        \
  {                                                                                                \
    const uint8_t *p_ = (row) + (b) * 210;                                                         \
    __m256 sca_, scb_;                                                                             \
    q6k_scales8(p_ + 192, &sca_, &scb_);                                                           \
    const __m256 d8_ = _mm256_set1_ps(cpu_mm_f16(p_ + 208));                                       \
    float ma_[CPU_MM_MAX_DOT_X][8] __attribute__((aligned(32)));                                   \
    float mb_[CPU_MM_MAX_DOT_X][8] __attribute__((aligned(32)));                                   \
    CPU_MM_QSCALES8(ma_, _mm256_mul_ps(d8_, sca_), (b))                                            \
    CPU_MM_QSCALES8(mb_, _mm256_mul_ps(d8_, scb_), (b))                                            \
    CPU_MM_QCOLS256(b)                                                                             \
    CPU_MM_UNROLL for (int h_ = 0; h_ < 2; h_++) {                                                 \
      Q6_K_INTS(p_, h_, q_)                                                                        \
      CPU_MM_UNROLL for (int g_ = 0; g_ < 4; g_++) {                                               \
        const __m256i wa_ = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q_[g_]));                  \
        const __m256i wb_ = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q_[g_], 1));             \
        CPU_MM_QSINK2M(wa_, wb_, ma_, mb_, 4 * h_ + g_)                                            \
      }                                                                                            \
    }                                                                                              \
  }

CPU_MM_DEFINE_Q(cpu_mm_avx2_q6_k, 256, Q6_K_BLOCK, Q6_K_QBLOCK)

#endif
