/* ATTENTION's f32 inner loop for one (token, head) with AVX2 + FMA
 * (cpu_attn.h): scores q.k_j in 8-lane FMAs, a max-subtracted softmax with
 * 8-lane exp (vexp_avx2.h), and the weighted V sum in 8-lane FMAs.
 * head_dim a multiple of 8. */
#include "config.h"

#include "cpu_simd.h"

#if CPU_HAVE_AVX2_KERNELS
#include <math.h>

#include "cpu_attn.h"
#include "mm_avx2.h"
#include "vexp_avx2.h"

CPU_AVX2 void cpu_attend_f32_avx2(const float *q, const float *k, const float *v, int64_t n_keys,
                                  int64_t kv_stride, int64_t hd, float scale, float *s, float *acc,
                                  float *y) {
  float m = -INFINITY;
  for (int64_t j = 0; j < n_keys; j++) {
    const float *kj = k + j * kv_stride;
    __m256 d = _mm256_mul_ps(_mm256_loadu_ps(q), _mm256_loadu_ps(kj));
    for (int64_t c = 8; c < hd; c += 8)
      d = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(kj + c), d);
    s[j] = scale * cpu_mm_hsum8(d);
    if (s[j] > m) m = s[j];
  }
  /* softmax numerators 8 at a time (vexp_avx2.h); the tail's lanes past
   * n_keys read -inf, whose exp is 0, and are not stored */
  const __m256 mv = _mm256_set1_ps(m);
  __m256 sv = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n_keys; j += 8) {
    const __m256 e = cpu_vexp_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
    _mm256_storeu_ps(s + j, e);
    sv = _mm256_add_ps(sv, e);
  }
  if (j < n_keys) {
    const __m256i mask = cpu_mm_tail_mask((int)(n_keys - j));
    const __m256 t = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(s + j, mask),
                                      _mm256_castsi256_ps(mask));
    const __m256 e = cpu_vexp_avx2(_mm256_sub_ps(t, mv));
    _mm256_maskstore_ps(s + j, mask, e);
    sv = _mm256_add_ps(sv, e);
  }
  const float sum = cpu_mm_hsum8(sv);
  for (int64_t c = 0; c < hd; c += 8) _mm256_storeu_ps(acc + c, _mm256_setzero_ps());
  for (j = 0; j < n_keys; j++) {
    const float *vj = v + j * kv_stride;
    const __m256 w = _mm256_set1_ps(s[j]);
    for (int64_t c = 0; c < hd; c += 8)
      _mm256_storeu_ps(acc + c, _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + c), _mm256_loadu_ps(acc + c)));
  }
  const __m256 inv = _mm256_set1_ps(sum);
  for (int64_t c = 0; c < hd; c += 8) _mm256_storeu_ps(y + c, _mm256_div_ps(_mm256_loadu_ps(acc + c), inv));
}

#endif
