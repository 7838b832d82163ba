/* gemm = q16mma's run path: a MUL_MAT of several tokens whose weight mmq
 * takes (prepare_mul_mat chose it) quantizes its input columns to q16
 * (the quantize template, act_quant.cuh's layout, exactly as the decode
 * matvec_q's input) into the activations' operand buffer, once for every
 * GEMM of the same input in a pass (Q/K/V, gate/up), then runs mmq
 * (kernels/mmq.cu.tmpl) straight from the quantized weight: no tile, no
 * cuBLAS. The bias, if any, is added after it by run_mul_mat as for the
 * cuBLAS GEMMs. */
#include "config.h"

#include "cuda_backend.h"
#include "op_describe.h"

kiln_status kiln_cuda_mul_mat_mmq(kiln_cuda_backend *be, const kiln_node *node,
                                  const kiln_cuda_node_state *ns, CUdeviceptr w, CUdeviceptr x,
                                  CUdeviceptr y, int32_t n_tokens) {
  const kiln_tensor *wt = node->src[0], *xt = node->src[1];
  const int64_t k = wt->ne[0];
  const uint64_t col = kiln_cuda_xq_col_bytes(k, KILN_CUDA_QUANT_Q16);
  if (!ns->mmq.fn || !ns->mmq_input.fn || col * (uint64_t)n_tokens > be->x16_bytes ||
      ns->mmq.per_block == 0 || ns->mmq_tile_n == 0)
    return be->host->status_new(KILN_STATUS_INTERNAL,
                                "mul_mat node '%.*s': the q16 activations were not prepared",
                                KILN_NAME_MAX, node->name);
  if (!kiln_cuda_x16_holds(be, xt, n_tokens, true)) {
    CUdeviceptr dst = be->x16;
    int cols = n_tokens;
    void *args[] = {&x, &dst, &cols};
    const uint32_t per = ns->mmq_input.block; /* one warp a block of 32 values */
    be->x16_of = NULL;
    KILN_RETURN_IF_ERROR(kiln_cuda_launch(be, node, "quantize", ns->mmq_input.fn,
                                          (uint32_t)((k / 32 + per / 32 - 1) / (per / 32)),
                                          (uint32_t)n_tokens, per, args));
    kiln_cuda_x16_mark(be, xt, n_tokens, true);
  }
  CUdeviceptr xq = be->x16;
  int n_rows = (int)wt->ne[1], n_cols = n_tokens;
  void *args[] = {&w, &xq, &y, &n_rows, &n_cols};
  const uint32_t tm = ns->mmq.per_block, tn = ns->mmq_tile_n;
  return kiln_cuda_launch(be, node, "mmq", ns->mmq.fn, (uint32_t)((n_rows + tm - 1) / tm),
                          (uint32_t)((n_cols + tn - 1) / tn), ns->mmq.block, args);
}
