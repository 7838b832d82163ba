/* Perplexity (kiln/perplexity.h, `kiln perplexity`) on stories260K over
 * tests/data/perplexity/stories.txt with 256-token chunks, against
 * llama.cpp's numbers for the same file, model and context
 * (tests/data/perplexity/stories260K.ppl, made with llama-cpp-python by
 * make_ppl_reference.py there):
 *   - within llama.cpp's stated uncertainty (its "+/-") of its default run
 *     (f16 KV cache), the criterion;
 *   - within 1e-4 relative of its run with an f32 KV cache (as kiln's), for
 *     the final value and after every chunk: the tight check;
 * on the cpu backend at f32 and at f64 accumulation. The command's output
 * follows llama-perplexity's ("[1]x,[2]y,..." then "Final estimate"). */
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
#include <jansson.h>

#include "kiln/kiln.h"
#include "kiln/perplexity.h"
#include "kiln_proc.h"
#include "testutil.h"

#define MAX_CHUNKS 64

typedef struct reference {
  int n_ctx, n_chunk;
  long n_tokens, n_scored;
  double ppl, ppl_err, ppl_f32kv, ppl_err_f32kv;
  double chunks[MAX_CHUNKS], chunks_f32kv[MAX_CHUNKS];
  int n_chunks_listed, n_chunks_f32kv_listed;
} reference;

static char *data_path(const char *name) {
  const char *src = getenv("KILN_SRCDIR");
  if (!src) return NULL;
  size_t n = strlen(src) + strlen(name) + 32;
  char *p = malloc(n);
  snprintf(p, n, "%s/tests/data/perplexity/%s", src, name);
  return p;
}

static int read_list(const char *s, double *out) {
  int n = 0;
  char *end;
  for (double v = strtod(s, &end); end != s && n < MAX_CHUNKS; v = strtod(s, &end)) {
    out[n++] = v;
    s = end;
  }
  return n;
}

/* "key = value" lines; '#' starts a comment line. */
static void load_reference(reference *r) {
  memset(r, 0, sizeof *r);
  char *path = data_path("stories260K.ppl");
  FILE *f = path ? fopen(path, "r") : NULL;
  if (!f) fail_msg("cannot read %s", path ? path : "tests/data/perplexity/stories260K.ppl");
  char line[8192];
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    char *eq = strstr(line, " = ");
    if (!eq) fail_msg("%s: malformed line: %s", path, line);
    *eq = 0;
    const char *k = line, *v = eq + 3;
    if (!strcmp(k, "n_ctx")) r->n_ctx = atoi(v);
    else if (!strcmp(k, "n_chunk")) r->n_chunk = atoi(v);
    else if (!strcmp(k, "n_tokens")) r->n_tokens = atol(v);
    else if (!strcmp(k, "n_scored")) r->n_scored = atol(v);
    else if (!strcmp(k, "ppl")) r->ppl = strtod(v, NULL);
    else if (!strcmp(k, "ppl_err")) r->ppl_err = strtod(v, NULL);
    else if (!strcmp(k, "ppl_f32kv")) r->ppl_f32kv = strtod(v, NULL);
    else if (!strcmp(k, "ppl_err_f32kv")) r->ppl_err_f32kv = strtod(v, NULL);
    else if (!strcmp(k, "chunks")) r->n_chunks_listed = read_list(v, r->chunks);
    else if (!strcmp(k, "chunks_f32kv")) r->n_chunks_f32kv_listed = read_list(v, r->chunks_f32kv);
  }
  fclose(f);
  free(path);
  assert_true(r->n_ctx > 0 && r->n_chunk > 0 && r->ppl > 0 && r->ppl_err > 0 && r->ppl_f32kv > 0);
  assert_int_equal(r->n_chunks_listed, r->n_chunk);
  assert_int_equal(r->n_chunks_f32kv_listed, r->n_chunk);
}

