/* Shared pieces of the cpu backend's unit suites (test_cpu_*.c): a cpu_ctx
 * wired to libkiln's own status and dequantization functions, tensor and
 * node builders, naive float64 reference implementations of every op
 * (written from the definitions in kiln/graph.h, independently of
 * backends/cpu), and per-token-position comparisons.
 *
 * Include after <cmocka.h> and its prerequisites. */
#ifndef KILN_TEST_CPU_COMMON_H
#define KILN_TEST_CPU_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/graph.h"
#include "kiln/status.h"

#include "cpu_ops.h"

/* A ctx with `threads` workers and the given precision; fails the test if
 * the pool cannot start. Release with kct_ctx_close(). */
void kct_ctx_open(cpu_ctx *ctx, int threads, cpu_precision precision);
void kct_ctx_close(cpu_ctx *ctx);

/* A tensor [ne0, ne1] of `type` with nbytes from the type's row size. */
kiln_tensor kct_tensor(int32_t id, kiln_type type, kiln_tensor_role role, int64_t ne0,
                       int64_t ne1, const char *name);

/* A node with op, name and sources (NULL-terminated varargs are avoided:
 * pass up to three, NULL for none). */
kiln_node kct_node(kiln_op op, const char *name, const kiln_tensor *s0, const kiln_tensor *s1,
                   const kiln_tensor *s2, const kiln_tensor *dst);

/* Runs `node` on the ctx; the test fails with the status message on error. */
void kct_run_ok(const cpu_ctx *ctx, const kiln_node *node, const void *s0, const void *s1,
                const void *s2, void *dst, int32_t n_tokens, int32_t pos0);
/* Same, returning the status (for error tests). */
kiln_status kct_run(const cpu_ctx *ctx, const kiln_node *node, const void *s0, const void *s1,
                    const void *s2, void *dst, int32_t n_tokens, int32_t pos0);

/* Deterministic pseudo-random values (xorshift), uniform in [lo, hi). */
typedef struct kct_rng {
  uint64_t s;
} kct_rng;
kct_rng kct_rng_new(uint64_t seed);
double kct_uniform(kct_rng *r, double lo, double hi);
void kct_fill(kct_rng *r, float *x, int64_t n, double lo, double hi);
/* malloc or fail the test. */
void *kct_alloc(size_t n);

/* Weight bytes of `type` for the f32 matrix w [K, N] (kiln_quantize row by
 * row), malloc'd; *out_nbytes set. */
void *kct_make_weight(kiln_type type, const float *w, int64_t K, int64_t N, uint64_t *out_nbytes);
/* The f32 values the weight bytes decode to (kiln_dequantize), malloc'd. */
float *kct_dequant_weight(kiln_type type, const void *bytes, int64_t K, int64_t N);

/* ---- float64 references ---- */

void kct_ref_rms_norm(const float *x, const float *w, int64_t L, int64_t rows, float eps,
                      double *y);
void kct_ref_mul_mat(const float *w, const float *x, const float *bias, int64_t K, int64_t N,
                     int64_t T, double *y);
void kct_ref_rope(const float *x, int64_t T, int32_t pos0, const kiln_rope_params *p, double *y);
void kct_ref_attention(const float *q, const float *kc, const float *vc, int64_t T, int32_t pos0,
                       const kiln_attention_params *p, double *y);
void kct_ref_swiglu(const float *a, const float *b, int64_t n, double *y);

/* ---- comparisons, per token position (column of width W) ---- */

typedef struct kct_metrics {
  double cosine;     /* of test and reference */
  double norm_ratio; /* ||test|| / ||ref|| */
  double rel_l2;     /* ||test - ref|| / ||ref|| */
  double max_abs;    /* max |test - ref| */
} kct_metrics;

kct_metrics kct_compare(const float *test, const double *ref, int64_t n);

/* For each of the T columns: |norm_ratio - 1| <= tol, rel_l2 <= tol,
 * cosine >= 1 - tol. Fails naming `what`, the column and the metrics. */
void kct_assert_close(const char *what, const float *test, const double *ref, int64_t W,
                      int64_t T, double tol);

/* The f64 check: every element within one f32 ulp of the reference (what
 * rounding a double result once to f32 can give) plus abs_floor (for
 * elements that cancel to about zero); and the per-column checks above at
 * 2^-23. */
void kct_assert_rounded(const char *what, const float *test, const double *ref, int64_t W,
                        int64_t T, double abs_floor);

#endif
