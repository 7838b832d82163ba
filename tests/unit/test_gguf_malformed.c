/* The GGUF reader against hostile and broken files, each crafted here byte
 * by byte (gguf_testbuf.h), never a committed model file.
 *
 * Every case must be rejected with the right status code and a message that
 * names the file, a byte offset and the field, key or tensor; with a peak
 * heap of at most 64 MiB; and with a bounded number of allocations, both
 * measured, never timed: the reader is compiled into this program and
 * linked with the counting allocator (tests/heap_count.h), which sees every
 * allocation it makes (the first test proves the count is real). A header
 * that claims more entries than its file holds at its first bad entry must
 * cost almost nothing: the tables grow as entries parse. Each input is copied into a heap buffer of
 * exactly its size, so the sanitizer build (test_gguf_malformed_san, ASan
 * + UBSan) catches any read past the end. */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap_count.h"
#include "kiln/gguf.h"
#include "testutil.h"
#include "gguf_testbuf.h"

#define LIMIT_BYTES (64ull << 20)
/* The work an open may do, counted in allocation calls: the tables grow
 * geometrically and each entry of the file takes at least 8 bytes, so an
 * open of `size` bytes that allocates more than this many times is doing
 * work the file does not hold. */
#define LIMIT_CALLS(size) (64u + (size) / 8u)
#define NAME "crafted.gguf"

/* The heap the last open_measured() cost at its peak, and its allocation
 * calls, for the log. */
static uint64_t last_peak, last_calls;

/* Opens an exact-size heap copy of data[0..size), measuring its peak heap,
 * which must stay within LIMIT_BYTES, and its allocation calls, which must
 * stay within LIMIT_CALLS(size). On success *out_copy holds the bytes the
 * kiln_gguf uses: free it after kiln_gguf_close(). */
static kiln_status open_measured(const void *data, size_t size, kiln_gguf **out, void **out_copy) {
  void *copy = malloc(size ? size : 1);
  assert_non_null(copy);
  if (size) memcpy(copy, data, size);
  heap_count_mark();
  kiln_status st = kiln_gguf_open_memory(copy, size, NAME, out);
  last_peak = heap_count_peak_since_mark();
  last_calls = heap_count_calls_since_mark();
  if (last_peak > LIMIT_BYTES)
    fail_msg("opening %zu bytes took %" PRIu64 " bytes of heap at its peak (limit %llu)", size,
             last_peak, LIMIT_BYTES);
  if (last_calls > LIMIT_CALLS(size))
    fail_msg("opening %zu bytes made %" PRIu64 " allocation calls (limit %zu)", size, last_calls,
             LIMIT_CALLS(size));
  if (st) {
    free(copy);
    copy = NULL;
  }
  *out_copy = copy;
  return st;
}

/* Asserts that data[0..size) is refused with `code` and a message naming
 * the file, a byte offset, and containing each non-NULL needle; prints the
 * message, so the log shows every rejection. */
static void expect_reject(const char *what, const void *data, size_t size, kiln_status_code code,
                          const char *needle1, const char *needle2) {
  kiln_gguf *g = NULL;
  void *copy;
  kiln_status st = open_measured(data, size, &g, &copy);
  if (!st) {
    kiln_gguf_close(g);
    free(copy);
    fail_msg("%s: accepted, expected %s", what, kiln_status_code_name(code));
  }
  const char *msg = kiln_status_message(st);
  printf("  %-28s %8.1f KiB %6" PRIu64 " allocs  %s: %s\n", what, (double)last_peak / 1024, last_calls,
         kiln_status_code_name(kiln_status_code_of(st)), msg);
  if (kiln_status_code_of(st) != code) {
    fail_msg("%s: code %s, expected %s (%s)", what, kiln_status_code_name(kiln_status_code_of(st)),
             kiln_status_code_name(code), msg);
  }
  if (strncmp(msg, NAME ": ", strlen(NAME) + 2) != 0)
    fail_msg("%s: message does not start with the file name: %s", what, msg);
  if (!strstr(msg, ": byte ")) fail_msg("%s: message names no byte offset: %s", what, msg);
  if (needle1 && !strstr(msg, needle1))
    fail_msg("%s: message lacks \"%s\": %s", what, needle1, msg);
  if (needle2 && !strstr(msg, needle2))
    fail_msg("%s: message lacks \"%s\": %s", what, needle2, msg);
  kiln_status_free(st);
}

#define REJECT(b, code, n1, n2) expect_reject(__func__, (b)->p, (b)->n, code, n1, n2)

/* GGUF value types and ggml type ids, spelled as gguf.md numbers them. */
enum {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STR = 8,
  ARR = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12
};
enum { T_F32 = 0, T_F16 = 1, T_Q8_0 = 8 };

