/* The vocabulary: token texts, scores and types, the special ids, and for
 * byte-level BPE the merge table and pre-tokenizer, built from arrays
 * (kiln__vocab_build) that vocab_gguf.c reads out of a GGUF. Defaults and
 * validation follow llama.cpp's llama_vocab::impl::load
 * (src/llama-vocab.cpp) except where noted. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/escape.h"
#include "tokenizer_internal.h"

void kiln_vocab_free(kiln_vocab *v) {
  if (!v) return;
  kiln__strtab_free(&v->strs);
  kiln__pairtab_free(&v->merges);
  kiln__pretok_free(&v->pretok);
  free(v->scores);
  free(v->types);
  free(v->attr);
  free(v->special);
  free(v);
}

kiln_vocab_kind kiln_vocab_kind_of(const kiln_vocab *v) { return v->kind; }
int32_t kiln_vocab_n_tokens(const kiln_vocab *v) { return v->n_tokens; }
int32_t kiln_vocab_bos(const kiln_vocab *v) { return v->bos; }
int32_t kiln_vocab_eos(const kiln_vocab *v) { return v->eos; }
int32_t kiln_vocab_eot(const kiln_vocab *v) { return v->eot; }
bool kiln_vocab_add_bos(const kiln_vocab *v) { return v->add_bos; }

kiln_token_type kiln_vocab_token_type(const kiln_vocab *v, int32_t id) {
  if (id < 0 || id >= v->n_tokens) return KILN_TOKEN_UNDEFINED;
  return (kiln_token_type)v->types[id];
}

const char *kiln_vocab_token_text(const kiln_vocab *v, int32_t id) {
  if (id < 0 || id >= v->n_tokens) return NULL;
  return kiln__strtab_text(&v->strs, id);
}

int32_t kiln_vocab_find(const kiln_vocab *v, const char *text, size_t len) {
  if (!v || (!text && len)) return -1;
  return kiln__vocab_find(v, text ? text : "", len);
}

/* A token or merge text for messages: quoted, escaped, at most 40 bytes. */
#define EXCERPT_MAX 40
static const char *excerpt(const char *s, size_t n, char out[KILN_QUOTE_CAP(EXCERPT_MAX)]) {
  return kiln_quote(out, KILN_QUOTE_CAP(EXCERPT_MAX), s, n, EXCERPT_MAX);
}

static kiln_status check_id(const kiln__vocab_spec *spec, int32_t id, const char *key) {
  if (id < -1 || id >= spec->n_tokens)
    return kiln_status_new(KILN_STATUS_MALFORMED, "%s: %s = %d is outside the vocabulary (0..%d)",
                           spec->name, key, (int)id, (int)spec->n_tokens - 1);
  return NULL;
}

typedef struct len_id {
  uint32_t len;
  int32_t id;
} len_id;

static int by_len_desc(const void *a, const void *b) {
  const len_id *x = a, *y = b;
  if (x->len != y->len) return x->len > y->len ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* Texts llama.cpp's llama_vocab::impl::load makes CONTROL whatever their
 * token_type says (its end-of-generation list, and its fill-in-the-middle
 * lists): "control-looking token ... its type will be overridden". In
 * Qwen2's vocabulary "</s>" is an ordinary BPE token, yet llama.cpp cuts it
 * out of text as one token when parsing special tokens and hides it when
 * not rendering them; kiln does the same. (llama.cpp marks only the first
 * match of each fill-in-the-middle list, in hash-map order; kiln marks
 * every match.) */
static const char *const forced_control[] = {
    /* end of generation */
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    /* "<｜end▁of▁sentence｜>" and the like, split where a letter would
     * extend a \x escape */
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "[e~[",
    /* fill in the middle: prefix, suffix, middle, pad, repo, file separator */
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>",
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",
    "<|file_sep|>",
};

static kiln_status build_attrs(kiln_vocab *v) {
  v->attr = malloc((size_t)v->n_tokens);
  if (!v->attr) return kiln_status_new(KILN_STATUS_NO_MEMORY, "%d token attributes", (int)v->n_tokens);
  for (int32_t i = 0; i < v->n_tokens; i++) {
    uint8_t t = v->types[i];
    v->attr[i] = t == KILN_TOKEN_CONTROL        ? KILN__ATTR_CONTROL
                 : t == KILN_TOKEN_USER_DEFINED ? KILN__ATTR_USER_DEFINED
                 : t == KILN_TOKEN_UNKNOWN      ? KILN__ATTR_UNKNOWN
                                                : 0;
  }
  for (size_t i = 0; i < sizeof forced_control / sizeof forced_control[0]; i++) {
    int32_t id = kiln__vocab_find(v, forced_control[i], strlen(forced_control[i]));
    if (id >= 0) v->attr[id] |= KILN__ATTR_CONTROL;
  }
  return NULL;
}

static kiln_status build_specials(kiln_vocab *v) {
  size_t n = 0;
  for (int32_t i = 0; i < v->n_tokens; i++) n += v->attr[i] != 0;
  if (n == 0) return NULL;
  len_id *tmp = malloc(n * sizeof *tmp);
  v->special = malloc(n * sizeof *v->special);
  if (!tmp || !v->special) {
    free(tmp);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "%zu special tokens", n);
  }
  size_t k = 0;
  for (int32_t i = 0; i < v->n_tokens; i++)
    if (v->attr[i]) tmp[k++] = (len_id){v->strs.len[i], i};
  qsort(tmp, n, sizeof *tmp, by_len_desc);
  for (size_t i = 0; i < n; i++) v->special[i] = tmp[i].id;
  v->n_special = n;
  free(tmp);
  return NULL;
}

