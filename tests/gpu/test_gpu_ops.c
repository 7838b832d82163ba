/* Single ops on every CUDA backend through the plugin's ops table, against
 * float64 references and the cpu backend (precision = f64):
 *   - quantized matvec for Q4_K, Q5_K, Q6_K and Q8_0 with K = 768, 1280,
 *     2816 and 2176 (not a multiple of any tile; not a whole number of
 *     K-quant blocks, so the K-quants must be refused there, naming the
 *     weight, and 2304 = 9 x 256 is run instead), hand-packed blocks, with device buffers, tensor
 *     padding, unused columns and the GEMM scratch tile
 *     poisoned with 0xFF bytes, then with 0x5A: results finite, NMSE <=
 *     1e-6 against f64, bit-identical across poisons, unused output columns
 *     untouched; one token (matvec) and three (cuda-batched's GEMM);
 *     (test_gpu_bounds has the weights that end exactly where their
 *     allocation ends);
 *   - MUL_MAT for every weight type, with and without bias, T = 1 and 5;
 *     the batched flavors' prefill GEMM in each gemm mode (bf16x3, tf32,
 *     bf16, q16mma, fp8, tf32x3) within that mode's accuracy, over several tiles
 *     (fp8 on compute capability 9.0 or more also no closer than 2e-3: its
 *     rounding is there, so it is not bf16x3 that ran), and bf16x3's
 *     converted activations (q16mma's quantized ones) reused by the next
 *     GEMM of the same input but not after a node rewrites it, nor by a
 *     GEMM of the other form; describe_modes under q16mma counting a Q4_K
 *     GEMM (K = 256) as q16mma and an F16 one as its bf16x3 fallback;
 *   - attention whose raw q.k reaches 115200 (finite, equal to cpu's),
 *     and random GQA attention at several head sizes;
 *   - RoPE NORM / NEOX (partial rotation too), GET_ROWS of every type
 *     (bit-exact to kiln_dequantize), an out-of-range token id, SWIGLU,
 *     ADD, per-head RMSNorm, GET_COLUMNS (exact copies; a column id past
 *     the source refused).
 * Each case is measured and printed; the suite asserts at the end of each
 * test, so one device run reports everything. */
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

#include "gpu_common.h"
#include "kiln/dequant.h"
#include "kiln/half.h"
#include "testutil.h"

static const kiln_type all_types[] = {KILN_TYPE_F32,  KILN_TYPE_F16,  KILN_TYPE_BF16,
                                      KILN_TYPE_Q4_0, KILN_TYPE_Q5_0, KILN_TYPE_Q8_0,
                                      KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

/* ---- quantized matvec with poison ------------------------------------------- */

static const kiln_type mv_types[] = {KILN_TYPE_Q4_K, KILN_TYPE_Q6_K, KILN_TYPE_Q8_0,
                                     KILN_TYPE_Q5_K};
static const int64_t mv_ks[] = {768, 1280, 2816, 2176, 2304};
#define MV_N 67    /* weight rows: not a multiple of any rows-per-block */
#define MV_CAP 4   /* activation capacity: columns past T are poison */
#define MV_PAD 96  /* bytes of padding after the weight's rows */
#define N_MV_TYPES 4
#define N_MV_KS 5

typedef struct mv_result {
  bool refused; /* K not a whole number of blocks: prepare refused it */
  float *y;     /* [MV_N, MV_CAP] as downloaded */
} mv_result;

static const uint8_t poisons[2] = {0xFF, 0x5A};

/* Runs every case on backend b with the given poison; fills res[type][k][t]. */
static int run_mv_cases(kiln_backend *be, uint8_t poison, mv_result res[N_MV_TYPES][N_MV_KS][2]) {
  int bad = 0;
  for (int ti = 0; ti < N_MV_TYPES; ti++)
    for (int ki = 0; ki < N_MV_KS; ki++)
      for (int tt = 0; tt < 2; tt++) {
        const kiln_type type = mv_types[ti];
        const int64_t K = mv_ks[ki];
        const int32_t T = tt ? 3 : 1;
        mv_result *out = &res[ti][ki][tt];
        const bool whole = K % kiln_type_block_size(type) == 0;
        kg_rng r = kg_rng_new((uint64_t)(1000 + 10 * ti + ki));
        kg_op op;
        memset(&op, 0, sizeof op);
        op.n_tensors = 3;
        op.t[0] = kg_tensor(0, type, KILN_ROLE_WEIGHT, K, MV_N, MV_PAD, "blk.0.ffn_down.weight");
        op.t[1] = kg_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, K, MV_CAP, 0, "ffn_in");
        op.t[2] = kg_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, MV_N, MV_CAP, 0, "ffn_out");
        uint8_t *w = whole ? kg_pack_weight(type, K, MV_N, MV_PAD, poison, &r) : kg_alloc(MV_PAD);
        if (!whole) memset(w, poison, MV_PAD);
        float *x = kg_alloc((size_t)K * MV_CAP * sizeof(float));
        memset(x, poison, (size_t)K * MV_CAP * sizeof(float));
        kg_fill(&r, x, K * T, -1, 1);
        uint8_t *y0 = kg_alloc(op.t[2].nbytes);
        memset(y0, poison, op.t[2].nbytes);
        op.data[0] = w;
        op.data[1] = x;
        op.data[2] = y0;
        op.node.id = 0;
        op.node.op = KILN_OP_MUL_MAT;
        op.node.layer = 0;
        op.node.src[0] = &op.t[0];
        op.node.src[1] = &op.t[1];
        op.node.dst = &op.t[2];
        snprintf(op.node.name, sizeof op.node.name, "blk.0.ffn_down");
        out->y = kg_alloc(op.t[2].nbytes);
        kiln_status st = kg_run_op(be, &op, T, 0, out->y);
        if (!whole) {
          out->refused = st && kiln_status_code_of(st) == KILN_STATUS_INVALID_ARGUMENT &&
                         strstr(kiln_status_message(st), "not a whole number") &&
                         strstr(kiln_status_message(st), "'blk.0.ffn_down.weight'");
          printf("  %-12s %-4s K=%lld T=%d poison 0x%02X: %s: %s\n", be->name,
                 kiln_type_name(type), (long long)K, T, poison,
                 out->refused ? "refused as it must be" : "NOT REFUSED",
                 st ? kiln_status_message(st) : "(ran)");
          if (!out->refused) bad++;
          kiln_status_free(st);
        } else if (st) {
          printf("  FAIL %-12s %-4s K=%lld T=%d: %s\n", be->name, kiln_type_name(type),
                 (long long)K, T, kiln_status_message(st));
          kiln_status_free(st);
          bad++;
        } else {
          /* f64 reference from the host dequantizer */
          float *wv = kg_dequant(type, w, K, MV_N);
          double num = 0, den = 0;
          bool finite = true;
          for (int32_t t = 0; t < T; t++)
            for (int64_t n = 0; n < MV_N; n++) {
              double ref = 0;
              for (int64_t k = 0; k < K; k++)
                ref += (double)wv[n * K + k] * (double)x[(int64_t)t * K + k];
              double got = out->y[(int64_t)t * MV_N + n];
              if (!isfinite(got)) finite = false;
              num += (got - ref) * (got - ref);
              den += ref * ref;
            }
          double nmse = num / den;
          /* the columns the step does not cover keep the poison */
          bool untouched = true;
          for (uint64_t i = (uint64_t)T * MV_N * 4; i < op.t[2].nbytes; i++)
            if (((uint8_t *)out->y)[i] != poison) untouched = false;
          bool ok = finite && nmse <= 1e-6 && untouched;
          printf("  %-12s %-4s K=%-4lld T=%d poison 0x%02X: NMSE %.3e, finite %s, unused columns "
                 "%s%s\n",
                 be->name, kiln_type_name(type), (long long)K, T, poison, nmse,
                 finite ? "yes" : "NO", untouched ? "untouched" : "WRITTEN", ok ? "" : "  FAIL");
          if (!ok) bad++;
          free(wv);
        }
        free(y0);
        free(x);
        free(w);
      }
  return bad;
}

