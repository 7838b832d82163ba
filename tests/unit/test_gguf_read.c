/* The GGUF reader on the real model files in $KILN_MODELS_DIR, checked
 * against facts from the independent dumps beside them (<file>.dump.txt):
 * header counts, data offsets, tensor shapes, types and offsets, ε as an
 * exact f32 bit pattern, and min/max/sum of dequantized tensors (F32, F16,
 * Q8_0). Also: the legacy files kiln must refuse (GGUF v1; Q8_0 rows that
 * are not whole blocks), typed-getter errors, and open() errors. Each test
 * skips when its model file is missing. */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/dequant.h"
#include "kiln/gguf.h"
#include "kiln/half.h"
#include "testutil.h"

#define EPS_1E5_BITS 0x3727c5acu /* 1e-5f, dumped as 9.999999747378752e-06 */
#define EPS_1E6_BITS 0x358637bdu /* 1e-6f, dumped as 9.999999974752427e-07 */

static kiln_gguf *open_model(const char *name) {
  char *path = kt_model_path(name);
  if (!path) return NULL;
  kiln_gguf *g = NULL;
  kiln_status st = kiln_gguf_open(path, &g);
  free(path);
  if (st) fail_msg("%s: %s", name, kiln_status_message(st));
  return g;
}

#define OPEN_OR_SKIP(g, name)      \
  kiln_gguf *g = open_model(name); \
  if (!g) {                        \
    skip();                        \
    return;                        \
  }

static void check_tensor(const kiln_gguf *g, const char *name, int n_dims, int64_t ne0, int64_t ne1,
                         kiln_type type, uint64_t offset, uint64_t nbytes) {
  const kiln_gguf_tensor *t = kiln_gguf_find_tensor(g, name);
  if (!t) fail_msg("tensor %s not found", name);
  assert_int_equal(t->name.len, strlen(name));
  assert_memory_equal(t->name.ptr, name, strlen(name));
  assert_int_equal(t->n_dims, n_dims);
  assert_int_equal(t->ne[0], ne0);
  assert_int_equal(t->ne[1], ne1);
  assert_int_equal(t->ne[2], 1);
  assert_int_equal(t->ne[3], 1);
  assert_int_equal(t->type, type);
  assert_int_equal(t->offset, offset);
  assert_int_equal(t->nbytes, nbytes);
}

static void check_f32_bits(const kiln_gguf *g, const char *key, uint32_t bits) {
  float v = 0;
  KT_ASSERT_OK(kiln_gguf_get_f32(g, key, &v));
  if (kiln_f32_to_bits(v) != bits) {
    fail_msg("%s: f32 bits 0x%08x, expected 0x%08x", key, kiln_f32_to_bits(v), bits);
  }
}

static void check_u32(const kiln_gguf *g, const char *key, uint32_t want) {
  uint32_t v = 0;
  KT_ASSERT_OK(kiln_gguf_get_u32(g, key, &v));
  assert_int_equal(v, want);
}

static void check_str(const kiln_gguf *g, const char *key, const char *want) {
  char buf[256];
  KT_ASSERT_OK(kiln_gguf_get_str(g, key, buf, sizeof buf));
  assert_string_equal(buf, want);
}

static void check_arr_str(const kiln_gguf *g, const kiln_gguf_kv *kv, uint64_t i,
                          const char *want) {
  kiln_gguf_str s = kiln_gguf_arr_str(g, kv, i);
  if (s.len != strlen(want) || memcmp(s.ptr, want, s.len) != 0) {
    fail_msg("element %llu is '%.*s', expected '%s'", (unsigned long long)i, (int)s.len, s.ptr,
             want);
  }
}

/* Dequantizes a whole tensor and checks min, max (to the dump's 6
 * significant digits) and the double sum (to its 9). */
