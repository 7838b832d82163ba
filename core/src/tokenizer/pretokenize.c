/* Pre-tokenizers for byte-level BPE, chosen by tokenizer.ggml.pre: the
 * split regexes llama.cpp's llm_tokenizer_bpe constructor lists for each
 * LLAMA_VOCAB_PRE_TYPE (src/llama-vocab.cpp), run with PCRE2 in UTF + UCP
 * mode so \p{L}, \p{N}, \p{M} and \s follow the Unicode properties.
 *
 * A text is cut, regex after regex, into words: every match is a word, and
 * so is every stretch between matches (llama.cpp's unicode_regex_split
 * keeps those too). Where a vocabulary lists several regexes, each one
 * splits the words the previous one made, and a regex only sees its word
 * (its end is the subject's end for lookaheads).
 *
 * Differences from llama.cpp, on purpose:
 *  - Invalid UTF-8: llama.cpp decodes each bad byte to U+FFFD and so
 *    replaces it by EF BF BD; kiln makes every byte of an ill-formed
 *    sequence a word of its own, so the bytes survive to byte tokens and
 *    decode back unchanged. Well-formed runs between them split as usual.
 *  - Unicode data: categories come from PCRE2's tables (the Unicode
 *    version of the installed libpcre2), llama.cpp's from its generated
 *    unicode-data.cpp; characters assigned in one version and not the
 *    other may split differently.
 *  - No normalization: Qwen's tokenizer.json applies NFC before splitting,
 *    llama.cpp does not for GGUF vocabularies, and kiln follows llama.cpp
 *    (text already in NFC tokenizes the same either way; decomposed
 *    accents differ, see tests/data/tokenizer/qwen2.ids). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "kiln/escape.h"
#include "tokenizer_internal.h"

/* Whitespace as llama.cpp sees it: the Unicode White_Space property
 * (unicode_set_whitespace in its unicode-data.cpp). PCRE2's \s in UCP mode
 * also takes U+180E MONGOLIAN VOWEL SEPARATOR (a space before Unicode 6.3,
 * a format character since), which llama.cpp does not, so the set is
 * spelled out. Each macro is one character class: a repeated class needs
 * no backtracking stack, where a repeated group would overflow PCRE2's JIT
 * stack on long runs. WS is \s, NWS is \S, NOT_WS_L_N is
 * [^\s\p{L}\p{N}], NOT_WS_L_M_N is [^\s\p{L}\p{M}\p{N}]. */
#define WS_SET                                   \
  "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}" \
  "\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
#define WS "[" WS_SET "]"
#define NWS "[^" WS_SET "]"
#define NOT_WS_L_N "[^" WS_SET "\\p{L}\\p{N}]"
#define NOT_WS_L_M_N "[^" WS_SET "\\p{L}\\p{M}\\p{N}]"

/* The contraction alternatives spelled with character classes instead of
 * (?i:...): llama.cpp's adaptation, which keeps Unicode case folding (the
 * Kelvin sign for 'k', long s for 's') out of them. */
#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

/* The tails the Llama 3 family shares: punctuation runs with their line
 * breaks, line-break runs, trailing spaces, other spaces. */
#define TAIL(not_ws_class)                                                         \
  "| ?" not_ws_class "+[\\r\\n]*|" WS "*[\\r\\n]+|" WS "+(?!" NWS ")|" WS "+"

/* Qwen2 (and Qwen2.5, Qwen3): digits one at a time. */
static const char re_qwen2[] =
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" TAIL(NOT_WS_L_N);

/* Qwen3.5: combining marks stay with their letters. */
static const char re_qwen35[] =
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}" TAIL(NOT_WS_L_M_N);

/* Llama 3: digits in runs of up to three. */
static const char re_llama3[] =
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" TAIL(NOT_WS_L_N);

/* GPT-2. llama.cpp's list ends at \s+(?!\S), but its hand-written matcher
 * for this regex (unicode_regex_split_custom_gpt2) also takes a lone
 * trailing \s+, as the final alternative here does. */
