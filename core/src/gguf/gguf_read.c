/* GGUF reader: maps a file read-only and validates its whole header (the
 * key/values and tensor infos) before anyone sees it.
 *
 * Follows the GGUF specification (ggml-org/ggml docs/gguf.md), versions 2
 * and 3, little-endian. The rule that keeps hostile files harmless: every
 * count, length, offset and size is compared with the bytes left in the
 * file before it is used, and the tables grow with the entries that have
 * actually parsed, never with a count the header claims: a file rejected at
 * its first bad entry costs no more heap than the entries before it, and a
 * file at most a small multiple of its own size. Tensor data may not
 * overlap (ggml lays tensors out one after another). Errors name the file,
 * the byte offset and the field (kv index and key, tensor index and name). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "byteorder.h"
#include "gguf_internal.h"
#include "../base/open_regular.h"

#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_KEY_LEN 65535u  /* gguf.md: keys are at most 2^16-1 bytes */
#define GGUF_MAX_TENSOR_NAME 64u /* gguf.md: tensor names are at most 64 bytes */
#define GGUF_MAX_DIMS 4u         /* ggml's GGML_MAX_DIMS */
/* The smallest possible encodings, used to bound the header's counts by the
 * bytes left before anything is allocated. A kv is at least an 8-byte key
 * length, a 4-byte value type and a 1-byte value; a tensor info at least an
 * 8-byte name length, a 4-byte n_dims, one 8-byte dimension, a 4-byte type
 * and an 8-byte offset. */
#define GGUF_MIN_KV_BYTES 13u
#define GGUF_MIN_TENSOR_INFO_BYTES 32u

/* A cursor over the file's bytes. */
typedef struct reader {
  const char *name;
  const uint8_t *p;
  uint64_t size;
  uint64_t pos;
} reader;

static uint64_t rd_left(const reader *r) { return r->size - r->pos; }

static kiln_status rd_error(const reader *r, uint64_t at, kiln_status_code code, const char *fmt,
                            ...) __attribute__((format(printf, 4, 5)));

/* "<file>: byte <at>: <message>" */
static kiln_status rd_error(const reader *r, uint64_t at, kiln_status_code code, const char *fmt,
                            ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln_status st = kiln_status_newv(code, fmt, ap);
  va_end(ap);
  return kiln_status_annotate(st, "%s: byte %" PRIu64, r->name, at);
}

/* Writes a name from the file (not NUL-terminated, maybe binary, maybe huge)
 * into buf as 'quoted' printable text, shortened past 80 bytes. */
static const char *quote(char *buf, size_t cap, const char *s, uint64_t n) {
  size_t o = 0;
  buf[o++] = '\'';
  uint64_t shown = n > 80 ? 80 : n;
  for (uint64_t i = 0; i < shown && o + 8 < cap; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      buf[o++] = (char)c;
    } else {
      o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
    }
  }
  if (shown < n && o + 5 < cap) {
    memcpy(buf + o, "...", 3);
    o += 3;
  }
  buf[o++] = '\'';
  buf[o] = '\0';
  return buf;
}

#define QUOTE_CAP 352             /* 80 bytes at up to 4 characters each, quotes, "..." */
#define WHAT_CAP (QUOTE_CAP + 64) /* "kv[i] 'key'" */
#define FIELD_CAP (WHAT_CAP + 64) /* ... plus the field's name */

static kiln_status rd_need(const reader *r, uint64_t n, const char *what) {
  if (n <= rd_left(r)) return NULL;
  return rd_error(r, r->pos, KILN_STATUS_MALFORMED,
                  "%s: needs %" PRIu64 " bytes but only %" PRIu64
                  " are left in the file (truncated?)",
                  what, n, rd_left(r));
}

static kiln_status rd_u32(reader *r, const char *what, uint32_t *out) {
  KILN_RETURN_IF_ERROR(rd_need(r, 4, what));
  *out = kiln__rd_u32(r->p + r->pos);
  r->pos += 4;
  return NULL;
}

static kiln_status rd_u64(reader *r, const char *what, uint64_t *out) {
  KILN_RETURN_IF_ERROR(rd_need(r, 8, what));
  *out = kiln__rd_u64(r->p + r->pos);
  r->pos += 8;
  return NULL;
}

/* A gguf_string_t: u64 length, then the bytes. max_len 0 = no limit beyond
 * the file's size. */
