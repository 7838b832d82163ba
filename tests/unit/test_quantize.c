/* kiln_quantize: random data through quantize -> dequantize, measured
 * against the f32 input in double (relative L2 error and L2-norm ratio,
 * per type, with bounds set from measurement plus margin), stability of a
 * second round trip, the scale conventions of ggml's reference quantizers
 * on blocks whose answer is known, Q5_K byte for byte against llama.cpp's
 * own quantize_row_q5_K_ref (tests/data/quant/q5_k_ggml.txt), zero rows,
 * extreme magnitudes (the sanitizer build turns any undefined float-to-int
 * conversion into a failure), and bad input. */
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

#define N_VALUES (256 * 64) /* 64 super-blocks, 512 small blocks */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double uniform(void) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

static double gaussian(void) {
  double u = uniform(), v = uniform();
  return sqrt(-2.0 * log(u + 1e-300)) * cos(2 * M_PI * v);
}

/* Weight-like data: Gaussian, each 256-value super-block with its own
 * scale (0.01 to 10) so per-block scaling is exercised. */
static float *random_values(int64_t n) {
  float *x = malloc((size_t)n * sizeof *x);
  assert_non_null(x);
  double s = 1;
  for (int64_t i = 0; i < n; i++) {
    if (i % 256 == 0) s = pow(10.0, -2.0 + 3.0 * uniform());
    x[i] = (float)(s * gaussian());
  }
  return x;
}

typedef struct err_stats {
  double rel_l2;     /* ||y - x|| / ||x|| */
  double norm_ratio; /* ||y|| / ||x|| */
  double cosine;
} err_stats;

static err_stats compare(const float *x, const float *y, int64_t n) {
  double dx = 0, dy = 0, dd = 0, xy = 0;
  for (int64_t i = 0; i < n; i++) {
    dx += (double)x[i] * x[i];
    dy += (double)y[i] * y[i];
    dd += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
    xy += (double)x[i] * y[i];
  }
  err_stats e = {sqrt(dd / dx), sqrt(dy / dx), xy / sqrt(dx * dy)};
  return e;
}

/* quantize then dequantize */
static void round_trip(kiln_type type, const float *x, float *y, int64_t n) {
  int64_t bytes = kiln_type_row_bytes(type, n);
  assert_true(bytes > 0);
  uint8_t *q = malloc((size_t)bytes);
  assert_non_null(q);
  KT_ASSERT_OK(kiln_quantize(type, x, q, n));
  KT_ASSERT_OK(kiln_dequantize(type, q, y, n));
  free(q);
}

typedef struct bound {
  kiln_type type;
  double max_rel_l2;   /* on the random data */
  double max_norm_dev; /* |norm ratio - 1| */
  double max_requant;  /* rel. L2 between the first and second round trip */
} bound;

/* Measured on this data (seeded): rel L2 F16 2.2e-4, BF16 1.7e-3, Q8_0
 * 0.53%, Q6_K 1.8%, Q5_K 3.7%, Q5_0 4.3%, Q4_K 7.2%, Q4_0 8.6%; norm
 * ratios within 2.1e-3 of 1; a second round trip changes nothing but Q5_K
 * (3.6e-3: ggml's Q5_K search does not find its own output again; its
 * quantize_row_q5_K_ref, which kiln's equals byte for byte, moves 542 of
 * the 16384 values of q5_k_ggml.txt's rows, 4.6e-3). Bounds leave ~25%
 * margin; the second round trip must be exact where the format makes it
 * so (the scale of a dequantized block is recomputed exactly). */
static const bound bounds[] = {
    {KILN_TYPE_F32, 0.0, 0.0, 0.0},        {KILN_TYPE_F16, 2.7e-4, 1e-4, 0.0},
    {KILN_TYPE_BF16, 2.1e-3, 5e-4, 0.0},   {KILN_TYPE_Q8_0, 6.7e-3, 1e-3, 0.0},
    {KILN_TYPE_Q6_K, 2.25e-2, 2e-3, 1e-3}, {KILN_TYPE_Q5_0, 5.3e-2, 5e-3, 0.0},
    {KILN_TYPE_Q4_K, 9.0e-2, 5e-3, 1e-3},  {KILN_TYPE_Q4_0, 0.106, 5e-3, 0.0},
    {KILN_TYPE_Q5_K, 4.6e-2, 5e-3, 4.5e-3},
};

