/* The tokenizer algorithms on small vocabularies built in memory
 * (kiln__vocab_build), where each expected split follows from the rule it
 * tests: SentencePiece merges by score with ties to the leftmost pair and
 * byte fallback; byte-level BPE merges by rank, leftmost first; special
 * tokens only with PARSE_SPECIAL, longest first; invalid UTF-8 kept byte
 * for byte. The real vocabularies are in test_tokenizer_spm.c and
 * test_tokenizer_qwen.c. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "tokenizer/tokenizer_internal.h"

/* ---- building vocabularies ------------------------------------------- */

#define MAXTOK 600

typedef struct toy {
  const char *texts[MAXTOK];
  size_t lens[MAXTOK];
  float scores[MAXTOK];
  int32_t types[MAXTOK];
  char store[MAXTOK][8];
  int n;
  const char *merges[64];
  size_t merge_lens[64];
  size_t n_merges;
} toy;

static int toy_add(toy *t, const char *text, float score, int32_t type) {
  t->texts[t->n] = text;
  t->lens[t->n] = strlen(text);
  t->scores[t->n] = score;
  t->types[t->n] = type;
  return t->n++;
}

/* An SPM vocabulary in Llama's layout: <unk>, <s>, </s>, then the 256
 * <0xNN> byte tokens (ids 3..258), then `pieces` with their scores. */
static kiln_vocab *spm_vocab(const char *const *pieces, const float *scores, int n, int add_prefix) {
  static toy t;
  memset(&t, 0, sizeof t);
  toy_add(&t, "<unk>", 0, KILN_TOKEN_UNKNOWN);
  toy_add(&t, "<s>", 0, KILN_TOKEN_CONTROL);
  toy_add(&t, "</s>", 0, KILN_TOKEN_CONTROL);
  for (int b = 0; b < 256; b++) {
    snprintf(t.store[b], sizeof t.store[b], "<0x%02X>", b);
    toy_add(&t, t.store[b], 0, KILN_TOKEN_BYTE);
  }
  for (int i = 0; i < n; i++) toy_add(&t, pieces[i], scores[i], KILN_TOKEN_NORMAL);
  kiln__vocab_spec s = {.kind = KILN_VOCAB_SPM,
                        .n_tokens = t.n,
                        .texts = t.texts,
                        .text_lens = t.lens,
                        .scores = t.scores,
                        .types = t.types,
                        .bos = 1,
                        .eos = 2,
                        .unk = 0,
                        .eot = -1,
                        .add_bos = -1,
                        .add_space_prefix = add_prefix,
                        .name = "toy-spm"};
  kiln_vocab *v = NULL;
  KT_ASSERT_OK(kiln__vocab_build(&s, &v));
  return v;
}

#define SPM_PIECE(i) (259 + (i)) /* id of pieces[i] in spm_vocab */

/* A byte-level BPE vocabulary: ids 0..255 are the bytes' code points in
 * byte order, then `extra` tokens, with `merges`; pre-tokenizer `pre`. */
static kiln_vocab *bpe_vocab(const char *const *extra, const int32_t *extra_types, int n_extra,
                             const char *const *merges, int n_merges, const char *pre) {
  static toy t;
  memset(&t, 0, sizeof t);
  for (int b = 0; b < 256; b++) {
    size_t k = kiln__utf8_encode(kiln__byte_to_cp((uint8_t)b), t.store[b]);
    t.store[b][k] = '\0';
    toy_add(&t, t.store[b], 0, KILN_TOKEN_NORMAL);
  }
  for (int i = 0; i < n_extra; i++)
    toy_add(&t, extra[i], 0, extra_types ? extra_types[i] : KILN_TOKEN_NORMAL);
  for (int i = 0; i < n_merges; i++) {
    t.merges[i] = merges[i];
    t.merge_lens[i] = strlen(merges[i]);
  }
  kiln__vocab_spec s = {.kind = KILN_VOCAB_BPE,
                        .n_tokens = t.n,
                        .texts = t.texts,
                        .text_lens = t.lens,
                        .types = t.types,
                        .n_merges = (size_t)n_merges,
                        .merges = t.merges,
                        .merge_lens = t.merge_lens,
                        .pre = pre,
                        .bos = -1,
                        .eos = -1,
                        .unk = -1,
                        .eot = -1,
                        .add_bos = 0, /* llama-bpe would default to true, and has no BOS here */
                        .add_space_prefix = -1,
                        .name = "toy-bpe"};
  kiln_vocab *v = NULL;
  KT_ASSERT_OK(kiln__vocab_build(&s, &v));
  return v;
}

