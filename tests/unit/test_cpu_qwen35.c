/* cpu backend, qwen35's ops against float64 references written here from
 * kiln/graph.h's definitions (token by token, no chunking, no threads):
 *  - SLICE gathers exactly; SIGMOID_MUL and GDN_GATE round once at f64 and
 *    keep their limits at the extremes;
 *  - SSM_CONV: one step or two give the same outputs and the same state;
 *    a step at pos0 = 0 never reads the state (NaN-filled here);
 *  - GATED_DELTA_NET: decode (one token per step) and prefill (the chunked
 *    form, any chunk size, chunks cut mid-way, steps split) all equal the
 *    recurrence, with grouped q/k heads (Hk < Hv, value head h reading
 *    q/k head h % Hk), Dk != Dv, and decays that underflow f32;
 *  - ROPE IMROPE equals NEOX when the sections cover every pair, and
 *    leaves the fourth section's pairs unturned;
 *  - the node checks name what is malformed. */
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

#include "test_cpu_common.h"

/* Runs a node with up to four sources. */
static kiln_status run4(const cpu_ctx *ctx, const kiln_node *node, const void *const *src, void *dst,
                        int32_t n_tokens, int32_t pos0) {
  cpu_io io;
  memset(&io, 0, sizeof io);
  for (int i = 0; i < KILN_MAX_SRC; i++) io.src[i] = src[i];
  io.dst = dst;
  io.n_tokens = n_tokens;
  io.pos0 = pos0;
  return cpu_node_run(ctx, node, &io);
}

static void run4_ok(const cpu_ctx *ctx, const kiln_node *node, const void *const *src, void *dst,
                    int32_t n_tokens, int32_t pos0) {
  KT_ASSERT_OK(run4(ctx, node, src, dst, n_tokens, pos0));
}

static void fill_nan(float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] = NAN;
}

/* ---- SLICE ------------------------------------------------------------- */

static void test_slice_gathers(void **state) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 2, CPU_PRECISION_F32);
  const int64_t hd = 8, nh = 5, T = 3, W = 2 * hd * nh;
  kct_rng r = kct_rng_new(1);
  float *x = kct_alloc((size_t)(W * T) * sizeof(float)), *y = kct_alloc((size_t)(hd * nh * T) * sizeof(float));
  kct_fill(&r, x, W * T, -1, 1);
  kiln_tensor tx = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "blk.3.attn_q");
  kiln_tensor ty = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, hd * nh, T, "blk.3.attn_gate_heads");
  for (int part = 0; part < 2; part++) {
    kiln_node n = kct_node(KILN_OP_SLICE, "blk.3.attn_gate_heads", &tx, NULL, NULL, &ty);
    n.p.slice = (kiln_slice_params){(int32_t)(part * hd), (int32_t)hd, (int32_t)(2 * hd)};
    kct_run_ok(&ctx, &n, x, NULL, NULL, y, (int32_t)T, 0);
    for (int64_t t = 0; t < T; t++)
      for (int64_t h = 0; h < nh; h++)
        assert_memory_equal(y + t * hd * nh + h * hd, x + t * W + h * 2 * hd + part * hd, (size_t)hd * sizeof(float));
  }
  free(x);
  free(y);
  kct_ctx_close(&ctx);
}

/* ---- SIGMOID_MUL, GDN_GATE ---------------------------------------------- */

