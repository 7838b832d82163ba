/* GGUF writer: key/values and tensors collected in memory, serialised in the
 * layout of gguf.md (see kiln/gguf_write.h), written atomically to a file or
 * into a buffer.
 *
 * Each key/value is kept already encoded (the bytes that follow its type
 * field in the file), so writing is concatenation and copying a key from an
 * open file is a copy of its bytes. */
/* O_TMPFILE (Linux) is a GNU extension in glibc's <fcntl.h>. */
#define _GNU_SOURCE 1
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "byteorder.h"
#include "kiln/dequant.h"
#include "kiln/gguf_write.h"

#define DEFAULT_ALIGNMENT 32u
#define MAX_KEY_LEN 65535u  /* gguf.md */
#define MAX_TENSOR_NAME 63u /* ggml's GGML_MAX_NAME (64) less its NUL */
#define ALIGNMENT_KEY "general.alignment"

typedef struct wkv {
  char *key;
  size_t key_len;
  kiln_gguf_vtype type;
  uint8_t *val; /* the encoded value */
  size_t val_len;
} wkv;

typedef struct wtensor {
  char *name;
  size_t name_len;
  kiln_type type;
  uint32_t n_dims;
  int64_t ne[4];
  uint8_t *data;
  uint64_t nbytes;
} wtensor;

struct kiln_gguf_writer {
  uint32_t version;
  uint32_t alignment;
  wkv *kvs;
  size_t n_kv, cap_kv;
  wtensor *ts;
  size_t n_t, cap_t;
};

static kiln_status invalid(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static kiln_status invalid(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln_status st = kiln_status_newv(KILN_STATUS_INVALID_ARGUMENT, fmt, ap);
  va_end(ap);
  return kiln_status_annotate(st, "gguf writer");
}

static kiln_status no_memory(const char *what) {
  return kiln_status_new(KILN_STATUS_NO_MEMORY, "gguf writer: %s", what);
}

kiln_status kiln_gguf_writer_new(kiln_gguf_writer **out_writer) {
  if (!out_writer) return invalid("kiln_gguf_writer_new: NULL out_writer");
  kiln_gguf_writer *w = calloc(1, sizeof *w);
  if (!w) return no_memory("new writer");
  w->version = 3;
  w->alignment = DEFAULT_ALIGNMENT;
  *out_writer = w;
  return NULL;
}

void kiln_gguf_writer_free(kiln_gguf_writer *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n_kv; i++) {
    free(w->kvs[i].key);
    free(w->kvs[i].val);
  }
  for (size_t i = 0; i < w->n_t; i++) {
    free(w->ts[i].name);
    free(w->ts[i].data);
  }
  free(w->kvs);
  free(w->ts);
  free(w);
}

kiln_status kiln_gguf_writer_set_version(kiln_gguf_writer *w, uint32_t version) {
  if (version != 2 && version != 3) {
    return invalid("GGUF version %" PRIu32 ": kiln writes versions 2 and 3", version);
  }
  w->version = version;
  return NULL;
}

/* ---- key/values ----------------------------------------------------------- */

static wkv *find(const kiln_gguf_writer *w, const char *key, size_t len) {
  for (size_t i = 0; i < w->n_kv; i++) {
    if (w->kvs[i].key_len == len && memcmp(w->kvs[i].key, key, len) == 0) return &w->kvs[i];
  }
  return NULL;
}

/* Sets key (len bytes) to an encoded value, taking ownership of val (freed
 * here on failure). general.alignment is checked and applied. */
static kiln_status set_encoded(kiln_gguf_writer *w, const char *key, size_t len,
                               kiln_gguf_vtype type, uint8_t *val, size_t val_len) {
  kiln_status st = NULL;
  if (!key || len == 0 || len > MAX_KEY_LEN) {
    st = invalid("key of %zu bytes: keys are 1 to %u bytes", key ? len : 0, MAX_KEY_LEN);
  } else if (len == strlen(ALIGNMENT_KEY) && memcmp(key, ALIGNMENT_KEY, len) == 0) {
    uint32_t a = type == KILN_GGUF_UINT32 ? kiln__rd_u32(val) : 0;
    if (type != KILN_GGUF_UINT32) {
      st = invalid("key '%s': must be uint32 (gguf.md), not %s", ALIGNMENT_KEY,
                   kiln_gguf_vtype_name(type));
    } else if (a == 0 || a % 8 != 0) {
      st = invalid("key '%s': %" PRIu32 " is not a non-zero multiple of 8", ALIGNMENT_KEY, a);
    } else {
      w->alignment = a;
    }
  }
  if (st) {
    free(val);
    return st;
  }
  wkv *kv = find(w, key, len);
  if (kv) {
    free(kv->val);
  } else {
    if (w->n_kv == w->cap_kv) {
      size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
      wkv *n = realloc(w->kvs, cap * sizeof *n);
      if (!n) {
        free(val);
        return no_memory("key/value table");
      }
      w->kvs = n;
      w->cap_kv = cap;
    }
    char *k = malloc(len + 1);
    if (!k) {
      free(val);
      return no_memory("key");
    }
    memcpy(k, key, len);
    k[len] = '\0';
    kv = &w->kvs[w->n_kv++];
    kv->key = k;
    kv->key_len = len;
  }
  kv->type = type;
  kv->val = val;
  kv->val_len = val_len;
  return NULL;
}

