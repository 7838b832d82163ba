/* The quantized-activation matvec (activations = q16 / q8: quantize and
 * matvec_q) and the fused kernels, on every CUDA backend:
 *   - every block type (Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K), K of 768, 2816
 *     and 3584, 67 rows, with and without a bias, in both widths, against
 *     two references: the f64 product of the dequantized weights with the
 *     f32 x (the mode's accuracy: within kg_mode_tol), and the f64 product
 *     with x quantized here exactly as act_quant.cuh does it (rint(x * (Q /
 *     max|x|)) per 32 values, Q = 32767 or 127; Q4_K's and Q5_K's minimum
 *     times the exact x), which the kernel's integer sums must meet to 2e-6: a quant
 *     decoded wrongly shows there at once, while the mode's rounding does
 *     not hide it;
 *   - a layer's worth of nodes as one step, fused (and fused with every
 *     matvec_q on the persistent bulk-copy grid) (residual ADD + RMSNorm
 *     + quantizing the normed row, Q/K/V of three block types with biases
 *     as one launch, SwiGLU + quantizing, the down projection in Q5_K) against the
 *     same step with fuse = false and against f64: every output the same
 *     within 1e-5 of the unfused step, and within the mode's tolerance of
 *     f64; the ADD's sum bit-exact;
 *   - a layer's RoPE of Q and K and its two cache stores as one step
 *     (rope_store: NEOX with a partial rotation, so dimensions pass
 *     through, at position 37 of a cache of 40 whose other positions hold
 *     data): bit-identical to the unfused step, within 1e-6 of the cpu
 *     backend at f64, and every other cache position untouched.
 * Every case is printed; each test asserts at its end. */
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

/* ---- every block type (MQ_PART 0..2) ----------------------------------- */
#if !defined(MQ_PART) || MQ_PART < 3
static const kiln_type block_types[] = {KILN_TYPE_Q4_0, KILN_TYPE_Q5_0, KILN_TYPE_Q8_0,
                                        KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K};
#define N_BLOCK_TYPES (sizeof block_types / sizeof block_types[0])
static const int64_t ks[] = {768, 2816, 3584};
#define N_KS (sizeof ks / sizeof ks[0])
#define N_ROWS 67
#define EXACT_TOL 2e-6

/* x as the kernels quantize it (act_quant.cuh): per block of 32,
 * s = max|x| / Q and X = rint(x * (Q / max|x|)) clamped to +-Q, in f32 as
 * there; xq[i] = s * X[i] in double. */
static void quantize_like_the_gpu(const float *x, int64_t k, int bits, double *xq) {
  const float q = bits == 16 ? 32767.0f : 127.0f;
  for (int64_t b = 0; b < k / 32; b++) {
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
    const float s = amax / q, inv = amax > 0.0f ? q / amax : 0.0f;
    for (int i = 0; i < 32; i++) {
      volatile float prod = x[32 * b + i] * inv; /* one f32 rounding, as on the GPU */
      float r = rintf(prod);
      r = r > q ? q : r < -q ? -q : r;
      xq[32 * b + i] = (double)s * (double)r;
    }
  }
}

/* The weight split as the kernels use it: w = a - m with m the part a
 * per-block minimum contributes (Q4_K, Q5_K: dmin * m_j; other types: 0),
 * both as kiln_dequantize rounds them. */
static void split_weight(kiln_type type, const uint8_t *w, int64_t k, int64_t rows, float **out_a,
                         float **out_m) {
  float *full = kg_dequant(type, w, k, rows);
  float *m = kg_alloc((size_t)(k * rows) * sizeof(float));
  if (type == KILN_TYPE_Q4_K || type == KILN_TYPE_Q5_K) {
    const int64_t rb = kiln_type_row_bytes(type, k);
    const size_t bytes = rb > 0 ? (size_t)rb * (size_t)rows : 0;
    const size_t bb = (size_t)kiln_type_block_bytes(type);
    uint8_t *nomin = kg_alloc(bytes);
    memcpy(nomin, w, bytes);
    for (size_t b = 0; b < bytes / bb; b++) nomin[bb * b + 2] = nomin[bb * b + 3] = 0;
    float *a = kg_dequant(type, nomin, k, rows);
    for (int64_t i = 0; i < k * rows; i++) m[i] = a[i] - full[i];
    free(nomin);
    free(full);
    *out_a = a;
  } else {
    *out_a = full;
  }
  *out_m = m;
}

