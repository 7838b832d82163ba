/* GET_ROWS, ROPE, ATTENTION (both kernels: one block per head, and the
 * split-KV decode pair), STORE_KV, SWIGLU and ADD nodes -> descriptors.
 * RoPE's mode, n_rot, head_dim, n_head and θ and attention's head_dim,
 * head counts and scale are the node's own params, bit-exact; attention's
 * and store_kv's kv_type is the cache tensors' own type. */
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
                                          kiln_type kv_type, uint32_t block_size,
                                          kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, k));
  KILN_RETURN_IF_ERROR(want_op(host, k, KILN_OP_ROPE, KILN_OP_ROPE));
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, k, "block_size", block_size, 32, 1024, true));
  const kiln_rope_params *p = &k->p.rope;
  if (q->mode != p->mode || q->n_rot != p->n_rot || q->head_dim != p->head_dim ||
      kiln_f32_to_bits(q->theta) != kiln_f32_to_bits(p->theta) || q->n_head < 1)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, k,
                           "rope_store needs Q and K RoPEs that differ only in their heads");
  if (kv_type != KILN_TYPE_F32 && kv_type != KILN_TYPE_F16 && kv_type != KILN_TYPE_BF16)
    return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, k,
                           "rope_store writes F32, F16 or BF16 caches, not %s (store_kv quantizes "
                           "Q8_0 blocks)",
                           kiln_type_name(kv_type));
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_ROPE_STORE, &d));
  kiln_status st = host->kdesc_set_str(d, "mode", p->mode == KILN_ROPE_NEOX ? "NEOX" : "NORM");
  if (!st) st = host->kdesc_set_i64(d, "n_rot", p->n_rot);
  if (!st) st = host->kdesc_set_i64(d, "head_dim", p->head_dim);
  if (!st) st = host->kdesc_set_f32(d, "theta", p->theta);
  if (!st) st = host->kdesc_set_i64(d, "n_head", q->n_head);
  if (!st) st = host->kdesc_set_i64(d, "n_head_kv", p->n_head);
  if (!st) st = host->kdesc_set_dtype(d, "kv_type", kv_type);
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
  if (!st) st = host->kdesc_set_dtype(d, "kv_type", node->src[1]->type);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

bool kiln_cuda_attention_split_fits(const kiln_node *node) {
  const kiln_attention_params *p = &node->p.attention;
  if (p->n_head_kv < 1 || p->n_head % p->n_head_kv != 0 || p->head_dim < 1) return false;
  const int64_t group = p->n_head / p->n_head_kv, per_lane = (p->head_dim + 31) / 32;
  return group <= 16 && group * per_lane <= 64;
}

uint32_t kiln_cuda_attention_splits_auto(int sm_count, int64_t n_ctx, int64_t n_head_kv,
                                         uint32_t warps) {
  const int64_t sm = sm_count > 0 ? sm_count : 1, kv = n_head_kv > 0 ? n_head_kv : 1;
  (void)warps; /* a split's keys go in tiles of 32 whatever the block's warps */
  int64_t n = (2 * sm + kv - 1) / kv;
  const int64_t useful = (n_ctx + 31) / 32;
  if (n > useful) n = useful;
  return n < 1 ? 1u : n > KILN_CUDA_MAX_ATTN_SPLITS ? KILN_CUDA_MAX_ATTN_SPLITS : (uint32_t)n;
}

uint64_t kiln_cuda_attention_part_bytes(const kiln_node *node, uint32_t n_split) {
  const kiln_attention_params *p = &node->p.attention;
  return (uint64_t)p->n_head * n_split * ((uint64_t)p->head_dim + 2) * sizeof(float);
}

/* What every split decode attention (attention_split, attention_mma)
 * checks first: the node, warps up to max_warps, n_split. */
static kiln_status attention_grid_check(const kiln_host_api *host, const kiln_node *node,
                                        uint32_t warps, uint32_t max_warps, uint32_t n_split) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  KILN_RETURN_IF_ERROR(want_op(host, node, KILN_OP_ATTENTION, KILN_OP_ATTENTION));
  KILN_RETURN_IF_ERROR(
      kiln_cuda_describe_check_threads(host, node, "warps", warps, 1, max_warps, false));
  return kiln_cuda_describe_check_threads(host, node, "n_split", n_split, 1,
                                          KILN_CUDA_MAX_ATTN_SPLITS, false);
}

/* What both halves of the split kernel check: the node, warps, n_split. */
static kiln_status attention_split_check(const kiln_host_api *host, const kiln_node *node,
                                         uint32_t warps, uint32_t n_split) {
  KILN_RETURN_IF_ERROR(attention_grid_check(host, node, warps, 32, n_split));
  const kiln_attention_params *p = &node->p.attention;
  if (!kiln_cuda_attention_split_fits(node))
    return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                           "split decode attention holds at most 16 query heads per KV head "
                           "and 64 of their values per lane; n_head %d / n_head_kv %d with "
                           "head_dim %d needs %d heads and %d values",
                           (int)p->n_head, (int)p->n_head_kv, (int)p->head_dim,
                           (int)(p->n_head / p->n_head_kv),
                           (int)(p->n_head / p->n_head_kv * ((p->head_dim + 31) / 32)));
  return NULL;
}

bool kiln_cuda_attention_fused_merge_fits(const kiln_node *node, uint32_t n_split) {
  if (node->op != KILN_OP_ATTENTION || !kiln_cuda_attention_split_fits(node)) return false;
  const kiln_attention_params *p = &node->p.attention;
  return p->head_dim % 32 == 0 && (int64_t)(p->n_head / p->n_head_kv) * n_split <= 256;
}

