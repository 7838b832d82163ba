/* The batched prefill's MUL_MAT: Y[N, T] = W[K, N]^T X[K, T] as cuBLAS
 * GEMMs in f32. An F32 weight is multiplied where it lies; any other type
 * is dequantized, a tile of rows at a time, into an f32 scratch tile
 * (dequant_rows, bit-exact to core/dequant.c) that cuBLAS then reads.
 *
 * Precision: the default gemm = f32 uses CUBLAS_COMPUTE_32F (IEEE f32
 * products and sums; no TF32), which keeps per-position logits within the
 * parity bar of the f64 reference; gemm = tf32 | bf16 ([cuda-batched],
 * [cuda-cc120]) trade that accuracy for tensor-core speed.
 *
 * cuBLAS runs in the backend's context (the device's primary context, made
 * current at every entry) and on the backend's stream, so its work is
 * ordered with the kernels'. */
#include "config.h"

#include <stdio.h>

#include "cuda_backend.h"

kiln_status kiln_cuda_blas_error(const kiln_cuda_backend *be, cublasStatus_t s, const char *call,
                                 const kiln_node *node) {
  kiln_status_code code =
      s == CUBLAS_STATUS_ALLOC_FAILED ? KILN_STATUS_NO_MEMORY : KILN_STATUS_DEVICE;
  if (node)
    return be->host->status_new(code, "%s: %s (%s) in node %.*s (%s)", call,
                                cublasGetStatusName(s), cublasGetStatusString(s), KILN_NAME_MAX,
                                node->name, kiln_op_name(node->op));
  return be->host->status_new(code, "%s: %s (%s)", call, cublasGetStatusName(s),
                              cublasGetStatusString(s));
}

#define BLAS_CHECK(be, node, call)                                            \
  do {                                                                        \
    cublasStatus_t blas_s_ = (call);                                          \
    if (blas_s_ != CUBLAS_STATUS_SUCCESS)                                     \
      return kiln_cuda_blas_error((be), blas_s_, #call, (node));              \
  } while (0)

kiln_status kiln_cuda_blas_open(kiln_cuda_backend *be) {
  BLAS_CHECK(be, NULL, cublasCreate(&be->blas));
  /* cudaStream_t and CUstream are the same type (struct CUstream_st *). */
  BLAS_CHECK(be, NULL, cublasSetStream(be->blas, be->stream));
  BLAS_CHECK(be, NULL, cublasSetMathMode(be->blas, be->gemm == KILN_CUDA_GEMM_F32
                                                       ? CUBLAS_PEDANTIC_MATH
                                                       : CUBLAS_DEFAULT_MATH));
  return NULL;
}

void kiln_cuda_blas_close(kiln_cuda_backend *be) {
  if (be->blas) cublasDestroy(be->blas);
  be->blas = NULL;
}

int64_t kiln_cuda_tile_rows(const kiln_cuda_backend *be, int64_t k, int64_t n) {
  int64_t rows = (int64_t)(be->scratch_cap / ((uint64_t)k * sizeof(float)));
  if (rows < 1) rows = 1;
  return rows < n ? rows : n;
}

kiln_status kiln_cuda_scratch_reserve(kiln_cuda_backend *be, uint64_t bytes,
                                      const kiln_node *node) {
  bool grown = false;
  return kiln_cuda_mem_reserve(be, &be->scratch, &be->scratch_bytes, bytes, node,
                               "the f32 weight tile", &grown);
}

kiln_status kiln_cuda_mul_mat_gemm(kiln_cuda_backend *be, const kiln_node *node,
                                   const kiln_cuda_node_state *ns, CUdeviceptr w, CUdeviceptr x,
                                   CUdeviceptr y, int32_t n_tokens) {
  const kiln_tensor *wt = node->src[0];
  const int64_t k = wt->ne[0], n = wt->ne[1];
  const bool direct = wt->type == KILN_TYPE_F32;
  const int64_t tile = direct ? n : kiln_cuda_tile_rows(be, k, n);
  const int64_t row_bytes = kiln_type_row_bytes(wt->type, k);
  if (!direct && (!ns->dequant.fn || (uint64_t)tile * (uint64_t)k * 4u > be->scratch_bytes))
    return be->host->status_new(KILN_STATUS_INTERNAL,
                                "mul_mat node '%.*s': the weight tile was not prepared",
                                KILN_NAME_MAX, node->name);
  cublasComputeType_t compute = be->gemm == KILN_CUDA_GEMM_TF32   ? CUBLAS_COMPUTE_32F_FAST_TF32
                                : be->gemm == KILN_CUDA_GEMM_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                                  : CUBLAS_COMPUTE_32F;
  const float one = 1.0f, zero = 0.0f;
  for (int64_t r0 = 0; r0 < n; r0 += tile) {
    int rows = (int)(n - r0 < tile ? n - r0 : tile);
    CUdeviceptr a;
    if (direct) {
      a = w + (CUdeviceptr)(r0 * k) * 4u;
    } else {
      CUdeviceptr src = w + (CUdeviceptr)(r0 * row_bytes);
      CUdeviceptr dst = be->scratch;
      void *args[] = {&src, &dst, &rows};
      long long items = (long long)rows * k / (wt->type == KILN_TYPE_F16 ||
                                                       wt->type == KILN_TYPE_BF16
                                                   ? 1
                                                   : 8);
      long long g = (items + ns->dequant.block - 1) / ns->dequant.block;
      KILN_RETURN_IF_ERROR(kiln_cuda_launch(be, node, "dequant_rows", ns->dequant.fn,
                                            (uint32_t)(g > 8192 ? 8192 : g < 1 ? 1 : g), 1,
                                            ns->dequant.block, args));
      a = be->scratch;
    }
    /* Column-major view: the tile is A (k x rows, lda = k), X is B
     * (k x T, ldb = k), Y is C (N x T, ldc = N): C[r0.., :] = A^T B. */
    BLAS_CHECK(be, node,
               cublasGemmEx(be->blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n_tokens, (int)k, &one,
                            (const void *)(uintptr_t)a, CUDA_R_32F, (int)k,
                            (const void *)(uintptr_t)x, CUDA_R_32F, (int)k, &zero,
                            (void *)(uintptr_t)(y + (CUdeviceptr)r0 * 4u), CUDA_R_32F, (int)n,
                            compute, CUBLAS_GEMM_DEFAULT));
  }
  return NULL;
}