static void test_sigmoid_mul(void **state) {
  const int64_t W = 64, T = 3, n = W * T;
  kct_rng r = kct_rng_new(2);
  float *a = kct_alloc((size_t)n * sizeof(float)), *b = kct_alloc((size_t)n * sizeof(float));
  float *y = kct_alloc((size_t)n * sizeof(float));
  double *ref = kct_alloc((size_t)n * sizeof(double));
  kct_fill(&r, a, n, -8, 8);
  kct_fill(&r, b, n, -2, 2);
  a[0] = -200.0f; /* expf(200) is inf: the product's limit is 0 */
  a[1] = 200.0f;  /* sigmoid is 1: b itself */
  for (int64_t i = 0; i < n; i++) ref[i] = (double)b[i] / (1.0 + exp(-(double)a[i]));
  kiln_tensor ta = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "gate");
  kiln_tensor tb = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "attn");
  kiln_tensor ty = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "blk.3.attn_gated");
  kiln_node node = kct_node(KILN_OP_SIGMOID_MUL, "blk.3.attn_gated", &ta, &tb, NULL, &ty);
  for (int prec = 0; prec < 2; prec++) {
    cpu_ctx ctx;
    kct_ctx_open(&ctx, 2, prec ? CPU_PRECISION_F64 : CPU_PRECISION_F32);
    kct_run_ok(&ctx, &node, a, b, NULL, y, (int32_t)T, 0);
    assert_true(y[0] == 0.0f);
    assert_true(y[1] == b[1]);
    if (prec) kct_assert_rounded("sigmoid_mul f64", y, ref, W, T, 0.0);
    else kct_assert_close("sigmoid_mul f32", y, ref, W, T, 1e-6);
    kct_ctx_close(&ctx);
  }
  free(a);
  free(b);
  free(y);
  free(ref);
}

static void test_gdn_gate(void **state) {
  const int64_t H = 6, T = 4;
  kct_rng r = kct_rng_new(3);
  float al[24], be[24], A[6], dt[6], y[48];
  double ref[48];
  kct_fill(&r, al, H * T, -6, 6);
  kct_fill(&r, be, H * T, -6, 6);
  kct_fill(&r, dt, H, -1, 1);
  for (int64_t h = 0; h < H; h++) A[h] = -(float)exp(kct_uniform(&r, -1, 1));
  al[0] = 40.0f; /* softplus above 20 is x itself */
  al[1] = -90.0f; /* softplus ~ e^x, not 0 */
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < H; h++) {
      double x = (double)al[t * H + h] + (double)dt[h];
      double sp = x > 20.0 ? x : log1p(exp(x));
      ref[t * 2 * H + h] = sp * (double)A[h];
      ref[t * 2 * H + H + h] = 1.0 / (1.0 + exp(-(double)be[t * H + h]));
    }
  kiln_tensor ta = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, H, T, "blk.0.ssm_alpha");
  kiln_tensor tb = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, H, T, "blk.0.ssm_beta");
  kiln_tensor tA = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_WEIGHT, H, 1, "blk.0.ssm_a");
  kiln_tensor tdt = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_WEIGHT, H, 1, "blk.0.ssm_dt.bias");
  kiln_tensor ty = kct_tensor(4, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 2 * H, T, "blk.0.ssm_gates");
  kiln_node node = kct_node(KILN_OP_GDN_GATE, "blk.0.ssm_gates", &ta, &tb, &tA, &ty);
  node.src[3] = &tdt;
  const void *src[4] = {al, be, A, dt};
  for (int prec = 0; prec < 2; prec++) {
    cpu_ctx ctx;
    kct_ctx_open(&ctx, 2, prec ? CPU_PRECISION_F64 : CPU_PRECISION_F32);
    run4_ok(&ctx, &node, src, y, (int32_t)T, 0);
    if (prec) kct_assert_rounded("gdn_gate f64", y, ref, 2 * H, T, 0.0);
    else kct_assert_close("gdn_gate f32", y, ref, 2 * H, T, 1e-5);
    assert_true(y[1] < 0.0f && y[1] > -1e-30f);
    kct_ctx_close(&ctx);
  }
}

/* ---- SSM_CONV ----------------------------------------------------------- */

/* The definition: h = [state (zeros at pos 0), x], dst = silu(conv). */
static void ref_ssm_conv(const float *x, const float *w, int64_t C, int64_t K, int64_t T, double *y) {
  for (int64_t c = 0; c < C; c++)
    for (int64_t t = 0; t < T; t++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++) {
        int64_t p = t - (K - 1) + k;
        s += (double)w[c * K + k] * (p >= 0 ? (double)x[p * C + c] : 0.0);
      }
      y[t * C + c] = s / (1.0 + exp(-s));
    }
}

