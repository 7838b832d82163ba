/* The structural checks of a kiln_node (node_check.h): kiln/graph.h's op
 * definitions, written once for every backend. Backends index their
 * buffers from these shapes, so each size they compute must be proven to
 * fit here: dimensions are bounded (KILN_NODE_MAX_NE) before any product
 * of them is formed. */
#include "config.h"

#include <math.h>
#include <stdio.h>

#include "kiln/kv_cache.h"
#include "node_check.h"

kiln_status kiln_node_verror(const kiln_host_api *host, kiln_status_code code,
                             const kiln_node *node, const char *fmt, va_list ap) {
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  return host->status_new(code, "%s node '%.*s': %s", kiln_op_name(node->op), KILN_NAME_MAX,
                          node->name, msg);
}

kiln_status kiln_node_error(const kiln_host_api *host, kiln_status_code code,
                            const kiln_node *node, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln_status st = kiln_node_verror(host, code, node, fmt, ap);
  va_end(ap);
  return st;
}

#define BAD(...) kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node, __VA_ARGS__)

/* Sources an op reads (the rest of src[] must be NULL), and whether the
 * last of them is optional (MUL_MAT's bias); 0 for an op id graph.h lacks. */
static int op_arity(kiln_op op, bool *out_last_optional) {
  *out_last_optional = false;
  switch (op) {
  case KILN_OP_GET_ROWS: case KILN_OP_RMS_NORM: case KILN_OP_SWIGLU: case KILN_OP_ADD:
  case KILN_OP_SIGMOID_MUL:
  case KILN_OP_GET_COLUMNS:
    return 2;
  case KILN_OP_ROPE: case KILN_OP_STORE_KV: case KILN_OP_SLICE:
    return 1;
  case KILN_OP_SSM_CONV: case KILN_OP_GATED_DELTA_NET:
    return 3;
  case KILN_OP_GDN_GATE:
    return 4;
  case KILN_OP_MUL_MAT:
    *out_last_optional = true;
    return 3;
  case KILN_OP_ATTENTION:
    return 3;
  default:
    return 0;
  }
}

/* n_dims and every ne in range, the tensor 2-D (every op here takes at
 * most [ne0, ne1]), and ne0 * ne1 * 8 representable. */
static kiln_status check_dims(const kiln_host_api *host, const kiln_node *node,
                              const char *what, const kiln_tensor *t) {
  if (t->n_dims < 1 || t->n_dims > KILN_MAX_DIMS)
    return BAD("%s '%.*s' has n_dims %d (want 1 .. %d)", what, KILN_NAME_MAX, t->name,
               (int)t->n_dims, KILN_MAX_DIMS);
  for (int i = 0; i < KILN_MAX_DIMS; i++)
    if (t->ne[i] < 1 || t->ne[i] > KILN_NODE_MAX_NE)
      return BAD("%s '%.*s' has ne[%d] = %lld (want 1 .. 2^40)", what, KILN_NAME_MAX, t->name,
                 i, (long long)t->ne[i]);
  if (t->ne[2] != 1 || t->ne[3] != 1)
    return BAD("%s '%.*s' is [%lld, %lld, %lld, %lld]; the op takes 2-D tensors", what,
               KILN_NAME_MAX, t->name, (long long)t->ne[0], (long long)t->ne[1],
               (long long)t->ne[2], (long long)t->ne[3]);
  if (t->ne[0] > INT64_MAX / 8 / t->ne[1])
    return BAD("%s '%.*s' [%lld, %lld] is too large (its size overflows int64)", what,
               KILN_NAME_MAX, t->name, (long long)t->ne[0], (long long)t->ne[1]);
  return NULL;
}

/* An activation or KV cache: F32 [ne0, ne1] with nbytes covering it. */
static kiln_status check_f32(const kiln_host_api *host, const kiln_node *node, const char *what,
                             const kiln_tensor *t) {
  KILN_RETURN_IF_ERROR(check_dims(host, node, what, t));
  if (t->type != KILN_TYPE_F32)
    return BAD("%s '%.*s' has type %s (id %d); activations and KV caches are F32", what,
               KILN_NAME_MAX, t->name, kiln_type_name(t->type), (int)t->type);
  uint64_t need = (uint64_t)t->ne[0] * (uint64_t)t->ne[1] * 4u;
  if (t->nbytes < need)
    return BAD("%s '%.*s' [%lld, %lld] F32 needs %llu bytes, nbytes is %llu", what,
               KILN_NAME_MAX, t->name, (long long)t->ne[0], (long long)t->ne[1],
               (unsigned long long)need, (unsigned long long)t->nbytes);
  return NULL;
}

