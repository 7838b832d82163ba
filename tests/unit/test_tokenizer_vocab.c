/* kiln_vocab_load's checks on the tokenizer.ggml.* keys, on small GGUF
 * files written in memory (kiln_gguf_writer): every defect must be an
 * error naming the key, never a crash or a silent default. */
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

#include "kiln/gguf.h"
#include "kiln/gguf_write.h"
#include "kiln/tokenizer.h"
#include "testutil.h"

/* A 6-token SentencePiece vocabulary. The last token is "\u2581a", split
 * into two literals because "\xE2\x96\x81a" would read \x81a as one hex
 * escape; the parentheses say it is one element (clang's
 * -Wstring-concatenation asks whether a comma is missing). */
static const char *const spm_tokens[] = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a",
                                         ("\xE2\x96\x81" "a")};
static const float spm_scores[] = {0, 0, 0, -3, -2, -1};
static const int32_t spm_types[] = {2, 3, 3, 1, 1, 1};
_Static_assert(sizeof spm_tokens / sizeof spm_tokens[0] == sizeof spm_scores / sizeof spm_scores[0] &&
                   sizeof spm_tokens / sizeof spm_tokens[0] == sizeof spm_types / sizeof spm_types[0],
               "one score and one type per token");

static kiln_gguf_writer *spm_writer(void) {
  kiln_gguf_writer *w = NULL;
  KT_ASSERT_OK(kiln_gguf_writer_new(&w));
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "general.architecture", "llama"));
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", spm_tokens, 6));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", spm_scores, 6));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", spm_types, 6));
  return w;
}

/* A byte-level BPE vocabulary: "a", "b", "ab", "<|im_end|>" and one merge. */
static const char *const bpe_tokens[] = {"a", "b", "ab", "<|im_end|>"};
static const int32_t bpe_types[] = {1, 1, 1, 3};
static const char *const bpe_merges[] = {"a b"};

static kiln_gguf_writer *bpe_writer(void) {
  kiln_gguf_writer *w = NULL;
  KT_ASSERT_OK(kiln_gguf_writer_new(&w));
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2"));
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2"));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", bpe_tokens, 4));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", bpe_types, 4));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", bpe_merges, 1));
  return w;
}

/* Writes w to memory, opens it and loads the vocabulary. Returns the
 * status; *out_vocab is set on success. Frees w. */
static kiln_status try_load(kiln_gguf_writer *w, kiln_vocab **out_vocab) {
  void *data = NULL;
  size_t size = 0;
  KT_ASSERT_OK(kiln_gguf_writer_write_memory(w, &data, &size));
  kiln_gguf_writer_free(w);
  kiln_gguf *g = NULL;
  KT_ASSERT_OK(kiln_gguf_open_memory(data, size, "vocab.gguf", &g));
  *out_vocab = NULL;
  kiln_status st = kiln_vocab_load(g, out_vocab);
  kiln_gguf_close(g);
  free(data);
  if (st) assert_null(*out_vocab);
  return st;
}

static void test_good_files_load(void **state) {
  (void)state;
  kiln_vocab *v = NULL;
  KT_ASSERT_OK(try_load(spm_writer(), &v));
  assert_int_equal(kiln_vocab_kind_of(v), KILN_VOCAB_SPM);
  /* Absent keys: llama.cpp's SPM defaults bos 1, eos 2, add_bos true. */
  assert_int_equal(kiln_vocab_bos(v), 1);
  assert_int_equal(kiln_vocab_eos(v), 2);
  assert_true(kiln_vocab_add_bos(v));
  int32_t *ids = NULL;
  size_t n = 0;
  KT_ASSERT_OK(kiln_tokenize(v, "a a", 3, KILN_TOKENIZE_ADD_BOS, &ids, &n));
  const int32_t want[] = {1, 5, 5};
  assert_int_equal(n, 3);
  assert_memory_equal(ids, want, sizeof want);
  free(ids);
  kiln_vocab_free(v);

  /* BPE: scores are optional, pre is read, eot found by text. */
  KT_ASSERT_OK(try_load(bpe_writer(), &v));
  assert_int_equal(kiln_vocab_kind_of(v), KILN_VOCAB_BPE);
  assert_int_equal(kiln_vocab_bos(v), -1);
  assert_false(kiln_vocab_add_bos(v));
  assert_int_equal(kiln_vocab_eot(v), 3);
  KT_ASSERT_OK(kiln_tokenize(v, "ab", 2, 0, &ids, &n));
  assert_int_equal(n, 1);
  assert_int_equal(ids[0], 2);
  free(ids);
  kiln_vocab_free(v);
}