static void test_round_trip_error(void **state) {
  (void)state;
  float *x = random_values(N_VALUES);
  float *y = malloc(N_VALUES * sizeof *y), *y2 = malloc(N_VALUES * sizeof *y2);
  assert_non_null(y);
  assert_non_null(y2);
  for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++) {
    const bound *b = &bounds[k];
    round_trip(b->type, x, y, N_VALUES);
    err_stats e = compare(x, y, N_VALUES);
    round_trip(b->type, y, y2, N_VALUES);
    err_stats e2 = compare(y, y2, N_VALUES);
    printf("  %-5s rel L2 %.3e  norm ratio %.6f  cos %.8f  re-quantized rel L2 %.3e\n",
           kiln_type_name(b->type), e.rel_l2, e.norm_ratio, e.cosine, e2.rel_l2);
    for (int64_t i = 0; i < N_VALUES; i++) assert_true(isfinite(y[i]));
    if (e.rel_l2 > b->max_rel_l2)
      fail_msg("%s: rel L2 %.3e over %.3e", kiln_type_name(b->type), e.rel_l2, b->max_rel_l2);
    if (fabs(e.norm_ratio - 1) > b->max_norm_dev)
      fail_msg("%s: norm ratio %.6f", kiln_type_name(b->type), e.norm_ratio);
    if (e2.rel_l2 > b->max_requant)
      fail_msg("%s: second round trip moved values by %.3e (bound %.3e)", kiln_type_name(b->type),
               e2.rel_l2, b->max_requant);
  }
  free(x);
  free(y);
  free(y2);
}

/* The searched scales must beat plain rounding with the unsearched scale,
 * even with that scale kept exact in f32: Q4_K (Q5_K) against min/max
 * affine 4-bit (5-bit) rounding per 32 values, Q6_K against symmetric 6-bit rounding with
 * d = max/-32 per 16 (make_qx_quants' starting point). */
static void test_k_quant_search_helps(void **state) {
  (void)state;
  float *x = random_values(N_VALUES);
  float *y = malloc(N_VALUES * sizeof *y), *naive = malloc(N_VALUES * sizeof *naive);
  assert_non_null(y);
  assert_non_null(naive);
  for (int64_t i = 0; i < N_VALUES; i += 32) {
    float mn = x[i], mx = x[i];
    for (int j = 1; j < 32; j++) {
      mn = fminf(mn, x[i + j]);
      mx = fmaxf(mx, x[i + j]);
    }
    double step = ((double)mx - mn) / 15;
    for (int j = 0; j < 32; j++) naive[i + j] = (float)(mn + step * round((x[i + j] - mn) / step));
  }
  round_trip(KILN_TYPE_Q4_K, x, y, N_VALUES);
  double e = compare(x, y, N_VALUES).rel_l2, en = compare(x, naive, N_VALUES).rel_l2;
  printf("  Q4_K rel L2 %.3e; min/max rounding with exact scales %.3e\n", e, en);
  assert_true(e < en);

  for (int64_t i = 0; i < N_VALUES; i += 32) { /* Q5_K: the same with 31 steps */
    float mn = x[i], mx = x[i];
    for (int j = 1; j < 32; j++) {
      mn = fminf(mn, x[i + j]);
      mx = fmaxf(mx, x[i + j]);
    }
    double step = ((double)mx - mn) / 31;
    for (int j = 0; j < 32; j++) naive[i + j] = (float)(mn + step * round((x[i + j] - mn) / step));
  }
  round_trip(KILN_TYPE_Q5_K, x, y, N_VALUES);
  e = compare(x, y, N_VALUES).rel_l2;
  en = compare(x, naive, N_VALUES).rel_l2;
  printf("  Q5_K rel L2 %.3e; min/max rounding with exact scales %.3e\n", e, en);
  assert_true(e < en);

  for (int64_t i = 0; i < N_VALUES; i += 16) {
    double amax = 0, max = 0;
    for (int j = 0; j < 16; j++) {
      if (fabs(x[i + j]) > amax) {
        amax = fabs(x[i + j]);
        max = x[i + j];
      }
    }
    double d = max / -32;
    for (int j = 0; j < 16; j++)
      naive[i + j] = (float)(d * fmin(31, fmax(-32, round(x[i + j] / d))));
  }
  round_trip(KILN_TYPE_Q6_K, x, y, N_VALUES);
  e = compare(x, y, N_VALUES).rel_l2;
  en = compare(x, naive, N_VALUES).rel_l2;
  printf("  Q6_K rel L2 %.3e; absmax rounding with exact scales %.3e\n", e, en);
  assert_true(e < en);
  free(x);
  free(y);
  free(naive);
}

