/* kiln tokenize, kiln detokenize and raw prompts through the command:
 *  - llama.cpp's own tokenizer cases for ggml-vocab-llama-spm.gguf
 *    (../shared/tokenizers/llama-spm, add_special and parse_special off),
 *    empty input included, through `kiln tokenize --ids`;
 *  - hand-templated ChatML prompts on ggml-vocab-qwen2.gguf give the ids of
 *    Hugging Face `tokenizers` (tests/data/tokenizer/qwen2_special_hf.ids,
 *    made by gen_special_ids.py there), special tokens parsed by default
 *    and kept text with --no-special: through `kiln tokenize` and through
 *    `kiln run` on a Qwen2 model synthesized with that vocabulary;
 *  - detokenize inverts tokenize; -f - and --stdin read standard input;
 *    --json output parses and says the same. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "../unit/tokenizer_cases.h"
#include "kiln/synth.h"
#include "kiln_proc.h"
#include "testutil.h"

/* The ids of a JSON array (kiln tokenize --ids prints "[1, 2, 3]"). */
static int32_t *json_ids(json_t *a, size_t *out_n) {
  assert_true(json_is_array(a));
  size_t n = json_array_size(a);
  int32_t *ids = malloc((n + 1) * sizeof *ids);
  for (size_t i = 0; i < n; i++) {
    assert_true(json_is_integer(json_array_get(a, i)));
    ids[i] = (int32_t)json_integer_value(json_array_get(a, i));
  }
  *out_n = n;
  return ids;
}

static json_t *parse(const char *text) {
  json_error_t e;
  json_t *j = json_loads(text, 0, &e);
  if (!j) fail_msg("not JSON (%s at %d): %s", e.text, e.position, text);
  return j;
}

static bool same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
  return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

static void print_ids(const char *what, const int32_t *ids, size_t n) {
  fprintf(stderr, "  %s:", what);
  for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
  fputc('\n', stderr);
}

static void test_llama_spm_cases(void **state) {
  (void)state;
  char *vocab = kt_model_path("ggml-vocab-llama-spm.gguf");
  char *inp = kt_tokenizer_path("llama-spm/ggml-vocab-llama-spm.gguf.inp");
  char *outp = kt_tokenizer_path("llama-spm/ggml-vocab-llama-spm.gguf.out");
  if (!vocab || !inp || !outp) skip();
  tk_cases cases;
  assert_true(tk_read_llama_pair(inp, outp, &cases));
  char *dir = kt_mkdtemp("tokenize");
  char path[4096];
  snprintf(path, sizeof path, "%s/case.txt", dir);
  size_t bad = 0, empty = 0;
  for (size_t i = 0; i < cases.n; i++) {
    const tk_case *k = &cases.v[i];
    assert_true(kt_write_file(path, k->text, k->len));
    const char *args[] = {"tokenize", "-m", vocab, "-f", path, "--ids", "--no-bos", "--no-parse-special", NULL};
    kt_proc p;
    assert_true(kt_kiln(args, NULL, 0, false, &p));
    if (p.status != 0) fail_msg("case %zu: exit %d: %s", i + 1, p.status, p.err);
    json_t *j = parse(p.out);
    size_t n;
    int32_t *ids = json_ids(j, &n);
    if (!same_ids(ids, n, k->ids, k->n_ids)) {
      bad++;
      fprintf(stderr, "case %zu (%s): ids differ from llama.cpp's\n", i + 1, k->text);
      print_ids("want", k->ids, k->n_ids);
      print_ids("got", ids, n);
    }
    empty += k->len == 0;
    free(ids);
    json_decref(j);
    kt_proc_free(&p);
  }
  fprintf(stderr, "llama-spm: %zu/%zu of llama.cpp's cases through kiln tokenize (%zu empty)\n", cases.n - bad,
          cases.n, empty);
  assert_int_equal(bad, 0);
  assert_true(cases.n >= 30);
  assert_true(empty >= 1); /* the empty input: no ids, no error */

  /* empty input with -p, and BOS alone when the vocabulary adds it */
  const char *e1[] = {"tokenize", "-m", vocab, "-p", "", "--ids", "--no-bos", NULL};
  const char *e2[] = {"tokenize", "-m", vocab, "-p", "", "--ids", "--show-count", NULL};
  kt_proc p;
  assert_true(kt_kiln(e1, NULL, 0, false, &p));
  assert_int_equal(p.status, 0);
  assert_string_equal(p.out, "[]\n");
  kt_proc_free(&p);
  assert_true(kt_kiln(e2, NULL, 0, false, &p));
  assert_int_equal(p.status, 0);
  assert_string_equal(p.out, "[1]\nTotal number of tokens: 1\n");
  kt_proc_free(&p);
  tk_cases_free(&cases);
  kt_rm_rf(dir);
  free(dir);
  free(vocab);
  free(inp);
  free(outp);
}