static void check_stats(const kiln_gguf *g, const char *name, double min, double max, double sum) {
  const kiln_gguf_tensor *t = kiln_gguf_find_tensor(g, name);
  if (!t) fail_msg("tensor %s not found", name);
  int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
  float *v = malloc((size_t)n * sizeof *v);
  assert_non_null(v);
  KT_ASSERT_OK(kiln_dequantize(t->type, t->data, v, n));
  double mn = INFINITY, mx = -INFINITY, s = 0;
  for (int64_t i = 0; i < n; i++) {
    assert_true(isfinite(v[i]));
    mn = fmin(mn, v[i]);
    mx = fmax(mx, v[i]);
    s += v[i];
  }
  free(v);
  printf("  %s (%s): min %.6g max %.6g sum %.9g\n", name, kiln_type_name(t->type), mn, mx, s);
  if (fabs(mn - min) > 5e-6 * fabs(min) + 1e-9 || fabs(mx - max) > 5e-6 * fabs(max) + 1e-9 ||
      fabs(s - sum) > 1e-6 * fabs(sum) + 1e-6) {
    fail_msg("%s: min %.9g max %.9g sum %.10g, dump says %.9g %.9g %.10g", name, mn, mx, s, min,
             max, sum);
  }
}

/* Bytes the process's malloc holds now, whichever library asked for them
 * (libkiln is a shared library here, out of the counting allocator's
 * sight). */
static int64_t heap_in_use(void) {
  struct mallinfo2 m = mallinfo2();
  return (int64_t)(m.uordblks + m.hblkhd);
}

/* ---- models ---------------------------------------------------------------- */

static void test_stories260k(void **state) {
  (void)state;
  OPEN_OR_SKIP(g, "stories260K.gguf");
  assert_int_equal(kiln_gguf_version(g), 3);
  assert_int_equal(kiln_gguf_n_tensors(g), 48);
  assert_int_equal(kiln_gguf_n_kv(g), 19);
  assert_int_equal(kiln_gguf_alignment(g), 32);
  assert_int_equal(kiln_gguf_data_offset(g), 14176);
  check_tensor(g, "token_embd.weight", 2, 64, 512, KILN_TYPE_F32, 0, 131072);
  check_tensor(g, "blk.0.ffn_down.weight", 2, 172, 64, KILN_TYPE_F32, 355840, 44032);
  check_tensor(g, "output_norm.weight", 1, 64, 1, KILN_TYPE_F32, 131072, 256);
  const kiln_gguf_tensor *t0 = kiln_gguf_tensor_at(g, 0),
                         *fd = kiln_gguf_find_tensor(g, "blk.0.ffn_down.weight");
  assert_ptr_equal((const uint8_t *)fd->data - (const uint8_t *)t0->data, 355840);
  assert_null(kiln_gguf_tensor_at(g, 48));
  assert_null(kiln_gguf_find_tensor(g, "blk.5.attn_q.weight"));

  check_f32_bits(g, "llama.attention.layer_norm_rms_epsilon", EPS_1E5_BITS);
  check_str(g, "general.architecture", "llama");
  check_str(g, "general.name", "llama");
  check_u32(g, "llama.context_length", 2048);
  check_u32(g, "llama.feed_forward_length", 172);
  check_u32(g, "llama.attention.head_count_kv", 4);
  check_u32(g, "tokenizer.ggml.seperator_token_id", 4294967295u);
  float theta = 10000.0f;
  KT_ASSERT_ERR(kiln_gguf_get_f32(g, "llama.rope.freq_base", &theta), KILN_STATUS_NOT_FOUND,
                "stories260K.gguf: key 'llama.rope.freq_base' not found");
  assert_true(theta == 10000.0f); /* left alone on failure */

  const kiln_gguf_kv *tok, *types, *scores;
  KT_ASSERT_OK(kiln_gguf_get_arr(g, "tokenizer.ggml.tokens", KILN_GGUF_STRING, &tok));
  assert_int_equal(tok->n, 512);
  check_arr_str(g, tok, 0, "<unk>");
  check_arr_str(g, tok, 1, "<s>");
  check_arr_str(g, tok, 3, "<0x00>");
  KT_ASSERT_OK(kiln_gguf_get_arr(g, "tokenizer.ggml.token_type", KILN_GGUF_INT32, &types));
  assert_int_equal(kiln_gguf_arr_i32(types, 0), 2);
  assert_int_equal(kiln_gguf_arr_i32(types, 1), 3);
  assert_int_equal(kiln_gguf_arr_i32(types, 3), 6);
  KT_ASSERT_OK(kiln_gguf_get_arr(g, "tokenizer.ggml.scores", KILN_GGUF_FLOAT32, &scores));
  assert_int_equal(scores->n, 512);
  assert_true(kiln_gguf_arr_f32(scores, 0) == 0.0f);

  check_stats(g, "token_embd.weight", -1.2033, 1.32723, -752.367745);
  check_stats(g, "output_norm.weight", 0.972038, 4.42509, 115.952762);
  kiln_gguf_close(g);
}

