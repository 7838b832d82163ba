/* MUL_MAT: dst[n, t] = sum_k W[k, n] x[k, t] (+ b[n]) for a weight W [K, N]
 * of any supported type (ggml_mul_mat with the weight as src0).
 *
 * Threads split the N output rows. Each worker dequantizes a block of
 * weight rows once into its scratch and dots every row of the block with
 * all T columns of x, so a weight row is decoded once per call and x is
 * re-read from memory once per block rather than once per row. */
#include "config.h"

#include <stdlib.h>

#include "cpu_dot.h"
#include "cpu_ops.h"

/* Bytes of dequantized weight rows a worker keeps at once (about an L2). */
#define MUL_MAT_BLOCK_BYTES (256 * 1024)
#define MUL_MAT_MAX_BLOCK_ROWS 32

typedef struct mul_mat_task {
  const cpu_ctx *ctx;
  kiln_type type;
  const void *w;
  int64_t row_bytes;
  int64_t K, N, T;
  int64_t block_rows;
  const float *x;
  const float *bias; /* NULL or [N] f32 */
  float *y;
  kiln_status *errs; /* [pool size]: a worker's first failure */
} mul_mat_task;

CPU_HOT static void mul_mat_run(void *arg, int ith, int nth) {
  const mul_mat_task *a = arg;
  const int64_t K = a->K, N = a->N, T = a->T;
  const bool f64 = a->ctx->precision == CPU_PRECISION_F64;
  float *scratch = cpu_pool_scratch(a->ctx->pool, ith);
  const float *rows[MUL_MAT_MAX_BLOCK_ROWS];
  long long n0, n1;
  cpu_split(N, ith, nth, &n0, &n1);

  for (long long b0 = n0; b0 < n1; b0 += a->block_rows) {
    int64_t nb = n1 - b0 < a->block_rows ? n1 - b0 : a->block_rows;
    for (int64_t r = 0; r < nb; r++) {
      kiln_status st = cpu_weight_row(a->ctx, a->type, a->w, a->row_bytes, b0 + r, K,
                                      scratch + r * K, &rows[r]);
      if (st) {
        a->errs[ith] = st;
        return;
      }
    }
    for (int64_t t = 0; t < T; t++) {
      const float *xt = a->x + t * K;
      float *yt = a->y + t * N + b0;
      for (int64_t r = 0; r < nb; r++) {
        if (f64) {
          double d = cpu_dot_f64(rows[r], xt, K);
          if (a->bias) d += (double)a->bias[b0 + r];
          yt[r] = (float)d;
        } else {
          float d = cpu_dot_f32(rows[r], xt, K);
          if (a->bias) d += a->bias[b0 + r];
          yt[r] = d;
        }
      }
    }
  }
}

kiln_status cpu_op_mul_mat(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  const kiln_tensor *w = node->src[0], *b = node->src[2];
  const int64_t K = w->ne[0], N = w->ne[1], T = io->n_tokens;
  int64_t block_rows = MUL_MAT_BLOCK_BYTES / (K * (int64_t)sizeof(float));
  if (block_rows < 1) block_rows = 1;
  if (block_rows > MUL_MAT_MAX_BLOCK_ROWS) block_rows = MUL_MAT_MAX_BLOCK_ROWS;
  if (cpu_pool_reserve(ctx->pool, (size_t)(block_rows * K) * sizeof(float)) != 0)
    return cpu_node_error(ctx, KILN_STATUS_NO_MEMORY, node,
                          "no memory for %lld dequantized weight rows of %lld",
                          (long long)block_rows, (long long)K);

  /* The bias is small: make it f32 once, here, whatever its type. */
  float *bias_buf = NULL;
  const float *bias = NULL;
  if (b) {
    bias_buf = malloc((size_t)N * sizeof(float));
    if (!bias_buf)
      return cpu_node_error(ctx, KILN_STATUS_NO_MEMORY, node, "no memory for a bias of %lld",
                            (long long)N);
    kiln_status st = cpu_weight_row(ctx, b->type, io->src[2], 0, 0, N, bias_buf, &bias);
    if (st) {
      free(bias_buf);
      return ctx->status_annotate(st, "mul_mat node '%.*s', bias", KILN_NAME_MAX, node->name);
    }
  }

  int pool_n = cpu_pool_size(ctx->pool);
  kiln_status *errs = calloc((size_t)pool_n, sizeof *errs);
  if (!errs) {
    free(bias_buf);
    return cpu_node_error(ctx, KILN_STATUS_NO_MEMORY, node, "no memory");
  }
  mul_mat_task task = {
      .ctx = ctx,
      .type = w->type,
      .w = io->src[0],
      .row_bytes = kiln_type_row_bytes(w->type, K),
      .K = K, .N = N, .T = T,
      .block_rows = block_rows,
      .x = io->src[1],
      .bias = bias,
      .y = io->dst,
      .errs = errs,
  };
  double work = (double)N * (double)K * (double)T;
  cpu_pool_run(ctx->pool, cpu_task_count(ctx, N, work), mul_mat_run, &task);

  kiln_status first = NULL;
  for (int i = 0; i < pool_n; i++) {
    if (!errs[i]) continue;
    if (!first) first = errs[i];
    else ctx->status_free(errs[i]);
  }
  free(errs);
  free(bias_buf);
  if (first)
    return ctx->status_annotate(first, "mul_mat node '%.*s', weight '%.*s'", KILN_NAME_MAX,
                                node->name, KILN_NAME_MAX, w->name);
  return NULL;
}
