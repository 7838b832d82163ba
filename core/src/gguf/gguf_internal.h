/* The reader's state, shared by gguf_read.c (parsing, validation, lookup),
 * gguf_get.c (typed getters, array access) and gguf_vtype.c (value types).
 * Internal to libkiln. */
#ifndef KILN_SRC_GGUF_INTERNAL_H
#define KILN_SRC_GGUF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/gguf.h"

/* An open-addressing hash table from names to entry indices: slots hold
 * index + 1 (0 = empty); capacity is a power of two at least twice the
 * number of entries, so probes stay short. */
typedef struct kiln__gguf_index {
  uint64_t *slots;
  uint64_t mask;
} kiln__gguf_index;

struct kiln_gguf {
  char *name;           /* path or caller's name, for messages */
  const uint8_t *data;  /* the whole file */
  uint64_t size;
  void *map;            /* mmap'd region (NULL for kiln_gguf_open_memory) */
  size_t map_len;
  uint32_t version;
  uint64_t alignment;
  uint64_t data_offset;
  uint64_t n_kv;
  kiln_gguf_kv *kvs;
  uint64_t kv_cap; /* entries allocated in kvs and str_offsets (<= n_kv) */
  /* For each kv that is an ARRAY of STRING: the byte offset of each
   * element's length prefix from kv->arr_data (O(1) element access);
   * NULL for every other kv. */
  uint64_t **str_offsets;
  uint64_t n_tensors;
  kiln_gguf_tensor *tensors;
  uint64_t tensor_cap; /* entries allocated in tensors (<= n_tensors) */
  kiln__gguf_index kv_index;
  kiln__gguf_index tensor_index;
};

#endif /* KILN_SRC_GGUF_INTERNAL_H */
