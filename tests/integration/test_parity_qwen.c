/* The tools that catch the seed defect, on Qwen-shaped models synthesized
 * with the real Qwen2 vocabulary (ggml-vocab-qwen2.gguf): ChatML special
 * tokens whose embeddings have mean-square 1e-6, ε = 1e-6.
 *
 *  - cpu against cpu:f64, per op: passes; attn_norm's norm ratio is
 *    1.000 ± 1e-3 at every position, the special tokens' included.
 *  - the same with the test side planned at ε = 1e-5: fails, first at
 *    blk.0.attn_norm on a special-token position, norm ratio ~0.43, while
 *    cosine still reads 1.000 (the check sees scale).
 *  - qwen3: the same two, with q_norm and k_norm in the table.
 *  - RoPE θ: Q after RoPE at position 1000 matches an f64 reference with
 *    the model's θ = 1e6 and differs from θ = 1e4; with rope.dimension_count
 *    = head_dim/2 only the first n_rot dimensions rotate. */
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

#include "kiln/chat.h"
#include "kiln/parity.h"
#include "kiln/synth.h"
#include "runtime_fixture.h"
#include "testutil.h"

static char *dir;
static kiln_runtime *rt;

static const char *chatml =
    "<|im_start|>user\nWhat is the capital of France? Answer briefly.<|im_end|>\n<|im_start|>assistant\n";

static int setup(void **state) {
  (void)state;
  return kt_runtime_setup("parity", &dir, &rt);
}

static int teardown(void **state) {
  (void)state;
  return kt_runtime_teardown(dir, rt);
}

/* hidden 896 (Qwen2.5-0.5B's width), 2 layers, F32 matrices, Q8_0 embeddings */
static kiln_model *qwen_model(kiln_arch arch, const char *name) {
  char *vocab = kt_model_path("ggml-vocab-qwen2.gguf");
  assert_non_null(vocab);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
  kiln_synth_options o;
  kiln_synth_defaults(&o, arch);
  o.n_layer = 2;
  o.n_embd = 896;
  o.n_head = 14;
  o.n_head_kv = 2;
  o.n_ff = 1024;
  o.eps = 1e-6f;
  o.rope_theta = 1e6f;
  o.embd_type = KILN_TYPE_Q8_0;
  o.vocab_from = vocab;
  o.special_ms = 1e-6;
  o.seed = 7;
  KT_ASSERT_OK(kiln_synth_write(&o, path));
  free(vocab);
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  return m;
}

static void chatml_ids(const kiln_model *m, int32_t **ids, size_t *n) {
  KT_ASSERT_OK(kiln_tokenize(kiln_model_vocab(m), chatml, strlen(chatml), KILN_TOKENIZE_PARSE_SPECIAL, ids, n));
  /* the Qwen2 vocabulary: <|im_start|> 151644, <|im_end|> 151645 */
  assert_int_equal((*ids)[0], 151644);
}

static bool is_special(const kiln_model *m, int32_t id) {
  return kiln_vocab_token_type(kiln_model_vocab(m), id) == KILN_TOKEN_CONTROL;
}

static kiln_config_override f64 = {"cpu", "precision", "f64", "test"};

static kiln_parity_report *parity(kiln_model *m, float test_eps) {
  int32_t *ids;
  size_t n;
  chatml_ids(m, &ids, &n);
  kiln_parity_options o = {0};
  o.ref = (kiln_parity_side){"cpu", &f64, 1, 0.0f};
  o.test = (kiln_parity_side){"cpu", NULL, 0, test_eps};
  o.per_op = true;
  kiln_parity_report *r;
  KT_ASSERT_OK(kiln_parity_run(rt, m, ids, n, &o, &r));
  free(ids);
  return r;
}

static void check_passes(kiln_model *m, bool qk_norm) {
  kiln_parity_report *r = parity(m, 0.0f);
  kiln_parity_print(r, kiln_model_vocab(m), false, stdout);
  assert_int_equal(r->n_fail, 0);
  int n_special = 0, seen_q = 0, seen_k = 0;
  for (size_t i = 0; i < r->n_rows; i++) {
    const kiln_parity_row *w = &r->rows[i];
    if (strstr(w->name, "attn_norm")) {
      assert_true(fabs(w->norm_ratio - 1.0) <= 1e-3);
      n_special += is_special(m, w->token);
    }
    seen_q += strstr(w->name, ".q_norm") != NULL;
    seen_k += strstr(w->name, ".k_norm") != NULL;
  }
  assert_true(n_special >= 2 * 3); /* 3 special tokens in each of 2 layers */
  if (qk_norm) assert_true(seen_q > 0 && seen_k > 0);
  kiln_parity_report_free(r);
}

static void check_wrong_eps_fails(kiln_model *m) {
  kiln_parity_report *r = parity(m, 1e-5f);
  assert_true(r->n_fail > 0);
  const kiln_parity_row *f = &r->rows[r->first_fail];
  printf("first failure: %s at %d (token %d), norm ratio %.4f, cosine %.6f\n", f->name, f->pos, f->token,
         f->norm_ratio, f->cos);
  assert_string_equal(f->name, "blk.0.attn_norm");
  assert_true(is_special(m, f->token));
  /* ms 1e-6: sqrt(1e-6/1.1e-5) / sqrt(1e-6/2e-6) = 0.4264 */
  assert_true(fabs(f->norm_ratio - 0.4264) < 0.01);
  assert_true(f->cos > 0.99999); /* cosine cannot see it */
  kiln_parity_report_free(r);
}