static void test_ssm_conv_steps(void **state) {
  const int64_t C = 40, K = 4, T = 9, cap = 9;
  kct_rng r = kct_rng_new(4);
  float *x = kct_alloc((size_t)(C * T) * sizeof(float)), *w = kct_alloc((size_t)(C * K) * sizeof(float));
  float *y = kct_alloc((size_t)(C * cap) * sizeof(float)), *st1 = kct_alloc((size_t)(C * (K - 1)) * sizeof(float));
  float *y2 = kct_alloc((size_t)(C * cap) * sizeof(float)), *st2 = kct_alloc((size_t)(C * (K - 1)) * sizeof(float));
  double *ref = kct_alloc((size_t)(C * T) * sizeof(double));
  float *xs = kct_alloc((size_t)(C * cap) * sizeof(float)), *ys = kct_alloc((size_t)(C * cap) * sizeof(float));
  kct_fill(&r, x, C * T, -2, 2);
  kct_fill(&r, w, C * K, -1, 1);
  ref_ssm_conv(x, w, C, K, T, ref);
  kiln_tensor tx = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, C, cap, "blk.0.attn_qkv");
  kiln_tensor tw = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_WEIGHT, K, C, "blk.0.ssm_conv1d.weight");
  kiln_tensor ts = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_RECURRENT, (K - 1) * C, 1, "blk.0.conv_state");
  kiln_tensor ty = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, C, cap, "blk.0.ssm_conv");
  kiln_node node = kct_node(KILN_OP_SSM_CONV, "blk.0.ssm_conv", &tx, &tw, &ts, &ty);
  for (int prec = 0; prec < 2; prec++) {
    cpu_ctx ctx;
    kct_ctx_open(&ctx, 3, prec ? CPU_PRECISION_F64 : CPU_PRECISION_F32);
    fill_nan(st1, C * (K - 1)); /* pos0 = 0 must not read it */
    kct_run_ok(&ctx, &node, x, w, st1, y, (int32_t)T, 0);
    if (prec) kct_assert_rounded("ssm_conv f64, one step", y, ref, C, T, 1e-30);
    else kct_assert_close("ssm_conv f32, one step", y, ref, C, T, 1e-6);
    /* 2 tokens, then 1, then 6: the state carries the history. Each step
     * reads and writes buffers of the tensors' full capacity. */
    fill_nan(st2, C * (K - 1));
    static const int32_t steps[] = {2, 1, 6};
    for (int i = 0, t = 0; i < 3; t += steps[i++]) {
      memcpy(xs, x + t * C, (size_t)(steps[i] * C) * sizeof(float));
      kct_run_ok(&ctx, &node, xs, w, st2, ys, steps[i], t);
      memcpy(y2 + t * C, ys, (size_t)(steps[i] * C) * sizeof(float));
    }
    assert_memory_equal(y2, y, (size_t)(C * T) * sizeof(float));
    assert_memory_equal(st2, st1, (size_t)(C * (K - 1)) * sizeof(float));
    /* the state is the last K-1 inputs */
    for (int64_t k = 0; k < K - 1; k++) assert_memory_equal(st1 + k * C, x + (T - K + 1 + k) * C, (size_t)C * sizeof(float));
    kct_ctx_close(&ctx);
  }
  free(x);
  free(w);
  free(y);
  free(y2);
  free(st1);
  free(st2);
  free(ref);
  free(xs);
  free(ys);
}

/* ---- GATED_DELTA_NET ---------------------------------------------------- */

typedef struct gdn_case {
  int32_t Hk, Hv, Dk, Dv;
  int64_t T;
  float *qkv, *gates; /* [2*Hk*Dk + Hv*Dv, T], [2*Hv, T] */
  double *ref;        /* [Hv*Dv, T] */
  double *ref_state;  /* [Dk*Dv*Hv] after all T tokens */
} gdn_case;

