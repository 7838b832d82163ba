/* The GGUF writer, checked through the reader: every value type (scalars,
 * strings, arrays of scalars and of strings), tensors of every type kiln
 * writes (raw and quantized from f32), alignment and version, replacing and
 * removing keys, bad input, atomic file writes, and copying a real
 * vocabulary (ggml-vocab-llama-spm.gguf) key by key and element by element.
 * Copying every key of a vocabulary-only file must reproduce the file byte
 * for byte. */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kiln/dequant.h"
#include "kiln/gguf.h"
#include "kiln/gguf_write.h"
#include "kiln/half.h"
#include "testutil.h"

static kiln_gguf_writer *new_writer(void) {
  kiln_gguf_writer *w = NULL;
  KT_ASSERT_OK(kiln_gguf_writer_new(&w));
  assert_non_null(w);
  return w;
}

/* Writes w into memory and opens it; *out_buf must be freed after close. */
static kiln_gguf *write_and_open(const kiln_gguf_writer *w, void **out_buf, size_t *out_size) {
  void *buf = NULL;
  size_t size = 0;
  KT_ASSERT_OK(kiln_gguf_writer_write_memory(w, &buf, &size));
  kiln_gguf *g = NULL;
  KT_ASSERT_OK(kiln_gguf_open_memory(buf, size, "written.gguf", &g));
  *out_buf = buf;
  if (out_size) *out_size = size;
  return g;
}

static const kiln_gguf_kv *kv_of(const kiln_gguf *g, const char *key, kiln_gguf_vtype type) {
  const kiln_gguf_kv *kv = kiln_gguf_find_kv(g, key);
  if (!kv) fail_msg("key %s missing", key);
  if (kv->type != type)
    fail_msg("key %s: type %s, expected %s", key, kiln_gguf_vtype_name(kv->type),
             kiln_gguf_vtype_name(type));
  return kv;
}

static const kiln_gguf_kv *arr_of(const kiln_gguf *g, const char *key, kiln_gguf_vtype et,
                                  uint64_t n) {
  const kiln_gguf_kv *kv = NULL;
  KT_ASSERT_OK(kiln_gguf_get_arr(g, key, et, &kv));
  assert_int_equal(kv->n, n);
  return kv;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(void) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2 - 1);
}

/* ---- every value type ------------------------------------------------------ */

