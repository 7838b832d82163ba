/* MUL_MAT: dst[n, t] = sum_k W[k, n] x[k, t] (+ b[n]) for a weight W [K, N]
 * of any supported type (ggml_mul_mat with the weight as src0).
 *
 * Threads split the N output rows (the fast paths hand them out in chunks,
 * first come first served); every output is computed the same way whatever
 * the split. Two paths:
 *
 *   fast (precision = f32 on a CPU with the AVX2 kernels, cpu_mm.h): a step
 *   of up to CPU_MM_DOT_MAX_T tokens decodes each weight in registers and
 *   uses it for every token, so decode reads each weight once per token
 *   (block-quantized weights against the columns quantized to int16 once,
 *   here, before the workers start, unless [cpu] matvec = f32 or the node
 *   feeds a recurrent state under recurrent_guard = f32); a larger step dequantizes panels of
 *   MUL_MAT_PANEL_ROWS rows into scratch once and multiplies them by the
 *   whole micro-batch with a register-tiled f32 GEMM.
 *
 *   reference (precision = f64 on any CPU, and f32 without the kernels):
 *   a worker dequantizes a block of weight rows into its scratch with the
 *   host's dequantizer and dots every row of the block with all T columns
 *   (cpu_dot.h: f64 products exact, sums in double; or f32 lanes). This is
 *   the ground truth every parity check compares against. */
#include "config.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_dot.h"
#include "cpu_mm.h"
#include "cpu_ops.h"

/* Bytes of dequantized weight rows a reference worker keeps at once (about an L2). */
#define MUL_MAT_BLOCK_BYTES (256 * 1024)
#define MUL_MAT_MAX_BLOCK_ROWS 32
/* Rows of a GEMM panel: 16 rows of K = 4864 floats are 311 KB, an L2's worth. */
#define MUL_MAT_PANEL_ROWS 16

typedef struct mul_mat_task {
  const cpu_ctx *ctx;
  kiln_type type;
  const void *w;
  int64_t row_bytes;
  int64_t K, N, T;
  int64_t block_rows;
  cpu_mm_kernels mm; /* the fast path's kernels */
  cpu_mm_q16 xq[CPU_MM_DOT_MAX_T]; /* the dot path's quantized columns */
  const float *x;
  const float *bias; /* NULL or [N] f32 */
  float *y;
  kiln_status *errs; /* [pool size]: a worker's first failure */
  /* The fast paths hand out rows in chunks, first come first served, so a
   * thread the OS runs less (a busy machine) does less of the work. */
  int64_t chunk_rows;
  int64_t n_chunks;
  _Atomic int64_t next_chunk;
} mul_mat_task;

/* The next chunk's rows [*n0, *n1), or false when none is left. */
static bool next_rows(mul_mat_task *a, long long *n0, long long *n1) {
  int64_t c = atomic_fetch_add_explicit(&a->next_chunk, 1, memory_order_relaxed);
  if (c >= a->n_chunks) return false;
  *n0 = c * a->chunk_rows;
  *n1 = *n0 + a->chunk_rows < a->N ? *n0 + a->chunk_rows : a->N;
  return true;
}

/* y[:, n0..n1) += bias, for the fast path (the reference adds it per output). */
static void add_bias(const mul_mat_task *a, long long n0, long long n1) {
  if (!a->bias) return;
  for (int64_t t = 0; t < a->T; t++) {
    float *yt = a->y + t * a->N;
    for (long long n = n0; n < n1; n++) yt[n] += a->bias[n];
  }
}

static void mul_mat_dot_run(void *arg, int ith, int nth) {
  mul_mat_task *a = arg;
  long long n0, n1;
  while (next_rows(a, &n0, &n1)) {
    const uint8_t *w = (const uint8_t *)a->w + n0 * a->row_bytes;
    for (int64_t t = 0; t < a->T; t += CPU_MM_MAX_DOT_X) {
      int nx = a->T - t < CPU_MM_MAX_DOT_X ? (int)(a->T - t) : CPU_MM_MAX_DOT_X;
      float *y = a->y + t * a->N + n0;
      if (a->mm.dot_q16) a->mm.dot_q16(w, a->row_bytes, a->K, n1 - n0, a->xq + t, nx, y, a->N);
      else a->mm.dot_f32(w, a->row_bytes, a->K, n1 - n0, a->x + t * a->K, a->K, nx, y, a->N);
    }
    add_bias(a, n0, n1);
  }
}

/* Chunks are whole panels: each is dequantized once into the task's
 * scratch and multiplied by every column. */
static void mul_mat_gemm_run(void *arg, int ith, int nth) {
  mul_mat_task *a = arg;
  float *panel = cpu_pool_scratch(a->ctx->pool, ith);
  const int64_t k8 = cpu_mm_k8(a->K);
  long long n0, n1;
  while (next_rows(a, &n0, &n1)) {
    a->mm.deq((const uint8_t *)a->w + n0 * a->row_bytes, a->row_bytes, a->K, n1 - n0, panel, k8);
    cpu_mm_gemm_avx2(panel, a->K, n1 - n0, a->x, a->K, a->T, a->y + n0, a->N);
    add_bias(a, n0, n1);
  }
}