/* The recurrence of kiln/graph.h, token by token, in double. */
static void ref_gdn(gdn_case *c, float l2_eps) {
  const int64_t W = 2 * c->Hk * c->Dk + c->Hv * c->Dv, kd = (int64_t)c->Hk * c->Dk;
  double *S = calloc((size_t)c->Dk * c->Dv * c->Hv, sizeof *S);
  double *q = kct_alloc((size_t)c->Dk * sizeof(double)), *k = kct_alloc((size_t)c->Dk * sizeof(double));
  for (int64_t t = 0; t < c->T; t++)
    for (int64_t h = 0; h < c->Hv; h++) {
      const int64_t kh = h % c->Hk;
      const float *row = c->qkv + t * W;
      double qs = 0, ks = 0;
      for (int64_t i = 0; i < c->Dk; i++) {
        qs += (double)row[kh * c->Dk + i] * row[kh * c->Dk + i];
        ks += (double)row[kd + kh * c->Dk + i] * row[kd + kh * c->Dk + i];
      }
      for (int64_t i = 0; i < c->Dk; i++) {
        q[i] = row[kh * c->Dk + i] / sqrt(qs + (double)l2_eps) / sqrt((double)c->Dk);
        k[i] = row[kd + kh * c->Dk + i] / sqrt(ks + (double)l2_eps);
      }
      const double g = c->gates[t * 2 * c->Hv + h], beta = c->gates[t * 2 * c->Hv + c->Hv + h];
      double *Sh = S + h * c->Dk * c->Dv; /* Sh[i][j] at j*Dk + i */
      for (int64_t e = 0; e < c->Dk * c->Dv; e++) Sh[e] *= exp(g);
      for (int64_t j = 0; j < c->Dv; j++) {
        double kv = 0;
        for (int64_t i = 0; i < c->Dk; i++) kv += Sh[j * c->Dk + i] * k[i];
        const double delta = beta * ((double)row[2 * kd + h * c->Dv + j] - kv);
        for (int64_t i = 0; i < c->Dk; i++) Sh[j * c->Dk + i] += k[i] * delta;
      }
      for (int64_t j = 0; j < c->Dv; j++) {
        double o = 0;
        for (int64_t i = 0; i < c->Dk; i++) o += Sh[j * c->Dk + i] * q[i];
        c->ref[t * c->Hv * c->Dv + h * c->Dv + j] = o;
      }
    }
  memcpy(c->ref_state, S, (size_t)c->Dk * c->Dv * c->Hv * sizeof *S);
  free(S);
  free(q);
  free(k);
}

static gdn_case gdn_make(int32_t Hk, int32_t Hv, int32_t Dk, int32_t Dv, int64_t T, double g_lo, double g_hi,
                         uint64_t seed) {
  gdn_case c = {Hk, Hv, Dk, Dv, T, NULL, NULL, NULL, NULL};
  const int64_t W = 2 * (int64_t)Hk * Dk + (int64_t)Hv * Dv;
  kct_rng r = kct_rng_new(seed);
  c.qkv = kct_alloc((size_t)(W * T) * sizeof(float));
  c.gates = kct_alloc((size_t)(2 * Hv * T) * sizeof(float));
  c.ref = kct_alloc((size_t)((int64_t)Hv * Dv * T) * sizeof(double));
  c.ref_state = kct_alloc((size_t)Dk * Dv * Hv * sizeof(double));
  kct_fill(&r, c.qkv, W * T, -1, 1);
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < Hv; h++) {
      c.gates[t * 2 * Hv + h] = (float)kct_uniform(&r, g_lo, g_hi);
      c.gates[t * 2 * Hv + Hv + h] = (float)kct_uniform(&r, 0.05, 0.95);
    }
  ref_gdn(&c, 1e-6f);
  return c;
}

static void gdn_free(gdn_case *c) {
  free(c->qkv);
  free(c->gates);
  free(c->ref);
  free(c->ref_state);
}

typedef struct gdn_tensors {
  kiln_tensor qkv, gates, state, dst;
  kiln_node node;
} gdn_tensors;

static void gdn_tensors_init(gdn_tensors *g, const gdn_case *c, int64_t cap, int32_t chunk) {
  const int64_t W = 2 * (int64_t)c->Hk * c->Dk + (int64_t)c->Hv * c->Dv;
  g->qkv = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, cap, "blk.0.ssm_conv");
  g->gates = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 2 * c->Hv, cap, "blk.0.ssm_gates");
  g->state = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_RECURRENT, (int64_t)c->Dk * c->Dv * c->Hv, 1, "blk.0.ssm_state");
  g->dst = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, (int64_t)c->Hv * c->Dv, cap, "blk.0.gated_delta_net");
  g->node = kct_node(KILN_OP_GATED_DELTA_NET, "blk.0.gated_delta_net", &g->qkv, &g->gates, &g->state, &g->dst);
  g->node.p.gdn = (kiln_gdn_params){c->Hk, c->Hv, c->Dk, c->Dv, chunk, 1e-6f, (float)(1.0 / sqrt((double)c->Dk))};
}