/* A KV cache: [ne0, ne1] of a KV type (kiln/kv_cache.h), ne0 whole blocks
 * of it, nbytes covering every position's row. */
static kiln_status check_kv_cache(const kiln_host_api *host, const kiln_node *node, const char *what,
                                  const kiln_tensor *t) {
  KILN_RETURN_IF_ERROR(check_dims(host, node, what, t));
  if (!kiln_kv_type_ok(t->type))
    return BAD("%s '%.*s' has type %s (id %d); a KV cache is F32, F16, BF16 or Q8_0", what,
               KILN_NAME_MAX, t->name, kiln_type_name(t->type), (int)t->type);
  const int64_t rb = kiln_type_row_bytes(t->type, t->ne[0]);
  if (rb < 0)
    return BAD("%s '%.*s' width %lld is not a whole number of %s blocks of %lld", what,
               KILN_NAME_MAX, t->name, (long long)t->ne[0], kiln_type_name(t->type),
               (long long)kiln_type_block_size(t->type));
  uint64_t need = (uint64_t)rb * (uint64_t)t->ne[1];
  if (t->nbytes < need)
    return BAD("%s '%.*s' [%lld, %lld] %s needs %llu bytes, nbytes is %llu", what,
               KILN_NAME_MAX, t->name, (long long)t->ne[0], (long long)t->ne[1],
               kiln_type_name(t->type), (unsigned long long)need, (unsigned long long)t->nbytes);
  return NULL;
}

/* A weight [ne0, rows] of a type kiln/types.h knows: rows of whole blocks
 * (as ggml requires), nbytes covering every row. */
static kiln_status check_weight(const kiln_host_api *host, const kiln_node *node,
                                const char *what, const kiln_tensor *t) {
  KILN_RETURN_IF_ERROR(check_dims(host, node, what, t));
  if (!kiln_type_is_known(t->type))
    return BAD("%s '%.*s' has type id %d, which kiln/types.h does not know", what,
               KILN_NAME_MAX, t->name, (int)t->type);
  int64_t rb = kiln_type_row_bytes(t->type, t->ne[0]);
  if (rb < 0)
    return BAD("%s '%.*s': row length %lld is not a whole number of %s blocks of %lld values",
               what, KILN_NAME_MAX, t->name, (long long)t->ne[0], kiln_type_name(t->type),
               (long long)kiln_type_block_size(t->type));
  uint64_t need = (uint64_t)rb * (uint64_t)t->ne[1];
  if (t->nbytes < need)
    return BAD("%s '%.*s' [%lld, %lld] %s needs %llu bytes, nbytes is %llu", what,
               KILN_NAME_MAX, t->name, (long long)t->ne[0], (long long)t->ne[1],
               kiln_type_name(t->type), (unsigned long long)need,
               (unsigned long long)t->nbytes);
  return NULL;
}

static kiln_status same_width(const kiln_host_api *host, const kiln_node *node, const char *wa,
                              const kiln_tensor *a, const char *wb, const kiln_tensor *b) {
  if (a->ne[0] != b->ne[0])
    return BAD("%s '%.*s' has width %lld but %s '%.*s' has width %lld", wa, KILN_NAME_MAX,
               a->name, (long long)a->ne[0], wb, KILN_NAME_MAX, b->name, (long long)b->ne[0]);
  return NULL;
}

static kiln_status check_get_rows(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *w = node->src[0], *ids = node->src[1], *dst = node->dst;
  KILN_RETURN_IF_ERROR(check_weight(host, node, "embedding table src0", w));
  KILN_RETURN_IF_ERROR(check_dims(host, node, "token ids src1", ids));
  if (ids->type != KILN_TYPE_I32 || ids->ne[1] != 1 || ids->nbytes < (uint64_t)ids->ne[0] * 4u)
    return BAD("token ids src1 '%.*s' must be I32 [capacity] (is %s [%lld, %lld], %llu bytes)",
               KILN_NAME_MAX, ids->name, kiln_type_name(ids->type), (long long)ids->ne[0],
               (long long)ids->ne[1], (unsigned long long)ids->nbytes);
  if (w->ne[1] > INT32_MAX)
    return BAD("embedding table '%.*s' has %lld rows, more than I32 ids can address",
               KILN_NAME_MAX, w->name, (long long)w->ne[1]);
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  return same_width(host, node, "dst", dst, "embedding table src0", w);
}