static int matvec_case(kiln_backend *be, int mode, kiln_type type, int64_t K, bool bias) {
  const int bits = mode == 1 ? 16 : 8;
  kg_rng r = kg_rng_new((uint64_t)(type * 7919 + K * 13 + bias + 100 * mode));
  kg_op op;
  memset(&op, 0, sizeof op);
  op.n_tensors = 4;
  op.t[0] = kg_tensor(0, type, KILN_ROLE_WEIGHT, K, N_ROWS, 0, "blk.0.ffn_up.weight");
  op.t[1] = kg_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, K, 1, 0, "x");
  op.t[2] = kg_tensor(2, KILN_TYPE_F32, KILN_ROLE_WEIGHT, N_ROWS, 1, 0, "blk.0.ffn_up.bias");
  op.t[3] = kg_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, N_ROWS, 1, 0, "up");
  uint8_t *w = kg_pack_weight(type, K, N_ROWS, 0, 0, &r);
  float *bv = kg_alloc(N_ROWS * sizeof(float)), *x = kg_alloc((size_t)K * sizeof(float));
  float *y = kg_alloc(op.t[3].nbytes);
  kg_fill(&r, bv, N_ROWS, -0.5, 0.5);
  kg_fill(&r, x, K, -1, 1);
  x[5] = 0.0f; /* a block with a zero in it, and one of all zeros */
  for (int i = 64; i < 96 && i < K; i++) x[i] = 0.0f;
  op.data[0] = w;
  op.data[1] = x;
  op.data[2] = bv;
  op.node.op = KILN_OP_MUL_MAT;
  op.node.src[0] = &op.t[0];
  op.node.src[1] = &op.t[1];
  op.node.src[2] = bias ? &op.t[2] : NULL;
  op.node.dst = &op.t[3];
  snprintf(op.node.name, sizeof op.node.name, "blk.0.ffn_up");
  kiln_status st = kg_run_op(be, &op, 1, 0, y);
  int bad = 0;
  if (st) {
    printf("  FAIL %-12s %-3s %-4s K=%lld: %s\n", be->name, kg_modes[mode], kiln_type_name(type),
           (long long)K, kiln_status_message(st));
    kiln_status_free(st);
    bad = 1;
  } else {
    float *a, *m;
    split_weight(type, w, K, N_ROWS, &a, &m);
    double *xq = kg_alloc((size_t)K * sizeof(double)), ref[N_ROWS], exact[N_ROWS];
    quantize_like_the_gpu(x, K, bits, xq);
    for (int64_t n = 0; n < N_ROWS; n++) {
      double t = bias ? bv[n] : 0.0, e = t;
      for (int64_t k = 0; k < K; k++) {
        const double wv = (double)a[n * K + k] - (double)m[n * K + k];
        t += wv * (double)x[k];
        e += (double)a[n * K + k] * xq[k] - (double)m[n * K + k] * (double)x[k];
      }
      ref[n] = t;
      exact[n] = e;
    }
    kg_metrics mt = kg_compare_f64(y, ref, N_ROWS), me = kg_compare_f64(y, exact, N_ROWS);
    const bool ok = kg_close(&mt, kg_mode_tol[mode]) && kg_close(&me, EXACT_TOL);
    printf("  %-12s %-3s %-4s K=%-4lld%s: vs f64 rel L2 %.2e |ratio-1| %.2e; vs x quantized "
           "here rel L2 %.2e%s\n",
           be->name, kg_modes[mode], kiln_type_name(type), (long long)K, bias ? " +bias" : "      ",
           mt.rel_l2, fabs(mt.norm_ratio - 1), me.rel_l2, ok ? "" : "  FAIL");
    bad = !ok;
    free(a);
    free(m);
    free(xq);
  }
  free(w);
  free(bv);
  free(x);
  free(y);
  return bad;
}

/* The three ways of reading the weights (matvec_load: each lane its
 * bytes, 16-byte loads staged through shared memory, or bulk copies into
 * the stages of persistent blocks), each with the chosen shape and with 3
 * rows per group of 2 warps: 3 sets of groups per block (67 rows: a
 * partial last group, a block whose last set is past the end), or for
 * bulk 3 stages (12 sets of 6 rows, the last partial, more sets than
 * stages). */