kiln_status kiln_cuda_attention_split_describe(const kiln_host_api *host,
                                               kiln_kcompiler *compiler, const kiln_node *node,
                                               uint32_t warps, uint32_t n_split, bool merge,
                                               kiln_cuda_quant quant, kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(attention_split_check(host, node, warps, n_split));
  const kiln_attention_params *p = &node->p.attention;
  if (merge && !kiln_cuda_attention_fused_merge_fits(node, n_split))
    return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                           "attention_split merges in its last block only head_dim a multiple "
                           "of 32 and at most 256 records a KV head; head_dim %d, %d heads a "
                           "KV head, %u splits",
                           (int)p->head_dim, (int)(p->n_head / p->n_head_kv), n_split);
  if (quant != KILN_CUDA_QUANT_NONE && !merge)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "attention_split writes y (and so quantizes it) only with merge");
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_ATTENTION_SPLIT, &d));
  kiln_status st = host->kdesc_set_i64(d, "head_dim", p->head_dim);
  if (!st) st = host->kdesc_set_i64(d, "n_head", p->n_head);
  if (!st) st = host->kdesc_set_i64(d, "n_head_kv", p->n_head_kv);
  if (!st) st = host->kdesc_set_f32(d, "scale", p->scale);
  if (!st) st = host->kdesc_set_i64(d, "warps", warps);
  if (!st) st = host->kdesc_set_i64(d, "n_split", n_split);
  if (!st) st = host->kdesc_set_dtype(d, "kv_type", node->src[1]->type);
  if (!st) st = host->kdesc_set_i64(d, "merge", merge ? 1 : 0);
  if (!st) st = host->kdesc_set_str(d, "quant", kiln_cuda_quant_name(quant));
  if (!st) st = host->kdesc_set_i64(d, "k", (int64_t)p->head_dim * p->n_head);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

bool kiln_cuda_attention_mma_fits(const kiln_node *node) {
  if (node->op != KILN_OP_ATTENTION || !node->src[1]) return false;
  const kiln_attention_params *p = &node->p.attention;
  const kiln_type t = node->src[1]->type;
  return (t == KILN_TYPE_F16 || t == KILN_TYPE_BF16) && node->src[2] && node->src[2]->type == t &&
         p->n_head_kv >= 1 && p->n_head % p->n_head_kv == 0 && p->n_head / p->n_head_kv <= 16 &&
         p->head_dim >= 16 && p->head_dim <= 128 && p->head_dim % 16 == 0;
}

uint32_t kiln_cuda_attention_mma_smem(int64_t hd, uint32_t warps) {
  return (uint32_t)(warps * 4u * 16u * (uint64_t)(hd + 8));
}

kiln_status kiln_cuda_attention_mma_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                             const kiln_node *node, uint32_t warps,
                                             uint32_t n_split, kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(attention_grid_check(host, node, warps, 16, n_split));
  const kiln_attention_params *p = &node->p.attention;
  if (!kiln_cuda_attention_mma_fits(node))
    return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                           "tensor-core decode attention takes an F16 or BF16 KV cache, head_dim "
                           "a multiple of 16 up to 128 and at most 16 query heads a KV head; "
                           "%s cache, head_dim %d, %d / %d heads",
                           kiln_type_name(node->src[1]->type), (int)p->head_dim, (int)p->n_head,
                           (int)p->n_head_kv);
  if (kiln_cuda_attention_mma_smem(p->head_dim, warps) > 48u * 1024u)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "attention_mma with %u warps needs %u bytes of shared memory a block at "
                           "head_dim %d; at most 48 KiB",
                           warps, kiln_cuda_attention_mma_smem(p->head_dim, warps), (int)p->head_dim);
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_ATTENTION_MMA, &d));
  kiln_status st = host->kdesc_set_i64(d, "head_dim", p->head_dim);
  if (!st) st = host->kdesc_set_i64(d, "n_head", p->n_head);
  if (!st) st = host->kdesc_set_i64(d, "n_head_kv", p->n_head_kv);
  if (!st) st = host->kdesc_set_f32(d, "scale", p->scale);
  if (!st) st = host->kdesc_set_i64(d, "warps", warps);
  if (!st) st = host->kdesc_set_i64(d, "n_split", n_split);
  if (!st) st = host->kdesc_set_str(d, "mma_type", node->src[1]->type == KILN_TYPE_F16 ? "f16" : "bf16");
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

bool kiln_cuda_merge_quant_fits(const kiln_node *node) {
  return node->op == KILN_OP_ATTENTION && node->p.attention.head_dim > 0 &&
         node->p.attention.head_dim % 32 == 0;
}

kiln_status kiln_cuda_attention_merge_describe(const kiln_host_api *host,
                                               kiln_kcompiler *compiler, const kiln_node *node,
                                               uint32_t warps, uint32_t n_split,
                                               kiln_cuda_quant quant, kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(attention_split_check(host, node, warps, n_split));
  if (quant != KILN_CUDA_QUANT_NONE && !kiln_cuda_merge_quant_fits(node))
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "attention_merge quantizes whole blocks of 32 values; head_dim %d is "
                           "not a multiple of 32",
                           (int)node->p.attention.head_dim);
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_ATTENTION_MERGE, &d));
  kiln_status st = host->kdesc_set_i64(d, "head_dim", node->p.attention.head_dim);
  if (!st) st = host->kdesc_set_i64(d, "n_split", n_split);
  if (!st) st = host->kdesc_set_i64(d, "warps", warps);
  if (!st) st = host->kdesc_set_str(d, "quant", kiln_cuda_quant_name(quant));
  if (!st)
    st = host->kdesc_set_i64(d, "k", (int64_t)node->p.attention.head_dim * node->p.attention.n_head);
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
  if (!st) st = host->kdesc_set_dtype(d, "kv_type", node->dst->type);
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
