/* Shared pieces of the cpu backend's unit suites; see test_cpu_common.h.
 * The references here follow kiln/graph.h's op definitions literally, in
 * double, one output at a time: no lanes, no blocking, no threads. */
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

#include "kiln/dequant.h"
#include "kiln/types.h"
#include "testutil.h"

#include "test_cpu_common.h"

void kct_ctx_open(cpu_ctx *ctx, int threads, cpu_precision precision) {
  memset(ctx, 0, sizeof *ctx);
  int rc = cpu_pool_create(threads, &ctx->pool);
  if (rc != 0) fail_msg("cpu_pool_create(%d): %s", threads, strerror(rc));
  ctx->precision = precision;
  ctx->simd = cpu_simd_detect();
  ctx->dequantize = kiln_dequantize;
  ctx->status_new = kiln_status_new;
  ctx->status_annotate = kiln_status_annotate;
  ctx->status_free = kiln_status_free;
}

void kct_ctx_close(cpu_ctx *ctx) {
  cpu_pool_destroy(ctx->pool);
  ctx->pool = NULL;
}

kiln_tensor kct_tensor(int32_t id, kiln_type type, kiln_tensor_role role, int64_t ne0,
                       int64_t ne1, const char *name) {
  kiln_tensor t;
  memset(&t, 0, sizeof t);
  t.id = id;
  t.type = type;
  t.role = role;
  t.n_dims = ne1 > 1 ? 2 : 1;
  t.ne[0] = ne0;
  t.ne[1] = ne1;
  t.ne[2] = t.ne[3] = 1;
  int64_t rb = kiln_type_row_bytes(type, ne0);
  t.nbytes = rb > 0 ? (uint64_t)rb * (uint64_t)ne1 : 0;
  snprintf(t.name, sizeof t.name, "%s", name);
  return t;
}

kiln_node kct_node(kiln_op op, const char *name, const kiln_tensor *s0, const kiln_tensor *s1,
                   const kiln_tensor *s2, const kiln_tensor *dst) {
  kiln_node n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.layer = 0;
  n.src[0] = s0;
  n.src[1] = s1;
  n.src[2] = s2;
  n.dst = dst;
  snprintf(n.name, sizeof n.name, "%s", name);
  return n;
}

kiln_status kct_run(const cpu_ctx *ctx, const kiln_node *node, const void *s0, const void *s1,
                    const void *s2, void *dst, int32_t n_tokens, int32_t pos0) {
  cpu_io io;
  memset(&io, 0, sizeof io);
  io.src[0] = s0;
  io.src[1] = s1;
  io.src[2] = s2;
  io.dst = dst;
  io.n_tokens = n_tokens;
  io.pos0 = pos0;
  return cpu_node_run(ctx, node, &io);
}

void kct_run_ok(const cpu_ctx *ctx, const kiln_node *node, const void *s0, const void *s1,
                const void *s2, void *dst, int32_t n_tokens, int32_t pos0) {
  KT_ASSERT_OK(cpu_node_validate(ctx, node));
  KT_ASSERT_OK(kct_run(ctx, node, s0, s1, s2, dst, n_tokens, pos0));
}

kct_rng kct_rng_new(uint64_t seed) {
  kct_rng r = {seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull};
  return r;
}

double kct_uniform(kct_rng *r, double lo, double hi) {
  /* xorshift64*: plenty for test data, and the same on every machine. */
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  uint64_t v = r->s * 0x2545f4914f6cdd1dull;
  return lo + (hi - lo) * ((double)(v >> 11) / 9007199254740992.0);
}

void kct_fill(kct_rng *r, float *x, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)kct_uniform(r, lo, hi);
}

void *kct_alloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (!p) fail_msg("out of memory (%zu bytes)", n);
  return p;
}

void *kct_make_weight(kiln_type type, const float *w, int64_t K, int64_t N,
                      uint64_t *out_nbytes) {
  int64_t rb = kiln_type_row_bytes(type, K);
  assert_true(rb > 0);
  unsigned char *bytes = kct_alloc((size_t)(rb * N));
  for (int64_t n = 0; n < N; n++) KT_ASSERT_OK(kiln_quantize(type, w + n * K, bytes + n * rb, K));
  *out_nbytes = (uint64_t)(rb * N);
  return bytes;
}

float *kct_dequant_weight(kiln_type type, const void *bytes, int64_t K, int64_t N) {
  int64_t rb = kiln_type_row_bytes(type, K);
  float *w = kct_alloc((size_t)(K * N) * sizeof(float));
  for (int64_t n = 0; n < N; n++)
    KT_ASSERT_OK(kiln_dequantize(type, (const unsigned char *)bytes + n * rb, w + n * K, K));
  return w;
}

/* ---- references ---- */

void kct_ref_rms_norm(const float *x, const float *w, int64_t L, int64_t rows, float eps,
                      double *y) {
  for (int64_t r = 0; r < rows; r++) {
    double ss = 0.0;
    for (int64_t i = 0; i < L; i++) ss += (double)x[r * L + i] * (double)x[r * L + i];
    double rms = sqrt(ss / (double)L + (double)eps);
    for (int64_t i = 0; i < L; i++) y[r * L + i] = (double)x[r * L + i] / rms * (double)w[i];
  }
}

void kct_ref_mul_mat(const float *w, const float *x, const float *bias, int64_t K, int64_t N,
                     int64_t T, double *y) {
  for (int64_t t = 0; t < T; t++) {
    for (int64_t n = 0; n < N; n++) {
      double s = 0.0;
      for (int64_t k = 0; k < K; k++) s += (double)w[n * K + k] * (double)x[t * K + k];
      y[t * N + n] = s + (bias ? (double)bias[n] : 0.0);
    }
  }
}