/* ggml's conventions on blocks with known answers. */
static void test_reference_conventions(void **state) {
  (void)state;
  float x[32], y[32];
  uint8_t q[34];
  /* Q8_0: d = amax/127; amax 127 gives d = 1 and q = roundf(x): halves
   * round away from zero, as roundf does */
  for (int j = 0; j < 32; j++) x[j] = (float)(j * 8 - 127) + (j == 5 ? 0.5f : 0.0f);
  x[31] = 127;
  x[5] = -86.5f;
  x[6] = 2.5f;
  KT_ASSERT_OK(kiln_quantize(KILN_TYPE_Q8_0, x, q, 32));
  assert_int_equal(q[0] | (q[1] << 8), 0x3c00); /* d = 1.0 */
  assert_int_equal((int8_t)q[2 + 5], -87);
  assert_int_equal((int8_t)q[2 + 6], 3);
  assert_int_equal((int8_t)q[2 + 31], 127);
  assert_int_equal((int8_t)q[2 + 0], -127);

  /* Q4_0: d = max / -8, max the signed value of largest magnitude; with
   * max = -8, d = 1 and x = q - 8 comes back exactly */
  for (int j = 0; j < 32; j++) x[j] = (float)((j * 3) % 16 - 8);
  x[0] = -8;
  KT_ASSERT_OK(kiln_quantize(KILN_TYPE_Q4_0, x, q, 32));
  assert_int_equal(q[0] | (q[1] << 8), 0x3c00);
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q4_0, q, y, 32));
  assert_memory_equal(x, y, sizeof x);
  /* a positive extreme gives a negative d: 8 maps to level 0 (and 0 to
   * level 8, which dequantizes to -0.0: compare values) */
  for (int j = 0; j < 32; j++) x[j] = (float)(j % 8);
  x[9] = 8;
  KT_ASSERT_OK(kiln_quantize(KILN_TYPE_Q4_0, x, q, 32));
  assert_int_equal(q[0] | (q[1] << 8), 0xbc00); /* d = -1.0 */
  assert_int_equal(q[2 + 9] & 15, 0);
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q4_0, q, y, 32));
  for (int j = 0; j < 32; j++) assert_true(x[j] == y[j]);

  /* Q5_0: d = max / -16; the 5th bit lands in qh */
  for (int j = 0; j < 32; j++) x[j] = (float)((j * 7) % 32 - 16);
  x[3] = -16;
  KT_ASSERT_OK(kiln_quantize(KILN_TYPE_Q5_0, x, q, 32));
  assert_int_equal(q[0] | (q[1] << 8), 0x3c00);
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q5_0, q, y, 32));
  assert_memory_equal(x, y, sizeof x);
}

/* A K-quant block built from levels and scales it can represent exactly
 * comes back exactly (the searches find the exact fit). */
