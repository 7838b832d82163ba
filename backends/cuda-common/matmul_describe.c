/* MUL_MAT nodes -> descriptors: the decode matvec, the prefill's
 * dequantize-to-tile kernel, and the bias. The weight type and K come from
 * the weight tensor, the bias type and length from the bias tensor. */
#include "config.h"

#include <string.h>

#include "kernel_templates.h"
#include "node_check.h"
#include "op_describe.h"

bool kiln_cuda_matvec_fuses_bias(const kiln_node *node) {
  const kiln_tensor *b = node->op == KILN_OP_MUL_MAT ? node->src[2] : NULL;
  return b && (b->type == KILN_TYPE_F32 || b->type == KILN_TYPE_F16 || b->type == KILN_TYPE_BF16);
}

kiln_status kiln_cuda_matvec_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                      const kiln_node *node, const kiln_cuda_matvec_shape *shape,
                                      kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  if (node->op != KILN_OP_MUL_MAT)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node, "not a mul_mat");
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, node, "warps", shape->warps, 1, 32, false));
  KILN_RETURN_IF_ERROR(
      kiln_cuda_describe_check_threads(host, node, "k_split", shape->k_split, 1, shape->warps, false));
  if (shape->warps % shape->k_split != 0)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "k_split %u does not divide warps %u", shape->k_split, shape->warps);
  KILN_RETURN_IF_ERROR(
      kiln_cuda_describe_check_threads(host, node, "rows_per_group", shape->rows_per_group, 1, 8, false));
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_MATVEC, &d));
  kiln_status st = host->kdesc_set_dtype(d, "w_type", node->src[0]->type);
  if (!st) st = host->kdesc_set_i64(d, "k", node->src[0]->ne[0]);
  if (!st) st = host->kdesc_set_i64(d, "warps", shape->warps);
  if (!st) st = host->kdesc_set_i64(d, "k_split", shape->k_split);
  if (!st) st = host->kdesc_set_i64(d, "rows_per_group", shape->rows_per_group);
  if (!st)
    st = host->kdesc_set_str(d, "bias",
                             kiln_cuda_matvec_fuses_bias(node) ? kiln_type_name(node->src[2]->type)
                                                               : "none");
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

/* The operand forms the prefill GEMM knows; `sixteen` asks for one in terms
 * (gemm_input's: bf16, bf16x3, tf32x3), not f32 values. */
static kiln_status check_operand(const kiln_host_api *host, const kiln_node *node,
                                 const char *operand, bool sixteen) {
  if (operand && ((!sixteen && strcmp(operand, "f32") == 0) || strcmp(operand, "bf16") == 0 ||
                  strcmp(operand, "bf16x3") == 0 || strcmp(operand, "tf32x3") == 0))
    return NULL;
  return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node, "GEMM operand %s is not %s",
                         operand ? operand : "(none)",
                         sixteen ? "bf16, bf16x3 or tf32x3" : "f32, bf16, bf16x3 or tf32x3");
}

kiln_status kiln_cuda_dequant_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                       const kiln_node *node, const char *operand,
                                       uint32_t block_size, kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  if (node->op != KILN_OP_MUL_MAT)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node, "not a mul_mat");
  KILN_RETURN_IF_ERROR(check_operand(host, node, operand, false));
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, node, "block_size", block_size, 32, 1024, true));
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_DEQUANT_ROWS, &d));
  kiln_status st = host->kdesc_set_dtype(d, "w_type", node->src[0]->type);
  if (!st) st = host->kdesc_set_i64(d, "k", node->src[0]->ne[0]);
  if (!st) st = host->kdesc_set_str(d, "operand", operand);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

kiln_status kiln_cuda_gemm_input_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                          const kiln_node *node, const char *operand,
                                          uint32_t block_size, kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  if (node->op != KILN_OP_MUL_MAT)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node, "not a mul_mat");
  KILN_RETURN_IF_ERROR(check_operand(host, node, operand, true));
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, node, "block_size", block_size, 32, 1024, true));
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_GEMM_INPUT, &d));
  kiln_status st = host->kdesc_set_i64(d, "k", node->src[0]->ne[0]);
  if (!st) st = host->kdesc_set_str(d, "operand", operand);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

kiln_status kiln_cuda_bias_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                    const kiln_node *node, uint32_t block_size,
                                    kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  if (node->op != KILN_OP_MUL_MAT || !node->src[2])
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node, "has no bias");
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, node, "block_size", block_size, 32, 1024, true));
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_BIAS_ADD, &d));
  kiln_status st = host->kdesc_set_dtype(d, "w_type", node->src[2]->type);
  if (!st) st = host->kdesc_set_i64(d, "n", node->src[2]->ne[0]);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

kiln_status kiln_cuda_kernel_get(const kiln_host_api *host, kiln_kdesc *d, const kiln_node *node,
                                 kiln_kernel **out_kernel) {
  kiln_status st = host->kcache_get(d, out_kernel);
  host->kdesc_free(d);
  return st ? host->status_annotate(st, "node %s", node->name) : NULL;
}
