/* cpu backend, MUL_MAT: every weight type kiln reads (quantized with
 * kiln_quantize, decoded for the reference with kiln_dequantize and
 * multiplied in double), with and without a bias, on both sides of the
 * dot / GEMM switch, odd sizes, in both precisions, on the portable code
 * and the AVX2 kernels (whose int16 columns are checked against their
 * error bound); the AVX2 panels bit-exact to kiln_dequantize; the int16
 * column quantizer against its rule. */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"

#include "cpu_mm.h"
#include "test_cpu_common.h"

static const kiln_type all_types[] = {KILN_TYPE_F32,  KILN_TYPE_F16,  KILN_TYPE_BF16,
                                      KILN_TYPE_Q8_0, KILN_TYPE_Q4_0, KILN_TYPE_Q5_0,
                                      KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K};

static bool block_quantized(kiln_type t) {
  return t == KILN_TYPE_Q8_0 || t == KILN_TYPE_Q4_0 || t == KILN_TYPE_Q5_0 || t == KILN_TYPE_Q4_K ||
         t == KILN_TYPE_Q5_K || t == KILN_TYPE_Q6_K;
}

/* The columns as the int16 dot kernels see them, from cpu_mm.h's rule
 * written out again here: per block of 32, d = max|x| / 32767 (f32), q =
 * x * (32767 / max|x|) rounded to nearest-even; x^ = d * q. */
static void q16_reference(const float *x, int64_t K, double *xhat) {
  for (int64_t b = 0; b < K; b += 32) {
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[b + i]));
    for (int i = 0; i < 32; i++) {
      if (amax == 0.0f) {
        xhat[b + i] = 0.0;
        continue;
      }
      float q = nearbyintf(x[b + i] * (32767.0f / amax));
      xhat[b + i] = (double)(amax / 32767.0f) * (double)q;
    }
  }
}

/* W [K, N] of wtype times x [K, T] (+ bias [N] of btype, when has_bias), on
 * the given vector code. */