static int32_t *text_tokens(const kiln_model *m, size_t *out_n) {
  char *path = data_path("stories.txt");
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  char *text = malloc(1 << 20);
  size_t len = fread(text, 1, 1 << 20, f);
  fclose(f);
  const kiln_vocab *v = kiln_model_vocab(m);
  int32_t *ids;
  KT_ASSERT_OK(kiln_tokenize(v, text, len, kiln_vocab_add_bos(v) ? KILN_TOKENIZE_ADD_BOS : 0, &ids, out_n));
  free(text);
  free(path);
  return ids;
}

static void check_precision(const char *precision) {
  char *model = kt_model_path("stories260K.gguf");
  if (!model) skip();
  reference ref;
  load_reference(&ref);
  kiln_runtime *rt;
  kiln_model *m;
  kiln_session *s;
  KT_ASSERT_OK(kiln_runtime_open(&(kiln_runtime_options){.use_environment = true}, &rt));
  KT_ASSERT_OK(kiln_model_open(model, &m));
  kiln_config_override ov = {"cpu", "precision", precision, "test"};
  kiln_session_options so = {.backend = "cpu", .n_ctx = ref.n_ctx, .fallback_cpu = 0, .overrides = &ov,
                             .n_overrides = 1};
  KT_ASSERT_OK(kiln_session_open(rt, m, &so, &s));
  size_t n;
  int32_t *ids = text_tokens(m, &n);
  assert_int_equal((long)n, ref.n_tokens);
  kiln_perplexity_result r;
  KT_ASSERT_OK(kiln_perplexity(s, ids, n, &(kiln_perplexity_options){ref.n_ctx, 0}, NULL, NULL, &r));
  fprintf(stderr,
          "cpu %s: PPL %.6f +/- %.6f; llama.cpp %.6f +/- %.6f (f16 KV), %.6f (f32 KV): %.2e relative to the "
          "latter\n",
          precision, r.ppl, r.ppl_err, ref.ppl, ref.ppl_err, ref.ppl_f32kv, fabs(r.ppl / ref.ppl_f32kv - 1));
  assert_int_equal(r.n_chunk, ref.n_chunk);
  assert_int_equal(r.n_scored, ref.n_scored);
  assert_true(fabs(r.ppl - ref.ppl) <= ref.ppl_err);                /* within llama.cpp's stated uncertainty */
  assert_true(fabs(r.ppl - ref.ppl_f32kv) <= 1e-4 * ref.ppl_f32kv); /* and like for like, tightly */
  assert_true(fabs(r.ppl_err - ref.ppl_err_f32kv) <= 1e-3 * ref.ppl_err_f32kv);
  for (int c = 0; c < r.n_chunk; c++)
    if (fabs(r.chunk_ppl[c] - ref.chunks_f32kv[c]) > 1e-4 * ref.chunks_f32kv[c])
      fail_msg("after chunk %d: %.6f, llama.cpp %.6f", c + 1, r.chunk_ppl[c], ref.chunks_f32kv[c]);
  /* --chunks: the first chunks alone give the same running values */
  kiln_perplexity_result r3;
  KT_ASSERT_OK(kiln_perplexity(s, ids, n, &(kiln_perplexity_options){ref.n_ctx, 3}, NULL, NULL, &r3));
  assert_int_equal(r3.n_chunk, 3);
  assert_true(fabs(r3.ppl - r.chunk_ppl[2]) <= 1e-12 * r.ppl);
  /* too short a text for the context: llama.cpp's message */
  KT_ASSERT_ERR(kiln_perplexity(s, ids, (size_t)ref.n_ctx * 2 - 1, &(kiln_perplexity_options){ref.n_ctx, 0}, NULL,
                                NULL, &r3),
                KILN_STATUS_INVALID_ARGUMENT, "you need at least 512 tokens");
  KT_ASSERT_ERR(kiln_perplexity(s, ids, n, &(kiln_perplexity_options){ref.n_ctx * 2, 0}, NULL, NULL, &r3),
                KILN_STATUS_INVALID_ARGUMENT, "at most the session's 256");
  kiln_perplexity_result_clear(&r);
  free(ids);
  kiln_session_free(s);
  kiln_model_free(m);
  kiln_runtime_free(rt);
  free(model);
}

