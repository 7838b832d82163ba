/* The tiny Qwen3.5 golden set (tests/golden/qwen35-tiny.golden: float64
 * transformers on the model of tests/golden/qwen35-tiny.synth, see
 * make_golden_qwen35.py) replayed through the cpu plugin. The model is
 * regenerated here with the built `kiln synth` from the committed flags
 * and the Qwen3.5 vocabulary, so nothing large is committed; then every
 * case's prompt ids, greedy ids and text must equal the reference's, and
 * its largest logits after the prompt must be within 1e-4 relative:
 *  - f32 and f64 accumulation;
 *  - micro-batches of 1 (every token a decode step of the recurrence), 64
 *    (the 66-token prompt in two steps: the layer state carried across)
 *    and 512 (that prompt in one step: two chunks of the chunked form). */
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

#include "kiln/golden.h"
#include "kiln/kiln.h"
#include "qwen35_fixture.h"
#include "testutil.h"

static char *dir, *model_path;

static int setup(void **state) {
  (void)state;
  dir = kt_mkdtemp("golden-qwen35");
  if (!dir) return -1;
  model_path = malloc(strlen(dir) + 32);
  sprintf(model_path, "%s/qwen35-tiny.gguf", dir);
  return kt_qwen35_tiny(model_path);
}

static int teardown(void **state) {
  (void)state;
  kt_rm_rf(dir);
  free(dir);
  free(model_path);
  return 0;
}

static void replay(const char *prec, int32_t batch) {
  char golden_path[4096];
  snprintf(golden_path, sizeof golden_path, "%s/tests/golden/qwen35-tiny.golden", getenv("KILN_SRCDIR"));
  kiln_golden *g;
  KT_ASSERT_OK(kiln_golden_load(golden_path, &g));
  assert_true(g->n_cases >= 3);
  kiln_config_override ov[] = {{"cpu", "precision", prec, "test"}};
  kiln_runtime_options ro = {.use_environment = true, .overrides = ov, .n_overrides = 1};
  kiln_runtime *rt;
  KT_ASSERT_OK(kiln_runtime_open(&ro, &rt));
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(model_path, &m));
  kiln_session *s;
  kiln_session_options so = {.backend = "cpu", .fallback_cpu = 0, .batch = batch, .n_ctx = 512};
  KT_ASSERT_OK(kiln_session_open(rt, m, &so, &s));
  for (size_t c = 0; c < g->n_cases; c++) {
    const kiln_golden_case *gc = &g->cases[c];
    kiln_golden_result r;
    KT_ASSERT_OK(kiln_golden_run(s, gc, &r));
    printf("golden [%s] cpu/%s batch %d: prompt ids %s, %zu ids %s, text %s, top logits within %.2e\n", gc->name,
           prec, (int)batch, r.prompt_ids_match ? "equal" : "DIFFER", r.n_ids,
           r.first_mismatch < 0 ? "equal" : "DIFFER", r.text_match ? "equal" : "DIFFERS", r.top_max_rel);
    if (!r.pass)
      fail_msg("[%s] cpu/%s batch %d: %s (first differing id at %ld)", gc->name, prec, (int)batch,
               !r.prompt_ids_match ? "prompt ids differ" : r.first_mismatch >= 0 ? "ids differ"
               : !r.text_match ? "text differs" : "top logits off", r.first_mismatch);
    kiln_golden_result_clear(&r);
  }
  kiln_session_free(s);
  kiln_model_free(m);
  kiln_runtime_free(rt);
  kiln_golden_free(g);
}

static void test_f64_batch512(void **state) { replay("f64", 512); }
static void test_f64_batch1(void **state) { replay("f64", 1); }
static void test_f32_batch64(void **state) { replay("f32", 64); }
static void test_f32_batch1(void **state) { replay("f32", 1); }

int main(void) {
  if (!kt_have_model("ggml-vocab-qwen35.gguf")) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_f64_batch512),
      cmocka_unit_test(test_f64_batch1),
      cmocka_unit_test(test_f32_batch64),
      cmocka_unit_test(test_f32_batch1),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
