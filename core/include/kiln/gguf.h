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

/* One metadata key/value. Scalars are decoded into `v`: UINT8/16/32/64 into
 * v.u64, INT8/16/32/64 sign-extended into v.i64, FLOAT32 into v.f32,
 * FLOAT64 into v.f64, BOOL into v.b; a STRING is `v.str`. An ARRAY has
 * elem_type (never ARRAY: nested arrays are refused at open, as ggml does)
 * and n; its elements are read with kiln_gguf_arr_*(). */
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
 * parsed and checked here; tensor bytes are not read. Errors name `path`:
 * KILN_STATUS_NOT_FOUND when it does not exist, KILN_STATUS_IO when it
 * cannot be opened or mapped, KILN_STATUS_UNSUPPORTED for GGUF versions
 * other than 2 and 3 (version 1 is named as such), for tensor types kiln
 * does not read and for arrays of arrays, KILN_STATUS_MALFORMED for
 * everything else wrong in the bytes (message: "<path>: byte <offset>:
 * <field>: <what is wrong>").
 * Also refused: general.alignment that is not a uint32 non-zero multiple of
 * 8, duplicate keys or tensor names, keys over 65535 bytes and tensor names
 * over 64 (gguf.md), bools other than 0/1, n_dims outside 1..4, a zero
 * dimension, ne0 not a whole number of blocks, a byte size that overflows,
 * a tensor offset not aligned or data past the end of the file. */
kiln_status kiln_gguf_open(const char *path, kiln_gguf **out_gguf);

/* The same, over bytes already in memory (fuzzing, tests); `name` (NULL:
 * "<memory>") is used in messages. The bytes must outlive the kiln_gguf;
 * they need no alignment (values are read byte by byte), but tensor data
 * pointers are only as aligned as data + offset. */
kiln_status kiln_gguf_open_memory(const void *data, size_t size, const char *name,
                                  kiln_gguf **out_gguf);

/* Unmaps and frees g and everything it returned; NULL is fine. */
void kiln_gguf_close(kiln_gguf *g);

/* The path (or the name given to open_memory), for messages. */
const char *kiln_gguf_path(const kiln_gguf *g);
/* The header's version: 2 or 3. */
uint32_t kiln_gguf_version(const kiln_gguf *g);
/* general.alignment, or 32 when the file does not set it. */
uint64_t kiln_gguf_alignment(const kiln_gguf *g);
/* File offset of the data section: the end of the tensor infos rounded up
 * to the alignment (it may equal or pass the file size when the file holds
 * no tensors and its writer left the padding out). */
uint64_t kiln_gguf_data_offset(const kiln_gguf *g);

/* Key/values in file order; kv_at is NULL for i >= n_kv. find_kv looks a
 * key up through a hash table built at open (O(1)); NULL when absent. */
uint64_t kiln_gguf_n_kv(const kiln_gguf *g);
const kiln_gguf_kv *kiln_gguf_kv_at(const kiln_gguf *g, uint64_t i);
const kiln_gguf_kv *kiln_gguf_find_kv(const kiln_gguf *g, const char *key);

/* Tensor infos in file order, likewise; NULL past the end or when absent. */
uint64_t kiln_gguf_n_tensors(const kiln_gguf *g);
const kiln_gguf_tensor *kiln_gguf_tensor_at(const kiln_gguf *g, uint64_t i);
const kiln_gguf_tensor *kiln_gguf_find_tensor(const kiln_gguf *g, const char *name);

/* Typed getters. Each fails with KILN_STATUS_NOT_FOUND naming the file and
 * key when it is absent, and KILN_STATUS_MALFORMED naming the key and both
 * types when it has another type. get_u32/get_u64 accept any unsigned or
 * non-negative signed integer type, get_i64 any integer type; a value that
 * does not fit the output (negative, or over UINT32_MAX / INT64_MAX) is
 * KILN_STATUS_OUT_OF_RANGE. get_f32 accepts FLOAT32 only (so ε stays
 * bit-exact) and get_f64 FLOAT32 or FLOAT64. get_str copies into buf
 * (NUL-terminated; KILN_STATUS_OUT_OF_RANGE if it does not fit); get_strv
 * returns the string in place, without copying, its bytes as the file
 * holds them (the GGUF spec's strings are length-prefixed and may hold
 * NULs); get_text is get_strv for a key that holds text: it refuses a
 * value with a NUL byte inside (KILN_STATUS_MALFORMED, showing the value
 * escaped), since C code would read a shorter value than the file holds
 * ("gpt2\0" compared and printed as "gpt2"). get_str refuses one too.
 * On failure *out is left alone, so a caller can preset a default and
 * ignore NOT_FOUND. */
kiln_status kiln_gguf_get_u32(const kiln_gguf *g, const char *key, uint32_t *out);
kiln_status kiln_gguf_get_u64(const kiln_gguf *g, const char *key, uint64_t *out);
kiln_status kiln_gguf_get_i64(const kiln_gguf *g, const char *key, int64_t *out);
kiln_status kiln_gguf_get_f32(const kiln_gguf *g, const char *key, float *out);
kiln_status kiln_gguf_get_f64(const kiln_gguf *g, const char *key, double *out);
kiln_status kiln_gguf_get_bool(const kiln_gguf *g, const char *key, bool *out);
kiln_status kiln_gguf_get_str(const kiln_gguf *g, const char *key, char *buf, size_t cap);
kiln_status kiln_gguf_get_strv(const kiln_gguf *g, const char *key, kiln_gguf_str *out);
kiln_status kiln_gguf_get_text(const kiln_gguf *g, const char *key, kiln_gguf_str *out);
/* An ARRAY whose elements are `elem_type` (both checked, errors as above);
 * the count is (*out_kv)->n. */
kiln_status kiln_gguf_get_arr(const kiln_gguf *g, const char *key, kiln_gguf_vtype elem_type,
                              const kiln_gguf_kv **out_kv);

/* Element i of an ARRAY kv (i < kv->n, elem type as named; checked with
 * assert, since kiln_gguf_get_arr validated both). Strings in arrays are
 * located by walking once at open time, so arr_str is O(1). BOOL arrays
 * hold 0 or 1 (checked at open). */
kiln_gguf_str kiln_gguf_arr_str(const kiln_gguf *g, const kiln_gguf_kv *kv, uint64_t i);
float kiln_gguf_arr_f32(const kiln_gguf_kv *kv, uint64_t i);
double kiln_gguf_arr_f64(const kiln_gguf_kv *kv, uint64_t i);
uint8_t kiln_gguf_arr_u8(const kiln_gguf_kv *kv, uint64_t i);
int8_t kiln_gguf_arr_i8(const kiln_gguf_kv *kv, uint64_t i);
uint16_t kiln_gguf_arr_u16(const kiln_gguf_kv *kv, uint64_t i);
int16_t kiln_gguf_arr_i16(const kiln_gguf_kv *kv, uint64_t i);
int32_t kiln_gguf_arr_i32(const kiln_gguf_kv *kv, uint64_t i);
uint32_t kiln_gguf_arr_u32(const kiln_gguf_kv *kv, uint64_t i);
uint64_t kiln_gguf_arr_u64(const kiln_gguf_kv *kv, uint64_t i);
int64_t kiln_gguf_arr_i64(const kiln_gguf_kv *kv, uint64_t i);
bool kiln_gguf_arr_bool(const kiln_gguf_kv *kv, uint64_t i);

/* The name of a value type ("uint32"), "?" for an unknown one. */
const char *kiln_gguf_vtype_name(kiln_gguf_vtype t);

/* Bytes of one value of a scalar type (1 for UINT8/INT8/BOOL ... 8 for
 * UINT64/INT64/FLOAT64); 0 for STRING, ARRAY and unknown types. */
size_t kiln_gguf_vtype_size(kiln_gguf_vtype t);

#ifdef __cplusplus
}
#endif
#endif /* KILN_GGUF_H */
