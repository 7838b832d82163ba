/* The planner with the hello plugin (RMSNorm and add only): fallback =
 * error fails naming the first node hello cannot run; fallback = cpu runs,
 * lists every node that fell back with its cause, and generates the same
 * tokens as the cpu backend alone. */
#include "config.h"

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

static kiln_runtime *open_rt(void) {
  kiln_runtime *rt;
  KT_ASSERT_OK(kiln_runtime_open(&(kiln_runtime_options){.use_environment = true}, &rt));
  return rt;
}

static void test_fallback_error_names_first_node(void **state) {
  (void)state;
  char *path = kt_model_path("stories260K.gguf");
  if (!path) skip();
  kiln_runtime *rt = open_rt();
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  kiln_session *s = NULL;
  KT_ASSERT_ERR(kiln_session_open(rt, m, &(kiln_session_options){.backend = "hello", .fallback_cpu = 0}, &s),
                KILN_STATUS_UNSUPPORTED, "node inp_embd (get_rows) cannot run on backend hello");
  assert_null(s);
  kiln_model_free(m);
  kiln_runtime_free(rt);
  free(path);
}

static void generate(kiln_runtime *rt, kiln_model *m, const char *backend, int fallback, int32_t *out,
                     int32_t n, kiln_session **out_session) {
  kiln_session *s;
  KT_ASSERT_OK(kiln_session_open(rt, m, &(kiln_session_options){.backend = backend, .fallback_cpu = fallback}, &s));
  int32_t *ids;
  size_t n_ids;
  KT_ASSERT_OK(kiln_tokenize(kiln_model_vocab(m), "Once upon a time", 16, KILN_TOKENIZE_ADD_BOS, &ids, &n_ids));
  kiln_sampler *sm;
  KT_ASSERT_OK(kiln_sampler_new(&(kiln_sampler_options){0.0f, 0, 1.0f, 0}, &sm));
  KT_ASSERT_OK(kiln_generate(s, ids, (int32_t)n_ids, n, sm, NULL, NULL, out, NULL));
  kiln_sampler_free(sm);
  free(ids);
  *out_session = s;
}

static void test_fallback_cpu_runs_and_reports(void **state) {
  (void)state;
  char *path = kt_model_path("stories260K.gguf");
  if (!path) skip();
  kiln_runtime *rt = open_rt();
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  int32_t a[32], b[32];
  kiln_session *sa, *sb;
  generate(rt, m, "cpu", 0, a, 32, &sa);
  generate(rt, m, "hello", 1, b, 32, &sb);
  assert_memory_equal(a, b, sizeof a);

  kiln_plan *p = kiln_session_plan(sb);
  const kiln_graph *g = kiln_plan_graph(p);
  uint32_t on_hello = 0;
  for (uint32_t i = 0; i < kiln_graph_n_nodes(g); i++) {
    const kiln_node *n = kiln_graph_node(g, i);
    bool hello_op = n->op == KILN_OP_RMS_NORM || n->op == KILN_OP_ADD;
    assert_string_equal(kiln_plan_node_backend(p, i), hello_op ? "hello" : "cpu");
    on_hello += hello_op;
  }
  /* 5 layers x (2 norms + 2 adds) + output_norm */
  assert_int_equal(on_hello, 5 * 4 + 1);
  assert_int_equal(kiln_plan_n_fallbacks(p), kiln_graph_n_nodes(g) - on_hello);
  for (uint32_t i = 0; i < kiln_plan_n_fallbacks(p); i++) {
    const kiln_fallback *f = kiln_plan_fallback(p, i);
    assert_string_equal(f->backend, "cpu");
    assert_non_null(strstr(f->cause, "hello runs only rms_norm and add"));
  }
  char *buf = NULL;
  size_t len = 0;
  FILE *mf = open_memstream(&buf, &len);
  kiln_plan_print_fallbacks(p, mf);
  fclose(mf);
  char head[96];
  snprintf(head, sizeof head, "fallback: %u of %u nodes ran on cpu instead of hello", kiln_plan_n_fallbacks(p),
           kiln_graph_n_nodes(g));
  assert_non_null(strstr(buf, head));
  assert_non_null(strstr(buf, "blk.4.ffn_down"));
  free(buf);
  kiln_session_free(sa);
  kiln_session_free(sb);
  kiln_model_free(m);
  kiln_runtime_free(rt);
  free(path);
}

int main(void) {
  if (!kt_have_model("stories260K.gguf")) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fallback_error_names_first_node),
      cmocka_unit_test(test_fallback_cpu_runs_and_reports),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
