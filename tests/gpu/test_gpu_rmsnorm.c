/* The defect at the top of DESIGN.md, on the GPU: RMSNorm with ε = 1e-6 on
 * 3584-wide rows of mean-square 1.05e-6 (the embedding rows of CONTROL
 * tokens, as in Qwen's ChatML) must have the L2 norm of the float64
 * reference within 1e-3 relative, on every CUDA backend and on both
 * prefill paths (a batch of one token: the decode path; a batch of the
 * whole prompt: cuda-batched's and cuda-cc120's batched path, cuda-serial's
 * token loop), also when a model with ε = 1e-5 at the same width was
 * planned and run first in the same process (its session still open).
 *
 * The models are synthetic llama files (kiln_synth_write) with the
 * stories260K vocabulary, whose <unk>, <s> and </s> rows get mean-square
 * 1.05e-6; the observer captures blk.0.attn_norm's output per position and
 * the reference is computed here in double from the embedding row and the
 * norm weight read from the GGUF. */
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
#include "kiln/gguf.h"
#include "kiln/synth.h"
#include "testutil.h"

#define WIDTH 3584
#define SPECIAL_MS 1.05e-6
#define N_PROMPT 6

/* BOS and EOS are CONTROL (mean-square 1.05e-6), the rest ordinary rows. */
static const int32_t prompt[N_PROMPT] = {1, 403, 2, 407, 1, 261};

typedef struct capture {
  float *out; /* [WIDTH, N_PROMPT] */
  int seen;
} capture;

static kiln_status observe(const kiln_node *node, const float *data, int32_t n_tokens,
                           int32_t pos0, void *user) {
  capture *c = user;
  if (strcmp(node->name, "blk.0.attn_norm") != 0) return NULL;
  for (int32_t t = 0; t < n_tokens && pos0 + t < N_PROMPT; t++)
    memcpy(c->out + (size_t)(pos0 + t) * WIDTH, data + (size_t)t * WIDTH, WIDTH * sizeof(float));
  c->seen += n_tokens;
  return NULL;
}

static char *write_model(const char *dir, float eps) {
  char *vocab = kt_model_path("stories260K.gguf");
  char *path = kg_alloc(4096);
  snprintf(path, 4096, "%s/width3584-eps%g.gguf", dir, (double)eps);
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_LLAMA);
  o.n_layer = 1;
  o.n_embd = WIDTH;
  o.n_ff = 512;
  o.n_head = 28;
  o.n_head_kv = 4;
  o.eps = eps;
  o.matrix_type = KILN_TYPE_Q8_0;
  o.embd_type = KILN_TYPE_F32;
  o.tied_output = true;
  o.vocab_from = vocab;
  o.special_ms = SPECIAL_MS;
  o.seed = 3584;
  KT_ASSERT_OK(kiln_synth_write(&o, path));
  free(vocab);
  return path;
}

/* The f64 reference of blk.0.attn_norm for the prompt, and each row's
 * mean-square, from the file's own bytes. */
static void reference(const char *path, float eps, double *ref, double *ms) {
  kiln_gguf *g;
  KT_ASSERT_OK(kiln_gguf_open(path, &g));
  const kiln_gguf_tensor *e = kiln_gguf_find_tensor(g, "token_embd.weight");
  const kiln_gguf_tensor *w = kiln_gguf_find_tensor(g, "blk.0.attn_norm.weight");
  assert_non_null(e);
  assert_non_null(w);
  assert_int_equal(e->type, KILN_TYPE_F32);
  assert_int_equal(w->type, KILN_TYPE_F32);
  const float *wv = w->data;
  for (int t = 0; t < N_PROMPT; t++) {
    const float *x = (const float *)e->data + (size_t)prompt[t] * WIDTH;
    double ss = 0;
    for (int i = 0; i < WIDTH; i++) ss += (double)x[i] * x[i];
    ms[t] = ss / WIDTH;
    double scale = 1.0 / sqrt(ms[t] + (double)eps);
    for (int i = 0; i < WIDTH; i++) ref[(size_t)t * WIDTH + i] = (double)x[i] * scale * wv[i];
  }
  kiln_gguf_close(g);
}

typedef struct run {
  kiln_model *m;
  kiln_session *s;
  capture c;
} run;

