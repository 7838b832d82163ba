/* SentencePiece vocabularies from real GGUF files against llama.cpp:
 * llama.cpp's own test-tokenizer-0 cases for ggml-vocab-llama-spm.gguf
 * (../shared/tokenizers/llama-spm), and the expected-id files made with
 * llama-cpp-python (tests/data/tokenizer/gen_ids.py) for that vocabulary
 * and for stories260K's 512-token one. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln/gguf.h"
#include "kiln/tokenizer.h"
#include "testutil.h"
#include "tokenizer_cases.h"

typedef struct fixture {
  kiln_gguf *g;
  kiln_vocab *v;
} fixture;

/* Opens models/<name> and loads its vocabulary; skips if the file is
 * missing. */
static bool open_vocab(const char *name, fixture *f) {
  memset(f, 0, sizeof *f);
  char *path = kt_model_path(name);
  if (!path) return false;
  KT_ASSERT_OK(kiln_gguf_open(path, &f->g));
  free(path);
  KT_ASSERT_OK(kiln_vocab_load(f->g, &f->v));
  /* The vocabulary copies what it needs: the file can go now. */
  kiln_gguf_close(f->g);
  f->g = NULL;
  return true;
}

static void close_vocab(fixture *f) { kiln_vocab_free(f->v); }

static void run_ids_file(const kiln_vocab *v, const char *file, size_t min_cases) {
  char *path = tk_data_path(file);
  assert_non_null(path);
  tk_cases c;
  assert_true(tk_read_ids_file(path, &c));
  assert_true(c.n >= min_cases);
  size_t good = tk_check_cases(v, &c, file);
  size_t bad_rt = 0, bad_dec = 0;
  size_t rt = tk_check_roundtrip(v, &c, file, &bad_rt);
  size_t dec = tk_check_decode(v, &c, file, &bad_dec);
  printf("%s: %zu/%zu cases match llama.cpp; decoding matches llama.cpp for %zu/%zu; "
         "decode(encode(x)) == x for %zu/%zu\n",
         file, good, c.n, dec - bad_dec, dec, rt - bad_rt, rt);
  assert_int_equal(good, c.n);
  assert_int_equal(bad_rt, 0);
  assert_int_equal(bad_dec, 0);
  assert_true(dec > 0);
  tk_cases_free(&c);
  free(path);
}

static void test_llama_cpp_cases(void **state) {
  (void)state;
  fixture f;
  if (!open_vocab("ggml-vocab-llama-spm.gguf", &f)) skip();
  char *inp = kt_tokenizer_path("llama-spm/ggml-vocab-llama-spm.gguf.inp");
  char *out = kt_tokenizer_path("llama-spm/ggml-vocab-llama-spm.gguf.out");
  if (!inp || !out) {
    free(inp);
    free(out);
    close_vocab(&f);
    skip();
  }
  tk_cases c;
  assert_true(tk_read_llama_pair(inp, out, &c));
  /* 46 inputs in the file; the reader must not merge or drop any. */
  assert_int_equal(c.n, 46);
  size_t good = tk_check_cases(f.v, &c, "ggml-vocab-llama-spm.gguf.inp");
  size_t bad_rt = 0;
  size_t rt = tk_check_roundtrip(f.v, &c, "ggml-vocab-llama-spm.gguf.inp", &bad_rt);
  printf("llama.cpp test-tokenizer-0 (llama-spm): %zu/%zu cases match; round trip %zu/%zu\n",
         good, c.n, rt - bad_rt, rt);
  assert_int_equal(good, c.n);
  assert_int_equal(bad_rt, 0);
  tk_cases_free(&c);
  free(inp);
  free(out);
  close_vocab(&f);
}

static void test_llama_spm_extra(void **state) {
  (void)state;
  fixture f;
  if (!open_vocab("ggml-vocab-llama-spm.gguf", &f)) skip();
  run_ids_file(f.v, "llama_spm_extra.ids", 16);
  close_vocab(&f);
}

static void test_llama_spm_vocab_keys(void **state) {
  (void)state;
  fixture f;
  if (!open_vocab("ggml-vocab-llama-spm.gguf", &f)) skip();
  kiln_vocab *v = f.v;
  assert_int_equal(kiln_vocab_kind_of(v), KILN_VOCAB_SPM);
  assert_int_equal(kiln_vocab_n_tokens(v), 32000);
  assert_int_equal(kiln_vocab_bos(v), 1);
  assert_int_equal(kiln_vocab_eos(v), 2);
  assert_int_equal(kiln_vocab_eot(v), -1); /* Llama 2 has no end-of-turn token */
  assert_true(kiln_vocab_add_bos(v));
  assert_string_equal(kiln_vocab_token_text(v, 15043), "\xE2\x96\x81Hello");
  assert_int_equal(kiln_vocab_find(v, "\xE2\x96\x81Hello", 8), 15043);
  assert_int_equal(kiln_vocab_find(v, "<0x0A>", 6), 13);
  assert_int_equal(kiln_vocab_token_type(v, 13), KILN_TOKEN_BYTE);
  assert_int_equal(kiln_vocab_token_type(v, 1), KILN_TOKEN_CONTROL);
  assert_int_equal(kiln_vocab_token_type(v, 0), KILN_TOKEN_UNKNOWN);
  /* Pieces: "▁" is a space, <0x0A> a newline byte, <s> only when shown. */
  char buf[16];
  size_t len = 0;
  KT_ASSERT_OK(kiln_token_to_piece(v, 15043, false, buf, sizeof buf, &len));
  KT_ASSERT_OK(kiln_token_to_piece(v, 13, false, buf, sizeof buf, &len));
  KT_ASSERT_OK(kiln_token_to_piece(v, 1, false, buf, sizeof buf, &len));
  assert_int_equal(len, 7);
  assert_memory_equal(buf, " Hello\n", 7);
  KT_ASSERT_OK(kiln_token_to_piece(v, 1, true, buf, sizeof buf, &len));
  assert_int_equal(len, 10);
  assert_memory_equal(buf + 7, "<s>", 3);
  close_vocab(&f);
}

