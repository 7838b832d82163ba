/* A byte builder for crafting GGUF files by hand in tests, independent of
 * kiln's writer, so the reader is tested against bytes laid out straight
 * from gguf.md. Every append records the new length as a field boundary
 * (tb.marks), which the truncation tests cut at. Aborts on allocation
 * failure: these are test fixtures. */
#ifndef KILN_TESTS_GGUF_TESTBUF_H
#define KILN_TESTS_GGUF_TESTBUF_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TB_MAX_MARKS 4096

typedef struct tb {
  uint8_t *p;
  size_t n, cap;
  size_t marks[TB_MAX_MARKS];
  size_t n_marks;
} tb;

static inline tb *tb_new(void) {
  tb *b = calloc(1, sizeof *b);
  if (!b) abort();
  return b;
}

static inline void tb_free(tb *b) {
  if (!b) return;
  free(b->p);
  free(b);
}

static inline void tb_bytes(tb *b, const void *d, size_t n) {
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) abort();
    b->p = p;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, d, n);
  b->n += n;
  if (b->n_marks < TB_MAX_MARKS) b->marks[b->n_marks++] = b->n;
}

static inline void tb_u8(tb *b, uint8_t v) { tb_bytes(b, &v, 1); }

static inline void tb_u16(tb *b, uint16_t v) {
  uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
  tb_bytes(b, x, 2);
}

static inline void tb_u32(tb *b, uint32_t v) {
  uint8_t x[4];
  for (int i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
  tb_bytes(b, x, 4);
}

static inline void tb_u64(tb *b, uint64_t v) {
  uint8_t x[8];
  for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
  tb_bytes(b, x, 8);
}

static inline void tb_f32(tb *b, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  tb_u32(b, u);
}

/* A gguf_string_t: u64 length, then the bytes. */
static inline void tb_str(tb *b, const char *s) {
  tb_u64(b, strlen(s));
  tb_bytes(b, s, strlen(s));
}

/* The fixed header: magic, version, tensor_count, metadata_kv_count. */
static inline void tb_header(tb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
  tb_bytes(b, "GGUF", 4);
  tb_u32(b, version);
  tb_u64(b, n_tensors);
  tb_u64(b, n_kv);
}

/* A key and its value type (the value follows). */
static inline void tb_key(tb *b, const char *key, uint32_t vtype) {
  tb_str(b, key);
  tb_u32(b, vtype);
}

/* A tensor info with n_dims dims from ne. */
static inline void tb_tensor(tb *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                             uint32_t type, uint64_t offset) {
  tb_str(b, name);
  tb_u32(b, n_dims);
  for (uint32_t d = 0; d < n_dims; d++) tb_u64(b, ne[d]);
  tb_u32(b, type);
  tb_u64(b, offset);
}

/* Zero bytes up to a multiple of `align`. */
static inline void tb_pad(tb *b, size_t align) {
  static const uint8_t z[256];
  while (b->n % align) {
    size_t k = align - b->n % align;
    tb_bytes(b, z, k < sizeof z ? k : sizeof z);
  }
}

/* Zero bytes up to exactly `size` (for hostile headers in a 1 KiB file). */
static inline void tb_fill_to(tb *b, size_t size) {
  static const uint8_t z[256];
  while (b->n < size) {
    size_t k = size - b->n;
    tb_bytes(b, z, k < sizeof z ? k : sizeof z);
  }
}

#endif /* KILN_TESTS_GGUF_TESTBUF_H */