static int compare_poisons(mv_result res[2][KG_N_BACKENDS][N_MV_TYPES][N_MV_KS][2],
                           const char *mode);

/* In the f32 and q16 activations modes (matvec and quantize + matvec_q). */
static void test_quantized_matvec_poison(void **state) {
  static mv_result res[2][KG_N_BACKENDS][N_MV_TYPES][N_MV_KS][2];
  int bad = 0;
  for (int mv_mode = 0; mv_mode < 2; mv_mode++)
  for (int p = 0; p < 2; p++) {
    char v[8];
    snprintf(v, sizeof v, "%d", poisons[p]);
    kiln_config_override ov[] = {{"cuda-serial", "poison", v, "test"},
                                 {"cuda-batched", "poison", v, "test"},
                                 {"cuda-cc120", "poison", v, "test"}};
    kiln_runtime *rt = kg_runtime_mode(kg_modes[mv_mode], true, ov, 3);
    for (int b = 0; b < KG_N_BACKENDS; b++) {
      kiln_backend *be = kg_backend_open(rt, kg_backends[b]);
      bad += run_mv_cases(be, poisons[p], res[p][b]);
      kiln_backend_close(be);
    }
    kiln_runtime_free(rt);
    if (p == 1) bad += compare_poisons(res, kg_modes[mv_mode]);
  }
  printf("quantized matvec with poison: %d failures\n", bad);
  assert_int_equal(bad, 0);
}

/* The step's columns are bit for bit the same under both poisons; frees
 * the results. */
static int compare_poisons(mv_result res[2][KG_N_BACKENDS][N_MV_TYPES][N_MV_KS][2],
                           const char *mode) {
  int bad = 0;
  for (int b = 0; b < KG_N_BACKENDS; b++)
    for (int ti = 0; ti < N_MV_TYPES; ti++)
      for (int ki = 0; ki < N_MV_KS; ki++)
        for (int tt = 0; tt < 2; tt++) {
          mv_result *a = &res[0][b][ti][ki][tt], *c = &res[1][b][ti][ki][tt];
          if (!a->refused && !c->refused &&
              memcmp(a->y, c->y, (size_t)(tt ? 3 : 1) * MV_N * sizeof(float)) != 0) {
            printf("  FAIL %s %s %s K=%lld T=%d: results differ between poison 0xFF and 0x5A\n",
                   kg_backends[b], mode, kiln_type_name(mv_types[ti]), (long long)mv_ks[ki],
                   tt ? 3 : 1);
            bad++;
          }
          free(a->y);
          free(c->y);
          a->y = c->y = NULL;
        }
  return bad;
}

/* ---- MUL_MAT of every type, with bias ---------------------------------------- */

/* One MUL_MAT of a K x N `type` weight on T tokens (bias of btype, or
 * none: KILN_TYPE_COUNT) on backend be against f64 of the dequantized
 * weight: every token column within tol (rel L2 and norm ratio). The
 * number of failures (0 or 1). */
/* The worst relative L2 error of the last mul_mat_case. */
static double last_worst;