static void test_k_quant_exact_fit(void **state) {
  (void)state;
  float x[256], y[256];
  uint8_t q[210];
  /* Q6_K: sub-block scales 2^k, 6-bit levels; the largest scale's extreme
   * level is -32, so the reference's choice d = max_scale/-128 reproduces
   * them */
  for (int i = 0; i < 256; i++) {
    int l = (i * 23 + 7) % 64 - 32;
    if (i % 16 == 0) l = -32;
    x[i] = ldexpf((float)l, i / 16 % 4 - 8);
  }
  KT_ASSERT_OK(kiln_quantize(KILN_TYPE_Q6_K, x, q, 256));
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q6_K, q, y, 256));
  err_stats e = compare(x, y, 256);
  printf("  Q6_K exact-fit block: rel L2 %.3e\n", e.rel_l2);
  assert_true(e.rel_l2 < 1e-6);
  /* Q4_K: levels 0..15 times d*sc minus dmin*m, from the dequantized
   * fixture of test_dequant (scales 1..63 with high bits) */
  const uint8_t sc[8] = {1, 17, 33, 63, 5, 21, 37, 62}, mn[8] = {0, 9, 27, 45, 63, 2, 18, 50};
  for (int i = 0; i < 256; i++) x[i] = 0.5f * sc[i / 32] * (float)(i % 16) - 0.25f * mn[i / 32];
  KT_ASSERT_OK(kiln_quantize(KILN_TYPE_Q4_K, x, q, 256));
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q4_K, q, y, 256));
  e = compare(x, y, 256);
  printf("  Q4_K fixture re-quantized: rel L2 %.3e\n", e.rel_l2);
  assert_true(e.rel_l2 < 0.02);
  /* Q5_K: the same scales and mins with levels 0..31 */
  uint8_t q5[176];
  for (int i = 0; i < 256; i++) x[i] = 0.5f * sc[i / 32] * (float)(i % 32) - 0.25f * mn[i / 32];
  KT_ASSERT_OK(kiln_quantize(KILN_TYPE_Q5_K, x, q5, 256));
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q5_K, q5, y, 256));
  e = compare(x, y, 256);
  printf("  Q5_K fixture re-quantized: rel L2 %.3e\n", e.rel_l2);
  assert_true(e.rel_l2 < 0.01);
}

/* kiln's Q5_K quantizer against llama.cpp's quantize_row_q5_K_ref (what
 * llama-quantize runs without an importance matrix) on the 64 rows of
 * q5_k_ggml.txt: the same bytes, block for block. */
static void test_q5_k_matches_ggml(void **state) {
  (void)state;
  char *file = q5r_read_file();
  if (!file) fail_msg("cannot read tests/data/quant/q5_k_ggml.txt under $KILN_SRCDIR");
  float *x = malloc(64 * 256 * sizeof *x);
  uint8_t *q = malloc(64 * 176);
  assert_non_null(x);
  assert_non_null(q);
  q5r_rows(x);
  KT_ASSERT_OK(kiln_quantize(KILN_TYPE_Q5_K, x, q, 64 * 256));
  const char *pos = file;
  char line[4096];
  int rows = 0, differ = 0;
  while (q5r_next(&pos, "quant", line, sizeof line)) {
    int r;
    uint64_t hx, hq;
    if (sscanf(line, "%d %" SCNx64 " %" SCNx64, &r, &hx, &hq) != 3 || r != rows)
      fail_msg("q5_k_ggml.txt: bad quant line %d: %s", rows, line);
    if (q5r_fnv(x + 256 * r, 256 * sizeof *x) != hx)
      fail_msg("row %d: its values differ from the generator's", r);
    if (q5r_fnv(q + 176 * r, 176) != hq) {
      printf("  row %d: kiln's block differs from ggml's\n", r);
      differ++;
    }
    rows++;
  }
  pos = file;
  int listed = 0;
  while (q5r_next(&pos, "qbytes", line, sizeof line)) {
    char *p = line, *end;
    const int r = (int)strtol(p, &end, 10);
    for (int i = 0; i < 176; i++) {
      p = end;
      const unsigned want = (unsigned)strtoul(p, &end, 16);
      if (end == p) fail_msg("q5_k_ggml.txt: qbytes %d has fewer than 176 bytes", r);
      if (q[176 * r + i] != want)
        fail_msg("row %d byte %d: kiln 0x%02x, ggml 0x%02x", r, i, q[176 * r + i], want);
    }
    listed++;
  }
  printf("  Q5_K: %d blocks against ggml's quantize_row_q5_K_ref, %d differ; %d listed byte by "
         "byte\n",
         rows, differ, listed);
  free(file);
  free(x);
  free(q);
  assert_int_equal(rows, 64);
  assert_int_equal(listed, 8);
  assert_int_equal(differ, 0);
}

