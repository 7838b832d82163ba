/* qwen35's nodes -> kernel descriptors (qwen35_describe.h). Every baked
 * value is the node's own: shapes from its tensors, the head layout, ε,
 * the scale, the chunk and the rotary sections and θ from its params,
 * bit-exact. */
#include "config.h"

#include "kernel_templates.h"
#include "node_check.h"
#include "op_describe.h"
#include "qwen35_describe.h"

static kiln_status want_op(const kiln_host_api *host, const kiln_node *node, kiln_op op) {
  if (node->op != op)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node, "op %s is not %s", kiln_op_name(node->op),
                           kiln_op_name(op));
  return NULL;
}

/* The node is op's and valid, block_size a launchable multiple of 32, and
 * a descriptor of template `name` is made. */
static kiln_status start(const kiln_host_api *host, kiln_kcompiler *compiler, const kiln_node *node, kiln_op op,
                         uint32_t block_size, const char *name, kiln_kdesc **out) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  KILN_RETURN_IF_ERROR(want_op(host, node, op));
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, node, "block_size", block_size, 32, 1024, true));
  return host->kdesc_new(compiler, name, out);
}

kiln_status kiln_cuda_slice_describe(const kiln_host_api *host, kiln_kcompiler *compiler, const kiln_node *node,
                                     uint32_t block_size, kiln_kdesc **out_desc) {
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(start(host, compiler, node, KILN_OP_SLICE, block_size, KILN_CUDA_T_SLICE, &d));
  const kiln_slice_params *p = &node->p.slice;
  kiln_status st = host->kdesc_set_i64(d, "width", node->src[0]->ne[0]);
  if (!st) st = host->kdesc_set_i64(d, "offset", p->offset);
  if (!st) st = host->kdesc_set_i64(d, "length", p->length);
  if (!st) st = host->kdesc_set_i64(d, "stride", p->stride);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

kiln_status kiln_cuda_sigmoid_mul_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                           const kiln_node *node, uint32_t block_size, kiln_kdesc **out_desc) {
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(start(host, compiler, node, KILN_OP_SIGMOID_MUL, block_size, KILN_CUDA_T_SIGMOID_MUL, &d));
  kiln_status st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

kiln_status kiln_cuda_ssm_conv_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, uint32_t block_size, kiln_kdesc **out_desc) {
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(start(host, compiler, node, KILN_OP_SSM_CONV, block_size, KILN_CUDA_T_SSM_CONV, &d));
  kiln_status st = host->kdesc_set_i64(d, "channels", node->src[0]->ne[0]);
  if (!st) st = host->kdesc_set_i64(d, "d_conv", node->src[1]->ne[0]);
  if (!st) st = host->kdesc_set_dtype(d, "w_type", node->src[1]->type);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

kiln_status kiln_cuda_gdn_gate_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, uint32_t block_size, kiln_kdesc **out_desc) {
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(start(host, compiler, node, KILN_OP_GDN_GATE, block_size, KILN_CUDA_T_GDN_GATE, &d));
  kiln_status st = host->kdesc_set_i64(d, "n_heads", node->src[0]->ne[0]);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

/* The values both delta-rule templates bake. */
static kiln_status set_gdn(const kiln_host_api *host, kiln_kdesc *d, const kiln_gdn_params *p) {
  kiln_status st = host->kdesc_set_i64(d, "n_k_heads", p->n_k_heads);
  if (!st) st = host->kdesc_set_i64(d, "n_v_heads", p->n_v_heads);
  if (!st) st = host->kdesc_set_i64(d, "head_k_dim", p->head_k_dim);
  if (!st) st = host->kdesc_set_i64(d, "head_v_dim", p->head_v_dim);
  if (!st) st = host->kdesc_set_f32(d, "l2_eps", p->l2_eps);
  if (!st) st = host->kdesc_set_f32(d, "q_scale", p->q_scale);
  return st;
}

kiln_status kiln_cuda_gdn_recurrent_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                             const kiln_node *node, uint32_t warps, kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, node, "warps", warps, 1, 32, false));
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(start(host, compiler, node, KILN_OP_GATED_DELTA_NET, 32 * warps, KILN_CUDA_T_GDN_RECURRENT, &d));
  kiln_status st = set_gdn(host, d, &node->p.gdn);
  if (!st) st = host->kdesc_set_i64(d, "warps", warps);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

kiln_status kiln_cuda_gdn_chunked_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                           const kiln_node *node, uint32_t block_size, kiln_kdesc **out_desc,
                                           uint32_t *out_cols) {
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(start(host, compiler, node, KILN_OP_GATED_DELTA_NET, block_size, KILN_CUDA_T_GDN_CHUNKED, &d));
  const kiln_gdn_params *p = &node->p.gdn;
  /* The state tile is head_k_dim x cols floats in at most 16 KiB. */
  uint32_t cols = 4096 / (uint32_t)p->head_k_dim;
  if (cols > 32) cols = 32;
  if (cols > (uint32_t)p->head_v_dim) cols = (uint32_t)p->head_v_dim;
  kiln_status st = set_gdn(host, d, p);
  if (!st) st = host->kdesc_set_i64(d, "chunk", p->chunk);
  if (!st) st = host->kdesc_set_i64(d, "cols", cols);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  if (!st && out_cols) *out_cols = cols;
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

kiln_status kiln_cuda_rope_imrope_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                           const kiln_node *node, uint32_t block_size, kiln_kdesc **out_desc) {
  const kiln_rope_params *p = &node->p.rope;
  if (node->op == KILN_OP_ROPE && p->mode != KILN_ROPE_IMROPE)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node, "rope mode %d is not IMROPE", (int)p->mode);
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(start(host, compiler, node, KILN_OP_ROPE, block_size, KILN_CUDA_T_ROPE_IMROPE, &d));
  kiln_status st = host->kdesc_set_i64(d, "n_rot", p->n_rot);
  if (!st) st = host->kdesc_set_i64(d, "head_dim", p->head_dim);
  if (!st) st = host->kdesc_set_i64(d, "n_head", p->n_head);
  if (!st) st = host->kdesc_set_f32(d, "theta", p->theta);
  if (!st) st = host->kdesc_set_i64(d, "sect_t", p->sections[0]);
  if (!st) st = host->kdesc_set_i64(d, "sect_h", p->sections[1]);
  if (!st) st = host->kdesc_set_i64(d, "sect_w", p->sections[2]);
  if (!st) st = host->kdesc_set_i64(d, "sect_e", p->sections[3]);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}