static int mul_mat_case(kiln_backend *be, kiln_type type, int64_t K, int64_t N, int32_t T,
                        kiln_type btype, uint64_t seed, double tol, const char *mode) {
  const int64_t CAP = T > 6 ? T : 6;
  const bool has_bias = btype != KILN_TYPE_COUNT;
  kg_rng r = kg_rng_new(seed);
  kg_op op;
  memset(&op, 0, sizeof op);
  op.n_tensors = 4;
  const kiln_type bt = has_bias ? btype : KILN_TYPE_F32;
  op.t[0] = kg_tensor(0, type, KILN_ROLE_WEIGHT, K, N, 0, "blk.1.attn_q.weight");
  op.t[1] = kg_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, K, CAP, 0, "x");
  op.t[2] = kg_tensor(2, bt, KILN_ROLE_WEIGHT, N, 1, 0, "blk.1.attn_q.bias");
  op.t[3] = kg_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, N, CAP, 0, "q");
  uint8_t *w = kg_pack_weight(type, K, N, 0, 0, &r);
  uint8_t *bias = kg_pack_weight(bt, N, 1, 0, 0, &r);
  float *x = kg_alloc((size_t)(K * CAP) * sizeof(float));
  kg_fill(&r, x, K * CAP, -1, 1);
  for (int64_t i = 0; i < K * CAP; i += 41) x[i] *= 30.0f; /* outliers */
  float *y = kg_alloc(op.t[3].nbytes);
  op.data[0] = w;
  op.data[1] = x;
  op.data[2] = bias;
  op.node.op = KILN_OP_MUL_MAT;
  op.node.src[0] = &op.t[0];
  op.node.src[1] = &op.t[1];
  op.node.src[2] = has_bias ? &op.t[2] : NULL;
  op.node.dst = &op.t[3];
  snprintf(op.node.name, sizeof op.node.name, "blk.1.attn_q");
  int bad = 0;
  kiln_status st = kg_run_op(be, &op, T, 0, y);
  if (st) {
    printf("  FAIL %s %s %s: %s\n", be->name, mode, kiln_type_name(type), kiln_status_message(st));
    kiln_status_free(st);
    bad = 1;
  } else {
    float *wv = kg_dequant(type, w, K, N), *bv = kg_dequant(bt, bias, N, 1);
    double worst = 0, worst_ratio = 0;
    double *ref = kg_alloc((size_t)N * sizeof(double));
    for (int32_t t = 0; t < T; t++) {
      for (int64_t n = 0; n < N; n++) {
        ref[n] = has_bias ? bv[n] : 0.0;
        for (int64_t k = 0; k < K; k++) ref[n] += (double)wv[n * K + k] * x[t * K + k];
      }
      kg_metrics m = kg_compare_f64(y + t * N, ref, N);
      if (m.rel_l2 > worst) worst = m.rel_l2;
      if (fabs(m.norm_ratio - 1) > worst_ratio) worst_ratio = fabs(m.norm_ratio - 1);
      if (!kg_close(&m, tol)) bad = 1;
    }
    printf("  %-12s %-6s mul_mat %-4s %lldx%lld T=%d%s: max rel L2 %.3e, max |ratio-1| %.3e%s\n",
           be->name, mode, kiln_type_name(type), (long long)K, (long long)N, T,
           !has_bias ? "" : btype == KILN_TYPE_F32 ? " + F32 bias" : " + F16 bias", worst,
           worst_ratio, bad ? "  FAIL" : "");
    last_worst = worst;
    free(ref);
    free(wv);
    free(bv);
  }
  free(y);
  free(x);
  free(bias);
  free(w);
  return bad;
}

static void test_mul_mat_every_type(void **state) {
  kiln_runtime *rt = kg_runtime_mode("f32", true, NULL, 0);
  int bad = 0;
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    kiln_backend *be = kg_backend_open(rt, kg_backends[b]);
    for (size_t ti = 0; ti < N_TYPES; ti++)
      for (int variant = 0; variant < 3; variant++) /* 0: T=1 no bias; 1: T=5 F32 bias; 2: F16 */
        bad += mul_mat_case(be, all_types[ti], 512, 37, variant ? 5 : 1,
                            variant == 0   ? KILN_TYPE_COUNT
                            : variant == 1 ? KILN_TYPE_F32
                                           : KILN_TYPE_F16,
                            500 + ti * 3 + (size_t)variant, 1e-5, "f32");
    kiln_backend_close(be);
  }
  kiln_runtime_free(rt);
  assert_int_equal(bad, 0);
}

/* The device's compute capability as 10 major + minor (89: 8.9), from
 * the plugin's probe; 0 when it does not say. */
static int device_cc(kiln_runtime *rt, const char *name) {
  kiln_plugin *p;
  KT_ASSERT_OK(kiln_plugin_registry_get(kiln_runtime_plugins(rt), name, &p));
  kiln_probe_info info;
  KT_ASSERT_OK(kiln_plugin_probe(p, &info));
  const char *c = strstr(info.detail, "compute capability ");
  int major = 0, minor = 0;
  if (!c || sscanf(c, "compute capability %d.%d", &major, &minor) != 2) return 0;
  return 10 * major + minor;
}

/* The batched flavors' prefill GEMM in every gemm mode, every weight type,
 * against f64, each within its mode's accuracy (cuda_gemm.c): bf16x3 as
 * close as f32, tf32x3 within 2e-6 (f32's grade: test_gemm_operand_host
 * measures its operands' sums at 3-8e-8; not yet run on a device), tf32
 * and bf16 within their coarser bounds, q16mma within
 * q16's rounding of x (the block weights on mmq: about 5e-5 with these
 * outliers, one in 41 values 30x; F32, F16 and BF16 weights fall back to
 * bf16x3), fp8 within its own bound (cuda_gemm_fp8.c: e4m3 keeps 3
 * mantissa bits, so a GEMM lands 3-4e-2 from f64; test_fp8_host measures
 * the same kernels' operands on the host); a 1 MiB tile makes a 700-row
 * weight take several tiles (mmq: five 128-row tiles and a partial one,
 * T = 9 a partial 64-token tile; q16mma again with mmq_shape = 64,32,8,1:
 * eleven 64-row tiles, one 32-token tile of 9, the next step prefetched
 * into registers), and K = 100 (F32, F16,
 * BF16) rows that are no multiple of 8 (nor of 16: fp8 pads them). Every
 * buffer and scratch starts as 0xFF bytes (NaN): an output element no
 * GEMM wrote fails as non-finite. fp8's bound is 8e-2: its Q4_K cases
 * measured 4.1-6.0e-2 on the H100 (2026-12-07; 6.02e-2 at K = 14336, T = 3,
 * tiles of 73 rows padded to 80), well above the 2e-3 floor that shows
 * e4m3 was used. */
