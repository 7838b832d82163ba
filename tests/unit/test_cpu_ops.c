/* cpu backend, the small ops: GET_ROWS for every weight type (and token ids
 * out of range), STORE_KV (and positions past the cache), SWIGLU and ADD
 * against the float64 reference, GET_COLUMNS, and the generic node checks. */
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

#include "kiln/dequant.h"
#include "testutil.h"

#include "test_cpu_common.h"

static const kiln_type all_types[] = {KILN_TYPE_F32,  KILN_TYPE_F16,  KILN_TYPE_BF16,
                                      KILN_TYPE_Q8_0, KILN_TYPE_Q4_0, KILN_TYPE_Q5_0,
                                      KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K};

/* GET_ROWS returns exactly kiln_dequantize's values of the chosen rows. */
static void test_get_rows_every_type(void **state) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 2, CPU_PRECISION_F32);
  const int64_t H = 512, V = 50, T = 7, cap = 9;
  const int32_t ids[9] = {0, 49, 7, 7, 23, 1, 48, -5, 1000}; /* past T: never read */
  kct_rng rng = kct_rng_new(900);
  float *table = kct_alloc((size_t)(H * V) * sizeof(float));
  float *y = kct_alloc((size_t)(H * cap) * sizeof(float));
  kct_fill(&rng, table, H * V, -1, 1);
  for (size_t i = 0; i < sizeof all_types / sizeof all_types[0]; i++) {
    kiln_type type = all_types[i];
    uint64_t nbytes;
    void *bytes = kct_make_weight(type, table, H, V, &nbytes);
    float *vals = kct_dequant_weight(type, bytes, H, V);
    kiln_tensor tw = kct_tensor(0, type, KILN_ROLE_WEIGHT, H, V, "token_embd.weight");
    kiln_tensor ti = kct_tensor(1, KILN_TYPE_I32, KILN_ROLE_INPUT, cap, 1, "tokens");
    kiln_tensor ty = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, H, cap, "embd");
    kiln_node node = kct_node(KILN_OP_GET_ROWS, "token_embd", &tw, &ti, NULL, &ty);
    for (int32_t n_tok = 1; n_tok <= T; n_tok += T - 1) {
      memset(y, 0, (size_t)(H * cap) * sizeof(float));
      kct_run_ok(&ctx, &node, bytes, ids, NULL, y, n_tok, 0);
      for (int32_t t = 0; t < n_tok; t++)
        assert_memory_equal(y + t * H, vals + ids[t] * H, (size_t)H * sizeof(float));
    }
    free(vals);
    free(bytes);
  }
  free(y);
  free(table);
  kct_ctx_close(&ctx);
}

/* A token id outside the table is an error naming the node and the id, and
 * leaves dst untouched. */
static void test_get_rows_bad_id(void **state) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 1, CPU_PRECISION_F32);
  float table[4 * 10], y[4 * 3];
  for (int i = 0; i < 40; i++) table[i] = (float)i;
  kiln_tensor tw = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_WEIGHT, 4, 10, "token_embd.weight");
  kiln_tensor ti = kct_tensor(1, KILN_TYPE_I32, KILN_ROLE_INPUT, 3, 1, "tokens");
  kiln_tensor ty = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 4, 3, "embd");
  kiln_node node = kct_node(KILN_OP_GET_ROWS, "token_embd", &tw, &ti, NULL, &ty);
  int32_t ids_hi[3] = {1, 10, 2}, ids_neg[3] = {-1, 0, 0}, ids_ok[3] = {9, 0, 3};
  for (int i = 0; i < 12; i++) y[i] = -7.0f;
  KT_ASSERT_ERR(kct_run(&ctx, &node, table, ids_hi, NULL, y, 3, 0), KILN_STATUS_OUT_OF_RANGE,
                "get_rows node 'token_embd': token id 10");
  KT_ASSERT_ERR(kct_run(&ctx, &node, table, ids_neg, NULL, y, 1, 0), KILN_STATUS_OUT_OF_RANGE,
                "token id -1");
  for (int i = 0; i < 12; i++) assert_float_equal(y[i], -7.0f, 0.0);
  KT_ASSERT_OK(kct_run(&ctx, &node, table, ids_ok, NULL, y, 3, 0));
  assert_float_equal(y[0], 36.0f, 0.0);
  assert_float_equal(y[11], 15.0f, 0.0);
  /* more tokens than the id tensor holds */
  KT_ASSERT_ERR(kct_run(&ctx, &node, table, ids_ok, NULL, y, 4, 0), KILN_STATUS_OUT_OF_RANGE,
                "4 tokens");
  kct_ctx_close(&ctx);
}