void kct_ref_rope(const float *x, int64_t T, int32_t pos0, const kiln_rope_params *p, double *y) {
  const int64_t hd = p->head_dim, W = hd * p->n_head, half = p->n_rot / 2;
  for (int64_t t = 0; t < T; t++) {
    for (int64_t h = 0; h < p->n_head; h++) {
      const float *xh = x + t * W + h * hd;
      double *yh = y + t * W + h * hd;
      for (int64_t d = 0; d < hd; d++) yh[d] = xh[d];
      for (int64_t i = 0; i < half; i++) {
        /* theta^(-2i/n_rot) as exp(log): not the backend's pow() form. */
        double freq = exp(-(2.0 * (double)i / (double)p->n_rot) * log((double)p->theta));
        double a = (double)(pos0 + t) * freq;
        int64_t i0 = p->mode == KILN_ROPE_NEOX ? i : 2 * i;
        int64_t i1 = p->mode == KILN_ROPE_NEOX ? i + half : 2 * i + 1;
        double x0 = xh[i0], x1 = xh[i1];
        yh[i0] = x0 * cos(a) - x1 * sin(a);
        yh[i1] = x0 * sin(a) + x1 * cos(a);
      }
    }
  }
}

void kct_ref_attention(const float *q, const float *kc, const float *vc, int64_t T, int32_t pos0,
                       const kiln_attention_params *p, double *y) {
  const int64_t hd = p->head_dim, W = hd * p->n_head, Wkv = hd * p->n_head_kv;
  double *s = kct_alloc((size_t)(pos0 + T) * sizeof(double));
  for (int64_t t = 0; t < T; t++) {
    for (int64_t h = 0; h < p->n_head; h++) {
      int64_t g = h * p->n_head_kv / p->n_head; /* = h / (n_head / n_head_kv) */
      int64_t nk = pos0 + t + 1;
      double m = -INFINITY;
      for (int64_t j = 0; j < nk; j++) {
        double d = 0.0;
        for (int64_t e = 0; e < hd; e++)
          d += (double)q[t * W + h * hd + e] * (double)kc[j * Wkv + g * hd + e];
        s[j] = d * (double)p->scale;
        if (s[j] > m) m = s[j];
      }
      double z = 0.0;
      for (int64_t j = 0; j < nk; j++) z += exp(s[j] - m);
      for (int64_t e = 0; e < hd; e++) {
        double acc = 0.0;
        for (int64_t j = 0; j < nk; j++)
          acc += exp(s[j] - m) / z * (double)vc[j * Wkv + g * hd + e];
        y[t * W + h * hd + e] = acc;
      }
    }
  }
  free(s);
}

void kct_ref_swiglu(const float *a, const float *b, int64_t n, double *y) {
  for (int64_t i = 0; i < n; i++) {
    double x = a[i];
    y[i] = x * (1.0 / (1.0 + exp(-x))) * (double)b[i];
  }
}

/* ---- comparisons ---- */

kct_metrics kct_compare(const float *test, const double *ref, int64_t n) {
  double tt = 0, rr = 0, tr = 0, dd = 0, mx = 0;
  for (int64_t i = 0; i < n; i++) {
    double a = test[i], b = ref[i], d = a - b;
    tt += a * a;
    rr += b * b;
    tr += a * b;
    dd += d * d;
    if (fabs(d) > mx || isnan(d)) mx = isnan(d) ? INFINITY : fabs(d);
  }
  kct_metrics m;
  m.cosine = (tt > 0 && rr > 0) ? tr / sqrt(tt * rr) : (tt == rr ? 1.0 : 0.0);
  m.norm_ratio = rr > 0 ? sqrt(tt / rr) : (tt == 0 ? 1.0 : INFINITY);
  m.rel_l2 = rr > 0 ? sqrt(dd / rr) : sqrt(dd);
  m.max_abs = mx;
  return m;
}

void kct_assert_close(const char *what, const float *test, const double *ref, int64_t W,
                      int64_t T, double tol) {
  for (int64_t t = 0; t < T; t++) {
    kct_metrics m = kct_compare(test + t * W, ref + t * W, W);
    if (!(fabs(m.norm_ratio - 1.0) <= tol && m.rel_l2 <= tol && m.cosine >= 1.0 - tol))
      fail_msg("%s, token %lld: norm ratio %.9f, rel L2 %.3g, cosine %.12f, max abs %.3g "
               "(tolerance %.3g)",
               what, (long long)t, m.norm_ratio, m.rel_l2, m.cosine, m.max_abs, tol);
  }
}

void kct_assert_rounded(const char *what, const float *test, const double *ref, int64_t W,
                        int64_t T, double abs_floor) {
  for (int64_t t = 0; t < T; t++) {
    for (int64_t i = 0; i < W; i++) {
      float r = (float)ref[t * W + i];
      double ulp = (double)nextafterf(fabsf(r), INFINITY) - (double)fabsf(r);
      double err = fabs((double)test[t * W + i] - ref[t * W + i]);
      if (!(err <= ulp + abs_floor))
        fail_msg("%s, token %lld, element %lld: %.9g vs reference %.17g (error %.3g, one f32 "
                 "ulp %.3g)",
                 what, (long long)t, (long long)i, (double)test[t * W + i], ref[t * W + i], err,
                 ulp);
    }
  }
  kct_assert_close(what, test, ref, W, T, 1.0 / (1 << 23));
}
