/* The work queue both merge algorithms share: a binary max-heap of
 * candidate merges, so each step takes the best pair in O(log n) instead
 * of rescanning the word (llama.cpp's std::priority_queue, with its
 * comparators folded into one key). */
#include "config.h"

#include <stdlib.h>

#include "tokenizer_internal.h"

/* True when x must pop before y: higher key, then the leftmost pair. */
static bool before(const kiln__bigram *x, const kiln__bigram *y) {
  return x->key > y->key || (x->key == y->key && x->left < y->left);
}

kiln_status kiln__heap_push(kiln__heap *h, kiln__bigram b) {
  if (h->n == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 64;
    kiln__bigram *v = realloc(h->v, cap * sizeof *v);
    if (!v) return kiln_status_new(KILN_STATUS_NO_MEMORY, "merge queue of %zu entries", cap);
    h->v = v;
    h->cap = cap;
  }
  size_t i = h->n++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!before(&b, &h->v[parent])) break;
    h->v[i] = h->v[parent];
    i = parent;
  }
  h->v[i] = b;
  return NULL;
}

bool kiln__heap_pop(kiln__heap *h, kiln__bigram *out) {
  if (h->n == 0) return false;
  *out = h->v[0];
  kiln__bigram last = h->v[--h->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c])) c++;
    if (!before(&h->v[c], &last)) break;
    h->v[i] = h->v[c];
    i = c;
  }
  if (h->n) h->v[i] = last;
  return true;
}