static void test_every_kv_type_round_trips(void **state) {
  (void)state;
  kiln_gguf_writer *w = new_writer();
  const float eps = 1e-6f;
  KT_ASSERT_OK(kiln_gguf_writer_set_u8(w, "t.u8", 200));
  KT_ASSERT_OK(kiln_gguf_writer_set_i8(w, "t.i8", -100));
  KT_ASSERT_OK(kiln_gguf_writer_set_u16(w, "t.u16", 60000));
  KT_ASSERT_OK(kiln_gguf_writer_set_i16(w, "t.i16", -30000));
  KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "t.u32", 4000000000u));
  KT_ASSERT_OK(kiln_gguf_writer_set_i32(w, "t.i32", -2000000000));
  KT_ASSERT_OK(kiln_gguf_writer_set_u64(w, "t.u64", (1ull << 63) + 5));
  KT_ASSERT_OK(kiln_gguf_writer_set_i64(w, "t.i64", INT64_MIN + 1));
  KT_ASSERT_OK(kiln_gguf_writer_set_f32(w, "t.eps", eps));
  KT_ASSERT_OK(kiln_gguf_writer_set_f64(w, "t.f64", M_PI));
  KT_ASSERT_OK(kiln_gguf_writer_set_bool(w, "t.yes", true));
  KT_ASSERT_OK(kiln_gguf_writer_set_bool(w, "t.no", false));
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "t.str", "h\xc3\xa9llo <|im_start|>"));
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "t.empty", ""));
  KT_ASSERT_OK(kiln_gguf_writer_set_strn(w, "t.nul", "a\0b", 3));

  const uint8_t au8[] = {0, 1, 255};
  const int8_t ai8[] = {-128, 0, 127};
  const uint16_t au16[] = {0, 65535};
  const int16_t ai16[] = {-32768, 32767, -1};
  const uint32_t au32[] = {0, 4294967295u, 151643};
  const int32_t ai32[] = {INT32_MIN, -1, 6, INT32_MAX};
  const uint64_t au64[] = {UINT64_MAX, 0};
  const int64_t ai64[] = {INT64_MIN, INT64_MAX, -7};
  const float af32[] = {-0.0f, 1e-45f, -3.4e38f, 0.1f};
  const double af64[] = {-0.0, 1e-320, 2.5};
  const bool ab[] = {true, false, true, true};
  KT_ASSERT_OK(kiln_gguf_writer_set_arr(w, "a.u8", KILN_GGUF_UINT8, au8, 3));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr(w, "a.i8", KILN_GGUF_INT8, ai8, 3));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr(w, "a.u16", KILN_GGUF_UINT16, au16, 2));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr(w, "a.i16", KILN_GGUF_INT16, ai16, 3));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_u32(w, "a.u32", au32, 3));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_i32(w, "a.i32", ai32, 4));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr(w, "a.u64", KILN_GGUF_UINT64, au64, 2));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr(w, "a.i64", KILN_GGUF_INT64, ai64, 3));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_f32(w, "a.f32", af32, 4));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr(w, "a.f64", KILN_GGUF_FLOAT64, af64, 3));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr(w, "a.bool", KILN_GGUF_BOOL, ab, 4));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr(w, "a.empty", KILN_GGUF_FLOAT32, NULL, 0));
  const char *strs[] = {"<unk>", "", "\xc4\xa0the", "<|im_end|>"};
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_str(w, "a.str", strs, 4));
  const kiln_gguf_str sv[] = {{"x\0y", 3}, {"", 0}};
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_strv(w, "a.strv", sv, 2));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_str(w, "a.nostr", NULL, 0));

  void *buf;
  kiln_gguf *g = write_and_open(w, &buf, NULL);
  assert_int_equal(kiln_gguf_version(g), 3);
  assert_int_equal(kiln_gguf_n_kv(g), 30);
  assert_int_equal(kiln_gguf_n_tensors(g), 0);
  /* order kept */
  const kiln_gguf_kv *first = kiln_gguf_kv_at(g, 0), *last = kiln_gguf_kv_at(g, 29);
  assert_memory_equal(first->key.ptr, "t.u8", 4);
  assert_memory_equal(last->key.ptr, "a.nostr", 7);

  assert_int_equal(kv_of(g, "t.u8", KILN_GGUF_UINT8)->v.u64, 200);
  assert_int_equal(kv_of(g, "t.i8", KILN_GGUF_INT8)->v.i64, -100);
  assert_int_equal(kv_of(g, "t.u16", KILN_GGUF_UINT16)->v.u64, 60000);
  assert_int_equal(kv_of(g, "t.i16", KILN_GGUF_INT16)->v.i64, -30000);
  assert_int_equal(kv_of(g, "t.u32", KILN_GGUF_UINT32)->v.u64, 4000000000u);
  assert_int_equal(kv_of(g, "t.i32", KILN_GGUF_INT32)->v.i64, -2000000000);
  assert_true(kv_of(g, "t.u64", KILN_GGUF_UINT64)->v.u64 == (1ull << 63) + 5);
  assert_true(kv_of(g, "t.i64", KILN_GGUF_INT64)->v.i64 == INT64_MIN + 1);
  assert_int_equal(kiln_f32_to_bits(kv_of(g, "t.eps", KILN_GGUF_FLOAT32)->v.f32),
                   kiln_f32_to_bits(eps));
  assert_true(kv_of(g, "t.f64", KILN_GGUF_FLOAT64)->v.f64 == M_PI);
  assert_true(kv_of(g, "t.yes", KILN_GGUF_BOOL)->v.b);
  assert_false(kv_of(g, "t.no", KILN_GGUF_BOOL)->v.b);
  char s[64];
  KT_ASSERT_OK(kiln_gguf_get_str(g, "t.str", s, sizeof s));
  assert_string_equal(s, "h\xc3\xa9llo <|im_start|>");
  KT_ASSERT_OK(kiln_gguf_get_str(g, "t.empty", s, sizeof s));
  assert_string_equal(s, "");
  kiln_gguf_str nul;
  KT_ASSERT_OK(kiln_gguf_get_strv(g, "t.nul", &nul));
  assert_int_equal(nul.len, 3);
  assert_memory_equal(nul.ptr, "a\0b", 3);
  /* a key read as text refuses the NUL inside (get_text, get_str) */
  KT_ASSERT_ERR(kiln_gguf_get_text(g, "t.nul", &nul), KILN_STATUS_MALFORMED, "holds a NUL byte");
  KT_ASSERT_ERR(kiln_gguf_get_str(g, "t.nul", s, sizeof s), KILN_STATUS_MALFORMED, "t.nul");
  uint32_t u32;
  KT_ASSERT_OK(kiln_gguf_get_u32(g, "t.u16", &u32));
  assert_int_equal(u32, 60000);
  KT_ASSERT_ERR(kiln_gguf_get_u32(g, "t.u64", &u32), KILN_STATUS_OUT_OF_RANGE, "over UINT32_MAX");

  const kiln_gguf_kv *kv;
  kv = arr_of(g, "a.u8", KILN_GGUF_UINT8, 3);
  for (int i = 0; i < 3; i++) assert_int_equal(kiln_gguf_arr_u8(kv, i), au8[i]);
  kv = arr_of(g, "a.i8", KILN_GGUF_INT8, 3);
  for (int i = 0; i < 3; i++) assert_int_equal(kiln_gguf_arr_i8(kv, i), ai8[i]);
  kv = arr_of(g, "a.u16", KILN_GGUF_UINT16, 2);
  for (int i = 0; i < 2; i++) assert_int_equal(kiln_gguf_arr_u16(kv, i), au16[i]);
  kv = arr_of(g, "a.i16", KILN_GGUF_INT16, 3);
  for (int i = 0; i < 3; i++) assert_int_equal(kiln_gguf_arr_i16(kv, i), ai16[i]);
  kv = arr_of(g, "a.u32", KILN_GGUF_UINT32, 3);
  for (int i = 0; i < 3; i++) assert_int_equal(kiln_gguf_arr_u32(kv, i), au32[i]);
  kv = arr_of(g, "a.i32", KILN_GGUF_INT32, 4);
  for (int i = 0; i < 4; i++) assert_int_equal(kiln_gguf_arr_i32(kv, i), ai32[i]);
  kv = arr_of(g, "a.u64", KILN_GGUF_UINT64, 2);
  for (int i = 0; i < 2; i++) assert_true(kiln_gguf_arr_u64(kv, i) == au64[i]);
  kv = arr_of(g, "a.i64", KILN_GGUF_INT64, 3);
  for (int i = 0; i < 3; i++) assert_true(kiln_gguf_arr_i64(kv, i) == ai64[i]);
  kv = arr_of(g, "a.f32", KILN_GGUF_FLOAT32, 4);
  for (int i = 0; i < 4; i++)
    assert_int_equal(kiln_f32_to_bits(kiln_gguf_arr_f32(kv, i)), kiln_f32_to_bits(af32[i]));
  kv = arr_of(g, "a.f64", KILN_GGUF_FLOAT64, 3);
  for (int i = 0; i < 3; i++) assert_memory_equal(&(double){kiln_gguf_arr_f64(kv, i)}, &af64[i], 8);
  kv = arr_of(g, "a.bool", KILN_GGUF_BOOL, 4);
  for (int i = 0; i < 4; i++) assert_int_equal(kiln_gguf_arr_bool(kv, i), ab[i]);
  arr_of(g, "a.empty", KILN_GGUF_FLOAT32, 0);
  arr_of(g, "a.nostr", KILN_GGUF_STRING, 0);
  kv = arr_of(g, "a.str", KILN_GGUF_STRING, 4);
  for (int i = 0; i < 4; i++) {
    kiln_gguf_str e = kiln_gguf_arr_str(g, kv, i);
    assert_int_equal(e.len, strlen(strs[i]));
    assert_memory_equal(e.ptr, strs[i], e.len);
  }
  kv = arr_of(g, "a.strv", KILN_GGUF_STRING, 2);
  kiln_gguf_str e0 = kiln_gguf_arr_str(g, kv, 0);
  assert_int_equal(e0.len, 3);
  assert_memory_equal(e0.ptr, "x\0y", 3);
  kiln_gguf_close(g);
  free(buf);
  kiln_gguf_writer_free(w);
}