static kiln_status set_scalar(kiln_gguf_writer *w, const char *key, kiln_gguf_vtype type,
                              uint64_t bits) {
  size_t n = kiln_gguf_vtype_size(type);
  uint8_t *val = malloc(n);
  if (!val) return no_memory("value");
  for (size_t i = 0; i < n; i++) val[i] = (uint8_t)(bits >> (8 * i));
  return set_encoded(w, key, key ? strlen(key) : 0, type, val, n);
}

kiln_status kiln_gguf_writer_set_u8(kiln_gguf_writer *w, const char *key, uint8_t v) {
  return set_scalar(w, key, KILN_GGUF_UINT8, v);
}
kiln_status kiln_gguf_writer_set_i8(kiln_gguf_writer *w, const char *key, int8_t v) {
  return set_scalar(w, key, KILN_GGUF_INT8, (uint8_t)v);
}
kiln_status kiln_gguf_writer_set_u16(kiln_gguf_writer *w, const char *key, uint16_t v) {
  return set_scalar(w, key, KILN_GGUF_UINT16, v);
}
kiln_status kiln_gguf_writer_set_i16(kiln_gguf_writer *w, const char *key, int16_t v) {
  return set_scalar(w, key, KILN_GGUF_INT16, (uint16_t)v);
}
kiln_status kiln_gguf_writer_set_u32(kiln_gguf_writer *w, const char *key, uint32_t v) {
  return set_scalar(w, key, KILN_GGUF_UINT32, v);
}
kiln_status kiln_gguf_writer_set_i32(kiln_gguf_writer *w, const char *key, int32_t v) {
  return set_scalar(w, key, KILN_GGUF_INT32, (uint32_t)v);
}
kiln_status kiln_gguf_writer_set_u64(kiln_gguf_writer *w, const char *key, uint64_t v) {
  return set_scalar(w, key, KILN_GGUF_UINT64, v);
}
kiln_status kiln_gguf_writer_set_i64(kiln_gguf_writer *w, const char *key, int64_t v) {
  return set_scalar(w, key, KILN_GGUF_INT64, (uint64_t)v);
}
kiln_status kiln_gguf_writer_set_f32(kiln_gguf_writer *w, const char *key, float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  return set_scalar(w, key, KILN_GGUF_FLOAT32, u);
}
kiln_status kiln_gguf_writer_set_f64(kiln_gguf_writer *w, const char *key, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  return set_scalar(w, key, KILN_GGUF_FLOAT64, u);
}
kiln_status kiln_gguf_writer_set_bool(kiln_gguf_writer *w, const char *key, bool v) {
  return set_scalar(w, key, KILN_GGUF_BOOL, v ? 1 : 0);
}

kiln_status kiln_gguf_writer_set_alignment(kiln_gguf_writer *w, uint32_t alignment) {
  return kiln_gguf_writer_set_u32(w, ALIGNMENT_KEY, alignment);
}

kiln_status kiln_gguf_writer_set_strn(kiln_gguf_writer *w, const char *key, const char *s,
                                      size_t len) {
  if (!s && len) return invalid("key '%s': NULL string", key ? key : "(null)");
  uint8_t *val = malloc(8 + len);
  if (!val) return no_memory("string value");
  kiln__wr_u64(val, len);
  if (len) memcpy(val + 8, s, len);
  return set_encoded(w, key, key ? strlen(key) : 0, KILN_GGUF_STRING, val, 8 + len);
}

kiln_status kiln_gguf_writer_set_str(kiln_gguf_writer *w, const char *key, const char *s) {
  if (!s) return invalid("key '%s': NULL string", key ? key : "(null)");
  return kiln_gguf_writer_set_strn(w, key, s, strlen(s));
}