/* ---- the count is real ---------------------------------------------------- */

/* Where the self-test's blocks go, so no compiler can drop the calls. */
static void *volatile sink[4];

static void test_heap_count_is_real(void **state) {
  (void)state;
  heap_count_mark();
  sink[0] = malloc(96u << 20);
  sink[1] = calloc(1u << 20, 8);
  sink[2] = strdup("a string of the reader's");
  assert_non_null(sink[0]);
  assert_non_null(sink[1]);
  assert_non_null(sink[2]);
  assert_int_equal(heap_count_calls_since_mark(), 3);
  uint64_t peak = heap_count_peak_since_mark();
  if (peak < (104u << 20))
    fail_msg("96 + 8 MiB allocated, the count saw %" PRIu64 " bytes: it is not counting", peak);
  sink[3] = realloc(sink[0], 1u << 20); /* shrinks: live drops, the peak stays */
  assert_non_null(sink[3]);
  assert_true(heap_count_live() < (int64_t)(96u << 20));
  assert_true(heap_count_peak_since_mark() >= peak);
  assert_int_equal(heap_count_calls_since_mark(), 4);
  for (int i = 1; i < 4; i++) free(sink[i]);
  heap_count_mark();
  assert_int_equal(heap_count_peak_since_mark(), 0);
  assert_int_equal(heap_count_calls_since_mark(), 0);
}

/* ---- the header ------------------------------------------------------------ */

static void test_kv_count_2_63(void **state) {
  (void)state;
  tb *b = tb_new();
  tb_header(b, 3, 0, 1ull << 63);
  tb_fill_to(b, 1024);
  REJECT(b, KILN_STATUS_MALFORMED, "metadata_kv_count", "9223372036854775808");
  tb_free(b);
}

static void test_tensor_count_2_63(void **state) {
  (void)state;
  tb *b = tb_new();
  tb_header(b, 3, 1ull << 63, 0);
  tb_fill_to(b, 1024);
  REJECT(b, KILN_STATUS_MALFORMED, "tensor_count", "9223372036854775808");
  tb_free(b);
}

/* A tensor_count that fits the file but not what the key/values leave. */
static void test_tensor_count_after_kvs(void **state) {
  (void)state;
  tb *b = tb_new();
  tb_header(b, 3, 20, 1);
  tb_key(b, "general.name", STR);
  tb_u64(b, 600);
  tb_fill_to(b, 24 + 8 + 12 + 4 + 8 + 600 + 100); /* 100 bytes left: 3 infos at most */
  REJECT(b, KILN_STATUS_MALFORMED, "tensor_count: 20 tensor infos", "left after the key/values");
  tb_free(b);
}

static void test_versions_and_magic(void **state) {
  (void)state;
  tb *b = tb_new();
  tb_header(b, 1, 0, 0);
  tb_fill_to(b, 64);
  REJECT(b, KILN_STATUS_UNSUPPORTED, "GGUF version 1", "32-bit");
  tb_free(b);

  b = tb_new();
  tb_header(b, 4, 0, 0);
  REJECT(b, KILN_STATUS_UNSUPPORTED, "version 4", NULL);
  tb_free(b);

  b = tb_new(); /* a big-endian file's version */
  tb_bytes(b, "GGUF", 4);
  tb_bytes(b, "\0\0\0\3", 4);
  tb_u64(b, 0);
  tb_u64(b, 0);
  REJECT(b, KILN_STATUS_UNSUPPORTED, "big-endian", NULL);
  tb_free(b);

  b = tb_new();
  tb_bytes(b, "GGML", 4);
  tb_fill_to(b, 64);
  REJECT(b, KILN_STATUS_MALFORMED, "magic", "not a GGUF file");
  tb_free(b);

  b = tb_new();
  tb_bytes(b, "version https://git-lfs.github.com/spec/v1\n", 43);
  REJECT(b, KILN_STATUS_MALFORMED, "Git LFS", NULL);
  tb_free(b);

  b = tb_new();
  REJECT(b, KILN_STATUS_MALFORMED, "magic", "0 bytes");
  tb_bytes(b, "GGU", 3);
  REJECT(b, KILN_STATUS_MALFORMED, "magic", "3 bytes");
  tb_free(b);
}

/* ---- key/values ------------------------------------------------------------ */

static void test_key_length_0xffffffffffff(void **state) {
  (void)state;
  tb *b = tb_new();
  tb_header(b, 3, 0, 1);
  tb_u64(b, 0xFFFFFFFFFFFFull);
  tb_fill_to(b, 1024);
  REJECT(b, KILN_STATUS_MALFORMED, "kv[0] key", "string length 281474976710655");
  tb_free(b);
}

