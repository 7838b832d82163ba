/*
 * cpu_dot.h — the reductions every cpu op shares (internal, static inline).
 *
 * Without -ffast-math gcc may not reorder a float sum, so a plain
 * `s += a[i]*b[i]` loop stays scalar. These keep CPU_DOT_LANES independent
 * partial sums instead: the lane loop is a fixed-width elementwise update,
 * which gcc's vectorizer turns into SIMD multiply-adds while the order of
 * operations stays fixed (hence deterministic). The lanes are then combined
 * pairwise, and the tail (n % lanes values) added last.
 *
 * The f64 forms convert each f32 operand to double before multiplying, so
 * products are exact and only the additions round (in double).
 */
#ifndef KILN_CPU_DOT_H
#define KILN_CPU_DOT_H

#include <stdint.h>

/* For the functions that run the dot products: on x86-64 gcc also builds an
 * AVX2 copy and picks it at load time (ifunc), about 3x faster than the
 * SSE2 baseline. The lanes and their order are the same in both copies and
 * nothing is contracted into an FMA (-ffp-contract=off, backends/cpu/
 * local.mk), so both give the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__)
#define CPU_HOT __attribute__((target_clones("avx2", "default")))
#else
#define CPU_HOT
#endif

#define CPU_DOT_LANES_F32 16
#define CPU_DOT_LANES_F64 8

static inline float cpu_dot_f32(const float *restrict a, const float *restrict b, int64_t n) {
  float acc[CPU_DOT_LANES_F32] = {0};
  int64_t i = 0;
  for (; i + CPU_DOT_LANES_F32 <= n; i += CPU_DOT_LANES_F32)
    for (int j = 0; j < CPU_DOT_LANES_F32; j++) acc[j] += a[i + j] * b[i + j];
  for (int w = CPU_DOT_LANES_F32 / 2; w > 0; w /= 2)
    for (int j = 0; j < w; j++) acc[j] += acc[j + w];
  float tail = 0.0f;
  for (; i < n; i++) tail += a[i] * b[i];
  return acc[0] + tail;
}

static inline double cpu_dot_f64(const float *restrict a, const float *restrict b, int64_t n) {
  double acc[CPU_DOT_LANES_F64] = {0};
  int64_t i = 0;
  for (; i + CPU_DOT_LANES_F64 <= n; i += CPU_DOT_LANES_F64)
    for (int j = 0; j < CPU_DOT_LANES_F64; j++) acc[j] += (double)a[i + j] * (double)b[i + j];
  for (int w = CPU_DOT_LANES_F64 / 2; w > 0; w /= 2)
    for (int j = 0; j < w; j++) acc[j] += acc[j + w];
  double tail = 0.0;
  for (; i < n; i++) tail += (double)a[i] * (double)b[i];
  return acc[0] + tail;
}

/* dst[i] += s * x[i], i < n (the attention V accumulation). */
static inline void cpu_axpy_f32(float *restrict dst, float s, const float *restrict x, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] += s * x[i];
}

static inline void cpu_axpy_f64(double *restrict dst, double s, const float *restrict x,
                                int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] += s * (double)x[i];
}

#endif /* KILN_CPU_DOT_H */
