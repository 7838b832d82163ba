/* Node checks of the CUDA backends: what they support (supports()) and
 * whether a node's shapes and params make sense (prepare()). Kernels trust
 * these checks and the step checks of cuda_run.c, so every index a kernel
 * computes is proven in range here or there. No device is needed. */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "op_describe.h"

kiln_status kiln_cuda_node_error(const kiln_host_api *host, kiln_status_code code,
                                 const kiln_node *node, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return host->status_new(code, "%s node '%.*s': %s", kiln_op_name(node->op), KILN_NAME_MAX,
                          node->name, msg);
}

bool kiln_cuda_weight_type_ok(kiln_type type) {
  switch (type) {
  case KILN_TYPE_F32: case KILN_TYPE_F16: case KILN_TYPE_BF16: case KILN_TYPE_Q4_0:
  case KILN_TYPE_Q5_0: case KILN_TYPE_Q8_0: case KILN_TYPE_Q4_K: case KILN_TYPE_Q6_K:
    return true;
  default:
    return false;
  }
}

static const char weight_types[] = "F32, F16, BF16, Q4_0, Q5_0, Q8_0, Q4_K or Q6_K";

static kiln_status type_unsupported(const kiln_host_api *host, const kiln_node *node,
                                    const char *what, const kiln_tensor *t, const char *expected) {
  return kiln_cuda_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                              "%s '%.*s' has type %s (id %d); the CUDA backends take %s there",
                              what, KILN_NAME_MAX, t->name, kiln_type_name(t->type),
                              (int)t->type, expected);
}

static kiln_status want_f32(const kiln_host_api *host, const kiln_node *node, const char *what,
                            const kiln_tensor *t) {
  if (t && t->type != KILN_TYPE_F32) return type_unsupported(host, node, what, t, "F32");
  return NULL;
}

static kiln_status want_weight(const kiln_host_api *host, const kiln_node *node,
                               const char *what, const kiln_tensor *t) {
  if (t && !kiln_cuda_weight_type_ok(t->type))
    return type_unsupported(host, node, what, t, weight_types);
  return NULL;
}

kiln_status kiln_cuda_node_supports(const kiln_host_api *host, const kiln_node *node) {
  if (!node) return host->status_new(KILN_STATUS_INVALID_ARGUMENT, "cuda: NULL node");
  const kiln_tensor *const *s = node->src;
  switch (node->op) {
  case KILN_OP_GET_ROWS:
    KILN_RETURN_IF_ERROR(want_weight(host, node, "embedding table src0", s[0]));
    if (s[1] && s[1]->type != KILN_TYPE_I32)
      return type_unsupported(host, node, "token ids src1", s[1], "I32");
    return want_f32(host, node, "dst", node->dst);
  case KILN_OP_RMS_NORM:
    KILN_RETURN_IF_ERROR(want_f32(host, node, "src0", s[0]));
    if (s[1] && s[1]->type != KILN_TYPE_F32 && s[1]->type != KILN_TYPE_F16 &&
        s[1]->type != KILN_TYPE_BF16)
      return type_unsupported(host, node, "norm weight src1", s[1], "F32, F16 or BF16");
    return want_f32(host, node, "dst", node->dst);
  case KILN_OP_MUL_MAT:
    KILN_RETURN_IF_ERROR(want_weight(host, node, "weight src0", s[0]));
    KILN_RETURN_IF_ERROR(want_f32(host, node, "src1", s[1]));
    KILN_RETURN_IF_ERROR(want_weight(host, node, "bias src2", s[2]));
    return want_f32(host, node, "dst", node->dst);
  case KILN_OP_ROPE:
    if (node->p.rope.mode != KILN_ROPE_NORM && node->p.rope.mode != KILN_ROPE_NEOX)
      return kiln_cuda_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                                  "rope mode %d is not implemented (NORM = 0 and NEOX = 2 are)",
                                  (int)node->p.rope.mode);
    KILN_RETURN_IF_ERROR(want_f32(host, node, "src0", s[0]));
    return want_f32(host, node, "dst", node->dst);
  case KILN_OP_ATTENTION:
    if (node->p.attention.head_dim > KILN_CUDA_MAX_HEAD_DIM)
      return kiln_cuda_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                                  "head_dim %d is above the attention kernel's %d",
                                  (int)node->p.attention.head_dim, KILN_CUDA_MAX_HEAD_DIM);
    /* its operands are F32 like the ops below */
    /* fall through */
  case KILN_OP_STORE_KV:
  case KILN_OP_SWIGLU:
  case KILN_OP_ADD:
    for (int i = 0; i < KILN_MAX_SRC; i++) {
      static const char *const names[KILN_MAX_SRC] = {"src0", "src1", "src2", "src3"};
      KILN_RETURN_IF_ERROR(want_f32(host, node, names[i], s[i]));
    }
    return want_f32(host, node, "dst", node->dst);
  default:
    return kiln_cuda_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                                "op id %d is not implemented by the CUDA backends",
                                (int)node->op);
  }
}