static kiln_status rd_string(reader *r, const char *what, uint64_t max_len, kiln_gguf_str *out) {
  uint64_t at = r->pos;
  uint64_t len;
  KILN_RETURN_IF_ERROR(rd_u64(r, what, &len));
  if (len > rd_left(r)) {
    return rd_error(r, at, KILN_STATUS_MALFORMED,
                    "%s: string length %" PRIu64 " exceeds the %" PRIu64 " bytes left in the file",
                    what, len, rd_left(r));
  }
  if (max_len && len > max_len) {
    return rd_error(r, at, KILN_STATUS_MALFORMED,
                    "%s: length %" PRIu64 " exceeds the GGUF limit of %" PRIu64 " bytes", what, len,
                    max_len);
  }
  out->ptr = (const char *)(r->p + r->pos);
  out->len = len;
  r->pos += len;
  return NULL;
}

static void decode_scalar(kiln_gguf_vtype t, const uint8_t *p, kiln_gguf_kv *kv) {
  uint64_t u;
  switch (t) {
  case KILN_GGUF_UINT8: kv->v.u64 = p[0]; break;
  case KILN_GGUF_INT8: kv->v.i64 = (int8_t)p[0]; break;
  case KILN_GGUF_UINT16: kv->v.u64 = kiln__rd_u16(p); break;
  case KILN_GGUF_INT16: kv->v.i64 = (int16_t)kiln__rd_u16(p); break;
  case KILN_GGUF_UINT32: kv->v.u64 = kiln__rd_u32(p); break;
  case KILN_GGUF_INT32: kv->v.i64 = (int32_t)kiln__rd_u32(p); break;
  case KILN_GGUF_FLOAT32: kv->v.f32 = kiln__rd_f32(p); break;
  case KILN_GGUF_BOOL: kv->v.b = p[0] != 0; break;
  case KILN_GGUF_UINT64: kv->v.u64 = kiln__rd_u64(p); break;
  case KILN_GGUF_INT64:
    u = kiln__rd_u64(p);
    memcpy(&kv->v.i64, &u, 8);
    break;
  case KILN_GGUF_FLOAT64: kv->v.f64 = kiln__rd_f64(p); break;
  default: break;
  }
}

/* ggml's names for every type id it has defined (gguf.md, enum ggml_type),
 * so a file with a type kiln does not read gets a message saying which. */
static const char *ggml_type_name_any(uint32_t id) {
  /* clang-format off */
  static const char *const names[] = {
      "F32",     "F16",    "Q4_0",    "Q4_1",  "Q4_2 (removed)", "Q4_3 (removed)", "Q5_0",
      "Q5_1",    "Q8_0",   "Q8_1",    "Q2_K",  "Q3_K",   "Q4_K",   "Q5_K",   "Q6_K",  "Q8_K",
      "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S",  "IQ2_S",  "IQ4_XS", "I8",
      "I16",     "I32",    "I64",     "F64",   "IQ1_M",  "BF16",   "Q4_0_4_4 (removed)",
      "Q4_0_4_8 (removed)", "Q4_0_8_8 (removed)", "TQ1_0", "TQ2_0", "IQ4_NL_4_4 (removed)",
      "IQ4_NL_4_8 (removed)", "IQ4_NL_8_8 (removed)", "MXFP4"};
  /* clang-format on */
  return id < sizeof names / sizeof names[0] ? names[id] : NULL;
}

/* Grows a table of `size`-byte elements (*cap of them) by doubling, to at
 * most `max`, zeroing the new part. false when out of memory (the table is
 * left as it was). max is a count bounded by the file's size. */
static bool grow_table(void **table, uint64_t *cap, uint64_t max, size_t size) {
  uint64_t ncap = *cap ? 2 * *cap : 16;
  if (ncap > max) ncap = max;
  void *t = realloc(*table, ncap * size);
  if (!t) return false;
  memset((char *)t + *cap * size, 0, (ncap - *cap) * size);
  *table = t;
  *cap = ncap;
  return true;
}

/* ---- name index ---------------------------------------------------------- */

