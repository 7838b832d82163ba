/* gemm = fp8's operand kernels (backends/cuda-common/kernels/
 * fp8_e4m3.cuh.tmpl, fp8_rows.cu.tmpl, fp8_input.cu.tmpl) compiled for the
 * host and run block by block on tests/unit/cuda_block_emu.h, against a
 * reference written here from the e4m3 format's definition (no code
 * shared with the kernels):
 *   - the rounding: every finite e4m3 value, every midpoint between two
 *     neighbours (ties go to the even code), a value either side of each
 *     midpoint, the subnormals, 448 and past it (saturation), infinities,
 *     NaN, signed zeros, and 200000 random magnitudes from 2^-14 to 2^10,
 *     each to the code nearest in f64 (ties to even) out of the 254 finite
 *     ones, and every code's value;
 *   - the scale: amax / fp8_max, 1 for an all-zero row or a NaN;
 *   - the weight tile (F32 and F16 with K = 100, padded to 112; Q8_0,
 *     Q4_K and Q6_K with K = 512) and the activations (K = 100, with
 *     outliers, a zero column and a column 2^20 times another), with grids
 *     smaller and larger than the work: bytes and scales bit for bit the
 *     reference's (kiln_dequantize's values, amax / 448 in f32, v / s in
 *     f32, rounded), zeros past K, the scale vector after the last row;
 *     a column 2^20 times another gets the same bytes, its scale 2^20
 *     times the other (the scale is per token, data, not baked);
 *   - the GEMM the tile and the activations give (sa[i] sb[j] sum qa qb,
 *     in f64) against the f64 product of the unrounded values: within
 *     FP8_TOL relative L2 and norm ratio, and no closer than 2e-3 (so a
 *     reference path that skipped the rounding would show).
 * No GPU needed: tests/gpu/test_gpu_ops runs the same kernels through
 * cuBLASLt on a device. */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

extern "C" {
#include <cmocka.h>

#include "gpu_common.h"
#include "kiln/half.h"
#include "kiln/types.h"
}

#include "cuda_block_emu.h"

/* The device's rounded products, differences and quotients, as the host
 * computes them (each rounding its own: no fused multiply-add). */
static inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
static inline float __fsub_rn(float a, float b) {
  volatile float r = a - b;
  return r;
}
static inline float __fdiv_rn(float a, float b) {
  volatile float r = a / b;
  return r;
}

#define KILN_HOST_EMULATION 1
#define KILN_FP8_MAX 448.0f
#include "grid_dep.cuh.tmpl"