static void test_mul_mat_gemm_modes(void **state) {
  static const char *const modes[] = {"bf16x3", "tf32", "bf16", "q16mma", "q16mma", "fp8", "tf32x3"};
  static const char *const mmq_shapes[] = {"auto", "auto", "auto", "auto", "64,32,8,1", "auto", "auto"};
  static const double tols[] = {2e-5, 2e-3, 1.5e-2, 2e-4, 2e-4, 8e-2, 2e-6};
  int bad = 0;
  for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
    const kiln_config_override ov[] = {
        {"cuda-batched", "gemm", modes[mi], "test"},
        {"cuda-cc120", "gemm", modes[mi], "test"},
        {"cuda-batched", "gemm_scratch_mib", "1", "test"},
        {"cuda-cc120", "gemm_scratch_mib", "1", "test"},
        {"cuda-batched", "mmq_shape", mmq_shapes[mi], "test"},
        {"cuda-cc120", "mmq_shape", mmq_shapes[mi], "test"},
        {"cuda-batched", "poison", "255", "test"},
        {"cuda-cc120", "poison", "255", "test"},
    };
    if (strcmp(mmq_shapes[mi], "auto") != 0) printf("mmq_shape = %s\n", mmq_shapes[mi]);
    kiln_runtime *rt = kg_runtime_mode("f32", true, ov, sizeof ov / sizeof ov[0]);
    for (int b = 0; b < KG_N_BACKENDS; b++) {
      if (strcmp(kg_backends[b], "cuda-serial") == 0) continue; /* no GEMM: one token at a time */
      kiln_backend *be = kg_backend_open(rt, kg_backends[b]);
      /* below 9.0 fp8 takes bf16x3, with a warning (cuda_plugin.c) */
      const bool fp8 = strcmp(modes[mi], "fp8") == 0 && device_cc(rt, kg_backends[b]) >= 90;
      for (size_t ti = 0; ti < N_TYPES; ti++) {
        const kiln_type t = all_types[ti];
        bad += mul_mat_case(be, t, 512, 700, 9, KILN_TYPE_F32, 900 + ti, tols[mi], modes[mi]);
        if (fp8 && last_worst <= 2e-3) {
          printf("  FAIL %s fp8 %s: rel L2 %.3e, too close for e4m3: was FP8 used?\n",
                 kg_backends[b], kiln_type_name(t), last_worst);
          bad++;
        }
        if (!kiln_type_is_quantized(t))
          bad += mul_mat_case(be, t, 100, 37, 3, KILN_TYPE_COUNT, 950 + ti, tols[mi], modes[mi]);
      }
      /* fp8: 700 and 37 rows go through its aligned output buffer; an N
       * of whole 16s is written straight into Y, here in three tiles of
       * 1920, 1920 and 256 rows; at K = 14336 the 1 MiB scratch holds 73
       * rows, tiles whose starts are no whole 16s: the buffer again */
      if (strcmp(modes[mi], "fp8") == 0) {
        bad += mul_mat_case(be, KILN_TYPE_Q4_K, 512, 4096, 9, KILN_TYPE_F32, 990, tols[mi],
                            modes[mi]);
        bad += mul_mat_case(be, KILN_TYPE_Q4_K, 14336, 256, 3, KILN_TYPE_F32, 991, tols[mi],
                            modes[mi]);
      }
      kiln_backend_close(be);
    }
    kiln_runtime_free(rt);
  }
  /* a shape mmq.cu.tmpl cannot take is refused when the backend opens,
   * naming the key: 128 x 128 needs 62 KiB of static shared memory */
  const kiln_config_override big[] = {{"cuda-batched", "mmq_shape", "128,128,4", "test"}};
  kiln_runtime *rt = kg_runtime_mode("f32", true, big, 1);
  kiln_plugin *p;
  KT_ASSERT_OK(kiln_plugin_registry_get(kiln_runtime_plugins(rt), "cuda-batched", &p));
  kiln_backend *be = NULL;
  kiln_status st = kiln_backend_open(p, kiln_runtime_config(rt), &be);
  const bool refused = st && kiln_status_code_of(st) == KILN_STATUS_INVALID_ARGUMENT &&
                       strstr(kiln_status_message(st), "mmq_shape = 128,128,4");
  printf("  cuda-batched mmq_shape = 128,128,4: %s: %s\n", refused ? "refused" : "NOT REFUSED",
         st ? kiln_status_message(st) : "(opened)");
  if (!refused) bad++;
  kiln_status_free(st);
  if (be) kiln_backend_close(be);
  kiln_runtime_free(rt);
  assert_int_equal(bad, 0);
}

/* The converted activations of the 16-bit gemm modes are kept for the
 * next GEMM of the same input (cuda_gemm.c's x16 cache): Y1 = W1 X and
 * Y2 = W2 X share one conversion, then X = X + D in place, and Y3 = W3 X
 * must see the new X (a stale conversion is off by the whole of D). On
 * the batched flavors with gemm = bf16x3 (Q4_K weights), and with gemm =
 * q16mma with W2 an F16 weight between two block weights: Y1 quantizes X
 * for mmq, Y2 (bf16x3's fallback) must convert X anew rather than read
 * the quantized bytes as bf16, and Y3 (Q6_K, on mmq) must quantize the
 * new X; against cpu at f64, T = 9. */
static int gemm_input_reuse(const char *mode, kiln_type t1, kiln_type t2, kiln_type t3, double tol) {
  enum { K = 512, N = 64, T = 9, CAP = 12 };
  const kiln_config_override ov[] = {{"cuda-batched", "gemm", mode, "test"},
                                     {"cuda-cc120", "gemm", mode, "test"}};
  const kiln_type wt[3] = {t1, t2, t3};
  kiln_runtime *rt = kg_runtime_mode("f32", true, ov, 2);
  kg_graph g;
  memset(&g, 0, sizeof g);
  kg_rng r = kg_rng_new(77);
  uint8_t *w[3];
  float *x = kg_alloc(sizeof(float) * K * CAP), *d = kg_alloc(sizeof(float) * K * CAP);
  kg_fill(&r, x, K * CAP, -1, 1);
  kg_fill(&r, d, K * CAP, -1, 1);
  static const char *const wn[3] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"};
  for (int i = 0; i < 3; i++) {
    w[i] = kg_pack_weight(wt[i], K, N, 0, 0, &r);
    g.t[i] = kg_tensor(i, wt[i], KILN_ROLE_WEIGHT, K, N, 0, wn[i]);
    g.data[i] = w[i];
  }
  g.t[3] = kg_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, K, CAP, 0, "x");
  g.data[3] = x;
  g.t[4] = kg_tensor(4, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, K, CAP, 0, "d");
  g.data[4] = d;
  for (int i = 0; i < 3; i++) {
    static const char *const yn[3] = {"y1", "y2", "y3"};
    g.t[5 + i] = kg_tensor(5 + i, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, N, CAP, 0, yn[i]);
  }
  g.n_tensors = 8;
  kg_graph_node(&g, KILN_OP_MUL_MAT, "blk.0.attn_q", 0, 3, -1, 5);
  kg_graph_node(&g, KILN_OP_MUL_MAT, "blk.0.attn_k", 1, 3, -1, 6);
  kg_graph_node(&g, KILN_OP_ADD, "blk.0.attn_residual", 3, 4, -1, 3);
  kg_graph_node(&g, KILN_OP_MUL_MAT, "blk.0.attn_v", 2, 3, -1, 7);
  const int outs[3] = {5, 6, 7};
  float *ref[3], *got[3];
  for (int i = 0; i < 3; i++) {
    ref[i] = kg_alloc(g.t[5 + i].nbytes);
    got[i] = kg_alloc(g.t[5 + i].nbytes);
  }
  kiln_backend *cpu = kg_backend_open(rt, "cpu");
  KT_ASSERT_OK(kg_run_graph(cpu, &g, T, 0, outs, 3, (void *const *)ref));
  kiln_backend_close(cpu);
  int bad = 0;
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    if (strcmp(kg_backends[b], "cuda-serial") == 0) continue; /* no GEMM */
    kiln_backend *be = kg_backend_open(rt, kg_backends[b]);
    kiln_status st = kg_run_graph(be, &g, T, 0, outs, 3, (void *const *)got);
    kiln_backend_close(be);
    if (st) {
      printf("  FAIL %-12s x16 reuse: %s\n", kg_backends[b], kiln_status_message(st));
      kiln_status_free(st);
      bad++;
      continue;
    }
    for (int i = 0; i < 3; i++) {
      kg_worst k = kg_compare_cols(got[i], ref[i], N, T, tol);
      printf("  %-12s %s GEMM %s (%s, %s): max rel L2 %.3e, max |ratio-1| %.3e%s\n", kg_backends[b],
             mode, g.t[5 + i].name, kiln_type_name(wt[i]),
             i < 2 ? "one conversion of x" : "x after the ADD", k.rel_l2, k.ratio_dev,
             k.n_bad || !k.all_finite ? "  FAIL" : "");
      bad += k.n_bad || !k.all_finite;
    }
  }
  for (int i = 0; i < 3; i++) {
    free(ref[i]);
    free(got[i]);
    free(w[i]);
  }
  free(x);
  free(d);
  kiln_runtime_free(rt);
  return bad;
}

