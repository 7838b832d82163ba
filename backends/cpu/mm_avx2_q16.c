/* An f32 activation column quantized per block of 32 values to int16
 * (cpu_mm.h): the columns the dot_q16 kernels read. q = round(x / d) to
 * nearest, d = max|x| / 32767 per block, so |q| <= 32767 and
 * |d q - x| <= d / 2. */
#include "config.h"

#include "cpu_simd.h"

#if CPU_HAVE_AVX2_KERNELS
#include <math.h>

#include "mm_avx2.h"

CPU_AVX2 void cpu_mm_q16_quantize_avx2(const float *x, int64_t K, void *buf, cpu_mm_q16 *out) {
  const int64_t nb = K / CPU_MM_Q16_BLOCK;
  int16_t *q = buf;
  float *d = (float *)(void *)(q + K);
  int32_t *s = (int32_t *)(void *)(d + nb);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nb; b++) {
    const float *xb = x + b * CPU_MM_Q16_BLOCK;
    __m256 v[4], m = _mm256_setzero_ps();
    CPU_MM_UNROLL for (int i = 0; i < 4; i++) {
      v[i] = _mm256_loadu_ps(xb + 8 * i);
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    float amax = _mm_cvtss_f32(m4);
    /* max drops NaNs: look for one directly, so it is not lost */
    for (int i = 0; i < CPU_MM_Q16_BLOCK; i++)
      if (!isfinite(xb[i])) amax = NAN;
    int16_t *qb = q + b * CPU_MM_Q16_BLOCK;
    if (!(amax > 0.0f) || !isfinite(amax)) {
      d[b] = amax == 0.0f ? 0.0f : NAN;
      memset(qb, 0, CPU_MM_Q16_BLOCK * sizeof *qb);
      s[b] = 0;
      continue;
    }
    d[b] = amax / 32767.0f;
    const __m256 inv = _mm256_set1_ps(32767.0f / amax);
    __m256i r[4];
    CPU_MM_UNROLL for (int i = 0; i < 4; i++) r[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));
    /* packs works per 128-bit lane; the permute puts the values back in order */
    const __m256i q0 = _mm256_permute4x64_epi64(_mm256_packs_epi32(r[0], r[1]), 0xd8);
    const __m256i q1 = _mm256_permute4x64_epi64(_mm256_packs_epi32(r[2], r[3]), 0xd8);
    _mm256_store_si256((__m256i *)(void *)qb, q0);
    _mm256_store_si256((__m256i *)(void *)(qb + 16), q1);
    const __m256i sum = _mm256_add_epi32(_mm256_madd_epi16(q0, ones), _mm256_madd_epi16(q1, ones));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    s[b] = _mm_cvtsi128_si32(s4);
  }
  out->q = q;
  out->d = d;
  out->s = s;
}

#endif
