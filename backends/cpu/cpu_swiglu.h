/*
 * cpu_swiglu.h — the vector kernel of SWIGLU (internal; op_swiglu.c
 * chooses it).
 */
#ifndef KILN_CPU_SWIGLU_H
#define KILN_CPU_SWIGLU_H

#include <stdint.h>

/* y[i] = a[i] / (1 + e^-a[i]) * b[i], i < n, at f32; y may be a or b.
 * AVX2 + FMA (cpu_simd.h). */
void cpu_swiglu_f32_avx2(const float *a, const float *b, float *y, int64_t n);

#endif /* KILN_CPU_SWIGLU_H */