/* Runs the case as steps of the given sizes (summing to T) with `chunk`,
 * and returns the output and the state. */
static void gdn_run_steps(const cpu_ctx *ctx, const gdn_case *c, int32_t chunk, const int64_t *steps, float *y,
                          float *state) {
  gdn_tensors g;
  gdn_tensors_init(&g, c, c->T, chunk);
  const int64_t W = g.qkv.ne[0], V = g.dst.ne[0];
  fill_nan(state, g.state.ne[0]);
  /* Each step reads and writes buffers of the tensors' full capacity. */
  float *qs = kct_alloc((size_t)(W * c->T) * sizeof(float)), *gs = kct_alloc((size_t)(2 * c->Hv * c->T) * sizeof(float));
  float *ys = kct_alloc((size_t)(V * c->T) * sizeof(float));
  int64_t t = 0;
  for (int i = 0; t < c->T; i++) {
    memcpy(qs, c->qkv + t * W, (size_t)(steps[i] * W) * sizeof(float));
    memcpy(gs, c->gates + t * 2 * c->Hv, (size_t)(steps[i] * 2 * c->Hv) * sizeof(float));
    const void *src[4] = {qs, gs, state, NULL};
    run4_ok(ctx, &g.node, src, ys, (int32_t)steps[i], (int32_t)t);
    memcpy(y + t * V, ys, (size_t)(steps[i] * V) * sizeof(float));
    t += steps[i];
  }
  assert_int_equal(t, c->T);
  free(qs);
  free(gs);
  free(ys);
}

static void assert_state(const char *what, const float *state, const double *ref, int64_t n, double tol) {
  kct_assert_close(what, state, ref, n, 1, tol);
}

/* Prefill in one step (chunked), any chunk size, against the recurrence. */
static void test_gdn_prefill_chunked(void **state) {
  gdn_case c = gdn_make(2, 4, 16, 8, 150, -1.5, -0.01, 10);
  const int64_t V = (int64_t)c.Hv * c.Dv, S = (int64_t)c.Dk * c.Dv * c.Hv;
  float *y = kct_alloc((size_t)(V * c.T) * sizeof(float)), *st = kct_alloc((size_t)S * sizeof(float));
  static const int32_t chunks[] = {64, 1, 7, 150, 200};
  const int64_t one[] = {150};
  for (int prec = 0; prec < 2; prec++) {
    cpu_ctx ctx;
    kct_ctx_open(&ctx, 3, prec ? CPU_PRECISION_F64 : CPU_PRECISION_F32);
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
      char what[64];
      snprintf(what, sizeof what, "gdn %s, chunk %d", prec ? "f64" : "f32", (int)chunks[i]);
      gdn_run_steps(&ctx, &c, chunks[i], one, y, st);
      if (prec) {
        kct_assert_rounded(what, y, c.ref, V, c.T, 1e-12);
        assert_state(what, st, c.ref_state, S, 1e-7);
      } else {
        kct_assert_close(what, y, c.ref, V, c.T, 2e-5);
        assert_state(what, st, c.ref_state, S, 2e-5);
      }
    }
    kct_ctx_close(&ctx);
  }
  free(y);
  free(st);
  gdn_free(&c);
}

/* Decode (one token a step), and prefill split into steps of several
 * sizes: the state carries over exactly as the recurrence says. */
static void test_gdn_steps(void **state) {
  gdn_case c = gdn_make(2, 6, 8, 12, 70, -2.0, -0.05, 11);
  const int64_t V = (int64_t)c.Hv * c.Dv, S = (int64_t)c.Dk * c.Dv * c.Hv;
  float *y = kct_alloc((size_t)(V * c.T) * sizeof(float)), *st = kct_alloc((size_t)S * sizeof(float));
  int64_t ones[70];
  for (int i = 0; i < 70; i++) ones[i] = 1;
  const int64_t mixed[] = {5, 1, 33, 1, 1, 29};
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 2, CPU_PRECISION_F64);
  /* f32 storage of the state between steps rounds it each step */
  gdn_run_steps(&ctx, &c, 16, ones, y, st);
  kct_assert_close("gdn f64, one token a step", y, c.ref, V, c.T, 1e-6);
  assert_state("gdn f64, one token a step: state", st, c.ref_state, S, 1e-6);
  gdn_run_steps(&ctx, &c, 16, mixed, y, st);
  kct_assert_close("gdn f64, mixed steps", y, c.ref, V, c.T, 1e-6);
  assert_state("gdn f64, mixed steps: state", st, c.ref_state, S, 1e-6);
  kct_ctx_close(&ctx);
  free(y);
  free(st);
  gdn_free(&c);
}