static void test_cpu_f32(void **state) {
  (void)state;
  check_precision("f32");
}

static void test_cpu_f64(void **state) {
  (void)state;
  check_precision("f64");
}

static void test_command(void **state) {
  (void)state;
  char *model = kt_model_path("stories260K.gguf");
  char *text = data_path("stories.txt");
  if (!model) skip();
  reference ref;
  load_reference(&ref);
  const char *args[] = {"perplexity", "-m", model, "-f", text, "-c", "256", NULL};
  const char *json[] = {"perplexity", "-m", model, "-f", text, "-c", "256", "--json", NULL};
  kt_proc p, q;
  assert_true(kt_kiln(args, NULL, 0, false, &p));
  assert_true(kt_kiln(json, NULL, 0, false, &q));
  if (p.status || q.status) fail_msg("exit %d / %d: %s%s", p.status, q.status, p.err, q.err);
  json_t *j = json_loads(q.out, 0, NULL);
  assert_non_null(j);
  double ppl = json_real_value(json_object_get(j, "ppl")), err = json_real_value(json_object_get(j, "ppl_err"));
  assert_true(fabs(ppl - ref.ppl) <= ref.ppl_err);
  assert_int_equal(json_integer_value(json_object_get(j, "n_chunk")), ref.n_chunk);
  assert_int_equal(json_array_size(json_object_get(j, "chunks")), (size_t)ref.n_chunk);
  /* "[1]x,[2]y,...,[10]z," then the final estimate, as llama-perplexity */
  char want[256];
  snprintf(want, sizeof want, "[1]%.4f,[2]", json_real_value(json_array_get(json_object_get(j, "chunks"), 0)));
  assert_non_null(strstr(p.out, want));
  snprintf(want, sizeof want, "[%d]%.4f,\nFinal estimate: PPL = %.4f +/- %.5f\n", ref.n_chunk, ppl, ppl, err);
  assert_non_null(strstr(p.out, want));
  json_decref(j);
  kt_proc_free(&p);
  kt_proc_free(&q);
  /* the text from standard input, and a context the text is too short for */
  const char *in[] = {"perplexity", "-m", model, "-f", "-", "-c", "256", "--chunks", "2", "--json", NULL};
  FILE *f = fopen(text, "rb");
  char *buf = malloc(1 << 20);
  size_t len = fread(buf, 1, 1 << 20, f);
  fclose(f);
  assert_true(kt_kiln(in, buf, len, false, &p));
  assert_int_equal(p.status, 0);
  j = json_loads(p.out, 0, NULL);
  assert_int_equal(json_integer_value(json_object_get(j, "n_chunk")), 2);
  json_decref(j);
  kt_proc_free(&p);
  /* refusals come before the chunk summary, and print nothing else */
  const char *big[] = {"perplexity", "-m", model, "-f", text, "-c", "2048", NULL};
  assert_true(kt_kiln(big, NULL, 0, false, &p));
  assert_int_equal(p.status, 1);
  assert_non_null(strstr(p.err, "you need at least 4096 tokens"));
  assert_null(strstr(p.err, "chunks of n_ctx"));
  assert_int_equal(p.out_len, 0);
  kt_proc_free(&p);
  /* a chunk of fewer than 3 tokens from -c: the command line's fault (exit
   * 2), naming the flag and its value */
  const char *tiny[] = {"perplexity", "-m", model, "-f", text, "-c", "1", NULL};
  assert_true(kt_kiln(tiny, NULL, 0, false, &p));
  if (p.status != 2) fail_msg("-c 1: exit %d, expected 2: %s", p.status, p.err);
  assert_non_null(strstr(p.err, "--ctx-size: [model] n_ctx = 1: a perplexity chunk needs at least 3 tokens"));
  assert_null(strstr(p.err, "chunks of n_ctx"));
  assert_int_equal(p.out_len, 0);
  kt_proc_free(&p);
  free(buf);
  free(text);
  free(model);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_f32),
      cmocka_unit_test(test_cpu_f64),
      cmocka_unit_test(test_command),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
