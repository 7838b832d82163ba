/* Node checks of the cpu backend: what it supports (supports()), whether a
 * node's shapes and params make sense (prepare()), and whether a step fits
 * the node's tensors (run()). The ops themselves trust these checks, so
 * every index an op computes is proven in range here. */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "cpu_ops.h"

kiln_status cpu_node_error(const cpu_ctx *ctx, kiln_status_code code, const kiln_node *node,
                           const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ctx->status_new(code, "%s node '%.*s': %s", kiln_op_name(node->op), KILN_NAME_MAX,
                         node->name, msg);
}

int cpu_task_count(const cpu_ctx *ctx, int64_t units, double work) {
  int64_t pool = cpu_pool_size(ctx->pool);
  /* In double: N*K*T of a large prefill can pass int64. */
  double want = work / CPU_MIN_TASK_WORK + 1.0;
  int64_t n = want > (double)pool ? pool : (int64_t)want;
  if (n > units) n = units;
  return n < 1 ? 1 : (int)n;
}

/* ---- supports ----------------------------------------------------------- */

static kiln_status type_unsupported(const cpu_ctx *ctx, const kiln_node *node, const char *what,
                                    const kiln_tensor *t, const char *expected) {
  return cpu_node_error(ctx, KILN_STATUS_UNSUPPORTED, node,
                        "%s '%.*s' has type %s (id %d); the cpu backend takes %s there", what,
                        KILN_NAME_MAX, t->name, kiln_type_name(t->type), (int)t->type, expected);
}

static const char weight_types[] = "F32, F16, BF16, Q4_0, Q5_0, Q8_0, Q4_K or Q6_K";

/* A present tensor must be F32 (activation, KV cache). */
static kiln_status want_f32(const cpu_ctx *ctx, const kiln_node *node, const char *what,
                            const kiln_tensor *t) {
  if (t && t->type != KILN_TYPE_F32) return type_unsupported(ctx, node, what, t, "F32");
  return NULL;
}

static kiln_status want_weight(const cpu_ctx *ctx, const kiln_node *node, const char *what,
                               const kiln_tensor *t) {
  if (t && !cpu_weight_type_ok(t->type)) return type_unsupported(ctx, node, what, t, weight_types);
  return NULL;
}

kiln_status cpu_node_supports(const cpu_ctx *ctx, const kiln_node *node) {
  const kiln_tensor *const *s = node->src;
  switch (node->op) {
  case KILN_OP_GET_ROWS:
    KILN_RETURN_IF_ERROR(want_weight(ctx, node, "embedding table src0", s[0]));
    if (s[1] && s[1]->type != KILN_TYPE_I32)
      return type_unsupported(ctx, node, "token ids src1", s[1], "I32");
    return want_f32(ctx, node, "dst", node->dst);
  case KILN_OP_RMS_NORM:
    KILN_RETURN_IF_ERROR(want_f32(ctx, node, "src0", s[0]));
    KILN_RETURN_IF_ERROR(want_weight(ctx, node, "norm weight src1", s[1]));
    return want_f32(ctx, node, "dst", node->dst);
  case KILN_OP_MUL_MAT:
    KILN_RETURN_IF_ERROR(want_weight(ctx, node, "weight src0", s[0]));
    KILN_RETURN_IF_ERROR(want_f32(ctx, node, "src1", s[1]));
    KILN_RETURN_IF_ERROR(want_weight(ctx, node, "bias src2", s[2]));
    return want_f32(ctx, node, "dst", node->dst);
  case KILN_OP_ROPE:
    if (node->p.rope.mode != KILN_ROPE_NORM && node->p.rope.mode != KILN_ROPE_NEOX)
      return cpu_node_error(ctx, KILN_STATUS_UNSUPPORTED, node,
                            "rope mode %d is not implemented (the cpu backend has NORM = 0 and "
                            "NEOX = 2)",
                            (int)node->p.rope.mode);
    KILN_RETURN_IF_ERROR(want_f32(ctx, node, "src0", s[0]));
    return want_f32(ctx, node, "dst", node->dst);
  case KILN_OP_STORE_KV:
  case KILN_OP_ATTENTION:
  case KILN_OP_SWIGLU:
  case KILN_OP_ADD:
    for (int i = 0; i < KILN_MAX_SRC; i++) {
      static const char *const names[KILN_MAX_SRC] = {"src0", "src1", "src2", "src3"};
      KILN_RETURN_IF_ERROR(want_f32(ctx, node, names[i], s[i]));
    }
    return want_f32(ctx, node, "dst", node->dst);
  default:
    return cpu_node_error(ctx, KILN_STATUS_UNSUPPORTED, node,
                          "op id %d is not implemented by the cpu backend", (int)node->op);
  }
}