static kiln_status check_rms_norm(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *x = node->src[0], *w = node->src[1], *dst = node->dst;
  KILN_RETURN_IF_ERROR(check_f32(host, node, "src0", x));
  KILN_RETURN_IF_ERROR(check_weight(host, node, "norm weight src1", w));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  KILN_RETURN_IF_ERROR(same_width(host, node, "dst", dst, "src0", x));
  if (w->ne[1] != 1)
    return BAD("norm weight '%.*s' must be a vector, is [%lld, %lld]", KILN_NAME_MAX, w->name,
               (long long)w->ne[0], (long long)w->ne[1]);
  if (x->ne[0] % w->ne[0] != 0)
    return BAD("src0 width %lld is not a multiple of the norm weight's length %lld",
               (long long)x->ne[0], (long long)w->ne[0]);
  float eps = node->p.rms_norm.eps;
  if (!isfinite(eps) || !(eps > 0.0f))
    return BAD("eps %g must be finite and > 0", (double)eps);
  return NULL;
}

static kiln_status check_mul_mat(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *w = node->src[0], *x = node->src[1], *b = node->src[2], *dst = node->dst;
  KILN_RETURN_IF_ERROR(check_weight(host, node, "weight src0", w));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "src1", x));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  KILN_RETURN_IF_ERROR(same_width(host, node, "src1", x, "weight src0", w));
  if (dst->ne[0] != w->ne[1])
    return BAD("dst width %lld differs from the weight's row count %lld (weight '%.*s' is "
               "[%lld, %lld])",
               (long long)dst->ne[0], (long long)w->ne[1], KILN_NAME_MAX, w->name,
               (long long)w->ne[0], (long long)w->ne[1]);
  if (b) {
    KILN_RETURN_IF_ERROR(check_weight(host, node, "bias src2", b));
    if (b->ne[0] != w->ne[1] || b->ne[1] != 1)
      return BAD("bias '%.*s' is [%lld, %lld], want [%lld]", KILN_NAME_MAX, b->name,
                 (long long)b->ne[0], (long long)b->ne[1], (long long)w->ne[1]);
  }
  return NULL;
}

static kiln_status check_rope(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *x = node->src[0], *dst = node->dst;
  const kiln_rope_params *p = &node->p.rope;
  if (p->mode != KILN_ROPE_NORM && p->mode != KILN_ROPE_NEOX && p->mode != KILN_ROPE_IMROPE)
    return BAD("rope mode %d is none of kiln/graph.h's (NORM = 0, NEOX = 2, IMROPE = 40)",
               (int)p->mode);
  KILN_RETURN_IF_ERROR(check_f32(host, node, "src0", x));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  KILN_RETURN_IF_ERROR(same_width(host, node, "dst", dst, "src0", x));
  if (p->head_dim < 1 || p->n_head < 1)
    return BAD("head_dim %d and n_head %d must be >= 1", (int)p->head_dim, (int)p->n_head);
  if (p->n_rot < 2 || p->n_rot % 2 != 0 || p->n_rot > p->head_dim)
    return BAD("n_rot %d must be even, >= 2 and <= head_dim %d", (int)p->n_rot,
               (int)p->head_dim);
  if ((int64_t)p->head_dim * p->n_head != x->ne[0])
    return BAD("head_dim %d x n_head %d = %lld differs from src0 width %lld", (int)p->head_dim,
               (int)p->n_head, (long long)p->head_dim * p->n_head, (long long)x->ne[0]);
  if (!isfinite(p->theta) || !(p->theta > 0.0f))
    return BAD("theta %g must be finite and > 0", (double)p->theta);
  int64_t sect = 0;
  for (int i = 0; i < 4; i++) {
    if (p->sections[i] < 0 || (p->mode != KILN_ROPE_IMROPE && p->sections[i] != 0))
      return BAD("sections [%d, %d, %d, %d]: %s", (int)p->sections[0], (int)p->sections[1],
                 (int)p->sections[2], (int)p->sections[3],
                 p->mode == KILN_ROPE_IMROPE ? "each must be >= 0" : "only IMROPE has sections");
    sect += p->sections[i];
  }
  if (p->mode == KILN_ROPE_IMROPE && (sect < 1 || sect > p->head_dim))
    return BAD("sections [%d, %d, %d, %d] sum to %lld; IMROPE wants 1 .. head_dim %d",
               (int)p->sections[0], (int)p->sections[1], (int)p->sections[2],
               (int)p->sections[3], (long long)sect, (int)p->head_dim);
  return NULL;
}

