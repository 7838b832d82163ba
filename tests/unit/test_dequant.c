/* kiln_dequantize against blocks packed by hand here, from the layouts in
 * gguf.md / ggml-common.h, with expected values computed independently in
 * double. Scales are distinct in every sub-block and use their high bits
 * (never all-zero blocks), and every quant level appears, so a swapped
 * nibble, a misplaced high bit or a wrong sub-block scale changes a value.
 * The fixtures are chosen so the f32 results are exact, hence equal to the
 * double reference bit for bit. Q5_K also against llama.cpp's own
 * dequantize_row_q5_K (tests/data/quant/q5_k_ggml.txt): 256 blocks whose
 * scale, high-bit and quant bytes each take all 256 values, with d and
 * dmin that make the results round. Also: F16 and BF16 for all 65536 bit
 * patterns against an ldexp reference, their rounding from f32, and the
 * order of f32 operations ggml uses where results are not exact. */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/dequant.h"
#include "kiln/half.h"
#include "q5_k_ref.h"
#include "testutil.h"

/* Compares f32 results with double references exactly: each reference must
 * itself be an f32 value (the fixtures are built so), and the bits must
 * match (so -0.0 vs 0.0 would show). */
static void expect_exact(const char *what, const float *got, const double *want, int n) {
  for (int i = 0; i < n; i++) {
    float w = (float)want[i];
    if ((double)w != want[i])
      fail_msg("%s[%d]: reference %.17g is not an f32 (fixture bug)", what, i, want[i]);
    if (kiln_f32_to_bits(got[i]) != kiln_f32_to_bits(w)) {
      fail_msg("%s[%d]: got %.9g (0x%08x), expected %.9g (0x%08x)", what, i, (double)got[i],
               kiln_f32_to_bits(got[i]), (double)w, kiln_f32_to_bits(w));
    }
  }
}

static void put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

/* The value of an f16 bit pattern, by ldexp (independent of half.h). */
static double f16_ref(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
  double v;
  if (exp == 31)
    v = man ? NAN : INFINITY;
  else if (exp == 0)
    v = ldexp(man, -24);
  else
    v = ldexp(1024 + man, exp - 25);
  return sign ? -v : v;
}

/* The value of a bf16 bit pattern, by ldexp. */
static double bf16_ref(uint16_t h) {
  int sign = h >> 15, exp = (h >> 7) & 255, man = h & 127;
  double v;
  if (exp == 255)
    v = man ? NAN : INFINITY;
  else if (exp == 0)
    v = ldexp(man, -133);
  else
    v = ldexp(128 + man, exp - 134);
  return sign ? -v : v;
}

/* ---- Q4_K ------------------------------------------------------------------ */

/* Packs one Q4_K block by hand: f16 d, f16 dmin, then the 12 scale bytes
 * (6-bit scales and mins: sub-blocks 0-3 in the low 6 bits of bytes 0-3 and
 * 4-7, sub-blocks 4-7 as a low nibble in bytes 8-11 (scale) / high nibble
 * (min) plus 2 high bits in the top of bytes 0-3 (scale) / 4-7 (min)),
 * then 128 bytes of quants: bytes 32c..32c+31 hold values 64c+l (low
 * nibble) and 64c+32+l (high nibble). */