/* ---- static checks -------------------------------------------------------- */

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

static kiln_status check_dims(const kiln_host_api *host, const kiln_node *node,
                              const char *what, const kiln_tensor *t) {
  for (int i = 0; i < KILN_MAX_DIMS; i++)
    if (t->ne[i] < 1 || t->ne[i] > ((int64_t)1 << 31) - 1)
      return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                  "%s '%.*s' has ne[%d] = %lld (want 1 .. 2^31-1)", what,
                                  KILN_NAME_MAX, t->name, i, (long long)t->ne[i]);
  if (t->ne[2] != 1 || t->ne[3] != 1)
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "%s '%.*s' is [%lld, %lld, %lld, %lld]; the op takes 2-D tensors",
                                what, KILN_NAME_MAX, t->name, (long long)t->ne[0],
                                (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
  return NULL;
}

static kiln_status check_f32(const kiln_host_api *host, const kiln_node *node, const char *what,
                             const kiln_tensor *t) {
  KILN_RETURN_IF_ERROR(check_dims(host, node, what, t));
  uint64_t need = (uint64_t)t->ne[0] * (uint64_t)t->ne[1] * 4u;
  if (t->nbytes < need)
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "%s '%.*s' [%lld, %lld] F32 needs %llu bytes, nbytes is %llu",
                                what, KILN_NAME_MAX, t->name, (long long)t->ne[0],
                                (long long)t->ne[1], (unsigned long long)need,
                                (unsigned long long)t->nbytes);
  return NULL;
}

static kiln_status check_weight(const kiln_host_api *host, const kiln_node *node,
                                const char *what, const kiln_tensor *t) {
  KILN_RETURN_IF_ERROR(check_dims(host, node, what, t));
  int64_t rb = kiln_type_row_bytes(t->type, t->ne[0]);
  if (rb < 0)
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "%s '%.*s': row length %lld is not a whole number of %s blocks "
                                "of %lld values",
                                what, KILN_NAME_MAX, t->name, (long long)t->ne[0],
                                kiln_type_name(t->type), (long long)kiln_type_block_size(t->type));
  uint64_t need = (uint64_t)rb * (uint64_t)t->ne[1];
  if (t->nbytes < need)
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "%s '%.*s' [%lld, %lld] %s needs %llu bytes, nbytes is %llu",
                                what, KILN_NAME_MAX, t->name, (long long)t->ne[0],
                                (long long)t->ne[1], kiln_type_name(t->type),
                                (unsigned long long)need, (unsigned long long)t->nbytes);
  return NULL;
}

static kiln_status same_width(const kiln_host_api *host, const kiln_node *node, const char *wa,
                              const kiln_tensor *a, const char *wb, const kiln_tensor *b) {
  if (a->ne[0] != b->ne[0])
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "%s '%.*s' has width %lld but %s '%.*s' has width %lld", wa,
                                KILN_NAME_MAX, a->name, (long long)a->ne[0], wb, KILN_NAME_MAX,
                                b->name, (long long)b->ne[0]);
  return NULL;
}