static void test_getter_errors(void **state) {
  (void)state;
  OPEN_OR_SKIP(g, "stories260K.gguf");
  float f;
  uint32_t u;
  bool b;
  char small[4];
  const kiln_gguf_kv *kv;
  KT_ASSERT_ERR(kiln_gguf_get_f32(g, "llama.context_length", &f), KILN_STATUS_MALFORMED,
                "key 'llama.context_length' has type uint32, expected float32");
  KT_ASSERT_ERR(kiln_gguf_get_u32(g, "general.name", &u), KILN_STATUS_MALFORMED,
                "key 'general.name' has type string, expected an unsigned integer");
  KT_ASSERT_ERR(kiln_gguf_get_bool(g, "general.name", &b), KILN_STATUS_MALFORMED, "expected bool");
  KT_ASSERT_ERR(kiln_gguf_get_str(g, "general.name", small, 4), KILN_STATUS_OUT_OF_RANGE,
                "string of 5 bytes");
  KT_ASSERT_ERR(kiln_gguf_get_arr(g, "tokenizer.ggml.tokens", KILN_GGUF_INT32, &kv),
                KILN_STATUS_MALFORMED, "is an array of string, expected an array of int32");
  KT_ASSERT_ERR(kiln_gguf_get_str(g, "tokenizer.ggml.tokens", small, 4), KILN_STATUS_MALFORMED,
                "expected string");
  double d;
  KT_ASSERT_OK(kiln_gguf_get_f64(g, "llama.attention.layer_norm_rms_epsilon", &d));
  assert_true(d == (double)1e-5f);
  uint64_t u64;
  KT_ASSERT_OK(kiln_gguf_get_u64(g, "llama.block_count", &u64));
  assert_int_equal(u64, 5);
  kiln_gguf_close(g);
}

static void test_llama2_tiny_random_f16(void **state) {
  (void)state;
  OPEN_OR_SKIP(g, "llama-2-tiny-random.gguf");
  assert_int_equal(kiln_gguf_version(g), 3);
  assert_int_equal(kiln_gguf_n_tensors(g), 12);
  assert_int_equal(kiln_gguf_n_kv(g), 18);
  assert_int_equal(kiln_gguf_data_offset(g), 724416);
  check_tensor(g, "token_embd.weight", 2, 8, 32000, KILN_TYPE_F16, 0, 512000);
  check_tensor(g, "blk.0.ffn_down.weight", 2, 32, 8, KILN_TYPE_F16, 513536, 512);
  check_tensor(g, "output.weight", 2, 8, 32000, KILN_TYPE_F16, 514144, 512000);
  check_tensor(g, "output_norm.weight", 1, 8, 1, KILN_TYPE_F32, 514112, 32);
  check_f32_bits(g, "llama.attention.layer_norm_rms_epsilon", EPS_1E5_BITS);
  check_str(g, "general.name", "LLaMA v2");
  check_u32(g, "general.file_type", 1);
  const kiln_gguf_kv *tok;
  KT_ASSERT_OK(kiln_gguf_get_arr(g, "tokenizer.ggml.tokens", KILN_GGUF_STRING, &tok));
  assert_int_equal(tok->n, 32000);
  check_arr_str(g, tok, 2, "</s>");
  check_stats(g, "token_embd.weight", -0.078064, 0.078064, -6.3946982);
  check_stats(g, "blk.0.attn_q.weight", -0.0592041, 0.033905, -0.137176037);
  check_stats(g, "output.weight", -0.078064, 0.078064, -0.919512689);
  check_stats(g, "blk.0.attn_norm.weight", 1, 1, 8);
  kiln_gguf_close(g);
}

