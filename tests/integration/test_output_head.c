/* Logits only where they are read: the output head (out_columns,
 * output_norm, logits) runs for the last token when only its logits are
 * asked for, for every token when all are, and not at all for a prompt's
 * earlier micro-batches or an eval that reads none; the last token's
 * logits are the same either way. On stories260K, through the cpu plugin,
 * at both precisions and with micro-batches that leave a remainder. */
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

#include "kiln/kiln.h"
#include "testutil.h"

#define N_PROMPT 13
#define BATCH 4 /* micro-batches 4, 4, 4, 1 */

/* What the observer saw of the head's nodes. */
typedef struct seen {
  int head_calls;     /* head nodes observed */
  int body_calls;     /* other nodes */
  int32_t last_count; /* n_tokens of the last head node seen */
  int32_t last_pos;   /* its pos0 */
} seen;

static kiln_status observe(const kiln_node *node, const float *data, int32_t n_tokens, int32_t pos0, void *user) {
  seen *s = user;
  (void)data;
  bool head = !strcmp(node->name, "out_columns") || !strcmp(node->name, "output_norm") || !strcmp(node->name, "logits");
  if (!head) {
    s->body_calls++;
    return NULL;
  }
  s->head_calls++;
  s->last_count = n_tokens;
  s->last_pos = pos0;
  return NULL;
}

static kiln_session *open_session(kiln_runtime *rt, kiln_model *m, const char *prec, seen *sn) {
  kiln_config_override ov = {"cpu", "precision", prec, "test"};
  kiln_session *s;
  KT_ASSERT_OK(kiln_session_open(rt, m,
                                 &(kiln_session_options){.backend = "cpu", .batch = BATCH, .fallback_cpu = 0,
                                                         .overrides = &ov, .n_overrides = 1},
                                 &s));
  assert_true(kiln_plan_has_head(kiln_session_plan(s)));
  if (sn) kiln_plan_set_observer(kiln_session_plan(s), observe, sn);
  return s;
}

static void run(const char *prec) {
  char *path = kt_model_path("stories260K.gguf");
  if (!path) skip();
  kiln_runtime *rt;
  KT_ASSERT_OK(kiln_runtime_open(&(kiln_runtime_options){.use_environment = true}, &rt));
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  const uint32_t V = kiln_model_hparams(m)->n_vocab;
  int32_t ids[N_PROMPT];
  for (int i = 0; i < N_PROMPT; i++) ids[i] = 1 + (i * 37) % (int32_t)(V - 1);
  float *all = malloc((size_t)V * N_PROMPT * sizeof(float)), *last = malloc(V * sizeof(float));
  float *last2 = malloc(V * sizeof(float));

  /* every token's logits: the head runs once per micro-batch, over all of its tokens */
  seen a = {0};
  kiln_session *s = open_session(rt, m, prec, &a);
  KT_ASSERT_OK(kiln_session_eval(s, ids, N_PROMPT, last2, all));
  assert_int_equal(a.head_calls, 3 * 4); /* 3 nodes x 4 micro-batches */
  assert_int_equal(a.last_count, 1);     /* the remainder micro-batch of 1 */
  assert_int_equal(a.last_pos, 12);
  assert_memory_equal(last2, all + (size_t)(N_PROMPT - 1) * V, V * sizeof(float));
  kiln_session_free(s);

  /* the last token's only: the head runs once, for one column at the last position */
  seen b = {0};
  s = open_session(rt, m, prec, &b);
  KT_ASSERT_OK(kiln_session_eval(s, ids, N_PROMPT, last, NULL));
  assert_int_equal(b.head_calls, 3);
  assert_int_equal(b.last_count, 1);
  assert_int_equal(b.last_pos, N_PROMPT - 1);
  assert_int_equal(b.body_calls, a.body_calls);
  /* A column's logits do not depend on which other columns the head ran
   * for: the same bits (the remainder micro-batch ran one column in both). */
  assert_memory_equal(last, all + (size_t)(N_PROMPT - 1) * V, V * sizeof(float));

  /* decode one more token: again one column */
  int32_t next = kiln_argmax(last, (int32_t)V);
  KT_ASSERT_OK(kiln_session_eval(s, &next, 1, last, NULL));
  assert_int_equal(b.head_calls, 6);
  assert_int_equal(b.last_pos, N_PROMPT);
  kiln_session_free(s);

  /* no logits read: no head at all */
  seen c = {0};
  s = open_session(rt, m, prec, &c);
  KT_ASSERT_OK(kiln_session_eval(s, ids, N_PROMPT, NULL, NULL));
  assert_int_equal(c.head_calls, 0);
  assert_int_equal(c.body_calls, a.body_calls);
  kiln_session_free(s);

  /* a prompt that fills whole micro-batches: the last one's last column,
   * computed alone, against the same column computed with its three
   * neighbours (another kernel shape on the cpu backend at f32: close;
   * at f64 every output is the correctly rounded value: equal) */
  s = open_session(rt, m, prec, NULL);
  KT_ASSERT_OK(kiln_session_eval(s, ids, 12, last, NULL));
  kiln_session_free(s);
  s = open_session(rt, m, prec, NULL);
  KT_ASSERT_OK(kiln_session_eval(s, ids, 12, NULL, all));
  kiln_session_free(s);
  const float *ref = all + (size_t)11 * V;
  double dd = 0, rr = 0;
  for (uint32_t i = 0; i < V; i++) {
    dd += ((double)last[i] - ref[i]) * ((double)last[i] - ref[i]);
    rr += (double)ref[i] * ref[i];
  }
  printf("%s: last column alone vs with its micro-batch: rel L2 %.3g\n", prec, sqrt(dd / rr));
  if (!strcmp(prec, "f64")) assert_memory_equal(last, ref, V * sizeof(float));
  else assert_true(sqrt(dd / rr) <= 1e-6);

  free(last2);
  free(last);
  free(all);
  kiln_model_free(m);
  kiln_runtime_free(rt);
  free(path);
}