static void test_gemm_input_reuse(void **state) {
  int bad = 0;
  bad += gemm_input_reuse("bf16x3", KILN_TYPE_Q4_K, KILN_TYPE_Q4_K, KILN_TYPE_Q4_K, 2e-5);
  bad += gemm_input_reuse("q16mma", KILN_TYPE_Q4_K, KILN_TYPE_F16, KILN_TYPE_Q6_K, 2e-4);
  assert_int_equal(bad, 0);
}

/* describe_modes (kiln/plugin.h) on every flavor with gemm = q16mma, after
 * one step of two batched GEMMs: a Q4_K weight of K = 256 (mmq takes it)
 * and an F16 one (mmq has no F16 decoder: bf16x3). The line must count
 * the Q4_K GEMM as q16mma and the F16 one as bf16x3, so it tells q16mma
 * from its fallback on the device; below compute capability 8.0 both
 * take f32, which it must say. cuda-serial has no GEMM: "". */
static void test_describe_modes(void **state) {
  enum { K = 256, N = 64, T = 5, CAP = 8 };
  const kiln_config_override ov[] = {{"cuda-batched", "gemm", "q16mma", "test"},
                                     {"cuda-cc120", "gemm", "q16mma", "test"}};
  kiln_runtime *rt = kg_runtime_mode("f32", true, ov, 2);
  kg_graph g;
  memset(&g, 0, sizeof g);
  kg_rng r = kg_rng_new(31);
  uint8_t *w0 = kg_pack_weight(KILN_TYPE_Q4_K, K, N, 0, 0, &r);
  uint8_t *w1 = kg_pack_weight(KILN_TYPE_F16, K, N, 0, 0, &r);
  float *x = kg_alloc(sizeof(float) * K * CAP);
  kg_fill(&r, x, K * CAP, -1, 1);
  g.t[0] = kg_tensor(0, KILN_TYPE_Q4_K, KILN_ROLE_WEIGHT, K, N, 0, "blk.0.attn_q.weight");
  g.data[0] = w0;
  g.t[1] = kg_tensor(1, KILN_TYPE_F16, KILN_ROLE_WEIGHT, K, N, 0, "blk.0.attn_k.weight");
  g.data[1] = w1;
  g.t[2] = kg_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, K, CAP, 0, "x");
  g.data[2] = x;
  g.t[3] = kg_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, N, CAP, 0, "q");
  g.t[4] = kg_tensor(4, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, N, CAP, 0, "k");
  g.n_tensors = 5;
  kg_graph_node(&g, KILN_OP_MUL_MAT, "blk.0.attn_q", 0, 2, -1, 3);
  kg_graph_node(&g, KILN_OP_MUL_MAT, "blk.0.attn_k", 1, 2, -1, 4);
  const int outs[2] = {3, 4};
  float *got[2] = {kg_alloc(g.t[3].nbytes), kg_alloc(g.t[4].nbytes)};
  int bad = 0;
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    kiln_backend *be = kg_backend_open(rt, kg_backends[b]);
    kiln_status st = kg_run_graph(be, &g, T, 0, outs, 2, (void *const *)got);
    char line[256] = "", want[256] = "";
    if (!st) st = kiln_backend_describe_modes(be, line, sizeof line);
    kiln_backend_close(be);
    if (st) {
      printf("  FAIL %-12s describe_modes: %s\n", kg_backends[b], kiln_status_message(st));
      kiln_status_free(st);
      bad++;
      continue;
    }
    const int cc = device_cc(rt, kg_backends[b]);
    if (strcmp(kg_backends[b], "cuda-serial") == 0)
      want[0] = '\0';
    else if (cc >= 80)
      snprintf(want, sizeof want,
               "gemm q16mma: 2 batched GEMMs: 1 q16mma (Q4_K 1), 1 bf16x3 fallback (F16 1: no mmq decoder)");
    else
      snprintf(want, sizeof want,
               "gemm q16mma -> f32 (compute capability %d.%d < 8.0): 2 batched GEMMs: 2 f32 (F16 1, Q4_K 1)",
               cc / 10, cc % 10);
    const bool ok = strcmp(line, want) == 0;
    printf("  %-12s gemm = q16mma, Q4_K and F16 GEMMs (K = %d): \"%s\"%s%s%s\n", kg_backends[b], K, line,
           ok ? "" : "  FAIL, expected \"", ok ? "" : want, ok ? "" : "\"");
    bad += !ok;
  }
  free(got[0]);
  free(got[1]);
  free(x);
  free(w0);
  free(w1);
  kiln_runtime_free(rt);
  assert_int_equal(bad, 0);
}

/* ---- ops against the cpu backend --------------------------------------------- */

/* Runs op on cpu (f64) and on every CUDA backend; compares the step's
 * columns of dst (width w) with kg_close(tol). */