static void test_qwen2_parity(void **state) {
  (void)state;
  kiln_model *m = qwen_model(KILN_ARCH_QWEN2, "qwen2");
  check_passes(m, false);
  check_wrong_eps_fails(m);
  kiln_model_free(m);
}

static void test_qwen3_parity(void **state) {
  (void)state;
  kiln_model *m = qwen_model(KILN_ARCH_QWEN3, "qwen3");
  check_passes(m, true);
  check_wrong_eps_fails(m);
  kiln_model_free(m);
}

/* RoPE θ and rotary dims, at position 1000 of a small qwen2 model. */
typedef struct rope_capture {
  float *q_in, *q_out; /* attn_q and rope_q at the last position */
  int64_t width;
  int32_t pos;
} rope_capture;

static kiln_status grab(const kiln_node *n, const float *data, int32_t count, int32_t pos0, void *user) {
  rope_capture *c = user;
  if (c->pos < pos0 || c->pos >= pos0 + count) return NULL;
  const float *col = data + (size_t)(c->pos - pos0) * (size_t)n->dst->ne[0];
  if (!strcmp(n->name, "blk.0.attn_q")) memcpy(c->q_in, col, (size_t)c->width * sizeof(float));
  if (!strcmp(n->name, "blk.0.rope_q")) memcpy(c->q_out, col, (size_t)c->width * sizeof(float));
  return NULL;
}

/* f64 NEOX RoPE of one head at position p with θ and n_rot. */
static void rope_ref(const float *x, double *y, int hd, int n_rot, double theta, int p) {
  for (int i = 0; i < hd; i++) y[i] = x[i];
  for (int i = 0; i < n_rot / 2; i++) {
    double a = p * pow(theta, -2.0 * i / n_rot);
    double x0 = x[i], x1 = x[i + n_rot / 2];
    y[i] = x0 * cos(a) - x1 * sin(a);
    y[i + n_rot / 2] = x0 * sin(a) + x1 * cos(a);
  }
}

static void run_rope(uint32_t n_rot) {
  char *vocab = kt_model_path("ggml-vocab-qwen2.gguf");
  char path[4096];
  snprintf(path, sizeof path, "%s/rope-%u.gguf", dir, n_rot);
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_QWEN2);
  o.n_layer = 1;
  o.n_embd = 64;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.n_rot = n_rot;
  o.n_ctx = 1024;
  o.rope_theta = 1e6f;
  o.vocab_from = vocab;
  o.embd_type = KILN_TYPE_Q8_0;
  KT_ASSERT_OK(kiln_synth_write(&o, path));
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  const int hd = 16, pos = 1000;
  kiln_session *s;
  KT_ASSERT_OK(kiln_session_open(rt, m, &(kiln_session_options){.backend = "cpu", .n_ctx = 1024, .batch = 256, .overrides = &f64, .n_overrides = 1}, &s));
  rope_capture c = {calloc(64, sizeof(float)), calloc(64, sizeof(float)), 64, pos};
  kiln_plan_set_observer(kiln_session_plan(s), grab, &c);
  int32_t *ids = malloc((pos + 1) * sizeof *ids);
  for (int i = 0; i <= pos; i++) ids[i] = 100 + (i * 37) % 5000;
  KT_ASSERT_OK(kiln_session_eval(s, ids, pos + 1, NULL, NULL));
  double max_err = 0, max_diff_1e4 = 0;
  for (int h = 0; h < 4; h++) {
    double y6[16], y4[16];
    rope_ref(c.q_in + h * hd, y6, hd, (int)n_rot, 1e6, pos);
    rope_ref(c.q_in + h * hd, y4, hd, (int)n_rot, 1e4, pos);
    for (int i = 0; i < hd; i++) {
      max_err = fmax(max_err, fabs(c.q_out[h * hd + i] - y6[i]));
      max_diff_1e4 = fmax(max_diff_1e4, fabs(c.q_out[h * hd + i] - y4[i]));
    }
    /* dimensions past n_rot pass through untouched */
    for (int i = (int)n_rot; i < hd; i++) assert_true(c.q_out[h * hd + i] == c.q_in[h * hd + i]);
  }
  printf("rope n_rot %u, position %d: |q - f64 ref(θ=1e6)| <= %.2e, |q - ref(θ=1e4)| up to %.3f\n", n_rot, pos,
         max_err, max_diff_1e4);
  assert_true(max_err <= 1e-4);
  assert_true(max_diff_1e4 > 0.1);
  free(ids);
  free(c.q_in);
  free(c.q_out);
  kiln_session_free(s);
  kiln_model_free(m);
  free(vocab);
}

static void test_rope_theta_and_dims(void **state) {
  (void)state;
  run_rope(16); /* n_rot = head_dim */
  run_rope(8);  /* n_rot = head_dim / 2 */
}

int main(void) {
  if (!kt_have_model("ggml-vocab-qwen2.gguf")) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_qwen2_parity),
      cmocka_unit_test(test_qwen3_parity),
      cmocka_unit_test(test_rope_theta_and_dims),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