/* ---- validate ----------------------------------------------------------- */

/* Sources an op reads (the rest of src[] must be NULL), and whether the
 * last of them is optional (MUL_MAT's bias). */
static void op_arity(kiln_op op, int *out_n, bool *out_last_optional) {
  *out_last_optional = false;
  switch (op) {
  case KILN_OP_GET_ROWS: case KILN_OP_RMS_NORM: case KILN_OP_SWIGLU: case KILN_OP_ADD:
    *out_n = 2; return;
  case KILN_OP_ROPE: case KILN_OP_STORE_KV:
    *out_n = 1; return;
  case KILN_OP_MUL_MAT:
    *out_n = 3; *out_last_optional = true; return;
  case KILN_OP_ATTENTION:
    *out_n = 3; return;
  default:
    *out_n = 0; return;
  }
}

/* Dimensions in range and the element count representable; for a 2-D use
 * (everything here is at most [ne0, ne1]) ne2 and ne3 must be 1. */
static kiln_status check_dims(const cpu_ctx *ctx, const kiln_node *node, const char *what,
                              const kiln_tensor *t) {
  if (t->n_dims < 1 || t->n_dims > KILN_MAX_DIMS)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node, "%s '%.*s' has n_dims %d",
                          what, KILN_NAME_MAX, t->name, (int)t->n_dims);
  for (int i = 0; i < KILN_MAX_DIMS; i++) {
    if (t->ne[i] < 1 || t->ne[i] > ((int64_t)1 << 40))
      return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                            "%s '%.*s' has ne[%d] = %lld (want 1 .. 2^40)", what, KILN_NAME_MAX,
                            t->name, i, (long long)t->ne[i]);
  }
  if (t->ne[2] != 1 || t->ne[3] != 1)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "%s '%.*s' is [%lld, %lld, %lld, %lld]; the op takes 2-D tensors", what,
                          KILN_NAME_MAX, t->name, (long long)t->ne[0], (long long)t->ne[1],
                          (long long)t->ne[2], (long long)t->ne[3]);
  if (t->ne[0] > INT64_MAX / 8 / t->ne[1])
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node, "%s '%.*s' is too large",
                          what, KILN_NAME_MAX, t->name);
  return NULL;
}

/* An F32 [w, cols] tensor whose nbytes cover it. */
static kiln_status check_f32_matrix(const cpu_ctx *ctx, const kiln_node *node, const char *what,
                                    const kiln_tensor *t) {
  KILN_RETURN_IF_ERROR(check_dims(ctx, node, what, t));
  uint64_t need = (uint64_t)t->ne[0] * (uint64_t)t->ne[1] * 4u;
  if (t->nbytes < need)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "%s '%.*s' [%lld, %lld] F32 needs %llu bytes, nbytes is %llu", what,
                          KILN_NAME_MAX, t->name, (long long)t->ne[0], (long long)t->ne[1],
                          (unsigned long long)need, (unsigned long long)t->nbytes);
  return NULL;
}

/* A weight [n, rows] of a supported type: n a whole number of blocks, and
 * nbytes covering every row. */
static kiln_status check_weight(const cpu_ctx *ctx, const kiln_node *node, const char *what,
                                const kiln_tensor *t) {
  KILN_RETURN_IF_ERROR(check_dims(ctx, node, what, t));
  int64_t rb = kiln_type_row_bytes(t->type, t->ne[0]);
  if (rb < 0)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "%s '%.*s': row length %lld is not a multiple of %s's block of %lld",
                          what, KILN_NAME_MAX, t->name, (long long)t->ne[0],
                          kiln_type_name(t->type), (long long)kiln_type_block_size(t->type));
  uint64_t need = (uint64_t)rb * (uint64_t)t->ne[1];
  if (t->nbytes < need)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "%s '%.*s' [%lld, %lld] %s needs %llu bytes, nbytes is %llu", what,
                          KILN_NAME_MAX, t->name, (long long)t->ne[0], (long long)t->ne[1],
                          kiln_type_name(t->type), (unsigned long long)need,
                          (unsigned long long)t->nbytes);
  return NULL;
}

static kiln_status same_width(const cpu_ctx *ctx, const kiln_node *node, const char *wa,
                              const kiln_tensor *a, const char *wb, const kiln_tensor *b) {
  if (a->ne[0] != b->ne[0])
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "%s '%.*s' has width %lld but %s '%.*s' has width %lld", wa,
                          KILN_NAME_MAX, a->name, (long long)a->ne[0], wb, KILN_NAME_MAX, b->name,
                          (long long)b->ne[0]);
  return NULL;
}

