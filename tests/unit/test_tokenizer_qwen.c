/* Byte-level BPE from real GGUF files: Qwen2's vocabulary
 * (ggml-vocab-qwen2.gguf, tokenizer.ggml.pre = qwen2) and Qwen3.5's
 * (qwen35), against llama.cpp through the expected-id files made by
 * tests/data/tokenizer/gen_ids.py (cross-checked there with Hugging Face
 * tokenizers), plus ChatML special tokens, round trips and speed. */
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
#include "kiln/gguf_write.h"
#include "kiln/tokenizer.h"
#include "testutil.h"
#include "tokenizer_cases.h"

static kiln_vocab *load(const char *name) {
  char *path = kt_model_path(name);
  if (!path) return NULL;
  kiln_gguf *g = NULL;
  KT_ASSERT_OK(kiln_gguf_open(path, &g));
  kiln_vocab *v = NULL;
  KT_ASSERT_OK(kiln_vocab_load(g, &v));
  kiln_gguf_close(g);
  free(path);
  return v;
}

static const char chatml[] = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";

static void test_chatml_special_tokens(void **state) {
  (void)state;
  kiln_vocab *v = load("ggml-vocab-qwen2.gguf");
  if (!v) skip();
  int32_t *ids = NULL;
  size_t n = 0;
  KT_ASSERT_OK(kiln_tokenize(v, chatml, sizeof chatml - 1, KILN_TOKENIZE_PARSE_SPECIAL, &ids, &n));
  const int32_t want[] = {151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198};
  assert_int_equal(n, sizeof want / sizeof *want);
  assert_memory_equal(ids, want, sizeof want);
  char *text = NULL;
  size_t len = 0;
  KT_ASSERT_OK(kiln_detokenize(v, ids, n, true, &text, &len));
  assert_int_equal(len, sizeof chatml - 1);
  assert_memory_equal(text, chatml, len);
  free(text);
  /* Without render_special the markers vanish and the rest stays. */
  KT_ASSERT_OK(kiln_detokenize(v, ids, n, false, &text, &len));
  assert_string_equal(text, "user\nHello\nassistant\n");
  free(text);
  free(ids);
  kiln_vocab_free(v);
}

static void test_special_text_without_flag_stays_text(void **state) {
  (void)state;
  kiln_vocab *v = load("ggml-vocab-qwen2.gguf");
  if (!v) skip();
  int32_t *ids = NULL;
  size_t n = 0;
  KT_ASSERT_OK(kiln_tokenize(v, "<|im_start|>", 12, 0, &ids, &n));
  assert_true(n > 1);
  for (size_t i = 0; i < n; i++) {
    assert_int_not_equal(ids[i], 151644);
    /* No added token at all (ids from 151643 on), CONTROL or USER_DEFINED. */
    assert_true(ids[i] < 151643);
  }
  free(ids);
  /* Nor from a whole ChatML prompt, nor from a USER_DEFINED token's text
   * (llama.cpp would match "[PAD151650]" even here; kiln never does). */
  KT_ASSERT_OK(kiln_tokenize(v, chatml, sizeof chatml - 1, 0, &ids, &n));
  for (size_t i = 0; i < n; i++) assert_true(ids[i] < 151643);
  char *text = NULL;
  size_t len = 0;
  KT_ASSERT_OK(kiln_detokenize(v, ids, n, false, &text, &len));
  assert_int_equal(len, sizeof chatml - 1);
  assert_memory_equal(text, chatml, len);
  free(text);
  free(ids);
  assert_int_equal(kiln_vocab_token_type(v, 151650), KILN_TOKEN_USER_DEFINED);
  KT_ASSERT_OK(kiln_tokenize(v, "[PAD151650]", 11, 0, &ids, &n));
  for (size_t i = 0; i < n; i++) assert_int_not_equal(ids[i], 151650);
  free(ids);
  KT_ASSERT_OK(kiln_tokenize(v, "[PAD151650]", 11, KILN_TOKENIZE_PARSE_SPECIAL, &ids, &n));
  assert_int_equal(n, 1);
  assert_int_equal(ids[0], 151650);
  free(ids);
  kiln_vocab_free(v);
}

