/* kiln_tokenize: special tokens first, then each raw fragment through the
 * vocabulary's algorithm, as llama.cpp's llama_vocab::impl::tokenize. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

/* SentencePiece's escaping (llama_escape_whitespace): a "▁" (U+2581) in
 * front when asked, and every space as "▁". */
static kiln_status spm_escape(const char *s, size_t n, bool prefix, char **out, size_t *out_len) {
  size_t spaces = prefix ? 1 : 0;
  for (size_t i = 0; i < n; i++) spaces += s[i] == ' ';
  size_t m = n + spaces * 2 + (prefix ? 1 : 0);
  char *e = malloc(m ? m : 1);
  if (!e) return kiln_status_new(KILN_STATUS_NO_MEMORY, "escaping %zu bytes", n);
  size_t j = 0;
  static const char lower_block[3] = {'\xE2', '\x96', '\x81'};
  if (prefix) {
    memcpy(e, lower_block, 3);
    j = 3;
  }
  for (size_t i = 0; i < n; i++) {
    if (s[i] == ' ') {
      memcpy(e + j, lower_block, 3);
      j += 3;
    } else {
      e[j++] = s[i];
    }
  }
  *out = e;
  *out_len = j;
  return NULL;
}

static kiln_status encode_fragments(const kiln_vocab *v, const char *text,
                                    const kiln__fragments *frags, kiln__ids *ids) {
  /* SPM puts the space prefix before the first text and before text that
   * follows a special token ("prefix with space if previous is special"). */
  bool prev_special = true;
  for (size_t i = 0; i < frags->n; i++) {
    const kiln__fragment *f = &frags->v[i];
    if (f->token >= 0) {
      KILN_RETURN_IF_ERROR(kiln__ids_push(ids, f->token));
      prev_special = true;
      continue;
    }
    if (v->kind == KILN_VOCAB_SPM) {
      char *esc = NULL;
      size_t n = 0;
      KILN_RETURN_IF_ERROR(
          spm_escape(text + f->off, f->len, v->add_space_prefix && prev_special, &esc, &n));
      kiln_status st = kiln__spm_encode(v, esc, n, ids);
      free(esc);
      KILN_RETURN_IF_ERROR(st);
    } else {
      KILN_RETURN_IF_ERROR(kiln__bpe_encode(v, text + f->off, f->len, ids));
    }
    prev_special = false;
  }
  return NULL;
}

kiln_status kiln_tokenize(const kiln_vocab *v, const char *text, size_t len, int flags,
                          int32_t **out_ids, size_t *out_n) {
  if (!v || !out_ids || !out_n || (!text && len))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kiln_tokenize: NULL argument");
  if (flags & ~(KILN_TOKENIZE_ADD_BOS | KILN_TOKENIZE_PARSE_SPECIAL))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kiln_tokenize: unknown flags 0x%x", flags);
  *out_ids = NULL;
  *out_n = 0;
  kiln__ids ids = {0};
  kiln_status st = NULL;
  if (flags & KILN_TOKENIZE_ADD_BOS) {
    if (v->bos < 0)
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "kiln_tokenize: ADD_BOS, but the vocabulary has no BOS token");
    st = kiln__ids_push(&ids, v->bos);
  }
  kiln__fragments frags = {0};
  if (!st && len > 0) {
    /* An empty text has no fragment at all, so it gets no space prefix. */
    st = kiln__split_special(v, text, len, (flags & KILN_TOKENIZE_PARSE_SPECIAL) != 0, &frags);
    if (!st) st = encode_fragments(v, text, &frags, &ids);
  }
  free(frags.v);
  if (!st && !ids.v) {
    ids.v = malloc(sizeof *ids.v); /* callers always get something to free */
    if (!ids.v) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "token ids");
  }
  if (st) {
    free(ids.v);
    return st;
  }
  *out_ids = ids.v;
  *out_n = ids.n;
  return NULL;
}
