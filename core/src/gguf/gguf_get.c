/* Typed access to a validated kiln_gguf: getters that check the value type
 * (so ε stays the exact f32 the file holds) and O(1) array element access.
 * Everything here was bounds-checked by gguf_read.c at open; the asserts
 * guard callers' indices, not the file. */
#include "config.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kiln/escape.h"

#include "byteorder.h"
#include "gguf_internal.h"

/* File offset of kv's value (after its key and type), for messages. */
static uint64_t value_offset(const kiln_gguf *g, const kiln_gguf_kv *kv) {
  return (uint64_t)((const uint8_t *)kv->key.ptr - g->data) + kv->key.len + 4;
}

static kiln_status lookup(const kiln_gguf *g, const char *key, const kiln_gguf_kv **out) {
  const kiln_gguf_kv *kv = kiln_gguf_find_kv(g, key);
  if (!kv) return kiln_status_new(KILN_STATUS_NOT_FOUND, "%s: key '%s' not found", g->name, key);
  *out = kv;
  return NULL;
}

static kiln_status wrong_type(const kiln_gguf *g, const char *key, const kiln_gguf_kv *kv,
                              const char *expected) {
  if (kv->type == KILN_GGUF_ARRAY) {
    return kiln_status_new(KILN_STATUS_MALFORMED,
                           "%s: byte %" PRIu64 ": key '%s' is an array of %s, expected %s", g->name,
                           value_offset(g, kv), key, kiln_gguf_vtype_name(kv->elem_type), expected);
  }
  return kiln_status_new(KILN_STATUS_MALFORMED,
                         "%s: byte %" PRIu64 ": key '%s' has type %s, expected %s", g->name,
                         value_offset(g, kv), key, kiln_gguf_vtype_name(kv->type), expected);
}

static int is_unsigned(kiln_gguf_vtype t) {
  return t == KILN_GGUF_UINT8 || t == KILN_GGUF_UINT16 || t == KILN_GGUF_UINT32 ||
         t == KILN_GGUF_UINT64;
}

static int is_signed(kiln_gguf_vtype t) {
  return t == KILN_GGUF_INT8 || t == KILN_GGUF_INT16 || t == KILN_GGUF_INT32 ||
         t == KILN_GGUF_INT64;
}

kiln_status kiln_gguf_get_u64(const kiln_gguf *g, const char *key, uint64_t *out) {
  const kiln_gguf_kv *kv = NULL;
  KILN_RETURN_IF_ERROR(lookup(g, key, &kv));
  if (is_unsigned(kv->type)) {
    *out = kv->v.u64;
    return NULL;
  }
  if (!is_signed(kv->type)) return wrong_type(g, key, kv, "an unsigned integer");
  if (kv->v.i64 < 0) {
    return kiln_status_new(KILN_STATUS_OUT_OF_RANGE,
                           "%s: byte %" PRIu64 ": key '%s' is %" PRId64 ", expected a count (>= 0)",
                           g->name, value_offset(g, kv), key, kv->v.i64);
  }
  *out = (uint64_t)kv->v.i64;
  return NULL;
}

kiln_status kiln_gguf_get_u32(const kiln_gguf *g, const char *key, uint32_t *out) {
  uint64_t v;
  KILN_RETURN_IF_ERROR(kiln_gguf_get_u64(g, key, &v));
  if (v > UINT32_MAX) {
    return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "%s: key '%s' is %" PRIu64 ", over UINT32_MAX",
                           g->name, key, v);
  }
  *out = (uint32_t)v;
  return NULL;
}

kiln_status kiln_gguf_get_i64(const kiln_gguf *g, const char *key, int64_t *out) {
  const kiln_gguf_kv *kv = NULL;
  KILN_RETURN_IF_ERROR(lookup(g, key, &kv));
  if (is_signed(kv->type)) {
    *out = kv->v.i64;
    return NULL;
  }
  if (!is_unsigned(kv->type)) return wrong_type(g, key, kv, "an integer");
  if (kv->v.u64 > (uint64_t)INT64_MAX) {
    return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "%s: key '%s' is %" PRIu64 ", over INT64_MAX",
                           g->name, key, kv->v.u64);
  }
  *out = (int64_t)kv->v.u64;
  return NULL;
}

kiln_status kiln_gguf_get_f32(const kiln_gguf *g, const char *key, float *out) {
  const kiln_gguf_kv *kv = NULL;
  KILN_RETURN_IF_ERROR(lookup(g, key, &kv));
  if (kv->type != KILN_GGUF_FLOAT32) return wrong_type(g, key, kv, "float32");
  *out = kv->v.f32;
  return NULL;
}

kiln_status kiln_gguf_get_f64(const kiln_gguf *g, const char *key, double *out) {
  const kiln_gguf_kv *kv = NULL;
  KILN_RETURN_IF_ERROR(lookup(g, key, &kv));
  if (kv->type == KILN_GGUF_FLOAT32) {
    *out = kv->v.f32;
  } else if (kv->type == KILN_GGUF_FLOAT64) {
    *out = kv->v.f64;
  } else {
    return wrong_type(g, key, kv, "float32 or float64");
  }
  return NULL;
}

kiln_status kiln_gguf_get_bool(const kiln_gguf *g, const char *key, bool *out) {
  const kiln_gguf_kv *kv = NULL;
  KILN_RETURN_IF_ERROR(lookup(g, key, &kv));
  if (kv->type != KILN_GGUF_BOOL) return wrong_type(g, key, kv, "bool");
  *out = kv->v.b;
  return NULL;
}

