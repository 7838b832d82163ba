/* ROPE (Su et al. 2021, RoFormer): rotate dimension pairs of each head of
 * token t by angles pos * theta^(-2i/n_rot), pos = pos0 + t. NORM pairs
 * (2i, 2i+1) like llama's reference code; NEOX pairs (i, i + n_rot/2) like
 * GPT-NeoX, qwen2 and qwen3 (ggml_rope_ext modes 0 and 2); IMROPE pairs as
 * NEOX with each pair's position taken from its interleaved section
 * (qwen35; ggml_rope_multi with GGML_ROPE_TYPE_IMROPE): for text the t, h
 * and w sections see pos and the fourth sees 0, as llama.cpp feeds a text
 * batch. Only the first n_rot dimensions of a head turn; the rest pass
 * through unchanged.
 *
 * The angle is computed in double from theta directly (pow, not ggml's
 * running product in float), so position 30000 is as exact as position 3;
 * with precision = f64 the rotation itself is also done in double. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "cpu_ops.h"

typedef struct rope_task {
  const kiln_rope_params *p;
  const float *x;
  float *y;
  int32_t pos0;
  int64_t T;
  bool f64;
  const cpu_pool *pool;
} rope_task;

/* IMROPE: whether pair i takes the token's position (its section is t, h
 * or w) rather than the fourth stream's 0 (ggml's ggml_mrope_cache_init). */
static bool imrope_turns(const int32_t *sec, int64_t i) {
  const int64_t n = (int64_t)sec[0] + sec[1] + sec[2] + sec[3], s = i % n;
  return (s % 3 == 0 && s < 3 * (int64_t)sec[0]) || (s % 3 == 1 && s < 3 * (int64_t)sec[1]) ||
         (s % 3 == 2 && s < 3 * (int64_t)sec[2]);
}

static void rope_run(void *arg, int ith, int nth) {
  const rope_task *a = arg;
  const int64_t hd = a->p->head_dim, nh = a->p->n_head, n_rot = a->p->n_rot;
  const int64_t half = n_rot / 2, W = hd * nh;
  /* Pair i's partner: NORM (2i, 2i+1), NEOX (i, i + n_rot/2). */
  const bool imrope = a->p->mode == KILN_ROPE_IMROPE;
  const bool neox = a->p->mode == KILN_ROPE_NEOX || imrope;
  double *cs = cpu_pool_scratch(a->pool, ith); /* [half] cos, then [half] sin */
  double *sn = cs + half;
  long long t0, t1;
  cpu_split(a->T, ith, nth, &t0, &t1);

  for (long long t = t0; t < t1; t++) {
    const double pos = (double)a->pos0 + (double)t;
    for (int64_t i = 0; i < half; i++) {
      const double p = imrope && !imrope_turns(a->p->sections, i) ? 0.0 : pos;
      double angle = p * pow((double)a->p->theta, -2.0 * (double)i / (double)n_rot);
      cs[i] = cos(angle);
      sn[i] = sin(angle);
    }
    for (int64_t h = 0; h < nh; h++) {
      const float *x = a->x + t * W + h * hd;
      float *y = a->y + t * W + h * hd; /* may equal x: pairs are read before written */
      for (int64_t i = 0; i < half; i++) {
        int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        float x0 = x[i0], x1 = x[i1];
        if (a->f64) {
          y[i0] = (float)((double)x0 * cs[i] - (double)x1 * sn[i]);
          y[i1] = (float)((double)x0 * sn[i] + (double)x1 * cs[i]);
        } else {
          float c = (float)cs[i], s = (float)sn[i];
          y[i0] = x0 * c - x1 * s;
          y[i1] = x0 * s + x1 * c;
        }
      }
      if (y != x && n_rot < hd) memcpy(y + n_rot, x + n_rot, (size_t)(hd - n_rot) * sizeof(float));
    }
  }
}

kiln_status cpu_op_rope(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  const kiln_rope_params *p = &node->p.rope;
  if (cpu_pool_reserve(ctx->pool, (size_t)p->n_rot * sizeof(double)) != 0)
    return cpu_node_error(ctx, KILN_STATUS_NO_MEMORY, node, "no memory for a rotation table");
  rope_task task = {
      .p = p,
      .x = io->src[0],
      .y = io->dst,
      .pos0 = io->pos0,
      .T = io->n_tokens,
      .f64 = ctx->precision == CPU_PRECISION_F64,
      .pool = ctx->pool,
  };
  double work = (double)io->n_tokens * (double)p->head_dim * (double)p->n_head;
  cpu_pool_run(ctx->pool, cpu_task_count(ctx, io->n_tokens, work), rope_run, &task);
  return NULL;
}
