/* No silent wrong numbers from a session (issue 14): logits that are NaN or
 * infinite are an error naming the step and the first node whose output
 * was not finite, never a sampled token; embeddings whose squares overflow
 * f32 (rows of 1e37 and more) still normalize, as ggml's double sum does,
 * instead of coming out as rows of 0 and logits of 0 (once: `<unk>` and
 * exit 0); a context past the model's training context is said, not
 * silent. Synthetic llama models (kiln/synth.h) run on the cpu plugin,
 * compared against the f64 reference by norm ratio and relative L2 per
 * token position. */
#include "config.h"

#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kiln/gguf.h"
#include "kiln/kiln.h"
#include "kiln/synth.h"
#include "testutil.h"

KT_TMPDIR_FIXTURE("numerics")

/* A small untied llama model at dir/name (no vocabulary: sessions take ids). */
static const char *synth(const char *name, uint32_t n_ctx) {
  static char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_LLAMA);
  o.tied_output = false;
  o.n_ctx = n_ctx;
  o.seed = 7;
  KT_ASSERT_OK(kiln_synth_write(&o, path));
  return path;
}

/* Calls edit(values, ne0, ne1) on tensor `name` of the file at path (F32)
 * and writes it back in place. */
static void patch_tensor(const char *path, const char *name,
                         void (*edit)(float *v, int64_t ne0, int64_t ne1)) {
  kiln_gguf *g;
  KT_ASSERT_OK(kiln_gguf_open(path, &g));
  const kiln_gguf_tensor *t = kiln_gguf_find_tensor(g, name);
  assert_non_null(t);
  assert_int_equal(t->type, KILN_TYPE_F32);
  float *v = malloc(t->nbytes);
  memcpy(v, t->data, t->nbytes);
  off_t at = (off_t)(kiln_gguf_data_offset(g) + t->offset);
  size_t nbytes = t->nbytes;
  edit(v, t->ne[0], t->ne[1]);
  kiln_gguf_close(g);
  int fd = open(path, O_WRONLY);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, v, nbytes, at), (ssize_t)nbytes);
  close(fd);
  free(v);
}

static kiln_session *session(kiln_runtime *rt, kiln_model *m, const char *precision, int32_t n_ctx,
                             int32_t batch) {
  kiln_config_override ov[] = {{"cpu", "precision", precision, "test"}};
  kiln_session_options so = {.backend = "cpu", .n_ctx = n_ctx, .batch = batch, .fallback_cpu = 0,
                             .overrides = ov, .n_overrides = 1};
  kiln_session *s;
  KT_ASSERT_OK(kiln_session_open(rt, m, &so, &s));
  return s;
}

static kiln_runtime *runtime(void) {
  kiln_runtime *rt;
  KT_ASSERT_OK(kiln_runtime_open(&(kiln_runtime_options){.use_environment = true}, &rt));
  return rt;
}

/* ---- non-finite logits ------------------------------------------------------ */

/* One +inf and one -inf in output.weight: whatever the sign of the hidden
 * state's element 0, one logit is +inf, which greedy sampling once picked
 * without a word. */
static void poison_output(float *v, int64_t ne0, int64_t ne1) {
  (void)ne1;
  v[7 * ne0] = INFINITY;
  v[8 * ne0] = -INFINITY;
}

typedef struct counter {
  int nodes;
} counter;

static kiln_status count_nodes(const kiln_node *node, const float *data, int32_t n_tokens,
                               int32_t pos0, void *user) {
  (void)node, (void)data, (void)n_tokens, (void)pos0;
  ((counter *)user)->nodes++;
  return NULL;
}

static void test_nonfinite_logits_are_an_error(void **state) {
  (void)state;
  const char *path = synth("inf-output.gguf", 512);
  patch_tensor(path, "output.weight", poison_output);
  kiln_runtime *rt = runtime();
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  uint32_t n_vocab = kiln_model_hparams(m)->n_vocab;
  float *logits = malloc(n_vocab * sizeof *logits);

  /* batch 2: the prompt goes in two steps; the logits read are the second's */
  kiln_session *s = session(rt, m, "f32", 16, 2);
  const int32_t ids[3] = {1, 2, 3};
  kiln_status st = kiln_session_eval(s, ids, 3, logits, NULL);
  if (!st) fail_msg("logits with an infinity were accepted");
  const char *msg = kiln_status_message(st);
  printf("%s\n", msg);
  assert_int_equal(kiln_status_code_of(st), KILN_STATUS_CHECK_FAILED);
  assert_non_null(strstr(msg, "non-finite logits at step 2 (positions 2..2): logit"));
  assert_non_null(strstr(msg, "first non-finite node output: node logits (mul_mat, on cpu), "
                              "token position 2, element"));
  kiln_status_free(st);

  /* through generation too, and a caller's observer survives the diagnosis */
  kiln_session_reset(s);
  counter c = {0};
  kiln_plan_set_observer(kiln_session_plan(s), count_nodes, &c);
  kiln_sampler *smp;
  KT_ASSERT_OK(kiln_sampler_new(&(kiln_sampler_options){0}, &smp));
  int32_t out[4];
  KT_ASSERT_ERR(kiln_generate(s, ids, 1, 4, smp, NULL, NULL, out, NULL), KILN_STATUS_CHECK_FAILED,
                "non-finite logits at step 1 (positions 0..0)");
  int after_error = c.nodes;
  assert_true(after_error > 0);
  kiln_session_reset(s);
  kiln_status_free(kiln_session_eval(s, ids, 1, NULL, NULL)); /* no logits read: no check */
  assert_true(c.nodes > after_error);
  kiln_sampler_free(smp);
  kiln_session_free(s);

  /* every position's logits when all are asked for: position 0 already */
  s = session(rt, m, "f32", 16, 4);
  float *all = malloc(3 * n_vocab * sizeof *all);
  KT_ASSERT_ERR(kiln_session_eval(s, ids, 3, NULL, all), KILN_STATUS_CHECK_FAILED,
                "of position 0 is");
  free(all);
  kiln_session_free(s);
  free(logits);
  kiln_model_free(m);
  kiln_runtime_free(rt);
}

