/* Tensors that end exactly where their device allocation ends (issue 15):
 * the CUDA buffers have no padding (cuda_buffers.c), so a kernel that reads
 * one byte past a tensor reads outside its allocation, which
 * compute-sanitizer's memcheck reports (tools/device/sanitize.sh runs this
 * suite under it) and which can fault where the allocation ends a page.
 *
 * Every case gives its tensors exactly their bytes (no tensor padding
 * either) and shapes whose byte counts are not multiples of 16, so no
 * 16-byte load can stay inside by luck:
 *   - MUL_MAT of every weight type, 37 rows, K not a multiple of the
 *     matvec's 1024-value tile (and, for F32/F16/BF16, both a K the 16-byte
 *     path takes and an odd K the scalar path takes), T = 1..9 tokens (one
 *     token: the matvec; several: cuda-serial's token loop, the batched
 *     backends' dequantize-and-GEMM), with and without an F16 bias of 37
 *     values (74 bytes), in every activations mode (f32: matvec; q16 and
 *     q8: quantize and matvec_q for the block types), each within its
 *     mode's tolerance against f64 (gpu_common.h, kg_mode_tol);
 *   - GET_ROWS of every type whose ids include the table's last row;
 *   - RMSNorm with a norm weight of an odd length;
 *   - attention whose KV cache holds exactly the positions the step reads.
 * Results against f64 (kiln_dequantize + double sums), per column: relative
 * L2 and |norm ratio - 1| within the tolerance. Every case is printed; the
 * suite asserts at the end of each test. */
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
#include "testutil.h"

#define N_ROWS 37
#define MAX_T 9
#define TOL 2e-5 /* f32 paths: the non-matvec cases */

typedef struct mv_case {
  kiln_type type;
  int64_t k;
} mv_case;

/* K values that are whole blocks of the type but not whole 1024-value tiles. */
static const mv_case mv_cases[] = {
    {KILN_TYPE_F32, 1000},  {KILN_TYPE_F32, 1001},  {KILN_TYPE_F16, 1000},
    {KILN_TYPE_F16, 1001},  {KILN_TYPE_BF16, 1000}, {KILN_TYPE_BF16, 1001},
    {KILN_TYPE_Q4_0, 1312}, {KILN_TYPE_Q5_0, 1312}, {KILN_TYPE_Q8_0, 1312},
    {KILN_TYPE_Q4_K, 2816}, {KILN_TYPE_Q6_K, 2816}, {KILN_TYPE_Q5_K, 2816},
};
#define N_MV_CASES (sizeof mv_cases / sizeof mv_cases[0])

/* One MUL_MAT on backend `be` in activations mode `mode`; returns 1 on a
 * failure (printed). */