static void test_vocab_keys(void **state) {
  (void)state;
  kiln_vocab *v = load("ggml-vocab-qwen2.gguf");
  if (!v) skip();
  assert_int_equal(kiln_vocab_kind_of(v), KILN_VOCAB_BPE);
  assert_int_equal(kiln_vocab_n_tokens(v), 151936);
  assert_int_equal(kiln_vocab_bos(v), 151643);
  assert_int_equal(kiln_vocab_eos(v), 151643);
  /* No tokenizer.ggml.eot_token_id in the file: found by its text. */
  assert_int_equal(kiln_vocab_eot(v), 151645);
  assert_string_equal(kiln_vocab_token_text(v, 151645), "<|im_end|>");
  /* Qwen's GGUF has no add_bos_token: false for gpt2 vocabularies. */
  assert_false(kiln_vocab_add_bos(v));
  assert_int_equal(kiln_vocab_token_type(v, 151644), KILN_TOKEN_CONTROL);
  assert_int_equal(kiln_vocab_find(v, "<|im_start|>", 12), 151644);
  assert_int_equal(kiln_vocab_find(v, "\xC4\xA0the", 5), 279); /* "Ġthe" */
  assert_int_equal(kiln_vocab_find(v, "not a token at all", 18), -1);
  kiln_vocab_free(v);
}

/* Checks v against an expected-id file: ids, llama.cpp's decoding, and
 * (when roundtrip) decode(encode(x)) == x for every case. */
static void check_ids_file(const kiln_vocab *v, const char *file, size_t min_cases,
                           bool roundtrip) {
  char *path = tk_data_path(file);
  assert_non_null(path);
  tk_cases c;
  assert_true(tk_read_ids_file(path, &c));
  assert_true(c.n >= min_cases);
  size_t good = tk_check_cases(v, &c, file);
  size_t bad_dec = 0, bad_rt = 0, rt = 0;
  size_t dec = tk_check_decode(v, &c, file, &bad_dec);
  if (roundtrip) rt = tk_check_roundtrip(v, &c, file, &bad_rt);
  printf("%s: %zu/%zu cases match llama.cpp; decoding matches llama.cpp for %zu/%zu", file, good,
         c.n, dec - bad_dec, dec);
  if (roundtrip) printf("; decode(encode(x)) == x for %zu/%zu", rt - bad_rt, rt);
  printf("\n");
  assert_int_equal(good, c.n);
  assert_int_equal(dec, c.n); /* BPE: every case is compared */
  assert_int_equal(bad_dec, 0);
  if (roundtrip) {
    assert_int_equal(rt, c.n); /* every input there is valid UTF-8 */
    assert_int_equal(bad_rt, 0);
  }
  tk_cases_free(&c);
  free(path);
}

static void run_ids_file(const char *model, const char *file, size_t min_cases) {
  kiln_vocab *v = load(model);
  if (!v) skip();
  check_ids_file(v, file, min_cases, true);
  kiln_vocab_free(v);
}

/* Qwen2's GGUF with tokenizer.ggml.pre set to `pre`, built with
 * kiln_gguf_writer the way gen_ids.py patches it for llama.cpp. */
