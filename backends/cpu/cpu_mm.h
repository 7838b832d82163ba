/*
 * cpu_mm.h — the f32 matrix-multiply kernels of MUL_MAT (internal).
 *
 * For each weight type, at a SIMD level that has them (today AVX2 + FMA +
 * F16C, mm_avx2_*.c), kernels over rows of a weight W [K, N] (row r holds K
 * values in row_bytes bytes, GGUF block layout):
 *
 *   deq  the rows as f32, exactly kiln_dequantize's values (the GGUF
 *        definitions), into rows of round_up(K, 8) floats with zeros past
 *        K: the panels the blocked GEMM (cpu_mm_gemm_avx2) multiplies by a
 *        micro-batch of columns, so the decode cost is paid once per panel
 *        rather than once per column. Every output of the GEMM is an f32
 *        sum of exact weight x activation products: lane j of an 8-wide
 *        accumulator takes k = j, j+8, ... in order, one fused
 *        multiply-add each, and the lanes are summed by a fixed tree.
 *
 *   dot  y[t*ys + r] = W[r] . x_t for n_rows rows and n_x (1 ..
 *        CPU_MM_MAX_DOT_X) columns: decode and small steps. Each weight is
 *        decoded in registers once per call and used for every column, so
 *        a row is read from memory once per token.
 *          dot_f32 (every type): exact weights times the f32 column,
 *        accumulated as the GEMM does (the same bits).
 *          dot_q16 (block-quantized weights: Q4_0, Q5_0, Q8_0, Q4_K, Q5_K,
 *        Q6_K; [cpu] matvec = int16, the default): against the column
 *        quantized per block of 32 values to int16
 *        (cpu_mm_q16_quantize): x^[i] = d * q[i], d = max|x| / 32767, so
 *        |x^[i] - x[i]| <= max|x| / 65534 in each block (llama.cpp rounds
 *        to int8, 256 times coarser). The integer weights and q are
 *        multiplied and summed exactly in int32 per block (pmaddwd), and
 *        the blocks' sums are scaled and added in f32. This is what makes
 *        decode as fast as llama.cpp's int8 kernels on AVX2; the parity of
 *        the result against precision = f64 is in the test suite.
 */
#ifndef KILN_CPU_MM_H
#define KILN_CPU_MM_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/types.h"

#define CPU_MM_MAX_DOT_X 4
/* MUL_MAT steps of at most this many tokens take the dot kernels, larger
 * ones the GEMM (the dequantization of a panel pays off from about 4). */
#define CPU_MM_DOT_MAX_T 3
#define CPU_MM_Q16_BLOCK 32

/* One activation column quantized per block of 32: K int16 values q
 * (32-byte aligned), and per block its scale d and the sum of its q. */
typedef struct cpu_mm_q16 {
  const int16_t *q; /* [K] */
  const float *d;   /* [K / 32] */
  const int32_t *s; /* [K / 32] */
} cpu_mm_q16;

typedef void (*cpu_mm_dot_f32_fn)(const uint8_t *w, int64_t row_bytes, int64_t K, int64_t n_rows,
                                  const float *x, int64_t xs, int n_x, float *y, int64_t ys);
typedef void (*cpu_mm_dot_q16_fn)(const uint8_t *w, int64_t row_bytes, int64_t K, int64_t n_rows,
                                  const cpu_mm_q16 *x, int n_x, float *y, int64_t ys);
typedef void (*cpu_mm_deq_fn)(const uint8_t *w, int64_t row_bytes, int64_t K, int64_t n_rows,
                              float *out, int64_t out_stride);

/* A type's kernels: dot_f32 and deq always, dot_q16 for block-quantized types. */
typedef struct cpu_mm_kernels {
  cpu_mm_dot_f32_fn dot_f32;
  cpu_mm_dot_q16_fn dot_q16;
  cpu_mm_deq_fn deq;
} cpu_mm_kernels;

/* round_up(K, 8): the row stride (in floats) of a dequantized panel. */
static inline int64_t cpu_mm_k8(int64_t K) { return (K + 7) & ~(int64_t)7; }

/* Bytes of one quantized column of K values (K a multiple of 32), laid
 * out by cpu_mm_q16_quantize, a multiple of 32. */
static inline int64_t cpu_mm_q16_bytes(int64_t K) { return K * 2 + (K / CPU_MM_Q16_BLOCK) * 8; }

/* The AVX2 kernels for `type` (F32, F16, BF16, Q4_0, Q5_0, Q8_0, Q4_K,
 * Q5_K, Q6_K), or false when there are none (another type, or a build
 * without the x86-64 kernels). Call only when cpu_simd_detect() said AVX2. */
bool cpu_mm_kernels_avx2(kiln_type type, cpu_mm_kernels *out);

/* Quantizes x[0..K) (K a multiple of 32) into buf (cpu_mm_q16_bytes(K)
 * bytes, 32-byte aligned) and points *out at it. A block of zeros gets
 * d = 0; a non-finite x makes its block's d non-finite, so it shows in the
 * result instead of vanishing. AVX2. */
void cpu_mm_q16_quantize_avx2(const float *x, int64_t K, void *buf, cpu_mm_q16 *out);

/* y[t*ys + r] = sum_k P[r][k] * x[t*xs + k] for r < n_rows, t < T: the
 * panel P holds n_rows rows of k8 = cpu_mm_k8(K) floats (zeros past K, as
 * deq writes them), 32-byte aligned. x is read only at k < K. */
void cpu_mm_gemm_avx2(const float *panel, int64_t K, int64_t n_rows, const float *x, int64_t xs,
                      int64_t T, float *y, int64_t ys);

#endif /* KILN_CPU_MM_H */