static void test_array_u32_2_62(void **state) {
  (void)state;
  tb *b = tb_new();
  tb_header(b, 3, 0, 1);
  tb_key(b, "big", ARR);
  tb_u32(b, U32);
  tb_u64(b, 1ull << 62);
  tb_fill_to(b, 1024);
  REJECT(b, KILN_STATUS_MALFORMED, "kv[0] 'big'", "array of 4611686018427387904 uint32");
  tb_free(b);

  b = tb_new(); /* strings: the offset table must not be sized from this count */
  tb_header(b, 3, 0, 1);
  tb_key(b, "tokenizer.ggml.tokens", ARR);
  tb_u32(b, STR);
  tb_u64(b, 1ull << 62);
  tb_fill_to(b, 1024);
  REJECT(b, KILN_STATUS_MALFORMED, "kv[0] 'tokenizer.ggml.tokens'", "strings does not fit");
  tb_free(b);
}

static void test_string_one_byte_past_end(void **state) {
  (void)state;
  tb *b = tb_new(); /* a value */
  tb_header(b, 3, 0, 1);
  tb_key(b, "general.name", STR);
  tb_u64(b, 11);
  tb_bytes(b, "0123456789", 10);
  REJECT(b, KILN_STATUS_MALFORMED, "kv[0] 'general.name' value (string)",
         "string length 11 exceeds the 10 bytes left");
  tb_free(b);

  b = tb_new(); /* a key */
  tb_header(b, 3, 0, 1);
  tb_u64(b, 20);
  tb_bytes(b, "0123456789abcdefghi", 19);
  REJECT(b, KILN_STATUS_MALFORMED, "kv[0] key", "string length 20 exceeds the 19 bytes left");
  tb_free(b);

  b = tb_new(); /* an element of a string array */
  tb_header(b, 3, 0, 1);
  tb_key(b, "tokenizer.ggml.tokens", ARR);
  tb_u32(b, STR);
  tb_u64(b, 2);
  tb_str(b, "ok");
  tb_u64(b, 3);
  tb_bytes(b, "no", 2);
  REJECT(b, KILN_STATUS_MALFORMED, "'tokenizer.ggml.tokens' element 1", "string length 3");
  tb_free(b);
}

static void test_bad_values(void **state) {
  (void)state;
  tb *b = tb_new();
  tb_header(b, 3, 0, 1);
  tb_key(b, "weird", 13);
  tb_u32(b, 0);
  REJECT(b, KILN_STATUS_MALFORMED, "kv[0] 'weird'", "value type 13");
  tb_free(b);

  b = tb_new();
  tb_header(b, 3, 0, 1);
  tb_key(b, "flag", BOOL);
  tb_u8(b, 2);
  REJECT(b, KILN_STATUS_MALFORMED, "kv[0] 'flag'", "bool value is 2");
  tb_free(b);

  b = tb_new();
  tb_header(b, 3, 0, 1);
  tb_key(b, "flags", ARR);
  tb_u32(b, BOOL);
  tb_u64(b, 3);
  tb_u8(b, 1);
  tb_u8(b, 0);
  tb_u8(b, 7);
  REJECT(b, KILN_STATUS_MALFORMED, "kv[0] 'flags'", "bool element 2 is 7");
  tb_free(b);

  b = tb_new();
  tb_header(b, 3, 0, 1);
  tb_key(b, "nested", ARR);
  tb_u32(b, ARR);
  tb_u64(b, 1);
  tb_u32(b, U8);
  tb_u64(b, 1);
  tb_u8(b, 0);
  REJECT(b, KILN_STATUS_UNSUPPORTED, "kv[0] 'nested'", "arrays of arrays");
  tb_free(b);

  b = tb_new();
  tb_header(b, 3, 0, 1);
  tb_key(b, "arr", ARR);
  tb_u32(b, 99);
  tb_u64(b, 0);
  REJECT(b, KILN_STATUS_MALFORMED, "kv[0] 'arr'", "element type 99");
  tb_free(b);

  b = tb_new(); /* a key over gguf.md's 65535-byte limit */
  tb_header(b, 3, 0, 1);
  char *longkey = malloc(70000);
  assert_non_null(longkey);
  memset(longkey, 'k', 69999);
  longkey[69999] = 0;
  tb_key(b, longkey, U8);
  tb_u8(b, 1);
  free(longkey);
  REJECT(b, KILN_STATUS_MALFORMED, "kv[0] key", "65535");
  tb_free(b);

  b = tb_new(); /* binary junk in a key is shown escaped */
  tb_header(b, 3, 0, 2);
  tb_key(b, "a\x01\xff", U8);
  tb_u8(b, 1);
  tb_key(b, "a\x01\xff", U8);
  tb_u8(b, 1);
  REJECT(b, KILN_STATUS_MALFORMED, "kv[1] 'a\\x01\\xff'", "duplicate key");
  tb_free(b);
}