static void test_matvec_q_every_type(void **state) {
  static const char *const loads[] = {"direct", "staged", "bulk"};
  static const char *const mv_shapes[][2] = {{"auto", "4,2,3,3"}, {"auto", "4,2,3,3"},
                                             {"auto", "4,2,3,1,3"}};
#if defined(MQ_PART)
  const int lo = MQ_PART, hi = MQ_PART + 1;
#else
  const int lo = 0, hi = 3;
#endif
  int bad = 0;
  for (int mode = 1; mode < KG_N_MODES; mode++)
    for (int li = lo; li < hi; li++)
      for (int si = 0; si < 2; si++) {
        kiln_config_override extra[2 * KG_N_BACKENDS];
        for (int b = 0; b < KG_N_BACKENDS; b++) {
          extra[2 * b] = (kiln_config_override){kg_backends[b], "matvec_load", loads[li], "test"};
          extra[2 * b + 1] =
              (kiln_config_override){kg_backends[b], "matvec_shape", mv_shapes[li][si], "test"};
        }
        printf("matvec_load = %s, matvec_shape = %s\n", loads[li], mv_shapes[li][si]);
        kiln_runtime *rt = kg_runtime_mode(kg_modes[mode], true, extra, 2 * KG_N_BACKENDS);
        for (int b = 0; b < KG_N_BACKENDS; b++) {
          kiln_backend *be = kg_backend_open(rt, kg_backends[b]);
          for (size_t ti = 0; ti < N_BLOCK_TYPES; ti++)
            for (size_t ki = 0; ki < N_KS; ki++)
              for (int bias = 0; bias < 2; bias++) {
                if (ks[ki] % kiln_type_block_size(block_types[ti])) continue;
                bad += matvec_case(be, mode, block_types[ti], ks[ki], bias);
              }
          kiln_backend_close(be);
        }
        kiln_runtime_free(rt);
      }
  printf("matvec_q: %d failures\n", bad);
  assert_int_equal(bad, 0);
}
#endif

#if !defined(MQ_PART) || MQ_PART == 3
/* ---- a layer's nodes as one step ----------------------------------------- */

#define H 768   /* hidden */
#define QW 512  /* Q rows */
#define KVW 128 /* K, V rows */
#define FF 1024 /* FFN width */

enum {
  T_X, T_R, T_SUM, T_NW, T_H, T_WQ, T_BQ, T_Q, T_WK, T_BK, T_K, T_WV, T_BV, T_V,
  T_G, T_U, T_S, T_WD, T_D, N_T
};

typedef struct layer {
  kg_graph g;
  void *host[N_T];
} layer;

static void tensor(layer *l, int id, kiln_type type, kiln_tensor_role role, int64_t ne0,
                   int64_t ne1, const char *name, kg_rng *r) {
  l->g.t[id] = kg_tensor(id, type, role, ne0, ne1, 0, name);
  l->host[id] = NULL;
  if (role == KILN_ROLE_WEIGHT && type != KILN_TYPE_F32) {
    l->host[id] = kg_pack_weight(type, ne0, ne1, 0, 0, r);
  } else if (id != T_SUM && id != T_H && id != T_Q && id != T_K && id != T_V && id != T_S &&
             id != T_D) {
    float *v = kg_alloc(l->g.t[id].nbytes);
    kg_fill(r, v, ne0 * ne1, id == T_NW ? 0.5 : -1.0, id == T_NW ? 1.5 : 1.0);
    l->host[id] = v;
  }
  l->g.data[id] = l->host[id];
}

/* ADD(x, r) -> sum; RMS_NORM(sum) -> h; Q (Q4_K +bias), K (Q8_0 +bias),
 * V (Q6_K +bias) of h; SWIGLU(g, u) -> s; down (Q5_K) of s. */