kiln_status kiln_gguf_writer_set_arr(kiln_gguf_writer *w, const char *key,
                                     kiln_gguf_vtype elem_type, const void *values, uint64_t n) {
  const char *k = key ? key : "(null)";
  size_t es = kiln_gguf_vtype_size(elem_type);
  if (es == 0) {
    return invalid(
        "key '%s': arrays of %s are not written (only scalars here; strings "
        "through set_arr_str)",
        k, kiln_gguf_vtype_name(elem_type));
  }
  if (!values && n) return invalid("key '%s': NULL values", k);
  if (n > (SIZE_MAX - 12) / es) return invalid("key '%s': %" PRIu64 " elements", k, n);
  size_t len = 12 + (size_t)n * es;
  uint8_t *val = malloc(len);
  if (!val) return no_memory("array value");
  kiln__wr_u32(val, (uint32_t)elem_type);
  kiln__wr_u64(val + 4, n);
  uint8_t *o = val + 12;
  const uint8_t *b = values;
  for (uint64_t i = 0; i < n; i++, o += es) {
    switch (elem_type) {
    case KILN_GGUF_BOOL: {
      bool v;
      memcpy(&v, b + i * sizeof v, sizeof v);
      *o = v ? 1 : 0;
      break;
    }
    case KILN_GGUF_UINT8:
    case KILN_GGUF_INT8: *o = b[i]; break;
    case KILN_GGUF_UINT16:
    case KILN_GGUF_INT16: {
      uint16_t v;
      memcpy(&v, b + 2 * i, 2);
      kiln__wr_u16(o, v);
      break;
    }
    case KILN_GGUF_UINT32:
    case KILN_GGUF_INT32:
    case KILN_GGUF_FLOAT32: {
      uint32_t v;
      memcpy(&v, b + 4 * i, 4);
      kiln__wr_u32(o, v);
      break;
    }
    default: { /* 8-byte types */
      uint64_t v;
      memcpy(&v, b + 8 * i, 8);
      kiln__wr_u64(o, v);
      break;
    }
    }
  }
  return set_encoded(w, key, key ? strlen(key) : 0, KILN_GGUF_ARRAY, val, len);
}

kiln_status kiln_gguf_writer_set_arr_u32(kiln_gguf_writer *w, const char *key,
                                         const uint32_t *values, uint64_t n) {
  return kiln_gguf_writer_set_arr(w, key, KILN_GGUF_UINT32, values, n);
}
kiln_status kiln_gguf_writer_set_arr_i32(kiln_gguf_writer *w, const char *key,
                                         const int32_t *values, uint64_t n) {
  return kiln_gguf_writer_set_arr(w, key, KILN_GGUF_INT32, values, n);
}
kiln_status kiln_gguf_writer_set_arr_f32(kiln_gguf_writer *w, const char *key, const float *values,
                                         uint64_t n) {
  return kiln_gguf_writer_set_arr(w, key, KILN_GGUF_FLOAT32, values, n);
}

kiln_status kiln_gguf_writer_set_arr_strv(kiln_gguf_writer *w, const char *key,
                                          const kiln_gguf_str *strs, uint64_t n) {
  const char *k = key ? key : "(null)";
  if (!strs && n) return invalid("key '%s': NULL strings", k);
  size_t len = 12;
  for (uint64_t i = 0; i < n; i++) {
    if (!strs[i].ptr && strs[i].len) return invalid("key '%s': string %" PRIu64 " is NULL", k, i);
    if (strs[i].len > SIZE_MAX - 8 - len) return invalid("key '%s': strings too long", k);
    len += 8 + (size_t)strs[i].len;
  }
  uint8_t *val = malloc(len);
  if (!val) return no_memory("string array value");
  kiln__wr_u32(val, KILN_GGUF_STRING);
  kiln__wr_u64(val + 4, n);
  uint8_t *o = val + 12;
  for (uint64_t i = 0; i < n; i++) {
    kiln__wr_u64(o, strs[i].len);
    if (strs[i].len) memcpy(o + 8, strs[i].ptr, (size_t)strs[i].len);
    o += 8 + strs[i].len;
  }
  return set_encoded(w, key, key ? strlen(key) : 0, KILN_GGUF_ARRAY, val, len);
}

kiln_status kiln_gguf_writer_set_arr_str(kiln_gguf_writer *w, const char *key,
                                         const char *const *strs, uint64_t n) {
  const char *k = key ? key : "(null)";
  if (!strs && n) return invalid("key '%s': NULL strings", k);
  if (n > SIZE_MAX / sizeof(kiln_gguf_str)) return invalid("key '%s': %" PRIu64 " strings", k, n);
  kiln_gguf_str *v = malloc((n ? (size_t)n : 1) * sizeof *v);
  if (!v) return no_memory("string array");
  for (uint64_t i = 0; i < n; i++) {
    if (!strs[i]) {
      free(v);
      return invalid("key '%s': string %" PRIu64 " is NULL", k, i);
    }
    v[i].ptr = strs[i];
    v[i].len = strlen(strs[i]);
  }
  kiln_status st = kiln_gguf_writer_set_arr_strv(w, key, v, n);
  free(v);
  return st;
}