/* ---- embeddings whose squares overflow f32 ----------------------------------- */

/* Each row scaled to an RMS of 2e37: x^2 is past FLT_MAX, |x| is not. */
static void huge_rows(float *v, int64_t ne0, int64_t ne1) {
  for (int64_t r = 0; r < ne1; r++) {
    double ms = 0;
    for (int64_t i = 0; i < ne0; i++) ms += (double)v[r * ne0 + i] * v[r * ne0 + i];
    double k = 2e37 / sqrt(ms / (double)ne0);
    for (int64_t i = 0; i < ne0; i++) v[r * ne0 + i] = (float)(v[r * ne0 + i] * k);
  }
}

static void test_huge_embeddings_match_f64(void **state) {
  (void)state;
  const char *path = synth("huge-embd.gguf", 512);
  patch_tensor(path, "token_embd.weight", huge_rows);
  kiln_runtime *rt = runtime();
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  uint32_t n_vocab = kiln_model_hparams(m)->n_vocab;
  enum { N = 4 };
  const int32_t ids[N] = {1, 17, 42, 99};
  float *f32 = malloc(N * n_vocab * sizeof *f32), *f64 = malloc(N * n_vocab * sizeof *f64);
  kiln_session *a = session(rt, m, "f32", 16, 4), *b = session(rt, m, "f64", 16, 4);
  KT_ASSERT_OK(kiln_session_eval(a, ids, N, NULL, f32));
  KT_ASSERT_OK(kiln_session_eval(b, ids, N, NULL, f64));
  for (int t = 0; t < N; t++) {
    const float *x = f32 + (size_t)t * n_vocab, *y = f64 + (size_t)t * n_vocab;
    double xx = 0, yy = 0, dd = 0;
    for (uint32_t i = 0; i < n_vocab; i++) {
      xx += (double)x[i] * x[i];
      yy += (double)y[i] * y[i];
      dd += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
    }
    double ratio = sqrt(xx / yy), rel = sqrt(dd / yy);
    printf("position %d: |f32|/|f64| = %.6f, rel L2 = %.2e\n", t, ratio, rel);
    assert_true(yy > 0);
    assert_true(fabs(ratio - 1.0) <= 1e-3);
    assert_true(rel <= 1e-3);
  }
  free(f32);
  free(f64);
  kiln_session_free(a);
  kiln_session_free(b);
  kiln_model_free(m);
  kiln_runtime_free(rt);
}

/* ---- a context past the training context --------------------------------------- */

/* The stderr that opening a session with n_ctx writes, malloc'd. */
static char *open_session_stderr(kiln_runtime *rt, kiln_model *m, int32_t n_ctx) {
  kt_stderr cap;
  assert_true(kt_stderr_begin(&cap));
  kiln_session *s = session(rt, m, "f32", n_ctx, 4);
  char *text = kt_stderr_end(&cap);
  kiln_session_free(s);
  assert_non_null(text);
  return text;
}

static void test_ctx_past_training_warns(void **state) {
  (void)state;
  const char *path = synth("ctx64.gguf", 64);
  kiln_runtime *rt = runtime();
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  char *err = open_session_stderr(rt, m, 64);
  assert_string_equal(err, "");
  free(err);
  err = open_session_stderr(rt, m, 100);
  printf("%s", err);
  assert_non_null(strstr(err, "warn: n_ctx 100 is past the model's training context"));
  assert_non_null(strstr(err, "context_length 64"));
  assert_non_null(strstr(err, "ctx64.gguf"));
  free(err);
  kiln_model_free(m);
  kiln_runtime_free(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nonfinite_logits_are_an_error),
      cmocka_unit_test(test_huge_embeddings_match_f64),
      cmocka_unit_test(test_ctx_past_training_warns),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