static kiln_status check_get_rows(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *w = node->src[0], *ids = node->src[1], *dst = node->dst;
  KILN_RETURN_IF_ERROR(check_weight(host, node, "embedding table src0", w));
  KILN_RETURN_IF_ERROR(check_dims(host, node, "token ids src1", ids));
  if (ids->ne[1] != 1 || ids->nbytes < (uint64_t)ids->ne[0] * 4u)
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "token ids src1 '%.*s' must be I32 [capacity] (is [%lld, %lld], "
                                "%llu bytes)",
                                KILN_NAME_MAX, ids->name, (long long)ids->ne[0],
                                (long long)ids->ne[1], (unsigned long long)ids->nbytes);
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  return same_width(host, node, "dst", dst, "embedding table src0", w);
}

static kiln_status check_rms_norm(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *x = node->src[0], *w = node->src[1], *dst = node->dst;
  KILN_RETURN_IF_ERROR(check_f32(host, node, "src0", x));
  KILN_RETURN_IF_ERROR(check_weight(host, node, "norm weight src1", w));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  KILN_RETURN_IF_ERROR(same_width(host, node, "dst", dst, "src0", x));
  if (w->ne[1] != 1 || x->ne[0] % w->ne[0] != 0)
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "norm weight '%.*s' [%lld, %lld] is not a vector dividing the "
                                "row width %lld",
                                KILN_NAME_MAX, w->name, (long long)w->ne[0], (long long)w->ne[1],
                                (long long)x->ne[0]);
  float eps = node->p.rms_norm.eps;
  if (!isfinite(eps) || !(eps > 0.0f))
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "epsilon %g must be finite and positive", (double)eps);
  return NULL;
}

static kiln_status check_mul_mat(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *w = node->src[0], *x = node->src[1], *b = node->src[2], *dst = node->dst;
  KILN_RETURN_IF_ERROR(check_weight(host, node, "weight src0", w));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "src1", x));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  KILN_RETURN_IF_ERROR(same_width(host, node, "src1", x, "weight src0", w));
  if (dst->ne[0] != w->ne[1])
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "dst width %lld differs from the weight's row count %lld "
                                "(weight '%.*s' is [%lld, %lld])",
                                (long long)dst->ne[0], (long long)w->ne[1], KILN_NAME_MAX,
                                w->name, (long long)w->ne[0], (long long)w->ne[1]);
  if (b) {
    KILN_RETURN_IF_ERROR(check_weight(host, node, "bias src2", b));
    if (b->ne[0] != w->ne[1] || b->ne[1] != 1)
      return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                  "bias '%.*s' is [%lld, %lld], want [%lld]", KILN_NAME_MAX,
                                  b->name, (long long)b->ne[0], (long long)b->ne[1],
                                  (long long)w->ne[1]);
  }
  return NULL;
}

static kiln_status check_rope(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *x = node->src[0], *dst = node->dst;
  const kiln_rope_params *p = &node->p.rope;
  KILN_RETURN_IF_ERROR(check_f32(host, node, "src0", x));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  KILN_RETURN_IF_ERROR(same_width(host, node, "dst", dst, "src0", x));
  if (p->head_dim < 1 || p->n_head < 1 || p->n_rot < 2 || p->n_rot % 2 != 0 ||
      p->n_rot > p->head_dim)
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "head_dim %d, n_head %d, n_rot %d: want n_rot even, >= 2 and "
                                "<= head_dim",
                                (int)p->head_dim, (int)p->n_head, (int)p->n_rot);
  if ((int64_t)p->head_dim * p->n_head != x->ne[0])
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "head_dim %d x n_head %d differs from src0 width %lld",
                                (int)p->head_dim, (int)p->n_head, (long long)x->ne[0]);
  if (!isfinite(p->theta) || !(p->theta > 0.0f))
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "theta %g must be finite and > 0", (double)p->theta);
  return NULL;
}

