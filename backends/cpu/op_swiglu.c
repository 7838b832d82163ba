/* SWIGLU (Shazeer 2020): dst = silu(src0) * src1, silu(x) = x / (1 + e^-x),
 * elementwise over the step's columns (the gated FFN). No reduction, but with
 * precision = f64 it is still evaluated in double so the ground truth
 * rounds once. At f32 on AVX2, 8 at a time (swiglu_avx2.c). dst may be src0
 * or src1. */
#include "config.h"

#include <math.h>

#include "cpu_ops.h"
#include "cpu_swiglu.h"

typedef struct swiglu_task {
  const float *a;
  const float *b;
  float *y;
  int64_t n;
  bool f64;
  bool avx2; /* f32 on cpu_swiglu_f32_avx2 */
} swiglu_task;

static void swiglu_run(void *arg, int ith, int nth) {
  const swiglu_task *t = arg;
  long long i0, i1;
  cpu_split(t->n, ith, nth, &i0, &i1);
#if CPU_HAVE_AVX2_KERNELS
  if (t->avx2) {
    cpu_swiglu_f32_avx2(t->a + i0, t->b + i0, t->y + i0, i1 - i0);
    return;
  }
#endif
  if (t->f64) {
    for (long long i = i0; i < i1; i++) {
      double a = t->a[i];
      t->y[i] = (float)(a / (1.0 + exp(-a)) * (double)t->b[i]);
    }
  } else {
    /* For a << 0, expf(-a) is inf and a/inf is -0: the limit, not a NaN. */
    for (long long i = i0; i < i1; i++) {
      float a = t->a[i];
      t->y[i] = a / (1.0f + expf(-a)) * t->b[i];
    }
  }
}

kiln_status cpu_op_swiglu(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  swiglu_task task = {
      .a = io->src[0],
      .b = io->src[1],
      .y = io->dst,
      .n = node->src[0]->ne[0] * (int64_t)io->n_tokens,
      .f64 = ctx->precision == CPU_PRECISION_F64,
      .avx2 = ctx->precision == CPU_PRECISION_F32 && ctx->simd == CPU_SIMD_AVX2,
  };
  cpu_pool_run(ctx->pool, cpu_task_count(ctx, task.n, (double)task.n), swiglu_run, &task);
  return NULL;
}
