/* What the CUDA kernels of qwen35's ops support (qwen35_describe.h), for
 * the CUDA backends' supports(): types and the kernels' size limits. The
 * structural checks are backends/common's. */
#include "config.h"

#include "node_check.h"
#include "qwen35_describe.h"

static kiln_status want(const kiln_host_api *host, const kiln_node *node, const char *what, const kiln_tensor *t,
                        bool ok, const char *expected) {
  if (t && !ok)
    return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                           "%s '%.*s' has type %s (id %d); the CUDA backends take %s there", what, KILN_NAME_MAX,
                           t->name, kiln_type_name(t->type), (int)t->type, expected);
  return NULL;
}

#define F32(what, t) want(host, node, what, t, (t) && (t)->type == KILN_TYPE_F32, "F32")

kiln_status kiln_cuda_qwen35_supports(const kiln_host_api *host, const kiln_node *node) {
  const kiln_tensor *const *s = node->src;
  switch (node->op) {
  case KILN_OP_SLICE:
  case KILN_OP_SIGMOID_MUL:
    KILN_RETURN_IF_ERROR(F32("src0", s[0]));
    if (node->op == KILN_OP_SIGMOID_MUL) KILN_RETURN_IF_ERROR(F32("src1", s[1]));
    return F32("dst", node->dst);
  case KILN_OP_SSM_CONV: {
    const kiln_tensor *w = s[1];
    KILN_RETURN_IF_ERROR(want(host, node, "conv kernel src1", w,
                              w && (w->type == KILN_TYPE_F32 || w->type == KILN_TYPE_F16 || w->type == KILN_TYPE_BF16),
                              "F32, F16 or BF16"));
    if (w && (w->ne[0] < 2 || w->ne[0] > KILN_CUDA_SSM_MAX_CONV))
      return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node, "conv width %lld is outside the kernel's 2..%d",
                             (long long)w->ne[0], KILN_CUDA_SSM_MAX_CONV);
    KILN_RETURN_IF_ERROR(F32("src0", s[0]));
    KILN_RETURN_IF_ERROR(F32("conv state src2", s[2]));
    return F32("dst", node->dst);
  }
  case KILN_OP_GDN_GATE:
    KILN_RETURN_IF_ERROR(F32("alpha src0", s[0]));
    KILN_RETURN_IF_ERROR(F32("beta src1", s[1]));
    KILN_RETURN_IF_ERROR(F32("A src2", s[2]));
    KILN_RETURN_IF_ERROR(F32("time-step bias src3", s[3]));
    return F32("dst", node->dst);
  case KILN_OP_GATED_DELTA_NET: {
    const kiln_gdn_params *p = &node->p.gdn;
    if (p->head_k_dim > KILN_CUDA_GDN_MAX_DK || p->chunk > KILN_CUDA_GDN_MAX_CHUNK)
      return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                             "head_k_dim %d or chunk %d is above the kernels' %d and %d", (int)p->head_k_dim,
                             (int)p->chunk, KILN_CUDA_GDN_MAX_DK, KILN_CUDA_GDN_MAX_CHUNK);
    KILN_RETURN_IF_ERROR(F32("qkv src0", s[0]));
    KILN_RETURN_IF_ERROR(F32("gates src1", s[1]));
    KILN_RETURN_IF_ERROR(F32("state src2", s[2]));
    return F32("dst", node->dst);
  }
  case KILN_OP_ROPE:
    if (node->p.rope.mode != KILN_ROPE_IMROPE) break;
    KILN_RETURN_IF_ERROR(F32("src0", s[0]));
    return F32("dst", node->dst);
  default: break;
  }
  return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node, "op %s is not one of qwen35's",
                         kiln_op_name(node->op));
}
