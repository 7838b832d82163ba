/* cpu backend, ATTENTION: causal masking, GQA head mapping, pos0 > 0, and
 * raw q.k of 115200 (Qwen's special tokens) staying finite, against the
 * float64 reference. Cache columns past the last valid position hold NaN,
 * so reading one would poison the output. */
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

typedef struct attn_case {
  int32_t hd, nh, nkv, T, pos0, n_ctx;
  float *q, *k, *v, *y;
  double *ref;
  kiln_tensor tq, tk, tv, ty;
  kiln_node node;
} attn_case;

static void attn_init(attn_case *c, int32_t hd, int32_t nh, int32_t nkv, int32_t T, int32_t pos0,
                      int32_t n_ctx) {
  c->hd = hd;
  c->nh = nh;
  c->nkv = nkv;
  c->T = T;
  c->pos0 = pos0;
  c->n_ctx = n_ctx;
  const int64_t W = (int64_t)hd * nh, Wkv = (int64_t)hd * nkv;
  c->q = kct_alloc((size_t)(W * T) * sizeof(float));
  c->y = kct_alloc((size_t)(W * T) * sizeof(float));
  c->ref = kct_alloc((size_t)(W * T) * sizeof(double));
  c->k = kct_alloc((size_t)(Wkv * n_ctx) * sizeof(float));
  c->v = kct_alloc((size_t)(Wkv * n_ctx) * sizeof(float));
  for (int64_t i = (int64_t)(pos0 + T) * Wkv; i < Wkv * n_ctx; i++) c->k[i] = c->v[i] = NAN;
  c->tq = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "Qcur-4");
  c->tk = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_STATE, Wkv, n_ctx, "cache_k_l4");
  c->tv = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_STATE, Wkv, n_ctx, "cache_v_l4");
  c->ty = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "kqv_out-4");
  c->node = kct_node(KILN_OP_ATTENTION, "blk.4.attn", &c->tq, &c->tk, &c->tv, &c->ty);
  c->node.p.attention.n_head = nh;
  c->node.p.attention.n_head_kv = nkv;
  c->node.p.attention.head_dim = hd;
  c->node.p.attention.scale = 1.0f / sqrtf((float)hd);
}

static void attn_fill(attn_case *c, uint64_t seed, double qk_range) {
  kct_rng rng = kct_rng_new(seed);
  const int64_t W = (int64_t)c->hd * c->nh, Wkv = (int64_t)c->hd * c->nkv;
  kct_fill(&rng, c->q, W * c->T, -qk_range, qk_range);
  kct_fill(&rng, c->k, Wkv * (c->pos0 + c->T), -qk_range, qk_range);
  kct_fill(&rng, c->v, Wkv * (c->pos0 + c->T), -1, 1);
}

static void attn_free(attn_case *c) {
  free(c->q);
  free(c->k);
  free(c->v);
  free(c->y);
  free(c->ref);
}

/* On the portable code and, where this CPU has it, the AVX2 code. */
static void attn_check_simd(attn_case *c, cpu_precision prec, cpu_simd simd, double f32_tol,
                            const char *label);
static void attn_check(attn_case *c, cpu_precision prec, double f32_tol, const char *label) {
  attn_check_simd(c, prec, CPU_SIMD_PORTABLE, f32_tol, label);
  if (cpu_simd_detect() == CPU_SIMD_AVX2) attn_check_simd(c, prec, CPU_SIMD_AVX2, f32_tol, label);
}