static void test_duplicates(void **state) {
  (void)state;
  tb *b = tb_new();
  tb_header(b, 3, 0, 3);
  tb_key(b, "general.name", STR);
  tb_str(b, "a");
  tb_key(b, "general.architecture", STR);
  tb_str(b, "llama");
  tb_key(b, "general.name", STR);
  tb_str(b, "b");
  REJECT(b, KILN_STATUS_MALFORMED, "kv[2] 'general.name'", "duplicate key (kv[0]");
  tb_free(b);

  b = tb_new();
  tb_header(b, 3, 2, 0);
  uint64_t ne[1] = {8};
  tb_tensor(b, "w", 1, ne, T_F32, 0);
  tb_tensor(b, "w", 1, ne, T_F32, 32);
  tb_pad(b, 32);
  tb_fill_to(b, b->n + 64);
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[1] 'w'", "duplicate tensor name");
  tb_free(b);
}

/* ---- general.alignment ----------------------------------------------------- */

static void alignment_file(tb *b, uint32_t vtype, uint64_t value) {
  tb_header(b, 3, 1, 1);
  tb_key(b, "general.alignment", vtype);
  if (vtype == U64)
    tb_u64(b, value);
  else
    tb_u32(b, (uint32_t)value);
  uint64_t ne[1] = {8};
  tb_tensor(b, "w", 1, ne, T_F32, 0);
  tb_pad(b, 32);
  tb_fill_to(b, b->n + 64);
}

static void test_alignment_rejected(void **state) {
  (void)state;
  tb *b = tb_new();
  alignment_file(b, U32, 0);
  REJECT(b, KILN_STATUS_MALFORMED, "'general.alignment'", "is 0, must be a non-zero multiple of 8");
  tb_free(b);
  b = tb_new();
  alignment_file(b, U32, 12);
  REJECT(b, KILN_STATUS_MALFORMED, "'general.alignment'",
         "is 12, must be a non-zero multiple of 8");
  tb_free(b);
  b = tb_new();
  alignment_file(b, U64, 32);
  REJECT(b, KILN_STATUS_MALFORMED, "'general.alignment'", "type uint64, must be uint32");
  tb_free(b);
}

/* A valid file with alignment 64: the data section and every tensor start
 * on 64-byte boundaries, and the bytes come back. */
static void test_alignment_64_reads(void **state) {
  (void)state;
  tb *b = tb_new();
  tb_header(b, 3, 2, 2);
  tb_key(b, "general.alignment", U32);
  tb_u32(b, 64);
  tb_key(b, "general.name", STR);
  tb_str(b, "aligned"); /* header end is not a multiple of 64 */
  uint64_t ne0[1] = {3}, ne1[2] = {2, 1};
  tb_tensor(b, "a", 1, ne0, T_F32, 0);
  tb_tensor(b, "b", 2, ne1, T_F32, 64);
  size_t info_end = b->n;
  tb_pad(b, 64);
  size_t data_start = b->n;
  assert_true(data_start > info_end);
  tb_f32(b, 1.5f);
  tb_f32(b, -2.25f);
  tb_f32(b, 3.0f);
  tb_pad(b, 64);
  tb_f32(b, 7.0f);
  tb_f32(b, -8.5f);

  kiln_gguf *g = NULL;
  void *copy;
  KT_ASSERT_OK(open_measured(b->p, b->n, &g, &copy));
  assert_int_equal(kiln_gguf_alignment(g), 64);
  assert_int_equal(kiln_gguf_data_offset(g), data_start);
  assert_int_equal(kiln_gguf_data_offset(g) % 64, 0);
  const kiln_gguf_tensor *ta = kiln_gguf_find_tensor(g, "a"), *tbt = kiln_gguf_find_tensor(g, "b");
  assert_non_null(ta);
  assert_non_null(tbt);
  assert_int_equal(tbt->offset, 64);
  assert_int_equal(ta->nbytes, 12);
  assert_int_equal(tbt->nbytes, 8);
  assert_int_equal(tbt->n_dims, 2);
  assert_int_equal(tbt->ne[0], 2);
  assert_int_equal(tbt->ne[1], 1);
  assert_ptr_equal((const uint8_t *)ta->data, (const uint8_t *)copy + data_start);
  assert_ptr_equal((const uint8_t *)tbt->data, (const uint8_t *)copy + data_start + 64);
  float v[3];
  memcpy(v, ta->data, 12);
  assert_true(v[0] == 1.5f && v[1] == -2.25f && v[2] == 3.0f);
  memcpy(v, tbt->data, 8);
  assert_true(v[0] == 7.0f && v[1] == -8.5f);
  kiln_gguf_close(g);
  free(copy);

  /* and the same tensor offset at alignment 32 would be unaligned at 64 */
  b->n = info_end - 8; /* rewrite the last tensor's offset to 32 */
  b->n_marks = 0;
  tb_u64(b, 32);
  tb_pad(b, 64);
  tb_fill_to(b, b->n + 128);
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[1] 'b' offset", "not a multiple of the alignment 64");
  tb_free(b);
}

