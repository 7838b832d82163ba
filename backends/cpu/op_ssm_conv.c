/* SSM_CONV (kiln/graph.h): the short causal convolution of qwen35's linear
 * attention layers, one channel at a time, then SiLU (transformers'
 * causal_conv1d_fn / causal_conv1d_update, llama.cpp's ggml_ssm_conv +
 * ggml_silu). For channel c the K-1 inputs before the step (the state, or
 * zeros at pos0 = 0) and the step's T inputs form one history h of K-1+T
 * values, and
 *   dst[c, t] = silu(sum_k w[k, c] * h[t + k])
 * after which the state holds the last K-1 values of h. Threads split the
 * channels; each channel's history lives in the worker's scratch, so dst may
 * be src0. With precision = f64 the sum and SiLU are evaluated in double. */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "cpu_ops.h"

typedef struct ssm_conv_task {
  const float *x, *w;
  float *state, *y;
  int64_t C, K, T;
  bool fresh; /* pos0 == 0: the state reads as zeros */
  bool f64;
  const cpu_pool *pool;
} ssm_conv_task;

static void ssm_conv_run(void *arg, int ith, int nth) {
  const ssm_conv_task *a = arg;
  const int64_t C = a->C, K = a->K, T = a->T;
  float *h = cpu_pool_scratch(a->pool, ith); /* K-1+T values */
  long long c0, c1;
  cpu_split(C, ith, nth, &c0, &c1);
  for (long long c = c0; c < c1; c++) {
    for (int64_t k = 0; k < K - 1; k++) h[k] = a->fresh ? 0.0f : a->state[k * C + c];
    for (int64_t t = 0; t < T; t++) h[K - 1 + t] = a->x[t * C + c];
    const float *w = a->w + c * K;
    for (int64_t t = 0; t < T; t++) {
      if (a->f64) {
        double s = 0.0;
        for (int64_t k = 0; k < K; k++) s += (double)w[k] * (double)h[t + k];
        a->y[t * C + c] = (float)(s / (1.0 + exp(-s)));
      } else {
        float s = 0.0f;
        for (int64_t k = 0; k < K; k++) s += w[k] * h[t + k];
        a->y[t * C + c] = s / (1.0f + expf(-s));
      }
    }
    for (int64_t k = 0; k < K - 1; k++) a->state[k * C + c] = h[T + k];
  }
}

kiln_status cpu_op_ssm_conv(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  const kiln_tensor *wt = node->src[1];
  const int64_t C = node->src[0]->ne[0], K = wt->ne[0];
  /* The kernel is small (K x C): make it f32 once, whatever its type. */
  float *wbuf = malloc((size_t)(C * K) * sizeof(float));
  if (!wbuf) return cpu_node_error(ctx, KILN_STATUS_NO_MEMORY, node, "no memory for the conv kernel");
  const int64_t row_bytes = kiln_type_row_bytes(wt->type, K);
  for (int64_t c = 0; c < C; c++) {
    const float *row;
    kiln_status st = cpu_weight_row(ctx, wt->type, io->src[1], row_bytes, c, K, wbuf + c * K, &row);
    if (st) {
      free(wbuf);
      return ctx->status_annotate(st, "ssm_conv node '%.*s'", KILN_NAME_MAX, node->name);
    }
    if (row != wbuf + c * K)
      for (int64_t k = 0; k < K; k++) wbuf[c * K + k] = row[k];
  }
  if (cpu_pool_reserve(ctx->pool, (size_t)(K - 1 + io->n_tokens) * sizeof(float)) != 0) {
    free(wbuf);
    return cpu_node_error(ctx, KILN_STATUS_NO_MEMORY, node, "no memory for the conv history");
  }
  ssm_conv_task task = {
      .x = io->src[0],
      .w = wbuf,
      .state = (float *)(uintptr_t)io->src[2], /* the node's own state: updated in place */
      .y = io->dst,
      .C = C,
      .K = K,
      .T = io->n_tokens,
      .fresh = io->pos0 == 0,
      .f64 = ctx->precision == CPU_PRECISION_F64,
      .pool = ctx->pool,
  };
  double work = (double)C * (double)io->n_tokens * (double)K;
  cpu_pool_run(ctx->pool, cpu_task_count(ctx, C, work), ssm_conv_run, &task);
  free(wbuf);
  return NULL;
}