static void expect_ids(const kiln_vocab *v, const char *text, size_t len, int flags,
                       const int32_t *want, size_t n_want) {
  int32_t *ids = NULL;
  size_t n = 0;
  KT_ASSERT_OK(kiln_tokenize(v, text, len, flags, &ids, &n));
  if (n != n_want) {
    fprintf(stderr, "got:");
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", (int)ids[i]);
    fprintf(stderr, "\n");
  }
  assert_int_equal(n, n_want);
  for (size_t i = 0; i < n; i++) assert_int_equal(ids[i], want[i]);
  free(ids);
}

#define EXPECT(v, text, flags, ...)                                                  \
  do {                                                                               \
    const int32_t want_[] = {__VA_ARGS__};                                           \
    expect_ids(v, text, sizeof(text) - 1, flags, want_, sizeof want_ / sizeof *want_); \
  } while (0)

static void expect_decode(const kiln_vocab *v, const int32_t *ids, size_t n, bool special,
                          const char *want, size_t want_len) {
  char *text = NULL;
  size_t len = 0;
  KT_ASSERT_OK(kiln_detokenize(v, ids, n, special, &text, &len));
  assert_int_equal(len, want_len);
  assert_memory_equal(text, want, len);
  assert_int_equal(text[len], '\0');
  free(text);
}

/* ---- SentencePiece ---------------------------------------------------- */

static void test_spm_higher_score_wins(void **state) {
  (void)state;
  /* "bc" outscores "ab", so it merges first even though it is on the
   * right, and "a" is left alone. */
  const char *p[] = {"a", "b", "c", "ab", "bc"};
  const float s[] = {-10, -10, -10, -2, -1};
  kiln_vocab *v = spm_vocab(p, s, 5, 0);
  EXPECT(v, "abc", 0, SPM_PIECE(0), SPM_PIECE(4));
  kiln_vocab_free(v);
  /* Swap the scores: now "ab" goes first. */
  const float s2[] = {-10, -10, -10, -1, -2};
  v = spm_vocab(p, s2, 5, 0);
  EXPECT(v, "abc", 0, SPM_PIECE(3), SPM_PIECE(2));
  kiln_vocab_free(v);
}

static void test_spm_ties_go_left(void **state) {
  (void)state;
  const char *p[] = {"a", "ab", "ba"};
  const float s[] = {-10, -1, -1};
  kiln_vocab *v = spm_vocab(p, s, 3, 0);
  /* "aba": "ab" (left) and "ba" (right) tie; the leftmost merges. */
  EXPECT(v, "aba", 0, SPM_PIECE(1), SPM_PIECE(0));
  kiln_vocab_free(v);
}

static void test_spm_chains_merges(void **state) {
  (void)state;
  /* Merges build on merges: "ab" then "abc" then "abcd". */
  const char *p[] = {"a", "b", "c", "d", "ab", "abc", "abcd", "cd"};
  const float s[] = {-10, -10, -10, -10, -1, -2, -3, -5};
  kiln_vocab *v = spm_vocab(p, s, 8, 0);
  EXPECT(v, "abcd", 0, SPM_PIECE(6));
  kiln_vocab_free(v);
}