static const kiln_type all_types[] = {KILN_TYPE_F32,  KILN_TYPE_F16,  KILN_TYPE_BF16,
                                      KILN_TYPE_Q8_0, KILN_TYPE_Q4_0, KILN_TYPE_Q5_0,
                                      KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K};

static void test_zero_row(void **state) {
  (void)state;
  float x[512] = {0}, y[512];
  for (size_t k = 0; k < sizeof all_types / sizeof all_types[0]; k++) {
    memset(y, 0xff, sizeof y); /* NaN bits, to see every value is written */
    round_trip(all_types[k], x, y, 512);
    for (int i = 0; i < 512; i++) {
      if (isnan(y[i]) || y[i] != 0.0f)
        fail_msg("%s: zero row gives %g at %d", kiln_type_name(all_types[k]), (double)y[i], i);
    }
  }
}

/* Tiny (subnormal) and huge-but-storable magnitudes, and blocks mixing
 * zeros with them: no NaN or infinity out, and (under UBSan) no undefined
 * conversion on the way. */
static void test_extreme_magnitudes(void **state) {
  (void)state;
  const float scales[] = {1e-44f, 1e-40f, 1e-38f, 1e-30f, 1e-8f, 1e4f, 4e5f, 1e6f};
  float x[512], y[512];
  for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++) {
    for (int i = 0; i < 512; i++) x[i] = (i % 5 == 0) ? 0.0f : scales[s] * (float)gaussian() / 4;
    for (size_t k = 0; k < sizeof all_types / sizeof all_types[0]; k++) {
      kiln_type t = all_types[k];
      uint8_t q[512 * 4];
      kiln_status st = kiln_quantize(t, x, q, 512);
      if (st) { /* only refused when an f16 scale cannot hold the block */
        assert_int_equal(kiln_status_code_of(st), KILN_STATUS_INVALID_ARGUMENT);
        assert_non_null(strstr(kiln_status_message(st), "f16"));
        assert_true(scales[s] >= 4e5f);
        kiln_status_free(st);
        continue;
      }
      KT_ASSERT_OK(kiln_dequantize(t, q, y, 512));
      for (int i = 0; i < 512; i++) {
        if (!isfinite(y[i]))
          fail_msg("%s at scale %g: value %d is %g", kiln_type_name(t), (double)scales[s], i,
                   (double)y[i]);
      }
    }
  }
}