static void test_missing_keys(void **state) {
  (void)state;
  kiln_vocab *v;
  kiln_gguf_writer *w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_remove(w, "tokenizer.ggml.model"));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_NOT_FOUND, "tokenizer.ggml.model");

  w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_remove(w, "tokenizer.ggml.tokens"));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_NOT_FOUND, "tokenizer.ggml.tokens");

  w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_remove(w, "tokenizer.ggml.scores"));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_NOT_FOUND, "tokenizer.ggml.scores");

  w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_remove(w, "tokenizer.ggml.token_type"));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_NOT_FOUND, "tokenizer.ggml.token_type");

  w = bpe_writer();
  KT_ASSERT_OK(kiln_gguf_writer_remove(w, "tokenizer.ggml.merges"));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_NOT_FOUND, "tokenizer.ggml.merges");
}

static void test_mismatched_lengths(void **state) {
  (void)state;
  kiln_vocab *v;
  kiln_gguf_writer *w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", spm_scores, 5));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.scores has 5 entries");

  w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", spm_types, 4));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.token_type has 4 entries");

  w = bpe_writer();
  const float two[] = {0, 0};
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", two, 2));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.scores has 2 entries");
}

static void test_wrong_types(void **state) {
  (void)state;
  kiln_vocab *v;
  kiln_gguf_writer *w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "tokenizer.ggml.model", 7));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.model");

  w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_str(w, "tokenizer.ggml.scores", spm_tokens, 6));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.scores");

  w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_f32(w, "tokenizer.ggml.token_type", spm_scores, 6));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.token_type");

  w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "tokenizer.ggml.bos_token_id", "1"));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.bos_token_id");

  w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "tokenizer.ggml.add_bos_token", 1));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.add_bos_token");

  /* Integer scores are accepted, as llama.cpp does. */
  w = spm_writer();
  const int32_t iscores[] = {0, 0, 0, -3, -2, -1};
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_i32(w, "tokenizer.ggml.scores", iscores, 6));
  KT_ASSERT_OK(try_load(w, &v));
  kiln_vocab_free(v);
}

static void test_special_ids(void **state) {
  (void)state;
  kiln_vocab *v;
  kiln_gguf_writer *w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 6));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.bos_token_id = 6");

  w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_i32(w, "tokenizer.ggml.eos_token_id", -7));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.eos_token_id = -7");

  w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 100000));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.unknown_token_id");

  /* 0xFFFFFFFF means "none" (stories260K writes it for its separator). */
  w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 0xFFFFFFFFu));
  KT_ASSERT_OK(try_load(w, &v));
  assert_int_equal(kiln_vocab_eos(v), -1);
  kiln_vocab_free(v);

  /* add_bos_token true without a BOS is refused (llama.cpp throws too). */
  w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 0xFFFFFFFFu));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.add_bos_token is true");
  w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 0xFFFFFFFFu));
  KT_ASSERT_OK(kiln_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false));
  KT_ASSERT_OK(try_load(w, &v));
  assert_int_equal(kiln_vocab_bos(v), -1);
  assert_false(kiln_vocab_add_bos(v));
  KT_ASSERT_ERR(kiln_tokenize(v, "a", 1, KILN_TOKENIZE_ADD_BOS, &(int32_t *){NULL}, &(size_t){0}),
                KILN_STATUS_INVALID_ARGUMENT, "no BOS");
  kiln_vocab_free(v);

  /* An explicit eot_token_id wins over the text guess. */
  w = bpe_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "tokenizer.ggml.eot_token_id", 2));
  KT_ASSERT_OK(try_load(w, &v));
  assert_int_equal(kiln_vocab_eot(v), 2);
  kiln_vocab_free(v);

  /* add_bos_token true for gpt2 with a BOS. */
  w = bpe_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 3));
  KT_ASSERT_OK(kiln_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true));
  KT_ASSERT_OK(try_load(w, &v));
  assert_true(kiln_vocab_add_bos(v));
  assert_int_equal(kiln_vocab_bos(v), 3);
  kiln_vocab_free(v);
}