kiln_status kiln_gguf_writer_remove(kiln_gguf_writer *w, const char *key) {
  size_t len = key ? strlen(key) : 0;
  wkv *kv = find(w, key ? key : "", len);
  if (!kv) {
    return kiln_status_new(KILN_STATUS_NOT_FOUND, "gguf writer: key '%s' is not set",
                           key ? key : "(null)");
  }
  if (len == strlen(ALIGNMENT_KEY) && memcmp(key, ALIGNMENT_KEY, len) == 0) {
    w->alignment = DEFAULT_ALIGNMENT;
  }
  free(kv->key);
  free(kv->val);
  size_t i = (size_t)(kv - w->kvs);
  memmove(kv, kv + 1, (w->n_kv - i - 1) * sizeof *kv);
  w->n_kv--;
  return NULL;
}

bool kiln_gguf_writer_has(const kiln_gguf_writer *w, const char *key) {
  return key && find(w, key, strlen(key)) != NULL;
}

/* ---- copying from an open file -------------------------------------------- */

kiln_status kiln_gguf_writer_copy_kv(kiln_gguf_writer *w, const kiln_gguf *g,
                                     const kiln_gguf_kv *kv) {
  size_t es = kiln_gguf_vtype_size(kv->type);
  uint8_t *val;
  size_t len;
  if (es) { /* scalars: re-encode from the decoded value */
    uint64_t bits = 0;
    switch (kv->type) {
    case KILN_GGUF_FLOAT32: {
      uint32_t u;
      memcpy(&u, &kv->v.f32, 4);
      bits = u;
      break;
    }
    case KILN_GGUF_FLOAT64: memcpy(&bits, &kv->v.f64, 8); break;
    case KILN_GGUF_BOOL: bits = kv->v.b; break;
    default: bits = kv->v.u64; break; /* signed values are stored sign-extended */
    }
    len = es;
    val = malloc(len);
    if (!val) return no_memory("value");
    for (size_t i = 0; i < es; i++) val[i] = (uint8_t)(bits >> (8 * i));
  } else if (kv->type == KILN_GGUF_STRING) {
    len = 8 + (size_t)kv->v.str.len;
    val = malloc(len);
    if (!val) return no_memory("string value");
    kiln__wr_u64(val, kv->v.str.len);
    memcpy(val + 8, kv->v.str.ptr, (size_t)kv->v.str.len);
  } else if (kv->type == KILN_GGUF_ARRAY) {
    /* The elements are contiguous in the file: copy their bytes. */
    uint64_t span;
    if (kv->elem_type == KILN_GGUF_STRING) {
      span = 0;
      if (kv->n) {
        kiln_gguf_str last = kiln_gguf_arr_str(g, kv, kv->n - 1);
        span = (uint64_t)((const uint8_t *)last.ptr - kv->arr_data) + last.len;
      }
    } else {
      span = kv->n * kiln_gguf_vtype_size(kv->elem_type);
    }
    len = 12 + (size_t)span;
    val = malloc(len);
    if (!val) return no_memory("array value");
    kiln__wr_u32(val, (uint32_t)kv->elem_type);
    kiln__wr_u64(val + 4, kv->n);
    if (span) memcpy(val + 12, kv->arr_data, (size_t)span);
  } else {
    return invalid("copying key: value type %d", (int)kv->type);
  }
  return set_encoded(w, kv->key.ptr, (size_t)kv->key.len, kv->type, val, len);
}

kiln_status kiln_gguf_writer_copy_kvs(kiln_gguf_writer *w, const kiln_gguf *g, const char *prefix,
                                      uint64_t *out_copied) {
  size_t plen = prefix ? strlen(prefix) : 0;
  uint64_t copied = 0;
  for (uint64_t i = 0; i < kiln_gguf_n_kv(g); i++) {
    const kiln_gguf_kv *kv = kiln_gguf_kv_at(g, i);
    if (kv->key.len < plen || memcmp(kv->key.ptr, prefix, plen) != 0) continue;
    kiln_status st = kiln_gguf_writer_copy_kv(w, g, kv);
    if (st) {
      return kiln_status_annotate(st, "copying key '%.*s' from %s", (int)kv->key.len, kv->key.ptr,
                                  kiln_gguf_path(g));
    }
    copied++;
  }
  if (out_copied) *out_copied = copied;
  return NULL;
}