static void build_layer(layer *l) {
  memset(l, 0, sizeof *l);
  kg_rng r = kg_rng_new(2024);
  tensor(l, T_X, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, H, 1, "x", &r);
  tensor(l, T_R, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, H, 1, "ffn_out", &r);
  tensor(l, T_SUM, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, H, 1, "ffn_residual", &r);
  tensor(l, T_NW, KILN_TYPE_F32, KILN_ROLE_WEIGHT, H, 1, "blk.1.attn_norm.weight", &r);
  tensor(l, T_H, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, H, 1, "attn_norm", &r);
  tensor(l, T_WQ, KILN_TYPE_Q4_K, KILN_ROLE_WEIGHT, H, QW, "blk.1.attn_q.weight", &r);
  tensor(l, T_BQ, KILN_TYPE_F32, KILN_ROLE_WEIGHT, QW, 1, "blk.1.attn_q.bias", &r);
  tensor(l, T_Q, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, QW, 1, "q", &r);
  tensor(l, T_WK, KILN_TYPE_Q8_0, KILN_ROLE_WEIGHT, H, KVW, "blk.1.attn_k.weight", &r);
  tensor(l, T_BK, KILN_TYPE_F32, KILN_ROLE_WEIGHT, KVW, 1, "blk.1.attn_k.bias", &r);
  tensor(l, T_K, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, KVW, 1, "k", &r);
  tensor(l, T_WV, KILN_TYPE_Q6_K, KILN_ROLE_WEIGHT, H, KVW, "blk.1.attn_v.weight", &r);
  tensor(l, T_BV, KILN_TYPE_F32, KILN_ROLE_WEIGHT, KVW, 1, "blk.1.attn_v.bias", &r);
  tensor(l, T_V, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, KVW, 1, "v", &r);
  tensor(l, T_G, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, FF, 1, "gate", &r);
  tensor(l, T_U, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, FF, 1, "up", &r);
  tensor(l, T_S, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, FF, 1, "swiglu", &r);
  tensor(l, T_WD, KILN_TYPE_Q5_K, KILN_ROLE_WEIGHT, FF, H, "blk.1.ffn_down.weight", &r);
  tensor(l, T_D, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, H, 1, "ffn_down", &r);
  l->g.n_tensors = N_T;
  kg_graph_node(&l->g, KILN_OP_ADD, "blk.0.ffn_residual", T_X, T_R, -1, T_SUM);
  kg_graph_node(&l->g, KILN_OP_RMS_NORM, "blk.1.attn_norm", T_SUM, T_NW, -1, T_H)
      ->p.rms_norm.eps = 1e-6f;
  kg_graph_node(&l->g, KILN_OP_MUL_MAT, "blk.1.attn_q", T_WQ, T_H, T_BQ, T_Q);
  kg_graph_node(&l->g, KILN_OP_MUL_MAT, "blk.1.attn_k", T_WK, T_H, T_BK, T_K);
  kg_graph_node(&l->g, KILN_OP_MUL_MAT, "blk.1.attn_v", T_WV, T_H, T_BV, T_V);
  kg_graph_node(&l->g, KILN_OP_SWIGLU, "blk.1.ffn_swiglu", T_G, T_U, -1, T_S);
  kg_graph_node(&l->g, KILN_OP_MUL_MAT, "blk.1.ffn_down", T_WD, T_S, -1, T_D);
}

static const int outs[] = {T_SUM, T_H, T_Q, T_K, T_V, T_S, T_D};
#define N_OUTS (sizeof outs / sizeof outs[0])

/* The f64 reference of every output (from the f32 inputs). */
static void reference(const layer *l, double *const *ref) {
  const float *x = l->host[T_X], *rr = l->host[T_R], *nw = l->host[T_NW];
  double ss = 0;
  for (int i = 0; i < H; i++) {
    ref[0][i] = (double)x[i] + rr[i];
    ss += ref[0][i] * ref[0][i];
  }
  const double sc = 1.0 / sqrt(ss / H + 1e-6);
  for (int i = 0; i < H; i++) ref[1][i] = ref[0][i] * sc * nw[i];
  const int w_id[3] = {T_WQ, T_WK, T_WV}, b_id[3] = {T_BQ, T_BK, T_BV}, rows[3] = {QW, KVW, KVW};
  for (int m = 0; m < 3; m++) {
    const kiln_tensor *t = &l->g.t[w_id[m]];
    float *w = kg_dequant(t->type, l->host[w_id[m]], H, rows[m]);
    const float *b = l->host[b_id[m]];
    for (int n = 0; n < rows[m]; n++) {
      double s = b[n];
      for (int k = 0; k < H; k++) s += (double)w[n * H + k] * ref[1][k];
      ref[2 + m][n] = s;
    }
    free(w);
  }
  const float *g = l->host[T_G], *u = l->host[T_U];
  for (int i = 0; i < FF; i++) ref[5][i] = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
  float *wd = kg_dequant(l->g.t[T_WD].type, l->host[T_WD], FF, H);
  for (int n = 0; n < H; n++) {
    double s = 0;
    for (int k = 0; k < FF; k++) s += (double)wd[n * FF + k] * ref[5][k];
    ref[6][n] = s;
  }
  free(wd);
}