static void attn_check_simd(attn_case *c, cpu_precision prec, cpu_simd simd, double f32_tol,
                            const char *label) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 3, prec);
  ctx.simd = simd;
  kct_run_ok(&ctx, &c->node, c->q, c->k, c->v, c->y, c->T, c->pos0);
  kct_ref_attention(c->q, c->k, c->v, c->T, c->pos0, &c->node.p.attention, c->ref);
  const int64_t W = (int64_t)c->hd * c->nh;
  for (int64_t i = 0; i < W * c->T; i++)
    if (!isfinite(c->y[i])) fail_msg("%s: output %lld is %g", label, (long long)i, (double)c->y[i]);
  char what[192];
  snprintf(what, sizeof what, "%s: attention hd=%d nh=%d nkv=%d T=%d pos0=%d, %s, %s", label, c->hd,
           c->nh, c->nkv, c->T, c->pos0, prec ? "f64" : "f32", cpu_simd_name(simd));
  if (prec == CPU_PRECISION_F64) kct_assert_rounded(what, c->y, c->ref, W, c->T, 1e-12);
  else kct_assert_close(what, c->y, c->ref, W, c->T, f32_tol);
  kct_ctx_close(&ctx);
}

static void test_shapes(void **state) {
  static const struct { int32_t hd, nh, nkv, T, pos0, n_ctx; } shapes[] = {
      {64, 8, 2, 7, 5, 16},   /* GQA, n_head / n_head_kv = 4, prefill after a prefix */
      {64, 4, 4, 1, 0, 8},    /* MHA, first token */
      {128, 8, 2, 1, 20, 32}, /* GQA decode deep in the cache */
      {24, 6, 3, 7, 0, 7},    /* odd head size, cache exactly full */
      {32, 4, 1, 7, 9, 17},   /* MQA */
      {80, 12, 3, 3, 2, 6},
      {8, 8, 4, 7, 3, 12},    /* stories260K's head size */
  };
  uint64_t seed = 500;
  for (int p = 0; p < 2; p++) {
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      attn_case c;
      attn_init(&c, shapes[s].hd, shapes[s].nh, shapes[s].nkv, shapes[s].T, shapes[s].pos0,
                shapes[s].n_ctx);
      attn_fill(&c, seed++, 1.5);
      attn_check(&c, (cpu_precision)p, 1e-5, "random");
      attn_free(&c);
    }
  }
}

/* GQA mapping: query head h reads KV head h / (n_head / n_head_kv). With V
 * of KV head g set to the constant g and one key, every query head h
 * outputs exactly h / 4 (n_head 8, n_head_kv 2). */
static void test_gqa_mapping(void **state) {
  attn_case c;
  attn_init(&c, 16, 8, 2, 1, 0, 4);
  attn_fill(&c, 600, 1.0);
  for (int g = 0; g < 2; g++)
    for (int d = 0; d < 16; d++) c.v[g * 16 + d] = (float)g;
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 2, CPU_PRECISION_F32);
  kct_run_ok(&ctx, &c.node, c.q, c.k, c.v, c.y, 1, 0);
  for (int h = 0; h < 8; h++)
    for (int d = 0; d < 16; d++) assert_float_equal(c.y[h * 16 + d], (float)(h / 4), 0.0);
  kct_ctx_close(&ctx);
  attn_free(&c);
}

/* Causality: token t of a batch gives the same output as the same token
 * decoded alone at position pos0 + t with the cache filled up to it. */
static void test_batch_equals_decode(void **state) {
  attn_case c;
  attn_init(&c, 32, 4, 2, 7, 3, 10);
  attn_fill(&c, 700, 1.0);
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 2, CPU_PRECISION_F32);
  kct_run_ok(&ctx, &c.node, c.q, c.k, c.v, c.y, 7, 3);
  const int64_t W = 32 * 4;
  for (int t = 0; t < 7; t++) {
    float y1[32 * 4];
    KT_ASSERT_OK(kct_run(&ctx, &c.node, c.q + t * W, c.k, c.v, y1, 1, 3 + t));
    assert_memory_equal(y1, c.y + t * W, sizeof y1);
  }
  kct_ctx_close(&ctx);
  attn_free(&c);
}

/* Raw q.k = 30 * 30 * 128 = 115200 (scaled: 10182): without the max
 * subtraction exp() overflows to inf and the output is NaN. */
