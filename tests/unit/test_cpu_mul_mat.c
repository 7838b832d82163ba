/* cpu backend, MUL_MAT: every weight type kiln reads (quantized with
 * kiln_quantize, decoded for the reference with kiln_dequantize and
 * multiplied in double), with and without a bias, T = 1 and T = 7, odd
 * sizes, in both precisions. */
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

#include "testutil.h"

#include "test_cpu_common.h"

static const kiln_type all_types[] = {KILN_TYPE_F32,  KILN_TYPE_F16,  KILN_TYPE_BF16,
                                      KILN_TYPE_Q8_0, KILN_TYPE_Q4_0, KILN_TYPE_Q5_0,
                                      KILN_TYPE_Q4_K, KILN_TYPE_Q6_K};

/* W [K, N] of wtype times x [K, T] (+ bias [N] of btype, when has_bias). */
static void check(cpu_precision prec, kiln_type wtype, int64_t K, int64_t N, int64_t T,
                  bool has_bias, kiln_type btype, uint64_t seed) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 3, prec);
  const int64_t cap = T + 3;
  kct_rng rng = kct_rng_new(seed);
  float *w = kct_alloc((size_t)(K * N) * sizeof(float));
  float *x = kct_alloc((size_t)(K * cap) * sizeof(float));
  float *b = kct_alloc((size_t)N * sizeof(float));
  float *y = kct_alloc((size_t)(N * cap) * sizeof(float));
  double *ref = kct_alloc((size_t)(N * T) * sizeof(double));
  kct_fill(&rng, w, K * N, -1, 1);
  kct_fill(&rng, x, K * cap, -1, 1);
  kct_fill(&rng, b, N, -0.5, 0.5);
  uint64_t wbytes, bbytes = 0;
  void *wdata = kct_make_weight(wtype, w, K, N, &wbytes);
  float *wvals = kct_dequant_weight(wtype, wdata, K, N);
  void *bdata = has_bias ? kct_make_weight(btype, b, N, 1, &bbytes) : NULL;
  float *bvals = has_bias ? kct_dequant_weight(btype, bdata, N, 1) : NULL;

  kiln_tensor tw = kct_tensor(0, wtype, KILN_ROLE_WEIGHT, K, N, "blk.2.attn_q.weight");
  kiln_tensor tx = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, K, cap, "attn_norm-2");
  kiln_tensor tb = kct_tensor(2, btype, KILN_ROLE_WEIGHT, N, 1, "blk.2.attn_q.bias");
  kiln_tensor ty = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, N, cap, "Qcur-2");
  assert_int_equal(tw.nbytes, wbytes);
  kiln_node node =
      kct_node(KILN_OP_MUL_MAT, "blk.2.attn_q", &tw, &tx, has_bias ? &tb : NULL, &ty);
  kct_run_ok(&ctx, &node, wdata, x, bdata, y, (int32_t)T, 0);
  kct_ref_mul_mat(wvals, x, bvals, K, N, T, ref);

  char what[160];
  snprintf(what, sizeof what, "mul_mat %s [%lld, %lld] x T=%lld%s%s, %s", kiln_type_name(wtype),
           (long long)K, (long long)N, (long long)T, has_bias ? " + bias " : "",
           has_bias ? kiln_type_name(btype) : "", prec ? "f64" : "f32");
  if (prec == CPU_PRECISION_F64) kct_assert_rounded(what, y, ref, N, T, 1e-12);
  else kct_assert_close(what, y, ref, N, T, 1e-5);

  free(bvals);
  free(bdata);
  free(wvals);
  free(wdata);
  free(ref);
  free(y);
  free(b);
  free(x);
  free(w);
  kct_ctx_close(&ctx);
}

static void test_every_type(void **state) {
  uint64_t seed = 100;
  for (int p = 0; p < 2; p++) {
    cpu_precision prec = (cpu_precision)p;
    for (size_t i = 0; i < sizeof all_types / sizeof all_types[0]; i++) {
      kiln_type t = all_types[i];
      check(prec, t, 512, 37, 1, false, KILN_TYPE_F32, seed++);
      check(prec, t, 512, 37, 7, true, KILN_TYPE_F32, seed++);
      check(prec, t, 256, 3, 7, false, KILN_TYPE_F32, seed++);
      check(prec, t, 2048, 64, 2, true, KILN_TYPE_F32, seed++); /* several row blocks */
    }
  }
}

/* Sizes that are not multiples of anything: the lane tails of the dot
 * products, and a weight with fewer rows than threads. */