/* The pieces view, stdin, --json, and detokenize back to the text. */
static void test_pieces_stdin_json_detokenize(void **state) {
  (void)state;
  char *vocab = kt_model_path("ggml-vocab-llama-spm.gguf");
  if (!vocab) skip();
  const char *text = "Hello world\nline two";
  kt_proc p;
  const char *pieces[] = {"tokenize", "-m", vocab, "-p", "Hello world", NULL};
  assert_true(kt_kiln(pieces, NULL, 0, false, &p));
  assert_int_equal(p.status, 0);
  assert_string_equal(p.out, "     1 -> '<s>'\n 15043 -> ' Hello'\n  3186 -> ' world'\n");
  kt_proc_free(&p);
  /* -p processes escapes (llama.cpp's default), --no-escape keeps them */
  const char *esc[] = {"tokenize", "-m", vocab, "-p", "Hello world\\nline two", "--ids", NULL};
  const char *raw[] = {"tokenize", "-m", vocab, "-p", "Hello world\\nline two", "--ids", "--no-escape", NULL};
  const char *in1[] = {"tokenize", "-m", vocab, "--stdin", "--ids", NULL};
  const char *in2[] = {"tokenize", "-m", vocab, "-f", "-", "--json", NULL};
  kt_proc a, b, c, d;
  assert_true(kt_kiln(esc, NULL, 0, false, &a));
  assert_true(kt_kiln(raw, NULL, 0, false, &b));
  assert_true(kt_kiln(in1, text, strlen(text), false, &c));
  assert_true(kt_kiln(in2, text, strlen(text), false, &d));
  assert_int_equal(a.status + b.status + c.status + d.status, 0);
  assert_string_equal(a.out, c.out);
  assert_string_not_equal(a.out, b.out);
  json_t *ja = parse(a.out), *jd = parse(d.out);
  size_t na, nd;
  int32_t *ia = json_ids(ja, &na), *id = json_ids(json_object_get(jd, "ids"), &nd);
  assert_true(same_ids(ia, na, id, nd));
  assert_int_equal(json_integer_value(json_object_get(jd, "n_tokens")), (json_int_t)nd);
  assert_int_equal(json_array_size(json_object_get(jd, "pieces")), nd);
  assert_string_equal(json_string_value(json_array_get(json_object_get(jd, "pieces"), 1)), " Hello");
  /* detokenize: the ids as tokenize --ids prints them, back to the text
     (BOS shows as "<s>" unless --no-special) */
  const char *de[] = {"detokenize", "-m", vocab, "--stdin", "--no-special", NULL};
  kt_proc e;
  assert_true(kt_kiln(de, a.out, a.out_len, false, &e));
  assert_int_equal(e.status, 0);
  assert_int_equal(e.out_len, strlen(text));
  assert_memory_equal(e.out, text, strlen(text));
  kt_proc_free(&e);
  const char *de2[] = {"detokenize", "-m", vocab, "-p", a.out, "--json", NULL};
  assert_true(kt_kiln(de2, NULL, 0, false, &e));
  assert_int_equal(e.status, 0);
  json_t *je = parse(e.out);
  assert_string_equal(json_string_value(json_object_get(je, "text")), "<s>Hello world\nline two");
  json_decref(je);
  kt_proc_free(&e);
  /* an id outside the vocabulary is an error naming it; given with -p, a
   * flag's value out of range (exit 2) */
  const char *de3[] = {"detokenize", "-m", vocab, "-p", "1 99999", NULL};
  assert_true(kt_kiln(de3, NULL, 0, false, &e));
  assert_int_equal(e.status, 2);
  assert_non_null(strstr(e.err, "99999"));
  kt_proc_free(&e);
  free(ia);
  free(id);
  json_decref(ja);
  json_decref(jd);
  kt_proc_free(&a);
  kt_proc_free(&b);
  kt_proc_free(&c);
  kt_proc_free(&d);
  free(vocab);
}