/* The layer unfused, fused, and fused with matvec_load = bulk (every
 * matvec_q through the persistent bulk-copy grid, the group launches
 * too). */
static void test_fused_layer(void **state) {
  layer l;
  build_layer(&l);
  double *ref[N_OUTS];
  float *got[3][N_OUTS];
  for (size_t i = 0; i < N_OUTS; i++) {
    ref[i] = kg_alloc((size_t)l.g.t[outs[i]].ne[0] * sizeof(double));
    for (int f = 0; f < 3; f++) got[f][i] = kg_alloc(l.g.t[outs[i]].nbytes);
  }
  reference(&l, ref);
  int bad = 0;
  for (int mode = 0; mode < KG_N_MODES; mode++)
    for (int b = 0; b < KG_N_BACKENDS; b++) {
      for (int v = 0; v < 3; v++) {
        const int fuse = v > 0;
        kiln_config_override bulk = {kg_backends[b], "matvec_load", "bulk", "test"};
        kiln_runtime *rt = kg_runtime_mode(kg_modes[mode], fuse, v == 2 ? &bulk : NULL, v == 2);
        kiln_backend *be = kg_backend_open(rt, kg_backends[b]);
        kiln_status st = kg_run_graph(be, &l.g, 1, 0, outs, (int)N_OUTS, (void *const *)got[v]);
        if (st) {
          printf("  FAIL %-12s %-3s %s: %s\n", kg_backends[b], kg_modes[mode],
                 v == 0 ? "unfused" : v == 1 ? "fused" : "fused bulk", kiln_status_message(st));
          kiln_status_free(st);
          bad++;
        }
        kiln_backend_close(be);
        kiln_runtime_free(rt);
      }
      for (int v = 1; v < 3; v++)
        for (size_t i = 0; i < N_OUTS; i++) {
          const kiln_tensor *t = &l.g.t[outs[i]];
          kg_metrics vs_ref = kg_compare_f64(got[v][i], ref[i], t->ne[0]);
          kg_metrics vs_unfused = kg_compare(got[v][i], got[0][i], t->ne[0]);
          /* the sum and the norm are f32 work in either mode */
          const double tol = i < 2 || i == 5 ? 1e-6 : kg_mode_tol[mode];
          bool ok = kg_close(&vs_ref, tol) && kg_close(&vs_unfused, 1e-5);
          if (i == 0 && memcmp(got[0][i], got[v][i], t->nbytes / (size_t)t->ne[1]) != 0) ok = false;
          printf("  %-12s %-3s %-13s %s vs f64 rel L2 %.2e |ratio-1| %.2e, vs unfused %.2e%s\n",
                 kg_backends[b], kg_modes[mode], t->name, v == 1 ? "fused     " : "fused bulk",
                 vs_ref.rel_l2, fabs(vs_ref.norm_ratio - 1), vs_unfused.rel_l2, ok ? "" : "  FAIL");
          bad += !ok;
        }
    }
  for (size_t i = 0; i < N_OUTS; i++) {
    free(ref[i]);
    for (int f = 0; f < 3; f++) free(got[f][i]);
  }
  for (int i = 0; i < N_T; i++) free(l.host[i]);
  assert_int_equal(bad, 0);
}

enum { R_Q, R_QO, R_K, R_KO, R_KC, R_V, R_VC, N_R };