static void pack_q4_k(uint8_t *blk, uint16_t d, uint16_t dmin, const uint8_t sc[8],
                      const uint8_t mn[8], const uint8_t q[256]) {
  memset(blk, 0, 144);
  put16(blk, d);
  put16(blk + 2, dmin);
  uint8_t *s = blk + 4;
  for (int j = 0; j < 4; j++) {
    s[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = (uint8_t)((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    s[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  uint8_t *qs = blk + 16;
  for (int v = 0; v < 256; v++) {
    int c = v / 64, l = v % 64;
    if (l < 32)
      qs[32 * c + l] |= q[v];
    else
      qs[32 * c + l - 32] |= (uint8_t)(q[v] << 4);
  }
}

static void test_q4_k_fixture(void **state) {
  (void)state;
  /* the fixture the issue specifies: d = 0.5, dmin = 0.25, quants i mod 16 */
  const uint8_t sc[8] = {1, 17, 33, 63, 5, 21, 37, 62};
  const uint8_t mn[8] = {0, 9, 27, 45, 63, 2, 18, 50};
  /* and a second block: other d/dmin, scales and mins reversed, quants
   * (7i+3) mod 16, to check the block stride and the packing again */
  uint8_t q0[256], q1[256], sc1[8], mn1[8];
  for (int i = 0; i < 256; i++) {
    q0[i] = (uint8_t)(i % 16);
    q1[i] = (uint8_t)((7 * i + 3) % 16);
  }
  for (int j = 0; j < 8; j++) {
    sc1[j] = sc[7 - j];
    mn1[j] = mn[7 - j];
  }
  uint8_t blk[2 * 144];
  pack_q4_k(blk, 0x3800 /* 0.5 */, 0x3400 /* 0.25 */, sc, mn, q0);
  pack_q4_k(blk + 144, 0x4000 /* 2.0 */, 0x3c00 /* 1.0 */, sc1, mn1, q1);
  assert_int_equal(kiln_type_block_bytes(KILN_TYPE_Q4_K), 144);

  double want[512];
  for (int i = 0; i < 256; i++) {
    int sb = i / 32;
    want[i] = 0.5 * sc[sb] * q0[i] - 0.25 * mn[sb];
    want[256 + i] = 2.0 * sc1[sb] * q1[i] - 1.0 * mn1[sb];
  }
  float got[512];
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q4_K, blk, got, 512));
  expect_exact("q4_K", got, want, 512);
  /* spot values, written out: sub-block 3 (scale 63, min 45), q = 15 */
  assert_true(got[3 * 32 + 15] == 0.5f * 63 * 15 - 0.25f * 45);
  /* sub-block 4: scale 5, min 63 (both with high bits in bytes 0 and 4) */
  assert_true(got[4 * 32 + 1] == 0.5f * 5 * 1 - 0.25f * 63);
}

/* ---- Q5_K ------------------------------------------------------------------ */

/* Packs one Q5_K block: f16 d, f16 dmin, the 12 scale bytes as Q4_K's,
 * qh[32], then qs[128] as Q4_K's quants: value 32j + l of sub-block j
 * (0..7) keeps its low 4 bits in qs[32 (j / 2) + l] (the low nibble for
 * even j, the high for odd) and its fifth bit at bit j of qh[l]. */
static void pack_q5_k(uint8_t *blk, uint16_t d, uint16_t dmin, const uint8_t sc[8],
                      const uint8_t mn[8], const uint8_t q[256]) {
  uint8_t k4[144], q4[256];
  for (int v = 0; v < 256; v++) q4[v] = q[v] & 15;
  pack_q4_k(k4, d, dmin, sc, mn, q4); /* header and nibbles as Q4_K's */
  memcpy(blk, k4, 16);
  memset(blk + 16, 0, 32);
  for (int v = 0; v < 256; v++) blk[16 + v % 32] |= (uint8_t)((q[v] >> 4) << (v / 32));
  memcpy(blk + 48, k4 + 16, 128);
}

static void test_q5_k_fixture(void **state) {
  (void)state;
  const uint8_t sc[8] = {1, 17, 33, 63, 5, 21, 37, 62};
  const uint8_t mn[8] = {0, 9, 27, 45, 63, 2, 18, 50};
  uint8_t q0[256], q1[256], sc1[8], mn1[8];
  int fifth = 0;
  for (int i = 0; i < 256; i++) {
    q0[i] = (uint8_t)(i % 32); /* every level, the fifth bit on half */
    q1[i] = (uint8_t)((13 * i + 7) % 32);
    fifth += q0[i] >> 4;
  }
  assert_int_equal(fifth, 128);
  for (int j = 0; j < 8; j++) {
    sc1[j] = sc[7 - j];
    mn1[j] = mn[7 - j];
  }
  uint8_t blk[2 * 176];
  pack_q5_k(blk, 0x3800 /* 0.5 */, 0x3400 /* 0.25 */, sc, mn, q0);
  pack_q5_k(blk + 176, 0x4000 /* 2.0 */, 0x3c00 /* 1.0 */, sc1, mn1, q1);
  assert_int_equal(kiln_type_block_bytes(KILN_TYPE_Q5_K), 176);
  assert_int_equal(kiln_type_block_size(KILN_TYPE_Q5_K), 256);
  double want[512];
  for (int i = 0; i < 256; i++) {
    int sb = i / 32;
    want[i] = 0.5 * sc[sb] * q0[i] - 0.25 * mn[sb];
    want[256 + i] = 2.0 * sc1[sb] * q1[i] - 1.0 * mn1[sb];
  }
  float got[512];
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q5_K, blk, got, 512));
  expect_exact("q5_K", got, want, 512);
  /* written out: sub-block 7 (scale 62, min 50), value 31 (fifth bit at
   * bit 7 of qh[31]) */
  assert_true(got[7 * 32 + 31] == 0.5f * 62 * 31 - 0.25f * 50);
  assert_true((blk[16 + 31] & 0x80) != 0);
}

/* Every block of q5_k_ggml.txt dequantized by kiln: its bytes' hash as the
 * generator's (the same formula), its results' hash as ggml's, and the
 * written-out results of the first blocks value by value. */
static void test_q5_k_ggml(void **state) {
  (void)state;
  char *file = q5r_read_file();
  if (!file) fail_msg("cannot read tests/data/quant/q5_k_ggml.txt under $KILN_SRCDIR");
  const char *pos = file;
  char line[4096];
  int blocks = 0, listed = 0, differ = 0;
  while (q5r_next(&pos, "deq", line, sizeof line)) {
    int b;
    uint64_t hb, hy;
    if (sscanf(line, "%d %" SCNx64 " %" SCNx64, &b, &hb, &hy) != 3 || b != blocks)
      fail_msg("q5_k_ggml.txt: bad deq line %d: %s", blocks, line);
    uint8_t blk[176];
    float y[256];
    q5r_block(b, blk);
    if (q5r_fnv(blk, sizeof blk) != hb) fail_msg("block %d: its bytes differ from the generator's", b);
    KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q5_K, blk, y, 256));
    if (q5r_fnv(y, sizeof y) != hy) {
      printf("  block %d: kiln's values differ from ggml's\n", b);
      differ++;
    }
    blocks++;
  }
  pos = file;
  while (q5r_next(&pos, "val", line, sizeof line)) {
    char *p = line, *end;
    const int b = (int)strtol(p, &end, 10);
    uint8_t blk[176];
    float y[256];
    q5r_block(b, blk);
    KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q5_K, blk, y, 256));
    for (int i = 0; i < 256; i++) {
      p = end;
      const uint32_t want = (uint32_t)strtoul(p, &end, 16);
      if (end == p) fail_msg("q5_k_ggml.txt: val %d has fewer than 256 values", b);
      if (kiln_f32_to_bits(y[i]) != want)
        fail_msg("block %d value %d: kiln %.9g (0x%08x), ggml 0x%08x", b, i, (double)y[i],
                 kiln_f32_to_bits(y[i]), want);
    }
    listed++;
  }
  free(file);
  printf("  Q5_K: %d blocks against ggml's dequantize_row_q5_K, %d differ; %d listed value by "
         "value\n",
         blocks, differ, listed);
  assert_int_equal(blocks, 256);
  assert_int_equal(listed, 8);
  assert_int_equal(differ, 0);
}

