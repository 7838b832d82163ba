/* The memory tier: one chained hash table per registered compiler, from
 * key to kernel. Consulted at plan time only; launches keep the kernel. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "kcache_internal.h"

static uint32_t bucket_of(const kcache_mem *m, const kiln_kkey *key) {
  uint64_t h;
  memcpy(&h, key->opaque, sizeof h); /* the key is already a good hash */
  return (uint32_t)(h % m->n_buckets);
}

kiln_kernel *kiln__kcache_mem_find(kcache_mem *m, const kiln_kkey *key) {
  if (!m->n_buckets) return NULL;
  for (kcache_mem_node *n = m->buckets[bucket_of(m, key)]; n; n = n->next)
    if (kiln_kkey_equal(&n->kernel.key, key)) return &n->kernel;
  return NULL;
}

static bool grow(kcache_mem *m) {
  uint32_t nb = m->n_buckets ? 2 * m->n_buckets : 64;
  kcache_mem_node **b = calloc(nb, sizeof *b);
  if (!b) return false;
  kcache_mem old = *m;
  m->buckets = b;
  m->n_buckets = nb;
  for (uint32_t i = 0; i < old.n_buckets; i++) {
    kcache_mem_node *n = old.buckets[i];
    while (n) {
      kcache_mem_node *next = n->next;
      uint32_t j = bucket_of(m, &n->kernel.key);
      n->next = b[j];
      b[j] = n;
      n = next;
    }
  }
  free(old.buckets);
  return true;
}

kiln_kernel *kiln__kcache_mem_insert(kcache_mem *m, const kiln_kernel *k) {
  if ((m->n_items + 1 > m->n_buckets) && !grow(m)) return NULL;
  kcache_mem_node *n = malloc(sizeof *n);
  if (!n) return NULL;
  n->kernel = *k;
  uint32_t j = bucket_of(m, &k->key);
  n->next = m->buckets[j];
  m->buckets[j] = n;
  m->n_items++;
  return &n->kernel;
}

void kiln__kcache_mem_clear(kcache_mem *m, void (*release)(void *, void *), void *user) {
  for (uint32_t i = 0; i < m->n_buckets; i++) {
    kcache_mem_node *n = m->buckets[i];
    while (n) {
      kcache_mem_node *next = n->next;
      if (n->kernel.slot && release) release(user, n->kernel.slot);
      free((char *)n->kernel.template_name);
      free((char *)n->kernel.entry);
      free((char *)n->kernel.canonical);
      free((void *)n->kernel.image);
      free(n);
      n = next;
    }
  }
  free(m->buckets);
  memset(m, 0, sizeof *m);
}