/* Decays far below f32's range inside a chunk (exp(cum) underflows to 0)
 * stay finite and correct: the chunked form only takes exponents of
 * differences. */
static void test_gdn_strong_decay(void **state) {
  gdn_case c = gdn_make(1, 2, 16, 16, 64, -40.0, -20.0, 12);
  const int64_t V = (int64_t)c.Hv * c.Dv, S = (int64_t)c.Dk * c.Dv * c.Hv;
  float *y = kct_alloc((size_t)(V * c.T) * sizeof(float)), *st = kct_alloc((size_t)S * sizeof(float));
  const int64_t one[] = {64};
  for (int prec = 0; prec < 2; prec++) {
    cpu_ctx ctx;
    kct_ctx_open(&ctx, 1, prec ? CPU_PRECISION_F64 : CPU_PRECISION_F32);
    gdn_run_steps(&ctx, &c, 64, one, y, st);
    for (int64_t i = 0; i < V * c.T; i++) assert_true(isfinite(y[i]));
    kct_assert_close(prec ? "gdn strong decay f64" : "gdn strong decay f32", y, c.ref, V, c.T, prec ? 1e-7 : 1e-5);
    kct_ctx_close(&ctx);
  }
  free(y);
  free(st);
  gdn_free(&c);
}

/* The results do not depend on the thread count. */
static void test_gdn_threads(void **state) {
  gdn_case c = gdn_make(2, 8, 16, 16, 40, -1.0, -0.1, 13);
  const int64_t V = (int64_t)c.Hv * c.Dv, S = (int64_t)c.Dk * c.Dv * c.Hv;
  float *y1 = kct_alloc((size_t)(V * c.T) * sizeof(float)), *y4 = kct_alloc((size_t)(V * c.T) * sizeof(float));
  float *s1 = kct_alloc((size_t)S * sizeof(float)), *s4 = kct_alloc((size_t)S * sizeof(float));
  const int64_t one[] = {40};
  cpu_ctx a, b;
  kct_ctx_open(&a, 1, CPU_PRECISION_F32);
  kct_ctx_open(&b, 4, CPU_PRECISION_F32);
  gdn_run_steps(&a, &c, 16, one, y1, s1);
  gdn_run_steps(&b, &c, 16, one, y4, s4);
  assert_memory_equal(y1, y4, (size_t)(V * c.T) * sizeof(float));
  assert_memory_equal(s1, s4, (size_t)S * sizeof(float));
  kct_ctx_close(&a);
  kct_ctx_close(&b);
  free(y1);
  free(y4);
  free(s1);
  free(s4);
  gdn_free(&c);
}

/* ---- ROPE IMROPE -------------------------------------------------------- */

/* Pair i turns by pos (t, h, w sections) or 0 (the fourth), NEOX pairing. */
static void ref_imrope(const float *x, int64_t T, int32_t pos0, const kiln_rope_params *p, double *y) {
  const int64_t half = p->n_rot / 2, W = (int64_t)p->head_dim * p->n_head;
  const int64_t n = (int64_t)p->sections[0] + p->sections[1] + p->sections[2] + p->sections[3];
  for (int64_t t = 0; t < T; t++)
    for (int64_t hh = 0; hh < p->n_head; hh++) {
      const float *xh = x + t * W + hh * p->head_dim;
      double *yh = y + t * W + hh * p->head_dim;
      for (int64_t d = 0; d < p->head_dim; d++) yh[d] = xh[d];
      for (int64_t i = 0; i < half; i++) {
        const int64_t s = i % n;
        const bool turns = (s % 3 == 0 && s < 3 * p->sections[0]) || (s % 3 == 1 && s < 3 * p->sections[1]) ||
                           (s % 3 == 2 && s < 3 * p->sections[2]);
        const double a = (turns ? (double)(pos0 + t) : 0.0) * pow((double)p->theta, -2.0 * (double)i / (double)p->n_rot);
        yh[i] = xh[i] * cos(a) - xh[i + half] * sin(a);
        yh[i + half] = xh[i] * sin(a) + xh[i + half] * cos(a);
      }
    }
}

