/* cpu backend, RMS_NORM: ε is used exactly as given (the defect DESIGN.md
 * is built against), per-head rows for qwen3's q_norm/k_norm, and every
 * shape against the float64 reference in both precisions. */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln/half.h"
#include "testutil.h"

#include "test_cpu_common.h"

static double rms_of(const float *y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += (double)y[i] * y[i];
  return sqrt(s / (double)n);
}

/* A 3584-wide row of ±1e-3 has mean square 1e-6, the size of a ChatML
 * special token's embedding in Qwen2.5. The output RMS is then
 * sqrt(ms / (ms + eps)): 0.70711 for eps = 1e-6, 0.30151 for 1e-5. An ε
 * baked in from another model shows up here as the wrong number. */
static void check_eps_row(cpu_precision prec) {
  const int64_t W = 3584;
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 2, prec);
  float *x = kct_alloc(W * sizeof(float)), *w = kct_alloc(W * sizeof(float));
  float *y = kct_alloc(W * sizeof(float));
  for (int64_t i = 0; i < W; i++) {
    x[i] = (i % 3 == 0) ? -1e-3f : 1e-3f;
    w[i] = 1.0f;
  }
  kiln_tensor tx = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, 1, "embd");
  kiln_tensor tw = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_WEIGHT, W, 1, "blk.0.attn_norm.weight");
  kiln_tensor ty = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, 1, "attn_norm-0");
  kiln_node node = kct_node(KILN_OP_RMS_NORM, "blk.0.attn_norm", &tx, &tw, NULL, &ty);

  static const struct { float eps; double want; } cases[] = {
      {1e-6f, 0.70711}, /* 1/sqrt(2) */
      {1e-5f, 0.30151}, /* sqrt(1e-6 / 1.1e-5) */
  };
  for (size_t c = 0; c < 2; c++) {
    node.p.rms_norm.eps = cases[c].eps;
    kct_run_ok(&ctx, &node, x, w, NULL, y, 1, 0);
    double got = rms_of(y, W);
    if (fabs(got / cases[c].want - 1.0) > 1e-4)
      fail_msg("precision %s, eps %g: output RMS %.6f, want %.5f", prec ? "f64" : "f32",
               (double)cases[c].eps, got, cases[c].want);
  }
  free(x);
  free(w);
  free(y);
  kct_ctx_close(&ctx);
}

static void test_eps_exact_f32(void **state) { check_eps_row(CPU_PRECISION_F32); }
static void test_eps_exact_f64(void **state) { check_eps_row(CPU_PRECISION_F64); }

/* src0 [L*groups, T], weight [L] of type wtype, against the reference. */
static void check_shape(cpu_precision prec, int64_t L, int64_t groups, int64_t T, float eps,
                        kiln_type wtype, uint64_t seed) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 3, prec);
  const int64_t W = L * groups;
  const int64_t cap = T + 2; /* capacity beyond the step: only T columns are used */
  kct_rng rng = kct_rng_new(seed);
  float *x = kct_alloc((size_t)(W * cap) * sizeof(float));
  float *w = kct_alloc((size_t)L * sizeof(float));
  float *y = kct_alloc((size_t)(W * cap) * sizeof(float));
  double *ref = kct_alloc((size_t)(W * T) * sizeof(double));
  kct_fill(&rng, x, W * cap, -2.0, 2.0);
  kct_fill(&rng, w, L, 0.5, 1.5);
  uint64_t wbytes;
  void *wdata = kct_make_weight(wtype, w, L, 1, &wbytes);
  float *wvals = kct_dequant_weight(wtype, wdata, L, 1);

  kiln_tensor tx = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, cap, "q");
  kiln_tensor tw = kct_tensor(1, wtype, KILN_ROLE_WEIGHT, L, 1, "blk.0.attn_q_norm.weight");
  kiln_tensor ty = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, cap, "q_normed");
  kiln_node node = kct_node(KILN_OP_RMS_NORM, "blk.0.attn_q_norm", &tx, &tw, NULL, &ty);
  node.p.rms_norm.eps = eps;
  kct_run_ok(&ctx, &node, x, wdata, NULL, y, (int32_t)T, 5);
  kct_ref_rms_norm(x, wvals, L, T * groups, eps, ref);

  char what[128];
  snprintf(what, sizeof what, "rms_norm L=%lld groups=%lld T=%lld %s weight, %s", (long long)L,
           (long long)groups, (long long)T, kiln_type_name(wtype), prec ? "f64" : "f32");
  if (prec == CPU_PRECISION_F64) kct_assert_rounded(what, y, ref, W, T, 0.0);
  else kct_assert_close(what, y, ref, W, T, 1e-5);

  /* In place (dst = src0) gives the same values. */
  float *y2 = kct_alloc((size_t)(W * cap) * sizeof(float));
  memcpy(y2, x, (size_t)(W * cap) * sizeof(float));
  KT_ASSERT_OK(kct_run(&ctx, &node, y2, wdata, NULL, y2, (int32_t)T, 0));
  assert_memory_equal(y2, y, (size_t)(W * T) * sizeof(float));

  free(y2);
  free(wvals);
  free(wdata);
  free(ref);
  free(y);
  free(w);
  free(x);
  kct_ctx_close(&ctx);
}