static const char re_gpt2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?" NOT_WS_L_N
                              "+|" WS "+(?!" NWS ")|" WS "+";

/* llama.cpp's "default": punctuation runs, then GPT-2, then digit runs,
 * then threes of ASCII digits. */
static const char re_default_punct[] = "[\\p{P}\\$\\+<=>\\^~\\|]+";
static const char re_default_digits[] = "\\p{N}+";
static const char re_default_ascii3[] = "[0-9][0-9][0-9]";

kiln_status kiln__pretok_lookup(const char *pre, kiln__pre_kind *out_kind, bool *out_ignore_merges,
                                bool *out_clean_spaces, bool *out_add_bos) {
  /* The flags are llama.cpp's llama_vocab::impl::load for each name. */
  *out_ignore_merges = false;
  *out_clean_spaces = true;
  *out_add_bos = false;
  if (!pre || !strcmp(pre, "default")) {
    *out_kind = KILN__PRE_DEFAULT;
  } else if (!strcmp(pre, "gpt-2") || !strcmp(pre, "gpt2")) {
    *out_kind = KILN__PRE_GPT2;
  } else if (!strcmp(pre, "llama-bpe") || !strcmp(pre, "llama3") || !strcmp(pre, "llama-v3")) {
    *out_kind = KILN__PRE_LLAMA3;
    *out_ignore_merges = true;
    *out_add_bos = true;
  } else if (!strcmp(pre, "qwen2") || !strcmp(pre, "deepseek-r1-qwen")) {
    *out_kind = KILN__PRE_QWEN2;
    *out_clean_spaces = false;
  } else if (!strcmp(pre, "qwen35")) {
    *out_kind = KILN__PRE_QWEN35;
    *out_clean_spaces = false;
  } else {
    char q[KILN_QUOTE_CAP(64)];
    return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                           "tokenizer.ggml.pre = %s is not supported (kiln knows default, "
                           "gpt-2, llama-bpe, qwen2, qwen35)",
                           kiln_quote(q, sizeof q, pre, strlen(pre), 64));
  }
  return NULL;
}

static kiln_status compile(const char *pattern, void **out_code) {
  int err;
  PCRE2_SIZE erroff;
  pcre2_code *code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                   &err, &erroff, NULL);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return kiln_status_new(KILN_STATUS_INTERNAL, "pre-tokenizer regex /%s/ at offset %zu: %s",
                           pattern, (size_t)erroff, (const char *)msg);
  }
  /* JIT makes matching several times faster; without it (no JIT support
   * in this libpcre2) the interpreter gives the same matches. */
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  *out_code = code;
  return NULL;
}

kiln_status kiln__pretok_init(kiln__pretok *p, kiln__pre_kind kind) {
  memset(p, 0, sizeof *p);
  p->kind = kind;
  const char *pats[KILN__PRE_MAX_REGEX] = {0};
  switch (kind) {
    case KILN__PRE_NONE: return NULL;
    case KILN__PRE_DEFAULT:
      pats[0] = re_default_punct;
      pats[1] = re_gpt2;
      pats[2] = re_default_digits;
      pats[3] = re_default_ascii3;
      break;
    case KILN__PRE_GPT2: pats[0] = re_gpt2; break;
    case KILN__PRE_LLAMA3: pats[0] = re_llama3; break;
    case KILN__PRE_QWEN2: pats[0] = re_qwen2; break;
    case KILN__PRE_QWEN35: pats[0] = re_qwen35; break;
  }
  for (int i = 0; i < KILN__PRE_MAX_REGEX && pats[i]; i++) {
    kiln_status st = compile(pats[i], &p->code[i]);
    if (st) {
      kiln__pretok_free(p);
      return st;
    }
    p->n_regex = i + 1;
  }
  return NULL;
}

void kiln__pretok_free(kiln__pretok *p) {
  for (int i = 0; i < p->n_regex; i++) pcre2_code_free(p->code[i]);
  memset(p, 0, sizeof *p);
}

