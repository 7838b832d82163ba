/* The decode step captured as a CUDA graph and replayed (issue 8): on a
 * synthesized qwen2 (2 layers, hidden 512, 8/2 heads, Q/K/V biases, Q4_K
 * projections and FFN, a tied Q8_0 embedding and output), a prompt of 8
 * tokens and then 64 decode steps, each feeding a fixed token, run twice
 * on each CUDA backend: with [<plugin>] graph = false (every kernel
 * launched every step) and graph = true (the second decode step captured,
 * the 62 after it replayed). The logits of every step must be the same,
 * relative L2 <= 1e-6 and |norm ratio - 1| <= 1e-6 (the same kernels run:
 * 0 in practice). Positions change every step, so a replay that read any
 * position other than from the step block would drift from the first
 * replayed step on. The logits of the graph run are also compared with
 * the cpu backend at f64, at every step, with kiln parity's default
 * thresholds (relative L2 and |norm ratio - 1| <= 1e-3, cosine >= 0.9999):
 * the default activations mode (q16) and fusions keep a whole model
 * within them. And the replay with programmatic dependent launch (pdl =
 * true, the default) must equal one with pdl = false at every step: a
 * kernel that started before its predecessor finished would show here.
 *
 * Built with KILN_TEST_STALE_PLUGIN this is test_gpu_replay_stale: the same
 * 64 steps against tests/plugins/kiln-cuda-stale.so, whose captured step
 * carries the positions it was captured at, as a kernel with a baked
 * position would. It must fail at the first replayed step (`make check`
 * lists it in XFAIL_TESTS); anything else that goes wrong in it (no
 * plugin with a GPU there, a model or session that will not open, a run
 * error) exits 99, a hard error, so it cannot pass for the wrong reason. */
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

#define N_PROMPT 8
#define N_DECODE 64
#define N_VOCAB 512
#define REPLAY_TOL 1e-6

#ifdef KILN_TEST_STALE_PLUGIN
#define TEST_NAME "test_gpu_replay_stale"
static const char *const backends[] = {"cuda-stale"};
#else
#define TEST_NAME "test_gpu_replay"
static const char *const backends[] = {"cuda-serial", "cuda-batched", "cuda-cc120"};
#endif
#define N_BACKENDS (sizeof backends / sizeof backends[0])

/* Stops the stale variant with a hard error: it must fail only on the
 * replay comparison. */
static void hard_error(const char *what, kiln_status st) {
#ifdef KILN_TEST_STALE_PLUGIN
  fprintf(stderr, "%s: %s: %s (a hard error, not the expected failure)\n", TEST_NAME, what,
          st ? kiln_status_message(st) : "");
  exit(99);
#else
  fail_msg("%s: %s", what, st ? kiln_status_message(st) : "");
#endif
}

#define CHECK_OK(what, expr)                                                  \
  do {                                                                        \
    kiln_status st_ = (expr);                                                 \
    if (st_) hard_error(what, st_);                                           \
  } while (0)

typedef struct fixture {
  char *dir, *path;
  kiln_model *m;
  int32_t ids[N_PROMPT + N_DECODE];
} fixture;

static fixture fx;

static int write_model(void **state) {
  (void)state;
  fx.dir = kt_mkdtemp("replay");
  fx.path = kg_alloc(4096);
  snprintf(fx.path, 4096, "%s/qwen2-replay.gguf", fx.dir);
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_QWEN2);
  o.n_layer = 2;
  o.n_embd = 512;
  o.n_ff = 1024;
  o.n_head = 8;
  o.n_head_kv = 2;
  o.n_ctx = 256;
  o.n_vocab = N_VOCAB;
  o.eps = 1e-6f;
  o.rope_theta = 1000000.0f;
  o.matrix_type = KILN_TYPE_Q4_K;
  o.embd_type = KILN_TYPE_Q8_0;
  o.tied_output = true;
  o.seed = 64;
  CHECK_OK("synthesizing the model", kiln_synth_write(&o, fx.path));
  CHECK_OK("opening the model", kiln_model_open(fx.path, &fx.m));
  for (int i = 0; i < N_PROMPT + N_DECODE; i++) fx.ids[i] = (int32_t)((7 * i + 3) % N_VOCAB);
  return 0;
}

/* Logits of every decode step [N_DECODE, N_VOCAB] on `backend` with the
 * given graph and pdl settings. */
static float *run_with(kiln_runtime *rt, const char *backend, bool graph, bool pdl) {
  kiln_config_override ov[] = {{backend, "graph", graph ? "true" : "false", "test"},
                               {backend, "pdl", pdl ? "true" : "false", "test"}};
  kiln_session_options so = {.backend = backend,
                             .n_ctx = N_PROMPT + N_DECODE + 8,
                             .fallback_cpu = 0,
                             .overrides = ov,
                             .n_overrides = strcmp(backend, "cpu") ? 2 : 0};
  kiln_session *s = NULL;
  CHECK_OK("opening a session", kiln_session_open(rt, fx.m, &so, &s));
  float *logits = kg_alloc((size_t)N_DECODE * N_VOCAB * sizeof(float));
  CHECK_OK("the prompt", kiln_session_eval(s, fx.ids, N_PROMPT, NULL, NULL));
  for (int i = 0; i < N_DECODE; i++)
    CHECK_OK("a decode step",
             kiln_session_eval(s, &fx.ids[N_PROMPT + i], 1, logits + (size_t)i * N_VOCAB, NULL));
  kiln_session_free(s);
  return logits;
}