static void test_store_kv(void **state) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 1, CPU_PRECISION_F32);
  const int64_t W = 24, n_ctx = 10;
  float cache[24 * 10], x[24 * 7];
  for (int i = 0; i < W * n_ctx; i++) cache[i] = -1.0f;
  for (int i = 0; i < W * 7; i++) x[i] = (float)i;
  kiln_tensor tx = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, 7, "Kcur-3");
  kiln_tensor tc = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_STATE, W, n_ctx, "cache_k_l3");
  kiln_node node = kct_node(KILN_OP_STORE_KV, "blk.3.store_k", &tx, NULL, NULL, &tc);
  kct_run_ok(&ctx, &node, x, NULL, NULL, cache, 7, 2);
  for (int64_t j = 0; j < n_ctx; j++)
    for (int64_t i = 0; i < W; i++) {
      float want = (j >= 2 && j < 9) ? x[(j - 2) * W + i] : -1.0f;
      assert_float_equal(cache[j * W + i], want, 0.0);
    }
  /* the last column, then one past it */
  KT_ASSERT_OK(kct_run(&ctx, &node, x, NULL, NULL, cache, 1, 9));
  KT_ASSERT_ERR(kct_run(&ctx, &node, x, NULL, NULL, cache, 1, 10), KILN_STATUS_OUT_OF_RANGE,
                "blk.3.store_k");
  KT_ASSERT_ERR(kct_run(&ctx, &node, x, NULL, NULL, cache, 2, 9), KILN_STATUS_OUT_OF_RANGE,
                "position 10");
  /* width mismatch */
  tc.ne[0] = 16;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "width");
  kct_ctx_close(&ctx);
}

static void check_swiglu_simd(cpu_precision prec, cpu_simd simd, int64_t W, int64_t T, uint64_t seed) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 3, prec);
  ctx.simd = simd;
  kct_rng rng = kct_rng_new(seed);
  float *a = kct_alloc((size_t)(W * T) * sizeof(float)), *b = kct_alloc((size_t)(W * T) * 4);
  float *y = kct_alloc((size_t)(W * T) * sizeof(float));
  double *ref = kct_alloc((size_t)(W * T) * sizeof(double));
  kct_fill(&rng, a, W * T, -12, 12);
  kct_fill(&rng, b, W * T, -3, 3);
  kiln_tensor ta = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "ffn_gate-0");
  kiln_tensor tb = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "ffn_up-0");
  kiln_tensor ty = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "ffn_swiglu-0");
  kiln_node node = kct_node(KILN_OP_SWIGLU, "blk.0.ffn_swiglu", &ta, &tb, NULL, &ty);
  kct_run_ok(&ctx, &node, a, b, NULL, y, (int32_t)T, 0);
  kct_ref_swiglu(a, b, W * T, ref);
  char what[96];
  snprintf(what, sizeof what, "swiglu W=%lld T=%lld %s %s", (long long)W, (long long)T,
           prec ? "f64" : "f32", cpu_simd_name(simd));
  if (prec == CPU_PRECISION_F64) kct_assert_rounded(what, y, ref, W, T, 0.0);
  else kct_assert_close(what, y, ref, W, T, 1e-6);
  /* in place into the gate */
  KT_ASSERT_OK(kct_run(&ctx, &node, a, b, NULL, a, (int32_t)T, 0));
  assert_memory_equal(a, y, (size_t)(W * T) * sizeof(float));
  free(ref);
  free(y);
  free(b);
  free(a);
  kct_ctx_close(&ctx);
}

static void check_swiglu(cpu_precision prec, int64_t W, int64_t T, uint64_t seed) {
  check_swiglu_simd(prec, CPU_SIMD_PORTABLE, W, T, seed);
  if (cpu_simd_detect() == CPU_SIMD_AVX2) check_swiglu_simd(prec, CPU_SIMD_AVX2, W, T, seed);
}

/* Far from 0: e^200 overflows f32, and silu(-200) must come out as the
 * limit -0, not NaN; silu(200) is 200. Twelve values, so the AVX2 code
 * meets them both in its 8-wide part and in its tail. */