static void test_spm_space_prefix_and_escape(void **state) {
  (void)state;
  const char *p[] = {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "\xE2\x96\x81" "b"};
  const float s[] = {-5, -10, -10, -1, -1};
  kiln_vocab *v = spm_vocab(p, s, 5, -1); /* SPM default: add the prefix */
  /* "a b" is escaped to "▁a▁b". */
  EXPECT(v, "a b", 0, SPM_PIECE(3), SPM_PIECE(4));
  /* With BOS; and a leading space becomes a second "▁". */
  EXPECT(v, " a", KILN_TOKENIZE_ADD_BOS, 1, SPM_PIECE(0), SPM_PIECE(3));
  /* Decoding drops the prefix space only: at the start, and after BOS. */
  const int32_t ids[] = {SPM_PIECE(3), SPM_PIECE(4)};
  expect_decode(v, ids, 2, false, "a b", 3);
  const int32_t ids2[] = {1, SPM_PIECE(0), SPM_PIECE(3)};
  expect_decode(v, ids2, 3, false, " a", 2);
  expect_decode(v, ids2, 3, true, "<s> a", 5);
  kiln_vocab_free(v);
}

static void test_spm_byte_fallback(void **state) {
  (void)state;
  const char *p[] = {"a"};
  const float s[] = {-1};
  kiln_vocab *v = spm_vocab(p, s, 1, 0);
  /* "é" (C3 A9) is not a piece: its two bytes, as <0xC3> <0xA9>. */
  EXPECT(v, "a\xC3\xA9", 0, SPM_PIECE(0), 3 + 0xC3, 3 + 0xA9);
  const int32_t ids[] = {SPM_PIECE(0), 3 + 0xC3, 3 + 0xA9};
  expect_decode(v, ids, 3, false, "a\xC3\xA9", 3);
  kiln_vocab_free(v);
}

static void test_spm_unknown_without_byte_tokens(void **state) {
  (void)state;
  toy *t = calloc(1, sizeof *t);
  toy_add(t, "<unk>", 0, KILN_TOKEN_UNKNOWN);
  toy_add(t, "<s>", 0, KILN_TOKEN_CONTROL);
  toy_add(t, "</s>", 0, KILN_TOKEN_CONTROL);
  toy_add(t, "a", -1, KILN_TOKEN_NORMAL);
  kiln__vocab_spec s = {.kind = KILN_VOCAB_SPM, .n_tokens = t->n, .texts = t->texts,
                        .text_lens = t->lens, .scores = t->scores, .types = t->types, .bos = 1,
                        .eos = 2, .unk = 0, .eot = -1, .add_bos = -1, .add_space_prefix = 0,
                        .name = "no-bytes"};
  kiln_vocab *v = NULL;
  KT_ASSERT_OK(kiln__vocab_build(&s, &v));
  EXPECT(v, "axa", 0, 3, 0, 3);
  kiln_vocab_free(v);
  free(t);
}

static void test_spm_invalid_utf8(void **state) {
  (void)state;
  const char *p[] = {"a", "b"};
  const float s[] = {-1, -1};
  kiln_vocab *v = spm_vocab(p, s, 2, 0);
  /* 0xFF announces a 4-byte sequence (llama.cpp's unicode_len_utf8), so
   * "\xFF\xFE" and the "b" after it form one symbol, which is no piece:
   * three byte tokens, as llama.cpp gives. Nothing is dropped. */
  EXPECT(v, "a\xFF\xFE" "b", 0, SPM_PIECE(0), 3 + 0xFF, 3 + 0xFE, 3 + 'b');
  /* A lone continuation byte is one symbol of its own. */
  EXPECT(v, "\x80" "a", 0, 3 + 0x80, SPM_PIECE(0));
  const int32_t ids[] = {SPM_PIECE(0), 3 + 0xFF, 3 + 0xFE, 3 + 'b'};
  expect_decode(v, ids, 4, false, "a\xFF\xFE" "b", 4);
  kiln_vocab_free(v);
}