/* ---- tensors -------------------------------------------------------------- */

/* Checks name and shape; *out_nbytes gets the byte size. */
static kiln_status check_tensor(const kiln_gguf_writer *w, const char *name, kiln_type type,
                                int n_dims, const int64_t *ne, uint64_t *out_nbytes) {
  if (!name) return invalid("tensor with a NULL name");
  size_t len = strlen(name);
  if (len == 0 || len > MAX_TENSOR_NAME) {
    return invalid("tensor '%s': name of %zu bytes (1 to %u allowed)", name, len, MAX_TENSOR_NAME);
  }
  for (size_t i = 0; i < w->n_t; i++) {
    if (w->ts[i].name_len == len && memcmp(w->ts[i].name, name, len) == 0) {
      return invalid("tensor '%s': already added", name);
    }
  }
  if (!kiln_type_is_known(type))
    return invalid("tensor '%s': type id %d is not one kiln writes", name, (int)type);
  if (n_dims < 1 || n_dims > 4 || !ne) {
    return invalid("tensor '%s': n_dims %d (must be 1 to 4, with ne)", name, n_dims);
  }
  uint64_t nel = 1;
  for (int d = 0; d < n_dims; d++) {
    if (ne[d] < 1)
      return invalid("tensor '%s': ne[%d] = %" PRId64 " (must be >= 1)", name, d, ne[d]);
    if (__builtin_mul_overflow(nel, (uint64_t)ne[d], &nel) || nel > (uint64_t)INT64_MAX) {
      return invalid("tensor '%s': element count overflows", name);
    }
  }
  const int64_t bs = kiln_type_block_size(type);
  if (ne[0] % bs != 0) {
    return invalid("tensor '%s': ne0 = %" PRId64 " is not a multiple of the %s block size %" PRId64,
                   name, ne[0], kiln_type_name(type), bs);
  }
  uint64_t nbytes = (uint64_t)(ne[0] / bs);
  for (int d = 0; d < n_dims; d++) {
    const uint64_t f = d == 0 ? (uint64_t)kiln_type_block_bytes(type) : (uint64_t)ne[d];
    if (__builtin_mul_overflow(nbytes, f, &nbytes)) {
      return invalid("tensor '%s': byte size overflows", name);
    }
  }
  if (nbytes > SIZE_MAX / 2) return invalid("tensor '%s': %" PRIu64 " bytes", name, nbytes);
  *out_nbytes = nbytes;
  return NULL;
}