static void test_large_logits(void **state) {
  const int32_t hd = 128, nh = 2, nkv = 1, T = 1, pos0 = 5;
  for (int p = 0; p < 2; p++) {
    cpu_precision prec = (cpu_precision)p;
    attn_case c;
    attn_init(&c, hd, nh, nkv, T, pos0, 8);

    /* One dominating key (position 2): the output is its value row. */
    attn_fill(&c, 800, 1.0);
    for (int i = 0; i < hd * nh; i++) c.q[i] = 30.0f;
    for (int d = 0; d < hd; d++) c.k[2 * hd + d] = 30.0f;
    double raw = 0;
    for (int d = 0; d < hd; d++) raw += (double)c.q[d] * c.k[2 * hd + d];
    assert_float_equal(raw, 115200.0, 0.0);
    attn_check(&c, prec, 1e-5, "one key at q.k 115200");
    for (int d = 0; d < hd; d++) assert_float_equal(c.y[d], c.v[2 * hd + d], 1e-6);

    /* Every key at 115200: the softmax is uniform, the output the mean of V. */
    for (int j = 0; j < pos0 + T; j++)
      for (int d = 0; d < hd; d++) c.k[j * hd + d] = 30.0f;
    attn_check(&c, prec, 1e-5, "all keys at q.k 115200");

    /* Keys near 115200 with scores a few units apart: a real softmax at a
     * huge offset. In f64 it must match the reference to the f32 rounding;
     * in f32 the score itself (about 1e4) carries an absolute rounding of
     * about 5e-4, which the exp passes on: hence 1e-3 there. */
    kct_rng rng = kct_rng_new(801);
    for (int j = 0; j < pos0 + T; j++)
      for (int d = 0; d < hd; d++) c.k[j * hd + d] = 30.0f + (float)kct_uniform(&rng, -0.05, 0.05);
    attn_check(&c, prec, 1e-3, "keys near q.k 115200");
    attn_free(&c);
  }
}

static void test_bad_nodes(void **state) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 1, CPU_PRECISION_F32);
  attn_case c;
  attn_init(&c, 16, 6, 4, 2, 0, 4);
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &c.node), KILN_STATUS_INVALID_ARGUMENT,
                "n_head 6 is not a multiple of n_head_kv 4");
  attn_free(&c);

  attn_init(&c, 16, 8, 2, 2, 0, 4);
  KT_ASSERT_OK(cpu_node_validate(&ctx, &c.node));
  c.node.p.attention.head_dim = 8;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &c.node), KILN_STATUS_INVALID_ARGUMENT, "blk.4.attn");
  c.node.p.attention.head_dim = 16;
  c.tv.ne[1] = 3;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &c.node), KILN_STATUS_INVALID_ARGUMENT, "V cache");
  c.tv.ne[1] = 4;
  c.node.p.attention.n_head_kv = 0;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &c.node), KILN_STATUS_INVALID_ARGUMENT, "n_head_kv 0");
  c.node.p.attention.n_head_kv = 2;
  c.node.p.attention.scale = INFINITY;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &c.node), KILN_STATUS_INVALID_ARGUMENT, "scale");
  c.node.p.attention.scale = 0.25f;
  /* positions 3 and 4 of a 4-position cache */
  KT_ASSERT_ERR(kct_run(&ctx, &c.node, c.q, c.k, c.v, c.y, 2, 3), KILN_STATUS_OUT_OF_RANGE,
                "position 4");
  KT_ASSERT_OK(kct_run(&ctx, &c.node, c.q, c.k, c.v, c.y, 2, 2));
  attn_free(&c);
  kct_ctx_close(&ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_gqa_mapping),
      cmocka_unit_test(test_batch_equals_decode),
      cmocka_unit_test(test_large_logits),
      cmocka_unit_test(test_bad_nodes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