static void test_spm_control_tokens_need_parse_special(void **state) {
  (void)state;
  /* "<", "s", ">" and every pair of them are pieces, so merging could
   * spell "<s>"; it must not produce the CONTROL token <s> (id 1). */
  const char *p[] = {"<", "s", ">", "<s", "s>", "\xE2\x96\x81"};
  const float s[] = {-10, -10, -10, -1, -1, -20};
  kiln_vocab *v = spm_vocab(p, s, 6, -1);
  int32_t *ids = NULL;
  size_t n = 0;
  KT_ASSERT_OK(kiln_tokenize(v, "<s>", 3, 0, &ids, &n));
  for (size_t i = 0; i < n; i++) assert_int_not_equal(ids[i], 1);
  free(ids);
  /* With PARSE_SPECIAL it is the token, and text after it gets the space
   * prefix again (llama.cpp: "prefix with space if previous is special"). */
  EXPECT(v, "<s>s", KILN_TOKENIZE_PARSE_SPECIAL, 1, SPM_PIECE(5), SPM_PIECE(1));
  /* <unk> (UNKNOWN) is cut out too, as llama.cpp does. */
  EXPECT(v, "<unk>", KILN_TOKENIZE_PARSE_SPECIAL, 0);
  kiln_vocab_free(v);
}

static void test_spm_empty(void **state) {
  (void)state;
  const char *p[] = {"\xE2\x96\x81"};
  const float s[] = {-1};
  kiln_vocab *v = spm_vocab(p, s, 1, -1);
  int32_t *ids = NULL;
  size_t n = 7;
  /* No fragment, so no "▁" prefix either. */
  KT_ASSERT_OK(kiln_tokenize(v, "", 0, 0, &ids, &n));
  assert_int_equal(n, 0);
  assert_non_null(ids);
  free(ids);
  KT_ASSERT_OK(kiln_tokenize(v, NULL, 0, KILN_TOKENIZE_ADD_BOS, &ids, &n));
  assert_int_equal(n, 1);
  assert_int_equal(ids[0], 1);
  free(ids);
  char *text = NULL;
  size_t len = 9;
  KT_ASSERT_OK(kiln_detokenize(v, NULL, 0, true, &text, &len));
  assert_int_equal(len, 0);
  assert_string_equal(text, "");
  free(text);
  kiln_vocab_free(v);
}

/* ---- byte-level BPE --------------------------------------------------- */

static void test_bpe_rank_order(void **state) {
  (void)state;
  /* "b c" has the lower rank, so "abc" is a + bc although "a b" also
   * applies. */
  const char *extra[] = {"bc", "ab"};
  const char *merges[] = {"b c", "a b"};
  kiln_vocab *v = bpe_vocab(extra, NULL, 2, merges, 2, "gpt-2");
  EXPECT(v, "abc", 0, 'a', 256);
  kiln_vocab_free(v);
  const char *merges2[] = {"a b", "b c"};
  v = bpe_vocab(extra, NULL, 2, merges2, 2, "gpt-2");
  EXPECT(v, "abc", 0, 257, 'c');
  kiln_vocab_free(v);
}

static void test_bpe_leftmost_first(void **state) {
  (void)state;
  /* "aaa" with only "a a": both pairs have rank 0; the left one merges,
   * giving aa + a (rightmost would give a + aa). */
  const char *extra[] = {"aa"};
  const char *merges[] = {"a a"};
  kiln_vocab *v = bpe_vocab(extra, NULL, 1, merges, 1, "gpt-2");
  EXPECT(v, "aaa", 0, 256, 'a');
  EXPECT(v, "aaaa", 0, 256, 256);
  kiln_vocab_free(v);
}

static void test_bpe_merges_through_non_token_parts(void **state) {
  (void)state;
  /* "x y" makes "xy", which is no token, but "xy z" makes "xyz", which is:
   * llama.cpp keys merges by strings, so this chain works there and must
   * here. */
  const char *extra[] = {"xyz"};
  const char *merges[] = {"x y", "xy z"};
  kiln_vocab *v = bpe_vocab(extra, NULL, 1, merges, 2, "gpt-2");
  EXPECT(v, "xyz", 0, 256);
  /* "xy" alone stays "xy" as a symbol but is no token: its bytes. */
  EXPECT(v, "xy", 0, 'x', 'y');
  kiln_vocab_free(v);
}