static uint64_t hash_name(const char *s, uint64_t n) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  for (uint64_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

/* The names live at `stride`-spaced kiln_gguf_str fields starting at base. */
static const kiln_gguf_str *name_at(const void *base, size_t stride, uint64_t i) {
  return (const kiln_gguf_str *)((const char *)base + i * stride);
}

static void index_put(uint64_t *slots, uint64_t mask, const kiln_gguf_str *k, uint64_t value) {
  uint64_t h = hash_name(k->ptr, k->len) & mask;
  while (slots[h]) h = (h + 1) & mask;
  slots[h] = value;
}

/* Makes room for entry `count` (0-based) while keeping the table at most
 * half full: doubles and rehashes entries 0..count-1 when needed. false
 * when out of memory (the table is left as it was). */
static bool index_reserve(kiln__gguf_index *ix, const void *base, size_t stride, uint64_t count) {
  uint64_t cap = ix->slots ? ix->mask + 1 : 0;
  if (2 * (count + 1) <= cap) return true;
  uint64_t ncap = cap ? 2 * cap : 16; /* count is bounded by the file size: no overflow */
  uint64_t *slots = calloc(ncap, sizeof *slots);
  if (!slots) return false;
  for (uint64_t i = 0; i < count; i++) index_put(slots, ncap - 1, name_at(base, stride, i), i + 1);
  free(ix->slots);
  ix->slots = slots;
  ix->mask = ncap - 1;
  return true;
}

static uint64_t index_find(const kiln__gguf_index *ix, const void *base, size_t stride,
                           const char *s, uint64_t n) {
  if (!ix->slots) return UINT64_MAX;
  for (uint64_t h = hash_name(s, n) & ix->mask;; h = (h + 1) & ix->mask) {
    uint64_t slot = ix->slots[h];
    if (!slot) return UINT64_MAX;
    const kiln_gguf_str *k = name_at(base, stride, slot - 1);
    if (k->len == n && memcmp(k->ptr, s, n) == 0) return slot - 1;
  }
}

/* Adds entry i; returns UINT64_MAX, or the index of an earlier entry with
 * the same name (which is then not added). */
static uint64_t index_insert(kiln__gguf_index *ix, const void *base, size_t stride, uint64_t i) {
  const kiln_gguf_str *k = name_at(base, stride, i);
  for (uint64_t h = hash_name(k->ptr, k->len) & ix->mask;; h = (h + 1) & ix->mask) {
    uint64_t slot = ix->slots[h];
    if (!slot) {
      ix->slots[h] = i + 1;
      return UINT64_MAX;
    }
    const kiln_gguf_str *o = name_at(base, stride, slot - 1);
    if (o->len == k->len && memcmp(o->ptr, k->ptr, k->len) == 0) return slot - 1;
  }
}

/* ---- key/values ----------------------------------------------------------- */

static kiln_status parse_array(kiln_gguf *g, reader *r, uint64_t i, const char *what) {
  kiln_gguf_kv *kv = &g->kvs[i];
  char field[FIELD_CAP];
  uint64_t at = r->pos;
  uint32_t et;
  snprintf(field, sizeof field, "%s array element type", what);
  KILN_RETURN_IF_ERROR(rd_u32(r, field, &et));
  if (et >= KILN_GGUF_VTYPE_COUNT) {
    return rd_error(r, at, KILN_STATUS_MALFORMED,
                    "%s: array element type %" PRIu32 " is not a GGUF value type (0 to 12)", what,
                    et);
  }
  if (et == KILN_GGUF_ARRAY) {
    return rd_error(r, at, KILN_STATUS_UNSUPPORTED,
                    "%s: arrays of arrays are not supported (nor read by ggml)", what);
  }
  kv->elem_type = (kiln_gguf_vtype)et;
  at = r->pos;
  snprintf(field, sizeof field, "%s array length", what);
  KILN_RETURN_IF_ERROR(rd_u64(r, field, &kv->n));
  uint64_t n = kv->n, left = rd_left(r);
  kv->arr_data = r->p + r->pos;
  if (et != KILN_GGUF_STRING) {
    uint64_t es = kiln_gguf_vtype_size((kiln_gguf_vtype)et);
    if (n > left / es) {
      return rd_error(r, at, KILN_STATUS_MALFORMED,
                      "%s: array of %" PRIu64 " %s (%" PRIu64
                      " bytes each) does not fit in the %" PRIu64 " bytes left in the file",
                      what, n, kiln_gguf_vtype_name((kiln_gguf_vtype)et), es, left);
    }
    if (et == KILN_GGUF_BOOL) {
      for (uint64_t j = 0; j < n; j++) {
        if (kv->arr_data[j] > 1) {
          return rd_error(r, r->pos + j, KILN_STATUS_MALFORMED,
                          "%s: bool element %" PRIu64 " is %u (must be 0 or 1)", what, j,
                          kv->arr_data[j]);
        }
      }
    }
    r->pos += n * es;
    return NULL;
  }
  /* Strings: each takes at least its 8-byte length, which bounds n (and the
   * offset table sized by it) by the bytes left. */
  if (n > left / 8) {
    return rd_error(r, at, KILN_STATUS_MALFORMED,
                    "%s: array of %" PRIu64 " strings does not fit in the %" PRIu64
                    " bytes left in the file (each takes at least 8 bytes)",
                    what, n, left);
  }
  if (n == 0) return NULL;
  uint64_t base = r->pos, cap = 0;
  for (uint64_t j = 0; j < n; j++) {
    if (j == cap) {
      /* grown with the elements read, as the tables are */
      void *t = g->str_offsets[i];
      bool ok = grow_table(&t, &cap, n, sizeof *g->str_offsets[i]);
      g->str_offsets[i] = t;
      if (!ok)
        return rd_error(r, at, KILN_STATUS_NO_MEMORY,
                        "%s: offset table for %" PRIu64 " strings", what, n);
    }
    uint64_t *offs = g->str_offsets[i];
    offs[j] = r->pos - base;
    /* The fast path for 150k-token vocabularies; on failure rd_string
     * says what is wrong, with the element named. */
    if (rd_left(r) >= 8) {
      uint64_t len = kiln__rd_u64(r->p + r->pos);
      if (len <= rd_left(r) - 8) {
        r->pos += 8 + len;
        continue;
      }
    }
    kiln_gguf_str s;
    snprintf(field, sizeof field, "%s element %" PRIu64, what, j);
    kiln_status st = rd_string(r, field, 0, &s);
    return st ? st : kiln_status_new(KILN_STATUS_INTERNAL, "%s: element %" PRIu64, what, j);
  }
  return NULL;
}

static kiln_status parse_kv(kiln_gguf *g, reader *r, uint64_t i) {
  kiln_gguf_kv *kv = &g->kvs[i];
  char what[WHAT_CAP], q[QUOTE_CAP];
  uint64_t kv_at = r->pos;
  snprintf(what, sizeof what, "kv[%" PRIu64 "] key", i);
  KILN_RETURN_IF_ERROR(rd_string(r, what, GGUF_MAX_KEY_LEN, &kv->key));
  snprintf(what, sizeof what, "kv[%" PRIu64 "] %s", i,
           quote(q, sizeof q, kv->key.ptr, kv->key.len));

  uint64_t dup = index_insert(&g->kv_index, g->kvs, sizeof *g->kvs, i);
  if (dup != UINT64_MAX) {
    return rd_error(r, kv_at, KILN_STATUS_MALFORMED,
                    "%s: duplicate key (kv[%" PRIu64 "] has it too)", what, dup);
  }

  uint64_t at = r->pos;
  uint32_t type;
  char field[FIELD_CAP];
  snprintf(field, sizeof field, "%s value type", what);
  KILN_RETURN_IF_ERROR(rd_u32(r, field, &type));
  if (type >= KILN_GGUF_VTYPE_COUNT) {
    return rd_error(r, at, KILN_STATUS_MALFORMED,
                    "%s: value type %" PRIu32 " is not a GGUF value type (0 to 12)", what, type);
  }
  kv->type = (kiln_gguf_vtype)type;
  if (type == KILN_GGUF_ARRAY) return parse_array(g, r, i, what);
  snprintf(field, sizeof field, "%s value (%s)", what, kiln_gguf_vtype_name(kv->type));
  if (type == KILN_GGUF_STRING) return rd_string(r, field, 0, &kv->v.str);
  uint64_t size = kiln_gguf_vtype_size((kiln_gguf_vtype)type);
  KILN_RETURN_IF_ERROR(rd_need(r, size, field));
  const uint8_t *p = r->p + r->pos;
  if (type == KILN_GGUF_BOOL && p[0] > 1) {
    return rd_error(r, r->pos, KILN_STATUS_MALFORMED, "%s: bool value is %u (must be 0 or 1)", what,
                    p[0]);
  }
  decode_scalar(kv->type, p, kv);
  r->pos += size;
  return NULL;
}

/* general.alignment: uint32, a non-zero multiple of 8 (gguf.md); 32 when
 * absent. */
static kiln_status read_alignment(kiln_gguf *g, const reader *r) {
  g->alignment = GGUF_DEFAULT_ALIGNMENT;
  const kiln_gguf_kv *kv = kiln_gguf_find_kv(g, "general.alignment");
  if (!kv) return NULL;
  uint64_t at = (uint64_t)((const uint8_t *)kv->key.ptr - g->data) + kv->key.len;
  if (kv->type != KILN_GGUF_UINT32) {
    return rd_error(r, at, KILN_STATUS_MALFORMED,
                    "kv[%" PRIu64 "] 'general.alignment': has type %s, must be uint32",
                    (uint64_t)(kv - g->kvs), kiln_gguf_vtype_name(kv->type));
  }
  if (kv->v.u64 == 0 || kv->v.u64 % 8 != 0) {
    return rd_error(r, at + 4, KILN_STATUS_MALFORMED,
                    "kv[%" PRIu64 "] 'general.alignment': is %" PRIu64
                    ", must be a non-zero multiple of 8",
                    (uint64_t)(kv - g->kvs), kv->v.u64);
  }
  g->alignment = kv->v.u64;
  return NULL;
}

/* ---- tensor infos --------------------------------------------------------- */

/* Parses tensor info i; *offset_at gets the byte offset of its `offset`
 * field, for messages about where its data lies. */
static kiln_status parse_tensor_info(kiln_gguf *g, reader *r, uint64_t i, uint64_t *offset_at) {
  kiln_gguf_tensor *t = &g->tensors[i];
  char what[WHAT_CAP], q[QUOTE_CAP], field[FIELD_CAP];
  uint64_t info_at = r->pos;
  snprintf(what, sizeof what, "tensor[%" PRIu64 "] name", i);
  KILN_RETURN_IF_ERROR(rd_string(r, what, GGUF_MAX_TENSOR_NAME, &t->name));
  snprintf(what, sizeof what, "tensor[%" PRIu64 "] %s", i,
           quote(q, sizeof q, t->name.ptr, t->name.len));

  uint64_t dup = index_insert(&g->tensor_index, g->tensors, sizeof *g->tensors, i);
  if (dup != UINT64_MAX) {
    return rd_error(r, info_at, KILN_STATUS_MALFORMED,
                    "%s: duplicate tensor name (tensor[%" PRIu64 "] has it too)", what, dup);
  }

  uint64_t at = r->pos;
  uint32_t n_dims;
  snprintf(field, sizeof field, "%s n_dims", what);
  KILN_RETURN_IF_ERROR(rd_u32(r, field, &n_dims));
  if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) {
    return rd_error(r, at, KILN_STATUS_MALFORMED, "%s: n_dims is %" PRIu32 " (must be 1 to %u)",
                    what, n_dims, GGUF_MAX_DIMS);
  }
  t->n_dims = (int32_t)n_dims;
  for (int d = 0; d < 4; d++) t->ne[d] = 1;
  for (uint32_t d = 0; d < n_dims; d++) {
    at = r->pos;
    uint64_t v;
    snprintf(field, sizeof field, "%s ne[%" PRIu32 "]", what, d);
    KILN_RETURN_IF_ERROR(rd_u64(r, field, &v));
    if (v == 0) {
      return rd_error(r, at, KILN_STATUS_MALFORMED, "%s: ne[%" PRIu32 "] is 0 (empty tensor)", what,
                      d);
    }
    if (v > (uint64_t)INT64_MAX) {
      return rd_error(r, at, KILN_STATUS_MALFORMED,
                      "%s: ne[%" PRIu32 "] is %" PRIu64 " (over 2^63-1)", what, d, v);
    }
    t->ne[d] = (int64_t)v;
  }

  at = r->pos;
  uint32_t type;
  snprintf(field, sizeof field, "%s type", what);
  KILN_RETURN_IF_ERROR(rd_u32(r, field, &type));
  if (type > INT32_MAX || !kiln_type_is_known((int32_t)type)) {
    const char *tn = ggml_type_name_any(type);
    if (tn) {
      return rd_error(r, at, KILN_STATUS_UNSUPPORTED,
                      "%s: type id %" PRIu32 " (ggml %s) is not one kiln reads", what, type, tn);
    }
    return rd_error(r, at, KILN_STATUS_UNSUPPORTED,
                    "%s: type id %" PRIu32 " is not a known ggml type", what, type);
  }
  t->type = (kiln_type)type;

  *offset_at = r->pos;
  snprintf(field, sizeof field, "%s offset", what);
  KILN_RETURN_IF_ERROR(rd_u64(r, field, &t->offset));

  /* Element count, then byte size, each without overflow: ne0 must be a
   * whole number of blocks (ggml refuses partial blocks too). */
  uint64_t nel = 1;
  for (int d = 0; d < 4; d++) {
    if (__builtin_mul_overflow(nel, (uint64_t)t->ne[d], &nel) || nel > (uint64_t)INT64_MAX) {
      return rd_error(r, info_at, KILN_STATUS_MALFORMED,
                      "%s: element count of ne = [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                      "] overflows 63 bits",
                      what, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
    }
  }
  const int64_t bs = kiln_type_block_size(t->type);
  if (t->ne[0] % bs != 0) {
    return rd_error(r, info_at, KILN_STATUS_MALFORMED,
                    "%s: ne0 = %" PRId64 " is not a multiple of the %s block size %" PRId64
                    ", so a row is not a whole number of blocks",
                    what, t->ne[0], kiln_type_name(t->type), bs);
  }
  /* Sizes must fit int64 (and so off_t and ptrdiff_t) as well as uint64.
   * (The row size is computed here, not with kiln_type_row_bytes, which
   * does not guard its multiplication.) */
  uint64_t nbytes = (uint64_t)(t->ne[0] / bs);
  for (int d = 0; d < 4; d++) {
    const uint64_t f = d == 0 ? (uint64_t)kiln_type_block_bytes(t->type) : (uint64_t)t->ne[d];
    if (__builtin_mul_overflow(nbytes, f, &nbytes) || nbytes > (uint64_t)INT64_MAX) {
      return rd_error(r, info_at, KILN_STATUS_MALFORMED,
                      "%s: byte size of %s ne = [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                      "] overflows 64-bit sizes (over 2^63-1 bytes)",
                      what, kiln_type_name(t->type), t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
    }
  }
  t->nbytes = nbytes;
  if (t->offset % g->alignment != 0) {
    return rd_error(r, *offset_at, KILN_STATUS_MALFORMED,
                    "%s offset: %" PRIu64 " is not a multiple of the alignment %" PRIu64, what,
                    t->offset, g->alignment);
  }
  return NULL;
}

