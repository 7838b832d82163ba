/* The golden set (tests/golden/stories260K.golden, made by llama.cpp)
 * replayed through the cpu plugin: prompt tokens, greedy ids, text, and the
 * largest logits after the prompt, all equal to llama.cpp's. */
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
#include "testutil.h"


static void replay(const char *backend, const char *prec) {
  char *model_path = kt_model_path("stories260K.gguf");
  if (!model_path) skip();
  char golden_path[4096];
  snprintf(golden_path, sizeof golden_path, "%s/tests/golden/stories260K.golden", getenv("KILN_SRCDIR"));
  kiln_golden *g;
  KT_ASSERT_OK(kiln_golden_load(golden_path, &g));
  kiln_config_override ov[] = {{"cpu", "precision", prec, "test"}};
  kiln_runtime_options ro = {.use_environment = true, .overrides = ov, .n_overrides = 1};
  kiln_runtime *rt;
  KT_ASSERT_OK(kiln_runtime_open(&ro, &rt));
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(model_path, &m));
  const kiln_vocab *v = kiln_model_vocab(m);
  uint32_t n_vocab = kiln_model_hparams(m)->n_vocab;
  for (size_t c = 0; c < g->n_cases; c++) {
    const kiln_golden_case *gc = &g->cases[c];
    int32_t *ids;
    size_t n;
    KT_ASSERT_OK(kiln_tokenize(v, gc->prompt, gc->prompt_len, KILN_TOKENIZE_ADD_BOS, &ids, &n));
    assert_int_equal(n, gc->n_prompt_ids);
    assert_memory_equal(ids, gc->prompt_ids, n * sizeof *ids);

    kiln_session *s;
    kiln_session_options so = {.backend = backend, .fallback_cpu = 0};
    KT_ASSERT_OK(kiln_session_open(rt, m, &so, &s));
    /* logits after the prompt: llama.cpp's largest, each within 1e-5
     * relative (both are f32 computations of the same graph, with an f32
     * KV cache; they differ only in summation order) */
    float *logits = malloc(n_vocab * sizeof *logits);
    KT_ASSERT_OK(kiln_session_eval(s, ids, (int32_t)n, logits, NULL));
    for (int k = 0; k < gc->n_top; k++) {
      float want = gc->top_logit[k], got = logits[gc->top_id[k]];
      printf("[%s] logit %d: kiln %.7g, llama.cpp %.9g, diff %.2e\n", gc->name, gc->top_id[k], (double)got,
             (double)want, (double)(got - want));
      if (fabsf(want - got) > 1e-5f * fabsf(want))
        fail_msg("[%s] logit of token %d: %.6g, llama.cpp %.6g", gc->name, gc->top_id[k], (double)got,
                 (double)want);
    }
    kiln_session_reset(s);
    kiln_sampler *sm;
    KT_ASSERT_OK(kiln_sampler_new(&(kiln_sampler_options){0.0f, 0, 1.0f, 0}, &sm));
    int32_t *out = calloc((size_t)gc->n, sizeof *out);
    kiln_generate_stats st;
    KT_ASSERT_OK(kiln_generate(s, ids, (int32_t)n, gc->n, sm, NULL, NULL, out, &st));
    assert_int_equal(st.n_generated, gc->n_ids);
    for (size_t i = 0; i < gc->n_ids; i++)
      if (out[i] != gc->ids[i])
        fail_msg("[%s] (%s, %s) token %zu: %d, llama.cpp %d", gc->name, backend, prec, i, out[i], gc->ids[i]);
    /* the text is the concatenation of the pieces, as kiln run streams it */
    char text[8192];
    size_t len = 0;
    for (size_t i = 0; i < gc->n_ids; i++)
      KT_ASSERT_OK(kiln_token_to_piece(v, out[i], false, text, sizeof text, &len));
    assert_int_equal(len, gc->text_len);
    assert_memory_equal(text, gc->text, len);
    printf("golden [%s] %s/%s: %zu ids and text equal llama.cpp's\n", gc->name, backend, prec, gc->n_ids);
    free(out);
    free(logits);
    free(ids);
    kiln_sampler_free(sm);
    kiln_session_free(s);
  }
  kiln_model_free(m);
  kiln_runtime_free(rt);
  kiln_golden_free(g);
  free(model_path);
}

static void test_golden_cpu_f32(void **state) {
  (void)state;
  replay("cpu", "f32");
}

static void test_golden_cpu_f64(void **state) {
  (void)state;
  replay("cpu", "f64");
}

int main(void) {
  if (!kt_have_model("stories260K.gguf")) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_cpu_f32),
      cmocka_unit_test(test_golden_cpu_f64),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