static kiln_status check_store_kv(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *x = node->src[0], *cache = node->dst;
  KILN_RETURN_IF_ERROR(check_f32(host, node, "src0", x));
  KILN_RETURN_IF_ERROR(check_kv_cache(host, node, "KV cache dst", cache));
  return same_width(host, node, "KV cache dst", cache, "src0", x);
}

static kiln_status check_attention(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2], *dst = node->dst;
  const kiln_attention_params *p = &node->p.attention;
  KILN_RETURN_IF_ERROR(check_f32(host, node, "Q src0", q));
  KILN_RETURN_IF_ERROR(check_kv_cache(host, node, "K cache src1", k));
  KILN_RETURN_IF_ERROR(check_kv_cache(host, node, "V cache src2", v));
  if (k->type != v->type)
    return BAD("K cache is %s but V cache %s; both have the one KV type", kiln_type_name(k->type),
               kiln_type_name(v->type));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  if (p->head_dim < 1 || p->n_head < 1 || p->n_head_kv < 1)
    return BAD("head_dim %d, n_head %d and n_head_kv %d must be >= 1", (int)p->head_dim,
               (int)p->n_head, (int)p->n_head_kv);
  if (p->n_head % p->n_head_kv != 0)
    return BAD("n_head %d is not a multiple of n_head_kv %d (GQA)", (int)p->n_head,
               (int)p->n_head_kv);
  if ((int64_t)p->head_dim * p->n_head != q->ne[0])
    return BAD("head_dim %d x n_head %d = %lld differs from Q width %lld", (int)p->head_dim,
               (int)p->n_head, (long long)p->head_dim * p->n_head, (long long)q->ne[0]);
  if ((int64_t)p->head_dim * p->n_head_kv != k->ne[0])
    return BAD("head_dim %d x n_head_kv %d = %lld differs from K cache width %lld",
               (int)p->head_dim, (int)p->n_head_kv, (long long)p->head_dim * p->n_head_kv,
               (long long)k->ne[0]);
  KILN_RETURN_IF_ERROR(same_width(host, node, "V cache src2", v, "K cache src1", k));
  if (p->head_dim % kiln_type_block_size(k->type) != 0)
    return BAD("head_dim %d is not a multiple of the %s KV cache's block of %lld values",
               (int)p->head_dim, kiln_type_name(k->type), (long long)kiln_type_block_size(k->type));
  if (v->ne[1] != k->ne[1])
    return BAD("K cache holds %lld positions but V cache %lld", (long long)k->ne[1],
               (long long)v->ne[1]);
  KILN_RETURN_IF_ERROR(same_width(host, node, "dst", dst, "Q src0", q));
  if (!isfinite(p->scale)) return BAD("scale %g is not finite", (double)p->scale);
  return NULL;
}

static kiln_status check_get_columns(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *x = node->src[0], *ids = node->src[1], *dst = node->dst;
  KILN_RETURN_IF_ERROR(check_f32(host, node, "src0", x));
  KILN_RETURN_IF_ERROR(check_dims(host, node, "column ids src1", ids));
  if (ids->type != KILN_TYPE_I32 || ids->role != KILN_ROLE_INPUT || ids->ne[1] != 1 ||
      ids->nbytes < (uint64_t)ids->ne[0] * 4u)
    return BAD("column ids src1 '%.*s' must be an I32 INPUT [capacity] (is %s [%lld, %lld], "
               "%llu bytes)",
               KILN_NAME_MAX, ids->name, kiln_type_name(ids->type), (long long)ids->ne[0],
               (long long)ids->ne[1], (unsigned long long)ids->nbytes);
  if (x->ne[1] > INT32_MAX)
    return BAD("src0 '%.*s' has %lld columns, more than I32 ids can address", KILN_NAME_MAX,
               x->name, (long long)x->ne[1]);
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  return same_width(host, node, "dst", dst, "src0", x);
}