static void test_tiny_qwen3_q8_0(void **state) {
  (void)state;
  OPEN_OR_SKIP(g, "tiny-qwen3-q8_0.gguf");
  assert_int_equal(kiln_gguf_version(g), 3);
  assert_int_equal(kiln_gguf_n_tensors(g), 24);
  assert_int_equal(kiln_gguf_n_kv(g), 13);
  assert_int_equal(kiln_gguf_data_offset(g), 1952);
  check_tensor(g, "token_embd.weight", 2, 64, 512, KILN_TYPE_Q8_0, 0, 34816);
  check_tensor(g, "blk.0.attn_k_norm.weight", 1, 16, 1, KILN_TYPE_F32, 48192, 64);
  check_tensor(g, "blk.1.ffn_down.weight", 2, 128, 64, KILN_TYPE_Q8_0, 105728, 8704);
  assert_null(kiln_gguf_find_tensor(g, "output.weight")); /* tied to token_embd */
  check_f32_bits(g, "qwen3.attention.layer_norm_rms_epsilon", EPS_1E6_BITS);
  float theta;
  KT_ASSERT_OK(kiln_gguf_get_f32(g, "qwen3.rope.freq_base", &theta));
  assert_true(theta == 1000000.0f);
  check_u32(g, "qwen3.attention.key_length", 16);
  check_u32(g, "tokenizer.ggml.eos_token_id", 0);
  check_stats(g, "token_embd.weight", -0.219463, 0.207594, 14.433351);
  check_stats(g, "blk.0.attn_output.weight", -0.189669, 0.250469, -2.5691123);
  check_stats(g, "blk.1.ffn_down.weight", -0.191243, 0.180948, -6.28290653);
  check_stats(g, "blk.1.attn_norm.weight", 0.984314, 1.01656, 64.0615562);
  kiln_gguf_close(g);
}

static void test_vocab_qwen2(void **state) {
  (void)state;
  char *path = kt_model_path("ggml-vocab-qwen2.gguf");
  if (!path) {
    skip();
    return;
  }
  /* 300k strings: opening maps the file and walks each string array once
   * to build its offset table, so the heap an open keeps is that table,
   * 8 bytes a string, and a little more; never a copy of the strings
   * (5.9 MB). Measured, not timed. */
  int64_t before = heap_in_use();
  kiln_gguf *g = NULL;
  KT_ASSERT_OK(kiln_gguf_open(path, &g));
  int64_t held = heap_in_use() - before;
  free(path);
  assert_int_equal(kiln_gguf_version(g), 3);
  assert_int_equal(kiln_gguf_n_tensors(g), 0);
  assert_int_equal(kiln_gguf_n_kv(g), 20);
  /* no tensors and no trailing padding: the data section starts past EOF */
  assert_int_equal(kiln_gguf_data_offset(g), 5928704);
  check_f32_bits(g, "qwen2.attention.layer_norm_rms_epsilon", EPS_1E6_BITS);
  check_str(g, "tokenizer.ggml.pre", "qwen2");
  check_u32(g, "tokenizer.ggml.eos_token_id", 151643);
  const kiln_gguf_kv *tok, *merges, *types;
  KT_ASSERT_OK(kiln_gguf_get_arr(g, "tokenizer.ggml.tokens", KILN_GGUF_STRING, &tok));
  KT_ASSERT_OK(kiln_gguf_get_arr(g, "tokenizer.ggml.merges", KILN_GGUF_STRING, &merges));
  KT_ASSERT_OK(kiln_gguf_get_arr(g, "tokenizer.ggml.token_type", KILN_GGUF_INT32, &types));
  assert_int_equal(tok->n, 151936);
  assert_int_equal(merges->n, 151387);
  assert_int_equal(types->n, 151936);
  check_arr_str(g, tok, 0, "!");
  check_arr_str(g, tok, 151643, "<|endoftext|>");
  check_arr_str(g, tok, 151644, "<|im_start|>");
  check_arr_str(g, tok, 151645, "<|im_end|>");
  check_arr_str(g, merges, 0, "\xc4\xa0 \xc4\xa0"); /* "Ġ Ġ" */
  check_arr_str(g, merges, 2, "i n");
  uint64_t n_strings = tok->n + merges->n;
  printf("  ggml-vocab-qwen2.gguf: %llu strings, the open holds %.1f KiB of heap\n",
         (unsigned long long)n_strings, (double)held / 1024);
  if (held > (int64_t)(n_strings * 8 + (1u << 20)))
    fail_msg("the open holds %lld bytes of heap for %llu strings (limit 8 a string + 1 MiB)", (long long)held,
             (unsigned long long)n_strings);
  /* Random access: a million lookups, each checked to lie inside the
   * array's bytes and in order with its neighbour. */
  uint64_t x = 12345;
  for (int i = 0; i < 1000000; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t j = (x >> 33) % (tok->n - 1);
    kiln_gguf_str a = kiln_gguf_arr_str(g, tok, j), b = kiln_gguf_arr_str(g, tok, j + 1);
    if (a.ptr + a.len + 8 != b.ptr)
      fail_msg("token %llu is not followed by %llu", (unsigned long long)j,
               (unsigned long long)j + 1);
  }
  kiln_gguf_close(g);
}