static kiln_status check_store_kv(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *x = node->src[0], *cache = node->dst;
  KILN_RETURN_IF_ERROR(check_f32(host, node, "src0", x));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "KV cache dst", cache));
  return same_width(host, node, "KV cache dst", cache, "src0", x);
}

static kiln_status check_attention(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2], *dst = node->dst;
  const kiln_attention_params *p = &node->p.attention;
  KILN_RETURN_IF_ERROR(check_f32(host, node, "Q src0", q));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "K cache src1", k));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "V cache src2", v));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  if (p->head_dim < 1 || p->n_head < 1 || p->n_head_kv < 1 || p->n_head % p->n_head_kv != 0)
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "head_dim %d, n_head %d, n_head_kv %d: want all >= 1 and n_head "
                                "a multiple of n_head_kv",
                                (int)p->head_dim, (int)p->n_head, (int)p->n_head_kv);
  if ((int64_t)p->head_dim * p->n_head != q->ne[0] ||
      (int64_t)p->head_dim * p->n_head_kv != k->ne[0])
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "head_dim %d x (n_head %d, n_head_kv %d) differs from the Q "
                                "width %lld or the K cache width %lld",
                                (int)p->head_dim, (int)p->n_head, (int)p->n_head_kv,
                                (long long)q->ne[0], (long long)k->ne[0]);
  KILN_RETURN_IF_ERROR(same_width(host, node, "V cache src2", v, "K cache src1", k));
  KILN_RETURN_IF_ERROR(same_width(host, node, "dst", dst, "Q src0", q));
  if (v->ne[1] != k->ne[1])
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "K cache holds %lld positions, V cache %lld",
                                (long long)k->ne[1], (long long)v->ne[1]);
  if (!isfinite(p->scale))
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                "scale %g is not finite", (double)p->scale);
  return NULL;
}

static kiln_status check_eltwise(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *a = node->src[0], *b = node->src[1], *dst = node->dst;
  KILN_RETURN_IF_ERROR(check_f32(host, node, "src0", a));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "src1", b));
  KILN_RETURN_IF_ERROR(check_f32(host, node, "dst", dst));
  KILN_RETURN_IF_ERROR(same_width(host, node, "src1", b, "src0", a));
  return same_width(host, node, "dst", dst, "src0", a);
}

kiln_status kiln_cuda_node_check(const kiln_host_api *host, const kiln_node *node) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_supports(host, node));
  int n_src;
  bool last_optional;
  op_arity(node->op, &n_src, &last_optional);
  for (int i = 0; i < KILN_MAX_SRC; i++) {
    bool required = i < n_src - (last_optional ? 1 : 0);
    if (required && !node->src[i])
      return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node, "src%d is missing",
                                  i);
    if (i >= n_src && node->src[i])
      return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                                  "src%d is set, but %s takes %d sources", i,
                                  kiln_op_name(node->op), n_src);
  }
  if (!node->dst)
    return kiln_cuda_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node, "dst is missing");
  switch (node->op) {
  case KILN_OP_GET_ROWS: return check_get_rows(host, node);
  case KILN_OP_RMS_NORM: return check_rms_norm(host, node);
  case KILN_OP_MUL_MAT: return check_mul_mat(host, node);
  case KILN_OP_ROPE: return check_rope(host, node);
  case KILN_OP_STORE_KV: return check_store_kv(host, node);
  case KILN_OP_ATTENTION: return check_attention(host, node);
  case KILN_OP_SWIGLU:
  case KILN_OP_ADD: return check_eltwise(host, node);
  default:
    return kiln_cuda_node_error(host, KILN_STATUS_UNSUPPORTED, node, "op id %d", (int)node->op);
  }
}