/* ---- tensors ----------------------------------------------------------------- */

typedef struct tcase {
  const char *name;
  kiln_type type;
  int n_dims;
  int64_t ne[4];
  double max_rel_l2; /* of the dequantized values against the f32 input */
} tcase;

static const tcase tcases[] = {
    {"t.f32", KILN_TYPE_F32, 2, {3, 2, 1, 1}, 0.0},
    {"t.f16", KILN_TYPE_F16, 1, {5, 1, 1, 1}, 1e-3},
    {"t.bf16", KILN_TYPE_BF16, 3, {2, 2, 3, 1}, 5e-3},
    {"t.q8_0", KILN_TYPE_Q8_0, 2, {64, 3, 1, 1}, 0.01},
    {"t.q4_0", KILN_TYPE_Q4_0, 1, {32, 1, 1, 1}, 0.15},
    {"t.q5_0", KILN_TYPE_Q5_0, 4, {32, 1, 2, 2}, 0.08},
    {"t.q4_k", KILN_TYPE_Q4_K, 2, {256, 2, 1, 1}, 0.12},
    {"blk.0.attn_qkv.weight", KILN_TYPE_Q5_K, 2, {512, 3, 1, 1}, 0.06},
    {"blk.0.ffn_down.weight", KILN_TYPE_Q6_K, 1, {512, 1, 1, 1}, 0.04},
};
#define N_TCASES (sizeof tcases / sizeof tcases[0])

static int64_t nel(const tcase *c) { return c->ne[0] * c->ne[1] * c->ne[2] * c->ne[3]; }

static void test_tensors_round_trip(void **state) {
  (void)state;
  kiln_gguf_writer *w = new_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "general.architecture", "llama"));
  float *vals[N_TCASES];
  uint8_t *want[N_TCASES];
  for (size_t k = 0; k < N_TCASES; k++) {
    const tcase *c = &tcases[k];
    int64_t n = nel(c);
    int64_t bytes = kiln_type_row_bytes(c->type, n);
    assert_true(n > 0 && bytes > 0);
    vals[k] = malloc((size_t)n * sizeof(float));
    want[k] = malloc((size_t)bytes);
    assert_non_null(vals[k]);
    assert_non_null(want[k]);
    for (int64_t i = 0; i < n; i++) vals[k][i] = frand() * (float)(1 + i % 7);
    KT_ASSERT_OK(kiln_quantize(c->type, vals[k], want[k], n));
    if (k % 2) {
      KT_ASSERT_OK(kiln_gguf_writer_add_tensor_f32(w, c->name, c->type, c->n_dims, c->ne, vals[k]));
    } else {
      KT_ASSERT_OK(kiln_gguf_writer_add_tensor_raw(w, c->name, c->type, c->n_dims, c->ne, want[k],
                                                   (uint64_t)kiln_type_row_bytes(c->type, n)));
    }
  }
  void *buf;
  size_t size;
  kiln_gguf *g = write_and_open(w, &buf, &size);
  assert_int_equal(kiln_gguf_n_tensors(g), N_TCASES);
  assert_int_equal(kiln_gguf_alignment(g), 32);
  assert_int_equal(kiln_gguf_data_offset(g) % 32, 0);
  uint64_t expect_offset = 0;
  for (size_t k = 0; k < N_TCASES; k++) {
    const tcase *c = &tcases[k];
    const kiln_gguf_tensor *t = kiln_gguf_tensor_at(g, k);
    int64_t n = nel(c);
    uint64_t nbytes = (uint64_t)kiln_type_row_bytes(c->type, n);
    assert_int_equal(t->name.len, strlen(c->name));
    assert_memory_equal(t->name.ptr, c->name, t->name.len);
    assert_int_equal(t->type, c->type);
    assert_int_equal(t->n_dims, c->n_dims);
    for (int d = 0; d < 4; d++) assert_int_equal(t->ne[d], c->ne[d]);
    assert_int_equal(t->nbytes, nbytes);
    assert_int_equal(t->offset, expect_offset);
    expect_offset += (nbytes + 31) / 32 * 32;
    assert_memory_equal(t->data, want[k], nbytes);
    float *y = malloc((size_t)n * sizeof *y);
    KT_ASSERT_OK(kiln_dequantize(t->type, t->data, y, n));
    double dd = 0, xx = 0;
    for (int64_t i = 0; i < n; i++) {
      dd += ((double)y[i] - vals[k][i]) * ((double)y[i] - vals[k][i]);
      xx += (double)vals[k][i] * vals[k][i];
    }
    printf("  %-22s %-4s rel L2 %.2e\n", c->name, kiln_type_name(c->type), sqrt(dd / xx));
    assert_true(sqrt(dd / xx) <= c->max_rel_l2);
    free(y);
  }
  /* the last tensor's data, padded to the alignment, ends the file */
  assert_int_equal(kiln_gguf_data_offset(g) + expect_offset, size);
  kiln_gguf_close(g);
  free(buf);
  for (size_t k = 0; k < N_TCASES; k++) {
    free(vals[k]);
    free(want[k]);
  }
  kiln_gguf_writer_free(w);
}

