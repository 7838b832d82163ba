/* Which AVX2 weight kernels serve which type (cpu_mm.h). */
#include "config.h"

#include "cpu_mm.h"
#include "cpu_simd.h"

#if CPU_HAVE_AVX2_KERNELS
extern const cpu_mm_kernels cpu_mm_avx2_f32_kernels, cpu_mm_avx2_f16_kernels,
    cpu_mm_avx2_bf16_kernels, cpu_mm_avx2_q8_0_kernels, cpu_mm_avx2_q4_0_kernels,
    cpu_mm_avx2_q5_0_kernels, cpu_mm_avx2_q4_k_kernels, cpu_mm_avx2_q5_k_kernels,
    cpu_mm_avx2_q6_k_kernels;
#endif

bool cpu_mm_kernels_avx2(kiln_type type, cpu_mm_kernels *out) {
#if CPU_HAVE_AVX2_KERNELS
  const cpu_mm_kernels *k = NULL;
  switch (type) {
  case KILN_TYPE_F32: k = &cpu_mm_avx2_f32_kernels; break;
  case KILN_TYPE_F16: k = &cpu_mm_avx2_f16_kernels; break;
  case KILN_TYPE_BF16: k = &cpu_mm_avx2_bf16_kernels; break;
  case KILN_TYPE_Q8_0: k = &cpu_mm_avx2_q8_0_kernels; break;
  case KILN_TYPE_Q4_0: k = &cpu_mm_avx2_q4_0_kernels; break;
  case KILN_TYPE_Q5_0: k = &cpu_mm_avx2_q5_0_kernels; break;
  case KILN_TYPE_Q4_K: k = &cpu_mm_avx2_q4_k_kernels; break;
  case KILN_TYPE_Q5_K: k = &cpu_mm_avx2_q5_k_kernels; break;
  case KILN_TYPE_Q6_K: k = &cpu_mm_avx2_q6_k_kernels; break;
  default: break;
  }
  if (k) *out = *k;
  return k != NULL;
#else
  (void)type;
  (void)out;
  return false;
#endif
}
