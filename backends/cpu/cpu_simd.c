/* Run-time choice of the cpu backend's vector code (cpu_simd.h): CPUID
 * for the features, XGETBV for whether the OS saves the YMM registers
 * (without that, AVX instructions fault even on a CPU that has them). */
#include "config.h"

#include "cpu_simd.h"

#if CPU_HAVE_AVX2_KERNELS
#include <cpuid.h>
#include <stddef.h>
#include <stdint.h>

static uint64_t xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}
#endif

cpu_simd cpu_simd_detect(void) {
#if CPU_HAVE_AVX2_KERNELS
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return CPU_SIMD_PORTABLE;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28),
             f16c = c & (1u << 29);
  if (!fma || !osxsave || !avx || !f16c) return CPU_SIMD_PORTABLE;
  if ((xgetbv0() & 6) != 6) return CPU_SIMD_PORTABLE; /* XMM and YMM state */
  if (__get_cpuid_max(0, NULL) < 7) return CPU_SIMD_PORTABLE;
  __cpuid_count(7, 0, a, b, c, d);
  if (!(b & (1u << 5))) return CPU_SIMD_PORTABLE; /* AVX2 */
  return CPU_SIMD_AVX2;
#else
  return CPU_SIMD_PORTABLE;
#endif
}

const char *cpu_simd_name(cpu_simd s) { return s == CPU_SIMD_AVX2 ? "avx2" : "portable"; }
