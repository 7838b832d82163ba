/* The BPE merge table: (left id, right id) -> (rank, merged id), open
 * addressing on a 64-bit key. Looking a pair up by ids instead of by the
 * two strings (as llama.cpp's std::map<pair<string,string>> does) makes a
 * merge step one hash probe with no string building. */
#include "config.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

#define EMPTY UINT64_MAX

/* splitmix64's finalizer: spreads neighbouring ids over the table. */
static uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

static uint64_t pair_key(int32_t left, int32_t right) {
  return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
}

kiln_status kiln__pairtab_init(kiln__pairtab *t, size_t expected) {
  memset(t, 0, sizeof *t);
  uint64_t nslots = 64;
  while (nslots < (uint64_t)expected * 2) nslots <<= 1;
  t->slots = malloc(nslots * sizeof *t->slots);
  if (!t->slots)
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "merge table: %llu slots",
                           (unsigned long long)nslots);
  for (uint64_t i = 0; i < nslots; i++) t->slots[i].key = EMPTY;
  t->mask = nslots - 1;
  return NULL;
}

void kiln__pairtab_free(kiln__pairtab *t) {
  free(t->slots);
  memset(t, 0, sizeof *t);
}

void kiln__pairtab_add(kiln__pairtab *t, int32_t left, int32_t right, int32_t rank,
                       int32_t merged) {
  uint64_t key = pair_key(left, right);
  uint64_t h = mix(key) & t->mask;
  while (t->slots[h].key != EMPTY) {
    if (t->slots[h].key == key) return;
    h = (h + 1) & t->mask;
  }
  /* The caller sized the table for every merge: at most half full. */
  assert((t->n + 1) * 2 <= t->mask + 1);
  t->slots[h].key = key;
  t->slots[h].rank = rank;
  t->slots[h].merged = merged;
  t->n++;
}

const kiln__pair_slot *kiln__pairtab_find(const kiln__pairtab *t, int32_t left, int32_t right) {
  uint64_t key = pair_key(left, right);
  uint64_t h = mix(key) & t->mask;
  while (t->slots[h].key != EMPTY) {
    if (t->slots[h].key == key) return &t->slots[h];
    h = (h + 1) & t->mask;
  }
  return NULL;
}
