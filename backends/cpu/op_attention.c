/* ATTENTION (Vaswani et al. 2017) with causal masking and grouped-query
 * heads (Ainslie et al. 2023): for token t (position pos0+t) and query head
 * h, with KV head g = h / (n_head / n_head_kv),
 *   s_j = scale * q_h . k_{g,j},  j = 0 .. pos0+t
 *   y_h = sum_j softmax(s)_j v_{g,j}
 * The softmax subtracts the row maximum before exp, so raw q.k of 1e5
 * (ChatML special tokens in Qwen) gives finite weights instead of inf/inf.
 * At f32 on AVX2 (head_dim a multiple of 8) the dot products and the V sum
 * run in 8-lane FMAs (attn_avx2.c).
 * Threads split the (token, head) pairs; each pair is one worker's alone.
 * A cache of another KV type (F16, BF16, Q8_0: kiln/kv_cache.h) is read
 * through f32: for each (run of tokens, KV head) a worker converts the
 * rows of that head its last token sees to f32 (kiln_kv_load_row, exactly
 * as ggml dequantizes them) once for all of the run's tokens and the
 * head's GQA query heads, then runs the same kernels (f64, f32, AVX2) on
 * the converted rows. (Converting for each token made a 2048-token prefill
 * with an f16 cache 3.5x slower than with f32 here.) */
#include "config.h"

#include <math.h>
#include <stdint.h>

#include "kiln/kv_cache.h"

#include "cpu_attn.h"
#include "cpu_dot.h"
#include "cpu_ops.h"

typedef struct attention_task {
  const kiln_attention_params *p;
  const float *q, *k, *v; /* F32 caches */
  const uint8_t *kt, *vt;  /* caches of another KV type */
  kiln_type kv_type;
  int64_t row_bytes;       /* one position of a cache */
  int64_t run_tokens;      /* typed caches: tokens of one unit of work */
  float *y;
  int32_t pos0;
  int64_t T;
  bool f64;
  bool avx2; /* f32 on cpu_attend_f32_avx2 */
  const cpu_pool *pool;
} attention_task;

/* One (token, head) pair in double: scores, softmax sums and the weighted
 * V sum all accumulate in double; y is rounded once. */
static void attend_f64(const attention_task *a, const float *q, const float *k, const float *v,
                       int64_t n_keys, int64_t kv_stride, double *s, double *acc, float *y) {
  const int64_t hd = a->p->head_dim;
  const double scale = (double)a->p->scale;
  double m = -INFINITY;
  for (int64_t j = 0; j < n_keys; j++) {
    s[j] = scale * cpu_dot_f64(q, k + j * kv_stride, hd);
    if (s[j] > m) m = s[j];
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n_keys; j++) {
    s[j] = exp(s[j] - m);
    sum += s[j];
  }
  for (int64_t d = 0; d < hd; d++) acc[d] = 0.0;
  for (int64_t j = 0; j < n_keys; j++) cpu_axpy_f64(acc, s[j], v + j * kv_stride, hd);
  for (int64_t d = 0; d < hd; d++) y[d] = (float)(acc[d] / sum);
}

static void attend_f32(const attention_task *a, const float *q, const float *k, const float *v,
                       int64_t n_keys, int64_t kv_stride, float *s, float *acc, float *y) {
  const int64_t hd = a->p->head_dim;
  const float scale = a->p->scale;
  float m = -INFINITY;
  for (int64_t j = 0; j < n_keys; j++) {
    s[j] = scale * cpu_dot_f32(q, k + j * kv_stride, hd);
    if (s[j] > m) m = s[j];
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < n_keys; j++) {
    s[j] = expf(s[j] - m);
    sum += s[j];
  }
  for (int64_t d = 0; d < hd; d++) acc[d] = 0.0f;
  for (int64_t j = 0; j < n_keys; j++) cpu_axpy_f32(acc, s[j], v + j * kv_stride, hd);
  for (int64_t d = 0; d < hd; d++) y[d] = acc[d] / sum;
}

/* One (token, head) pair on rows k, v of kv_stride floats. */
static void attend(const attention_task *a, const float *q, const float *k, const float *v,
                   int64_t n_keys, int64_t kv_stride, double *scratch, int64_t max_keys, float *y) {
  if (a->f64)
    attend_f64(a, q, k, v, n_keys, kv_stride, scratch, scratch + max_keys, y);
#if CPU_HAVE_AVX2_KERNELS
  else if (a->avx2)
    cpu_attend_f32_avx2(q, k, v, n_keys, kv_stride, a->p->head_dim, a->p->scale, (float *)scratch,
                        (float *)(scratch + max_keys), y);
#endif
  else
    attend_f32(a, q, k, v, n_keys, kv_stride, (float *)scratch, (float *)(scratch + max_keys), y);
}

