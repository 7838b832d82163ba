/* SLICE (kiln/graph.h): for each token, values offset .. offset+length-1
 * of every group of `stride` values of src0, packed in group order. qwen35
 * uses it to take the query heads and the gate heads out of the joint
 * projection, which interleaves them per head ([q_h, gate_h] for each h, as
 * transformers' Qwen3_5Attention splits it). A copy: exact at either
 * precision. */
#include "config.h"

#include <string.h>

#include "cpu_ops.h"

typedef struct slice_task {
  const float *x;
  float *y;
  int64_t W, groups, T;
  int32_t offset, length, stride;
} slice_task;

static void slice_run(void *arg, int ith, int nth) {
  const slice_task *a = arg;
  long long u0, u1;
  cpu_split(a->T * a->groups, ith, nth, &u0, &u1);
  const int64_t out_w = a->groups * a->length;
  for (long long u = u0; u < u1; u++) {
    const int64_t t = u / a->groups, g = u % a->groups;
    memcpy(a->y + t * out_w + g * a->length, a->x + t * a->W + g * a->stride + a->offset,
           (size_t)a->length * sizeof(float));
  }
}

kiln_status cpu_op_slice(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  const kiln_slice_params *p = &node->p.slice;
  slice_task task = {
      .x = io->src[0],
      .y = io->dst,
      .W = node->src[0]->ne[0],
      .groups = node->src[0]->ne[0] / p->stride,
      .T = io->n_tokens,
      .offset = p->offset,
      .length = p->length,
      .stride = p->stride,
  };
  int64_t units = task.T * task.groups;
  cpu_pool_run(ctx->pool, cpu_task_count(ctx, units, (double)units * p->length), slice_run, &task);
  return NULL;
}
