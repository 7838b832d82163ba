/* GET_ROWS, ROPE, ATTENTION, STORE_KV, SWIGLU and ADD nodes -> descriptors. RoPE's
 * mode, n_rot, head_dim, n_head and θ and attention's head_dim, head
 * counts and scale are the node's own params, bit-exact. */
#include "config.h"

#include "kernel_templates.h"
#include "kiln/half.h"
#include "node_check.h"
#include "op_describe.h"

static kiln_status want_op(const kiln_host_api *host, const kiln_node *node, kiln_op a,
                           kiln_op b) {
  if (node->op != a && node->op != b)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "op %s is not %s%s%s", kiln_op_name(node->op), kiln_op_name(a),
                           a != b ? " or " : "", a != b ? kiln_op_name(b) : "");
  return NULL;
}

kiln_status kiln_cuda_get_rows_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, uint32_t block_size,
                                        kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  KILN_RETURN_IF_ERROR(want_op(host, node, KILN_OP_GET_ROWS, KILN_OP_GET_ROWS));
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, node, "block_size", block_size, 32, 1024, true));
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_GET_ROWS, &d));
  kiln_status st = host->kdesc_set_dtype(d, "w_type", node->src[0]->type);
  if (!st) st = host->kdesc_set_i64(d, "hidden", node->src[0]->ne[0]);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

kiln_status kiln_cuda_rope_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                    const kiln_node *node, uint32_t block_size,
                                    kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  KILN_RETURN_IF_ERROR(want_op(host, node, KILN_OP_ROPE, KILN_OP_ROPE));
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, node, "block_size", block_size, 32, 1024, true));
  const kiln_rope_params *p = &node->p.rope;
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_ROPE, &d));
  kiln_status st = host->kdesc_set_str(d, "mode", p->mode == KILN_ROPE_NEOX ? "NEOX" : "NORM");
  if (!st) st = host->kdesc_set_i64(d, "n_rot", p->n_rot);
  if (!st) st = host->kdesc_set_i64(d, "head_dim", p->head_dim);
  if (!st) st = host->kdesc_set_i64(d, "n_head", p->n_head);
  if (!st) st = host->kdesc_set_f32(d, "theta", p->theta);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

kiln_status kiln_cuda_rope_store_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                          const kiln_rope_params *q, const kiln_node *k,
                                          uint32_t block_size, kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, k));
  KILN_RETURN_IF_ERROR(want_op(host, k, KILN_OP_ROPE, KILN_OP_ROPE));
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, k, "block_size", block_size, 32, 1024, true));
  const kiln_rope_params *p = &k->p.rope;
  if (q->mode != p->mode || q->n_rot != p->n_rot || q->head_dim != p->head_dim ||
      kiln_f32_to_bits(q->theta) != kiln_f32_to_bits(p->theta) || q->n_head < 1)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, k,
                           "rope_store needs Q and K RoPEs that differ only in their heads");
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_ROPE_STORE, &d));
  kiln_status st = host->kdesc_set_str(d, "mode", p->mode == KILN_ROPE_NEOX ? "NEOX" : "NORM");
  if (!st) st = host->kdesc_set_i64(d, "n_rot", p->n_rot);
  if (!st) st = host->kdesc_set_i64(d, "head_dim", p->head_dim);
  if (!st) st = host->kdesc_set_f32(d, "theta", p->theta);
  if (!st) st = host->kdesc_set_i64(d, "n_head", q->n_head);
  if (!st) st = host->kdesc_set_i64(d, "n_head_kv", p->n_head);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, k, out_desc);
}

kiln_status kiln_cuda_attention_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                         const kiln_node *node, uint32_t warps,
                                         kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  KILN_RETURN_IF_ERROR(want_op(host, node, KILN_OP_ATTENTION, KILN_OP_ATTENTION));
  if (warps < 1 || warps > 32)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "warps %u is outside 1..32", warps);
  const kiln_attention_params *p = &node->p.attention;
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_ATTENTION, &d));
  kiln_status st = host->kdesc_set_i64(d, "head_dim", p->head_dim);
  if (!st) st = host->kdesc_set_i64(d, "n_head", p->n_head);
  if (!st) st = host->kdesc_set_i64(d, "n_head_kv", p->n_head_kv);
  if (!st) st = host->kdesc_set_f32(d, "scale", p->scale);
  if (!st) st = host->kdesc_set_i64(d, "warps", warps);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

kiln_status kiln_cuda_store_kv_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, uint32_t block_size,
                                        kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  KILN_RETURN_IF_ERROR(want_op(host, node, KILN_OP_STORE_KV, KILN_OP_STORE_KV));
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, node, "block_size", block_size, 32, 1024, true));
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_STORE_KV, &d));
  kiln_status st = host->kdesc_set_i64(d, "width", node->dst->ne[0]);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

kiln_status kiln_cuda_eltwise_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                       const kiln_node *node, uint32_t block_size,
                                       kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  KILN_RETURN_IF_ERROR(want_op(host, node, KILN_OP_SWIGLU, KILN_OP_ADD));
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, node, "block_size", block_size, 32, 1024, true));
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(
      compiler, node->op == KILN_OP_SWIGLU ? KILN_CUDA_T_SWIGLU : KILN_CUDA_T_ADD, &d));
  kiln_status st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}