static int mul_mat_case(kiln_backend *be, int mode, const mv_case *c, int32_t T, bool bias) {
  const double tol = kg_mode_tol[mode];
  const int64_t K = c->k;
  kg_rng r = kg_rng_new((uint64_t)(K * 131 + c->type * 17 + T * 3 + bias));
  kg_op op;
  memset(&op, 0, sizeof op);
  op.n_tensors = 4;
  op.t[0] = kg_tensor(0, c->type, KILN_ROLE_WEIGHT, K, N_ROWS, 0, "blk.0.attn_k.weight");
  op.t[1] = kg_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, K, T, 0, "x");
  op.t[2] = kg_tensor(2, KILN_TYPE_F16, KILN_ROLE_WEIGHT, N_ROWS, 1, 0, "blk.0.attn_k.bias");
  op.t[3] = kg_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, N_ROWS, T, 0, "k");
  uint8_t *w = kg_pack_weight(c->type, K, N_ROWS, 0, 0, &r);
  uint8_t *b = kg_pack_weight(KILN_TYPE_F16, N_ROWS, 1, 0, 0, &r);
  float *x = kg_alloc((size_t)(K * T) * sizeof(float)), *y = kg_alloc(op.t[3].nbytes);
  kg_fill(&r, x, K * T, -1, 1);
  op.data[0] = w;
  op.data[1] = x;
  op.data[2] = b;
  op.node.op = KILN_OP_MUL_MAT;
  op.node.src[0] = &op.t[0];
  op.node.src[1] = &op.t[1];
  op.node.src[2] = bias ? &op.t[2] : NULL;
  op.node.dst = &op.t[3];
  snprintf(op.node.name, sizeof op.node.name, "blk.0.attn_k");
  kiln_status st = kg_run_op(be, &op, T, 0, y);
  int bad = 0;
  if (st) {
    printf("  FAIL %-12s %-3s mul_mat %-4s K=%lld T=%d%s: %s\n", be->name, kg_modes[mode],
           kiln_type_name(c->type), (long long)K, T, bias ? " +bias" : "", kiln_status_message(st));
    kiln_status_free(st);
    bad = 1;
  } else {
    float *wv = kg_dequant(c->type, w, K, N_ROWS), *bv = kg_dequant(KILN_TYPE_F16, b, N_ROWS, 1);
    double worst = 0, worst_dev = 0;
    for (int32_t t = 0; t < T; t++) {
      double ref[N_ROWS];
      for (int64_t n = 0; n < N_ROWS; n++) {
        ref[n] = bias ? bv[n] : 0.0;
        for (int64_t k = 0; k < K; k++) ref[n] += (double)wv[n * K + k] * x[t * K + k];
      }
      kg_metrics m = kg_compare_f64(y + t * N_ROWS, ref, N_ROWS);
      if (!kg_close(&m, tol)) bad = 1;
      if (!(m.rel_l2 <= worst)) worst = m.rel_l2;
      if (!(fabs(m.norm_ratio - 1) <= worst_dev)) worst_dev = fabs(m.norm_ratio - 1);
    }
    printf("  %-12s %-3s mul_mat %-4s K=%-4lld T=%d%s: max rel L2 %.2e, max |ratio-1| %.2e%s\n",
           be->name, kg_modes[mode], kiln_type_name(c->type), (long long)K, T,
           bias ? " +bias" : "      ", worst, worst_dev, bad ? "  FAIL" : "");
    free(wv);
    free(bv);
  }
  free(w);
  free(b);
  free(x);
  free(y);
  return bad;
}

/* Every activations mode: f32 (matvec), q16 and q8 (quantize + matvec_q
 * for the block types); the quantized modes again with matvec_q's
 * persistent bulk-copy grid (matvec_load = bulk, 6 rows a set, 3 stages:
 * the last set partial, and for Q4_0, Q5_0, Q8_0 and Q6_K a weight whose
 * last bytes are not a whole 16-byte word, read in 2-byte pieces). */
static void test_mul_mat_exact_end(void **state) {
  int bad = 0, n = 0;
  for (int pass = 0; pass < KG_N_MODES + KG_N_MODES - 1; pass++) {
    const int mode = pass < KG_N_MODES ? pass : pass - KG_N_MODES + 1;
    const bool bulk = pass >= KG_N_MODES;
    kiln_config_override extra[2 * KG_N_BACKENDS];
    for (int b = 0; b < KG_N_BACKENDS; b++) {
      extra[2 * b] = (kiln_config_override){kg_backends[b], "matvec_load", "bulk", "test"};
      extra[2 * b + 1] = (kiln_config_override){kg_backends[b], "matvec_shape", "4,2,3,1,3", "test"};
    }
    if (bulk) printf("matvec_load = bulk, matvec_shape = 4,2,3,1,3\n");
    kiln_runtime *rt = kg_runtime_mode(kg_modes[mode], true, bulk ? extra : NULL,
                                       bulk ? 2 * KG_N_BACKENDS : 0);
    for (int bi = 0; bi < KG_N_BACKENDS; bi++) {
      kiln_backend *be = kg_backend_open(rt, kg_backends[bi]);
      for (size_t ci = 0; ci < N_MV_CASES; ci++)
        for (int32_t T = 1; T <= MAX_T; T++)
          for (int bias = 0; bias < 2; bias++) {
            if (bias && T != 1 && T != MAX_T) continue; /* the bias at both ends of T */
            if (mode && T > 2 && T < MAX_T) continue; /* quantized modes: T = 1, 2, 9 */
            bad += mul_mat_case(be, mode, &mv_cases[ci], T, bias);
            n++;
          }
      kiln_backend_close(be);
    }
    kiln_runtime_free(rt);
  }
  printf("mul_mat with exact-end tensors: %d of %d cases failed\n", bad, n);
  assert_int_equal(bad, 0);
}