#define KILN_K 100
#define KILN_BLOCK 64
#define KILN_WT_F32 1
#define KILN_HOST_TYPE KILN_TYPE_F32
#define KILN_HOST_SHAPE f32_100
namespace f32_100 {
#include "fp8_host_shape.h"
}
#define KILN_K 100
#define KILN_BLOCK 32
#define KILN_WT_F16 1
#define KILN_HOST_TYPE KILN_TYPE_F16
#define KILN_HOST_SHAPE f16_100
namespace f16_100 {
#include "fp8_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_WT_Q8_0 1
#define KILN_HOST_TYPE KILN_TYPE_Q8_0
#define KILN_HOST_SHAPE q8_0_512
namespace q8_0_512 {
#include "fp8_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 32
#define KILN_WT_Q4_K 1
#define KILN_HOST_TYPE KILN_TYPE_Q4_K
#define KILN_HOST_SHAPE q4_k_512
namespace q4_k_512 {
#include "fp8_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 128
#define KILN_WT_Q6_K 1
#define KILN_HOST_TYPE KILN_TYPE_Q6_K
#define KILN_HOST_SHAPE q6_k_512
namespace q6_k_512 {
#include "fp8_host_shape.h"
}

/* The bound a GEMM of e4m3 operands keeps to against f64: each operand
 * is rounded to 3 mantissa bits (half a step: up to 2^-4 of itself, about
 * 2^-4 / sqrt(12) ~ 1.8% RMS of a value spread evenly within its binade,
 * so about 2.5% for a product of two), and independent rounding errors
 * add like the products do, so a whole sum lands about as far from f64
 * as one product: 2-4e-2 on these rows. README, "gemm", documents it. */
#define FP8_TOL 5e-2

/* ---- the reference: e4m3 from its definition ---------------------------- */

/* The value of code c (sign, 4 exponent bits with bias 7, 3 mantissa
 * bits; exponent 0 is subnormal, m 2^-9; 0x7f / 0xff are NaN). */
static double ref_value(unsigned c) {
  const unsigned e = (c >> 3) & 15, m = c & 7;
  if ((c & 0x7f) == 0x7f) return NAN;
  const double mag = e == 0 ? ldexp((double)m, -9) : ldexp(1.0 + m / 8.0, (int)e - 7);
  return (c & 0x80) ? -mag : mag;
}

/* The code nearest v (ties: the even code), saturating past 448; NaN to
 * 0x7f with v's sign. */
static unsigned char ref_e4m3(float v) {
  const unsigned sign = signbit(v) ? 0x80 : 0;
  if (isnan(v)) return (unsigned char)(sign | 0x7f);
  const double a = fabs((double)v);
  unsigned best = 0;
  double best_d = INFINITY;
  for (unsigned c = 0; c < 0x7f; c++) {
    const double d = fabs(a - ref_value(c));
    if (d < best_d || (d == best_d && (c & 1) == 0)) {
      best = c;
      best_d = d;
    }
  }
  return (unsigned char)(sign | best);
}

/* A row's scale and bytes as the format's definition gives them. */
static float ref_scale(const float *v, long long n) {
  float a = 0;
  for (long long i = 0; i < n; i++) {
    if (isnan(v[i])) return 1.0f;
    a = fmaxf(a, fabsf(v[i]));
  }
  const float s = a / 448.0f;
  return s > 0 && isfinite(s) ? s : 1.0f;
}

/* ---- the rounding ----------------------------------------------------- */

static unsigned n_bad_codes;

static void check_round(float v) {
  const unsigned char got = f32_100::kiln_e4m3_rne(v), want = ref_e4m3(v);
  if (got != want && n_bad_codes++ < 10)
    printf("  e4m3(%a = %.9g): 0x%02x, the reference 0x%02x\n", (double)v, (double)v, got, want);
}

static void test_e4m3_rounding(void **state) {
  (void)state;
  n_bad_codes = 0;
  unsigned checked = 0;
  for (unsigned c = 0; c < 256; c++) {
    const double want = ref_value(c);
    const float got = f32_100::kiln_e4m3_value((unsigned char)c);
    if (!(isnan(want) ? isnan(got) : (double)got == want)) {
      printf("  value(0x%02x): %g, the format's %g\n", c, (double)got, want);
      n_bad_codes++;
    }
    if ((c & 0x7f) == 0x7f) continue;
    const float v = (float)want;
    check_round(v);
    checked++;
    /* the midpoint to the next code up (in magnitude), and either side of it */
    if ((c & 0x7f) < 0x7e) {
      const float mid = (float)((want + ref_value(c + 1)) / 2); /* exact: a few bits */
      check_round(mid);
      check_round(nextafterf(mid, 0.0f));
      check_round(nextafterf(mid, mid > 0 ? INFINITY : -INFINITY));
      checked += 3;
    }
  }
  static const float edges[] = {448.0f, 449.0f, 463.9f, 464.0f, 464.1f, 480.0f, 1e9f, 3.4e38f,
                                INFINITY, -INFINITY, 0.0f, -0.0f, NAN, -NAN, 1e-30f, 1e-45f,
                                0x1p-10f, 0x1.8p-10f, 0x1p-9f, 0x1.7p-7f, 0x1.fp-7f};
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
    check_round(edges[i]);
    check_round(-edges[i]);
    checked += 2;
  }
  kg_rng r = kg_rng_new(88);
  for (int i = 0; i < 200000; i++) {
    const float v = (float)(ldexp(kg_uniform(&r, 1, 2), (int)(kg_u32(&r) % 25) - 14) *
                            (kg_u32(&r) & 1 ? -1 : 1));
    check_round(v);
    checked++;
  }
  printf("e4m3 rounding: %u values, %u differ from the format's nearest (ties to even)\n", checked,
         n_bad_codes);
  assert_int_equal(n_bad_codes, 0);
  /* saturation at 448 both ways, and NaN kept */
  assert_int_equal(f32_100::kiln_e4m3_rne(1e6f), 0x7e);
  assert_int_equal(f32_100::kiln_e4m3_rne(-INFINITY), 0xfe);
  assert_int_equal(f32_100::kiln_e4m3_rne(NAN) & 0x7f, 0x7f);
}

static void test_scale(void **state) {
  (void)state;
  assert_true(f32_100::kiln_fp8_scale(448.0f) == 1.0f);
  assert_true(f32_100::kiln_fp8_scale(7.0f) == 7.0f / 448.0f);
  assert_true(f32_100::kiln_fp8_scale(0.0f) == 1.0f);        /* an all-zero row */
  assert_true(f32_100::kiln_fp8_scale(NAN) == 1.0f);         /* a NaN stays a NaN */
  assert_true(f32_100::kiln_fp8_scale(INFINITY) == 1.0f);
  assert_true(f32_100::kiln_fp8_scale(1e-44f) == 1.0f);      /* amax / 448 underflows to 0 */
  assert_true(f32_100::kiln_fp8_scale(0x1p-100f) == 0x1p-100f / 448.0f);
}

/* ---- the kernels ------------------------------------------------------ */

/* Checks `n` rows of `k` values (v, row-major) against what the kernel
 * wrote: n rows of k16 bytes, then n f32 scales. Returns mismatches. */
static int check_operand(const char *what, const float *v, long long k, long long k16, int n,
                         const unsigned char *out) {
  int bad = 0;
  const float *scales = reinterpret_cast<const float *>(out + (long long)n * k16);
  for (int r = 0; r < n; r++) {
    const float s = ref_scale(v + r * k, k);
    if (memcmp(&s, &scales[r], 4) != 0 && bad++ < 5)
      printf("  %s row %d: scale %a, the reference %a\n", what, r, (double)scales[r], (double)s);
    for (long long i = 0; i < k16; i++) {
      const unsigned char want = i < k ? ref_e4m3(v[r * k + i] / s) : 0;
      if (out[r * k16 + i] != want && bad++ < 5)
        printf("  %s row %d [%lld]: 0x%02x, the reference 0x%02x\n", what, r, i,
               out[r * k16 + i], want);
    }
  }
  return bad;
}

typedef const char *(*rows_fn)(unsigned, const unsigned char *, unsigned char *, int, int);

/* One weight type's tile: 7 rows, grids of 1, 3 and 11 blocks. */
static int tile_case(kiln_type type, long long k, long long k16, rows_fn rows, uint64_t seed) {
  const int n = 7;
  kg_rng r = kg_rng_new(seed);
  uint8_t *w = kg_pack_weight(type, k, n, 0, 0, &r);
  float *v = kg_dequant(type, w, k, n);
  std::vector<unsigned char> tile((size_t)(n * (k16 + 4)));
  int bad = 0;
  static const unsigned grids[] = {1, 3, 11};
  for (unsigned g : grids) {
    memset(tile.data(), 0xcd, tile.size()); /* the padding must be written */
    const char *err = rows(g, w, tile.data(), n, n);
    if (err) fail_msg("fp8_rows %s: %s", kiln_type_name(type), err);
    char what[64];
    snprintf(what, sizeof what, "fp8_rows %s grid %u", kiln_type_name(type), g);
    bad += check_operand(what, v, k, k16, n, tile.data());
  }
  /* padded to 16 rows (the GEMM's tiles are whole 16s): the 7 rows and
   * their scales as before, 9 zero rows of scale 1 */
  std::vector<unsigned char> padded((size_t)(16 * (k16 + 4)), 0xcd);
  if (const char *err = rows(4, w, padded.data(), n, 16)) fail_msg("fp8_rows: %s", err);
  if (memcmp(padded.data(), tile.data(), (size_t)(n * k16)) != 0 ||
      memcmp(padded.data() + 16 * k16, tile.data() + n * k16, (size_t)n * 4) != 0)
    bad++, printf("  fp8_rows %s padded: the real rows differ\n", kiln_type_name(type));
  for (long long i = n * k16; i < 16 * k16; i++)
    if (padded[(size_t)i] != 0) {
      bad++, printf("  fp8_rows %s padded: byte %lld is 0x%02x\n", kiln_type_name(type), i, padded[(size_t)i]);
      break;
    }
  const float *ps = reinterpret_cast<const float *>(padded.data() + 16 * k16);
  for (int r = n; r < 16; r++)
    if (ps[r] != 1.0f) bad++, printf("  fp8_rows %s padded: row %d scale %g\n", kiln_type_name(type), r, (double)ps[r]);
  printf("fp8_rows %-4s K = %lld (%lld bytes a row): %s\n", kiln_type_name(type), k, k16,
         bad ? "DIFFER" : "bit for bit");
  free(v);
  free(w);
  return bad;
}
#define TILE_CASE(ns, seed) tile_case(ns::type, ns::k, ns::k16, ns::rows, seed)

static void test_rows(void **state) {
  (void)state;
  int bad = TILE_CASE(f32_100, 1) + TILE_CASE(f16_100, 2) + TILE_CASE(q8_0_512, 3) +
            TILE_CASE(q4_k_512, 4) + TILE_CASE(q6_k_512, 5);
  assert_int_equal(bad, 0);
}

/* Activations [K = 100, 6]: outliers of 30x, column 3 all zeros, column 4
 * column 1 times 2^20, column 5 with a NaN (its scale 1, the NaN kept). */
static void make_input(std::vector<float> &x, long long k) {
  const int n = 6;
  x.assign((size_t)(k * n), 0.0f);
  kg_rng r = kg_rng_new(77);
  kg_fill(&r, x.data(), k * n, -1, 1);
  for (long long i = 0; i < k * n; i += 41) x[i] *= 30.0f;
  for (long long i = 0; i < k; i++) {
    x[3 * k + i] = 0.0f;
    x[4 * k + i] = x[1 * k + i] * 0x1p20f;
  }
  x[5 * k + 7] = NAN;
}

static void test_input(void **state) {
  (void)state;
  const long long k = f32_100::k, k16 = f32_100::k16;
  const int n = 6;
  std::vector<float> x;
  make_input(x, k);
  std::vector<unsigned char> y((size_t)(n * (k16 + 4)));
  int bad = 0;
  static const unsigned grids[] = {1, 4, 9};
  for (unsigned g : grids) {
    memset(y.data(), 0xcd, y.size());
    const char *err = f32_100::input(g, x.data(), y.data(), n, n);
    if (err) fail_msg("fp8_input: %s", err);
    bad += check_operand("fp8_input", x.data(), k, k16, n, y.data());
  }
  const float *s = reinterpret_cast<const float *>(y.data() + n * k16);
  /* the scale is the token's own: 2^20 times the values, 2^20 times the
   * scale, the same bytes */
  assert_true(s[4] == s[1] * 0x1p20f);
  assert_memory_equal(y.data() + 4 * k16, y.data() + 1 * k16, (size_t)k16);
  assert_true(s[3] == 1.0f && s[5] == 1.0f);
  assert_int_equal(y[5 * k16 + 7] & 0x7f, 0x7f);
  printf("fp8_input K = %lld, 6 columns: %s\n", k, bad ? "DIFFER" : "bit for bit");
  assert_int_equal(bad, 0);
}

/* Padded to 16 columns (the GEMM's fewest, cuda_gemm_fp8.c): the 6 columns
 * as before, then 10 of zeros with scale 1, the 16 scales after them;
 * nothing written past them. */
static void test_input_padded(void **state) {
  (void)state;
  const long long k = f32_100::k, k16 = f32_100::k16;
  const int n = 6, pad = 16;
  std::vector<float> x;
  make_input(x, k);
  std::vector<unsigned char> want((size_t)(n * (k16 + 4)));
  if (const char *err = f32_100::input(1, x.data(), want.data(), n, n)) fail_msg("fp8_input: %s", err);
  static const unsigned grids[] = {1, 5, 16, 40};
  for (unsigned g : grids) {
    std::vector<unsigned char> y((size_t)(pad * (k16 + 4) + 64), 0xcd);
    if (const char *err = f32_100::input(g, x.data(), y.data(), n, pad)) fail_msg("fp8_input: %s", err);
    assert_memory_equal(y.data(), want.data(), (size_t)(n * k16));
    for (long long i = n * k16; i < pad * k16; i++)
      if (y[(size_t)i] != 0) fail_msg("grid %u: padding byte %lld is 0x%02x", g, i, y[(size_t)i]);
    const float *s = reinterpret_cast<const float *>(y.data() + pad * k16);
    assert_memory_equal(s, want.data() + n * k16, (size_t)n * 4);
    for (int c = n; c < pad; c++)
      if (s[c] != 1.0f) fail_msg("grid %u: padding column %d has scale %g", g, c, (double)s[c]);
    for (size_t i = (size_t)(pad * (k16 + 4)); i < y.size(); i++) assert_int_equal(y[i], 0xcd);
  }
}

/* The GEMM cuBLASLt forms from the operands, in f64, against the f64
 * product of the values before rounding: per column, relative L2 and norm
 * ratio within FP8_TOL, and the rounding visible (above 2e-3). */
typedef const char *(*input_fn)(unsigned, const float *, unsigned char *, int, int);

static double gemm_case(kiln_type type, long long k, long long k16, rows_fn rows, input_fn input,
                        uint64_t seed) {
  const int n = 300, t = 3;
  kg_rng r = kg_rng_new(seed);
  uint8_t *w = kg_pack_weight(type, k, n, 0, 0, &r);
  float *wv = kg_dequant(type, w, k, n);
  std::vector<float> x((size_t)(k * t));
  kg_fill(&r, x.data(), k * t, -1, 1);
  for (long long i = 0; i < k * t; i += 41) x[i] *= 30.0f;
  std::vector<unsigned char> tile((size_t)(n * (k16 + 4))), xq((size_t)(t * (k16 + 4)));
  if (const char *err = rows(5, w, tile.data(), n, n)) fail_msg("fp8_rows: %s", err);
  if (const char *err = input(2, x.data(), xq.data(), t, t)) fail_msg("fp8_input: %s", err);
  const float *sa = reinterpret_cast<const float *>(tile.data() + n * k16);
  const float *sb = reinterpret_cast<const float *>(xq.data() + t * k16);
  double worst = 0, worst_ratio = 0;
  std::vector<float> y(n);
  std::vector<double> ref(n);
  for (int j = 0; j < t; j++) {
    for (int i = 0; i < n; i++) {
      double q = 0, e = 0;
      for (long long c = 0; c < k16; c++)
        q += ref_value(tile[i * k16 + c]) * ref_value(xq[j * k16 + c]);
      for (long long c = 0; c < k; c++) e += (double)wv[i * k + c] * x[j * k + c];
      y[i] = (float)(q * sa[i] * sb[j]);
      ref[i] = e;
    }
    kg_metrics m = kg_compare_f64(y.data(), ref.data(), n);
    if (m.rel_l2 > worst) worst = m.rel_l2;
    if (fabs(m.norm_ratio - 1) > worst_ratio) worst_ratio = fabs(m.norm_ratio - 1);
    if (!kg_close(&m, FP8_TOL))
      fail_msg("FP8 GEMM %s column %d: rel L2 %.3e, ratio %.6f", kiln_type_name(type), j,
               m.rel_l2, m.norm_ratio);
  }
  printf("FP8 GEMM %-4s %lld x %d, T = %d: worst rel L2 %.3e, |ratio - 1| %.3e (bound %g)\n",
         kiln_type_name(type), k, n, t, worst, worst_ratio, FP8_TOL);
  free(wv);
  free(w);
  return worst;
}
#define GEMM_CASE(ns, seed) gemm_case(ns::type, ns::k, ns::k16, ns::rows, ns::input, seed)

static void test_gemm(void **state) {
  (void)state;
  const double worst[] = {GEMM_CASE(f32_100, 11), GEMM_CASE(f16_100, 12), GEMM_CASE(q8_0_512, 13),
                          GEMM_CASE(q4_k_512, 14), GEMM_CASE(q6_k_512, 15)};
  for (double w : worst) assert_true(w > 2e-3); /* e4m3's rounding is there */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_e4m3_rounding), cmocka_unit_test(test_scale),
      cmocka_unit_test(test_rows),          cmocka_unit_test(test_input),
      cmocka_unit_test(test_input_padded),
      cmocka_unit_test(test_gemm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