static void check_simd(cpu_simd simd, cpu_matvec matvec, cpu_precision prec, kiln_type wtype,
                       int64_t K, int64_t N, int64_t T, bool has_bias, kiln_type btype,
                       uint64_t seed) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 3, prec);
  ctx.simd = simd;
  ctx.matvec = matvec;
  const int64_t cap = T + 3;
  kct_rng rng = kct_rng_new(seed);
  float *w = kct_alloc((size_t)(K * N) * sizeof(float));
  float *x = kct_alloc((size_t)(K * cap) * sizeof(float));
  float *b = kct_alloc((size_t)N * sizeof(float));
  float *y = kct_alloc((size_t)(N * cap) * sizeof(float));
  double *ref = kct_alloc((size_t)(N * T) * sizeof(double));
  kct_fill(&rng, w, K * N, -1, 1);
  kct_fill(&rng, x, K * cap, -1, 1);
  kct_fill(&rng, b, N, -0.5, 0.5);
  uint64_t wbytes, bbytes = 0;
  void *wdata = kct_make_weight(wtype, w, K, N, &wbytes);
  float *wvals = kct_dequant_weight(wtype, wdata, K, N);
  void *bdata = has_bias ? kct_make_weight(btype, b, N, 1, &bbytes) : NULL;
  float *bvals = has_bias ? kct_dequant_weight(btype, bdata, N, 1) : NULL;

  kiln_tensor tw = kct_tensor(0, wtype, KILN_ROLE_WEIGHT, K, N, "blk.2.attn_q.weight");
  kiln_tensor tx = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, K, cap, "attn_norm-2");
  kiln_tensor tb = kct_tensor(2, btype, KILN_ROLE_WEIGHT, N, 1, "blk.2.attn_q.bias");
  kiln_tensor ty = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, N, cap, "Qcur-2");
  assert_int_equal(tw.nbytes, wbytes);
  kiln_node node =
      kct_node(KILN_OP_MUL_MAT, "blk.2.attn_q", &tw, &tx, has_bias ? &tb : NULL, &ty);
  kct_run_ok(&ctx, &node, wdata, x, bdata, y, (int32_t)T, 0);
  kct_ref_mul_mat(wvals, x, bvals, K, N, T, ref);

  char what[200];
  snprintf(what, sizeof what, "mul_mat %s [%lld, %lld] x T=%lld%s%s, %s, %s, matvec %s",
           kiln_type_name(wtype), (long long)K, (long long)N, (long long)T, has_bias ? " + bias " : "",
           has_bias ? kiln_type_name(btype) : "", prec ? "f64" : "f32", cpu_simd_name(simd),
           matvec == CPU_MATVEC_INT16 ? "int16" : "f32");
  const bool q16 = prec == CPU_PRECISION_F32 && simd == CPU_SIMD_AVX2 && block_quantized(wtype) &&
                   T <= CPU_MM_DOT_MAX_T && matvec == CPU_MATVEC_INT16;
  if (prec == CPU_PRECISION_F64) {
    kct_assert_rounded(what, y, ref, N, T, 1e-12);
  } else if (!q16) {
    kct_assert_close(what, y, ref, N, T, 1e-5);
  } else {
    /* The int16 columns: against the exact product, within the bound the
     * rounding allows (sum over blocks of max|x| / 65534 x sum |W| over the
     * block, plus f32 accumulation); against the product with the rounded
     * columns, at f32 accuracy; and close overall. */
    double *xhat = kct_alloc((size_t)(K * T) * sizeof(double));
    float *xh32 = kct_alloc((size_t)(K * T) * sizeof(float));
    double *ref_hat = kct_alloc((size_t)(N * T) * sizeof(double));
    for (int64_t t = 0; t < T; t++) q16_reference(x + t * K, K, xhat + t * K);
    for (int64_t i = 0; i < K * T; i++) xh32[i] = (float)xhat[i]; /* exact: 16-bit q times an f32 */
    kct_ref_mul_mat(wvals, xh32, bvals, K, N, T, ref_hat);
    for (int64_t t = 0; t < T; t++)
      for (int64_t n = 0; n < N; n++) {
        double bound = 0, mag = 0;
        for (int64_t k0 = 0; k0 < K; k0 += 32) {
          double amax = 0, wsum = 0;
          for (int i = 0; i < 32; i++) {
            amax = fmax(amax, fabs(x[t * K + k0 + i]));
            wsum += fabs(wvals[n * K + k0 + i]);
            mag += fabs(wvals[n * K + k0 + i] * x[t * K + k0 + i]);
          }
          bound += amax / 65534.0 * wsum;
        }
        double err = fabs((double)y[t * N + n] - ref[t * N + n]);
        if (!(err <= bound + 1e-6 * mag + 1e-7))
          fail_msg("%s, token %lld, row %lld: %.9g vs exact %.9g: error %.3g above the int16 bound %.3g",
                   what, (long long)t, (long long)n, (double)y[t * N + n], ref[t * N + n], err, bound);
      }
    kct_assert_close(what, y, ref_hat, N, T, 2e-6);
    kct_assert_close(what, y, ref, N, T, 1e-4);
    free(ref_hat);
    free(xh32);
    free(xhat);
  }

  free(bvals);
  free(bdata);
  free(wvals);
  free(wdata);
  free(ref);
  free(y);
  free(b);
  free(x);
  free(w);
  kct_ctx_close(&ctx);
}

/* On the portable code and, where this CPU has them, the AVX2 kernels with
 * int16 and with f32 decode columns. */
static void check(cpu_precision prec, kiln_type wtype, int64_t K, int64_t N, int64_t T,
                  bool has_bias, kiln_type btype, uint64_t seed) {
  check_simd(CPU_SIMD_PORTABLE, CPU_MATVEC_INT16, prec, wtype, K, N, T, has_bias, btype, seed);
  if (cpu_simd_detect() != CPU_SIMD_AVX2) return;
  check_simd(CPU_SIMD_AVX2, CPU_MATVEC_INT16, prec, wtype, K, N, T, has_bias, btype, seed);
  check_simd(CPU_SIMD_AVX2, CPU_MATVEC_F32, prec, wtype, K, N, T, has_bias, btype, seed);
}

