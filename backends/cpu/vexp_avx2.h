/*
 * vexp_avx2.h — e^x for 8 floats with AVX2 + FMA (internal, static inline),
 * for the f32 softmax and SwiGLU.
 *
 * Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2 (ln2 split in two
 * so n ln2 is exact), e^r by a degree-7 Taylor polynomial in Horner form
 * (truncation error below 6e-9 relative on that interval; with the f32
 * roundings the result is within a few ulp of e^x), and 2^n put into the
 * exponent bits. x above 88.7228 gives +inf, below -103.97 gives +0, as
 * expf does; NaN stays NaN. Include only from files built for x86-64
 * (cpu_simd.h's CPU_HAVE_AVX2_KERNELS).
 */
#ifndef KILN_CPU_VEXP_AVX2_H
#define KILN_CPU_VEXP_AVX2_H

#include <immintrin.h>

static inline __attribute__((always_inline, target("avx2,fma"))) __m256 cpu_vexp_avx2(__m256 x) {
  const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
  const __m256 ln2_hi = _mm256_set1_ps(0.693359375f), ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
  /* n in [-150, 128]: the scale 2^n is built in two halves so that it
   * neither overflows before the final product nor loses subnormals */
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, ln2_hi, xc);
  r = _mm256_fnmadd_ps(n, ln2_lo, r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  /* 2^n = 2^h * 2^(n-h), h = n/2 rounded toward zero: each half in range */
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i h = _mm256_srai_epi32(ni, 1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, h), bias), 23));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, _mm256_set1_ps(88.7228394f), _CMP_GT_OQ));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-103.972084f), _CMP_LT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); /* NaN in, NaN out */
}

#endif /* KILN_CPU_VEXP_AVX2_H */