static void test_swiglu_extremes(void **state) {
  for (int p = 0; p < 2; p++)
    for (int simd = 0; simd <= (cpu_simd_detect() == CPU_SIMD_AVX2); simd++) {
      cpu_ctx ctx;
      kct_ctx_open(&ctx, 1, (cpu_precision)p);
      ctx.simd = (cpu_simd)simd;
      float a[12], b[12], y[12];
      for (int i = 0; i < 12; i++) {
        static const float v[4] = {-200.0f, 200.0f, 0.0f, -1e30f};
        a[i] = v[i % 4];
        b[i] = 3.0f;
      }
      kiln_tensor ta = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 12, 1, "gate");
      kiln_tensor tb = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 12, 1, "up");
      kiln_tensor ty = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 12, 1, "y");
      kiln_node node = kct_node(KILN_OP_SWIGLU, "blk.0.ffn_swiglu", &ta, &tb, NULL, &ty);
      kct_run_ok(&ctx, &node, a, b, NULL, y, 1, 0);
      for (int i = 0; i < 12; i += 4) {
        for (int j = 0; j < 4; j++) assert_false(isnan(y[i + j]));
        assert_true(y[i] == 0.0f && signbit(y[i]));
        assert_float_equal(y[i + 1], 600.0f, 0.0);
        assert_true(y[i + 2] == 0.0f);
        assert_true(y[i + 3] == 0.0f);
      }
      kct_ctx_close(&ctx);
    }
}

static void test_swiglu(void **state) {
  for (int p = 0; p < 2; p++) {
    check_swiglu((cpu_precision)p, 1, 1, 1000); /* one element */
    check_swiglu((cpu_precision)p, 67, 7, 1001);
    check_swiglu((cpu_precision)p, 18944, 3, 1002);
  }
}

static void test_add(void **state) {
  for (int p = 0; p < 2; p++) {
    cpu_ctx ctx;
    kct_ctx_open(&ctx, 4, (cpu_precision)p);
    const int64_t W = 4099, T = 7, cap = 8;
    kct_rng rng = kct_rng_new(1100);
    float *a = kct_alloc((size_t)(W * cap) * 4), *b = kct_alloc((size_t)(W * cap) * 4);
    float *y = kct_alloc((size_t)(W * cap) * 4);
    kct_fill(&rng, a, W * cap, -100, 100);
    kct_fill(&rng, b, W * cap, -1e-3, 1e-3);
    for (int64_t i = 0; i < W * cap; i++) y[i] = 12345.0f;
    kiln_tensor ta = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, cap, "inpL");
    kiln_tensor tb = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, cap, "attn_out");
    kiln_tensor ty = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, cap, "ffn_inp");
    kiln_node node = kct_node(KILN_OP_ADD, "blk.0.attn_residual", &ta, &tb, NULL, &ty);
    kct_run_ok(&ctx, &node, a, b, NULL, y, (int32_t)T, 0);
    /* a float sum is correctly rounded: the exact answer is (float)(a + b) */
    for (int64_t i = 0; i < W * T; i++) assert_true(y[i] == (float)((double)a[i] + (double)b[i]));
    /* columns past the step are left alone */
    for (int64_t i = W * T; i < W * cap; i++) assert_true(y[i] == 12345.0f);
    /* in place (residual into src0) */
    KT_ASSERT_OK(kct_run(&ctx, &node, a, b, NULL, a, (int32_t)T, 0));
    assert_memory_equal(a, y, (size_t)(W * T) * sizeof(float));
    /* shape mismatch */
    tb.ne[0] = W - 1;
    KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT,
                  "blk.0.attn_residual");
    free(y);
    free(b);
    free(a);
    kct_ctx_close(&ctx);
  }
}

/* GET_COLUMNS copies the chosen columns exactly, in the order asked, in
 * both precisions; an id outside src0's columns is an error that leaves dst
 * alone; the ids must be an I32 INPUT. */