kiln_status kiln_gguf_get_strv(const kiln_gguf *g, const char *key, kiln_gguf_str *out) {
  const kiln_gguf_kv *kv = NULL;
  KILN_RETURN_IF_ERROR(lookup(g, key, &kv));
  if (kv->type != KILN_GGUF_STRING) return wrong_type(g, key, kv, "string");
  *out = kv->v.str;
  return NULL;
}

kiln_status kiln_gguf_get_text(const kiln_gguf *g, const char *key, kiln_gguf_str *out) {
  kiln_gguf_str s;
  KILN_RETURN_IF_ERROR(kiln_gguf_get_strv(g, key, &s));
  const char *nul = memchr(s.ptr, '\0', (size_t)s.len);
  if (nul) {
    const kiln_gguf_kv *kv = NULL;
    KILN_RETURN_IF_ERROR(lookup(g, key, &kv)); /* found above: its offset, for the message */
    char q[KILN_QUOTE_CAP(64)];
    return kiln_status_new(KILN_STATUS_MALFORMED,
                           "%s: byte %" PRIu64 ": key '%s' = %s holds a NUL byte (at byte %td of the "
                           "value); a string value is text without NULs",
                           g->name, value_offset(g, kv), key, kiln_quote(q, sizeof q, s.ptr, (size_t)s.len, 64),
                           nul - s.ptr);
  }
  *out = s;
  return NULL;
}

kiln_status kiln_gguf_get_str(const kiln_gguf *g, const char *key, char *buf, size_t cap) {
  kiln_gguf_str s = {0}; /* set on success; gcc cannot tell */
  KILN_RETURN_IF_ERROR(kiln_gguf_get_text(g, key, &s));
  if (s.len >= cap) {
    return kiln_status_new(KILN_STATUS_OUT_OF_RANGE,
                           "%s: key '%s' is a string of %" PRIu64
                           " bytes; the buffer holds %zu with its NUL",
                           g->name, key, s.len, cap);
  }
  memcpy(buf, s.ptr, (size_t)s.len);
  buf[s.len] = '\0';
  return NULL;
}

kiln_status kiln_gguf_get_arr(const kiln_gguf *g, const char *key, kiln_gguf_vtype elem_type,
                              const kiln_gguf_kv **out_kv) {
  const kiln_gguf_kv *kv = NULL;
  KILN_RETURN_IF_ERROR(lookup(g, key, &kv));
  if (kv->type != KILN_GGUF_ARRAY || kv->elem_type != elem_type) {
    char expected[48];
    snprintf(expected, sizeof expected, "an array of %s", kiln_gguf_vtype_name(elem_type));
    return wrong_type(g, key, kv, expected);
  }
  *out_kv = kv;
  return NULL;
}

/* ---- array elements ------------------------------------------------------- */

static const uint8_t *elem(const kiln_gguf_kv *kv, kiln_gguf_vtype t, uint64_t i) {
  assert(kv->type == KILN_GGUF_ARRAY && kv->elem_type == t && i < kv->n);
  return kv->arr_data + i * kiln_gguf_vtype_size(t);
}

kiln_gguf_str kiln_gguf_arr_str(const kiln_gguf *g, const kiln_gguf_kv *kv, uint64_t i) {
  assert(kv >= g->kvs && kv < g->kvs + g->n_kv);
  assert(kv->type == KILN_GGUF_ARRAY && kv->elem_type == KILN_GGUF_STRING && i < kv->n);
  const uint8_t *p = kv->arr_data + g->str_offsets[kv - g->kvs][i];
  kiln_gguf_str s = {(const char *)p + 8, kiln__rd_u64(p)};
  return s;
}

float kiln_gguf_arr_f32(const kiln_gguf_kv *kv, uint64_t i) {
  return kiln__rd_f32(elem(kv, KILN_GGUF_FLOAT32, i));
}
double kiln_gguf_arr_f64(const kiln_gguf_kv *kv, uint64_t i) {
  return kiln__rd_f64(elem(kv, KILN_GGUF_FLOAT64, i));
}
uint8_t kiln_gguf_arr_u8(const kiln_gguf_kv *kv, uint64_t i) {
  return *elem(kv, KILN_GGUF_UINT8, i);
}
int8_t kiln_gguf_arr_i8(const kiln_gguf_kv *kv, uint64_t i) {
  return (int8_t)*elem(kv, KILN_GGUF_INT8, i);
}
uint16_t kiln_gguf_arr_u16(const kiln_gguf_kv *kv, uint64_t i) {
  return kiln__rd_u16(elem(kv, KILN_GGUF_UINT16, i));
}
int16_t kiln_gguf_arr_i16(const kiln_gguf_kv *kv, uint64_t i) {
  return (int16_t)kiln__rd_u16(elem(kv, KILN_GGUF_INT16, i));
}
int32_t kiln_gguf_arr_i32(const kiln_gguf_kv *kv, uint64_t i) {
  return (int32_t)kiln__rd_u32(elem(kv, KILN_GGUF_INT32, i));
}
uint32_t kiln_gguf_arr_u32(const kiln_gguf_kv *kv, uint64_t i) {
  return kiln__rd_u32(elem(kv, KILN_GGUF_UINT32, i));
}
uint64_t kiln_gguf_arr_u64(const kiln_gguf_kv *kv, uint64_t i) {
  return kiln__rd_u64(elem(kv, KILN_GGUF_UINT64, i));
}
bool kiln_gguf_arr_bool(const kiln_gguf_kv *kv, uint64_t i) {
  return *elem(kv, KILN_GGUF_BOOL, i) != 0;
}

int64_t kiln_gguf_arr_i64(const kiln_gguf_kv *kv, uint64_t i) {
  uint64_t u = kiln__rd_u64(elem(kv, KILN_GGUF_INT64, i));
  int64_t v;
  memcpy(&v, &u, 8);
  return v;
}