static void test_alignment_and_version(void **state) {
  (void)state;
  kiln_gguf_writer *w = new_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_version(w, 2));
  KT_ASSERT_ERR(kiln_gguf_writer_set_version(w, 1), KILN_STATUS_INVALID_ARGUMENT, "version 1");
  KT_ASSERT_ERR(kiln_gguf_writer_set_alignment(w, 12), KILN_STATUS_INVALID_ARGUMENT,
                "12 is not a non-zero multiple of 8");
  KT_ASSERT_ERR(kiln_gguf_writer_set_u32(w, "general.alignment", 0), KILN_STATUS_INVALID_ARGUMENT,
                "general.alignment");
  KT_ASSERT_ERR(kiln_gguf_writer_set_u64(w, "general.alignment", 64), KILN_STATUS_INVALID_ARGUMENT,
                "must be uint32");
  assert_false(kiln_gguf_writer_has(w, "general.alignment"));
  KT_ASSERT_OK(kiln_gguf_writer_set_alignment(w, 64));
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "general.name", "odd"));
  const int64_t ne[1] = {3};
  const float v[3] = {1, 2, 3};
  KT_ASSERT_OK(kiln_gguf_writer_add_tensor_f32(w, "a", KILN_TYPE_F32, 1, ne, v));
  KT_ASSERT_OK(kiln_gguf_writer_add_tensor_f32(w, "b", KILN_TYPE_F32, 1, ne, v));
  void *buf;
  kiln_gguf *g = write_and_open(w, &buf, NULL);
  assert_int_equal(kiln_gguf_version(g), 2);
  assert_int_equal(kiln_gguf_alignment(g), 64);
  assert_int_equal(kiln_gguf_data_offset(g) % 64, 0);
  assert_int_equal(kiln_gguf_find_tensor(g, "b")->offset, 64);
  assert_memory_equal(kiln_gguf_find_tensor(g, "b")->data, v, sizeof v);
  kiln_gguf_close(g);
  free(buf);

  /* removing the key returns to 32 */
  KT_ASSERT_OK(kiln_gguf_writer_remove(w, "general.alignment"));
  g = write_and_open(w, &buf, NULL);
  assert_int_equal(kiln_gguf_alignment(g), 32);
  assert_null(kiln_gguf_find_kv(g, "general.alignment"));
  assert_int_equal(kiln_gguf_find_tensor(g, "b")->offset, 32);
  kiln_gguf_close(g);
  free(buf);
  kiln_gguf_writer_free(w);
}

/* Two tiny models that differ only in ε: the use the writer is for. */
static void test_replace_keeps_position(void **state) {
  (void)state;
  kiln_gguf_writer *w = new_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "general.architecture", "qwen2"));
  KT_ASSERT_OK(kiln_gguf_writer_set_f32(w, "qwen2.attention.layer_norm_rms_epsilon", 1e-5f));
  KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "qwen2.block_count", 1));
  const int64_t ne[2] = {32, 2};
  float v[64];
  for (int i = 0; i < 64; i++) v[i] = frand();
  KT_ASSERT_OK(kiln_gguf_writer_add_tensor_f32(w, "token_embd.weight", KILN_TYPE_Q8_0, 2, ne, v));
  void *a, *b;
  size_t na, nb;
  KT_ASSERT_OK(kiln_gguf_writer_write_memory(w, &a, &na));
  KT_ASSERT_OK(kiln_gguf_writer_set_f32(w, "qwen2.attention.layer_norm_rms_epsilon", 1e-6f));
  KT_ASSERT_OK(kiln_gguf_writer_write_memory(w, &b, &nb));
  assert_int_equal(na, nb);
  int diff = 0;
  for (size_t i = 0; i < na; i++) diff += ((uint8_t *)a)[i] != ((uint8_t *)b)[i];
  assert_true(diff >= 1 && diff <= 4); /* only the four bytes of ε */
  kiln_gguf *ga, *gb;
  KT_ASSERT_OK(kiln_gguf_open_memory(a, na, "a.gguf", &ga));
  KT_ASSERT_OK(kiln_gguf_open_memory(b, nb, "b.gguf", &gb));
  float ea, eb;
  KT_ASSERT_OK(kiln_gguf_get_f32(ga, "qwen2.attention.layer_norm_rms_epsilon", &ea));
  KT_ASSERT_OK(kiln_gguf_get_f32(gb, "qwen2.attention.layer_norm_rms_epsilon", &eb));
  assert_int_equal(kiln_f32_to_bits(ea), 0x3727c5acu);
  assert_int_equal(kiln_f32_to_bits(eb), 0x358637bdu);
  assert_int_equal(kiln_gguf_n_kv(gb), 3);
  assert_memory_equal(kiln_gguf_kv_at(gb, 1)->key.ptr, "qwen2.attention", 15); /* same place */
  kiln_gguf_close(ga);
  kiln_gguf_close(gb);
  free(a);
  free(b);

  assert_true(kiln_gguf_writer_has(w, "qwen2.block_count"));
  KT_ASSERT_OK(kiln_gguf_writer_remove(w, "qwen2.block_count"));
  assert_false(kiln_gguf_writer_has(w, "qwen2.block_count"));
  KT_ASSERT_ERR(kiln_gguf_writer_remove(w, "qwen2.block_count"), KILN_STATUS_NOT_FOUND,
                "qwen2.block_count");
  kiln_gguf_writer_free(w);
}

