/* The ε check on a synthesized Qwen3.5 (qwen35: one Gated DeltaNet block
 * and one gated full-attention block, hidden 896) with the Qwen3.5
 * vocabulary (ggml-vocab-qwen35.gguf), ChatML special tokens whose
 * embeddings have mean-square 1e-6, ε = 1e-6, on the ChatML prompt:
 *  - cpu against cpu:f64, per op: passes, and every norm (attn_norm,
 *    post_attention_norm, ssm_norm, q_norm, k_norm, output_norm) has a norm
 *    ratio of 1.000 ± 1e-3 at every special-token position;
 *  - the test side planned with ε = 1e-5: fails, first at blk.0.attn_norm
 *    on a special-token position, norm ratio ~0.43, cosine still 1.000. */
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

#include "kiln/parity.h"
#include "kiln/synth.h"
#include "runtime_fixture.h"
#include "testutil.h"

static char *dir;
static kiln_runtime *rt;
static kiln_model *model;

static const char *chatml =
    "<|im_start|>user\nWhat is the capital of France? Answer briefly.<|im_end|>\n<|im_start|>assistant\n";

static kiln_config_override f64 = {"cpu", "precision", "f64", "test"};

static int setup(void **state) {
  (void)state;
  dir = kt_mkdtemp("parity-qwen35");
  if (!dir || kiln_runtime_open(&(kiln_runtime_options){.use_environment = true}, &rt)) return -1;
  char *vocab = kt_model_path("ggml-vocab-qwen35.gguf");
  char path[4096];
  snprintf(path, sizeof path, "%s/qwen35.gguf", dir);
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_QWEN35);
  o.n_layer = 2;
  o.layer_pattern = "RF";
  o.n_embd = 896;
  o.n_ff = 1024;
  o.n_head = 14;
  o.n_head_kv = 2;
  o.head_dim = 64;
  o.n_rot = 16;
  o.rope_sections[0] = 3, o.rope_sections[1] = 3, o.rope_sections[2] = 2;
  o.ssm_groups = 2;
  o.ssm_heads = 4;
  o.ssm_state = 64;
  o.ssm_head_v = 64;
  o.embd_type = KILN_TYPE_Q8_0;
  o.vocab_from = vocab;
  o.special_ms = 1e-6;
  o.seed = 35;
  const int rc = kt_synth_open(&o, path, &model);
  free(vocab);
  return rc;
}

static int teardown(void **state) {
  (void)state;
  kiln_model_free(model);
  kiln_runtime_free(rt);
  kt_rm_rf(dir);
  free(dir);
  return 0;
}

static bool is_special(int32_t id) {
  return kiln_vocab_token_type(kiln_model_vocab(model), id) == KILN_TOKEN_CONTROL;
}

static kiln_parity_report *parity(float test_eps) {
  int32_t *ids;
  size_t n;
  KT_ASSERT_OK(kiln_tokenize(kiln_model_vocab(model), chatml, strlen(chatml), KILN_TOKENIZE_PARSE_SPECIAL, &ids, &n));
  assert_int_equal(ids[0], 151644); /* <|im_start|> */
  kiln_parity_options o = {0};
  o.ref = (kiln_parity_side){"cpu", &f64, 1, 0.0f};
  o.test = (kiln_parity_side){"cpu", NULL, 0, test_eps};
  o.per_op = true;
  kiln_parity_report *r;
  KT_ASSERT_OK(kiln_parity_run(rt, model, ids, n, &o, &r));
  free(ids);
  return r;
}

static void test_norms_at_special_tokens(void **state) {
  (void)state;
  kiln_parity_report *r = parity(0.0f);
  kiln_parity_print(r, kiln_model_vocab(model), false, stdout);
  assert_int_equal(r->n_fail, 0);
  static const char *norms[] = {"attn_norm", "post_attention_norm", "ssm_norm", "q_norm", "k_norm", "output_norm"};
  int seen[6] = {0};
  for (size_t i = 0; i < r->n_rows; i++) {
    const kiln_parity_row *w = &r->rows[i];
    if (!is_special(w->token)) continue;
    for (int k = 0; k < 6; k++) {
      const char *dot = strrchr(w->name, '.');
      if (strcmp(dot ? dot + 1 : w->name, norms[k])) continue;
      if (fabs(w->norm_ratio - 1.0) > 1e-3)
        fail_msg("%s at position %d (token %d): norm ratio %.6f", w->name, w->pos, w->token, w->norm_ratio);
      seen[k]++;
    }
  }
  for (int k = 0; k < 6; k++) {
    printf("%-20s %d special-token rows, norm ratio 1.000 +- 1e-3\n", norms[k], seen[k]);
    assert_true(seen[k] >= 3); /* <|im_start|> twice, <|im_end|> once */
  }
  kiln_parity_report_free(r);
}

static void test_wrong_eps_fails(void **state) {
  (void)state;
  kiln_parity_report *r = parity(1e-5f);
  assert_true(r->n_fail > 0);
  const kiln_parity_row *f = &r->rows[r->first_fail];
  printf("first failure: %s at %d (token %d), norm ratio %.4f, cosine %.6f\n", f->name, f->pos, f->token,
         f->norm_ratio, f->cos);
  assert_string_equal(f->name, "blk.0.attn_norm");
  assert_true(is_special(f->token));
  assert_true(fabs(f->norm_ratio - 0.4264) < 0.01); /* sqrt(2e-6 / 1.1e-5) */
  assert_true(f->cos > 0.99999);
  kiln_parity_report_free(r);
}

int main(void) {
  if (!kt_have_model("ggml-vocab-qwen35.gguf")) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_norms_at_special_tokens),
      cmocka_unit_test(test_wrong_eps_fails),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