/* ---- files kiln refuses ---------------------------------------------------- */

static void test_v1_refused(void **state) {
  (void)state;
  char *path = kt_model_path("tinyllamas-stories-260k-f32.gguf");
  if (!path) {
    skip();
    return;
  }
  kiln_gguf *g = NULL;
  kiln_status st = kiln_gguf_open(path, &g);
  free(path);
  assert_non_null(st);
  assert_null(g);
  printf("  %s\n", kiln_status_message(st));
  assert_int_equal(kiln_status_code_of(st), KILN_STATUS_UNSUPPORTED);
  assert_non_null(strstr(kiln_status_message(st), "tinyllamas-stories-260k-f32.gguf: byte 4"));
  assert_non_null(strstr(kiln_status_message(st), "GGUF version 1 is not supported"));
  kiln_status_free(st);
}

static void test_q8_0_partial_rows_refused(void **state) {
  (void)state;
  char *path = kt_model_path("tinyllamas-stories-260k-q8_0.gguf");
  if (!path) {
    skip();
    return;
  }
  kiln_gguf *g = NULL;
  kiln_status st = kiln_gguf_open(path, &g);
  free(path);
  assert_non_null(st);
  printf("  %s\n", kiln_status_message(st));
  assert_int_equal(kiln_status_code_of(st), KILN_STATUS_MALFORMED);
  const char *m = kiln_status_message(st);
  assert_non_null(strstr(m, "tinyllamas-stories-260k-q8_0.gguf: byte "));
  assert_non_null(strstr(m, "tensor[6] 'blk.0.ffn_down.weight'"));
  assert_non_null(strstr(m, "ne0 = 172 is not a multiple of the Q8_0 block size 32"));
  kiln_status_free(st);
}

static void test_open_errors(void **state) {
  (void)state;
  kiln_gguf *g = NULL;
  KT_ASSERT_ERR(kiln_gguf_open("/nonexistent/kiln/model.gguf", &g), KILN_STATUS_NOT_FOUND,
                "/nonexistent/kiln/model.gguf: cannot open");
  char *dir = kt_mkdtemp("gguf-open");
  assert_non_null(dir);
  KT_ASSERT_ERR(kiln_gguf_open(dir, &g), KILN_STATUS_IO, "not a regular file");
  char path[4096];
  snprintf(path, sizeof path, "%s/empty.gguf", dir);
  assert_true(kt_write_file(path, "", 0));
  KT_ASSERT_ERR(kiln_gguf_open(path, &g), KILN_STATUS_MALFORMED, "empty.gguf: byte 0: magic");
  snprintf(path, sizeof path, "%s/short.gguf", dir);
  assert_true(kt_write_file(path, "GGUF\3\0\0\0\0", 9));
  KT_ASSERT_ERR(kiln_gguf_open(path, &g), KILN_STATUS_MALFORMED,
                "short.gguf: byte 8: header tensor_count");
  assert_null(g);
  kt_rm_rf(dir);
  free(dir);
}

int main(void) {
  /* What the cases read. A case whose file is missing calls skip(), which
   * cmocka counts as a pass; so the program answers 77 (automake's SKIP)
   * when anything is missing, unless a case that could run failed. */
  static const char *const models[] = {
      "stories260K.gguf",
      "llama-2-tiny-random.gguf",
      "tiny-qwen3-q8_0.gguf",
      "ggml-vocab-qwen2.gguf",
      "tinyllamas-stories-260k-f32.gguf",
      "tinyllamas-stories-260k-q8_0.gguf",
  };
  unsigned missing = 0;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
    missing += !kt_have_model(models[i]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stories260k),
      cmocka_unit_test(test_getter_errors),
      cmocka_unit_test(test_llama2_tiny_random_f16),
      cmocka_unit_test(test_tiny_qwen3_q8_0),
      cmocka_unit_test(test_vocab_qwen2),
      cmocka_unit_test(test_v1_refused),
      cmocka_unit_test(test_q8_0_partial_rows_refused),
      cmocka_unit_test(test_open_errors),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  return failed ? 1 : missing ? 77 : 0;
}