/* ---- tensor infos ---------------------------------------------------------- */

/* One tensor info, then padding and `data_bytes` of data. */
static tb *one_tensor(uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset,
                      size_t data_bytes) {
  tb *b = tb_new();
  tb_header(b, 3, 1, 0);
  tb_tensor(b, "blk.0.ffn_down.weight", n_dims, ne, type, offset);
  tb_pad(b, 32);
  tb_fill_to(b, b->n + data_bytes);
  return b;
}

static void test_byte_size_wraps(void **state) {
  (void)state;
  /* 4 * 1073741823 * 1073741825 = 2^62 - 4 elements (fits), times 4 bytes
   * = 2^64 - 16: wraps */
  uint64_t ne[4] = {4, 1073741823, 1073741825, 1};
  tb *b = one_tensor(4, ne, T_F32, 0, 1024);
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[0] 'blk.0.ffn_down.weight'",
         "byte size of F32 ne = [4, 1073741823, 1073741825, 1] overflows 64-bit sizes");
  tb_free(b);

  /* 2^62 elements (fits) of 4 bytes: 2^64, past even uint64 */
  uint64_t ne1[4] = {4, 1ull << 30, 1ull << 30, 1};
  b = one_tensor(4, ne1, T_F32, 0, 1024);
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[0] 'blk.0.ffn_down.weight'", "overflows 64-bit sizes");
  tb_free(b);

  uint64_t ne2[4] = {1ull << 32, 1ull << 32, 1, 1};
  b = one_tensor(2, ne2, T_F32, 0, 1024);
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[0] 'blk.0.ffn_down.weight'", "element count");
  tb_free(b);

  uint64_t ne3[1] = {1ull << 63};
  b = one_tensor(1, ne3, T_F32, 0, 64);
  REJECT(b, KILN_STATUS_MALFORMED, "ne[0]", "over 2^63-1");
  tb_free(b);
}

static void test_zero_dimension(void **state) {
  (void)state;
  uint64_t ne[2] = {4, 0};
  tb *b = one_tensor(2, ne, T_F32, 0, 64);
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[0] 'blk.0.ffn_down.weight'", "ne[1] is 0");
  tb_free(b);
}

static void test_n_dims(void **state) {
  (void)state;
  uint64_t ne[5] = {1, 1, 1, 1, 1};
  tb *b = one_tensor(5, ne, T_F32, 0, 64);
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[0] 'blk.0.ffn_down.weight'", "n_dims is 5");
  tb_free(b);

  b = tb_new(); /* 0xFFFFFFFF dims, and no room for them */
  tb_header(b, 3, 1, 0);
  tb_str(b, "t");
  tb_u32(b, 0xFFFFFFFFu);
  tb_fill_to(b, 1024);
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[0] 't'", "n_dims is 4294967295");
  tb_free(b);

  b = one_tensor(0, ne, T_F32, 0, 64);
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[0] 'blk.0.ffn_down.weight'", "n_dims is 0");
  tb_free(b);
}

static void test_tensor_types(void **state) {
  (void)state;
  uint64_t ne[1] = {256};
  tb *b = one_tensor(1, ne, 42, 0, 1024);
  REJECT(b, KILN_STATUS_UNSUPPORTED, "tensor[0] 'blk.0.ffn_down.weight'", "type id 42");
  tb_free(b);

  b = one_tensor(1, ne, 11, 0, 1024);
  REJECT(b, KILN_STATUS_UNSUPPORTED, "tensor[0] 'blk.0.ffn_down.weight'", "type id 11 (ggml Q3_K)");
  tb_free(b);

  b = one_tensor(1, ne, 0xFFFFFFFFu, 0, 1024);
  REJECT(b, KILN_STATUS_UNSUPPORTED, "tensor[0] 'blk.0.ffn_down.weight'", "type id 4294967295");
  tb_free(b);

  /* ne0 = 172 Q8_0: not a whole number of 32-value blocks (the legacy
   * tinyllamas file's ffn_down) */
  uint64_t ne2[2] = {172, 64};
  b = one_tensor(2, ne2, T_Q8_0, 0, 11696);
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[0] 'blk.0.ffn_down.weight'",
         "ne0 = 172 is not a multiple of the Q8_0 block size 32");
  tb_free(b);

  /* ne0 = 128 Q5_K (type 13): half a 256-value super-block */
  uint64_t ne5[2] = {128, 4};
  b = one_tensor(2, ne5, 13, 0, 1024);
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[0] 'blk.0.ffn_down.weight'",
         "ne0 = 128 is not a multiple of the Q5_K block size 256");
  tb_free(b);
}