/* Appends a checked tensor, taking ownership of data. */
static kiln_status push_tensor(kiln_gguf_writer *w, const char *name, kiln_type type, int n_dims,
                               const int64_t *ne, uint8_t *data, uint64_t nbytes) {
  if (w->n_t == w->cap_t) {
    size_t cap = w->cap_t ? 2 * w->cap_t : 16;
    wtensor *n = realloc(w->ts, cap * sizeof *n);
    if (!n) {
      free(data);
      return no_memory("tensor table");
    }
    w->ts = n;
    w->cap_t = cap;
  }
  char *nm = strdup(name);
  if (!nm) {
    free(data);
    return no_memory("tensor name");
  }
  wtensor *t = &w->ts[w->n_t++];
  t->name = nm;
  t->name_len = strlen(name);
  t->type = type;
  t->n_dims = (uint32_t)n_dims;
  for (int d = 0; d < 4; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
  t->data = data;
  t->nbytes = nbytes;
  return NULL;
}

kiln_status kiln_gguf_writer_add_tensor_raw(kiln_gguf_writer *w, const char *name, kiln_type type,
                                            int n_dims, const int64_t *ne, const void *data,
                                            uint64_t nbytes) {
  uint64_t want;
  KILN_RETURN_IF_ERROR(check_tensor(w, name, type, n_dims, ne, &want));
  if (nbytes != want) {
    return invalid("tensor '%s': %" PRIu64 " bytes given, its %s shape needs %" PRIu64, name,
                   nbytes, kiln_type_name(type), want);
  }
  if (!data) return invalid("tensor '%s': NULL data", name);
  uint8_t *copy = malloc((size_t)nbytes);
  if (!copy) return no_memory("tensor data");
  memcpy(copy, data, (size_t)nbytes);
  return push_tensor(w, name, type, n_dims, ne, copy, nbytes);
}

kiln_status kiln_gguf_writer_add_tensor_f32(kiln_gguf_writer *w, const char *name, kiln_type type,
                                            int n_dims, const int64_t *ne, const float *values) {
  uint64_t nbytes;
  KILN_RETURN_IF_ERROR(check_tensor(w, name, type, n_dims, ne, &nbytes));
  if (!values) return invalid("tensor '%s': NULL values", name);
  int64_t nel = 1;
  for (int d = 0; d < n_dims; d++) nel *= ne[d]; /* checked above */
  uint8_t *data = malloc((size_t)nbytes);
  if (!data) return no_memory("tensor data");
  /* ne0 is a whole number of blocks, so quantizing the flat array is
   * quantizing row by row. */
  kiln_status st = kiln_quantize(type, values, data, nel);
  if (st) {
    free(data);
    return kiln_status_annotate(st, "gguf writer: tensor '%s'", name);
  }
  return push_tensor(w, name, type, n_dims, ne, data, nbytes);
}

/* ---- serialisation -------------------------------------------------------- */

static uint64_t align_up(uint64_t x, uint64_t a) { return x + (a - x % a) % a; }

/* Encodes the header, key/values, tensor infos and the padding after them
 * into one malloc'd buffer; *out_total gets the whole file's size. */
static kiln_status encode_header(const kiln_gguf_writer *w, uint8_t **out_buf, size_t *out_len,
                                 uint64_t *out_total) {
  uint64_t len = 24;
  for (size_t i = 0; i < w->n_kv; i++) len += 8 + w->kvs[i].key_len + 4 + w->kvs[i].val_len;
  for (size_t i = 0; i < w->n_t; i++)
    len += 8 + w->ts[i].name_len + 4 + 8 * w->ts[i].n_dims + 4 + 8;
  uint64_t data_start = w->n_t ? align_up(len, w->alignment) : len;
  uint64_t total = data_start;
  for (size_t i = 0; i < w->n_t; i++) total += align_up(w->ts[i].nbytes, w->alignment);
  if (total > SIZE_MAX / 2) return invalid("file of %" PRIu64 " bytes is too large", total);

  uint8_t *buf = calloc(1, (size_t)data_start); /* zeroed: the padding */
  if (!buf) return no_memory("header buffer");
  uint8_t *o = buf;
  memcpy(o, "GGUF", 4);
  kiln__wr_u32(o + 4, w->version);
  kiln__wr_u64(o + 8, w->n_t);
  kiln__wr_u64(o + 16, w->n_kv);
  o += 24;
  for (size_t i = 0; i < w->n_kv; i++) {
    const wkv *kv = &w->kvs[i];
    kiln__wr_u64(o, kv->key_len);
    memcpy(o + 8, kv->key, kv->key_len);
    o += 8 + kv->key_len;
    kiln__wr_u32(o, (uint32_t)kv->type);
    memcpy(o + 4, kv->val, kv->val_len);
    o += 4 + kv->val_len;
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < w->n_t; i++) {
    const wtensor *t = &w->ts[i];
    kiln__wr_u64(o, t->name_len);
    memcpy(o + 8, t->name, t->name_len);
    o += 8 + t->name_len;
    kiln__wr_u32(o, t->n_dims);
    o += 4;
    for (uint32_t d = 0; d < t->n_dims; d++, o += 8) kiln__wr_u64(o, (uint64_t)t->ne[d]);
    kiln__wr_u32(o, (uint32_t)t->type);
    kiln__wr_u64(o + 4, offset);
    o += 12;
    offset += align_up(t->nbytes, w->alignment);
  }
  *out_buf = buf;
  *out_len = (size_t)data_start;
  *out_total = total;
  return NULL;
}

kiln_status kiln_gguf_writer_write_memory(const kiln_gguf_writer *w, void **out_data,
                                          size_t *out_size) {
  if (!out_data || !out_size) return invalid("write_memory: NULL output");
  uint8_t *head;
  size_t head_len;
  uint64_t total;
  KILN_RETURN_IF_ERROR(encode_header(w, &head, &head_len, &total));
  uint8_t *buf = calloc(1, (size_t)total ? (size_t)total : 1);
  if (!buf) {
    free(head);
    return no_memory("file buffer");
  }
  memcpy(buf, head, head_len);
  free(head);
  uint64_t o = head_len;
  for (size_t i = 0; i < w->n_t; i++) {
    memcpy(buf + o, w->ts[i].data, (size_t)w->ts[i].nbytes);
    o += align_up(w->ts[i].nbytes, w->alignment);
  }
  *out_data = buf;
  *out_size = (size_t)total;
  return NULL;
}

static int write_all(int fd, const void *data, size_t n) {
  const uint8_t *p = data;
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

static kiln_status io_error(const char *path, const char *step, int e) {
  return kiln_status_new(KILN_STATUS_IO, "%s: %s: %s", path, step, strerror(e));
}

/* What lstat found, for a refusal's message. */
static const char *file_kind(mode_t m) {
  if (S_ISLNK(m)) return "symbolic link";
  if (S_ISDIR(m)) return "directory";
  if (S_ISCHR(m)) return "character device";
  if (S_ISBLK(m)) return "block device";
  if (S_ISFIFO(m)) return "FIFO (named pipe)";
  if (S_ISSOCK(m)) return "socket";
  return "special file";
}

/* Refuses a target the write must not replace. The publishing rename (or
 * link) acts on the directory entry, so a device node, FIFO or socket
 * would be swapped for a regular file (`-o /dev/null` run as root once
 * replaced /dev/null itself), and a symlink would be replaced rather than
 * written through: none of these is ever what the caller meant, and
 * following the link instead would let a planted link redirect the write.
 * A regular file the caller may not write, or one with no write bit at all
 * (which root's access() would let through), was made read-only on
 * purpose and is not replaced either. *out_exists: a regular file is
 * there. */
static kiln_status check_target(const char *path, bool *out_exists) {
  struct stat sb;
  *out_exists = false;
  if (lstat(path, &sb) != 0) {
    if (errno == ENOENT) return NULL; /* a missing folder is reported by the create */
    return io_error(path, "cannot check what is there", errno);
  }
  if (!S_ISREG(sb.st_mode))
    return invalid("%s: is a %s; kiln writes models only to regular files", path,
                   file_kind(sb.st_mode));
  if (access(path, W_OK) != 0 || !(sb.st_mode & 0222))
    return invalid("%s: is a read-only file (mode %04o); kiln does not replace it", path,
                   (unsigned)(sb.st_mode & 07777));
  *out_exists = true;
  return NULL;
}

/* The folder part of path ("." for a bare name), malloc'd, or NULL. */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return strdup(".");
  if (slash == path) return strdup("/");
  return strndup(path, (size_t)(slash - path));
}

/* Fsyncs the folder holding path, so the rename itself is durable. Some
 * file systems refuse fsync on a folder (EINVAL): that is not an error. */
static kiln_status sync_parent(const char *path) {
  char *dir = dir_of(path);
  if (!dir) return no_memory("path");
  kiln_status st = NULL;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    if (fsync(fd) != 0 && errno != EINVAL) st = io_error(path, "fsync of its folder", errno);
    close(fd);
  }
  free(dir);
  return st;
}