static void test_odd_sizes(void **state) {
  uint64_t seed = 200;
  static const kiln_type plain[] = {KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16};
  for (int p = 0; p < 2; p++) {
    for (size_t i = 0; i < 3; i++) {
      check((cpu_precision)p, plain[i], 67, 13, 7, true, KILN_TYPE_F32, seed++);
      check((cpu_precision)p, plain[i], 3, 5, 1, false, KILN_TYPE_F32, seed++);
      check((cpu_precision)p, plain[i], 17, 1, 7, true, KILN_TYPE_F32, seed++);
      check((cpu_precision)p, plain[i], 4099, 2, 1, false, KILN_TYPE_F32, seed++);
    }
    /* a bias that is not F32 */
    check((cpu_precision)p, KILN_TYPE_Q8_0, 96, 11, 7, true, KILN_TYPE_F16, seed++);
  }
}

/* An F32 weight that is not 4-byte aligned (not from a GGUF file) gives
 * the same bits as an aligned one. */
static void test_unaligned_f32_weight(void **state) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 2, CPU_PRECISION_F32);
  const int64_t K = 33, N = 9, T = 2;
  kct_rng rng = kct_rng_new(300);
  float w[33 * 9], x[33 * 2], y[9 * 2], y2[9 * 2];
  kct_fill(&rng, w, K * N, -1, 1);
  kct_fill(&rng, x, K * T, -1, 1);
  unsigned char *raw = kct_alloc(sizeof w + 8);
  memcpy(raw + 2, w, sizeof w);
  kiln_tensor tw = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_WEIGHT, K, N, "w");
  kiln_tensor tx = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, K, T, "x");
  kiln_tensor ty = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, N, T, "y");
  kiln_node node = kct_node(KILN_OP_MUL_MAT, "mm", &tw, &tx, NULL, &ty);
  kct_run_ok(&ctx, &node, w, x, NULL, y, T, 0);
  kct_run_ok(&ctx, &node, raw + 2, x, NULL, y2, T, 0);
  assert_memory_equal(y, y2, sizeof y);
  free(raw);
  kct_ctx_close(&ctx);
}

static void test_bad_nodes(void **state) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 1, CPU_PRECISION_F32);
  kiln_tensor tw = kct_tensor(0, KILN_TYPE_Q4_K, KILN_ROLE_WEIGHT, 512, 32, "blk.0.ffn_up.weight");
  kiln_tensor tx = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 512, 4, "x");
  kiln_tensor tb = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_WEIGHT, 32, 1, "b");
  kiln_tensor ty = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 32, 4, "y");
  kiln_node node = kct_node(KILN_OP_MUL_MAT, "blk.0.ffn_up", &tw, &tx, &tb, &ty);
  KT_ASSERT_OK(cpu_node_validate(&ctx, &node));

  tx.ne[0] = 511;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "blk.0.ffn_up");
  tx.ne[0] = 512;
  ty.ne[0] = 31;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "row count 32");
  ty.ne[0] = 32;
  tb.ne[0] = 33;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "bias");
  tb.ne[0] = 32;
  /* K = 500 is not a whole number of Q4_K blocks of 256 */
  tw.ne[0] = tx.ne[0] = 500;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "Q4_K");
  tw.ne[0] = tx.ne[0] = 512;
  /* nbytes too small for the shape */
  tw.nbytes -= 1;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "nbytes");
  tw.nbytes += 1;
  /* a missing source */
  node.src[1] = NULL;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "src1 is missing");
  node.src[1] = &tx;
  /* types the backend does not take */
  tw.type = KILN_TYPE_I32;
  KT_ASSERT_ERR(cpu_node_supports(&ctx, &node), KILN_STATUS_UNSUPPORTED, "I32");
  tw.type = (kiln_type)3; /* ggml's Q4_1: not read by kiln */
  KT_ASSERT_ERR(cpu_node_supports(&ctx, &node), KILN_STATUS_UNSUPPORTED, "id 3");
  tw.type = KILN_TYPE_Q4_K;
  tx.type = KILN_TYPE_F16;
  KT_ASSERT_ERR(cpu_node_supports(&ctx, &node), KILN_STATUS_UNSUPPORTED, "src1");
  tx.type = KILN_TYPE_F32;
  KT_ASSERT_OK(cpu_node_supports(&ctx, &node));

  /* dst overlapping the input is refused at run time, not computed wrong */
  kiln_tensor tw2 = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_WEIGHT, 8, 8, "w");
  kiln_tensor tx2 = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 8, 1, "x");
  kiln_tensor ty2 = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 8, 1, "y");
  kiln_node n2 = kct_node(KILN_OP_MUL_MAT, "mm_inplace", &tw2, &tx2, NULL, &ty2);
  float w[64] = {0}, xy[8] = {0};
  KT_ASSERT_ERR(kct_run(&ctx, &n2, w, xy, NULL, xy, 1, 0), KILN_STATUS_INVALID_ARGUMENT,
                "overlaps");
  kct_ctx_close(&ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_type),
      cmocka_unit_test(test_odd_sizes),
      cmocka_unit_test(test_unaligned_f32_weight),
      cmocka_unit_test(test_bad_nodes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