typedef struct extent {
  uint64_t start, end, i;
} extent;

static int cmp_extent(const void *a, const void *b) {
  const extent *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

/* No two tensors' data may share a byte: a tensor written through one
 * name would change another. Sorted by start, each must begin at or after
 * the furthest end before it. */
static kiln_status check_overlaps(const kiln_gguf *g, const reader *r, const uint64_t *offset_at) {
  if (g->n_tensors < 2) return NULL;
  extent *x = malloc(g->n_tensors * sizeof *x);
  if (!x) return rd_error(r, 8, KILN_STATUS_NO_MEMORY, "tensor extents");
  for (uint64_t i = 0; i < g->n_tensors; i++)
    x[i] = (extent){g->tensors[i].offset, g->tensors[i].offset + g->tensors[i].nbytes, i};
  qsort(x, g->n_tensors, sizeof *x, cmp_extent);
  kiln_status st = NULL;
  uint64_t far = 0; /* the extent reaching furthest so far */
  for (uint64_t k = 1; k < g->n_tensors && !st; k++) {
    if (x[k].start < x[far].end) {
      const kiln_gguf_tensor *a = &g->tensors[x[far].i], *b = &g->tensors[x[k].i];
      char qa[QUOTE_CAP], qb[QUOTE_CAP];
      uint64_t later = x[k].i > x[far].i ? x[k].i : x[far].i;
      st = rd_error(r, offset_at[later], KILN_STATUS_MALFORMED,
                    "tensor[%" PRIu64 "] %s offset: data [%" PRIu64 ", %" PRIu64
                    ") overlaps tensor[%" PRIu64 "] %s data [%" PRIu64 ", %" PRIu64
                    ") (offsets from the data section; tensors may not share bytes)",
                    x[k].i, quote(qb, sizeof qb, b->name.ptr, b->name.len), x[k].start, x[k].end,
                    x[far].i, quote(qa, sizeof qa, a->name.ptr, a->name.len), x[far].start,
                    x[far].end);
    }
    if (x[k].end > x[far].end) far = k;
  }
  free(x);
  return st;
}

/* ---- the whole header ----------------------------------------------------- */

static kiln_status parse(kiln_gguf *g) {
  reader rd = {g->name, g->data, g->size, 0}, *r = &rd;

  if (g->size < 4) {
    return rd_error(r, 0, KILN_STATUS_MALFORMED,
                    "magic: file is %" PRIu64 " bytes, too short for a GGUF header", g->size);
  }
  if (memcmp(g->data, "GGUF", 4) != 0) {
    char q[QUOTE_CAP];
    if (g->size >= 24 && memcmp(g->data, "version https://git-lfs", 23) == 0) {
      return rd_error(r, 0, KILN_STATUS_MALFORMED,
                      "magic: this is a Git LFS pointer, not the model (run `git lfs pull`)");
    }
    return rd_error(r, 0, KILN_STATUS_MALFORMED,
                    "magic: %s is not 'GGUF' (47 47 55 46): not a GGUF file",
                    quote(q, sizeof q, (const char *)g->data, 4));
  }
  r->pos = 4;
  KILN_RETURN_IF_ERROR(rd_u32(r, "header version", &g->version));
  if (g->version == 1) {
    return rd_error(r, 4, KILN_STATUS_UNSUPPORTED,
                    "header version: GGUF version 1 is not supported (kiln reads versions 2 and 3; "
                    "version 1 used 32-bit counts and lengths: convert the file with a current "
                    "llama.cpp)");
  }
  if (g->version != 2 && g->version != 3) {
    uint32_t sw = __builtin_bswap32(g->version);
    if (sw == 2 || sw == 3) {
      return rd_error(r, 4, KILN_STATUS_UNSUPPORTED,
                      "header version: reads as %" PRIu32 " here, %" PRIu32
                      " byte-swapped: a big-endian GGUF file, and kiln reads little-endian only",
                      g->version, sw);
    }
    return rd_error(r, 4, KILN_STATUS_UNSUPPORTED,
                    "header version: GGUF version %" PRIu32
                    " is not supported (kiln reads 2 and 3)",
                    g->version);
  }
  KILN_RETURN_IF_ERROR(rd_u64(r, "header tensor_count", &g->n_tensors));
  KILN_RETURN_IF_ERROR(rd_u64(r, "header metadata_kv_count", &g->n_kv));

  uint64_t left = rd_left(r);
  if (g->n_kv > left / GGUF_MIN_KV_BYTES) {
    return rd_error(r, 16, KILN_STATUS_MALFORMED,
                    "header metadata_kv_count: %" PRIu64 " key/values cannot fit in the %" PRIu64
                    " bytes left in the file (each takes at least %u)",
                    g->n_kv, left, GGUF_MIN_KV_BYTES);
  }
  if (g->n_tensors > left / GGUF_MIN_TENSOR_INFO_BYTES ||
      g->n_kv * GGUF_MIN_KV_BYTES + g->n_tensors * GGUF_MIN_TENSOR_INFO_BYTES > left) {
    return rd_error(r, 8, KILN_STATUS_MALFORMED,
                    "header tensor_count: %" PRIu64 " tensor infos (and %" PRIu64
                    " key/values) cannot fit in the %" PRIu64 " bytes left in the file",
                    g->n_tensors, g->n_kv, left);
  }

  /* The tables grow as entries parse (grow_table): a count is only a
   * claim until its entries are there. */
  for (uint64_t i = 0; i < g->n_kv; i++) {
    if (i == g->kv_cap) {
      uint64_t cap = g->kv_cap;
      void *kvs = g->kvs, *offs = g->str_offsets;
      bool ok = grow_table(&kvs, &cap, g->n_kv, sizeof *g->kvs);
      g->kvs = kvs;
      cap = g->kv_cap;
      ok = ok && grow_table(&offs, &cap, g->n_kv, sizeof *g->str_offsets);
      g->str_offsets = offs;
      if (!ok)
        return rd_error(r, r->pos, KILN_STATUS_NO_MEMORY, "kv[%" PRIu64 "]: growing the table", i);
      g->kv_cap = cap;
    }
    if (!index_reserve(&g->kv_index, g->kvs, sizeof *g->kvs, i))
      return rd_error(r, r->pos, KILN_STATUS_NO_MEMORY, "kv[%" PRIu64 "]: growing the name index", i);
    KILN_RETURN_IF_ERROR(parse_kv(g, r, i));
  }
  KILN_RETURN_IF_ERROR(read_alignment(g, r));

  /* Checked again against what the key/values left. */
  if (g->n_tensors > rd_left(r) / GGUF_MIN_TENSOR_INFO_BYTES) {
    return rd_error(r, 8, KILN_STATUS_MALFORMED,
                    "header tensor_count: %" PRIu64 " tensor infos cannot fit in the %" PRIu64
                    " bytes left after the key/values (each takes at least %u)",
                    g->n_tensors, rd_left(r), GGUF_MIN_TENSOR_INFO_BYTES);
  }
  uint64_t *offset_at = NULL;
  kiln_status st = NULL;
  for (uint64_t i = 0; !st && i < g->n_tensors; i++) {
    if (i == g->tensor_cap) {
      uint64_t cap = g->tensor_cap;
      void *ts = g->tensors, *offs = offset_at;
      bool ok = grow_table(&ts, &cap, g->n_tensors, sizeof *g->tensors);
      g->tensors = ts;
      cap = g->tensor_cap;
      ok = ok && grow_table(&offs, &cap, g->n_tensors, sizeof *offset_at);
      offset_at = offs;
      if (!ok) {
        st = rd_error(r, r->pos, KILN_STATUS_NO_MEMORY, "tensor[%" PRIu64 "]: growing the table",
                      i);
        break;
      }
      g->tensor_cap = cap;
    }
    if (!index_reserve(&g->tensor_index, g->tensors, sizeof *g->tensors, i))
      st = rd_error(r, r->pos, KILN_STATUS_NO_MEMORY, "tensor[%" PRIu64 "]: growing the name index",
                    i);
    else
      st = parse_tensor_info(g, r, i, &offset_at[i]);
  }

  /* The data section starts at the next multiple of the alignment (the
   * padding may be missing at the end of a file with no tensors). */
  if (!st) {
    uint64_t pad = (g->alignment - r->pos % g->alignment) % g->alignment;
    g->data_offset = r->pos + pad;
  }
  for (uint64_t i = 0; !st && i < g->n_tensors; i++) {
    kiln_gguf_tensor *t = &g->tensors[i];
    uint64_t start, end;
    if (__builtin_add_overflow(g->data_offset, t->offset, &start) ||
        __builtin_add_overflow(start, t->nbytes, &end) || end > g->size) {
      char q[QUOTE_CAP];
      st = rd_error(r, offset_at[i], KILN_STATUS_MALFORMED,
                    "tensor[%" PRIu64 "] %s offset: data of %" PRIu64 " bytes at offset %" PRIu64
                    " from the data section (byte %" PRIu64
                    ") runs past the end of the file (%" PRIu64 " bytes)",
                    i, quote(q, sizeof q, t->name.ptr, t->name.len), t->nbytes, t->offset,
                    g->data_offset, g->size);
      break;
    }
    t->data = g->data + start;
  }
  if (!st) st = check_overlaps(g, r, offset_at);
  free(offset_at);
  return st;
}

/* ---- open / close --------------------------------------------------------- */

static kiln_status finish_open(kiln_gguf *g, kiln_gguf **out_gguf) {
  kiln_status st = parse(g);
  if (st) {
    kiln_gguf_close(g);
    return st;
  }
  *out_gguf = g;
  return NULL;
}

kiln_status kiln_gguf_open(const char *path, kiln_gguf **out_gguf) {
  if (!path || !out_gguf) {
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kiln_gguf_open: NULL argument");
  }
  *out_gguf = NULL;
  struct stat sb;
  int fd = kiln__open_regular(path, &sb);
  if (fd == -2) return kiln_status_new(KILN_STATUS_IO, "%s: not a regular file", path);
  if (fd < 0) {
    int e = errno;
    return kiln_status_new(e == ENOENT ? KILN_STATUS_NOT_FOUND : KILN_STATUS_IO,
                           "%s: cannot open: %s", path, strerror(e));
  }
  if (sb.st_size == 0) {
    close(fd);
    return kiln_status_new(KILN_STATUS_MALFORMED, "%s: byte 0: magic: the file is empty", path);
  }
  if ((uint64_t)sb.st_size > SIZE_MAX) {
    close(fd);
    return kiln_status_new(KILN_STATUS_IO, "%s: too large to map on this machine", path);
  }
  size_t len = (size_t)sb.st_size;
  void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  close(fd);
  if (map == MAP_FAILED) {
    return kiln_status_new(KILN_STATUS_IO, "%s: cannot map %zu bytes: %s", path, len, strerror(e));
  }
  kiln_gguf *g = calloc(1, sizeof *g);
  char *name = strdup(path);
  if (!g || !name) {
    free(g);
    free(name);
    munmap(map, len);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: opening", path);
  }
  g->name = name;
  g->map = map;
  g->map_len = len;
  g->data = map;
  g->size = len;
  return finish_open(g, out_gguf);
}

kiln_status kiln_gguf_open_memory(const void *data, size_t size, const char *name,
                                  kiln_gguf **out_gguf) {
  if (!out_gguf || (!data && size)) {
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kiln_gguf_open_memory: NULL argument");
  }
  *out_gguf = NULL;
  kiln_gguf *g = calloc(1, sizeof *g);
  char *copy = strdup(name ? name : "<memory>");
  if (!g || !copy) {
    free(g);
    free(copy);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: opening", name ? name : "<memory>");
  }
  static const uint8_t empty[1];
  g->name = copy;
  g->data = data ? data : empty;
  g->size = size;
  return finish_open(g, out_gguf);
}

void kiln_gguf_close(kiln_gguf *g) {
  if (!g) return;
  if (g->str_offsets) {
    for (uint64_t i = 0; i < g->kv_cap; i++) free(g->str_offsets[i]);
  }
  free(g->str_offsets);
  free(g->kvs);
  free(g->tensors);
  free(g->kv_index.slots);
  free(g->tensor_index.slots);
  if (g->map) munmap(g->map, g->map_len);
  free(g->name);
  free(g);
}

/* ---- lookups -------------------------------------------------------------- */

const char *kiln_gguf_path(const kiln_gguf *g) { return g->name; }
uint32_t kiln_gguf_version(const kiln_gguf *g) { return g->version; }
uint64_t kiln_gguf_alignment(const kiln_gguf *g) { return g->alignment; }
uint64_t kiln_gguf_data_offset(const kiln_gguf *g) { return g->data_offset; }
uint64_t kiln_gguf_n_kv(const kiln_gguf *g) { return g->n_kv; }
uint64_t kiln_gguf_n_tensors(const kiln_gguf *g) { return g->n_tensors; }

const kiln_gguf_kv *kiln_gguf_kv_at(const kiln_gguf *g, uint64_t i) {
  return i < g->n_kv ? &g->kvs[i] : NULL;
}

const kiln_gguf_tensor *kiln_gguf_tensor_at(const kiln_gguf *g, uint64_t i) {
  return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const kiln_gguf_kv *kiln_gguf_find_kv(const kiln_gguf *g, const char *key) {
  uint64_t i = index_find(&g->kv_index, g->kvs, sizeof *g->kvs, key, strlen(key));
  return i == UINT64_MAX ? NULL : &g->kvs[i];
}

const kiln_gguf_tensor *kiln_gguf_find_tensor(const kiln_gguf *g, const char *name) {
  uint64_t i = index_find(&g->tensor_index, g->tensors, sizeof *g->tensors, name, strlen(name));
  return i == UINT64_MAX ? NULL : &g->tensors[i];
}