static void test_bpe_words_do_not_merge_across(void **state) {
  (void)state;
  /* "Ġ" is the code point of the space byte; "Ġa" is " a". GPT-2's
   * pre-tokenizer keeps " a" together and cuts before it, so "a a" is
   * a + Ġa; the merge "a Ġ" never sees its pair. */
  const char *extra[] = {"\xC4\xA0" "a", "a\xC4\xA0"};
  const char *merges[] = {"a \xC4\xA0", "\xC4\xA0 a"};
  kiln_vocab *v = bpe_vocab(extra, NULL, 2, merges, 2, "gpt-2");
  EXPECT(v, "a a", 0, 'a', 256);
  const int32_t ids[] = {'a', 256};
  expect_decode(v, ids, 2, false, "a a", 3);
  kiln_vocab_free(v);
}

static void test_bpe_invalid_utf8_kept(void **state) {
  (void)state;
  kiln_vocab *v = bpe_vocab(NULL, NULL, 0, NULL, 0, "qwen2");
  /* Every byte of an ill-formed sequence becomes its byte token (llama.cpp
   * would turn each into U+FFFD), so decoding gives the input back. */
  const char in[] = "a\xFF\xC3(b\xE2\x82";
  int32_t *ids = NULL;
  size_t n = 0;
  KT_ASSERT_OK(kiln_tokenize(v, in, sizeof in - 1, 0, &ids, &n));
  assert_int_equal(n, sizeof in - 1);
  for (size_t i = 0; i < n; i++) assert_int_equal(ids[i], (uint8_t)in[i]);
  expect_decode(v, ids, n, false, in, sizeof in - 1);
  free(ids);
  kiln_vocab_free(v);
}

static void test_bpe_long_runs(void **state) {
  (void)state;
  /* Long runs of one character class: a pre-tokenizer regex that kept a
   * backtracking frame per character would exhaust PCRE2's JIT stack here
   * (it did once, on "!" x 2^20). Every byte must come back as its token. */
  static const char *const pre[] = {"qwen2", "qwen35", "llama-bpe", "gpt-2", "default"};
  static const char fill[] = {'!', ' ', '\n', 'a', '7', '\xFF'};
  size_t n = 1u << 20;
  char *text = malloc(n);
  for (size_t p = 0; p < sizeof pre / sizeof *pre; p++) {
    kiln_vocab *v = bpe_vocab(NULL, NULL, 0, NULL, 0, pre[p]);
    for (size_t f = 0; f < sizeof fill; f++) {
      memset(text, fill[f], n);
      int32_t *ids = NULL;
      size_t m = 0;
      KT_ASSERT_OK(kiln_tokenize(v, text, n, 0, &ids, &m));
      assert_int_equal(m, n);
      assert_int_equal(ids[0], (uint8_t)fill[f]);
      assert_int_equal(ids[n - 1], (uint8_t)fill[f]);
      free(ids);
    }
    kiln_vocab_free(v);
  }
  free(text);
}

static void test_bpe_byte_mapping_roundtrip(void **state) {
  (void)state;
  /* GPT-2's bytes_to_unicode is a bijection onto 256 code points. */
  int seen[512] = {0};
  for (int b = 0; b < 256; b++) {
    uint32_t cp = kiln__byte_to_cp((uint8_t)b);
    assert_true(cp < 512);
    assert_int_equal(seen[cp], 0);
    seen[cp] = 1;
    assert_int_equal(kiln__cp_to_byte(cp), b);
  }
  assert_int_equal(kiln__byte_to_cp(' '), 0x120); /* "Ġ" */
  assert_int_equal(kiln__byte_to_cp('\n'), 0x10A); /* "Ċ" */
  assert_int_equal(kiln__cp_to_byte(0x2581), -1);
}

