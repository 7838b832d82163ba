/* ATTENTION nodes of a prefill pass (several tokens) -> flash_attention
 * descriptors (kernels/flash_attention.cu.tmpl): the node's head_dim,
 * head counts and scale (bit-exact) and the flavor's tiles. What the
 * kernel cannot hold is refused here, naming the node, so the node runner
 * keeps the one-block-per-(head, token) kernel for it. */
#include "config.h"

#include "kernel_templates.h"
#include "kiln/kv_cache.h"
#include "node_check.h"
#include "op_describe.h"

/* Why the kernel cannot take (node, shape), or NULL. */
static const char *flash_misfit(const kiln_node *node, const kiln_cuda_flash_shape *s) {
  const kiln_attention_params *p = &node->p.attention;
  for (int c = 1; c <= 2; c++)
    if (!node->src[c] || !kiln_kv_type_ok(node->src[c]->type) || node->src[c]->type != node->src[1]->type)
      return "the K and V caches must be of one [kv_cache] type (f32, f16, bf16 or q8_0)";
  if (node->src[1]->type == KILN_TYPE_Q8_0 && p->head_dim % 32 != 0)
    return "a q8_0 cache needs head_dim a multiple of 32";
  if (p->head_dim < 4 || p->head_dim > 256 || p->head_dim % 4 != 0)
    return "head_dim must be a multiple of 4 in 4..256 (rows are read as float4)";
  if (p->n_head_kv < 1 || p->n_head < 1 || p->n_head % p->n_head_kv != 0)
    return "n_head must be a multiple of n_head_kv";
  if (s->warps < 1 || s->warps > 32 || s->bq % s->warps != 0 || s->bq / s->warps < 1 ||
      s->bq / s->warps > 16)
    return "bq must be 1..16 rows for each of 1..32 warps";
  if (s->bk < 32 || s->bk > 128 || s->bk % 32 != 0) return "bk must be 32, 64, 96 or 128";
  if (s->bq / s->warps * ((p->head_dim + 31) / 32) > 64)
    return "a warp's output rows take more than 64 values a lane (fewer rows per warp, or "
           "a smaller head_dim)";
  return NULL;
}

bool kiln_cuda_flash_fits(const kiln_node *node, const kiln_cuda_flash_shape *shape) {
  return node->op == KILN_OP_ATTENTION && flash_misfit(node, shape) == NULL;
}

kiln_status kiln_cuda_flash_attention_describe(const kiln_host_api *host,
                                               kiln_kcompiler *compiler, const kiln_node *node,
                                               const kiln_cuda_flash_shape *shape,
                                               kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  if (node->op != KILN_OP_ATTENTION)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node, "op %s is not %s",
                           kiln_op_name(node->op), kiln_op_name(KILN_OP_ATTENTION));
  const kiln_attention_params *p = &node->p.attention;
  const char *why = flash_misfit(node, shape);
  if (why)
    return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                           "flash attention cannot take head_dim %d, %d/%d heads with bq %u, "
                           "bk %u, %u warps: %s",
                           (int)p->head_dim, (int)p->n_head, (int)p->n_head_kv, shape->bq,
                           shape->bk, shape->warps, why);
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_FLASH_ATTENTION, &d));
  kiln_status st = host->kdesc_set_i64(d, "head_dim", p->head_dim);
  if (!st) st = host->kdesc_set_i64(d, "n_head", p->n_head);
  if (!st) st = host->kdesc_set_i64(d, "n_head_kv", p->n_head_kv);
  if (!st) st = host->kdesc_set_f32(d, "scale", p->scale);
  if (!st) st = host->kdesc_set_i64(d, "bq", shape->bq);
  if (!st) st = host->kdesc_set_i64(d, "bk", shape->bk);
  if (!st) st = host->kdesc_set_i64(d, "warps", shape->warps);
  if (!st) st = host->kdesc_set_dtype(d, "kv_type", node->src[1]->type);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}
