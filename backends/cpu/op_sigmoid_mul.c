/* SIGMOID_MUL: dst = sigmoid(src0) * src1, sigmoid(a) = 1 / (1 + e^-a),
 * elementwise over the step's columns: the sigmoid output gate of qwen35's
 * full-attention layers (transformers' Qwen3_5Attention: attn_output *
 * sigmoid(gate); llama.cpp's ggml_sigmoid + ggml_mul). Evaluated in double
 * with precision = f64 so the ground truth rounds once. dst may be src0 or
 * src1. */
#include "config.h"

#include <math.h>

#include "cpu_ops.h"

typedef struct sigmoid_mul_task {
  const float *a;
  const float *b;
  float *y;
  int64_t n;
  bool f64;
} sigmoid_mul_task;

static void sigmoid_mul_run(void *arg, int ith, int nth) {
  const sigmoid_mul_task *t = arg;
  long long i0, i1;
  cpu_split(t->n, ith, nth, &i0, &i1);
  if (t->f64) {
    for (long long i = i0; i < i1; i++)
      t->y[i] = (float)((double)t->b[i] / (1.0 + exp(-(double)t->a[i])));
  } else {
    /* For a << 0, expf(-a) is inf and b / inf is 0: the limit. */
    for (long long i = i0; i < i1; i++) t->y[i] = t->b[i] / (1.0f + expf(-t->a[i]));
  }
}

kiln_status cpu_op_sigmoid_mul(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  sigmoid_mul_task task = {
      .a = io->src[0],
      .b = io->src[1],
      .y = io->dst,
      .n = node->src[0]->ne[0] * (int64_t)io->n_tokens,
      .f64 = ctx->precision == CPU_PRECISION_F64,
  };
  cpu_pool_run(ctx->pool, cpu_task_count(ctx, task.n, (double)task.n), sigmoid_mul_run, &task);
  return NULL;
}
