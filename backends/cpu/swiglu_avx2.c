/* SWIGLU at f32 with AVX2 + FMA: y = a / (1 + e^-a) * b for 8 values at a
 * time (vexp_avx2.h), the tail as op_swiglu.c computes it. For a << 0,
 * e^-a is inf and a / inf is -0, the limit, as in the portable code. */
#include "config.h"

#include "cpu_simd.h"

#if CPU_HAVE_AVX2_KERNELS
#include <math.h>

#include "cpu_swiglu.h"
#include "vexp_avx2.h"

__attribute__((target("avx2,fma"))) void cpu_swiglu_f32_avx2(const float *a, const float *b, float *y,
                                                             int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 av = _mm256_loadu_ps(a + i);
    const __m256 e = cpu_vexp_avx2(_mm256_xor_ps(av, sign));
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(av, _mm256_add_ps(one, e)), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; i++) y[i] = a[i] / (1.0f + expf(-a[i])) * b[i];
}

#endif