static void test_model_norm_shapes(void **state) {
  for (int p = 0; p < 2; p++) {
    cpu_precision prec = (cpu_precision)p;
    check_shape(prec, 3584, 1, 1, 1e-6f, KILN_TYPE_F32, 1);
    check_shape(prec, 4096, 1, 7, 1e-5f, KILN_TYPE_F32, 2);
    check_shape(prec, 67, 1, 7, 1e-6f, KILN_TYPE_F32, 3); /* odd width: lane tail */
    check_shape(prec, 5, 1, 1, 1e-5f, KILN_TYPE_F32, 4);  /* shorter than one lane group */
    check_shape(prec, 288, 1, 7, 1e-5f, KILN_TYPE_F16, 5);
    check_shape(prec, 288, 1, 3, 1e-6f, KILN_TYPE_BF16, 6);
  }
}

/* qwen3's q_norm/k_norm: src0 [head_dim * n_head, T], weight [head_dim];
 * each head of each token is its own row. */
static void test_per_head_rows(void **state) {
  for (int p = 0; p < 2; p++) {
    check_shape((cpu_precision)p, 16, 4, 3, 1e-6f, KILN_TYPE_F32, 7);
    check_shape((cpu_precision)p, 128, 8, 7, 1e-6f, KILN_TYPE_F32, 8);
    check_shape((cpu_precision)p, 128, 2, 1, 1e-6f, KILN_TYPE_F32, 9);
  }
}

/* The per-head case is really per head: scaling one head of the input
 * leaves the other heads' outputs unchanged (a whole-row norm would not). */
static void test_per_head_independent(void **state) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 1, CPU_PRECISION_F32);
  float x[64], x2[64], w[16], y[64], y2[64];
  kct_rng rng = kct_rng_new(11);
  kct_fill(&rng, x, 64, -1, 1);
  kct_fill(&rng, w, 16, 0.5, 1.5);
  memcpy(x2, x, sizeof x);
  for (int i = 16; i < 32; i++) x2[i] *= 100.0f;
  kiln_tensor tx = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 64, 1, "k");
  kiln_tensor tw = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_WEIGHT, 16, 1, "k_norm.weight");
  kiln_tensor ty = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 64, 1, "k_normed");
  kiln_node node = kct_node(KILN_OP_RMS_NORM, "blk.1.attn_k_norm", &tx, &tw, NULL, &ty);
  node.p.rms_norm.eps = 1e-6f;
  kct_run_ok(&ctx, &node, x, w, NULL, y, 1, 0);
  kct_run_ok(&ctx, &node, x2, w, NULL, y2, 1, 0);
  assert_memory_equal(y, y2, 16 * sizeof(float));
  assert_memory_equal(y + 32, y2 + 32, 32 * sizeof(float));
  kct_ctx_close(&ctx);
}

static void test_bad_nodes(void **state) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 1, CPU_PRECISION_F32);
  kiln_tensor tx = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 100, 4, "x");
  kiln_tensor tw = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_WEIGHT, 16, 1, "norm.weight");
  kiln_tensor ty = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 100, 4, "y");
  kiln_node node = kct_node(KILN_OP_RMS_NORM, "blk.9.ffn_norm", &tx, &tw, NULL, &ty);
  node.p.rms_norm.eps = 1e-6f;
  /* 100 is not a multiple of 16 */
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "blk.9.ffn_norm");
  tw = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_WEIGHT, 100, 1, "norm.weight");
  KT_ASSERT_OK(cpu_node_validate(&ctx, &node));
  node.p.rms_norm.eps = -1e-6f;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "eps");
  node.p.rms_norm.eps = NAN;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "eps");
  /* ε = 0 divides an all-zero row by zero; models' ε is > 0 (model_hparams.c) */
  node.p.rms_norm.eps = 0.0f;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT,
                "eps 0 must be finite and > 0");
  node.p.rms_norm.eps = 1e-6f;
  /* a step wider than the activation's capacity */
  float buf[400] = {0}, wb[100] = {0};
  KT_ASSERT_ERR(kct_run(&ctx, &node, buf, wb, NULL, buf, 5, 0), KILN_STATUS_OUT_OF_RANGE,
                "blk.9.ffn_norm");
  /* a Q8_0 norm weight of 100 values is not whole blocks */
  tw = kct_tensor(1, KILN_TYPE_Q8_0, KILN_ROLE_WEIGHT, 96, 1, "norm.weight");
  tw.ne[0] = 100;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "block");
  /* an I32 weight is not a type the op takes */
  tw = kct_tensor(1, KILN_TYPE_I32, KILN_ROLE_WEIGHT, 100, 1, "norm.weight");
  KT_ASSERT_ERR(cpu_node_supports(&ctx, &node), KILN_STATUS_UNSUPPORTED, "I32");
  kct_ctx_close(&ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_eps_exact_f32),
      cmocka_unit_test(test_eps_exact_f64),
      cmocka_unit_test(test_model_norm_shapes),
      cmocka_unit_test(test_per_head_rows),
      cmocka_unit_test(test_per_head_independent),
      cmocka_unit_test(test_bad_nodes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
