/* A string -> id hash table for token texts: one arena holds every text
 * (NUL-terminated, so kiln_vocab_token_text can hand out pointers), and an
 * open-addressing index of power-of-two size with linear probing finds an
 * entry in O(1). Loading Qwen's 151,936 tokens is one pass of inserts. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "tokenizer_internal.h"

static uint64_t hash_bytes(const char *s, size_t n) { return XXH3_64bits(s, n); }

static kiln_status grow_index(kiln__strtab *t, uint64_t nslots) {
  int32_t *slots = calloc(nslots, sizeof *slots);
  if (!slots) return kiln_status_new(KILN_STATUS_NO_MEMORY, "token table: %llu slots",
                                     (unsigned long long)nslots);
  uint64_t mask = nslots - 1;
  for (int32_t id = 0; id < t->n; id++) {
    uint64_t h = hash_bytes(t->arena + t->off[id], t->len[id]) & mask;
    while (slots[h]) h = (h + 1) & mask;
    slots[h] = id + 1;
  }
  free(t->slots);
  t->slots = slots;
  t->mask = mask;
  return NULL;
}

kiln_status kiln__strtab_init(kiln__strtab *t, int32_t expected) {
  memset(t, 0, sizeof *t);
  if (expected < 16) expected = 16;
  t->cap = expected;
  t->off = malloc((size_t)t->cap * sizeof *t->off);
  t->len = malloc((size_t)t->cap * sizeof *t->len);
  t->arena_cap = (size_t)expected * 8;
  t->arena = malloc(t->arena_cap);
  if (!t->off || !t->len || !t->arena) {
    kiln__strtab_free(t);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "token table for %d entries", (int)expected);
  }
  uint64_t nslots = 64;
  while (nslots < (uint64_t)expected * 2) nslots <<= 1;
  kiln_status st = grow_index(t, nslots);
  if (st) kiln__strtab_free(t);
  return st;
}

void kiln__strtab_free(kiln__strtab *t) {
  free(t->arena);
  free(t->off);
  free(t->len);
  free(t->slots);
  memset(t, 0, sizeof *t);
}

int32_t kiln__strtab_find(const kiln__strtab *t, const char *text, size_t len) {
  uint64_t h = hash_bytes(text, len) & t->mask;
  for (;;) {
    int32_t s = t->slots[h];
    if (!s) return -1;
    int32_t id = s - 1;
    if (t->len[id] == len && memcmp(t->arena + t->off[id], text, len) == 0) return id;
    h = (h + 1) & t->mask;
  }
}

kiln_status kiln__strtab_add(kiln__strtab *t, const char *text, size_t len, int32_t *out_id,
                             bool *out_added) {
  if (len > UINT32_MAX) return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "token text of %zu bytes", len);
  int32_t found = kiln__strtab_find(t, text, len);
  if (found >= 0) {
    *out_id = found;
    if (out_added) *out_added = false;
    return NULL;
  }
  if (t->n == INT32_MAX - 1)
    return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "token table is full");
  if (t->n == t->cap) {
    int32_t cap = t->cap > INT32_MAX / 2 ? INT32_MAX - 1 : t->cap * 2;
    uint64_t *off = realloc(t->off, (size_t)cap * sizeof *off);
    if (!off) return kiln_status_new(KILN_STATUS_NO_MEMORY, "token table growth");
    t->off = off;
    uint32_t *lens = realloc(t->len, (size_t)cap * sizeof *lens);
    if (!lens) return kiln_status_new(KILN_STATUS_NO_MEMORY, "token table growth");
    t->len = lens;
    t->cap = cap;
  }
  if (t->arena_len + len + 1 > t->arena_cap) {
    size_t cap = t->arena_cap * 2;
    while (cap < t->arena_len + len + 1) cap *= 2;
    char *a = realloc(t->arena, cap);
    if (!a) return kiln_status_new(KILN_STATUS_NO_MEMORY, "token text arena of %zu bytes", cap);
    t->arena = a;
    t->arena_cap = cap;
  }
  /* Keep the load factor at or below one half. */
  if ((uint64_t)(t->n + 1) * 2 > t->mask + 1) {
    KILN_RETURN_IF_ERROR(grow_index(t, (t->mask + 1) * 2));
  }
  int32_t id = t->n++;
  t->off[id] = t->arena_len;
  t->len[id] = (uint32_t)len;
  if (len) memcpy(t->arena + t->arena_len, text, len);
  t->arena[t->arena_len + len] = '\0';
  t->arena_len += len + 1;
  uint64_t h = hash_bytes(text, len) & t->mask;
  while (t->slots[h]) h = (h + 1) & t->mask;
  t->slots[h] = id + 1;
  *out_id = id;
  if (out_added) *out_added = true;
  return NULL;
}