static const kiln_type all_types[] = {KILN_TYPE_F32,  KILN_TYPE_F16,  KILN_TYPE_BF16,
                                      KILN_TYPE_Q4_0, KILN_TYPE_Q5_0, KILN_TYPE_Q8_0,
                                      KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K};

/* GET_ROWS: 9 tokens whose ids include the last of 23 rows; bit-exact. */
static void test_get_rows_last_row(void **state) {
  kiln_runtime *rt = kg_runtime(NULL, 0);
  int bad = 0;
  const int64_t V = 23;
  const int32_t ids[MAX_T] = {22, 0, 22, 5, 21, 22, 1, 11, 22};
  for (int bi = 0; bi < KG_N_BACKENDS; bi++) {
    kiln_backend *be = kg_backend_open(rt, kg_backends[bi]);
    for (size_t ti = 0; ti < sizeof all_types / sizeof all_types[0]; ti++) {
      const kiln_type type = all_types[ti];
      const int64_t H = kiln_type_block_size(type) == 256 ? 768 : 1312;
      kg_rng r = kg_rng_new(40 + ti);
      kg_op op;
      memset(&op, 0, sizeof op);
      op.n_tensors = 3;
      op.t[0] = kg_tensor(0, type, KILN_ROLE_WEIGHT, H, V, 0, "token_embd.weight");
      op.t[1] = kg_tensor(1, KILN_TYPE_I32, KILN_ROLE_INPUT, MAX_T, 1, 0, "tokens");
      op.t[1].nbytes = sizeof ids;
      op.t[2] = kg_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, H, MAX_T, 0, "inp_embd");
      uint8_t *w = kg_pack_weight(type, H, V, 0, 0, &r);
      float *all = kg_dequant(type, w, H, V), *y = kg_alloc(op.t[2].nbytes);
      op.data[0] = w;
      op.data[1] = ids;
      op.node.op = KILN_OP_GET_ROWS;
      op.node.src[0] = &op.t[0];
      op.node.src[1] = &op.t[1];
      op.node.dst = &op.t[2];
      snprintf(op.node.name, sizeof op.node.name, "inp_embd");
      kiln_status st = kg_run_op(be, &op, MAX_T, 0, y);
      bool ok = !st;
      for (int t = 0; ok && t < MAX_T; t++)
        if (memcmp(y + t * H, all + ids[t] * H, (size_t)H * sizeof(float)) != 0) ok = false;
      printf("  %-12s get_rows %-4s (last row of %lld included): %s%s\n", be->name,
             kiln_type_name(type), (long long)V,
             st ? kiln_status_message(st) : ok ? "bit-exact" : "DIFFERENT", ok ? "" : "  FAIL");
      bad += !ok;
      kiln_status_free(st);
      free(w);
      free(all);
      free(y);
    }
    kiln_backend_close(be);
  }
  kiln_runtime_free(rt);
  assert_int_equal(bad, 0);
}

/* RMSNorm of odd-length rows with an F16 weight (the scalar paths), and
 * attention whose caches end at the step's last position. */
