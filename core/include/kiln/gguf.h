/*
 * kiln/gguf.h — a validating reader for GGUF model files.
 *
 * Follows the GGUF specification (ggml-org/ggml docs/gguf.md), versions 2 and
 * 3 (version 1, with 32-bit counts, is refused with a message saying so).
 * The file is mapped read-only; every length, count, offset and size is
 * checked against the bytes left in the file before anything is allocated,
 * so a malformed or hostile file costs at most its own size in address space
 * and a bounded amount of heap. Errors are KILN_STATUS_MALFORMED (or
 * KILN_STATUS_IO, KILN_STATUS_UNSUPPORTED for an unknown tensor type) and
 * name the file, the byte offset and the field, key or tensor.
 *
 * Ownership: a kiln_gguf owns its mapping; every pointer it returns (strings,
 * arrays, tensor data) stays valid until kiln_gguf_close().
 */
#ifndef KILN_GGUF_H
#define KILN_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GGUF metadata value types (gguf.md, `gguf_metadata_value_type`). */
typedef enum kiln_gguf_vtype {
  KILN_GGUF_UINT8 = 0,
  KILN_GGUF_INT8 = 1,
  KILN_GGUF_UINT16 = 2,
  KILN_GGUF_INT16 = 3,
  KILN_GGUF_UINT32 = 4,
  KILN_GGUF_INT32 = 5,
  KILN_GGUF_FLOAT32 = 6,
  KILN_GGUF_BOOL = 7,
  KILN_GGUF_STRING = 8,
  KILN_GGUF_ARRAY = 9,
  KILN_GGUF_UINT64 = 10,
  KILN_GGUF_INT64 = 11,
  KILN_GGUF_FLOAT64 = 12,
  KILN_GGUF_VTYPE_COUNT = 13
} kiln_gguf_vtype;

/* A string inside the mapping: not NUL-terminated. */
typedef struct kiln_gguf_str {
  const char *ptr;
  uint64_t len;
} kiln_gguf_str;

/* One metadata key/value. Scalars are decoded into `v`; a STRING is `v.str`;
 * an ARRAY has elem_type and n; its elements are read with
 * kiln_gguf_arr_*(). */
typedef struct kiln_gguf_kv {
  kiln_gguf_str key;
  kiln_gguf_vtype type;
  kiln_gguf_vtype elem_type; /* ARRAY only */
  uint64_t n;                /* ARRAY only: element count */
  const uint8_t *arr_data;   /* ARRAY only: first element in the mapping */
  union {
    uint64_t u64;
    int64_t i64;
    double f64;
    float f32; /* FLOAT32 keeps its exact f32 (ε is compared bit-exactly) */
    bool b;
    kiln_gguf_str str;
  } v;
} kiln_gguf_kv;

/* One tensor_info entry, validated: type known, 1..4 dims each >= 1, byte
 * size without overflow, offset aligned, data inside the file. */
typedef struct kiln_gguf_tensor {
  kiln_gguf_str name;
  int32_t n_dims;
  int64_t ne[4];      /* ne0 first; dims past n_dims are 1 */
  kiln_type type;
  uint64_t offset;    /* from the start of the data section */
  uint64_t nbytes;
  const void *data;   /* in the mapping */
} kiln_gguf_tensor;

typedef struct kiln_gguf kiln_gguf;

/* Maps and validates `path`. The whole header (KVs and tensor infos) is
 * parsed and checked here; tensor bytes are not read. Errors name `path`. */
kiln_status kiln_gguf_open(const char *path, kiln_gguf **out_gguf);

/* The same, over bytes already in memory (fuzzing, tests); `name` is used in
 * messages. The bytes must outlive the kiln_gguf. */
kiln_status kiln_gguf_open_memory(const void *data, size_t size, const char *name,
                                  kiln_gguf **out_gguf);

void kiln_gguf_close(kiln_gguf *g);

const char *kiln_gguf_path(const kiln_gguf *g);
uint32_t kiln_gguf_version(const kiln_gguf *g);
uint64_t kiln_gguf_alignment(const kiln_gguf *g); /* general.alignment, default 32 */
uint64_t kiln_gguf_data_offset(const kiln_gguf *g); /* file offset of the data section */

uint64_t kiln_gguf_n_kv(const kiln_gguf *g);
const kiln_gguf_kv *kiln_gguf_kv_at(const kiln_gguf *g, uint64_t i);
/* NULL when absent. */
const kiln_gguf_kv *kiln_gguf_find_kv(const kiln_gguf *g, const char *key);

uint64_t kiln_gguf_n_tensors(const kiln_gguf *g);
const kiln_gguf_tensor *kiln_gguf_tensor_at(const kiln_gguf *g, uint64_t i);
/* NULL when absent. */
const kiln_gguf_tensor *kiln_gguf_find_tensor(const kiln_gguf *g, const char *name);

/* Typed getters. Each fails with KILN_STATUS_NOT_FOUND naming the key when
 * it is absent, and KILN_STATUS_MALFORMED naming the key and both types when
 * it has another type. get_u32/get_u64 accept any unsigned or non-negative
 * signed integer type that fits; get_f32 accepts FLOAT32 only (so ε stays
 * bit-exact) and get_f64 FLOAT32 or FLOAT64. get_str copies into buf
 * (NUL-terminated; KILN_STATUS_OUT_OF_RANGE if it does not fit). */
kiln_status kiln_gguf_get_u32(const kiln_gguf *g, const char *key, uint32_t *out);
kiln_status kiln_gguf_get_u64(const kiln_gguf *g, const char *key, uint64_t *out);
kiln_status kiln_gguf_get_f32(const kiln_gguf *g, const char *key, float *out);
kiln_status kiln_gguf_get_bool(const kiln_gguf *g, const char *key, bool *out);
kiln_status kiln_gguf_get_str(const kiln_gguf *g, const char *key, char *buf, size_t cap);
/* An ARRAY of `elem_type` (checked), its count in *out_n. */
kiln_status kiln_gguf_get_arr(const kiln_gguf *g, const char *key, kiln_gguf_vtype elem_type,
                              const kiln_gguf_kv **out_kv);

/* Element i of an ARRAY kv (i < kv->n, elem type as named; checked with
 * assert, since kiln_gguf_get_arr validated both). Strings in arrays are
 * located by walking once at open time, so this is O(1). */
kiln_gguf_str kiln_gguf_arr_str(const kiln_gguf *g, const kiln_gguf_kv *kv, uint64_t i);
float kiln_gguf_arr_f32(const kiln_gguf_kv *kv, uint64_t i);
int32_t kiln_gguf_arr_i32(const kiln_gguf_kv *kv, uint64_t i);
uint32_t kiln_gguf_arr_u32(const kiln_gguf_kv *kv, uint64_t i);

/* The name of a value type ("uint32"). */
const char *kiln_gguf_vtype_name(kiln_gguf_vtype t);

#ifdef __cplusplus
}
#endif
#endif /* KILN_GGUF_H */