static void test_get_columns(void **state) {
  for (int p = 0; p < 2; p++) {
    cpu_ctx ctx;
    kct_ctx_open(&ctx, 2, (cpu_precision)p);
    const int64_t W = 896, cap = 6;
    kct_rng rng = kct_rng_new(1200);
    float *x = kct_alloc((size_t)(W * cap) * 4), *y = kct_alloc((size_t)(W * cap) * 4);
    kct_fill(&rng, x, W * cap, -3, 3);
    for (int64_t i = 0; i < W * cap; i++) y[i] = 777.0f;
    int32_t ids[6] = {5, 0, 5, 2, -1, 99}; /* entries past the step are never read */
    kiln_tensor tx = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, cap, "blk.23.ffn_residual");
    kiln_tensor ti = kct_tensor(1, KILN_TYPE_I32, KILN_ROLE_INPUT, cap, 1, "out_ids");
    ti.n_dims = 1;
    kiln_tensor ty = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, cap, "out_columns");
    kiln_node node = kct_node(KILN_OP_GET_COLUMNS, "out_columns", &tx, &ti, NULL, &ty);
    KT_ASSERT_OK(cpu_node_validate(&ctx, &node));
    kct_run_ok(&ctx, &node, x, ids, NULL, y, 4, 0);
    for (int t = 0; t < 4; t++)
      assert_memory_equal(y + t * W, x + ids[t] * W, (size_t)W * sizeof(float));
    for (int64_t i = 4 * W; i < W * cap; i++) assert_true(y[i] == 777.0f);
    /* a column past src0's capacity, or negative: named, dst untouched */
    float *before = kct_alloc((size_t)(W * cap) * 4);
    memcpy(before, y, (size_t)(W * cap) * 4);
    KT_ASSERT_ERR(kct_run(&ctx, &node, x, ids, NULL, y, 5, 0), KILN_STATUS_OUT_OF_RANGE,
                  "column id -1 (entry 4)");
    KT_ASSERT_ERR(kct_run(&ctx, &node, x, ids + 5, NULL, y, 1, 0), KILN_STATUS_OUT_OF_RANGE,
                  "column id 99");
    assert_memory_equal(y, before, (size_t)(W * cap) * 4);
    /* more entries than the ids hold */
    KT_ASSERT_ERR(kct_run(&ctx, &node, x, ids, NULL, y, 7, 0), KILN_STATUS_OUT_OF_RANGE,
                  "column ids src1");
    /* ids that are not an I32 INPUT; widths that differ; dst over src0 */
    ti.role = KILN_ROLE_ACTIVATION;
    KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "I32 INPUT");
    ti.role = KILN_ROLE_INPUT;
    ti.type = KILN_TYPE_F32;
    KT_ASSERT_ERR(cpu_node_supports(&ctx, &node), KILN_STATUS_UNSUPPORTED, "column ids src1");
    ti.type = KILN_TYPE_I32;
    ty.ne[0] = W - 1;
    KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "width");
    ty.ne[0] = W;
    KT_ASSERT_ERR(kct_run(&ctx, &node, x, ids, NULL, x, 1, 0), KILN_STATUS_INVALID_ARGUMENT,
                  "overlaps");
    free(before);
    free(y);
    free(x);
    kct_ctx_close(&ctx);
  }
}

static void test_generic_checks(void **state) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 1, CPU_PRECISION_F32);
  kiln_tensor ta = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 8, 2, "a");
  kiln_tensor tb = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 8, 2, "b");
  kiln_tensor ty = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 8, 2, "y");
  kiln_node node = kct_node(KILN_OP_ADD, "n", &ta, &tb, NULL, &ty);
  KT_ASSERT_OK(cpu_node_supports(&ctx, &node));
  KT_ASSERT_OK(cpu_node_validate(&ctx, &node));
  /* an op id past the table */
  node.op = (kiln_op)KILN_OP_COUNT;
  char past[32];
  snprintf(past, sizeof past, "op id %d", (int)KILN_OP_COUNT);
  KT_ASSERT_ERR(cpu_node_supports(&ctx, &node), KILN_STATUS_UNSUPPORTED, past);
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_UNSUPPORTED, past);
  node.op = KILN_OP_ADD;
  /* an extra source, a missing dst, an F16 activation, a 3-D tensor */
  node.src[2] = &ta;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "src2");
  node.src[2] = NULL;
  node.dst = NULL;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "dst is missing");
  node.dst = &ty;
  tb.type = KILN_TYPE_F16;
  KT_ASSERT_ERR(cpu_node_supports(&ctx, &node), KILN_STATUS_UNSUPPORTED, "F16");
  tb.type = KILN_TYPE_F32;
  ta.ne[2] = 2;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "2-D");
  ta.ne[2] = 1;
  ta.n_dims = 0;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT,
                "src0 'a' has n_dims 0");
  ta.n_dims = 2;
  KT_ASSERT_OK(cpu_node_validate(&ctx, &node));
  /* missing data and bad step numbers at run time */
  float buf[16] = {0};
  KT_ASSERT_ERR(kct_run(&ctx, &node, buf, NULL, NULL, buf, 1, 0), KILN_STATUS_INVALID_ARGUMENT,
                "no buffer for src1");
  KT_ASSERT_ERR(kct_run(&ctx, &node, buf, buf, NULL, buf, 0, 0), KILN_STATUS_INVALID_ARGUMENT,
                "n_tokens 0");
  KT_ASSERT_ERR(kct_run(&ctx, &node, buf, buf, NULL, buf, 1, -1), KILN_STATUS_INVALID_ARGUMENT,
                "pos0 -1");
  KT_ASSERT_ERR(kct_run(&ctx, &node, buf, buf, NULL, buf, 3, 0), KILN_STATUS_OUT_OF_RANGE,
                "3 tokens");
  kct_ctx_close(&ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_get_rows_every_type),
      cmocka_unit_test(test_get_rows_bad_id),
      cmocka_unit_test(test_store_kv),
      cmocka_unit_test(test_swiglu),
      cmocka_unit_test(test_swiglu_extremes),
      cmocka_unit_test(test_add),
      cmocka_unit_test(test_get_columns),
      cmocka_unit_test(test_generic_checks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