static void test_head_f32(void **state) {
  (void)state;
  run("f32");
}

static void test_head_f64(void **state) {
  (void)state;
  run("f64");
}

/* kiln_plan_step_outputs refuses columns outside the step, and more
 * columns than tokens. */
static void test_bad_columns(void **state) {
  (void)state;
  char *path = kt_model_path("stories260K.gguf");
  if (!path) skip();
  kiln_runtime *rt;
  KT_ASSERT_OK(kiln_runtime_open(&(kiln_runtime_options){.use_environment = true}, &rt));
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  kiln_session *s = open_session(rt, m, "f32", NULL);
  kiln_plan *p = kiln_session_plan(s);
  int32_t ids[3] = {1, 2, 3}, cols[4] = {0, 1, 2, 3};
  KT_ASSERT_ERR(kiln_plan_step_outputs(p, ids, 3, 0, cols + 3, 1), KILN_STATUS_OUT_OF_RANGE,
                "output column 3 (entry 0) is not one of the step's 3");
  int32_t neg = -1;
  KT_ASSERT_ERR(kiln_plan_step_outputs(p, ids, 3, 0, &neg, 1), KILN_STATUS_OUT_OF_RANGE, "output column -1");
  KT_ASSERT_ERR(kiln_plan_step_outputs(p, ids, 3, 0, cols, 4), KILN_STATUS_INVALID_ARGUMENT,
                "step of 3 tokens asks for 4 output columns");
  KT_ASSERT_ERR(kiln_plan_step_outputs(p, ids, 3, 0, NULL, 1), KILN_STATUS_INVALID_ARGUMENT, "asks for 1");
  KT_ASSERT_OK(kiln_plan_step_outputs(p, ids, 3, 0, cols + 1, 2));
  kiln_session_free(s);
  kiln_model_free(m);
  kiln_runtime_free(rt);
  free(path);
}

int main(void) {
  if (!kt_have_model("stories260K.gguf")) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_head_f32),
      cmocka_unit_test(test_head_f64),
      cmocka_unit_test(test_bad_columns),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