static void test_every_type(void **state) {
  uint64_t seed = 100;
  if (cpu_simd_detect() != CPU_SIMD_AVX2) printf("no AVX2, FMA and F16C here: portable code only\n");
  for (int p = 0; p < 2; p++) {
    cpu_precision prec = (cpu_precision)p;
    for (size_t i = 0; i < sizeof all_types / sizeof all_types[0]; i++) {
      kiln_type t = all_types[i];
      check(prec, t, 512, 37, 1, false, KILN_TYPE_F32, seed++);
      check(prec, t, 512, 37, 7, true, KILN_TYPE_F32, seed++);
      check(prec, t, 256, 3, 7, false, KILN_TYPE_F32, seed++);
      check(prec, t, 2048, 64, 2, true, KILN_TYPE_F32, seed++); /* several row blocks */
      /* each side of the dot / GEMM switch, and a GEMM tail of columns */
      check(prec, t, 768, 29, CPU_MM_DOT_MAX_T, true, KILN_TYPE_F32, seed++);
      check(prec, t, 768, 29, CPU_MM_DOT_MAX_T + 1, false, KILN_TYPE_F32, seed++);
      check(prec, t, 256, 21, 11, false, KILN_TYPE_F32, seed++);
    }
  }
}

/* Sizes that are not multiples of anything: the lane tails of the dot
 * products, and a weight with fewer rows than threads. */
static void test_odd_sizes(void **state) {
  uint64_t seed = 200;
  static const kiln_type plain[] = {KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16};
  for (int p = 0; p < 2; p++) {
    for (size_t i = 0; i < 3; i++) {
      check((cpu_precision)p, plain[i], 67, 13, 7, true, KILN_TYPE_F32, seed++);
      check((cpu_precision)p, plain[i], 3, 5, 1, false, KILN_TYPE_F32, seed++);
      check((cpu_precision)p, plain[i], 17, 1, 7, true, KILN_TYPE_F32, seed++);
      check((cpu_precision)p, plain[i], 4099, 2, 1, false, KILN_TYPE_F32, seed++);
      check((cpu_precision)p, plain[i], 4099, 2, 3, false, KILN_TYPE_F32, seed++);
    }
    /* a bias that is not F32 */
    check((cpu_precision)p, KILN_TYPE_Q8_0, 96, 11, 7, true, KILN_TYPE_F16, seed++);
  }
}

/* The AVX2 deq kernels (the GEMM's panels) give kiln_dequantize's bits for
 * every type, from weight bytes that are random bit patterns (every
 * pattern of the quant fields is valid; scales set to finite f16 so that
 * NaN payloads do not hide a difference), and zeros past K. */
static void test_deq_exact(void **state) {
  if (cpu_simd_detect() != CPU_SIMD_AVX2) skip();
  kct_rng rng = kct_rng_new(400);
  for (size_t i = 0; i < sizeof all_types / sizeof all_types[0]; i++) {
    const kiln_type t = all_types[i];
    cpu_mm_kernels mm;
    assert_true(cpu_mm_kernels_avx2(t, &mm));
    assert_non_null(mm.dot_f32);
    assert_non_null(mm.deq);
    assert_int_equal(mm.dot_q16 != NULL, block_quantized(t));
    const int64_t K = t == KILN_TYPE_F32 || t == KILN_TYPE_F16 || t == KILN_TYPE_BF16 ? 1029 : 1024;
    const int64_t N = 5, rb = kiln_type_row_bytes(t, K), k8 = cpu_mm_k8(K);
    unsigned char *bytes = kct_alloc((size_t)(rb * N));
    for (int64_t j = 0; j < rb * N; j++) bytes[j] = (unsigned char)(kct_uniform(&rng, 0, 256));
    if (block_quantized(t)) {
      /* finite f16 scales where the format has them */
      const int64_t bs = kiln_type_block_size(t), bb = kiln_type_block_bytes(t);
      for (int64_t blk = 0; blk < rb * N / bb; blk++) {
        unsigned char *p = bytes + blk * bb;
        const uint16_t h = (uint16_t)(0x2000 + (int)kct_uniform(&rng, 0, 0x1000)); /* ~2^-7 .. 2^-5 */
        int at = t == KILN_TYPE_Q6_K ? 208 : 0;
        memcpy(p + at, &h, 2);
        if (t == KILN_TYPE_Q4_K || t == KILN_TYPE_Q5_K) memcpy(p + 2, &h, 2); /* dmin */
        (void)bs;
      }
    } else if (t == KILN_TYPE_F32) {
      for (int64_t j = 0; j < K * N; j++) {
        float v = (float)kct_uniform(&rng, -4, 4);
        memcpy(bytes + 4 * j, &v, 4);
      }
    } else {
      for (int64_t j = 0; j < K * N; j++) bytes[2 * j + 1] &= 0x7b; /* no inf / NaN exponents */
    }
    float *want = kct_dequant_weight(t, bytes, K, N);
    float *got = aligned_alloc(32, (size_t)(k8 * N) * sizeof(float));
    assert_non_null(got);
    for (int64_t j = 0; j < k8 * N; j++) got[j] = 1234.5f;
    mm.deq(bytes, rb, K, N, got, k8);
    for (int64_t r = 0; r < N; r++) {
      if (memcmp(got + r * k8, want + r * K, (size_t)K * sizeof(float)) != 0)
        fail_msg("deq %s row %lld differs from kiln_dequantize", kiln_type_name(t), (long long)r);
      for (int64_t k = K; k < k8; k++) assert_true(got[r * k8 + k] == 0.0f);
    }
    free(got);
    free(want);
    free(bytes);
  }
}