/* Interns every merge's two parts and their concatenation and records
 * (left, right) -> (rank, merged). Parts that are not tokens get ids past
 * the tokens, so merges behave exactly as llama.cpp's string-keyed map. */
static kiln_status build_merges(kiln_vocab *v, const kiln__vocab_spec *spec) {
  KILN_RETURN_IF_ERROR(kiln__pairtab_init(&v->merges, spec->n_merges));
  char *buf = NULL;
  size_t buf_cap = 0;
  kiln_status st = NULL;
  for (size_t i = 0; i < spec->n_merges && !st; i++) {
    const char *m = spec->merges[i];
    size_t n = spec->merge_lens[i];
    /* llama.cpp splits at the first space after the first byte. */
    const char *sp = n > 1 ? memchr(m + 1, ' ', n - 1) : NULL;
    if (!sp) {
      char ex[KILN_QUOTE_CAP(EXCERPT_MAX)];
      excerpt(m, n, ex);
      st = kiln_status_new(KILN_STATUS_MALFORMED,
                           "%s: tokenizer.ggml.merges[%zu] = %s is not \"left right\"",
                           spec->name, i, ex);
      break;
    }
    size_t ln = (size_t)(sp - m), rn = n - ln - 1;
    if (rn == 0) {
      char ex[KILN_QUOTE_CAP(EXCERPT_MAX)];
      excerpt(m, n, ex);
      st = kiln_status_new(KILN_STATUS_MALFORMED,
                           "%s: tokenizer.ggml.merges[%zu] = %s has an empty right part",
                           spec->name, i, ex);
      break;
    }
    if (ln + rn > buf_cap) {
      buf_cap = (ln + rn) * 2 + 64;
      char *b = realloc(buf, buf_cap);
      if (!b) {
        st = kiln_status_new(KILN_STATUS_NO_MEMORY, "merge text");
        break;
      }
      buf = b;
    }
    int32_t left, right, merged;
    st = kiln__strtab_add(&v->strs, m, ln, &left, NULL);
    if (!st) st = kiln__strtab_add(&v->strs, sp + 1, rn, &right, NULL);
    if (st) break;
    memcpy(buf, m, ln);
    memcpy(buf + ln, sp + 1, rn);
    st = kiln__strtab_add(&v->strs, buf, ln + rn, &merged, NULL);
    if (!st) kiln__pairtab_add(&v->merges, left, right, (int32_t)i, merged);
  }
  free(buf);
  return st;
}

static void build_byte_tokens(kiln_vocab *v) {
  for (int b = 0; b < 256; b++) {
    v->byte_token[b] = -1;
    v->byte_sym[b] = -1;
    if (v->kind == KILN_VOCAB_SPM) {
      /* llama.cpp's byte_to_token: "<0xNN>", else the one-byte token. */
      char hex[7];
      snprintf(hex, sizeof hex, "<0x%02X>", b);
      int32_t id = kiln__vocab_find(v, hex, 6);
      if (id < 0) {
        char c = (char)b;
        id = kiln__vocab_find(v, &c, 1);
      }
      v->byte_token[b] = id;
    } else {
      char u[4];
      size_t n = kiln__utf8_encode(kiln__byte_to_cp((uint8_t)b), u);
      v->byte_token[b] = kiln__vocab_find(v, u, n);
      v->byte_sym[b] = kiln__strtab_find(&v->strs, u, n);
    }
  }
}

static int32_t find_cstr(const kiln_vocab *v, const char *s) { return kiln__vocab_find(v, s, strlen(s)); }