static kiln_status validate_get_rows(const cpu_ctx *ctx, const kiln_node *node) {
  const kiln_tensor *w = node->src[0], *ids = node->src[1], *dst = node->dst;
  KILN_RETURN_IF_ERROR(check_weight(ctx, node, "embedding table src0", w));
  KILN_RETURN_IF_ERROR(check_dims(ctx, node, "token ids src1", ids));
  if (ids->ne[1] != 1 || ids->nbytes < (uint64_t)ids->ne[0] * 4u)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "token ids src1 '%.*s' must be I32 [capacity] (is [%lld, %lld], %llu "
                          "bytes)",
                          KILN_NAME_MAX, ids->name, (long long)ids->ne[0], (long long)ids->ne[1],
                          (unsigned long long)ids->nbytes);
  if (w->ne[1] > INT32_MAX)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "embedding table has %lld rows, more than I32 ids can address",
                          (long long)w->ne[1]);
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "dst", dst));
  return same_width(ctx, node, "dst", dst, "embedding table src0", w);
}

static kiln_status validate_rms_norm(const cpu_ctx *ctx, const kiln_node *node) {
  const kiln_tensor *x = node->src[0], *w = node->src[1], *dst = node->dst;
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "src0", x));
  KILN_RETURN_IF_ERROR(check_weight(ctx, node, "norm weight src1", w));
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "dst", dst));
  KILN_RETURN_IF_ERROR(same_width(ctx, node, "dst", dst, "src0", x));
  if (w->ne[1] != 1)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "norm weight '%.*s' must be a vector, is [%lld, %lld]", KILN_NAME_MAX,
                          w->name, (long long)w->ne[0], (long long)w->ne[1]);
  if (x->ne[0] % w->ne[0] != 0)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "src0 width %lld is not a multiple of the norm weight's length %lld",
                          (long long)x->ne[0], (long long)w->ne[0]);
  float eps = node->p.rms_norm.eps;
  if (!isfinite(eps) || eps < 0.0f)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "eps %g must be finite and >= 0", (double)eps);
  return NULL;
}

static kiln_status validate_mul_mat(const cpu_ctx *ctx, const kiln_node *node) {
  const kiln_tensor *w = node->src[0], *x = node->src[1], *b = node->src[2], *dst = node->dst;
  KILN_RETURN_IF_ERROR(check_weight(ctx, node, "weight src0", w));
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "src1", x));
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "dst", dst));
  KILN_RETURN_IF_ERROR(same_width(ctx, node, "src1", x, "weight src0", w));
  if (dst->ne[0] != w->ne[1])
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "dst width %lld differs from the weight's row count %lld (weight "
                          "'%.*s' is [%lld, %lld])",
                          (long long)dst->ne[0], (long long)w->ne[1], KILN_NAME_MAX, w->name,
                          (long long)w->ne[0], (long long)w->ne[1]);
  if (b) {
    KILN_RETURN_IF_ERROR(check_weight(ctx, node, "bias src2", b));
    if (b->ne[0] != w->ne[1] || b->ne[1] != 1)
      return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                            "bias '%.*s' is [%lld, %lld], want [%lld]", KILN_NAME_MAX, b->name,
                            (long long)b->ne[0], (long long)b->ne[1], (long long)w->ne[1]);
  }
  return NULL;
}

static kiln_status validate_rope(const cpu_ctx *ctx, const kiln_node *node) {
  const kiln_tensor *x = node->src[0], *dst = node->dst;
  const kiln_rope_params *p = &node->p.rope;
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "src0", x));
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "dst", dst));
  KILN_RETURN_IF_ERROR(same_width(ctx, node, "dst", dst, "src0", x));
  if (p->head_dim < 1 || p->n_head < 1)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "head_dim %d and n_head %d must be >= 1", (int)p->head_dim,
                          (int)p->n_head);
  if (p->n_rot < 2 || p->n_rot % 2 != 0 || p->n_rot > p->head_dim)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "n_rot %d must be even, >= 2 and <= head_dim %d", (int)p->n_rot,
                          (int)p->head_dim);
  if ((int64_t)p->head_dim * p->n_head != x->ne[0])
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "head_dim %d x n_head %d = %lld differs from src0 width %lld",
                          (int)p->head_dim, (int)p->n_head,
                          (long long)p->head_dim * p->n_head, (long long)x->ne[0]);
  if (!isfinite(p->theta) || p->theta <= 0.0f)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "theta %g must be finite and > 0", (double)p->theta);
  return NULL;
}