static kiln_status spans_push(kiln__spans *s, size_t off, size_t len) {
  if (len == 0) return NULL;
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    kiln__span *v = realloc(s->v, cap * sizeof *v);
    if (!v) return kiln_status_new(KILN_STATUS_NO_MEMORY, "pre-tokenizer: %zu words", cap);
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = (kiln__span){off, len};
  return NULL;
}

/* Splits text[off, off+len) (well-formed UTF-8) with one regex into out:
 * matches and the stretches between them, in order. */
static kiln_status split_one(const pcre2_code *code, pcre2_match_data *md, const char *text,
                             size_t off, size_t len, kiln__spans *out) {
  PCRE2_SPTR subject = (PCRE2_SPTR)(text + off);
  size_t pos = 0, last = 0;
  while (pos < len) {
    int rc = pcre2_match(code, subject, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
    /* The JIT's stack is small and fixed; the interpreter keeps its
     * backtracking on the heap. */
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
      rc = pcre2_match(code, subject, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      return kiln_status_new(KILN_STATUS_INTERNAL, "pre-tokenizer regex failed at byte %zu: %s",
                             off + pos, (const char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t ms = ov[0], me = ov[1];
    if (me <= ms) {
      /* None of the patterns can match empty; step one character anyway
       * so a future pattern that can does not loop forever. */
      pos = ms + 1;
      while (pos < len && (subject[pos] & 0xC0) == 0x80) pos++;
      continue;
    }
    KILN_RETURN_IF_ERROR(spans_push(out, off + last, ms - last));
    KILN_RETURN_IF_ERROR(spans_push(out, off + ms, me - ms));
    pos = last = me;
  }
  return spans_push(out, off + last, len - last);
}

/* Runs every regex over one well-formed run, each splitting the previous
 * one's words. */
static kiln_status split_run(const kiln__pretok *p, pcre2_match_data *md, const char *text,
                             size_t off, size_t len, kiln__spans *out, kiln__spans *tmp) {
  if (p->n_regex == 0) return spans_push(out, off, len);
  kiln__spans cur = {0};
  kiln_status st = spans_push(&cur, off, len);
  for (int r = 0; r < p->n_regex && !st; r++) {
    kiln__spans *dst = r + 1 == p->n_regex ? out : tmp;
    if (dst == tmp) tmp->n = 0;
    for (size_t i = 0; i < cur.n && !st; i++)
      st = split_one(p->code[r], md, text, cur.v[i].off, cur.v[i].len, dst);
    if (dst == tmp && !st) {
      /* tmp becomes the input of the next regex. */
      kiln__spans t = cur;
      cur = *tmp;
      *tmp = t;
    }
  }
  free(cur.v);
  return st;
}

kiln_status kiln__pretokenize(const kiln__pretok *p, const char *text, size_t len,
                              kiln__spans *out) {
  out->n = 0;
  pcre2_match_data *md = NULL;
  if (p->n_regex) {
    md = pcre2_match_data_create(4, NULL);
    if (!md) return kiln_status_new(KILN_STATUS_NO_MEMORY, "pre-tokenizer match data");
  }
  kiln__spans tmp = {0};
  kiln_status st = NULL;
  const uint8_t *u = (const uint8_t *)text;
  size_t run = 0, i = 0;
  while (i < len && !st) {
    uint32_t cp;
    size_t n = kiln__utf8_decode(u + i, len - i, &cp);
    if (n) {
      i += n;
      continue;
    }
    /* An ill-formed byte: flush the run before it, then the byte alone. */
    if (i > run) st = split_run(p, md, text, run, i - run, out, &tmp);
    if (!st) st = spans_push(out, i, 1);
    run = ++i;
  }
  if (!st && len > run) st = split_run(p, md, text, run, len - run, out, &tmp);
  free(tmp.v);
  pcre2_match_data_free(md);
  return st;
}
