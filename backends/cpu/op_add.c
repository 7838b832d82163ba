/* ADD: dst = src0 + src1, elementwise over the step's columns (the residual
 * connections). A sum of two floats rounds once however it is computed, so
 * precision = f64 changes nothing here. dst may be src0 or src1. */
#include "config.h"

#include "cpu_ops.h"

typedef struct add_task {
  const float *a;
  const float *b;
  float *y;
  int64_t n;
} add_task;

static void add_run(void *arg, int ith, int nth) {
  const add_task *t = arg;
  long long i0, i1;
  cpu_split(t->n, ith, nth, &i0, &i1);
  for (long long i = i0; i < i1; i++) t->y[i] = t->a[i] + t->b[i];
}

kiln_status cpu_op_add(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  add_task task = {
      .a = io->src[0],
      .b = io->src[1],
      .y = io->dst,
      .n = node->src[0]->ne[0] * (int64_t)io->n_tokens,
  };
  cpu_pool_run(ctx->pool, cpu_task_count(ctx, task.n, (double)task.n), add_run, &task);
  return NULL;
}
