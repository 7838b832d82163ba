/* MUL_MAT nodes -> the FP8 GEMM's operand descriptors (gemm = fp8):
 * fp8_rows (the weight's rows to e4m3 with a scale a row) and fp8_input
 * (the activations to e4m3 with a scale a token). Both bake fp8_max, the
 * value a row's largest magnitude maps to; the scales themselves are data
 * (fp8_e4m3.cuh). */
#include "config.h"

#include "kernel_templates.h"
#include "node_check.h"
#include "op_describe.h"

/* fp8_max above e4m3's largest finite value would saturate every row's
 * largest values; zero, negative or NaN would make no scale at all. */
static kiln_status check_fp8(const kiln_host_api *host, const kiln_node *node, float fp8_max) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  if (node->op != KILN_OP_MUL_MAT)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node, "not a mul_mat");
  if (!(fp8_max > 0.0f && fp8_max <= KILN_CUDA_E4M3_MAX))
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "fp8_max %g is not in (0, 448]", (double)fp8_max);
  return NULL;
}

kiln_status kiln_cuda_fp8_rows_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, float fp8_max,
                                        uint32_t block_size, kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(check_fp8(host, node, fp8_max));
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, node, "block_size", block_size, 32, 1024, true));
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_FP8_ROWS, &d));
  kiln_status st = host->kdesc_set_dtype(d, "w_type", node->src[0]->type);
  if (!st) st = host->kdesc_set_i64(d, "k", node->src[0]->ne[0]);
  if (!st) st = host->kdesc_set_f32(d, "fp8_max", fp8_max);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

kiln_status kiln_cuda_fp8_input_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                         const kiln_node *node, float fp8_max,
                                         uint32_t block_size, kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(check_fp8(host, node, fp8_max));
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, node, "block_size", block_size, 32, 1024, true));
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_FP8_INPUT, &d));
  kiln_status st = host->kdesc_set_i64(d, "k", node->src[0]->ne[0]);
  if (!st) st = host->kdesc_set_f32(d, "fp8_max", fp8_max);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}