static void test_norm_attention_exact_end(void **state) {
  kiln_runtime *rt = kg_runtime(NULL, 0);
  kiln_backend *cpu = kg_backend_open(rt, "cpu");
  int bad = 0;
  for (int bi = 0; bi < KG_N_BACKENDS; bi++) {
    kiln_backend *be = kg_backend_open(rt, kg_backends[bi]);
    for (int32_t T = 1; T <= MAX_T; T += 4) {
      /* RMSNorm, width 999 */
      {
        const int64_t W = 999;
        kg_rng r = kg_rng_new(7 + (uint64_t)T);
        kg_op op;
        memset(&op, 0, sizeof op);
        op.n_tensors = 3;
        op.t[0] = kg_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, 0, "x");
        op.t[1] = kg_tensor(1, KILN_TYPE_F16, KILN_ROLE_WEIGHT, W, 1, 0, "blk.0.attn_norm.weight");
        op.t[2] = kg_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, 0, "h");
        float *x = kg_alloc(op.t[0].nbytes);
        uint8_t *w = kg_pack_weight(KILN_TYPE_F16, W, 1, 0, 0, &r);
        kg_fill(&r, x, W * T, -1, 1);
        op.data[0] = x;
        op.data[1] = w;
        op.node.op = KILN_OP_RMS_NORM;
        op.node.src[0] = &op.t[0];
        op.node.src[1] = &op.t[1];
        op.node.dst = &op.t[2];
        op.node.p.rms_norm.eps = 1e-6f;
        snprintf(op.node.name, sizeof op.node.name, "blk.0.attn_norm");
        float *ref = kg_alloc(op.t[2].nbytes), *got = kg_alloc(op.t[2].nbytes);
        KT_ASSERT_OK(kg_run_op(cpu, &op, T, 0, ref));
        kiln_status st = kg_run_op(be, &op, T, 0, got);
        kg_worst k = {0};
        if (!st) k = kg_compare_cols(got, ref, W, T, 1e-6);
        printf("  %-12s rms_norm width %lld, F16 weight, T=%d: %s max rel L2 %.2e%s\n", be->name,
               (long long)W, T, st ? kiln_status_message(st) : "", k.rel_l2,
               st || k.n_bad || !k.all_finite ? "  FAIL" : "");
        bad += st || k.n_bad || !k.all_finite;
        kiln_status_free(st);
        free(x);
        free(w);
        free(ref);
        free(got);
      }
      /* attention: head_dim 72, 6/2 heads, T tokens at position 3, cache of 3 + T */
      {
        const int hd = 72, nh = 6, nkv = 2, pos0 = 3, n_ctx = pos0 + T;
        kg_rng r = kg_rng_new(70 + (uint64_t)T);
        kg_op op;
        memset(&op, 0, sizeof op);
        op.n_tensors = 4;
        op.t[0] = kg_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, hd * nh, T, 0, "q");
        op.t[1] = kg_tensor(1, KILN_TYPE_F32, KILN_ROLE_STATE, hd * nkv, n_ctx, 0, "cache_k");
        op.t[2] = kg_tensor(2, KILN_TYPE_F32, KILN_ROLE_STATE, hd * nkv, n_ctx, 0, "cache_v");
        op.t[3] = kg_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, hd * nh, T, 0, "attn_out");
        float *q = kg_alloc(op.t[0].nbytes), *kc = kg_alloc(op.t[1].nbytes),
              *vc = kg_alloc(op.t[2].nbytes);
        kg_fill(&r, q, hd * nh * T, -2, 2);
        kg_fill(&r, kc, hd * nkv * n_ctx, -2, 2);
        kg_fill(&r, vc, hd * nkv * n_ctx, -1, 1);
        op.data[0] = q;
        op.data[1] = kc;
        op.data[2] = vc;
        op.node.op = KILN_OP_ATTENTION;
        op.node.src[0] = &op.t[0];
        op.node.src[1] = &op.t[1];
        op.node.src[2] = &op.t[2];
        op.node.dst = &op.t[3];
        op.node.p.attention = (kiln_attention_params){nh, nkv, hd, (float)(1.0 / sqrt(hd))};
        snprintf(op.node.name, sizeof op.node.name, "blk.0.attn");
        float *ref = kg_alloc(op.t[3].nbytes), *got = kg_alloc(op.t[3].nbytes);
        KT_ASSERT_OK(kg_run_op(cpu, &op, T, pos0, ref));
        kiln_status st = kg_run_op(be, &op, T, pos0, got);
        kg_worst k = {0};
        if (!st) k = kg_compare_cols(got, ref, hd * nh, T, 1e-5);
        printf("  %-12s attention hd 72, cache of exactly %d positions, T=%d: %s max rel L2 "
               "%.2e%s\n",
               be->name, n_ctx, T, st ? kiln_status_message(st) : "", k.rel_l2,
               st || k.n_bad || !k.all_finite ? "  FAIL" : "");
        bad += st || k.n_bad || !k.all_finite;
        kiln_status_free(st);
        free(q);
        free(kc);
        free(vc);
        free(ref);
        free(got);
      }
    }
    kiln_backend_close(be);
  }
  kiln_backend_close(cpu);
  kiln_runtime_free(rt);
  assert_int_equal(bad, 0);
}

int main(void) {
  int gate = kg_gate("test_gpu_bounds");
  if (gate) return gate;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mul_mat_exact_end),
      cmocka_unit_test(test_get_rows_last_row),
      cmocka_unit_test(test_norm_attention_exact_end),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