static void test_special_longest_first(void **state) {
  (void)state;
  /* "<|a|>" and "<|a|><|b|>" are both special; the longer is cut first, so
   * the text gives one token, and "<|a|>" alone gives the shorter. */
  const char *extra[] = {"<|a|>", "<|a|><|b|>", "<|u|>"};
  const int32_t types[] = {KILN_TOKEN_CONTROL, KILN_TOKEN_CONTROL, KILN_TOKEN_USER_DEFINED};
  kiln_vocab *v = bpe_vocab(extra, types, 3, NULL, 0, "qwen2");
  EXPECT(v, "<|a|><|b|>", KILN_TOKENIZE_PARSE_SPECIAL, 257);
  EXPECT(v, "x<|a|>y", KILN_TOKENIZE_PARSE_SPECIAL, 'x', 256, 'y');
  EXPECT(v, "<|u|><|u|>", KILN_TOKENIZE_PARSE_SPECIAL, 258, 258);
  /* Without the flag, neither CONTROL nor USER_DEFINED tokens appear. */
  int32_t *ids = NULL;
  size_t n = 0;
  KT_ASSERT_OK(kiln_tokenize(v, "<|a|><|u|>", 10, 0, &ids, &n));
  for (size_t i = 0; i < n; i++) assert_true(ids[i] < 256);
  free(ids);
  /* Decoding: CONTROL only when asked, USER_DEFINED always. */
  const int32_t seq[] = {'x', 256, 258};
  expect_decode(v, seq, 3, false, "x<|u|>", 6);
  expect_decode(v, seq, 3, true, "x<|a|><|u|>", 11);
  kiln_vocab_free(v);
}

static void test_token_to_piece_bounds(void **state) {
  (void)state;
  const char *extra[] = {"\xC4\xA0" "ab"};
  kiln_vocab *v = bpe_vocab(extra, NULL, 1, NULL, 0, "gpt-2");
  char buf[8];
  size_t len = 0;
  KT_ASSERT_OK(kiln_token_to_piece(v, 256, false, buf, sizeof buf, &len));
  assert_int_equal(len, 3);
  assert_memory_equal(buf, " ab", 3);
  /* Appends; fails without writing when it does not fit. */
  KT_ASSERT_OK(kiln_token_to_piece(v, 256, false, buf, sizeof buf, &len));
  assert_int_equal(len, 6);
  KT_ASSERT_ERR(kiln_token_to_piece(v, 256, false, buf, sizeof buf, &len),
                KILN_STATUS_OUT_OF_RANGE, "needs 3 bytes");
  assert_int_equal(len, 6);
  KT_ASSERT_ERR(kiln_token_to_piece(v, 257, false, buf, sizeof buf, &len),
                KILN_STATUS_INVALID_ARGUMENT, "257");
  KT_ASSERT_ERR(kiln_token_to_piece(v, -1, false, buf, sizeof buf, &len),
                KILN_STATUS_INVALID_ARGUMENT, "-1");
  const int32_t bad[] = {1, 999};
  char *text = NULL;
  size_t tl = 0;
  KT_ASSERT_ERR(kiln_detokenize(v, bad, 2, false, &text, &tl), KILN_STATUS_INVALID_ARGUMENT,
                "id 2 (999) is outside the vocabulary's range 0..");
  kiln_vocab_free(v);
}

/* ---- building: validation --------------------------------------------- */