static int against_cpu(kiln_runtime *rt, kiln_backend *const *gpus, kg_op *op, int32_t T,
                       int32_t pos0, double tol, const char *what) {
  int bad = 0;
  const int64_t w = op->node.dst->ne[0];
  const int64_t col0 = op->node.op == KILN_OP_STORE_KV ? pos0 : 0;
  float *ref = kg_alloc(op->node.dst->nbytes), *got = kg_alloc(op->node.dst->nbytes);
  kiln_backend *cpu = kg_backend_open(rt, "cpu");
  KT_ASSERT_OK(kg_run_op(cpu, op, T, pos0, ref));
  kiln_backend_close(cpu);
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    kiln_status st = kg_run_op(gpus[b], op, T, pos0, got);
    if (st) {
      printf("  FAIL %-12s %s: %s\n", kg_backends[b], what, kiln_status_message(st));
      kiln_status_free(st);
      bad++;
      continue;
    }
    kg_worst k = kg_compare_cols(got + col0 * w, ref + col0 * w, w, T, tol);
    printf("  %-12s %-44s max rel L2 %.3e (col %lld), max |ratio-1| %.3e, min cosine %.9f%s\n",
           kg_backends[b], what, k.rel_l2, (long long)k.at_rel, k.ratio_dev, k.min_cosine,
           k.n_bad || !k.all_finite ? "  FAIL" : "");
    if (k.n_bad || !k.all_finite) bad++;
  }
  free(ref);
  free(got);
  return bad;
}

static void set_node(kg_op *op, kiln_op kop, const char *name, int s0, int s1, int s2, int dst) {
  op->node.op = kop;
  op->node.src[0] = s0 >= 0 ? &op->t[s0] : NULL;
  op->node.src[1] = s1 >= 0 ? &op->t[s1] : NULL;
  op->node.src[2] = s2 >= 0 ? &op->t[s2] : NULL;
  op->node.dst = &op->t[dst];
  snprintf(op->node.name, sizeof op->node.name, "%s", name);
}

static void open_gpus(kiln_runtime *rt, kiln_backend **gpus) {
  for (int b = 0; b < KG_N_BACKENDS; b++) gpus[b] = kg_backend_open(rt, kg_backends[b]);
}

static void close_gpus(kiln_backend **gpus) {
  for (int b = 0; b < KG_N_BACKENDS; b++) kiln_backend_close(gpus[b]);
}

/* Attention with raw q.k = 115200 at key 0 and 115200 - 2.5 j at key j
 * (head_dim 64, scale 1/8: every score exact in f32, so the GPU and the
 * f64 cpu must agree closely); V random. */
static int attention_huge(kiln_runtime *rt, kiln_backend **gpus) {
  const int hd = 64, nh = 4, nkv = 2, n_ctx = 16, T = 3, pos0 = 5, CAP = 4;
  kg_op op;
  memset(&op, 0, sizeof op);
  op.n_tensors = 4;
  op.t[0] = kg_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, hd * nh, CAP, 0, "q");
  op.t[1] = kg_tensor(1, KILN_TYPE_F32, KILN_ROLE_STATE, hd * nkv, n_ctx, 0, "cache_k");
  op.t[2] = kg_tensor(2, KILN_TYPE_F32, KILN_ROLE_STATE, hd * nkv, n_ctx, 0, "cache_v");
  op.t[3] = kg_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, hd * nh, CAP, 0, "attn_out");
  float *q = kg_alloc(op.t[0].nbytes), *k = kg_alloc(op.t[1].nbytes), *v = kg_alloc(op.t[2].nbytes);
  kg_rng r = kg_rng_new(115200);
  for (int t = 0; t < CAP; t++)
    for (int h = 0; h < nh; h++)
      for (int d = 0; d < hd; d++) q[(t * nh + h) * hd + d] = (h + t) % 2 ? -40.0f : 40.0f;
  for (int j = 0; j < n_ctx; j++)
    for (int g = 0; g < nkv; g++)
      for (int d = 0; d < hd; d++) {
        /* KV head 1 reverses the order of the keys' scores */
        int jj = g ? n_ctx - 1 - j : j;
        k[(j * nkv + g) * hd + d] = 45.0f - (d < 32 ? (float)jj / 512.0f : 0.0f);
      }
  kg_fill(&r, v, hd * nkv * n_ctx, -1, 1);
  double max_qk = 0;
  for (int j = 0; j < pos0 + T; j++)
    for (int g = 0; g < nkv; g++) {
      double s = 0;
      for (int d = 0; d < hd; d++) s += 40.0 * k[(j * nkv + g) * hd + d];
      if (s > max_qk) max_qk = s;
    }
  printf("attention: largest raw q.k %.1f, scaled %.1f\n", max_qk, max_qk / 8);
  assert_true(max_qk >= 115200.0);
  op.data[0] = q;
  op.data[1] = k;
  op.data[2] = v;
  set_node(&op, KILN_OP_ATTENTION, "blk.0.attn", 0, 1, 2, 3);
  op.node.p.attention = (kiln_attention_params){nh, nkv, hd, 0.125f};
  int bad = against_cpu(rt, gpus, &op, T, pos0, 1e-5, "attention raw q.k 115200");
  free(q);
  free(k);
  free(v);
  return bad;
}

static int attention_random(kiln_runtime *rt, kiln_backend **gpus, int hd, int nh, int nkv, int T,
                            int pos0) {
  const int n_ctx = pos0 + T + 3, CAP = T + 1;
  kg_op op;
  memset(&op, 0, sizeof op);
  op.n_tensors = 4;
  op.t[0] = kg_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, hd * nh, CAP, 0, "q");
  op.t[1] = kg_tensor(1, KILN_TYPE_F32, KILN_ROLE_STATE, hd * nkv, n_ctx, 0, "cache_k");
  op.t[2] = kg_tensor(2, KILN_TYPE_F32, KILN_ROLE_STATE, hd * nkv, n_ctx, 0, "cache_v");
  op.t[3] = kg_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, hd * nh, CAP, 0, "attn_out");
  float *q = kg_alloc(op.t[0].nbytes), *k = kg_alloc(op.t[1].nbytes), *v = kg_alloc(op.t[2].nbytes);
  kg_rng r = kg_rng_new((uint64_t)(hd * 1000 + nh * 10 + T));
  kg_fill(&r, q, hd * nh * CAP, -2, 2);
  kg_fill(&r, k, hd * nkv * n_ctx, -2, 2);
  kg_fill(&r, v, hd * nkv * n_ctx, -1, 1);
  op.data[0] = q;
  op.data[1] = k;
  op.data[2] = v;
  set_node(&op, KILN_OP_ATTENTION, "blk.0.attn", 0, 1, 2, 3);
  op.node.p.attention = (kiln_attention_params){nh, nkv, hd, (float)(1.0 / sqrt((double)hd))};
  char what[80];
  snprintf(what, sizeof what, "attention hd %d, %d/%d heads, T %d at %d", hd, nh, nkv, T, pos0);
  int bad = against_cpu(rt, gpus, &op, T, pos0, 1e-5, what);
  free(q);
  free(k);
  free(v);
  return bad;
}