/* ---- Q6_K ------------------------------------------------------------------ */

/* Packs one Q6_K block: ql[128], qh[64], int8 scales[16], f16 d. In each
 * 128-value half h, value 128h+l+32k (l < 32, k < 4) keeps its low 4 bits
 * in ql[64h + l + 32*(k&1)] (low nibble for k < 2, high for k >= 2) and its
 * high 2 bits in qh[32h + l] at bit 2k; value v is scaled by scales[v/16]. */
static void pack_q6_k(uint8_t *blk, uint16_t d, const int8_t sc[16], const uint8_t q[256]) {
  memset(blk, 0, 210);
  uint8_t *ql = blk, *qh = blk + 128;
  for (int v = 0; v < 256; v++) {
    int h = v / 128, r = v % 128, k = r / 32, l = r % 32;
    uint8_t lo = q[v] & 15, hi = q[v] >> 4;
    uint8_t *p = &ql[64 * h + l + 32 * (k & 1)];
    *p |= (uint8_t)(k < 2 ? lo : lo << 4);
    qh[32 * h + l] |= (uint8_t)(hi << (2 * k));
  }
  memcpy(blk + 192, sc, 16);
  put16(blk + 208, d);
}

static void test_q6_k_fixture(void **state) {
  (void)state;
  const int8_t sc[16] = {127, -128, 1, -1, 64, -64, 100, -100, 3, -7, 45, -90, 17, -33, 120, -5};
  const int8_t sc1[16] = {-3, 5, -9, 11, -17, 19, -23, 29, -31, 37, -41, 43, -47, 53, -59, 61};
  uint8_t q0[256], q1[256];
  int seen_high = 0;
  for (int i = 0; i < 256; i++) {
    q0[i] = (uint8_t)((37 * i + 11) % 64); /* every 6-bit level, high bits set often */
    q1[i] = (uint8_t)(63 - i % 64);
    if (q0[i] >= 48) seen_high++;
  }
  assert_true(seen_high > 32);
  uint8_t blk[2 * 210];
  pack_q6_k(blk, 0x3000 /* 0.125 */, sc, q0);
  pack_q6_k(blk + 210, 0xb800 /* -0.5 */, sc1, q1);
  assert_int_equal(kiln_type_block_bytes(KILN_TYPE_Q6_K), 210);
  double want[512];
  for (int i = 0; i < 256; i++) {
    want[i] = 0.125 * sc[i / 16] * (q0[i] - 32);
    want[256 + i] = -0.5 * sc1[i / 16] * (q1[i] - 32);
  }
  float got[512];
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q6_K, blk, got, 512));
  expect_exact("q6_K", got, want, 512);
  assert_true(got[16] == 0.125f * -128 * (float)(q0[16] - 32)); /* sub-block 1: scale -128 */
}