/* Writes the file's bytes to fd, sets mode 0644 (whatever the umask) and
 * fsyncs. NULL, or the step that failed with errno in *out_errno. */
static const char *write_body(const kiln_gguf_writer *w, const uint8_t *head, size_t head_len,
                              int fd, int *out_errno) {
  static const uint8_t zeros[256];
  const char *step = NULL;
  if (fchmod(fd, 0644) != 0) step = "chmod of the temporary file";
  if (!step && write_all(fd, head, head_len) != 0) step = "write";
  for (size_t i = 0; !step && i < w->n_t; i++) {
    const wtensor *t = &w->ts[i];
    if (write_all(fd, t->data, (size_t)t->nbytes) != 0) step = "write";
    uint64_t pad = align_up(t->nbytes, w->alignment) - t->nbytes;
    while (!step && pad) {
      size_t k = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
      if (write_all(fd, zeros, k) != 0) step = "write";
      pad -= k;
    }
  }
  if (!step && fsync(fd) != 0) step = "fsync";
  *out_errno = errno;
  return step;
}

/* Renames the finished temporary file tmp over path, after looking at
 * path once more: what was checked before the write may have been swapped
 * for a symlink or a device since, and the rename would replace that too.
 * (This narrows the window to the two calls; rename(2) has no "only over a
 * regular file" flag.) On failure tmp is removed and either *out_refused
 * is set or the step is returned with errno in *out_errno. */
static const char *rename_into_place(const char *tmp, const char *path, int *out_errno,
                                     kiln_status *out_refused) {
  bool exists;
  *out_refused = check_target(path, &exists);
  if (*out_refused) {
    unlink(tmp);
    return "refused";
  }
  if (rename(tmp, path) != 0) {
    *out_errno = errno;
    unlink(tmp);
    return "rename of the temporary file over it";
  }
  return NULL;
}

/* A unique-enough name beside path for a hard link to the unnamed file:
 * the pid tells live processes apart, the counter calls and retries. */