static void test_imrope(void **state) {
  const int32_t hd = 32, nh = 3;
  const int64_t T = 5, W = hd * nh;
  kct_rng r = kct_rng_new(14);
  float *x = kct_alloc((size_t)(W * T) * sizeof(float)), *y = kct_alloc((size_t)(W * T) * sizeof(float));
  float *yn = kct_alloc((size_t)(W * T) * sizeof(float));
  double *ref = kct_alloc((size_t)(W * T) * sizeof(double));
  kct_fill(&r, x, W * T, -1, 1);
  kiln_tensor tx = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "blk.3.q_norm");
  kiln_tensor ty = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "blk.3.rope_q");
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 2, CPU_PRECISION_F64);
  /* Qwen3.5's sections [11, 11, 10] scaled to n_rot 8: every pair turns,
   * as NEOX; then sections with a fourth stream: its pairs stay. */
  static const int32_t secs[][4] = {{2, 1, 1, 0}, {1, 1, 1, 0}, {1, 0, 0, 1}, {3, 1, 0, 2}};
  for (size_t s = 0; s < sizeof secs / sizeof secs[0]; s++) {
    kiln_node n = kct_node(KILN_OP_ROPE, "blk.3.rope_q", &tx, NULL, NULL, &ty);
    n.p.rope = (kiln_rope_params){KILN_ROPE_IMROPE, 8, hd, nh, 1e7f, {secs[s][0], secs[s][1], secs[s][2], secs[s][3]}};
    kct_run_ok(&ctx, &n, x, NULL, NULL, y, (int32_t)T, 1000);
    ref_imrope(x, T, 1000, &n.p.rope, ref);
    char what[48];
    snprintf(what, sizeof what, "imrope sections %zu", s);
    kct_assert_rounded(what, y, ref, W, T, 1e-30);
    if (s < 2) {
      n.p.rope = (kiln_rope_params){KILN_ROPE_NEOX, 8, hd, nh, 1e7f, {0, 0, 0, 0}};
      kct_run_ok(&ctx, &n, x, NULL, NULL, yn, (int32_t)T, 1000);
      assert_memory_equal(y, yn, (size_t)(W * T) * sizeof(float));
    }
  }
  /* sections {1, 0, 0, 1}: pair 1 is the fourth stream's and does not turn */
  kiln_node n = kct_node(KILN_OP_ROPE, "blk.3.rope_q", &tx, NULL, NULL, &ty);
  n.p.rope = (kiln_rope_params){KILN_ROPE_IMROPE, 8, hd, nh, 1e7f, {1, 0, 0, 1}};
  kct_run_ok(&ctx, &n, x, NULL, NULL, y, (int32_t)T, 1000);
  assert_true(y[1] == x[1] && y[1 + 4] == x[1 + 4]);
  kct_ctx_close(&ctx);
  free(x);
  free(y);
  free(yn);
  free(ref);
}

/* ---- node checks -------------------------------------------------------- */