static void test_data_past_end(void **state) {
  (void)state;
  uint64_t ne[1] = {8}; /* 32 bytes, 31 present */
  tb *b = one_tensor(1, ne, T_F32, 0, 31);
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[0] 'blk.0.ffn_down.weight' offset",
         "runs past the end of the file");
  tb_free(b);

  b = one_tensor(1, ne, T_F32, 0xFFFFFFFFFFFFFFE0ull, 64); /* aligned, but the sum wraps */
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[0] 'blk.0.ffn_down.weight' offset",
         "runs past the end of the file");
  tb_free(b);

  b = one_tensor(1, ne, T_F32, 4, 64);
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[0] 'blk.0.ffn_down.weight' offset",
         "offset: 4 is not a multiple of the alignment 32");
  tb_free(b);

  b = tb_new(); /* a tensor name over gguf.md's 64 bytes */
  tb_header(b, 3, 1, 0);
  tb_tensor(b, "an.extremely.long.tensor.name.that.goes.on.and.on.past.sixty.four.bytes", 1, ne,
            T_F32, 0);
  tb_pad(b, 32);
  tb_fill_to(b, b->n + 32);
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[0] name", "limit of 64 bytes");
  tb_free(b);
}

/* Two tensors' data may not share a byte; touching is fine. */
static tb *two_tensors(uint64_t n0, uint64_t off0, uint64_t n1, uint64_t off1, size_t data) {
  tb *b = tb_new();
  tb_header(b, 3, 2, 0);
  tb_tensor(b, "blk.0.attn_q.weight", 1, &n0, T_F32, off0);
  tb_tensor(b, "blk.0.attn_k.weight", 1, &n1, T_F32, off1);
  tb_pad(b, 32);
  tb_fill_to(b, b->n + data);
  return b;
}

static void test_overlapping_tensors(void **state) {
  (void)state;
  tb *b = two_tensors(8, 0, 8, 0, 64); /* the same 32 bytes */
  REJECT(b, KILN_STATUS_MALFORMED,
         "tensor[1] 'blk.0.attn_k.weight' offset: data [0, 32) overlaps tensor[0] "
         "'blk.0.attn_q.weight' data [0, 32)",
         "may not share bytes");
  tb_free(b);
  b = two_tensors(16, 0, 8, 32, 64); /* the second inside the first */
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[1] 'blk.0.attn_k.weight' offset: data [32, 64)",
         "overlaps tensor[0] 'blk.0.attn_q.weight' data [0, 64)");
  tb_free(b);
  b = two_tensors(16, 32, 16, 0, 96); /* listed out of order, overlapping by 32 bytes */
  REJECT(b, KILN_STATUS_MALFORMED, "tensor[0] 'blk.0.attn_q.weight' offset: data [32, 96)",
         "overlaps tensor[1] 'blk.0.attn_k.weight' data [0, 64)");
  tb_free(b);

  b = two_tensors(8, 32, 8, 0, 64); /* touching, out of order: fine */
  kiln_gguf *g;
  void *copy;
  KT_ASSERT_OK(open_measured(b->p, b->n, &g, &copy));
  assert_int_equal(kiln_gguf_n_tensors(g), 2);
  kiln_gguf_close(g);
  free(copy);
  tb_free(b);
}

/* ---- claimed counts ----------------------------------------------------- */

/* A header claims as many entries as its file could hold and the first one
 * is malformed. The tables were once sized from the claim (a 16 MiB file
 * cost 110.8 MiB of heap before its rejection); they grow as entries parse,
 * so neither the peak nor the allocation calls may grow with the file. */
#define CLAIM_PEAK_LIMIT (256u << 10)
#define CLAIM_CALLS_LIMIT 32u

