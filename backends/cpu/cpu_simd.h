/*
 * cpu_simd.h — which vector code the cpu backend runs, chosen at run time
 * (internal).
 *
 * The plugin is built for the baseline of its target (x86-64: SSE2), so it
 * loads on any CPU of that architecture. The x86-64 kernels for AVX2 + FMA +
 * F16C (mm_avx2_*.c) are compiled with per-function target attributes and
 * called only after cpu_simd_detect() has seen all three features, so an
 * older CPU never executes an instruction it lacks: it runs the portable
 * path (plain C, what the compiler vectorizes for the baseline).
 */
#ifndef KILN_CPU_SIMD_H
#define KILN_CPU_SIMD_H

#include <stdbool.h>

typedef enum cpu_simd {
  CPU_SIMD_PORTABLE = 0, /* plain C: any CPU */
  CPU_SIMD_AVX2 = 1      /* x86-64 with AVX2, FMA and F16C (Haswell, Zen and later) */
} cpu_simd;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_HAVE_AVX2_KERNELS 1
/* Put on every function of the AVX2 kernels (helpers too: an intrinsic
 * inlines only into a function compiled for its feature). */
#define CPU_AVX2 __attribute__((target("avx2,fma,f16c")))
#else
#define CPU_HAVE_AVX2_KERNELS 0
#endif

/* The best level this CPU runs: CPU_SIMD_AVX2 when the kernels are built
 * in and the CPU reports AVX2, FMA and F16C, else CPU_SIMD_PORTABLE. */
cpu_simd cpu_simd_detect(void);

/* "avx2" or "portable". */
const char *cpu_simd_name(cpu_simd s);

#endif /* KILN_CPU_SIMD_H */