static void test_bad_input(void **state) {
  (void)state;
  kiln_gguf_writer *w = new_writer();
  const int64_t ne[4] = {32, 2, 1, 1}, ne172[2] = {172, 64}, ne0[2] = {32, 0};
  float v[64] = {0};
  uint8_t raw[68] = {0};
  KT_ASSERT_OK(kiln_gguf_writer_add_tensor_f32(w, "w", KILN_TYPE_Q8_0, 2, ne, v));
  KT_ASSERT_ERR(kiln_gguf_writer_add_tensor_f32(w, "w", KILN_TYPE_Q8_0, 2, ne, v),
                KILN_STATUS_INVALID_ARGUMENT, "tensor 'w': already added");
  KT_ASSERT_ERR(kiln_gguf_writer_add_tensor_f32(w, "", KILN_TYPE_F32, 2, ne, v),
                KILN_STATUS_INVALID_ARGUMENT, "name of 0 bytes");
  KT_ASSERT_ERR(kiln_gguf_writer_add_tensor_f32(
                    w, "blk.0.a.very.long.name.that.is.more.than.sixty.three.bytes.long.x",
                    KILN_TYPE_F32, 2, ne, v),
                KILN_STATUS_INVALID_ARGUMENT, "1 to 63 allowed");
  KT_ASSERT_ERR(kiln_gguf_writer_add_tensor_f32(w, "x", KILN_TYPE_F32, 0, ne, v),
                KILN_STATUS_INVALID_ARGUMENT, "n_dims 0");
  KT_ASSERT_ERR(kiln_gguf_writer_add_tensor_f32(w, "x", KILN_TYPE_F32, 5, ne, v),
                KILN_STATUS_INVALID_ARGUMENT, "n_dims 5");
  KT_ASSERT_ERR(kiln_gguf_writer_add_tensor_f32(w, "x", KILN_TYPE_F32, 2, ne0, v),
                KILN_STATUS_INVALID_ARGUMENT, "ne[1] = 0");
  KT_ASSERT_ERR(kiln_gguf_writer_add_tensor_raw(w, "x", KILN_TYPE_Q8_0, 2, ne172, raw, 68),
                KILN_STATUS_INVALID_ARGUMENT,
                "tensor 'x': ne0 = 172 is not a multiple of the Q8_0 block size 32");
  KT_ASSERT_ERR(kiln_gguf_writer_add_tensor_raw(w, "x", KILN_TYPE_Q8_0, 2, ne, raw, 67),
                KILN_STATUS_INVALID_ARGUMENT, "67 bytes given, its Q8_0 shape needs 68");
  KT_ASSERT_ERR(kiln_gguf_writer_add_tensor_raw(w, "x", (kiln_type)11, 1, ne, raw, 68),
                KILN_STATUS_INVALID_ARGUMENT, "type id 11");
  v[40] = NAN;
  KT_ASSERT_ERR(kiln_gguf_writer_add_tensor_f32(w, "x", KILN_TYPE_Q4_0, 2, ne, v),
                KILN_STATUS_INVALID_ARGUMENT, "tensor 'x': kiln_quantize: value 40 is nan");
  KT_ASSERT_ERR(kiln_gguf_writer_set_u32(w, "", 1), KILN_STATUS_INVALID_ARGUMENT, "key of 0 bytes");
  KT_ASSERT_ERR(kiln_gguf_writer_set_arr(w, "a", KILN_GGUF_STRING, v, 1),
                KILN_STATUS_INVALID_ARGUMENT, "set_arr_str");
  KT_ASSERT_ERR(kiln_gguf_writer_set_arr(w, "a", KILN_GGUF_ARRAY, v, 1),
                KILN_STATUS_INVALID_ARGUMENT, "arrays of array");
  const char *strs[2] = {"a", NULL};
  KT_ASSERT_ERR(kiln_gguf_writer_set_arr_str(w, "a", strs, 2), KILN_STATUS_INVALID_ARGUMENT,
                "string 1 is NULL");
  KT_ASSERT_ERR(kiln_gguf_writer_set_str(w, "a", NULL), KILN_STATUS_INVALID_ARGUMENT,
                "NULL string");
  /* nothing bad was added: the file has the one good tensor */
  void *buf;
  kiln_gguf *g = write_and_open(w, &buf, NULL);
  assert_int_equal(kiln_gguf_n_tensors(g), 1);
  assert_int_equal(kiln_gguf_n_kv(g), 0);
  kiln_gguf_close(g);
  free(buf);
  kiln_gguf_writer_free(w);
}

/* ---- files ------------------------------------------------------------------- */

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  }
  closedir(d);
  return n;
}

static void *read_all(const char *path, size_t *out_size) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  if (n < 0 || n > (1L << 30)) fail_msg("%s: size %ld", path, n);
  fseek(f, 0, SEEK_SET);
  void *p = malloc((size_t)n + 1);
  assert_non_null(p);
  assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *out_size = (size_t)n;
  return p;
}