static kiln_vocab *load_with_pre(const char *pre) {
  char *path = kt_model_path("ggml-vocab-qwen2.gguf");
  if (!path) return NULL;
  kiln_gguf *g = NULL;
  KT_ASSERT_OK(kiln_gguf_open(path, &g));
  kiln_gguf_writer *w = NULL;
  KT_ASSERT_OK(kiln_gguf_writer_new(&w));
  KT_ASSERT_OK(kiln_gguf_writer_copy_kvs(w, g, "", NULL));
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre));
  void *data = NULL;
  size_t size = 0;
  KT_ASSERT_OK(kiln_gguf_writer_write_memory(w, &data, &size));
  kiln_gguf_writer_free(w);
  kiln_gguf_close(g);
  kiln_gguf *g2 = NULL;
  KT_ASSERT_OK(kiln_gguf_open_memory(data, size, pre, &g2));
  kiln_vocab *v = NULL;
  KT_ASSERT_OK(kiln_vocab_load(g2, &v));
  kiln_gguf_close(g2);
  free(data);
  free(path);
  return v;
}

/* The gpt-2, llama-bpe and default pre-tokenizers on Qwen2's vocabulary.
 * These three clean up spaces when decoding (" ," -> ","), as llama.cpp
 * does, so decode(encode(x)) is not always x: only llama.cpp's decoding of
 * the ids is compared. */
static void test_other_pre_tokenizers(void **state) {
  (void)state;
  static const char *const pre[] = {"gpt-2", "llama-bpe", "default"};
  static const char *const file[] = {"qwen2_as_gpt2.ids", "qwen2_as_llama3.ids",
                                     "qwen2_as_default.ids"};
  for (int i = 0; i < 3; i++) {
    kiln_vocab *v = load_with_pre(pre[i]);
    if (!v) skip();
    check_ids_file(v, file[i], 50, false);
    kiln_vocab_free(v);
  }
}

static void test_qwen2_ids_file(void **state) {
  (void)state;
  run_ids_file("ggml-vocab-qwen2.gguf", "qwen2.ids", 50);
}

static void test_qwen35_ids_file(void **state) {
  (void)state;
  run_ids_file("ggml-vocab-qwen35.gguf", "qwen35.ids", 10);
}

static void test_invalid_utf8_byte_by_byte(void **state) {
  (void)state;
  kiln_vocab *v = load("ggml-vocab-qwen2.gguf");
  if (!v) skip();
  /* A truncated "é", a stray continuation byte, 0xFF, a UTF-16 surrogate
   * encoded in UTF-8, an overlong "/". */
  const char in[] = "caf\xC3 \x80x\xFFy \xED\xA0\x80 \xC0\xAF!";
  int32_t *ids = NULL;
  size_t n = 0;
  KT_ASSERT_OK(kiln_tokenize(v, in, sizeof in - 1, 0, &ids, &n));
  char *text = NULL;
  size_t len = 0;
  KT_ASSERT_OK(kiln_detokenize(v, ids, n, false, &text, &len));
  assert_int_equal(len, sizeof in - 1);
  assert_memory_equal(text, in, len);
  free(text);
  free(ids);
  kiln_vocab_free(v);
}

/* About 10 KB of English: sentences in a scrambled but fixed order. */
static char *english_10k(size_t *out_len) {
  static const char *const s[] = {
      "The committee postponed its decision until the budget figures were checked again. ",
      "She walked along the river, counting the boats that drifted past the old mill. ",
      "In 1998, the company shipped 4,500 units; by 2004 it was shipping twelve times that. ",
      "\"We can't promise anything,\" he said, \"but we'll try our best.\" ",
      "Photosynthesis converts light energy into chemical energy stored in glucose. ",
      "Nobody expected the quiet librarian to win the regional chess tournament.\n",
      "Tokenization speed matters when prompts run to thousands of words. ",
      "The bridge, completed in the spring, carries four lanes of traffic and a bike path. ",
      "They'd already left by the time the storm reached the coast.\n\n",
      "Internationalization and localization are often abbreviated i18n and l10n. ",
  };
  size_t cap = 10 * 1024, n = 0;
  char *buf = malloc(cap + 256);
  uint32_t x = 12345;
  while (n < cap) {
    x = x * 1103515245u + 12345u;
    const char *p = s[(x >> 16) % (sizeof s / sizeof *s)];
    size_t k = strlen(p);
    memcpy(buf + n, p, k);
    n += k;
  }
  buf[n] = '\0';
  *out_len = n;
  return buf;
}