static void link_name(char *buf, size_t cap, const char *path, unsigned attempt) {
  static atomic_uint counter;
  unsigned n = atomic_fetch_add(&counter, 1u);
  snprintf(buf, cap, "%s.tmp-%ld-%u-%u", path, (long)getpid(), n, attempt);
}

/* Gives the unnamed (O_TMPFILE) file fd the name path. With nothing at
 * path, one linkat() does it and can never replace anything (it fails with
 * EEXIST instead). Over an existing file it links a temporary name and
 * renames that over path, so readers see the old file or the new one.
 * NULL, or the failing step with errno in *out_errno. */
static const char *publish_unnamed(int fd, const char *path, bool exists, int *out_errno,
                                   kiln_status *out_refused) {
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  if (!exists) {
    if (linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0) return NULL;
    if (errno != EEXIST) {
      *out_errno = errno;
      return "link of the finished file into place";
    }
    /* Something appeared there while we wrote: judge it like any target. */
    *out_refused = check_target(path, &exists);
    if (*out_refused) return "refused";
  }
  size_t cap = strlen(path) + 64;
  char *tmp = malloc(cap);
  if (!tmp) {
    *out_errno = ENOMEM;
    return "link of the finished file beside it";
  }
  const char *step = "link of the finished file beside it";
  for (unsigned attempt = 0; attempt < 100; attempt++) {
    link_name(tmp, cap, path, attempt);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0) {
      step = NULL;
      break;
    }
    *out_errno = errno;
    if (errno != EEXIST) break;
  }
  if (!step) step = rename_into_place(tmp, path, out_errno, out_refused);
  free(tmp);
  return step;
}

/* An unnamed file in path's folder (Linux O_TMPFILE): if the process dies
 * before it is linked, the kernel frees it and nothing is left behind.
 * Returns the descriptor, -1 with *out_fallback when this system or file
 * system lacks O_TMPFILE (or /proc, which linking it needs), or -1 with
 * errno set for a real failure (a missing folder, no permission). */
static int open_unnamed(const char *path, bool *out_fallback) {
  *out_fallback = true;
#ifdef O_TMPFILE
  if (access("/proc/self/fd", X_OK) != 0) return -1;
  char *dir = dir_of(path);
  if (!dir) {
    *out_fallback = false;
    errno = ENOMEM;
    return -1;
  }
  int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  int e = errno;
  free(dir);
  if (fd >= 0 || (e != EOPNOTSUPP && e != EISDIR && e != EINVAL)) *out_fallback = false;
  errno = e;
  return fd;
#else
  (void)path;
  return -1;
#endif
}

/* The portable way: a named temporary file beside path (mkstemp), renamed
 * over it. A kill between create and rename leaves the temporary file. */
static kiln_status write_named_temp(const kiln_gguf_writer *w, const uint8_t *head,
                                    size_t head_len, const char *path) {
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 16);
  if (!tmp) return no_memory("path");
  snprintf(tmp, plen + 16, "%s.tmp-XXXXXX", path);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    kiln_status st = io_error(path, "cannot create a temporary file beside it", errno);
    free(tmp);
    return st;
  }
  int e = 0;
  kiln_status refused = NULL;
  const char *step = write_body(w, head, head_len, fd, &e);
  if (close(fd) != 0 && !step) {
    step = "close";
    e = errno;
  }
  if (step) unlink(tmp);
  else step = rename_into_place(tmp, path, &e, &refused);
  free(tmp);
  if (refused) return refused;
  return step ? io_error(path, step, e) : NULL;
}

kiln_status kiln_gguf_writer_write_file(const kiln_gguf_writer *w, const char *path) {
  if (!path || !*path) return invalid("write_file: no path");
  bool exists;
  KILN_RETURN_IF_ERROR(check_target(path, &exists));
  uint8_t *head;
  size_t head_len;
  uint64_t total;
  KILN_RETURN_IF_ERROR(encode_header(w, &head, &head_len, &total));

  bool fallback;
  int fd = open_unnamed(path, &fallback);
  kiln_status st = NULL;
  if (fd >= 0) {
    int e = 0;
    kiln_status refused = NULL;
    const char *step = write_body(w, head, head_len, fd, &e);
    if (!step) step = publish_unnamed(fd, path, exists, &e, &refused);
    /* Not checked: write_body's fsync already reported any write error,
     * and once published a failure here would claim a write that happened. */
    close(fd);
    if (refused) st = refused;
    else if (step) st = io_error(path, step, e);
  } else if (fallback) {
    st = write_named_temp(w, head, head_len, path);
  } else {
    st = io_error(path, "cannot create a temporary file beside it", errno);
  }
  free(head);
  return st ? st : sync_parent(path);
}
