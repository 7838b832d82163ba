/* RMS_NORM (Zhang & Sennrich 2019): y = x / sqrt(mean(x^2) + eps) * w, per
 * row of length L = the weight's length, so one op covers the model norm
 * (row = the hidden width) and qwen3's per-head q_norm/k_norm (src0
 * [head_dim*n_head, T], weight [head_dim]). eps is used exactly as given:
 * the ε defect in DESIGN.md came from an ε that was not. */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "cpu_dot.h"
#include "cpu_ops.h"

typedef struct rms_norm_task {
  const float *x;
  float *y;
  const float *w;
  int64_t L;
  int64_t rows;
  float eps;
  bool f64;
} rms_norm_task;

CPU_HOT static void rms_norm_run(void *arg, int ith, int nth) {
  const rms_norm_task *a = arg;
  long long r0, r1;
  cpu_split(a->rows, ith, nth, &r0, &r1);
  const int64_t L = a->L;
  for (long long r = r0; r < r1; r++) {
    const float *x = a->x + r * L;
    float *y = a->y + r * L; /* may equal x: each y[i] is written after x[i] is read */
    if (a->f64) {
      double ss = cpu_dot_f64(x, x, L);
      double scale = 1.0 / sqrt(ss / (double)L + (double)a->eps);
      for (int64_t i = 0; i < L; i++) y[i] = (float)((double)x[i] * scale * (double)a->w[i]);
    } else {
      float ss = cpu_dot_f32(x, x, L);
      if (!isfinite(ss)) {
        /* x^2 overflowed f32 (|x| near 1e19 and up) and the row would come
         * out exactly 0: this row in double, as ggml always sums it. */
        double scale = 1.0 / sqrt(cpu_dot_f64(x, x, L) / (double)L + (double)a->eps);
        for (int64_t i = 0; i < L; i++) y[i] = (float)((double)x[i] * scale * (double)a->w[i]);
        continue;
      }
      float scale = 1.0f / sqrtf(ss / (float)L + a->eps);
      for (int64_t i = 0; i < L; i++) y[i] = x[i] * scale * a->w[i];
    }
  }
}

kiln_status cpu_op_rms_norm(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  const kiln_tensor *x = node->src[0], *w = node->src[1];
  const int64_t L = w->ne[0];
  float *wbuf = NULL;
  const float *wrow;
  if (w->type != KILN_TYPE_F32 || ((uintptr_t)io->src[1] & 3u)) {
    wbuf = malloc((size_t)L * sizeof(float));
    if (!wbuf)
      return cpu_node_error(ctx, KILN_STATUS_NO_MEMORY, node, "no memory for %lld weights",
                            (long long)L);
  }
  kiln_status st = cpu_weight_row(ctx, w->type, io->src[1], 0, 0, L, wbuf, &wrow);
  if (st) {
    free(wbuf);
    return ctx->status_annotate(st, "rms_norm node '%.*s'", KILN_NAME_MAX, node->name);
  }
  rms_norm_task task = {
      .x = io->src[0],
      .y = io->dst,
      .w = wrow,
      .L = L,
      .rows = (int64_t)io->n_tokens * (x->ne[0] / L),
      .eps = node->p.rms_norm.eps,
      .f64 = ctx->precision == CPU_PRECISION_F64,
  };
  double work = (double)task.rows * (double)L;
  cpu_pool_run(ctx->pool, cpu_task_count(ctx, task.rows, work), rms_norm_run, &task);
  free(wbuf);
  return NULL;
}