static kiln_status check_elementwise(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *a = node->src[0], *b = node->src[1], *dst = node->dst;
  KILN_RETURN_IF_ERROR(check_f32(host, node, "src0", a));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "src1", b));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  KILN_RETURN_IF_ERROR(same_width(host, node, "src1", b, "src0", a));
  return same_width(host, node, "dst", dst, "src0", a);
}

static kiln_status check_slice(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *x = node->src[0], *dst = node->dst;
  const kiln_slice_params *p = &node->p.slice;
  KILN_RETURN_IF_ERROR(check_f32(host, node, "src0", x));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  if (p->offset < 0 || p->length < 1 || p->stride < 1 || (int64_t)p->offset + p->length > p->stride)
    return BAD("offset %d, length %d, stride %d: want offset >= 0, length >= 1, offset + length "
               "<= stride",
               (int)p->offset, (int)p->length, (int)p->stride);
  if (x->ne[0] % p->stride != 0)
    return BAD("src0 width %lld is not a multiple of stride %d", (long long)x->ne[0],
               (int)p->stride);
  if (dst->ne[0] != x->ne[0] / p->stride * p->length)
    return BAD("dst width %lld differs from %lld groups x length %d", (long long)dst->ne[0],
               (long long)(x->ne[0] / p->stride), (int)p->length);
  return NULL;
}

/* A recurrent state: F32 [width, 1], role RECURRENT, of `want` values. */
static kiln_status check_state(const kiln_host_api *host, const kiln_node *node,
                               const char *what, const kiln_tensor *t, int64_t want) {
  KILN_RETURN_IF_ERROR(check_f32(host, node, what, t));
  if (t->role != KILN_ROLE_RECURRENT || t->ne[1] != 1 || t->ne[0] != want)
    return BAD("%s '%.*s' must be a RECURRENT [%lld, 1] state (is role %d, [%lld, %lld])", what,
               KILN_NAME_MAX, t->name, (long long)want, (int)t->role, (long long)t->ne[0],
               (long long)t->ne[1]);
  return NULL;
}

static kiln_status check_ssm_conv(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *x = node->src[0], *w = node->src[1], *state = node->src[2],
                    *dst = node->dst;
  KILN_RETURN_IF_ERROR(check_f32(host, node, "src0", x));
  KILN_RETURN_IF_ERROR(check_weight(host, node, "conv kernel src1", w));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  KILN_RETURN_IF_ERROR(same_width(host, node, "dst", dst, "src0", x));
  if (w->ne[1] != x->ne[0] || w->ne[0] < 2)
    return BAD("conv kernel '%.*s' is [%lld, %lld]; want [K >= 2, %lld channels]", KILN_NAME_MAX,
               w->name, (long long)w->ne[0], (long long)w->ne[1], (long long)x->ne[0]);
  return check_state(host, node, "conv state src2", state, (w->ne[0] - 1) * x->ne[0]);
}

static kiln_status check_gdn_gate(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *a = node->src[0], *b = node->src[1], *A = node->src[2], *dt = node->src[3],
                    *dst = node->dst;
  KILN_RETURN_IF_ERROR(check_f32(host, node, "alpha src0", a));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "beta src1", b));
  KILN_RETURN_IF_ERROR(check_weight(host, node, "A src2", A));
  KILN_RETURN_IF_ERROR(check_weight(host, node, "time-step bias src3", dt));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  KILN_RETURN_IF_ERROR(same_width(host, node, "beta src1", b, "alpha src0", a));
  if (A->ne[0] != a->ne[0] || A->ne[1] != 1 || dt->ne[0] != a->ne[0] || dt->ne[1] != 1)
    return BAD("A '%.*s' [%lld, %lld] and bias '%.*s' [%lld, %lld] must be vectors of the %lld "
               "heads",
               KILN_NAME_MAX, A->name, (long long)A->ne[0], (long long)A->ne[1], KILN_NAME_MAX,
               dt->name, (long long)dt->ne[0], (long long)dt->ne[1], (long long)a->ne[0]);
  if (dst->ne[0] != 2 * a->ne[0])
    return BAD("dst width %lld is not 2 x %lld heads", (long long)dst->ne[0], (long long)a->ne[0]);
  return NULL;
}