static void test_attention(void **state) {
  kiln_runtime *rt = kg_runtime_mode("f32", true, NULL, 0);
  kiln_backend *gpus[KG_N_BACKENDS];
  open_gpus(rt, gpus);
  int bad = attention_huge(rt, gpus);
  bad += attention_random(rt, gpus, 128, 8, 2, 5, 11);
  bad += attention_random(rt, gpus, 8, 8, 4, 7, 0);
  bad += attention_random(rt, gpus, 64, 4, 4, 1, 40);
  bad += attention_random(rt, gpus, 80, 6, 3, 3, 2); /* head_dim not a multiple of 32 */
  close_gpus(gpus);
  kiln_runtime_free(rt);
  assert_int_equal(bad, 0);
}

static int rope_case(kiln_runtime *rt, kiln_backend **gpus, kiln_rope_mode mode, int hd, int n_rot,
                     float theta, int pos0) {
  const int nh = 4, T = 3, CAP = 4;
  kg_op op;
  memset(&op, 0, sizeof op);
  op.n_tensors = 2;
  op.t[0] = kg_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, hd * nh, CAP, 0, "q");
  op.t[1] = kg_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, hd * nh, CAP, 0, "q_rope");
  float *x = kg_alloc(op.t[0].nbytes);
  kg_rng r = kg_rng_new((uint64_t)(hd + n_rot + pos0));
  kg_fill(&r, x, hd * nh * CAP, -3, 3);
  op.data[0] = x;
  set_node(&op, KILN_OP_ROPE, "blk.0.rope_q", 0, -1, -1, 1);
  op.node.p.rope = (kiln_rope_params){mode, n_rot, hd, nh, theta, {0, 0, 0, 0}};
  char what[96];
  snprintf(what, sizeof what, "rope %s hd %d n_rot %d theta %g at %d",
           mode == KILN_ROPE_NEOX ? "NEOX" : "NORM", hd, n_rot, (double)theta, pos0);
  int bad = against_cpu(rt, gpus, &op, T, pos0, 1e-6, what);
  free(x);
  return bad;
}

static void test_rope_norm_eltwise(void **state) {
  kiln_runtime *rt = kg_runtime_mode("f32", true, NULL, 0);
  kiln_backend *gpus[KG_N_BACKENDS];
  open_gpus(rt, gpus);
  int bad = 0;
  bad += rope_case(rt, gpus, KILN_ROPE_NORM, 8, 8, 10000.0f, 0);
  bad += rope_case(rt, gpus, KILN_ROPE_NORM, 128, 128, 10000.0f, 1000);
  bad += rope_case(rt, gpus, KILN_ROPE_NEOX, 128, 128, 1000000.0f, 3000);
  bad += rope_case(rt, gpus, KILN_ROPE_NEOX, 128, 64, 1000000.0f, 17);
  bad += rope_case(rt, gpus, KILN_ROPE_NORM, 64, 32, 500000.0f, 4);

  /* per-head RMSNorm (qwen3's q_norm): rows of 128 inside rows of 512 */
  {
    const int T = 3, CAP = 4;
    kg_op op;
    memset(&op, 0, sizeof op);
    op.n_tensors = 3;
    op.t[0] = kg_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 512, CAP, 0, "q");
    op.t[1] = kg_tensor(1, KILN_TYPE_F32, KILN_ROLE_WEIGHT, 128, 1, 0, "blk.0.attn_q_norm.weight");
    op.t[2] = kg_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 512, CAP, 0, "q_normed");
    float *x = kg_alloc(op.t[0].nbytes), *w = kg_alloc(op.t[1].nbytes);
    kg_rng r = kg_rng_new(77);
    kg_fill(&r, x, 512 * CAP, -1e-3, 1e-3);
    kg_fill(&r, w, 128, 0.5, 1.5);
    op.data[0] = x;
    op.data[1] = w;
    set_node(&op, KILN_OP_RMS_NORM, "blk.0.q_norm", 0, 1, -1, 2);
    op.node.p.rms_norm.eps = 1e-6f;
    bad += against_cpu(rt, gpus, &op, T, 0, 1e-5, "rms_norm per head (128 in 512), eps 1e-6");
    free(x);
    free(w);
  }
  /* SWIGLU and ADD */
  for (int which = 0; which < 2; which++) {
    const int W = 1000, T = 5, CAP = 6;
    kg_op op;
    memset(&op, 0, sizeof op);
    op.n_tensors = 3;
    op.t[0] = kg_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, CAP, 0, "a");
    op.t[1] = kg_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, CAP, 0, "b");
    op.t[2] = kg_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, CAP, 0, "y");
    float *a = kg_alloc(op.t[0].nbytes), *bb = kg_alloc(op.t[1].nbytes);
    kg_rng r = kg_rng_new(31 + (uint64_t)which);
    kg_fill(&r, a, W * CAP, -20, 20);
    kg_fill(&r, bb, W * CAP, -2, 2);
    a[3] = -200.0f; /* silu's -0 limit */
    op.data[0] = a;
    op.data[1] = bb;
    set_node(&op, which ? KILN_OP_ADD : KILN_OP_SWIGLU, which ? "blk.0.ffn_residual" : "blk.0.ffn_swiglu", 0, 1, -1, 2);
    bad += against_cpu(rt, gpus, &op, T, 0, 1e-6, which ? "add" : "swiglu");
    free(a);
    free(bb);
  }
  /* STORE_KV at a position past 0 */
  {
    const int W = 96, T = 4, CAP = 4, n_ctx = 12, pos0 = 5;
    kg_op op;
    memset(&op, 0, sizeof op);
    op.n_tensors = 2;
    op.t[0] = kg_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, CAP, 0, "k");
    op.t[1] = kg_tensor(1, KILN_TYPE_F32, KILN_ROLE_STATE, W, n_ctx, 0, "cache_k");
    float *k = kg_alloc(op.t[0].nbytes), *c = kg_alloc(op.t[1].nbytes);
    kg_rng r = kg_rng_new(5);
    kg_fill(&r, k, W * CAP, -1, 1);
    kg_fill(&r, c, W * n_ctx, -1, 1);
    op.data[0] = k;
    op.data[1] = c;
    set_node(&op, KILN_OP_STORE_KV, "blk.0.store_k", 0, -1, -1, 1);
    bad += against_cpu(rt, gpus, &op, T, pos0, 0.0, "store_kv at 5..8");
    free(k);
    free(c);
  }
  close_gpus(gpus);
  kiln_runtime_free(rt);
  assert_int_equal(bad, 0);
}