/* 10 KB of English in one call: the qwen2 pre-tokenizer and BPE over a long
 * text come back to the same bytes. (How fast is a benchmark's question,
 * never a test's.) */
static void test_long_text_round_trip(void **state) {
  (void)state;
  kiln_vocab *v = load("ggml-vocab-qwen2.gguf");
  if (!v) skip();
  size_t len;
  char *text = english_10k(&len);
  int32_t *ids = NULL;
  size_t n = 0;
  KT_ASSERT_OK(kiln_tokenize(v, text, len, 0, &ids, &n));
  assert_true(n > len / 8); /* English runs ~4-5 bytes/token */
  char *back = NULL;
  size_t back_len = 0;
  KT_ASSERT_OK(kiln_detokenize(v, ids, n, false, &back, &back_len));
  assert_int_equal(back_len, len);
  assert_memory_equal(back, text, len);
  free(back);
  free(ids);
  free(text);
  kiln_vocab_free(v);
}

static void test_unsupported_pre_tokenizer(void **state) {
  (void)state;
  /* The same vocabulary with tokenizer.ggml.pre changed to one kiln does
   * not implement must be refused by name, not tokenized wrongly. */
  char *path = kt_model_path("ggml-vocab-qwen2.gguf");
  if (!path) skip();
  kiln_gguf *g = NULL;
  KT_ASSERT_OK(kiln_gguf_open(path, &g));
  const kiln_gguf_kv *pre = kiln_gguf_find_kv(g, "tokenizer.ggml.pre");
  assert_non_null(pre);
  assert_int_equal(pre->type, KILN_GGUF_STRING);
  /* Patch a copy of the file's bytes: "qwen2" -> "qwen9" at the value. */
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *bytes = malloc((size_t)size);
  assert_int_equal(fread(bytes, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  char *at = NULL;
  for (long i = 0; i + 32 < size; i++)
    if (!memcmp(bytes + i, "tokenizer.ggml.pre", 18)) {
      at = bytes + i + 18 + 4 + 8; /* key, type u32, length u64 */
      break;
    }
  assert_non_null(at);
  assert_memory_equal(at, "qwen2", 5);
  at[4] = '9';
  kiln_gguf *g2 = NULL;
  KT_ASSERT_OK(kiln_gguf_open_memory(bytes, (size_t)size, "patched.gguf", &g2));
  kiln_vocab *v = NULL;
  KT_ASSERT_ERR(kiln_vocab_load(g2, &v), KILN_STATUS_UNSUPPORTED, "\"qwen9\"");
  assert_null(v);
  kiln_gguf_close(g2);
  kiln_gguf_close(g);
  free(bytes);
  free(path);
}

int main(void) {
  /* What the cases read. A case whose file is missing calls skip(), which
   * cmocka counts as a pass; so the program answers 77 (automake's SKIP)
   * when anything is missing, unless a case that could run failed. */
  static const char *const models[] = {
      "ggml-vocab-qwen2.gguf",
      "ggml-vocab-qwen35.gguf",
  };
  unsigned missing = 0;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
    missing += !kt_have_model(models[i]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chatml_special_tokens),
      cmocka_unit_test(test_special_text_without_flag_stays_text),
      cmocka_unit_test(test_vocab_keys),
      cmocka_unit_test(test_qwen2_ids_file),
      cmocka_unit_test(test_qwen35_ids_file),
      cmocka_unit_test(test_other_pre_tokenizers),
      cmocka_unit_test(test_invalid_utf8_byte_by_byte),
      cmocka_unit_test(test_long_text_round_trip),
      cmocka_unit_test(test_unsupported_pre_tokenizer),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  return failed ? 1 : missing ? 77 : 0;
}