static float *run(kiln_runtime *rt, const char *backend, bool graph) {
  return run_with(rt, backend, graph, true);
}

static void test_replay_64_steps(void **state) {
  kiln_config_override fb[] = {{"backend", "fallback", "error", "test"}};
  kiln_runtime *rt = kg_runtime(fb, 1);
  int bad = 0;
#ifndef KILN_TEST_STALE_PLUGIN
  float *ref = run(rt, "cpu", false);
#endif
  for (size_t b = 0; b < N_BACKENDS; b++) {
    float *plain = run(rt, backends[b], false), *replayed = run(rt, backends[b], true);
    int first_bad = -1, n_bad = 0, parity_bad = 0;
    double worst = 0;
#ifndef KILN_TEST_STALE_PLUGIN
    double worst_parity = 0, min_cos = 1;
#endif
    for (int i = 0; i < N_DECODE; i++) {
      const float *p = plain + (size_t)i * N_VOCAB, *r = replayed + (size_t)i * N_VOCAB;
      kg_metrics m = kg_compare(r, p, N_VOCAB);
      if (!kg_close(&m, REPLAY_TOL)) {
        n_bad++;
        if (first_bad < 0) first_bad = i;
      }
      if (!(m.rel_l2 <= worst)) worst = m.rel_l2;
#ifndef KILN_TEST_STALE_PLUGIN
      kg_metrics q = kg_compare(r, ref + (size_t)i * N_VOCAB, N_VOCAB);
      if (!kg_close(&q, 1e-3) || !(q.cosine >= 0.9999)) parity_bad++;
      if (!(q.rel_l2 <= worst_parity)) worst_parity = q.rel_l2;
      if (q.cosine < min_cos) min_cos = q.cosine;
#endif
    }
    printf("%-12s graph replay vs every-kernel run, %d decode steps: max rel L2 %.3e, %d steps "
           "off%s%d%s\n",
           backends[b], N_DECODE, worst, n_bad, first_bad >= 0 ? " (the first: step " : "",
           first_bad, first_bad >= 0 ? ")" : "");
#ifndef KILN_TEST_STALE_PLUGIN
    printf("%-12s graph replay vs cpu f64, every step: max rel L2 %.3e, min cosine %.6f, %d steps "
           "outside parity's default thresholds\n",
           backends[b], worst_parity, min_cos, parity_bad);
#endif
    /* programmatic dependent launch changes when kernels are scheduled,
     * never what they compute: every kernel waits for the one before */
    float *serialized = run_with(rt, backends[b], true, false);
    int pdl_bad = 0;
    double worst_pdl = 0;
    for (int i = 0; i < N_DECODE; i++) {
      kg_metrics m = kg_compare(replayed + (size_t)i * N_VOCAB, serialized + (size_t)i * N_VOCAB,
                                N_VOCAB);
      if (!kg_close(&m, REPLAY_TOL)) pdl_bad++;
      if (!(m.rel_l2 <= worst_pdl)) worst_pdl = m.rel_l2;
    }
    printf("%-12s graph replay, pdl = true vs false: max rel L2 %.3e, %d steps off\n", backends[b],
           worst_pdl, pdl_bad);
    free(serialized);
    bad += n_bad + parity_bad + pdl_bad;
    free(plain);
    free(replayed);
  }
#ifndef KILN_TEST_STALE_PLUGIN
  free(ref);
#endif
  kiln_runtime_free(rt);
  assert_int_equal(bad, 0);
}

/* SKIP (77) without the plugins' device, unless KILN_REQUIRE_GPU=1; the
 * stale variant's plugin missing where a GPU is: a hard error. */
static int gate(void) {
#ifdef KILN_TEST_STALE_PLUGIN
  /* its plugin lives among the test plugins */
  const char *builddir = getenv("KILN_BUILDDIR"), *path = getenv("KILN_PLUGIN_PATH");
  if (builddir) {
    char *p = kg_alloc(8192);
    snprintf(p, 8192, "%s/tests/plugins/.libs%s%s", builddir, path ? ":" : "", path ? path : "");
    setenv("KILN_PLUGIN_PATH", p, 1);
    free(p);
  }
  int g = kg_gate(TEST_NAME);
  if (g) return g == 77 ? 77 : 99; /* never the expected failure */
  kiln_plugin_registry *r = NULL;
  kiln_status st = kiln_plugin_registry_new(getenv("KILN_PLUGIN_PATH"), &r);
  kiln_plugin *pl = NULL;
  kiln_probe_info info = {0};
  if (!st) st = kiln_plugin_registry_get(r, "cuda-stale", &pl);
  if (!st) st = kiln_plugin_probe(pl, &info);
  if (st || !info.available) {
    fprintf(stderr, "%s: the GPU is there but kiln-cuda-stale.so is not usable: %s\n", TEST_NAME,
            st ? kiln_status_message(st) : info.reason);
    kiln_status_free(st);
    kiln_plugin_registry_free(r);
    return 99;
  }
  kiln_plugin_registry_free(r);
  return 0;
#else
  return kg_gate(TEST_NAME);
#endif
}

static int teardown(void **state) {
  kiln_model_free(fx.m);
  if (fx.dir) kt_rm_rf(fx.dir);
  free(fx.dir);
  free(fx.path);
  return 0;
}

int main(void) {
  int g = gate();
  if (g) return g;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_replay_64_steps)};
  return cmocka_run_group_tests(tests, write_model, teardown);
}