kiln_status kiln__vocab_build(const kiln__vocab_spec *spec, kiln_vocab **out_vocab) {
  *out_vocab = NULL;
  const char *name = spec->name ? spec->name : "vocabulary";
  if (spec->kind != KILN_VOCAB_SPM && spec->kind != KILN_VOCAB_BPE)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: unknown vocabulary kind %d", name,
                           (int)spec->kind);
  if (spec->n_tokens <= 0 || spec->n_tokens >= INT32_MAX / 2)
    return kiln_status_new(KILN_STATUS_MALFORMED, "%s: tokenizer.ggml.tokens has %d entries", name,
                           (int)spec->n_tokens);
  kiln__vocab_spec s = *spec;
  s.name = name;
  KILN_RETURN_IF_ERROR(check_id(&s, s.bos, "tokenizer.ggml.bos_token_id"));
  KILN_RETURN_IF_ERROR(check_id(&s, s.eos, "tokenizer.ggml.eos_token_id"));
  KILN_RETURN_IF_ERROR(check_id(&s, s.unk, "tokenizer.ggml.unknown_token_id"));
  KILN_RETURN_IF_ERROR(check_id(&s, s.eot, "tokenizer.ggml.eot_token_id"));

  kiln_vocab *v = calloc(1, sizeof *v);
  if (!v) return kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: vocabulary", name);
  v->kind = s.kind;
  v->n_tokens = s.n_tokens;
  size_t n = (size_t)s.n_tokens;
  v->scores = malloc(n * sizeof *v->scores);
  v->types = malloc(n);
  kiln_status st = NULL;
  if (!v->scores || !v->types) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: %zu tokens", name, n);
  if (!st) st = kiln__strtab_init(&v->strs, s.n_tokens + (int32_t)(s.n_merges / 8));

  for (size_t i = 0; i < n && !st; i++) {
    int32_t t = s.types ? s.types[i] : KILN_TOKEN_NORMAL;
    if (t < KILN_TOKEN_UNDEFINED || t > KILN_TOKEN_BYTE) {
      st = kiln_status_new(KILN_STATUS_MALFORMED,
                           "%s: tokenizer.ggml.token_type[%zu] = %d is not a token type (0..6)",
                           name, i, (int)t);
      break;
    }
    v->types[i] = (uint8_t)t;
    v->scores[i] = s.scores ? s.scores[i] : 0.0f;
    const char *text = s.texts[i];
    size_t len = s.text_lens[i];
    char empty[32];
    if (len == 0) {
      /* As llama.cpp: an empty token gets a placeholder text, so it can
       * neither match anything nor collide with another empty one. */
      snprintf(empty, sizeof empty, "[EMPTY_%zu]", i);
      text = empty;
      len = strlen(empty);
    }
    int32_t id;
    bool added;
    st = kiln__strtab_add(&v->strs, text, len, &id, &added);
    if (!st && !added) {
      char ex[KILN_QUOTE_CAP(EXCERPT_MAX)];
      excerpt(text, len, ex);
      st = kiln_status_new(KILN_STATUS_MALFORMED,
                           "%s: tokenizer.ggml.tokens: %s appears twice (ids %d and %zu)",
                           name, ex, (int)id, i);
    }
  }

  bool pre_add_bos = false;
  if (!st && v->kind == KILN_VOCAB_BPE) {
    kiln__pre_kind kind;
    st = kiln__pretok_lookup(s.pre, &kind, &v->ignore_merges, &v->clean_spaces, &pre_add_bos);
    if (st) st = kiln_status_annotate(st, "%s", name);
    if (!st) st = kiln__pretok_init(&v->pretok, kind);
    if (!st) st = build_merges(v, &s);
  }
  if (st) {
    kiln_vocab_free(v);
    return st;
  }
  build_byte_tokens(v);

  v->bos = s.bos;
  v->eos = s.eos;
  v->unk = s.unk;
  v->eot = s.eot;
  if (v->eot < 0) {
    /* llama.cpp guesses the end-of-turn token from its text when the GGUF
     * does not name it (its list is longer and walks a hash map, so with
     * several candidates present its pick is arbitrary; kiln's is this
     * order). */
    static const char *const eot_texts[] = {"<|im_end|>", "<|eot_id|>", "<end_of_turn>"};
    for (size_t i = 0; i < sizeof eot_texts / sizeof eot_texts[0] && v->eot < 0; i++)
      v->eot = find_cstr(v, eot_texts[i]);
  }
  if (v->kind == KILN_VOCAB_SPM) {
    v->add_bos = s.add_bos < 0 ? true : s.add_bos != 0;
    v->add_space_prefix = s.add_space_prefix < 0 ? true : s.add_space_prefix != 0;
  } else {
    v->add_bos = s.add_bos < 0 ? pre_add_bos : s.add_bos != 0;
    v->add_space_prefix = s.add_space_prefix < 0 ? false : s.add_space_prefix != 0;
  }
  if (v->add_bos && v->bos < 0) {
    kiln_vocab_free(v);
    return kiln_status_new(KILN_STATUS_MALFORMED,
                           "%s: tokenizer.ggml.add_bos_token is true, but "
                           "tokenizer.ggml.bos_token_id is not set",
                           name);
  }
  st = build_attrs(v);
  if (!st) st = build_specials(v);
  if (st) {
    kiln_vocab_free(v);
    return st;
  }
  *out_vocab = v;
  return NULL;
}