/* The int16 column quantizer against cpu_mm.h's rule: the same q, d and
 * block sums; a block of zeros gets d = 0; a non-finite value makes its
 * block's d NaN (never a silent zero). */
static void test_q16_quantize(void **state) {
  if (cpu_simd_detect() != CPU_SIMD_AVX2) skip();
  const int64_t K = 256;
  kct_rng rng = kct_rng_new(500);
  float *x = kct_alloc((size_t)K * sizeof(float));
  kct_fill(&rng, x, K, -3, 3);
  for (int i = 32; i < 64; i++) x[i] = 0.0f;               /* block 1: zeros */
  for (int i = 64; i < 96; i++) x[i] *= 1e-30f;             /* block 2: tiny */
  x[100] = 7.0f;                                            /* block 3: a clear maximum */
  x[101] = -7.0f;
  x[200] = NAN;                                             /* block 6 */
  void *buf = aligned_alloc(64, (size_t)cpu_mm_q16_bytes(K));
  assert_non_null(buf);
  cpu_mm_q16 q;
  cpu_mm_q16_quantize_avx2(x, K, buf, &q);
  for (int64_t b = 0; b < K / 32; b++) {
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
    if (b == 6) {
      assert_true(isnan(q.d[b]));
      continue;
    }
    if (amax == 0.0f) {
      assert_true(q.d[b] == 0.0f);
      assert_int_equal(q.s[b], 0);
      continue;
    }
    assert_true(q.d[b] == amax / 32767.0f);
    int32_t sum = 0;
    for (int i = 0; i < 32; i++) {
      const float want = nearbyintf(x[32 * b + i] * (32767.0f / amax));
      assert_true(fabsf(want) <= 32767.0f);
      assert_int_equal(q.q[32 * b + i], (int)want);
      sum += (int32_t)want;
    }
    assert_int_equal(q.s[b], sum);
  }
  assert_int_equal(q.q[100], 32767);
  assert_int_equal(q.q[101], -32767);
  free(buf);
  free(x);
}

/* An F32 weight that is not 4-byte aligned (not from a GGUF file) gives
 * the same bits as an aligned one. */