CPU_HOT static void attention_run(void *arg, int ith, int nth) {
  const attention_task *a = arg;
  const int64_t hd = a->p->head_dim, nh = a->p->n_head, nkv = a->p->n_head_kv;
  const int64_t group = nh / nkv, q_stride = hd * nh, kv_stride = hd * nkv;
  const int64_t max_keys = (int64_t)a->pos0 + a->T;
  /* Scratch: max_keys scores then head_dim accumulators, sized for double. */
  double *scratch = cpu_pool_scratch(a->pool, ith);
  long long u0, u1;
  cpu_split(a->T * nh, ith, nth, &u0, &u1);

  for (long long u = u0; u < u1; u++) {
    const int64_t t = u / nh, h = u % nh, g = h / group;
    const int64_t n_keys = (int64_t)a->pos0 + t + 1; /* causal: positions 0 .. pos0+t */
    const float *q = a->q + t * q_stride + h * hd;
    const float *k = a->k + g * hd;
    const float *v = a->v + g * hd;
    attend(a, q, k, v, n_keys, kv_stride, scratch, max_keys, a->y + t * q_stride + h * hd);
  }
}

/* Typed caches: units are (run of run_tokens tokens, KV head); the head's
 * rows up to the run's last token's become [head_dim, n] f32 in the
 * worker's scratch after the scores and accumulators, then every token of
 * the run and every query head of the group attends to its causal prefix
 * of them. */
CPU_HOT static void attention_typed_run(void *arg, int ith, int nth) {
  const attention_task *a = arg;
  const int64_t hd = a->p->head_dim, nh = a->p->n_head, nkv = a->p->n_head_kv;
  const int64_t group = nh / nkv, q_stride = hd * nh;
  const int64_t max_keys = (int64_t)a->pos0 + a->T;
  const int64_t head_bytes = kiln_type_row_bytes(a->kv_type, hd);
  const int64_t runs = (a->T + a->run_tokens - 1) / a->run_tokens;
  double *scratch = cpu_pool_scratch(a->pool, ith);
  float *kf = (float *)(scratch + max_keys + hd), *vf = kf + max_keys * hd;
  long long u0, u1;
  cpu_split(runs * nkv, ith, nth, &u0, &u1);
  for (long long u = u0; u < u1; u++) {
    const int64_t r = u / nkv, g = u % nkv, t0 = r * a->run_tokens;
    const int64_t t1 = t0 + a->run_tokens < a->T ? t0 + a->run_tokens : a->T;
    const int64_t n_rows = (int64_t)a->pos0 + t1; /* what the run's last token sees */
    for (int64_t j = 0; j < n_rows; j++) {
      const int64_t off = j * a->row_bytes + g * head_bytes;
      kiln_kv_load_row(a->kv_type, a->kt + off, kf + j * hd, hd);
      kiln_kv_load_row(a->kv_type, a->vt + off, vf + j * hd, hd);
    }
    for (int64_t t = t0; t < t1; t++) {
      const int64_t n_keys = (int64_t)a->pos0 + t + 1; /* causal: positions 0 .. pos0+t */
      for (int64_t h = g * group; h < (g + 1) * group; h++)
        attend(a, a->q + t * q_stride + h * hd, kf, vf, n_keys, hd, scratch, max_keys,
               a->y + t * q_stride + h * hd);
    }
  }
}

kiln_status cpu_op_attention(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  const kiln_attention_params *p = &node->p.attention;
  const int64_t max_keys = (int64_t)io->pos0 + io->n_tokens;
  const kiln_type kv_type = node->src[1]->type;
  /* scores and accumulators (as doubles), then for a typed cache the f32
   * K and V rows of one KV head */
  size_t need = (size_t)(max_keys + p->head_dim) * sizeof(double);
  if (kv_type != KILN_TYPE_F32) need += 2 * (size_t)max_keys * (size_t)p->head_dim * sizeof(float);
  if (cpu_pool_reserve(ctx->pool, need) != 0)
    return cpu_node_error(ctx, KILN_STATUS_NO_MEMORY, node, "no memory for %lld scores",
                          (long long)max_keys);
  attention_task task = {
      .p = p,
      .q = io->src[0],
      .k = io->src[1],
      .v = io->src[2],
      .y = io->dst,
      .pos0 = io->pos0,
      .T = io->n_tokens,
      .f64 = ctx->precision == CPU_PRECISION_F64,
      .avx2 = ctx->precision == CPU_PRECISION_F32 && ctx->simd == CPU_SIMD_AVX2 && p->head_dim % 8 == 0,
      .pool = ctx->pool,
      .kt = io->src[1],
      .vt = io->src[2],
      .kv_type = kv_type,
      .row_bytes = kiln_type_row_bytes(kv_type, node->src[1]->ne[0]),
  };
  if (kv_type != KILN_TYPE_F32) {
    /* as few runs as give every thread about two units: each run converts
     * the head's rows once (the results do not depend on the split) */
    const int64_t nkv = p->n_head_kv, T = io->n_tokens;
    int64_t n_runs = (2 * (int64_t)cpu_pool_size(ctx->pool) + nkv - 1) / nkv;
    if (n_runs > T) n_runs = T;
    if (n_runs < 1) n_runs = 1;
    task.run_tokens = (T + n_runs - 1) / n_runs;
    const int64_t units = ((T + task.run_tokens - 1) / task.run_tokens) * nkv;
    double work = (double)T * p->n_head * (double)max_keys * 2.0 * (double)p->head_dim;
    cpu_pool_run(ctx->pool, cpu_task_count(ctx, units, work), attention_typed_run, &task);
    return NULL;
  }
  int64_t units = (int64_t)io->n_tokens * p->n_head;
  double work = (double)units * (double)max_keys * 2.0 * (double)p->head_dim;
  cpu_pool_run(ctx->pool, cpu_task_count(ctx, units, work), attention_run, &task);
  return NULL;
}