static void test_bad_input(void **state) {
  (void)state;
  float x[256] = {0};
  uint8_t q[256 * 4];
  x[77] = NAN;
  KT_ASSERT_ERR(kiln_quantize(KILN_TYPE_Q8_0, x, q, 256), KILN_STATUS_INVALID_ARGUMENT,
                "value 77 is nan");
  x[77] = -INFINITY;
  KT_ASSERT_ERR(kiln_quantize(KILN_TYPE_Q4_K, x, q, 256), KILN_STATUS_INVALID_ARGUMENT,
                "value 77 is -inf");
  KT_ASSERT_OK(kiln_quantize(KILN_TYPE_F16, x, q, 256)); /* f16 holds -inf */
  assert_int_equal(q[154] | (q[155] << 8), 0xfc00);
  x[77] = 1e7f;
  KT_ASSERT_ERR(kiln_quantize(KILN_TYPE_Q4_0, x, q, 256), KILN_STATUS_INVALID_ARGUMENT,
                "block 2 holds |x| = 1e+07");
  KT_ASSERT_ERR(kiln_quantize(KILN_TYPE_F16, x, q, 256), KILN_STATUS_INVALID_ARGUMENT,
                "value 77 (1e+07) overflows f16");
  x[77] = 8e6f;
  KT_ASSERT_OK(kiln_quantize(KILN_TYPE_Q8_0, x, q, 256)); /* 8e6/127 fits an f16 scale */
  x[77] = 3e38f;
  KT_ASSERT_OK(kiln_quantize(KILN_TYPE_BF16, x, q, 256));
  x[77] = 3.4e38f; /* rounds past bf16's largest finite value */
  KT_ASSERT_ERR(kiln_quantize(KILN_TYPE_BF16, x, q, 256), KILN_STATUS_INVALID_ARGUMENT,
                "overflows bf16");
  /* Q4_K: a block whose values all lie near -3e7 has a small range but a
   * min of 3e7, whose f16 dmin (min / 63) would be infinite; just under
   * the bound it is stored and comes back finite */
  float xk[256];
  for (int i = 0; i < 256; i++) xk[i] = -3.0e7f + 1000.0f * (float)(i % 7);
  KT_ASSERT_ERR(kiln_quantize(KILN_TYPE_Q4_K, xk, q, 256), KILN_STATUS_INVALID_ARGUMENT,
                "beyond what an f16 Q4_K block scale can represent");
  KT_ASSERT_ERR(kiln_quantize(KILN_TYPE_Q5_K, xk, q, 256), KILN_STATUS_INVALID_ARGUMENT,
                "beyond what an f16 Q5_K block scale can represent");
  for (int i = 0; i < 256; i++) xk[i] = -2.06e6f + 100.0f * (float)(i % 7);
  KT_ASSERT_OK(kiln_quantize(KILN_TYPE_Q4_K, xk, q, 256));
  float yk[256];
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q4_K, q, yk, 256));
  for (int i = 0; i < 256; i++) {
    if (!isfinite(yk[i]) || fabs((double)yk[i] - xk[i]) > 2e4)
      fail_msg("Q4_K near the bound: value %d %g came back %g", i, (double)xk[i], (double)yk[i]);
  }
  KT_ASSERT_OK(kiln_quantize(KILN_TYPE_Q5_K, xk, q, 256));
  KT_ASSERT_OK(kiln_dequantize(KILN_TYPE_Q5_K, q, yk, 256));
  for (int i = 0; i < 256; i++) {
    if (!isfinite(yk[i]) || fabs((double)yk[i] - xk[i]) > 2e4)
      fail_msg("Q5_K near the bound: value %d %g came back %g", i, (double)xk[i], (double)yk[i]);
  }
  KT_ASSERT_ERR(kiln_quantize(KILN_TYPE_Q5_K, x, q, 32), KILN_STATUS_INVALID_ARGUMENT,
                "32 values of Q5_K is not a whole number of 256-value blocks");
  KT_ASSERT_ERR(kiln_quantize(KILN_TYPE_Q6_K, x, q, 128), KILN_STATUS_INVALID_ARGUMENT,
                "not a whole number of 256-value blocks");
  KT_ASSERT_ERR(kiln_quantize(KILN_TYPE_I32, x, q, 4), KILN_STATUS_INVALID_ARGUMENT, "I32");
  KT_ASSERT_ERR(kiln_quantize((kiln_type)3, x, q, 32), KILN_STATUS_INVALID_ARGUMENT, "type id 3");
  KT_ASSERT_ERR(kiln_quantize(KILN_TYPE_Q8_0, x, NULL, 32), KILN_STATUS_INVALID_ARGUMENT, "NULL");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_error),
      cmocka_unit_test(test_k_quant_search_helps),
      cmocka_unit_test(test_reference_conventions),
      cmocka_unit_test(test_k_quant_exact_fit),
      cmocka_unit_test(test_q5_k_matches_ggml),
      cmocka_unit_test(test_zero_row),
      cmocka_unit_test(test_extreme_magnitudes),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