static void test_stories_once_upon_a_time(void **state) {
  (void)state;
  fixture f;
  if (!open_vocab("stories260K.gguf", &f)) skip();
  kiln_vocab *v = f.v;
  assert_int_equal(kiln_vocab_n_tokens(v), 512);
  assert_true(kiln_vocab_add_bos(v));
  /* seperator/padding ids are 0xFFFFFFFF ("none") in this file; the load
   * above must have accepted them. */
  int32_t *ids = NULL;
  size_t n = 0;
  KT_ASSERT_OK(kiln_tokenize(v, "Once upon a time", 16, KILN_TOKENIZE_ADD_BOS, &ids, &n));
  /* llama-cpp-python 0.3.36: Llama("stories260K.gguf", vocab_only=True)
   * .tokenize(b"Once upon a time", add_bos=True) == [1, 403, 407, 261, 378];
   * the same line is in stories260k.ids, checked below against all cases. */
  const int32_t want[] = {1, 403, 407, 261, 378};
  assert_int_equal(n, 5);
  assert_memory_equal(ids, want, sizeof want);
  char *text = NULL;
  size_t len = 0;
  KT_ASSERT_OK(kiln_detokenize(v, ids, n, false, &text, &len));
  assert_string_equal(text, "Once upon a time");
  free(text);
  KT_ASSERT_OK(kiln_detokenize(v, ids, n, true, &text, &len));
  assert_string_equal(text, "<s>Once upon a time");
  free(text);
  free(ids);
  close_vocab(&f);
}

static void test_stories_ids_file(void **state) {
  (void)state;
  fixture f;
  if (!open_vocab("stories260K.gguf", &f)) skip();
  run_ids_file(f.v, "stories260k.ids", 30);
  close_vocab(&f);
}

static void test_llama2_model_file(void **state) {
  (void)state;
  /* llama-2-tiny-random.gguf carries Llama 2's vocabulary inside a real
   * model file (with tensors): llama.cpp's cases must pass with it too. */
  fixture f;
  if (!open_vocab("llama-2-tiny-random.gguf", &f)) skip();
  char *inp = kt_tokenizer_path("llama-spm/ggml-vocab-llama-spm.gguf.inp");
  char *out = kt_tokenizer_path("llama-spm/ggml-vocab-llama-spm.gguf.out");
  if (!inp || !out) {
    free(inp);
    free(out);
    close_vocab(&f);
    skip();
  }
  tk_cases c;
  assert_true(tk_read_llama_pair(inp, out, &c));
  size_t good = tk_check_cases(f.v, &c, "llama-2-tiny-random.gguf");
  printf("llama.cpp test-tokenizer-0 cases with llama-2-tiny-random.gguf: %zu/%zu match\n", good,
         c.n);
  assert_int_equal(good, c.n);
  tk_cases_free(&c);
  free(inp);
  free(out);
  close_vocab(&f);
}

static void test_model_without_vocabulary(void **state) {
  (void)state;
  char *path = kt_model_path("tiny-qwen3-q8_0.gguf");
  if (!path) skip();
  kiln_gguf *g = NULL;
  KT_ASSERT_OK(kiln_gguf_open(path, &g));
  kiln_vocab *v = NULL;
  KT_ASSERT_ERR(kiln_vocab_load(g, &v), KILN_STATUS_NOT_FOUND, "tokenizer.ggml.model");
  assert_null(v);
  kiln_gguf_close(g);
  free(path);
}

int main(void) {
  /* What the cases read. A case whose file is missing calls skip(), which
   * cmocka counts as a pass; so the program answers 77 (automake's SKIP)
   * when anything is missing, unless a case that could run failed. */
  static const char *const models[] = {
      "ggml-vocab-llama-spm.gguf",
      "stories260K.gguf",
      "llama-2-tiny-random.gguf",
      "tiny-qwen3-q8_0.gguf",
  };
  unsigned missing = 0;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
    missing += !kt_have_model(models[i]);
  static const char *const tokenizer_files[] = {
      "llama-spm/ggml-vocab-llama-spm.gguf.inp",
      "llama-spm/ggml-vocab-llama-spm.gguf.out",
  };
  for (size_t i = 0; i < sizeof tokenizer_files / sizeof tokenizer_files[0]; i++) {
    char *p = kt_tokenizer_path(tokenizer_files[i]);
    missing += !p;
    free(p);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_cpp_cases),
      cmocka_unit_test(test_llama_spm_extra),
      cmocka_unit_test(test_llama_spm_vocab_keys),
      cmocka_unit_test(test_stories_once_upon_a_time),
      cmocka_unit_test(test_stories_ids_file),
      cmocka_unit_test(test_llama2_model_file),
      cmocka_unit_test(test_model_without_vocabulary),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  return failed ? 1 : missing ? 77 : 0;
}