static void test_fused_rope_store(void **state) {
  const int hd = 64, nh = 8, nkv = 2, n_rot = 32, n_ctx = 40, pos0 = 37;
  kg_graph g;
  memset(&g, 0, sizeof g);
  kg_rng r = kg_rng_new(37);
  float *host[N_R] = {NULL};
  static const char *const names[N_R] = {"q", "rope_q", "k", "rope_k", "cache_k", "v", "cache_v"};
  for (int i = 0; i < N_R; i++) {
    const bool cache = i == R_KC || i == R_VC, qw = i == R_Q || i == R_QO;
    g.t[i] = kg_tensor(i, KILN_TYPE_F32, cache ? KILN_ROLE_STATE : KILN_ROLE_ACTIVATION,
                       (qw ? nh : nkv) * hd, cache ? n_ctx : 1, 0, names[i]);
    if (i != R_QO && i != R_KO) {
      host[i] = kg_alloc(g.t[i].nbytes);
      kg_fill(&r, host[i], g.t[i].ne[0] * g.t[i].ne[1], -2, 2);
    }
    g.data[i] = host[i];
  }
  g.n_tensors = N_R;
  const kiln_rope_params rp = {KILN_ROPE_NEOX, n_rot, hd, nh, 1000000.0f, {0, 0, 0, 0}};
  kg_graph_node(&g, KILN_OP_ROPE, "blk.0.rope_q", R_Q, -1, -1, R_QO)->p.rope = rp;
  kiln_node *rk = kg_graph_node(&g, KILN_OP_ROPE, "blk.0.rope_k", R_K, -1, -1, R_KO);
  rk->p.rope = rp;
  rk->p.rope.n_head = nkv;
  kg_graph_node(&g, KILN_OP_STORE_KV, "blk.0.store_k", R_KO, -1, -1, R_KC);
  kg_graph_node(&g, KILN_OP_STORE_KV, "blk.0.store_v", R_V, -1, -1, R_VC);
  const int outs_r[4] = {R_QO, R_KO, R_KC, R_VC};
  float *got[3][4];
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < 4; i++) got[c][i] = kg_alloc(g.t[outs_r[i]].nbytes);
  int bad = 0;
  /* the reference: the cpu backend at f64 */
  {
    kiln_runtime *rt = kg_runtime_mode("f32", true, NULL, 0);
    kiln_backend *cpu = kg_backend_open(rt, "cpu");
    KT_ASSERT_OK(kg_run_graph(cpu, &g, 1, pos0, outs_r, 4, (void *const *)got[2]));
    kiln_backend_close(cpu);
    kiln_runtime_free(rt);
  }
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    for (int fuse = 0; fuse < 2; fuse++) {
      kiln_runtime *rt = kg_runtime_mode("q16", fuse, NULL, 0);
      kiln_backend *be = kg_backend_open(rt, kg_backends[b]);
      kiln_status st = kg_run_graph(be, &g, 1, pos0, outs_r, 4, (void *const *)got[fuse]);
      if (st) {
        printf("  FAIL %-12s fuse %d: %s\n", kg_backends[b], fuse, kiln_status_message(st));
        kiln_status_free(st);
        bad++;
      }
      kiln_backend_close(be);
      kiln_runtime_free(rt);
    }
    /* caches whole: position pos0 written, every other one as uploaded */
    for (int i = 0; i < 4; i++) {
      const kiln_tensor *t = &g.t[outs_r[i]];
      const int64_t n = t->ne[0] * t->ne[1];
      const bool same = memcmp(got[0][i], got[1][i], t->nbytes) == 0;
      kg_metrics m = kg_compare(got[1][i], got[2][i], n);
      bool untouched = true;
      if (t->role == KILN_ROLE_STATE)
        for (int64_t c = 0; c < t->ne[1]; c++)
          if (c != pos0 && memcmp(got[1][i] + c * t->ne[0], host[outs_r[i]] + c * t->ne[0],
                                  (size_t)t->ne[0] * sizeof(float)) != 0)
            untouched = false;
      const bool ok = same && kg_close(&m, 1e-6) && untouched;
      printf("  %-12s rope_store %-7s: fused %s the unfused step, vs cpu f64 rel L2 %.2e%s%s\n",
             kg_backends[b], t->name, same ? "bit-identical to" : "DIFFERS from", m.rel_l2,
             untouched ? "" : ", OTHER POSITIONS WRITTEN", ok ? "" : "  FAIL");
      bad += !ok;
    }
  }
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < 4; i++) free(got[c][i]);
  for (int i = 0; i < N_R; i++) free(host[i]);
  assert_int_equal(bad, 0);
}
#endif

/* MQ_PART (tests/gpu/local.mk) splits the suite into programs that `make
 * check -j` runs side by side: 0, 1, 2 every block type with matvec_load
 * direct, staged, bulk (its NVRTC compiles are most of the suite's time:
 * whole, it outlasted a device call's 240 s for the GPU suites); 3 the
 * fused layer and rope_store; undefined, all of it. */
#if defined(MQ_PART) && (MQ_PART < 0 || MQ_PART > 3)
#error "MQ_PART must be 0..3"
#endif

int main(void) {
  int gate = kg_gate("test_gpu_matvec_q");
  if (gate) return gate;
  const struct CMUnitTest tests[] = {
#if !defined(MQ_PART) || MQ_PART < 3
      cmocka_unit_test(test_matvec_q_every_type),
#endif
#if !defined(MQ_PART) || MQ_PART == 3
      cmocka_unit_test(test_fused_layer),
      cmocka_unit_test(test_fused_rope_store),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