static void test_write_file_atomic(void **state) {
  (void)state;
  char *dir = kt_mkdtemp("gguf-write");
  assert_non_null(dir);
  char path[4096], sub[4096];
  snprintf(path, sizeof path, "%s/model.gguf", dir);

  kiln_gguf_writer *w = new_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "general.name", "first"));
  const int64_t ne[1] = {256};
  float v[256];
  for (int i = 0; i < 256; i++) v[i] = frand();
  KT_ASSERT_OK(kiln_gguf_writer_add_tensor_f32(w, "w", KILN_TYPE_Q4_K, 1, ne, v));
  KT_ASSERT_OK(kiln_gguf_writer_write_file(w, path));

  void *mem;
  size_t mem_size, file_size;
  KT_ASSERT_OK(kiln_gguf_writer_write_memory(w, &mem, &mem_size));
  void *file = read_all(path, &file_size);
  assert_int_equal(file_size, mem_size);
  assert_memory_equal(file, mem, mem_size);
  free(file);
  free(mem);
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0644);

  /* overwrite: the new content replaces the old, no temporary left */
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "general.name", "second"));
  KT_ASSERT_OK(kiln_gguf_writer_write_file(w, path));
  kiln_gguf *g;
  KT_ASSERT_OK(kiln_gguf_open(path, &g));
  char s[16];
  KT_ASSERT_OK(kiln_gguf_get_str(g, "general.name", s, sizeof s));
  assert_string_equal(s, "second");
  kiln_gguf_close(g);
  assert_int_equal(count_entries(dir), 1);

  /* a folder that does not exist: IO error naming the path */
  snprintf(sub, sizeof sub, "%s/missing/model.gguf", dir);
  KT_ASSERT_ERR(kiln_gguf_writer_write_file(w, sub), KILN_STATUS_IO,
                "missing/model.gguf: cannot create a temporary file");

  /* a target that is a folder is refused before anything is written: the
   * folder stays, no temporary file is left behind */
  snprintf(sub, sizeof sub, "%s/taken", dir);
  assert_int_equal(mkdir(sub, 0755), 0);
  KT_ASSERT_ERR(kiln_gguf_writer_write_file(w, sub), KILN_STATUS_INVALID_ARGUMENT,
                "taken: is a directory; kiln writes models only to regular files");
  assert_int_equal(stat(sub, &sb), 0);
  assert_true(S_ISDIR(sb.st_mode));
  assert_int_equal(count_entries(dir), 2);
  KT_ASSERT_OK(kiln_gguf_open(path, &g)); /* the earlier file is intact */
  kiln_gguf_close(g);

  kiln_gguf_writer_free(w);
  kt_rm_rf(dir);
  free(dir);
}

/* Asserts writing w to `target` is refused with `what` in the message and
 * that the folder holds exactly `n_entries` names afterwards (nothing
 * created beside the target). */
static void assert_refused(const kiln_gguf_writer *w, const char *target, const char *what,
                           const char *dir, int n_entries) {
  KT_ASSERT_ERR(kiln_gguf_writer_write_file(w, target), KILN_STATUS_INVALID_ARGUMENT, what);
  if (dir) assert_int_equal(count_entries(dir), n_entries);
}

/* Only a regular file is ever replaced. `kiln synth -o /dev/null` run as
 * root once swapped the /dev/null device node for a regular file: the
 * rename acts on the directory entry, whatever it is. Symlinks, FIFOs,
 * devices, folders and read-only files are refused and left as they were. */
static void test_write_file_refuses_non_regular(void **state) {
  (void)state;
  char *dir = kt_mkdtemp("gguf-write-special");
  assert_non_null(dir);
  char victim[4096], link[4096], dangling[4096], fifo[4096], ro[4096], folder[4096],
      chr[4096];
  snprintf(victim, sizeof victim, "%s/precious.gguf", dir);
  snprintf(link, sizeof link, "%s/link.gguf", dir);
  snprintf(dangling, sizeof dangling, "%s/dangling.gguf", dir);
  snprintf(fifo, sizeof fifo, "%s/pipe.gguf", dir);
  snprintf(ro, sizeof ro, "%s/readonly.gguf", dir);
  snprintf(folder, sizeof folder, "%s/folder.gguf", dir);
  snprintf(chr, sizeof chr, "%s/null.gguf", dir);
  assert_true(kt_write_file(victim, "user data\n", 10));
  assert_int_equal(symlink(victim, link), 0);
  assert_int_equal(symlink("nowhere.gguf", dangling), 0);
  assert_int_equal(mkfifo(fifo, 0644), 0);
  assert_true(kt_write_file(ro, "read only\n", 10));
  assert_int_equal(chmod(ro, 0444), 0);
  assert_int_equal(mkdir(folder, 0755), 0);
  int n = 6;
  /* a character device like /dev/null (1,3), where we may make one */
  bool have_chr = mknod(chr, S_IFCHR | 0666, makedev(1, 3)) == 0;
  if (have_chr) n++;
  else printf("  (mknod of a character device not permitted here: %s)\n", strerror(errno));

  kiln_gguf_writer *w = new_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "general.name", "x"));

  assert_refused(w, link, "link.gguf: is a symbolic link; kiln writes models only to regular files",
                 dir, n);
  assert_refused(w, dangling, "dangling.gguf: is a symbolic link", dir, n);
  assert_refused(w, fifo, "pipe.gguf: is a FIFO (named pipe); kiln writes models only", dir, n);
  assert_refused(w, folder, "folder.gguf: is a directory", dir, n);
  assert_refused(w, ro, "readonly.gguf: is a read-only file (mode 0444)", dir, n);
  if (have_chr)
    assert_refused(w, chr, "null.gguf: is a character device; kiln writes models only", dir, n);

  struct stat sb;
  assert_int_equal(lstat(link, &sb), 0);
  assert_true(S_ISLNK(sb.st_mode));
  assert_int_equal(lstat(dangling, &sb), 0);
  assert_true(S_ISLNK(sb.st_mode));
  assert_int_equal(lstat(fifo, &sb), 0);
  assert_true(S_ISFIFO(sb.st_mode));
  assert_int_equal(lstat(folder, &sb), 0);
  assert_true(S_ISDIR(sb.st_mode));
  assert_int_equal(lstat(ro, &sb), 0);
  assert_true(S_ISREG(sb.st_mode));
  assert_int_equal(sb.st_mode & 0777, 0444);
  if (have_chr) {
    assert_int_equal(lstat(chr, &sb), 0);
    assert_true(S_ISCHR(sb.st_mode));
  }
  size_t size;
  char *text = read_all(victim, &size); /* the link's target is untouched */
  assert_int_equal(size, 10);
  assert_memory_equal(text, "user data\n", 10);
  free(text);
  text = read_all(ro, &size);
  assert_int_equal(size, 10);
  assert_memory_equal(text, "read only\n", 10);
  free(text);

  /* /dev/null itself: refused before anything is written. Only tried when
   * not root: a non-root process cannot create anything in /dev, so even a
   * writer without this check could not replace it. */
  if (geteuid() != 0) {
    assert_refused(w, "/dev/null", "/dev/null: is a character device", NULL, 0);
    assert_int_equal(lstat("/dev/null", &sb), 0);
    assert_true(S_ISCHR(sb.st_mode));
  }

  /* a writable regular file is still replaced */
  KT_ASSERT_OK(kiln_gguf_writer_write_file(w, victim));
  kiln_gguf *g;
  KT_ASSERT_OK(kiln_gguf_open(victim, &g));
  kiln_gguf_close(g);
  assert_int_equal(count_entries(dir), n);

  kiln_gguf_writer_free(w);
  kt_rm_rf(dir);
  free(dir);
}

