/* Cutting special tokens out of a prompt, as llama.cpp's
 * tokenizer_st_partition: the text starts as one raw fragment; then, for
 * each CONTROL / USER_DEFINED / UNKNOWN token, longest text first, every
 * occurrence in every raw fragment becomes that token and the text around
 * it stays raw. Longer tokens are cut first everywhere, so "<|im_start|>"
 * wins over any shorter token inside it.
 *
 * Only with parse_special: llama.cpp also cuts USER_DEFINED tokens out of
 * plain text (as Hugging Face does for non-special added tokens); kiln
 * never does, so text a user typed cannot produce a token the tokenizer
 * would not have produced from its characters. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static kiln_status frag_push(kiln__fragments *f, int32_t token, size_t off, size_t len) {
  if (token < 0 && len == 0) return NULL;
  if (f->n == f->cap) {
    size_t cap = f->cap ? f->cap * 2 : 16;
    kiln__fragment *v = realloc(f->v, cap * sizeof *v);
    if (!v) return kiln_status_new(KILN_STATUS_NO_MEMORY, "special-token split: %zu fragments", cap);
    f->v = v;
    f->cap = cap;
  }
  f->v[f->n++] = (kiln__fragment){token, off, len};
  return NULL;
}

/* The first occurrence of needle (n >= 1 bytes) in hay[0..m), or NULL
 * (memmem is a GNU extension; this stays within C11 + POSIX). */
static const char *find_bytes(const char *hay, size_t m, const char *needle, size_t n) {
  while (m >= n) {
    const char *p = memchr(hay, needle[0], m - n + 1);
    if (!p) return NULL;
    if (memcmp(p, needle, n) == 0) return p;
    m -= (size_t)(p - hay) + 1;
    hay = p + 1;
  }
  return NULL;
}

/* True if `tok` occurs in some raw fragment. */
static bool occurs(const kiln__fragments *f, const char *text, const char *tok, size_t tn) {
  for (size_t i = 0; i < f->n; i++)
    if (f->v[i].token < 0 && f->v[i].len >= tn && find_bytes(text + f->v[i].off, f->v[i].len, tok, tn))
      return true;
  return false;
}

kiln_status kiln__split_special(const kiln_vocab *v, const char *text, size_t len,
                                bool parse_special, kiln__fragments *out) {
  out->n = 0;
  KILN_RETURN_IF_ERROR(frag_push(out, -1, 0, len));
  if (!parse_special || len == 0) return NULL;
  kiln__fragments next = {0};
  kiln_status st = NULL;
  for (size_t k = 0; k < v->n_special && !st; k++) {
    int32_t id = v->special[k];
    const char *tok = kiln__strtab_text(&v->strs, id);
    size_t tn = v->strs.len[id];
    if (tn == 0 || !occurs(out, text, tok, tn)) continue;
    next.n = 0;
    for (size_t i = 0; i < out->n && !st; i++) {
      kiln__fragment f = out->v[i];
      if (f.token >= 0) {
        st = frag_push(&next, f.token, 0, 0);
        continue;
      }
      size_t pos = f.off, end = f.off + f.len;
      while (!st && end - pos >= tn) {
        const char *m = find_bytes(text + pos, end - pos, tok, tn);
        if (!m) break;
        size_t at = (size_t)(m - text);
        st = frag_push(&next, -1, pos, at - pos);
        if (!st) st = frag_push(&next, id, 0, 0);
        pos = at + tn;
      }
      if (!st) st = frag_push(&next, -1, pos, end - pos);
    }
    kiln__fragments t = *out;
    *out = next;
    next = t;
  }
  free(next.v);
  return st;
}