static void test_unaligned_f32_weight(void **state) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 2, CPU_PRECISION_F32);
  const int64_t K = 33, N = 9, T = 2;
  kct_rng rng = kct_rng_new(300);
  float w[33 * 9], x[33 * 2], y[9 * 2], y2[9 * 2];
  kct_fill(&rng, w, K * N, -1, 1);
  kct_fill(&rng, x, K * T, -1, 1);
  unsigned char *raw = kct_alloc(sizeof w + 8);
  memcpy(raw + 2, w, sizeof w);
  kiln_tensor tw = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_WEIGHT, K, N, "w");
  kiln_tensor tx = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, K, T, "x");
  kiln_tensor ty = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, N, T, "y");
  kiln_node node = kct_node(KILN_OP_MUL_MAT, "mm", &tw, &tx, NULL, &ty);
  kct_run_ok(&ctx, &node, w, x, NULL, y, T, 0);
  kct_run_ok(&ctx, &node, raw + 2, x, NULL, y2, T, 0);
  assert_memory_equal(y, y2, sizeof y);
  free(raw);
  kct_ctx_close(&ctx);
}

static void test_bad_nodes(void **state) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 1, CPU_PRECISION_F32);
  kiln_tensor tw = kct_tensor(0, KILN_TYPE_Q4_K, KILN_ROLE_WEIGHT, 512, 32, "blk.0.ffn_up.weight");
  kiln_tensor tx = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 512, 4, "x");
  kiln_tensor tb = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_WEIGHT, 32, 1, "b");
  kiln_tensor ty = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 32, 4, "y");
  kiln_node node = kct_node(KILN_OP_MUL_MAT, "blk.0.ffn_up", &tw, &tx, &tb, &ty);
  KT_ASSERT_OK(cpu_node_validate(&ctx, &node));

  tx.ne[0] = 511;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "blk.0.ffn_up");
  tx.ne[0] = 512;
  ty.ne[0] = 31;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "row count 32");
  ty.ne[0] = 32;
  tb.ne[0] = 33;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "bias");
  tb.ne[0] = 32;
  /* K = 500 is not a whole number of Q4_K blocks of 256 */
  tw.ne[0] = tx.ne[0] = 500;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "Q4_K");
  /* and of Q5_K's, naming the weight */
  tw.type = KILN_TYPE_Q5_K;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT,
                "'blk.0.ffn_up.weight': row length 500 is not a whole number of Q5_K blocks of "
                "256 values");
  tw.type = KILN_TYPE_Q4_K;
  tw.ne[0] = tx.ne[0] = 512;
  /* nbytes too small for the shape */
  tw.nbytes -= 1;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "nbytes");
  tw.nbytes += 1;
  /* a missing source */
  node.src[1] = NULL;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &node), KILN_STATUS_INVALID_ARGUMENT, "src1 is missing");
  node.src[1] = &tx;
  /* types the backend does not take */
  tw.type = KILN_TYPE_I32;
  KT_ASSERT_ERR(cpu_node_supports(&ctx, &node), KILN_STATUS_UNSUPPORTED, "I32");
  tw.type = (kiln_type)3; /* ggml's Q4_1: not read by kiln */
  KT_ASSERT_ERR(cpu_node_supports(&ctx, &node), KILN_STATUS_UNSUPPORTED, "id 3");
  tw.type = KILN_TYPE_Q4_K;
  tx.type = KILN_TYPE_F16;
  KT_ASSERT_ERR(cpu_node_supports(&ctx, &node), KILN_STATUS_UNSUPPORTED, "src1");
  tx.type = KILN_TYPE_F32;
  KT_ASSERT_OK(cpu_node_supports(&ctx, &node));

  /* dst overlapping the input is refused at run time, not computed wrong */
  kiln_tensor tw2 = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_WEIGHT, 8, 8, "w");
  kiln_tensor tx2 = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 8, 1, "x");
  kiln_tensor ty2 = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 8, 1, "y");
  kiln_node n2 = kct_node(KILN_OP_MUL_MAT, "mm_inplace", &tw2, &tx2, NULL, &ty2);
  float w[64] = {0}, xy[8] = {0};
  KT_ASSERT_ERR(kct_run(&ctx, &n2, w, xy, NULL, xy, 1, 0), KILN_STATUS_INVALID_ARGUMENT,
                "overlaps");
  kct_ctx_close(&ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_type),
      cmocka_unit_test(test_odd_sizes),
      cmocka_unit_test(test_deq_exact),
      cmocka_unit_test(test_q16_quantize),
      cmocka_unit_test(test_unaligned_f32_weight),
      cmocka_unit_test(test_bad_nodes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
