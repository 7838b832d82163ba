/* Node checks of the CUDA backends: what they support (supports()) and
 * whether a node's shapes and params make sense (prepare(); the checks
 * every backend shares, backends/common/node_check.h). Kernels trust these
 * checks and the step checks of cuda_run.c, so every index a kernel
 * computes is proven in range here or there. No device is needed. */
#include "config.h"

#include "kiln/kv_cache.h"
#include "node_check.h"
#include "op_describe.h"
#include "qwen35_describe.h"

bool kiln_cuda_weight_type_ok(kiln_type type) {
  switch (type) {
  case KILN_TYPE_F32: case KILN_TYPE_F16: case KILN_TYPE_BF16: case KILN_TYPE_Q4_0:
  case KILN_TYPE_Q5_0: case KILN_TYPE_Q8_0: case KILN_TYPE_Q4_K: case KILN_TYPE_Q5_K:
  case KILN_TYPE_Q6_K:
    return true;
  default:
    return false;
  }
}

static const char weight_types[] = "F32, F16, BF16, Q4_0, Q5_0, Q8_0, Q4_K, Q5_K or Q6_K";

static kiln_status type_unsupported(const kiln_host_api *host, const kiln_node *node,
                                    const char *what, const kiln_tensor *t, const char *expected) {
  return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                         "%s '%.*s' has type %s (id %d); the CUDA backends take %s there",
                         what, KILN_NAME_MAX, t->name, kiln_type_name(t->type),
                         (int)t->type, expected);
}

static kiln_status want_f32(const kiln_host_api *host, const kiln_node *node, const char *what,
                            const kiln_tensor *t) {
  if (t && t->type != KILN_TYPE_F32) return type_unsupported(host, node, what, t, "F32");
  return NULL;
}

/* A present KV cache must be of a KV type (kiln/kv_cache.h). */
static kiln_status want_kv(const kiln_host_api *host, const kiln_node *node, const char *what,
                           const kiln_tensor *t) {
  if (t && !kiln_kv_type_ok(t->type)) return type_unsupported(host, node, what, t, "F32, F16, BF16 or Q8_0");
  return NULL;
}

static kiln_status want_weight(const kiln_host_api *host, const kiln_node *node,
                               const char *what, const kiln_tensor *t) {
  if (t && !kiln_cuda_weight_type_ok(t->type))
    return type_unsupported(host, node, what, t, weight_types);
  return NULL;
}

/* The kernels take shapes (row lengths, row and column counts) as 32-bit
 * int arguments and baked values. */
static kiln_status want_int32_dims(const kiln_host_api *host, const kiln_node *node,
                                   const char *what, const kiln_tensor *t) {
  for (int i = 0; t && i < KILN_MAX_DIMS; i++)
    if (t->ne[i] > INT32_MAX)
      return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                             "%s '%.*s' has ne[%d] = %lld; the CUDA kernels index with 32-bit "
                             "ints (at most 2^31-1)",
                             what, KILN_NAME_MAX, t->name, i, (long long)t->ne[i]);
  return NULL;
}

static kiln_status supports_types(const kiln_host_api *host, const kiln_node *node) {
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
  case KILN_OP_SLICE: case KILN_OP_SIGMOID_MUL: case KILN_OP_SSM_CONV: case KILN_OP_GDN_GATE:
  case KILN_OP_GATED_DELTA_NET:
    return kiln_cuda_qwen35_supports(host, node);
  case KILN_OP_ROPE:
    if (node->p.rope.mode == KILN_ROPE_IMROPE) return kiln_cuda_qwen35_supports(host, node);
    if (node->p.rope.mode != KILN_ROPE_NORM && node->p.rope.mode != KILN_ROPE_NEOX)
      return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                             "rope mode %d is not implemented (NORM = 0, NEOX = 2 and IMROPE = 40 are)",
                             (int)node->p.rope.mode);
    KILN_RETURN_IF_ERROR(want_f32(host, node, "src0", s[0]));
    return want_f32(host, node, "dst", node->dst);
  case KILN_OP_GET_COLUMNS:
    KILN_RETURN_IF_ERROR(want_f32(host, node, "src0", s[0]));
    if (s[1] && s[1]->type != KILN_TYPE_I32)
      return type_unsupported(host, node, "column ids src1", s[1], "I32");
    return want_f32(host, node, "dst", node->dst);
  case KILN_OP_ATTENTION:
    if (node->p.attention.head_dim > KILN_CUDA_MAX_HEAD_DIM)
      return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                             "head_dim %d is above the attention kernel's %d",
                             (int)node->p.attention.head_dim, KILN_CUDA_MAX_HEAD_DIM);
    KILN_RETURN_IF_ERROR(want_f32(host, node, "Q src0", s[0]));
    KILN_RETURN_IF_ERROR(want_kv(host, node, "K cache src1", s[1]));
    KILN_RETURN_IF_ERROR(want_kv(host, node, "V cache src2", s[2]));
    return want_f32(host, node, "dst", node->dst);
  case KILN_OP_STORE_KV:
    KILN_RETURN_IF_ERROR(want_f32(host, node, "src0", s[0]));
    return want_kv(host, node, "KV cache dst", node->dst);
  case KILN_OP_SWIGLU:
  case KILN_OP_ADD:
    for (int i = 0; i < KILN_MAX_SRC; i++) {
      static const char *const names[KILN_MAX_SRC] = {"src0", "src1", "src2", "src3"};
      KILN_RETURN_IF_ERROR(want_f32(host, node, names[i], s[i]));
    }
    return want_f32(host, node, "dst", node->dst);
  default:
    return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                           "op id %d is not implemented by the CUDA backends",
                           (int)node->op);
  }
}

kiln_status kiln_cuda_node_supports(const kiln_host_api *host, const kiln_node *node) {
  if (!node) return host->status_new(KILN_STATUS_INVALID_ARGUMENT, "cuda: NULL node");
  KILN_RETURN_IF_ERROR(supports_types(host, node));
  static const char *const names[KILN_MAX_SRC] = {"src0", "src1", "src2", "src3"};
  for (int i = 0; i < KILN_MAX_SRC; i++)
    KILN_RETURN_IF_ERROR(want_int32_dims(host, node, names[i], node->src[i]));
  return want_int32_dims(host, node, "dst", node->dst);
}

/* ---- static checks -------------------------------------------------------- */

kiln_status kiln_cuda_node_check(const kiln_host_api *host, const kiln_node *node) {
  /* What the CUDA backends run first (UNSUPPORTED), then what any node
   * must be (INVALID_ARGUMENT). supports() tolerates missing operands. */
  KILN_RETURN_IF_ERROR(kiln_cuda_node_supports(host, node));
  return kiln_node_check(host, node);
}