/* ---- Q8_0, Q5_0, Q4_0 ------------------------------------------------------ */

/* f16 scales with many mantissa bits, negative, subnormal, the largest. */
static const uint16_t block_d[4] = {0x3bff, 0xb555, 0x0001, 0x7bff};

static void test_q8_0_fixture(void **state) {
  (void)state;
  uint8_t blk[4 * 34];
  double want[128];
  for (int b = 0; b < 4; b++) {
    put16(blk + 34 * b, block_d[b]);
    for (int j = 0; j < 32; j++) {
      int q = ((b * 32 + j) * 53 + 7) % 256 - 128; /* -128..127, all distinct per block */
      blk[34 * b + 2 + j] = (uint8_t)(int8_t)q;
      want[32 * b + j] = q * f16_ref(block_d[b]);
    }
  }
  float got[128];
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q8_0, blk, got, 128));
  expect_exact("q8_0", got, want, 128);
}

/* Q5_0: f16 d, u32 qh (bit j = 5th bit of value j), qs[16] (value j low
 * nibble of byte j for j < 16, value j+16 the high nibble). */
static void test_q5_0_fixture(void **state) {
  (void)state;
  uint8_t blk[4 * 22];
  double want[128];
  int fifth = 0;
  memset(blk, 0, sizeof blk);
  for (int b = 0; b < 4; b++) {
    uint8_t *p = blk + 22 * b;
    put16(p, block_d[b]);
    uint32_t qh = 0;
    for (int j = 0; j < 32; j++) {
      int q = (j * 13 + 5 * b + 3) % 32; /* all 32 levels in each block */
      if (q & 16) {
        qh |= 1u << j;
        fifth++;
      }
      if (j < 16)
        p[6 + j] |= (uint8_t)(q & 15);
      else
        p[6 + j - 16] |= (uint8_t)((q & 15) << 4);
      want[32 * b + j] = (q - 16) * f16_ref(block_d[b]);
    }
    for (int k = 0; k < 4; k++) p[2 + k] = (uint8_t)(qh >> (8 * k));
  }
  assert_int_equal(fifth, 64); /* half the values have the 5th bit */
  float got[128];
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q5_0, blk, got, 128));
  expect_exact("q5_0", got, want, 128);
}

