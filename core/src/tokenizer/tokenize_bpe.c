/* Byte-level BPE (Radford et al. 2019; Sennrich et al. 2016) as llama.cpp
 * runs it for tokenizer.ggml.model = "gpt2" (llm_tokenizer_bpe_session in
 * src/llama-vocab.cpp): the pre-tokenizer cuts the text into words; each
 * word's bytes become symbols (one per byte, written as GPT-2's
 * bytes_to_unicode code points), and the adjacent pair with the lowest
 * merge rank is merged until no listed merge applies (ties: the leftmost
 * pair). A priority queue keeps each step O(log n) in the word length. */
#include "config.h"

#include <stdlib.h>

#include "tokenizer_internal.h"

typedef struct bpe_sym {
  int32_t prev, next;
  int32_t id;    /* strtab id of the symbol's text (a token, or an interned merge part), -1 if neither */
  size_t off, n; /* bytes of the original text; n = 0 once merged away */
} bpe_sym;

typedef struct bpe_work {
  bpe_sym *s;
  size_t cap;
  kiln__heap h;
  char *enc; /* a word's byte-level text, for ignore_merges */
  size_t enc_cap;
} bpe_work;

static kiln_status try_add(const kiln_vocab *v, bpe_sym *s, int32_t left, int32_t right,
                           kiln__heap *h) {
  if (left < 0 || right < 0 || s[left].id < 0 || s[right].id < 0) return NULL;
  const kiln__pair_slot *m = kiln__pairtab_find(&v->merges, s[left].id, s[right].id);
  if (!m) return NULL;
  kiln__bigram b = {.key = -(double)m->rank, .left = left, .right = right, .a = s[left].id,
                    .b = s[right].id};
  return kiln__heap_push(h, b);
}

/* The final pieces: a symbol that is not a token (possible only in a
 * vocabulary whose merges produce texts it lacks) is written as one token
 * per byte where llama.cpp would drop the bytes it cannot look up. */
static kiln_status emit(const kiln_vocab *v, const char *text, const bpe_sym *sym, kiln__ids *out) {
  if (sym->id >= 0 && sym->id < v->n_tokens) return kiln__ids_push(out, sym->id);
  for (size_t j = 0; j < sym->n; j++) {
    uint8_t byte = (uint8_t)text[sym->off + j];
    int32_t id = v->byte_token[byte] >= 0 ? v->byte_token[byte] : v->unk;
    if (id < 0)
      return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                             "byte 0x%02X has no token (code point U+%04X) and the vocabulary "
                             "has no unknown token",
                             byte, (unsigned)kiln__byte_to_cp(byte));
    KILN_RETURN_IF_ERROR(kiln__ids_push(out, id));
  }
  return NULL;
}

/* llama.cpp's ignore_merges (llama3): a word that is itself a token is
 * taken whole. */
static kiln_status whole_word(const kiln_vocab *v, bpe_work *w, const char *word, size_t n,
                              int32_t *out_id) {
  *out_id = -1;
  if (n * 2 > w->enc_cap) {
    size_t cap = n * 2 + 64;
    char *e = realloc(w->enc, cap);
    if (!e) return kiln_status_new(KILN_STATUS_NO_MEMORY, "word of %zu bytes", n);
    w->enc = e;
    w->enc_cap = cap;
  }
  size_t m = 0;
  for (size_t i = 0; i < n; i++) m += kiln__utf8_encode(kiln__byte_to_cp((uint8_t)word[i]), w->enc + m);
  int32_t id = kiln__vocab_find(v, w->enc, m);
  if (id >= 0 && v->types[id] != KILN_TOKEN_CONTROL && v->types[id] != KILN_TOKEN_UNKNOWN)
    *out_id = id;
  return NULL;
}

static kiln_status encode_word(const kiln_vocab *v, bpe_work *w, const char *text, size_t off,
                               size_t n, kiln__ids *out) {
  if (n == 0) return NULL;
  if (n > INT32_MAX) return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "word of %zu bytes", n);
  if (v->ignore_merges) {
    int32_t id;
    KILN_RETURN_IF_ERROR(whole_word(v, w, text + off, n, &id));
    if (id >= 0) return kiln__ids_push(out, id);
  }
  if (n > w->cap) {
    bpe_sym *s = realloc(w->s, n * sizeof *s);
    if (!s) return kiln_status_new(KILN_STATUS_NO_MEMORY, "word of %zu bytes", n);
    w->s = s;
    w->cap = n;
  }
  bpe_sym *s = w->s;
  int32_t nsym = (int32_t)n;
  for (int32_t i = 0; i < nsym; i++) {
    s[i].prev = i - 1;
    s[i].next = i + 1 == nsym ? -1 : i + 1;
    s[i].id = v->byte_sym[(uint8_t)text[off + (size_t)i]];
    s[i].off = off + (size_t)i;
    s[i].n = 1;
  }
  w->h.n = 0;
  for (int32_t i = 1; i < nsym; i++) KILN_RETURN_IF_ERROR(try_add(v, s, i - 1, i, &w->h));
  kiln__bigram b;
  while (kiln__heap_pop(&w->h, &b)) {
    bpe_sym *l = &s[b.left], *r = &s[b.right];
    /* Texts only grow, so unchanged ids mean the pair is still as queued. */
    if (l->n == 0 || r->n == 0 || l->id != b.a || r->id != b.b || l->next != b.right) continue;
    const kiln__pair_slot *m = kiln__pairtab_find(&v->merges, l->id, r->id);
    l->id = m->merged;
    l->n += r->n;
    r->n = 0;
    l->next = r->next;
    if (r->next >= 0) s[r->next].prev = b.left;
    KILN_RETURN_IF_ERROR(try_add(v, s, l->prev, b.left, &w->h));
    KILN_RETURN_IF_ERROR(try_add(v, s, b.left, l->next, &w->h));
  }
  for (int32_t i = 0; i != -1; i = s[i].next) KILN_RETURN_IF_ERROR(emit(v, text, &s[i], out));
  return NULL;
}

kiln_status kiln__bpe_encode(const kiln_vocab *v, const char *text, size_t len, kiln__ids *out) {
  if (len == 0) return NULL;
  kiln__spans words = {0};
  kiln_status st = kiln__pretokenize(&v->pretok, text, len, &words);
  bpe_work w = {0};
  for (size_t i = 0; i < words.n && !st; i++)
    st = encode_word(v, &w, text, words.v[i].off, words.v[i].len, out);
  free(w.s);
  free(w.h.v);
  free(w.enc);
  free(words.v);
  return st;
}