static kiln_status check_gdn(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *qkv = node->src[0], *gates = node->src[1], *state = node->src[2],
                    *dst = node->dst;
  const kiln_gdn_params *p = &node->p.gdn;
  KILN_RETURN_IF_ERROR(check_f32(host, node, "qkv src0", qkv));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "gates src1", gates));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  if (p->n_k_heads < 1 || p->n_v_heads < 1 || p->head_k_dim < 1 || p->head_v_dim < 1 ||
      p->chunk < 1)
    return BAD("n_k_heads %d, n_v_heads %d, head_k_dim %d, head_v_dim %d and chunk %d must be "
               ">= 1",
               (int)p->n_k_heads, (int)p->n_v_heads, (int)p->head_k_dim, (int)p->head_v_dim,
               (int)p->chunk);
  if (p->n_v_heads % p->n_k_heads != 0)
    return BAD("n_v_heads %d is not a multiple of n_k_heads %d", (int)p->n_v_heads,
               (int)p->n_k_heads);
  if (p->head_k_dim > 4096 || p->head_v_dim > 4096 || p->n_v_heads > 65536 || p->chunk > 4096)
    return BAD("head_k_dim %d, head_v_dim %d, n_v_heads %d or chunk %d is implausibly large",
               (int)p->head_k_dim, (int)p->head_v_dim, (int)p->n_v_heads, (int)p->chunk);
  const int64_t kd = (int64_t)p->n_k_heads * p->head_k_dim, vd = (int64_t)p->n_v_heads * p->head_v_dim;
  if (qkv->ne[0] != 2 * kd + vd)
    return BAD("qkv width %lld differs from 2 x %d x %d + %d x %d = %lld", (long long)qkv->ne[0],
               (int)p->n_k_heads, (int)p->head_k_dim, (int)p->n_v_heads, (int)p->head_v_dim,
               (long long)(2 * kd + vd));
  if (gates->ne[0] != 2 * (int64_t)p->n_v_heads)
    return BAD("gates width %lld is not 2 x %d value heads", (long long)gates->ne[0],
               (int)p->n_v_heads);
  if (dst->ne[0] != vd)
    return BAD("dst width %lld differs from %d x %d", (long long)dst->ne[0], (int)p->n_v_heads,
               (int)p->head_v_dim);
  if (!isfinite(p->l2_eps) || !(p->l2_eps > 0.0f))
    return BAD("l2_eps %g must be finite and > 0", (double)p->l2_eps);
  if (!isfinite(p->q_scale) || !(p->q_scale > 0.0f))
    return BAD("q_scale %g must be finite and > 0", (double)p->q_scale);
  return check_state(host, node, "state src2", state, vd * p->head_k_dim);
}

kiln_status kiln_node_check(const kiln_host_api *host, const kiln_node *node) {
  if (!node) return host->status_new(KILN_STATUS_INVALID_ARGUMENT, "NULL node");
  bool last_optional;
  int n_src = op_arity(node->op, &last_optional);
  if (n_src == 0) return BAD("op id %d is none of kiln/graph.h's ops", (int)node->op);
  for (int i = 0; i < KILN_MAX_SRC; i++) {
    bool required = i < n_src && !(last_optional && i == n_src - 1);
    if (required && !node->src[i]) return BAD("src%d is missing", i);
    if (i >= n_src && node->src[i])
      return BAD("has src%d '%.*s', but %s reads only %d source(s)", i, KILN_NAME_MAX,
                 node->src[i]->name, kiln_op_name(node->op), n_src);
  }
  if (!node->dst) return BAD("dst is missing");
  switch (node->op) {
  case KILN_OP_GET_ROWS: return check_get_rows(host, node);
  case KILN_OP_RMS_NORM: return check_rms_norm(host, node);
  case KILN_OP_MUL_MAT: return check_mul_mat(host, node);
  case KILN_OP_ROPE: return check_rope(host, node);
  case KILN_OP_STORE_KV: return check_store_kv(host, node);
  case KILN_OP_ATTENTION: return check_attention(host, node);
  case KILN_OP_SWIGLU:
  case KILN_OP_ADD:
  case KILN_OP_SIGMOID_MUL: return check_elementwise(host, node);
  case KILN_OP_SLICE: return check_slice(host, node);
  case KILN_OP_SSM_CONV: return check_ssm_conv(host, node);
  case KILN_OP_GDN_GATE: return check_gdn_gate(host, node);
  case KILN_OP_GATED_DELTA_NET: return check_gdn(host, node);
  case KILN_OP_GET_COLUMNS: return check_get_columns(host, node);
  default: return BAD("op id %d is none of kiln/graph.h's ops", (int)node->op);
  }
}