CPU_HOT static void mul_mat_reference_run(void *arg, int ith, int nth) {
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

/* Whether the dot path takes exact f32 columns for this node: [cpu]
 * matvec = f32, or a matvec whose output feeds a recurrent state under
 * recurrent_guard = f32 (kiln/graph.h, kiln_mul_mat_params). */
static bool exact_columns(const cpu_ctx *ctx, const kiln_node *node) {
  return ctx->matvec == CPU_MATVEC_F32 || (ctx->recurrent_guard && node->p.mul_mat.feeds_recurrent);
}

/* Which path runs the node, and the scratch it needs per worker. */
static cpu_task_fn choose_path(const cpu_ctx *ctx, const kiln_node *node, mul_mat_task *t,
                               size_t *out_scratch) {
  if (ctx->precision == CPU_PRECISION_F32 && ctx->simd == CPU_SIMD_AVX2 &&
      cpu_mm_kernels_avx2(t->type, &t->mm)) {
    if (exact_columns(ctx, node)) t->mm.dot_q16 = NULL;
    if (t->T <= CPU_MM_DOT_MAX_T) {
      /* about 8 chunks per thread, whole 16-row groups */
      int64_t per = t->N / (8 * (int64_t)cpu_pool_size(ctx->pool));
      t->chunk_rows = per < 16 ? 16 : (per + 15) / 16 * 16;
      t->n_chunks = (t->N + t->chunk_rows - 1) / t->chunk_rows;
      *out_scratch = 0;
      return mul_mat_dot_run;
    }
    t->chunk_rows = MUL_MAT_PANEL_ROWS;
    t->n_chunks = (t->N + MUL_MAT_PANEL_ROWS - 1) / MUL_MAT_PANEL_ROWS;
    *out_scratch = (size_t)(MUL_MAT_PANEL_ROWS * cpu_mm_k8(t->K)) * sizeof(float);
    return mul_mat_gemm_run;
  }
  int64_t block_rows = MUL_MAT_BLOCK_BYTES / (t->K * (int64_t)sizeof(float));
  if (block_rows < 1) block_rows = 1;
  if (block_rows > MUL_MAT_MAX_BLOCK_ROWS) block_rows = MUL_MAT_MAX_BLOCK_ROWS;
  t->block_rows = block_rows;
  *out_scratch = (size_t)(block_rows * t->K) * sizeof(float);
  return mul_mat_reference_run;
}

kiln_status cpu_op_mul_mat(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  const kiln_tensor *w = node->src[0], *b = node->src[2];
  const int64_t K = w->ne[0], N = w->ne[1], T = io->n_tokens;
  mul_mat_task task = {
      .ctx = ctx,
      .type = w->type,
      .w = io->src[0],
      .row_bytes = kiln_type_row_bytes(w->type, K),
      .K = K, .N = N, .T = T,
      .x = io->src[1],
      .y = io->dst,
  };
  size_t scratch;
  cpu_task_fn run = choose_path(ctx, node, &task, &scratch);
  if (scratch && cpu_pool_reserve(ctx->pool, scratch) != 0)
    return cpu_node_error(ctx, KILN_STATUS_NO_MEMORY, node,
                          "no memory for %zu bytes of dequantized weight rows (K = %lld)", scratch,
                          (long long)K);
  if (run == mul_mat_dot_run && task.mm.dot_q16) {
    /* The columns as int16 blocks, once for every worker. */
    const size_t col = (size_t)cpu_mm_q16_bytes(K);
    unsigned char *buf = cpu_pool_shared(ctx->pool, col * (size_t)T);
    if (!buf)
      return cpu_node_error(ctx, KILN_STATUS_NO_MEMORY, node,
                            "no memory for %lld quantized columns of %lld", (long long)T,
                            (long long)K);
    for (int64_t t = 0; t < T; t++)
      cpu_mm_q16_quantize_avx2(task.x + t * K, K, buf + (size_t)t * col, &task.xq[t]);
  }

  /* The bias is small: make it f32 once, here, whatever its type (an
   * aligned F32 bias is used in place). */
  float *bias_buf = NULL;
  if (b) {
    if (b->type != KILN_TYPE_F32 || ((uintptr_t)io->src[2] & 3u)) {
      bias_buf = malloc((size_t)N * sizeof(float));
      if (!bias_buf)
        return cpu_node_error(ctx, KILN_STATUS_NO_MEMORY, node, "no memory for a bias of %lld",
                              (long long)N);
    }
    kiln_status st = cpu_weight_row(ctx, b->type, io->src[2], 0, 0, N, bias_buf, &task.bias);
    if (st) {
      free(bias_buf);
      return ctx->status_annotate(st, "mul_mat node '%.*s', bias", KILN_NAME_MAX, node->name);
    }
  }

  /* Only the reference path can fail inside a worker (the host's
   * dequantizer); the fast kernels read validated blocks. */
  int pool_n = cpu_pool_size(ctx->pool);
  kiln_status *errs = NULL;
  if (run == mul_mat_reference_run) {
    errs = calloc((size_t)pool_n, sizeof *errs);
    if (!errs) {
      free(bias_buf);
      return cpu_node_error(ctx, KILN_STATUS_NO_MEMORY, node, "no memory");
    }
  }
  task.errs = errs;
  double work = (double)N * (double)K * (double)T;
  cpu_pool_run(ctx->pool, cpu_task_count(ctx, N, work), run, &task);

  kiln_status first = NULL;
  for (int i = 0; errs && i < pool_n; i++) {
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