/* A process killed in the middle of a write leaves nothing in the folder:
 * the temporary file has no name until it is complete (O_TMPFILE). The
 * kill is made deterministic with a file-size limit: the write that
 * crosses it raises SIGXFSZ, whose default action ends the process. */
static void test_write_file_killed_leaves_nothing(void **state) {
  (void)state;
  char *dir = kt_mkdtemp("gguf-write-kill");
  assert_non_null(dir);
  char path[4096];
  snprintf(path, sizeof path, "%s/model.gguf", dir);
  kiln_gguf_writer *w = new_writer();
  const int64_t ne[1] = {1 << 18}; /* 1 MiB of f32 */
  float *v = calloc((size_t)ne[0], sizeof *v);
  assert_non_null(v);
  KT_ASSERT_OK(kiln_gguf_writer_add_tensor_f32(w, "big", KILN_TYPE_F32, 1, ne, v));
  free(v);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct rlimit fsz = {64 << 10, 64 << 10}, core = {0, 0};
    setrlimit(RLIMIT_CORE, &core);
    signal(SIGXFSZ, SIG_DFL);
    if (setrlimit(RLIMIT_FSIZE, &fsz) != 0) _exit(3);
    kiln_status st = kiln_gguf_writer_write_file(w, path);
    _exit(st ? 1 : 0); /* not reached: SIGXFSZ ends the process first */
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGXFSZ)
    fail_msg("the writer was not killed mid-write (wait status 0x%x)", (unsigned)status);
  if (count_entries(dir) != 0) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d)))
      if (e->d_name[0] != '.') printf("  left behind: %s\n", e->d_name);
    closedir(d);
    fail_msg("a killed write left files in %s", dir);
  }
  kiln_gguf_writer_free(w);
  kt_rm_rf(dir);
  free(dir);
}

/* ---- copying keys from real files -------------------------------------------- */

/* Asserts two key/values (of two files) hold the same type and value,
 * arrays element by element. */
static void assert_same_kv(const kiln_gguf *ga, const kiln_gguf_kv *a, const kiln_gguf *gb,
                           const kiln_gguf_kv *b) {
  assert_int_equal(a->key.len, b->key.len);
  assert_memory_equal(a->key.ptr, b->key.ptr, a->key.len);
  assert_int_equal(a->type, b->type);
  switch (a->type) {
  case KILN_GGUF_STRING:
    assert_int_equal(a->v.str.len, b->v.str.len);
    assert_memory_equal(a->v.str.ptr, b->v.str.ptr, a->v.str.len);
    return;
  case KILN_GGUF_FLOAT32:
    assert_int_equal(kiln_f32_to_bits(a->v.f32), kiln_f32_to_bits(b->v.f32));
    return;
  case KILN_GGUF_FLOAT64: assert_memory_equal(&a->v.f64, &b->v.f64, 8); return;
  case KILN_GGUF_BOOL: assert_int_equal(a->v.b, b->v.b); return;
  case KILN_GGUF_ARRAY: break;
  default: assert_true(a->v.u64 == b->v.u64); return;
  }
  assert_int_equal(a->elem_type, b->elem_type);
  assert_int_equal(a->n, b->n);
  for (uint64_t i = 0; i < a->n; i++) {
    switch (a->elem_type) {
    case KILN_GGUF_STRING: {
      kiln_gguf_str x = kiln_gguf_arr_str(ga, a, i), y = kiln_gguf_arr_str(gb, b, i);
      if (x.len != y.len || memcmp(x.ptr, y.ptr, x.len))
        fail_msg("%.*s[%llu] differs", (int)a->key.len, a->key.ptr, (unsigned long long)i);
      break;
    }
    case KILN_GGUF_FLOAT32:
      if (kiln_f32_to_bits(kiln_gguf_arr_f32(a, i)) != kiln_f32_to_bits(kiln_gguf_arr_f32(b, i)))
        fail_msg("f32[%llu] differs", (unsigned long long)i);
      break;
    case KILN_GGUF_INT32:
      if (kiln_gguf_arr_i32(a, i) != kiln_gguf_arr_i32(b, i))
        fail_msg("i32[%llu] differs", (unsigned long long)i);
      break;
    case KILN_GGUF_UINT32:
      if (kiln_gguf_arr_u32(a, i) != kiln_gguf_arr_u32(b, i))
        fail_msg("u32[%llu] differs", (unsigned long long)i);
      break;
    default: {
      size_t es = kiln_gguf_vtype_size(a->elem_type);
      assert_memory_equal(a->arr_data + i * es, b->arr_data + i * es, es);
    }
    }
  }
}