static void test_build_rejects_bad_input(void **state) {
  (void)state;
  const char *texts[] = {"a", "b", "a"};
  const size_t lens[] = {1, 1, 1};
  int32_t types[] = {1, 1, 1};
  kiln__vocab_spec s = {.kind = KILN_VOCAB_BPE, .n_tokens = 3, .texts = texts, .text_lens = lens,
                        .types = types, .pre = "qwen2", .bos = -1, .eos = -1, .unk = -1,
                        .eot = -1, .add_bos = -1, .add_space_prefix = -1, .name = "bad.gguf"};
  kiln_vocab *v = NULL;
  KT_ASSERT_ERR(kiln__vocab_build(&s, &v), KILN_STATUS_MALFORMED, "appears twice (ids 0 and 2)");
  assert_null(v);
  s.n_tokens = 2;
  types[1] = 9;
  KT_ASSERT_ERR(kiln__vocab_build(&s, &v), KILN_STATUS_MALFORMED, "token_type[1] = 9");
  types[1] = 1;
  s.eos = 2;
  KT_ASSERT_ERR(kiln__vocab_build(&s, &v), KILN_STATUS_MALFORMED, "eos_token_id = 2");
  s.eos = -1;
  s.pre = "tekken";
  KT_ASSERT_ERR(kiln__vocab_build(&s, &v), KILN_STATUS_UNSUPPORTED, "\"tekken\"");
  s.pre = "qwen2";
  const char *merges[] = {"ab"};
  const size_t mlens[] = {2};
  s.n_merges = 1;
  s.merges = merges;
  s.merge_lens = mlens;
  KT_ASSERT_ERR(kiln__vocab_build(&s, &v), KILN_STATUS_MALFORMED, "merges[0] = \"ab\"");
  s.n_merges = 0;
  s.add_bos = 1;
  KT_ASSERT_ERR(kiln__vocab_build(&s, &v), KILN_STATUS_MALFORMED, "add_bos_token is true");
  s.add_bos = -1;
  KT_ASSERT_OK(kiln__vocab_build(&s, &v));
  assert_int_equal(kiln_vocab_find(v, "b", 1), 1);
  assert_int_equal(kiln_vocab_find(v, "c", 1), -1);
  assert_int_equal(kiln_vocab_add_bos(v), false);
  assert_null(kiln_vocab_token_text(v, 2));
  assert_int_equal(kiln_vocab_token_type(v, -5), KILN_TOKEN_UNDEFINED);
  kiln_vocab_free(v);
}

static void test_find_is_exact_and_skips_merge_parts(void **state) {
  (void)state;
  const char *extra[] = {"xyz"};
  const char *merges[] = {"x y", "xy z"};
  kiln_vocab *v = bpe_vocab(extra, NULL, 1, merges, 2, "gpt-2");
  assert_int_equal(kiln_vocab_find(v, "xyz", 3), 256);
  assert_int_equal(kiln_vocab_find(v, "xy", 2), -1); /* interned, not a token */
  assert_int_equal(kiln_vocab_find(v, "xyzz", 3), 256);
  assert_int_equal(kiln_vocab_find(v, "xyzz", 4), -1);
  assert_int_equal(kiln_vocab_n_tokens(v), 257);
  kiln_vocab_free(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spm_higher_score_wins),
      cmocka_unit_test(test_spm_ties_go_left),
      cmocka_unit_test(test_spm_chains_merges),
      cmocka_unit_test(test_spm_space_prefix_and_escape),
      cmocka_unit_test(test_spm_byte_fallback),
      cmocka_unit_test(test_spm_unknown_without_byte_tokens),
      cmocka_unit_test(test_spm_invalid_utf8),
      cmocka_unit_test(test_spm_control_tokens_need_parse_special),
      cmocka_unit_test(test_spm_empty),
      cmocka_unit_test(test_bpe_rank_order),
      cmocka_unit_test(test_bpe_leftmost_first),
      cmocka_unit_test(test_bpe_merges_through_non_token_parts),
      cmocka_unit_test(test_bpe_words_do_not_merge_across),
      cmocka_unit_test(test_bpe_invalid_utf8_kept),
      cmocka_unit_test(test_bpe_long_runs),
      cmocka_unit_test(test_bpe_byte_mapping_roundtrip),
      cmocka_unit_test(test_special_longest_first),
      cmocka_unit_test(test_token_to_piece_bounds),
      cmocka_unit_test(test_build_rejects_bad_input),
      cmocka_unit_test(test_find_is_exact_and_skips_merge_parts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
