/* KV cache types on every CUDA backend (issue 17): a synthesized llama
 * (2 layers, hidden 512, 8/2 heads of head_dim 64, so Q8_0 blocks are
 * whole heads; F16 projections) runs a prompt of 24 tokens (micro-batches
 * of 16 and 8: the prefill attention kernel, flash on the batched
 * backends, which reads the typed cache too) and 16 decode steps (the
 * split decode kernel, graph capture and replay as configured by default)
 * with [kv_cache] type = f32, f16, bf16 and q8_0, activations f32 so that
 * what is measured is the cache. For every position's logits:
 *   - against cpu with the same KV type at f64 (the same quantized cache,
 *     up to the rounding of values a few ulps apart): relative L2 and
 *     |norm ratio - 1| within same_tol[type];
 *   - against cpu:f64 with f32 KV: within the per-type limits that
 *     tests/unit/test_kv_cache.c measured on the cpu backend (cross_tol).
 * The first layer's K and V caches (kiln_plan_read, converted to f32 as
 * the kernels read them) are compared with cpu's of the same type too.
 * Without a device: SKIP (77), or a failure with KILN_REQUIRE_GPU=1. */
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

#include "gpu_common.h"
#include "kiln/synth.h"
#include "testutil.h"

#define N_PROMPT 24
#define N_DECODE 16
#define N_POS (N_PROMPT + N_DECODE)
#define N_VOCAB 512

static const char *const kv_names[] = {"f32", "f16", "bf16", "q8_0"};
#define N_KV 4
/* Same KV type, GPU against cpu:f64: the caches hold the same values but
 * where a K/V value computed in f32 on the GPU and in f64 on cpu falls on
 * either side of a rounding boundary of the type (a Q8_0 quant, an f16 ulp). */
static const double same_tol[N_KV] = {5e-5, 2e-4, 1e-3, 2e-3};
/* Against cpu:f64 with f32 KV: test_kv_cache's limits for the typed caches; for
 * f32 KV, the GPU's f32 arithmetic alone. */
static const double cross_tol[N_KV] = {5e-5, 2e-3, 1.5e-2, 5e-2};
/* The first layer's caches against cpu's of the same type. */
static const double cache_tol[N_KV] = {1e-5, 1e-3, 4e-3, 1e-2};

typedef struct fixture {
  char *dir, *path;
  kiln_model *m;
  int32_t ids[N_POS];
} fixture;

static fixture fx;

static int write_model(void **state) {
  (void)state;
  fx.dir = kt_mkdtemp("kvtypes");
  fx.path = kg_alloc(4096);
  snprintf(fx.path, 4096, "%s/llama-kv.gguf", fx.dir);
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_LLAMA);
  o.n_layer = 2;
  o.n_embd = 512;
  o.n_ff = 1024;
  o.n_head = 8;
  o.n_head_kv = 2;
  o.head_dim = 64;
  o.n_ctx = 256;
  o.n_vocab = N_VOCAB;
  o.matrix_type = KILN_TYPE_F16;
  o.embd_type = KILN_TYPE_F32;
  o.tied_output = false;
  o.embd_ms = 0.5;
  o.seed = 1717;
  KT_ASSERT_OK(kiln_synth_write(&o, fx.path));
  KT_ASSERT_OK(kiln_model_open(fx.path, &fx.m));
  for (int i = 0; i < N_POS; i++) fx.ids[i] = (int32_t)((11 * i + 5) % N_VOCAB);
  return 0;
}

static int free_model(void **state) {
  (void)state;
  kiln_model_free(fx.m);
  kt_rm_rf(fx.dir);
  free(fx.dir);
  free(fx.path);
  return 0;
}

/* Logits of every position [N_POS, N_VOCAB], and layer 0's K and V caches
 * [2][W, N_POS] in *out_caches. */