static kiln_status validate_store_kv(const cpu_ctx *ctx, const kiln_node *node) {
  const kiln_tensor *x = node->src[0], *cache = node->dst;
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "src0", x));
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "KV cache dst", cache));
  return same_width(ctx, node, "KV cache dst", cache, "src0", x);
}

static kiln_status validate_attention(const cpu_ctx *ctx, const kiln_node *node) {
  const kiln_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2], *dst = node->dst;
  const kiln_attention_params *p = &node->p.attention;
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "Q src0", q));
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "K cache src1", k));
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "V cache src2", v));
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "dst", dst));
  if (p->head_dim < 1 || p->n_head < 1 || p->n_head_kv < 1)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "head_dim %d, n_head %d and n_head_kv %d must be >= 1",
                          (int)p->head_dim, (int)p->n_head, (int)p->n_head_kv);
  if (p->n_head % p->n_head_kv != 0)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "n_head %d is not a multiple of n_head_kv %d", (int)p->n_head,
                          (int)p->n_head_kv);
  if ((int64_t)p->head_dim * p->n_head != q->ne[0])
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "head_dim %d x n_head %d = %lld differs from Q width %lld",
                          (int)p->head_dim, (int)p->n_head, (long long)p->head_dim * p->n_head,
                          (long long)q->ne[0]);
  if ((int64_t)p->head_dim * p->n_head_kv != k->ne[0])
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "head_dim %d x n_head_kv %d = %lld differs from K cache width %lld",
                          (int)p->head_dim, (int)p->n_head_kv,
                          (long long)p->head_dim * p->n_head_kv, (long long)k->ne[0]);
  KILN_RETURN_IF_ERROR(same_width(ctx, node, "V cache src2", v, "K cache src1", k));
  if (v->ne[1] != k->ne[1])
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "K cache holds %lld positions but V cache %lld", (long long)k->ne[1],
                          (long long)v->ne[1]);
  KILN_RETURN_IF_ERROR(same_width(ctx, node, "dst", dst, "Q src0", q));
  if (!isfinite(p->scale))
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node, "scale %g is not finite",
                          (double)p->scale);
  return NULL;
}

static kiln_status validate_elementwise(const cpu_ctx *ctx, const kiln_node *node) {
  const kiln_tensor *a = node->src[0], *b = node->src[1], *dst = node->dst;
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "src0", a));
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "src1", b));
  KILN_RETURN_IF_ERROR(check_f32_matrix(ctx, node, "dst", dst));
  KILN_RETURN_IF_ERROR(same_width(ctx, node, "src1", b, "src0", a));
  return same_width(ctx, node, "dst", dst, "src0", a);
}

kiln_status cpu_node_validate(const cpu_ctx *ctx, const kiln_node *node) {
  int n_src;
  bool last_optional;
  op_arity(node->op, &n_src, &last_optional);
  if (n_src == 0) return cpu_node_supports(ctx, node); /* unknown op: UNSUPPORTED */
  for (int i = 0; i < KILN_MAX_SRC; i++) {
    bool want = i < n_src && !(last_optional && i == n_src - 1);
    if (want && !node->src[i])
      return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node, "src%d is missing", i);
    if (i >= n_src && node->src[i])
      return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                            "has src%d '%.*s' but the op reads only %d source(s)", i,
                            KILN_NAME_MAX, node->src[i]->name, n_src);
  }
  if (!node->dst)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node, "dst is missing");
  KILN_RETURN_IF_ERROR(cpu_node_supports(ctx, node));
  switch (node->op) {
  case KILN_OP_GET_ROWS: return validate_get_rows(ctx, node);
  case KILN_OP_RMS_NORM: return validate_rms_norm(ctx, node);
  case KILN_OP_MUL_MAT: return validate_mul_mat(ctx, node);
  case KILN_OP_ROPE: return validate_rope(ctx, node);
  case KILN_OP_STORE_KV: return validate_store_kv(ctx, node);
  case KILN_OP_ATTENTION: return validate_attention(ctx, node);
  case KILN_OP_SWIGLU:
  case KILN_OP_ADD: return validate_elementwise(ctx, node);
  default: return cpu_node_supports(ctx, node);
  }
}

/* ---- run-time checks ---------------------------------------------------- */