static void test_q4_0_fixture(void **state) {
  (void)state;
  uint8_t blk[4 * 18];
  double want[128];
  memset(blk, 0, sizeof blk);
  for (int b = 0; b < 4; b++) {
    uint8_t *p = blk + 18 * b;
    put16(p, block_d[b]);
    for (int j = 0; j < 32; j++) {
      int q = (j * 5 + b) % 16;
      if (j < 16)
        p[2 + j] |= (uint8_t)q;
      else
        p[2 + j - 16] |= (uint8_t)(q << 4);
      want[32 * b + j] = (q - 8) * f16_ref(block_d[b]);
    }
  }
  float got[128];
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q4_0, blk, got, 128));
  expect_exact("q4_0", got, want, 128);
}

/* ---- ggml's f32 operation order -------------------------------------------- */

/* With arbitrary f16 d and dmin the products round, so the order of f32
 * operations decides the last bit. ggml computes Q4_K as
 * (float)(d*sc) * q - (float)(dmin*m) and Q6_K as (float)(d*sc) * q. */
static void test_k_quant_rounding_order(void **state) {
  (void)state;
  uint8_t q[256], sc[8], mn[8], blk[144];
  for (int i = 0; i < 256; i++) q[i] = (uint8_t)((i * 11 + 5) % 16);
  for (int j = 0; j < 8; j++) {
    sc[j] = (uint8_t)(63 - 7 * j);
    mn[j] = (uint8_t)(5 + 7 * j);
  }
  const uint16_t d = 0x2e67, dmin = 0x1d3b; /* 0.1000977, 0.0052299 */
  pack_q4_k(blk, d, dmin, sc, mn, q);
  float got[256];
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q4_K, blk, got, 256));
  int differs_from_double = 0;
  for (int i = 0; i < 256; i++) {
    volatile float d1 = (float)f16_ref(d) * (float)sc[i / 32];
    volatile float m1 = (float)f16_ref(dmin) * (float)mn[i / 32];
    volatile float p = d1 * (float)q[i];
    float want = p - m1;
    if (kiln_f32_to_bits(got[i]) != kiln_f32_to_bits(want))
      fail_msg("q4_K order [%d]: %.9g vs %.9g", i, (double)got[i], (double)want);
    if ((double)got[i] != f16_ref(d) * sc[i / 32] * q[i] - f16_ref(dmin) * mn[i / 32])
      differs_from_double++;
  }
  assert_true(differs_from_double > 0); /* the check above had rounding to check */

  int8_t s6[16];
  uint8_t q6[256], b6[210];
  for (int j = 0; j < 16; j++) s6[j] = (int8_t)(j * 17 - 120);
  for (int i = 0; i < 256; i++) q6[i] = (uint8_t)((i * 29 + 1) % 64);
  pack_q6_k(b6, 0x1e3f, s6, q6);
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q6_K, b6, got, 256));
  for (int i = 0; i < 256; i++) {
    volatile float ds = (float)f16_ref(0x1e3f) * (float)s6[i / 16];
    float want = ds * (float)(q6[i] - 32);
    if (kiln_f32_to_bits(got[i]) != kiln_f32_to_bits(want)) fail_msg("q6_K order [%d]", i);
  }
}

/* ---- F16, BF16, F32 -------------------------------------------------------- */