/* GET_ROWS of every type, bit-exact to kiln_dequantize; a bad id refused. */
static void test_get_rows(void **state) {
  kiln_runtime *rt = kg_runtime_mode("f32", true, NULL, 0);
  int bad = 0;
  const int64_t H = 512, V = 20;
  const int32_t ids[4] = {3, 0, 19, 7};
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    kiln_backend *be = kg_backend_open(rt, kg_backends[b]);
    for (size_t ti = 0; ti < N_TYPES; ti++) {
      kg_rng r = kg_rng_new(900 + ti);
      kg_op op;
      memset(&op, 0, sizeof op);
      op.n_tensors = 3;
      op.t[0] = kg_tensor(0, all_types[ti], KILN_ROLE_WEIGHT, H, V, 0, "token_embd.weight");
      op.t[1] = kg_tensor(1, KILN_TYPE_I32, KILN_ROLE_INPUT, 4, 1, 0, "tokens");
      op.t[1].nbytes = 16;
      op.t[2] = kg_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, H, 4, 0, "inp_embd");
      uint8_t *w = kg_pack_weight(all_types[ti], H, V, 0, 0, &r);
      float *all = kg_dequant(all_types[ti], w, H, V);
      float *y = kg_alloc(op.t[2].nbytes);
      op.data[0] = w;
      op.data[1] = ids;
      set_node(&op, KILN_OP_GET_ROWS, "inp_embd", 0, 1, -1, 2);
      kiln_status st = kg_run_op(be, &op, 4, 0, y);
      bool ok = !st;
      for (int t = 0; ok && t < 4; t++)
        if (memcmp(y + t * H, all + ids[t] * H, (size_t)H * sizeof(float)) != 0) ok = false;
      printf("  %-12s get_rows %-4s: %s%s\n", be->name, kiln_type_name(all_types[ti]),
             st ? kiln_status_message(st) : ok ? "bit-exact to kiln_dequantize" : "DIFFERENT",
             ok ? "" : "  FAIL");
      if (!ok) bad++;
      kiln_status_free(st);
      if (ti == 0) {
        const int32_t bad_ids[4] = {3, 20, 0, 0};
        op.data[1] = bad_ids;
        st = kg_run_op(be, &op, 2, 0, y);
        bool refused = st && kiln_status_code_of(st) == KILN_STATUS_OUT_OF_RANGE &&
                       strstr(kiln_status_message(st), "token id 20");
        printf("  %-12s get_rows with id 20 of 20 rows: %s\n", be->name,
               st ? kiln_status_message(st) : "NOT REFUSED");
        if (!refused) bad++;
        kiln_status_free(st);
      }
      free(y);
      free(all);
      free(w);
    }
    kiln_backend_close(be);
  }
  kiln_runtime_free(rt);
  assert_int_equal(bad, 0);
}

/* GET_COLUMNS (the output head's first node): chosen columns copied
 * exactly, in the order asked, the rest of dst untouched; an id past
 * src0's columns refused, naming it. */
static void test_get_columns(void **state) {
  kiln_runtime *rt = kg_runtime(NULL, 0);
  int bad = 0;
  const int64_t W = 896, CAP = 5;
  const int32_t ids[5] = {4, 0, 4, 2, 1};
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    kiln_backend *be = kg_backend_open(rt, kg_backends[b]);
    kg_rng r = kg_rng_new(1300);
    kg_op op;
    memset(&op, 0, sizeof op);
    op.n_tensors = 3;
    op.t[0] = kg_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, CAP, 0, "blk.23.ffn_residual");
    op.t[1] = kg_tensor(1, KILN_TYPE_I32, KILN_ROLE_INPUT, CAP, 1, 0, "out_ids");
    op.t[1].n_dims = 1;
    op.t[1].nbytes = sizeof ids;
    op.t[2] = kg_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, CAP, 0, "out_columns");
    float *x = kg_alloc(op.t[0].nbytes), *y = kg_alloc(op.t[2].nbytes);
    kg_fill(&r, x, W * CAP, -3, 3);
    op.data[0] = x;
    op.data[1] = ids;
    set_node(&op, KILN_OP_GET_COLUMNS, "out_columns", 0, 1, -1, 2);
    kiln_status st = kg_run_op(be, &op, 3, 0, y);
    bool ok = !st;
    for (int t = 0; ok && t < 3; t++)
      if (memcmp(y + t * W, x + ids[t] * W, (size_t)W * sizeof(float)) != 0) ok = false;
    printf("  %-12s get_columns 3 of 5: %s%s\n", be->name,
           st ? kiln_status_message(st) : ok ? "exact copies" : "DIFFERENT", ok ? "" : "  FAIL");
    if (!ok) bad++;
    kiln_status_free(st);
    const int32_t bad_ids[5] = {1, 5, 0, 0, 0};
    op.data[1] = bad_ids;
    st = kg_run_op(be, &op, 2, 0, y);
    bool refused = st && kiln_status_code_of(st) == KILN_STATUS_OUT_OF_RANGE &&
                   strstr(kiln_status_message(st), "column id 5");
    printf("  %-12s get_columns with id 5 of 5 columns: %s\n", be->name,
           st ? kiln_status_message(st) : "NOT REFUSED");
    if (!refused) bad++;
    kiln_status_free(st);
    free(y);
    free(x);
    kiln_backend_close(be);
  }
  kiln_runtime_free(rt);
  assert_int_equal(bad, 0);
}

int main(void) {
  int gate = kg_gate("test_gpu_ops");
  if (gate) return gate;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quantized_matvec_poison),
      cmocka_unit_test(test_mul_mat_every_type),
      cmocka_unit_test(test_mul_mat_gemm_modes),
      cmocka_unit_test(test_gemm_input_reuse),
      cmocka_unit_test(test_describe_modes),
      cmocka_unit_test(test_attention),
      cmocka_unit_test(test_rope_norm_eltwise),
      cmocka_unit_test(test_get_rows),
      cmocka_unit_test(test_get_columns),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