/* Qwen2: hand-templated ChatML through kiln tokenize and kiln run. */
static void test_qwen2_special_tokens(void **state) {
  (void)state;
  char *vocab = kt_model_path("ggml-vocab-qwen2.gguf");
  char *data = tk_data_path("qwen2_special_hf.ids");
  if (!vocab || !data) skip();
  tk_cases cases;
  assert_true(tk_read_ids_file(data, &cases));
  assert_int_equal(cases.n, 6);
  char *dir = kt_mkdtemp("special");
  char model[4096], path[4096];
  snprintf(model, sizeof model, "%s/q.gguf", dir);
  snprintf(path, sizeof path, "%s/prompt.txt", dir);
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_QWEN2);
  o.n_layer = 1;
  o.n_embd = 64;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.embd_type = KILN_TYPE_Q8_0;
  o.vocab_from = vocab;
  KT_ASSERT_OK(kiln_synth_write(&o, model));
  for (size_t i = 0; i < cases.n; i++) {
    const tk_case *k = &cases.v[i];
    bool special = (k->flags & KILN_TOKENIZE_PARSE_SPECIAL) != 0;
    assert_true(kt_write_file(path, k->text, k->len));
    /* kiln tokenize: special tokens parsed unless --no-special */
    const char *tok[] = {"tokenize", "-m", vocab, "-f", path, "--ids", special ? NULL : "--no-special", NULL};
    kt_proc p;
    assert_true(kt_kiln(tok, NULL, 0, false, &p));
    assert_int_equal(p.status, 0);
    json_t *j = parse(p.out);
    size_t n;
    int32_t *ids = json_ids(j, &n);
    if (!same_ids(ids, n, k->ids, k->n_ids)) {
      print_ids("Hugging Face", k->ids, k->n_ids);
      print_ids("kiln tokenize", ids, n);
      fail_msg("line %d: kiln tokenize%s differs from Hugging Face", k->line, special ? "" : " --no-special");
    }
    free(ids);
    json_decref(j);
    kt_proc_free(&p);
    /* kiln run: the raw prompt's ids are the same, from a file and from -p */
    for (int via_p = 0; via_p <= 1; via_p++) {
      const char *run[] = {"run", "-m", model, via_p ? "-p" : "-f", via_p ? k->text : path, "-n", "1", "--json",
                           special ? NULL : "--no-special", NULL};
      assert_true(kt_kiln(run, NULL, 0, false, &p));
      if (p.status != 0) fail_msg("kiln run exit %d: %s", p.status, p.err);
      j = parse(p.out);
      ids = json_ids(json_object_get(j, "prompt_ids"), &n);
      if (!same_ids(ids, n, k->ids, k->n_ids)) {
        print_ids("Hugging Face", k->ids, k->n_ids);
        print_ids("kiln run", ids, n);
        fail_msg("line %d: kiln run%s prompt ids differ from Hugging Face", k->line, special ? "" : " --no-special");
      }
      free(ids);
      json_decref(j);
      kt_proc_free(&p);
    }
  }
  /* -f - : the prompt from standard input */
  const tk_case *k = &cases.v[0];
  const char *run[] = {"run", "-m", model, "-f", "-", "-n", "1", "--json", NULL};
  kt_proc p;
  assert_true(kt_kiln(run, k->text, k->len, false, &p));
  assert_int_equal(p.status, 0);
  json_t *j = parse(p.out);
  size_t n;
  int32_t *ids = json_ids(json_object_get(j, "prompt_ids"), &n);
  assert_true(same_ids(ids, n, k->ids, k->n_ids));
  free(ids);
  json_decref(j);
  kt_proc_free(&p);
  tk_cases_free(&cases);
  kt_rm_rf(dir);
  free(dir);
  free(data);
  free(vocab);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_spm_cases),
      cmocka_unit_test(test_pieces_stdin_json_detokenize),
      cmocka_unit_test(test_qwen2_special_tokens),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