static void test_f16_all_patterns(void **state) {
  (void)state;
  uint16_t *h = malloc(65536 * sizeof *h);
  float *f = malloc(65536 * sizeof *f);
  assert_non_null(h);
  assert_non_null(f);
  for (int i = 0; i < 65536; i++) put16((uint8_t *)(h + i), (uint16_t)i);
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_F16, h, f, 65536));
  int nans = 0;
  for (int i = 0; i < 65536; i++) {
    double want = f16_ref((uint16_t)i);
    if (isnan(want)) {
      if (!isnan(f[i]) || !!signbit(f[i]) != (i >> 15))
        fail_msg("f16 0x%04x: not a NaN of that sign", i);
      if (!isnan(kiln_f16_to_f32((uint16_t)i))) fail_msg("f16 0x%04x", i);
      uint16_t back = kiln_f32_to_f16(f[i]);
      if ((back & 0x7c00) != 0x7c00 || !(back & 0x3ff))
        fail_msg("f16 NaN 0x%04x came back as 0x%04x", i, back);
      nans++;
      continue;
    }
    if ((double)f[i] != want || !!signbit(f[i]) != (i >> 15)) {
      fail_msg("f16 0x%04x: got %.17g, expected %.17g", i, (double)f[i], want);
    }
    uint16_t back = kiln_f32_to_f16(f[i]);
    if (back != i) fail_msg("f16 0x%04x: round trip gives 0x%04x", i, back);
  }
  assert_int_equal(nans, 2 * 1023);
  free(h);
  free(f);
}

static void test_bf16_all_patterns(void **state) {
  (void)state;
  uint16_t *h = malloc(65536 * sizeof *h);
  float *f = malloc(65536 * sizeof *f);
  assert_non_null(h);
  assert_non_null(f);
  for (int i = 0; i < 65536; i++) put16((uint8_t *)(h + i), (uint16_t)i);
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_BF16, h, f, 65536));
  for (int i = 0; i < 65536; i++) {
    double want = bf16_ref((uint16_t)i);
    if (isnan(want)) {
      if (!isnan(f[i]) || !!signbit(f[i]) != (i >> 15))
        fail_msg("bf16 0x%04x: not a NaN of that sign", i);
      uint16_t back = kiln_f32_to_bf16(f[i]);
      if ((back & 0x7f80) != 0x7f80 || !(back & 0x7f))
        fail_msg("bf16 NaN 0x%04x came back as 0x%04x", i, back);
      continue;
    }
    if ((double)f[i] != want || !!signbit(f[i]) != (i >> 15)) {
      fail_msg("bf16 0x%04x: got %.17g, expected %.17g", i, (double)f[i], want);
    }
    uint16_t back = kiln_f32_to_bf16(f[i]);
    if (back != i) fail_msg("bf16 0x%04x: round trip gives 0x%04x", i, back);
  }
  free(h);
  free(f);
}

/* f32 -> f16 / bf16 rounding, against the reference values: at each
 * midpoint between neighbours the even one wins, and one f32 ulp either
 * side goes to the nearer. Midpoints are exact in f32 (12 and 9
 * significant bits). kiln_quantize is used, as the writer does. */
