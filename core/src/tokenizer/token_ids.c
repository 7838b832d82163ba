/* The growable array of token ids every tokenizer algorithm appends to:
 * below tokenize.c, tokenize_spm.c and tokenize_bpe.c alike. */
#include "config.h"

#include <stdlib.h>

#include "tokenizer_internal.h"

kiln_status kiln__ids_push(kiln__ids *a, int32_t id) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 64;
    int32_t *v = realloc(a->v, cap * sizeof *v);
    if (!v) return kiln_status_new(KILN_STATUS_NO_MEMORY, "%zu token ids", cap);
    a->v = v;
    a->cap = cap;
  }
  a->v[a->n++] = id;
  return NULL;
}