static void test_copy_vocab_llama_spm(void **state) {
  (void)state;
  char *path = kt_model_path("ggml-vocab-llama-spm.gguf");
  if (!path) {
    skip();
    return;
  }
  kiln_gguf *src;
  KT_ASSERT_OK(kiln_gguf_open(path, &src));
  kiln_gguf_writer *w = new_writer();
  KT_ASSERT_OK(kiln_gguf_writer_set_str(w, "general.architecture", "llama"));
  uint64_t copied = 0;
  KT_ASSERT_OK(kiln_gguf_writer_copy_kvs(w, src, "tokenizer.ggml.", &copied));
  assert_int_equal(copied, 10);
  const int64_t ne[2] = {32, 4};
  float v[128];
  for (int i = 0; i < 128; i++) v[i] = frand();
  KT_ASSERT_OK(kiln_gguf_writer_add_tensor_f32(w, "token_embd.weight", KILN_TYPE_Q8_0, 2, ne, v));
  void *buf;
  kiln_gguf *g = write_and_open(w, &buf, NULL);
  assert_int_equal(kiln_gguf_n_kv(g), 11);
  assert_null(kiln_gguf_find_kv(g, "general.name"));
  uint64_t checked = 0;
  for (uint64_t i = 0; i < kiln_gguf_n_kv(src); i++) {
    const kiln_gguf_kv *a = kiln_gguf_kv_at(src, i);
    if (a->key.len < 15 || memcmp(a->key.ptr, "tokenizer.ggml.", 15) != 0) continue;
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)a->key.len, a->key.ptr);
    const kiln_gguf_kv *b = kiln_gguf_find_kv(g, key);
    if (!b) fail_msg("%s not copied", key);
    assert_same_kv(src, a, g, b);
    checked++;
  }
  assert_int_equal(checked, 10);
  const kiln_gguf_kv *tok;
  KT_ASSERT_OK(kiln_gguf_get_arr(g, "tokenizer.ggml.tokens", KILN_GGUF_STRING, &tok));
  assert_int_equal(tok->n, 32000);
  kiln_gguf_close(g);
  free(buf);
  kiln_gguf_writer_free(w);
  kiln_gguf_close(src);
  free(path);
}

/* A vocabulary-only file copied key by key is the same file, byte for
 * byte (same header, same order, no tensors, no padding). */
static void copy_all_is_identical(const char *name) {
  char *path = kt_model_path(name);
  if (!path) {
    skip();
    return;
  }
  kiln_gguf *src;
  KT_ASSERT_OK(kiln_gguf_open(path, &src));
  kiln_gguf_writer *w = new_writer();
  uint64_t copied;
  KT_ASSERT_OK(kiln_gguf_writer_copy_kvs(w, src, "", &copied));
  assert_int_equal(copied, kiln_gguf_n_kv(src));
  void *out;
  size_t out_size, in_size;
  KT_ASSERT_OK(kiln_gguf_writer_write_memory(w, &out, &out_size));
  void *in = read_all(path, &in_size);
  assert_int_equal(out_size, in_size);
  assert_memory_equal(out, in, in_size);
  printf("  %s: %llu keys copied, %zu bytes identical\n", name, (unsigned long long)copied,
         in_size);
  free(in);
  free(out);
  kiln_gguf_writer_free(w);
  kiln_gguf_close(src);
  free(path);
}

static void test_copy_all_llama_spm(void **state) {
  (void)state;
  copy_all_is_identical("ggml-vocab-llama-spm.gguf");
}

static void test_copy_all_qwen2(void **state) {
  (void)state;
  copy_all_is_identical("ggml-vocab-qwen2.gguf");
}

int main(void) {
  /* What the cases read. A case whose file is missing calls skip(), which
   * cmocka counts as a pass; so the program answers 77 (automake's SKIP)
   * when anything is missing, unless a case that could run failed. */
  static const char *const models[] = {
      "ggml-vocab-llama-spm.gguf",
      "ggml-vocab-qwen2.gguf",
  };
  unsigned missing = 0;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
    missing += !kt_have_model(models[i]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_kv_type_round_trips),
      cmocka_unit_test(test_tensors_round_trip),
      cmocka_unit_test(test_alignment_and_version),
      cmocka_unit_test(test_replace_keeps_position),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_write_file_atomic),
      cmocka_unit_test(test_write_file_refuses_non_regular),
      cmocka_unit_test(test_write_file_killed_leaves_nothing),
      cmocka_unit_test(test_copy_vocab_llama_spm),
      cmocka_unit_test(test_copy_all_llama_spm),
      cmocka_unit_test(test_copy_all_qwen2),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  return failed ? 1 : missing ? 77 : 0;
}