static void test_unsupported_models(void **state) {
  (void)state;
  kiln_vocab *v;
  kiln_gguf_writer *w = spm_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert"));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_UNSUPPORTED, "\"bert\"");

  w = bpe_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "tokenizer.ggml.pre", "deepseek-coder"));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_UNSUPPORTED, "\"deepseek-coder\"");

  /* No pre at all: llama.cpp's "default"; and the other supported names.
   * llama-bpe (Llama 3) adds BOS by default, so these files name one. */
  static const char *const ok[] = {"default", "gpt-2", "llama-bpe", "qwen2", "qwen35"};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    w = bpe_writer();
    KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "tokenizer.ggml.pre", ok[i]));
    KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 3));
    KT_ASSERT_OK(try_load(w, &v));
    assert_int_equal(kiln_vocab_add_bos(v), i == 2);
    kiln_vocab_free(v);
  }
  w = bpe_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "tokenizer.ggml.pre", "llama-bpe"));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "add_bos_token is true");
  w = bpe_writer();
  KT_ASSERT_OK(kiln_gguf_writer_remove(w, "tokenizer.ggml.pre"));
  KT_ASSERT_OK(try_load(w, &v));
  kiln_vocab_free(v);
}

static void test_bad_contents(void **state) {
  (void)state;
  kiln_vocab *v;
  kiln_gguf_writer *w = bpe_writer();
  const char *const merges[] = {"a b", "ab"};
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 2));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.merges[1] = \"ab\"");

  w = bpe_writer();
  const char *const dup[] = {"a", "b", "a", "<|im_end|>"};
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", dup, 4));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "appears twice");

  w = bpe_writer();
  const int32_t types[] = {1, 1, 7, 3};
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, 4));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.token_type[2] = 7");

  w = bpe_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", NULL, 0));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", NULL, 0));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.tokens has 0 entries");
}

/* A string value with a NUL inside is reported as such, never read up to
 * the NUL ("gpt2\0" once read as "gpt2" and was then refused as "gpt2",
 * a contradiction); values are shown escaped, as kiln inspect shows them. */
static void test_nul_in_values(void **state) {
  (void)state;
  kiln_vocab *v;
  kiln_gguf_writer *w = bpe_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_strn(w, "tokenizer.ggml.model", "gpt2\0", 5));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED,
                "tokenizer.ggml.model' = \"gpt2\\x00\" holds a NUL byte (at byte 4");

  w = bpe_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_strn(w, "tokenizer.ggml.pre", "qwen2\0x", 7));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED,
                "tokenizer.ggml.pre' = \"qwen2\\x00x\" holds a NUL byte");

  /* an unsupported value with control bytes: escaped in the message */
  w = bpe_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "tokenizer.ggml.model", "gp\x1b[2Jt"));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_UNSUPPORTED,
                "tokenizer.ggml.model = \"gp\\x1b[2Jt\" is not supported");

  w = bpe_writer();
  const char *const merges[] = {"a\x01_b"};
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 1));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED,
                "tokenizer.ggml.merges[0] = \"a\\x01_b\" is not");
}

/* A score that is not a finite number is refused at load, naming the key
 * and the index: SPM merges by comparing scores, which a NaN defeats
 * silently. Byte-level BPE does not merge by them but is checked alike. */
static void test_nonfinite_scores(void **state) {
  (void)state;
  kiln_vocab *v;
  const float bad[] = {NAN, INFINITY, -INFINITY};
  const char *const want[] = {"tokenizer.ggml.scores[4] = nan", "tokenizer.ggml.scores[4] = inf",
                              "tokenizer.ggml.scores[4] = -inf"};
  for (size_t k = 0; k < 3; k++) {
    float scores[6];
    memcpy(scores, spm_scores, sizeof scores);
    scores[4] = bad[k];
    kiln_gguf_writer *w = spm_writer();
    KT_ASSERT_OK(kiln_gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", scores, 6));
    KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, want[k]);
  }
  kiln_gguf_writer *w = bpe_writer();
  const float four[] = {0, NAN, 0, 0};
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", four, 4));
  KT_ASSERT_ERR(try_load(w, &v), KILN_STATUS_MALFORMED, "tokenizer.ggml.scores[1] = nan");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good_files_load),
      cmocka_unit_test(test_missing_keys),
      cmocka_unit_test(test_mismatched_lengths),
      cmocka_unit_test(test_wrong_types),
      cmocka_unit_test(test_special_ids),
      cmocka_unit_test(test_unsupported_models),
      cmocka_unit_test(test_bad_contents),
      cmocka_unit_test(test_nul_in_values),
      cmocka_unit_test(test_nonfinite_scores),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
