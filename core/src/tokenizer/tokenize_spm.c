/* SentencePiece BPE (Kudo & Richardson 2018) as llama.cpp runs it for
 * tokenizer.ggml.model = "llama" (llm_tokenizer_spm_session in
 * src/llama-vocab.cpp): split the escaped text into UTF-8 characters, then
 * keep merging the adjacent pair whose concatenation is the vocabulary
 * token with the highest score (ties: the leftmost pair), until no pair
 * forms a token. What is left is looked up; a piece that is not a token
 * falls back to its bytes as <0xNN> tokens. */
#include "config.h"

#include <stdlib.h>

#include "tokenizer_internal.h"

typedef struct spm_sym {
  int32_t prev, next;
  size_t off, n; /* bytes of the text; n = 0 once merged into its left neighbour */
} spm_sym;

/* A token the merges may produce. CONTROL and UNKNOWN tokens are left out
 * so that plain text can never turn into "<s>" or "<unk>" (llama.cpp looks
 * up every token; no Llama vocabulary lets merges reach these, so the ids
 * agree). */
static int32_t spm_lookup(const kiln_vocab *v, const char *s, size_t n) {
  int32_t id = kiln__vocab_find(v, s, n);
  if (id < 0) return -1;
  uint8_t t = v->types[id];
  if (t == KILN_TOKEN_CONTROL || t == KILN_TOKEN_UNKNOWN) return -1;
  return id;
}

static kiln_status try_add(const kiln_vocab *v, const char *text, spm_sym *s, int32_t left,
                           int32_t right, kiln__heap *h) {
  if (left < 0 || right < 0) return NULL;
  size_t n = s[left].n + s[right].n;
  int32_t id = spm_lookup(v, text + s[left].off, n);
  if (id < 0) return NULL;
  kiln__bigram b = {.key = v->scores[id], .left = left, .right = right, .a = (int32_t)n, .b = 0};
  return kiln__heap_push(h, b);
}

/* Emits one final piece: the token, else its bytes, else <unk>. */
static kiln_status emit_piece(const kiln_vocab *v, const char *p, size_t n, kiln__ids *out) {
  int32_t id = spm_lookup(v, p, n);
  if (id >= 0) return kiln__ids_push(out, id);
  bool all_bytes = true;
  for (size_t j = 0; j < n; j++)
    if (v->byte_token[(uint8_t)p[j]] < 0) all_bytes = false;
  if (all_bytes) {
    for (size_t j = 0; j < n; j++) KILN_RETURN_IF_ERROR(kiln__ids_push(out, v->byte_token[(uint8_t)p[j]]));
    return NULL;
  }
  if (v->unk >= 0) return kiln__ids_push(out, v->unk);
  return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                         "byte 0x%02X has no <0x%02X> token and the vocabulary has no unknown token",
                         (uint8_t)p[0], (uint8_t)p[0]);
}

kiln_status kiln__spm_encode(const kiln_vocab *v, const char *text, size_t len, kiln__ids *out) {
  if (len == 0) return NULL;
  if (len > INT32_MAX) return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "text of %zu bytes", len);
  spm_sym *s = malloc(len * sizeof *s);
  if (!s) return kiln_status_new(KILN_STATUS_NO_MEMORY, "tokenizing %zu bytes", len);
  int32_t nsym = 0;
  for (size_t off = 0; off < len;) {
    size_t n = kiln__utf8_lead_len((uint8_t)text[off]);
    if (n > len - off) n = len - off;
    s[nsym].off = off;
    s[nsym].n = n;
    s[nsym].prev = nsym - 1;
    off += n;
    s[nsym].next = off == len ? -1 : nsym + 1;
    nsym++;
  }

  kiln_status st = NULL;
  kiln__heap h = {0};
  for (int32_t i = 1; i < nsym && !st; i++) st = try_add(v, text, s, i - 1, i, &h);

  kiln__bigram b;
  while (!st && kiln__heap_pop(&h, &b)) {
    spm_sym *l = &s[b.left], *r = &s[b.right];
    /* Sizes only grow, so a changed sum means one side merged since. */
    if (l->n == 0 || r->n == 0 || (int32_t)(l->n + r->n) != b.a) continue;
    l->n += r->n;
    r->n = 0;
    l->next = r->next;
    if (r->next >= 0) s[r->next].prev = b.left;
    st = try_add(v, text, s, l->prev, b.left, &h);
    if (!st) st = try_add(v, text, s, b.left, l->next, &h);
  }
  free(h.v);

  for (int32_t i = 0; i != -1 && !st; i = s[i].next) st = emit_piece(v, text + s[i].off, s[i].n, out);
  free(s);
  return st;
}