static void test_node_checks(void **state) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 1, CPU_PRECISION_F32);
  float buf[4096];
  gdn_case c = {2, 4, 8, 8, 1, NULL, NULL, NULL, NULL};
  gdn_tensors g;
  gdn_tensors_init(&g, &c, 4, 64);
  const void *src[4] = {buf, buf + 1024, buf + 2048, NULL};
  g.node.p.gdn.n_v_heads = 5;
  KT_ASSERT_ERR(run4(&ctx, &g.node, src, buf + 3072, 1, 0), KILN_STATUS_INVALID_ARGUMENT,
                "gated_delta_net node 'blk.0.gated_delta_net': n_v_heads 5 is not a multiple of n_k_heads 2");
  gdn_tensors_init(&g, &c, 4, 64);
  g.state.role = KILN_ROLE_STATE;
  KT_ASSERT_ERR(run4(&ctx, &g.node, src, buf + 3072, 1, 0), KILN_STATUS_INVALID_ARGUMENT,
                "state src2 'blk.0.ssm_state' must be a RECURRENT");
  gdn_tensors_init(&g, &c, 4, 64);
  g.qkv.ne[0] = 63;
  g.qkv.nbytes = 63 * 4 * 4;
  KT_ASSERT_ERR(run4(&ctx, &g.node, src, buf + 3072, 1, 0), KILN_STATUS_INVALID_ARGUMENT,
                "qkv width 63 differs from 2 x 2 x 8 + 4 x 8 = 64");
  gdn_tensors_init(&g, &c, 4, 64);
  g.node.p.gdn.l2_eps = 0.0f;
  KT_ASSERT_ERR(run4(&ctx, &g.node, src, buf + 3072, 1, 0), KILN_STATUS_INVALID_ARGUMENT, "l2_eps 0");
  /* the output may not alias the state */
  gdn_tensors_init(&g, &c, 4, 64);
  const void *alias[4] = {buf, buf + 1024, buf + 2048, NULL};
  KT_ASSERT_ERR(run4(&ctx, &g.node, alias, buf + 2048, 1, 0), KILN_STATUS_INVALID_ARGUMENT, "overlaps src2");

  kiln_tensor tx = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 64, 2, "x");
  kiln_tensor ty = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 24, 2, "y");
  kiln_node n = kct_node(KILN_OP_SLICE, "blk.3.attn_q_heads", &tx, NULL, NULL, &ty);
  n.p.slice = (kiln_slice_params){10, 8, 16};
  KT_ASSERT_ERR(kct_run(&ctx, &n, buf, NULL, NULL, buf + 1024, 1, 0), KILN_STATUS_INVALID_ARGUMENT,
                "offset 10, length 8, stride 16");
  n.p.slice = (kiln_slice_params){0, 5, 16};
  KT_ASSERT_ERR(kct_run(&ctx, &n, buf, NULL, NULL, buf + 1024, 1, 0), KILN_STATUS_INVALID_ARGUMENT,
                "dst width 24 differs from 4 groups x length 5");

  kiln_tensor tr = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 64, 2, "r");
  n = kct_node(KILN_OP_ROPE, "blk.3.rope_k", &tx, NULL, NULL, &tr);
  n.p.rope = (kiln_rope_params){KILN_ROPE_IMROPE, 8, 32, 2, 1e7f, {0, 0, 0, 0}};
  KT_ASSERT_ERR(kct_run(&ctx, &n, buf, NULL, NULL, buf + 1024, 1, 0), KILN_STATUS_INVALID_ARGUMENT,
                "sum to 0; IMROPE wants 1 .. head_dim 32");
  n.p.rope = (kiln_rope_params){KILN_ROPE_NEOX, 8, 32, 2, 1e7f, {1, 0, 0, 0}};
  KT_ASSERT_ERR(kct_run(&ctx, &n, buf, NULL, NULL, buf + 1024, 1, 0), KILN_STATUS_INVALID_ARGUMENT,
                "only IMROPE has sections");

  kiln_tensor cw = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_WEIGHT, 4, 64, "blk.0.ssm_conv1d.weight");
  kiln_tensor cs = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_RECURRENT, 3 * 63, 1, "blk.0.conv_state");
  kiln_tensor cy = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 64, 2, "blk.0.ssm_conv");
  n = kct_node(KILN_OP_SSM_CONV, "blk.0.ssm_conv", &tx, &cw, &cs, &cy);
  KT_ASSERT_ERR(kct_run(&ctx, &n, buf, buf + 512, buf + 1024, buf + 2048, 1, 0), KILN_STATUS_INVALID_ARGUMENT,
                "conv state src2 'blk.0.conv_state' must be a RECURRENT [192, 1] state");
  kct_ctx_close(&ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slice_gathers),     cmocka_unit_test(test_sigmoid_mul),
      cmocka_unit_test(test_gdn_gate),          cmocka_unit_test(test_ssm_conv_steps),
      cmocka_unit_test(test_gdn_prefill_chunked), cmocka_unit_test(test_gdn_steps),
      cmocka_unit_test(test_gdn_strong_decay),  cmocka_unit_test(test_gdn_threads),
      cmocka_unit_test(test_imrope),            cmocka_unit_test(test_node_checks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