static float *run(kiln_runtime *rt, const char *backend, const char *kv, float **out_caches) {
  kiln_config_override ov[] = {{"kv_cache", "type", kv, "test"}};
  kiln_session_options so = {.backend = backend, .n_ctx = N_POS + 8, .batch = 16,
                             .fallback_cpu = 0, .overrides = ov, .n_overrides = 1};
  kiln_session *s = NULL;
  KT_ASSERT_OK(kiln_session_open(rt, fx.m, &so, &s));
  float *logits = kg_alloc((size_t)N_POS * N_VOCAB * sizeof(float));
  KT_ASSERT_OK(kiln_session_eval(s, fx.ids, N_PROMPT, NULL, logits));
  for (int i = N_PROMPT; i < N_POS; i++)
    KT_ASSERT_OK(kiln_session_eval(s, &fx.ids[i], 1, logits + (size_t)i * N_VOCAB, NULL));
  const kiln_hparams *hp = kiln_model_hparams(fx.m);
  const size_t w = (size_t)hp->head_dim * hp->n_head_kv;
  float *c = kg_alloc(2 * w * N_POS * sizeof(float));
  KT_ASSERT_OK(kiln_plan_read(kiln_session_plan(s), kg_graph_tensor(s, "blk.0.cache_k"), 0, N_POS, c));
  KT_ASSERT_OK(kiln_plan_read(kiln_session_plan(s), kg_graph_tensor(s, "blk.0.cache_v"), 0, N_POS,
                              c + w * N_POS));
  kiln_session_free(s);
  *out_caches = c;
  return logits;
}

/* Positions of got outside tol against ref; prints the worst. */
static int compare(const char *what, const float *got, const float *ref, int64_t w, int n, double tol) {
  int bad = 0, at = -1;
  double worst = 0, worst_ratio = 0;
  for (int i = 0; i < n; i++) {
    kg_metrics m = kg_compare(got + (size_t)i * w, ref + (size_t)i * w, w);
    if (!kg_close(&m, tol)) bad++;
    if (!(m.rel_l2 <= worst)) {
      worst = m.rel_l2;
      at = i;
    }
    if (!(fabs(m.norm_ratio - 1.0) <= worst_ratio)) worst_ratio = fabs(m.norm_ratio - 1.0);
  }
  printf("  %-44s worst rel L2 %.3e (position %d), |ratio-1| %.3e, limit %.0e%s\n", what, worst, at,
         worst_ratio, tol, bad ? "  FAIL" : "");
  return bad;
}

static void test_kv_types(void **state) {
  (void)state;
  kiln_config_override fb[] = {{"backend", "fallback", "error", "test"}};
  kiln_runtime *rt = kg_runtime_mode("f32", true, fb, 1);
  const kiln_hparams *hp = kiln_model_hparams(fx.m);
  const int64_t w = (int64_t)hp->head_dim * hp->n_head_kv;
  float *ref_caches[N_KV], *ref[N_KV];
  for (int t = 0; t < N_KV; t++) ref[t] = run(rt, "cpu", kv_names[t], &ref_caches[t]);
  int bad = 0;
  for (int b = 0; b < KG_N_BACKENDS; b++)
    for (int t = 0; t < N_KV; t++) {
      float *caches;
      float *got = run(rt, kg_backends[b], kv_names[t], &caches);
      char what[128];
      printf("%s, KV %s:\n", kg_backends[b], kv_names[t]);
      snprintf(what, sizeof what, "logits vs cpu:f64 KV %s", kv_names[t]);
      bad += compare(what, got, ref[t], N_VOCAB, N_POS, same_tol[t]);
      snprintf(what, sizeof what, "logits vs cpu:f64 KV f32");
      bad += compare(what, got, ref[0], N_VOCAB, N_POS, cross_tol[t]);
      snprintf(what, sizeof what, "blk.0 K and V caches vs cpu KV %s", kv_names[t]);
      bad += compare(what, caches, ref_caches[t], w, 2 * N_POS, cache_tol[t]);
      free(got);
      free(caches);
    }
  for (int t = 0; t < N_KV; t++) {
    free(ref[t]);
    free(ref_caches[t]);
  }
  kiln_runtime_free(rt);
  assert_int_equal(bad, 0);
}

int main(void) {
  int g = kg_gate("test_gpu_kv_types");
  if (g) return g;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_kv_types)};
  return cmocka_run_group_tests(tests, write_model, free_model);
}
