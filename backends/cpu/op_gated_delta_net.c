/* GATED_DELTA_NET (kiln/graph.h; Yang, Kautz & Hatamizadeh 2024): the
 * linear attention of qwen35's recurrent layers, one value head per task.
 * A step of one token (decode) runs the recurrence token by token, as
 * transformers' torch_recurrent_gated_delta_rule; a longer step (prefill)
 * the chunked WY form of torch_chunk_gated_delta_rule over chunks of
 * p->chunk tokens. The two are the same function of the inputs (exactly,
 * in real arithmetic; tests/unit/test_cpu_qwen35.c holds them to 1e-12 at
 * f64). The state is the node's RECURRENT src2, read at the start of the
 * step (zeros at pos0 = 0) and written back at its end; between steps it is
 * f32, like every tensor. The arithmetic is gdn_body.h, here in double
 * (precision f64, the reference) and in float. */
#include "config.h"

#include <math.h>

#include "cpu_ops.h"

typedef struct gdn_task {
  const kiln_gdn_params *p;
  const float *qkv, *gates;
  float *state, *y;
  int64_t qkv_w, k_off, v_off, y_w, T;
  bool fresh; /* pos0 == 0: the state reads as zeros */
  bool f64;
  const cpu_pool *pool;
} gdn_task;

#define GDN_REAL float
#define GDN_FN(name) gdn_##name##_f32
#define GDN_EXP expf
#define GDN_SQRT sqrtf
#include "gdn_body.h"
#undef GDN_REAL
#undef GDN_FN
#undef GDN_EXP
#undef GDN_SQRT

#define GDN_REAL double
#define GDN_FN(name) gdn_##name##_f64
#define GDN_EXP exp
#define GDN_SQRT sqrt
#include "gdn_body.h"
#undef GDN_REAL
#undef GDN_FN
#undef GDN_EXP
#undef GDN_SQRT

static void gdn_run(void *arg, int ith, int nth) {
  const gdn_task *a = arg;
  void *scratch = cpu_pool_scratch(a->pool, ith);
  long long h0, h1;
  cpu_split(a->p->n_v_heads, ith, nth, &h0, &h1);
  for (long long h = h0; h < h1; h++) {
    if (a->f64) gdn_head_f64(a, h, scratch);
    else gdn_head_f32(a, h, scratch);
  }
}

/* Scratch values a head needs: its state, then a chunk's arrays (Q, K, W
 * of Dk, U of Dv per token, the n x n matrix, cum and beta), or for one
 * token its normalised q and k. */
static int64_t scratch_values(const kiln_gdn_params *p, int64_t T) {
  const int64_t Dk = p->head_k_dim, Dv = p->head_v_dim;
  const int64_t n = T < p->chunk ? T : p->chunk;
  const int64_t chunk = 3 * n * Dk + n * Dv + n * n + 2 * n, one = 2 * Dk;
  return Dk * Dv + (chunk > one ? chunk : one);
}

kiln_status cpu_op_gated_delta_net(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  const kiln_gdn_params *p = &node->p.gdn;
  const bool f64 = ctx->precision == CPU_PRECISION_F64;
  const size_t bytes = (size_t)scratch_values(p, io->n_tokens) * (f64 ? sizeof(double) : sizeof(float));
  if (cpu_pool_reserve(ctx->pool, bytes) != 0)
    return cpu_node_error(ctx, KILN_STATUS_NO_MEMORY, node, "no memory for %zu bytes of state", bytes);
  const int64_t kd = (int64_t)p->n_k_heads * p->head_k_dim;
  gdn_task task = {
      .p = p,
      .qkv = io->src[0],
      .gates = io->src[1],
      .state = (float *)(uintptr_t)io->src[2], /* the node's own state: updated in place */
      .y = io->dst,
      .qkv_w = node->src[0]->ne[0],
      .k_off = kd,
      .v_off = 2 * kd,
      .y_w = node->dst->ne[0],
      .T = io->n_tokens,
      .fresh = io->pos0 == 0,
      .f64 = f64,
      .pool = ctx->pool,
  };
  double work = (double)p->n_v_heads * (double)io->n_tokens * (double)p->head_k_dim *
                (double)p->head_v_dim * 4.0;
  cpu_pool_run(ctx->pool, cpu_task_count(ctx, p->n_v_heads, work), gdn_run, &task);
  return NULL;
}