/* t holds at least n_tokens token columns (ne[0] for the I32 ids). */
static kiln_status check_columns(const cpu_ctx *ctx, const kiln_node *node, const char *what,
                                 const kiln_tensor *t, int32_t n_tokens) {
  int64_t cap = t->type == KILN_TYPE_I32 ? t->ne[0] : t->ne[1];
  if (n_tokens > cap)
    return cpu_node_error(ctx, KILN_STATUS_OUT_OF_RANGE, node,
                          "step has %d tokens but %s '%.*s' holds %lld columns", (int)n_tokens,
                          what, KILN_NAME_MAX, t->name, (long long)cap);
  return NULL;
}

/* Positions pos0 .. pos0+n_tokens-1 are columns of the cache t. */
static kiln_status check_positions(const cpu_ctx *ctx, const kiln_node *node, const char *what,
                                   const kiln_tensor *t, const cpu_io *io) {
  int64_t last = (int64_t)io->pos0 + io->n_tokens - 1;
  if (last >= t->ne[1])
    return cpu_node_error(ctx, KILN_STATUS_OUT_OF_RANGE, node,
                          "position %lld is past the end of %s '%.*s' (n_ctx %lld; step at "
                          "pos0 %d with %d tokens)",
                          (long long)last, what, KILN_NAME_MAX, t->name, (long long)t->ne[1],
                          (int)io->pos0, (int)io->n_tokens);
  return NULL;
}

static bool overlaps(const void *a, uint64_t na, const void *b, uint64_t nb) {
  const char *pa = a, *pb = b;
  return pa < pb + nb && pb < pa + na;
}

kiln_status cpu_node_run(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  KILN_RETURN_IF_ERROR(cpu_node_validate(ctx, node));
  if (io->n_tokens < 1 || io->pos0 < 0)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "step has n_tokens %d and pos0 %d (want >= 1 and >= 0)",
                          (int)io->n_tokens, (int)io->pos0);
  if ((int64_t)io->pos0 + io->n_tokens > INT32_MAX)
    return cpu_node_error(ctx, KILN_STATUS_OUT_OF_RANGE, node, "positions overflow int32");
  if (!io->dst)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node, "no buffer for dst '%.*s'",
                          KILN_NAME_MAX, node->dst->name);
  for (int i = 0; i < KILN_MAX_SRC; i++) {
    if (node->src[i] && !io->src[i])
      return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                            "no buffer for src%d '%.*s'", i, KILN_NAME_MAX, node->src[i]->name);
  }

  const kiln_tensor *const *s = node->src;
  const kiln_tensor *d = node->dst;
  int32_t T = io->n_tokens;
  switch (node->op) {
  case KILN_OP_GET_ROWS:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "token ids src1", s[1], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    return cpu_op_get_rows(ctx, node, io);
  case KILN_OP_RMS_NORM:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "src0", s[0], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    return cpu_op_rms_norm(ctx, node, io);
  case KILN_OP_MUL_MAT:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "src1", s[1], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    /* Every output reads all of src1 and the weight: no in-place form. */
    for (int i = 0; i < 3; i++) {
      if (s[i] && overlaps(io->dst, d->nbytes, io->src[i], s[i]->nbytes))
        return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                              "dst '%.*s' overlaps src%d '%.*s'", KILN_NAME_MAX, d->name, i,
                              KILN_NAME_MAX, s[i]->name);
    }
    return cpu_op_mul_mat(ctx, node, io);
  case KILN_OP_ROPE:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "src0", s[0], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    return cpu_op_rope(ctx, node, io);
  case KILN_OP_STORE_KV:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "src0", s[0], T));
    KILN_RETURN_IF_ERROR(check_positions(ctx, node, "KV cache dst", d, io));
    return cpu_op_store_kv(ctx, node, io);
  case KILN_OP_ATTENTION:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "Q src0", s[0], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    KILN_RETURN_IF_ERROR(check_positions(ctx, node, "K cache src1", s[1], io));
    for (int i = 0; i < 3; i++) {
      if (overlaps(io->dst, d->nbytes, io->src[i], s[i]->nbytes))
        return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                              "dst '%.*s' overlaps src%d '%.*s'", KILN_NAME_MAX, d->name, i,
                              KILN_NAME_MAX, s[i]->name);
    }
    return cpu_op_attention(ctx, node, io);
  case KILN_OP_SWIGLU:
  case KILN_OP_ADD:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "src0", s[0], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "src1", s[1], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    return node->op == KILN_OP_ADD ? cpu_op_add(ctx, node, io) : cpu_op_swiglu(ctx, node, io);
  default:
    return cpu_node_supports(ctx, node);
  }
}
