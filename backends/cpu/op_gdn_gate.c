/* GDN_GATE (kiln/graph.h): the per-head gates of Gated DeltaNet from the
 * alpha and beta projections, as transformers' Qwen3_5GatedDeltaNet forms
 * them (g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b)) and
 * llama.cpp's qwen35 graph does with the converted ssm_a = -exp(A_log):
 *   dst[h]     = softplus(alpha[h] + dt[h]) * A[h]
 *   dst[H + h] = sigmoid(beta[h])
 * softplus(x) = log(1 + e^x), or x above 20 (torch's threshold, ggml's
 * too), where the two agree to within f32 rounding. */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "cpu_ops.h"

typedef struct gdn_gate_task {
  const float *alpha, *beta, *A, *dt;
  float *y;
  int64_t H, T;
  bool f64;
} gdn_gate_task;

static void gdn_gate_run(void *arg, int ith, int nth) {
  const gdn_gate_task *a = arg;
  long long u0, u1;
  cpu_split(a->T * a->H, ith, nth, &u0, &u1);
  for (long long u = u0; u < u1; u++) {
    const int64_t t = u / a->H, h = u % a->H;
    const float al = a->alpha[t * a->H + h], be = a->beta[t * a->H + h];
    float *y = a->y + t * 2 * a->H;
    if (a->f64) {
      double x = (double)al + (double)a->dt[h];
      double sp = x > 20.0 ? x : log1p(exp(x));
      y[h] = (float)(sp * (double)a->A[h]);
      y[a->H + h] = (float)(1.0 / (1.0 + exp(-(double)be)));
    } else {
      float x = al + a->dt[h];
      float sp = x > 20.0f ? x : log1pf(expf(x));
      y[h] = sp * a->A[h];
      y[a->H + h] = 1.0f / (1.0f + expf(-be));
    }
  }
}

kiln_status cpu_op_gdn_gate(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  const int64_t H = node->src[0]->ne[0];
  float *buf = malloc((size_t)(2 * H) * sizeof(float));
  if (!buf) return cpu_node_error(ctx, KILN_STATUS_NO_MEMORY, node, "no memory for %lld gates", (long long)H);
  /* A and the bias as f32, whatever their type (the converter writes F32). */
  const float *A, *dt;
  kiln_status st = cpu_weight_row(ctx, node->src[2]->type, io->src[2], 0, 0, H, buf, &A);
  if (!st) st = cpu_weight_row(ctx, node->src[3]->type, io->src[3], 0, 0, H, buf + H, &dt);
  if (st) {
    free(buf);
    return ctx->status_annotate(st, "gdn_gate node '%.*s'", KILN_NAME_MAX, node->name);
  }
  gdn_gate_task task = {
      .alpha = io->src[0],
      .beta = io->src[1],
      .A = A,
      .dt = dt,
      .y = io->dst,
      .H = H,
      .T = io->n_tokens,
      .f64 = ctx->precision == CPU_PRECISION_F64,
  };
  int64_t units = task.T * H;
  cpu_pool_run(ctx->pool, cpu_task_count(ctx, units, 8.0 * (double)units), gdn_gate_run, &task);
  free(buf);
  return NULL;
}