/* Opens a session of `batch` on backend and evaluates the prompt in one
 * call (micro-batches of `batch`), capturing attn_norm. The session stays
 * open (the caller frees it). */
static void run_model(kiln_runtime *rt, const char *path, const char *backend, int32_t batch,
                      run *r) {
  KT_ASSERT_OK(kiln_model_open(path, &r->m));
  kiln_session_options so = {.backend = backend, .n_ctx = 32, .batch = batch, .fallback_cpu = 0};
  KT_ASSERT_OK(kiln_session_open(rt, r->m, &so, &r->s));
  r->c.out = kg_alloc((size_t)WIDTH * N_PROMPT * sizeof(float));
  r->c.seen = 0;
  kiln_plan_set_observer(kiln_session_plan(r->s), observe, &r->c);
  KT_ASSERT_OK(kiln_session_eval(r->s, prompt, N_PROMPT, NULL, NULL));
  assert_int_equal(r->c.seen, N_PROMPT);
}

static void run_free(run *r) {
  kiln_session_free(r->s);
  kiln_model_free(r->m);
  free(r->c.out);
}

/* Checks every position; returns the number failing. */
static int check(const char *label, const run *r, const double *ref, const double *ms) {
  int bad = 0;
  for (int t = 0; t < N_PROMPT; t++) {
    kg_metrics m = kg_compare_f64(r->c.out + (size_t)t * WIDTH, ref + (size_t)t * WIDTH, WIDTH);
    bool ok = m.finite && fabs(m.norm_ratio - 1.0) <= 1e-3 && m.rel_l2 <= 1e-3;
    printf("  %-40s pos %d (token %3d, ms %.3e): norm ratio %.7f, rel L2 %.3e, cosine %.9f%s\n",
           label, t, prompt[t], ms[t], m.norm_ratio, m.rel_l2, m.cosine, ok ? "" : "  FAIL");
    if (!ok) bad++;
  }
  return bad;
}

static void test_eps_on_every_path(void **state) {
  char *dir = kt_mkdtemp("gpu-rmsnorm");
  char *p5 = write_model(dir, 1e-5f), *p6 = write_model(dir, 1e-6f);
  double *ref5 = kg_alloc((size_t)WIDTH * N_PROMPT * sizeof(double));
  double *ref6 = kg_alloc((size_t)WIDTH * N_PROMPT * sizeof(double));
  double ms[N_PROMPT];
  reference(p5, 1e-5f, ref5, ms);
  reference(p6, 1e-6f, ref6, ms);
  for (int t = 0; t < N_PROMPT; t++)
    if (prompt[t] == 1 || prompt[t] == 2) assert_true(fabs(ms[t] - SPECIAL_MS) < 1e-9);
  kiln_runtime *rt = kg_runtime(NULL, 0);
  int bad = 0;
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    const int32_t batches[2] = {1, N_PROMPT};
    for (int pi = 0; pi < 2; pi++) {
      char label[96];
      run r5, r6;
      run_model(rt, p5, kg_backends[b], batches[pi], &r5);
      snprintf(label, sizeof label, "%s batch %d eps 1e-5 (first)", kg_backends[b], batches[pi]);
      bad += check(label, &r5, ref5, ms);
      /* planned after the 1e-5 model, in the same process, its session open */
      run_model(rt, p6, kg_backends[b], batches[pi], &r6);
      snprintf(label, sizeof label, "%s batch %d eps 1e-6 (after 1e-5)", kg_backends[b],
               batches[pi]);
      bad += check(label, &r6, ref6, ms);
      run_free(&r6);
      run_free(&r5);
    }
  }
  /* The cpu reference backend sees the same (a check of the check). */
  run rc;
  run_model(rt, p6, "cpu", N_PROMPT, &rc);
  bad += check("cpu f64 eps 1e-6", &rc, ref6, ms);
  run_free(&rc);
  kiln_runtime_free(rt);
  free(ref5);
  free(ref6);
  free(p5);
  free(p6);
  kt_rm_rf(dir);
  free(dir);
  assert_int_equal(bad, 0);
}

int main(void) {
  int gate = kg_gate("test_gpu_rmsnorm");
  if (gate) return gate;
  if (!kt_have_model("stories260K.gguf")) return kt_require_gpu() ? 1 : 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_eps_on_every_path),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