static void check_rounding(kiln_type type, double (*ref)(uint16_t), int exp_bits) {
  int man_bits = 15 - exp_bits;
  uint16_t max_finite = (uint16_t)((((1 << exp_bits) - 1) << man_bits) - 1);
  for (uint32_t h = 0; h < max_finite; h++) { /* positive finite h, h+1 */
    double a = ref((uint16_t)h), b = ref((uint16_t)(h + 1));
    float mid = (float)((a + b) / 2);
    assert_true((double)mid == (a + b) / 2);
    float x[3] = {nextafterf(mid, -INFINITY), mid, nextafterf(mid, INFINITY)};
    uint16_t want[3] = {(uint16_t)h, (uint16_t)((h & 1) ? h + 1 : h), (uint16_t)(h + 1)};
    for (int neg = 0; neg < 2; neg++) {
      float in[3];
      uint8_t out[6];
      for (int k = 0; k < 3; k++) in[k] = neg ? -x[k] : x[k];
      KT_ASSERT_OK(kiln_quantize(type, in, out, 3));
      for (int k = 0; k < 3; k++) {
        uint16_t got = (uint16_t)(out[2 * k] | (out[2 * k + 1] << 8));
        uint16_t w = (uint16_t)(want[k] | (neg ? 0x8000 : 0));
        if (got != w)
          fail_msg("%s: %.9g rounds to 0x%04x, expected 0x%04x", kiln_type_name(type),
                   (double)in[k], got, w);
      }
    }
  }
  /* past the largest finite value: half.h rounds its midpoint with the
   * next power of two to infinity (ties to even) and keeps just below it
   * finite; kiln_quantize refuses a finite value that would become
   * infinite, rather than write it */
  double top = ref(max_finite), inf_step = ldexp(1.0, (int)ceil(log2(top)));
  float over = (float)((top + inf_step) / 2), under = nextafterf(over, 0);
  uint16_t (*conv)(float) = type == KILN_TYPE_F16 ? kiln_f32_to_f16 : kiln_f32_to_bf16;
  assert_int_equal(conv(over), max_finite + 1); /* infinity */
  assert_int_equal(conv(-over), 0x8000 | (max_finite + 1));
  assert_int_equal(conv(under), max_finite);
  uint8_t out[2];
  KT_ASSERT_OK(kiln_quantize(type, &under, out, 1));
  assert_int_equal(out[0] | (out[1] << 8), max_finite);
  KT_ASSERT_ERR(kiln_quantize(type, &over, out, 1), KILN_STATUS_INVALID_ARGUMENT, "overflows");
  float inf = INFINITY; /* infinity itself is representable, and kept */
  KT_ASSERT_OK(kiln_quantize(type, &inf, out, 1));
  assert_int_equal(out[0] | (out[1] << 8), max_finite + 1);
}

static void test_f16_bf16_rounding(void **state) {
  (void)state;
  check_rounding(KILN_TYPE_F16, f16_ref, 5);
  check_rounding(KILN_TYPE_BF16, bf16_ref, 8);
}

static void test_f32_copy_and_errors(void **state) {
  (void)state;
  float in[4] = {1.0f, -0.0f, INFINITY, 3.25f}, out[4];
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_F32, in, out, 4));
  assert_memory_equal(in, out, sizeof in);
  KT_ASSERT_ERR(kiln_dequantize(KILN_TYPE_Q8_0, in, out, 33), KILN_STATUS_INVALID_ARGUMENT,
                "33 values of Q8_0 is not a whole number of 32-value blocks");
  KT_ASSERT_ERR(kiln_dequantize(KILN_TYPE_Q4_K, in, out, 32), KILN_STATUS_INVALID_ARGUMENT,
                "256-value blocks");
  KT_ASSERT_ERR(kiln_dequantize(KILN_TYPE_I32, in, out, 4), KILN_STATUS_INVALID_ARGUMENT, "I32");
  KT_ASSERT_ERR(kiln_dequantize((kiln_type)11, in, out, 256), KILN_STATUS_INVALID_ARGUMENT,
                "type id 11 (?)"); /* Q3_K: not read */
  KT_ASSERT_ERR(kiln_dequantize(KILN_TYPE_F16, NULL, out, 4), KILN_STATUS_INVALID_ARGUMENT, "NULL");
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q6_K, NULL, NULL, 0));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_q4_k_fixture),      cmocka_unit_test(test_q5_k_fixture),
      cmocka_unit_test(test_q5_k_ggml),         cmocka_unit_test(test_q6_k_fixture),
      cmocka_unit_test(test_q8_0_fixture),      cmocka_unit_test(test_q5_0_fixture),
      cmocka_unit_test(test_q4_0_fixture),      cmocka_unit_test(test_k_quant_rounding_order),
      cmocka_unit_test(test_f16_all_patterns),  cmocka_unit_test(test_bf16_all_patterns),
      cmocka_unit_test(test_f16_bf16_rounding), cmocka_unit_test(test_f32_copy_and_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