static void expect_cheap_reject(const char *what, tb *b, const char *needle1,
                                const char *needle2) {
  expect_reject(what, b->p, b->n, KILN_STATUS_MALFORMED, needle1, needle2);
  if (last_peak > CLAIM_PEAK_LIMIT)
    fail_msg("%s: %zu-byte file: %" PRIu64 " bytes of heap at the peak (limit %u)", what, b->n,
             last_peak, CLAIM_PEAK_LIMIT);
  if (last_calls > CLAIM_CALLS_LIMIT)
    fail_msg("%s: %zu-byte file: %" PRIu64 " allocation calls (limit %u)", what, b->n, last_calls,
             CLAIM_CALLS_LIMIT);
}

static void test_claimed_counts_cost_nothing(void **state) {
  (void)state;
  static const size_t mib[] = {1, 10, 16};
  for (size_t k = 0; k < sizeof mib / sizeof mib[0]; k++) {
    size_t size = mib[k] << 20;
    char what[64];

    tb *b = tb_new(); /* key/values: each at least 13 bytes */
    tb_header(b, 3, 0, (size - 24) / 13);
    tb_key(b, "general.name", 13); /* no such value type */
    tb_fill_to(b, size);
    snprintf(what, sizeof what, "%zu MiB of claimed kvs", mib[k]);
    expect_cheap_reject(what, b, "kv[0] 'general.name'", "value type 13");
    tb_free(b);

    b = tb_new(); /* tensor infos: each at least 32 bytes */
    tb_header(b, 3, (size - 24) / 32, 0);
    tb_str(b, "token_embd.weight");
    tb_u32(b, 9); /* n_dims */
    tb_fill_to(b, size);
    snprintf(what, sizeof what, "%zu MiB of claimed tensors", mib[k]);
    expect_cheap_reject(what, b, "tensor[0] 'token_embd.weight'", "n_dims is 9");
    tb_free(b);

    b = tb_new(); /* string elements: each at least 8 bytes */
    tb_header(b, 3, 0, 1);
    tb_key(b, "tokenizer.ggml.tokens", ARR);
    tb_u32(b, STR);
    tb_u64(b, (size - 24 - 8 - 21 - 4 - 4 - 8) / 8);
    tb_u64(b, 1ull << 40); /* element 0's length: past the end */
    tb_fill_to(b, size);
    snprintf(what, sizeof what, "%zu MiB of claimed strings", mib[k]);
    expect_cheap_reject(what, b, "'tokenizer.ggml.tokens' element 0", "exceeds");
    tb_free(b);
  }
}

/* ---- a valid file, whole and cut at every boundary ------------------------- */

/* A small file with every kind of field, its last tensor ending at EOF. */
static tb *valid_file(void) {
  tb *b = tb_new();
  tb_header(b, 3, 3, 7);
  tb_key(b, "general.architecture", STR);
  tb_str(b, "llama");
  tb_key(b, "general.alignment", U32);
  tb_u32(b, 32);
  tb_key(b, "tokenizer.ggml.tokens", ARR);
  tb_u32(b, STR);
  tb_u64(b, 3);
  tb_str(b, "<s>");
  tb_str(b, "");
  tb_str(b, "hello");
  tb_key(b, "tokenizer.ggml.scores", ARR);
  tb_u32(b, F32);
  tb_u64(b, 3);
  tb_f32(b, 0.0f);
  tb_f32(b, -1.5f);
  tb_f32(b, -2.5f);
  tb_key(b, "llama.attention.layer_norm_rms_epsilon", F32);
  tb_f32(b, 1e-5f);
  tb_key(b, "tokenizer.ggml.add_bos_token", BOOL);
  tb_u8(b, 1);
  tb_key(b, "x.neg", I16);
  tb_u16(b, (uint16_t)-300);
  uint64_t ne_a[2] = {4, 2}, ne_b[1] = {32}, ne_c[1] = {2};
  tb_tensor(b, "a", 2, ne_a, T_F32, 0);   /* 32 bytes */
  tb_tensor(b, "b", 1, ne_b, T_Q8_0, 32); /* 34 bytes */
  tb_tensor(b, "c", 1, ne_c, T_F16, 96);  /* 4 bytes, ends the file */
  tb_pad(b, 32);
  for (int i = 0; i < 8; i++) tb_f32(b, (float)i - 3.5f);
  tb_u16(b, 0x3800); /* Q8_0 d = 0.5 */
  for (int i = 0; i < 32; i++) tb_u8(b, (uint8_t)(i * 7 - 100));
  tb_pad(b, 32);
  tb_u16(b, 0x3c00); /* F16 1.0 */
  tb_u16(b, 0xc000); /* F16 -2.0 */
  return b;
}

static void test_valid_file_reads(void **state) {
  (void)state;
  tb *b = valid_file();
  kiln_gguf *g = NULL;
  void *copy;
  KT_ASSERT_OK(open_measured(b->p, b->n, &g, &copy));
  assert_int_equal(kiln_gguf_version(g), 3);
  assert_int_equal(kiln_gguf_n_kv(g), 7);
  assert_int_equal(kiln_gguf_n_tensors(g), 3);
  char s[16];
  KT_ASSERT_OK(kiln_gguf_get_str(g, "general.architecture", s, sizeof s));
  assert_string_equal(s, "llama");
  const kiln_gguf_kv *kv;
  KT_ASSERT_OK(kiln_gguf_get_arr(g, "tokenizer.ggml.tokens", KILN_GGUF_STRING, &kv));
  assert_int_equal(kv->n, 3);
  kiln_gguf_str t2 = kiln_gguf_arr_str(g, kv, 2), t1 = kiln_gguf_arr_str(g, kv, 1);
  assert_int_equal(t2.len, 5);
  assert_memory_equal(t2.ptr, "hello", 5);
  assert_int_equal(t1.len, 0);
  KT_ASSERT_OK(kiln_gguf_get_arr(g, "tokenizer.ggml.scores", KILN_GGUF_FLOAT32, &kv));
  assert_true(kiln_gguf_arr_f32(kv, 1) == -1.5f);
  float eps;
  KT_ASSERT_OK(kiln_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps));
  assert_true(eps == 1e-5f);
  int64_t neg;
  KT_ASSERT_OK(kiln_gguf_get_i64(g, "x.neg", &neg));
  assert_int_equal(neg, -300);
  uint32_t u;
  KT_ASSERT_ERR(kiln_gguf_get_u32(g, "x.neg", &u), KILN_STATUS_OUT_OF_RANGE, "-300");
  const kiln_gguf_tensor *tc = kiln_gguf_find_tensor(g, "c");
  assert_non_null(tc);
  assert_ptr_equal((const uint8_t *)tc->data + tc->nbytes, (const uint8_t *)copy + b->n);
  printf("  valid file of %zu bytes opens with %.1f KiB of heap, %" PRIu64 " allocation calls\n", b->n,
         (double)last_peak / 1024, last_calls);
  kiln_gguf_close(g);
  free(copy);
  tb_free(b);
}

/* Every prefix that ends at a field boundary, and every other prefix too,
 * must be refused cleanly: the file's last tensor ends at EOF, so no
 * prefix is a valid file. */
static void test_truncated_at_every_boundary(void **state) {
  (void)state;
  tb *b = valid_file();
  size_t n_bound = 0;
  for (size_t m = 0; m < b->n_marks; m++) {
    size_t cut = b->marks[m];
    if (cut >= b->n) continue;
    char what[64];
    snprintf(what, sizeof what, "cut at field end %zu", cut);
    expect_reject(what, b->p, cut, KILN_STATUS_MALFORMED, NULL, NULL);
    n_bound++;
  }
  assert_true(n_bound > 40);
  /* and every byte in between, quietly */
  for (size_t cut = 0; cut < b->n; cut++) {
    kiln_gguf *g = NULL;
    void *copy;
    kiln_status st = open_measured(b->p, cut, &g, &copy);
    if (!st) fail_msg("prefix of %zu bytes accepted", cut);
    assert_int_equal(kiln_status_code_of(st), KILN_STATUS_MALFORMED);
    assert_non_null(strstr(kiln_status_message(st), ": byte "));
    kiln_status_free(st);
  }
  printf("  %zu field boundaries and all %zu prefixes refused\n", n_bound, b->n);
  tb_free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_heap_count_is_real),
      cmocka_unit_test(test_kv_count_2_63),
      cmocka_unit_test(test_tensor_count_2_63),
      cmocka_unit_test(test_tensor_count_after_kvs),
      cmocka_unit_test(test_versions_and_magic),
      cmocka_unit_test(test_key_length_0xffffffffffff),
      cmocka_unit_test(test_array_u32_2_62),
      cmocka_unit_test(test_string_one_byte_past_end),
      cmocka_unit_test(test_bad_values),
      cmocka_unit_test(test_duplicates),
      cmocka_unit_test(test_alignment_rejected),
      cmocka_unit_test(test_alignment_64_reads),
      cmocka_unit_test(test_byte_size_wraps),
      cmocka_unit_test(test_zero_dimension),
      cmocka_unit_test(test_n_dims),
      cmocka_unit_test(test_tensor_types),
      cmocka_unit_test(test_data_past_end),
      cmocka_unit_test(test_overlapping_tensors),
      cmocka_unit_test(test_claimed_counts_cost_nothing),
      cmocka_unit_test(test_valid_file_reads),
      cmocka_unit_test(test_truncated_at_every_boundary),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
