/* The batched prefill's MUL_MAT: Y[N, T] = W[K, N]^T X[K, T] as cuBLAS
 * GEMMs with f32 outputs and f32 sums. The weight is dequantized, a tile
 * of rows at a time, into a scratch tile (dequant_rows, bit-exact to
 * core/dequant.c before it takes the operand form) that cuBLAS then reads;
 * an F32 weight is multiplied where it lies in the f32 modes.
 *
 * Precision ([cuda-batched], [cuda-cc120] gemm): f32 (CUBLAS_COMPUTE_32F,
 * pedantic: IEEE f32 products and sums, no TF32) and tf32 (the same f32
 * tiles, CUBLAS_COMPUTE_32F_FAST_TF32) read f32 operands; bf16 and bf16x3
 * read 16-bit ones (gemm_operand.cuh): the activations are converted once
 * per node (gemm_input), the tile holds bf16 values, or for bf16x3 each
 * value as a hi and a lo bf16 term in a GEMM of 3 K terms, whose products
 * the tensor cores sum exactly in f32 (about 5e-6 relative to the f64
 * product, against 4e-4 for tf32 and 3e-3 for bf16, on random rows).
 *
 * gemm = q16mma sends the nodes whose weight mmq takes to cuda_mmq.c
 * (no tile, no cuBLAS) and the rest through bf16x3 here.
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
  return be->gemm == KILN_CUDA_GEMM_FP8 ? kiln_cuda_fp8_open(be) : NULL;
}

void kiln_cuda_blas_close(kiln_cuda_backend *be) {
  kiln_cuda_fp8_close(be);
  if (be->blas) cublasDestroy(be->blas);
  be->blas = NULL;
}

uint64_t kiln_cuda_tile_row_bytes(kiln_cuda_gemm_mode g, int64_t k) {
  const unsigned terms = kiln_cuda_gemm_terms(g);
  /* fp8: K rounded up to 16 e4m3 bytes and the row's f32 scale (fp8_rows) */
  if (g == KILN_CUDA_GEMM_FP8) return (uint64_t)(k + 15) / 16 * 16 + 4u;
  return (uint64_t)k * (terms ? kiln_cuda_gemm_term_bytes(g) * terms : 4u);
}

int64_t kiln_cuda_tile_rows(const kiln_cuda_backend *be, kiln_cuda_gemm_mode g, int64_t k,
                            int64_t n) {
  int64_t rows = (int64_t)(be->scratch_cap / kiln_cuda_tile_row_bytes(g, k));
  if (rows >= n) return n;
  /* Whole multiples of 128 rows: each tile's output then starts 512-byte
   * aligned, where cuBLAS takes its fast kernels (H100, 2026-12-07: bf16x3
   * pp512 2.4k tok/s with 12483-row tiles, 6.8k with 3120) */
  if (rows >= 128) rows -= rows % 128;
  return rows < 1 ? 1 : rows;
}

kiln_status kiln_cuda_scratch_reserve(kiln_cuda_backend *be, uint64_t bytes,
                                      const kiln_node *node) {
  bool grown = false;
  return kiln_cuda_mem_reserve(be, &be->scratch, &be->scratch_bytes, bytes, node,
                               "the GEMM's weight tile", &grown);
}

kiln_status kiln_cuda_x16_reserve(kiln_cuda_backend *be, uint64_t bytes, const kiln_node *node) {
  bool grown = false;
  kiln_status st = kiln_cuda_mem_reserve(be, &be->x16, &be->x16_bytes, bytes, node,
                                         "the GEMM's 16-bit activations", &grown);
  if (grown) be->x16_of = NULL;
  return st;
}

bool kiln_cuda_x16_holds(const kiln_cuda_backend *be, const kiln_tensor *x, int32_t cols, bool q16) {
  return be->x16_of == x && be->x16_q16 == q16 && be->x16_pass == be->pass && be->x16_cols == cols;
}

void kiln_cuda_x16_mark(kiln_cuda_backend *be, const kiln_tensor *x, int32_t cols, bool q16) {
  be->x16_of = x;
  be->x16_q16 = q16;
  be->x16_pass = be->pass;
  be->x16_cols = cols;
}

kiln_status kiln_cuda_mul_mat_gemm(kiln_cuda_backend *be, const kiln_node *node,
                                   const kiln_cuda_node_state *ns, CUdeviceptr w, CUdeviceptr x,
                                   CUdeviceptr y, int32_t n_tokens) {
  /* The GEMM prepare() chose for this node (kiln_cuda_gemm_of_node), the
   * one describe_modes counts: run takes no decision of its own. */
  if (!ns->gemm_batched)
    return be->host->status_new(KILN_STATUS_INTERNAL,
                                "mul_mat node '%.*s': no GEMM was prepared (one token's capacity)",
                                KILN_NAME_MAX, node->name);
  if (ns->gemm == KILN_CUDA_GEMM_FP8) return kiln_cuda_mul_mat_fp8(be, node, ns, w, x, y, n_tokens);
  if (ns->gemm == KILN_CUDA_GEMM_Q16MMA) return kiln_cuda_mul_mat_mmq(be, node, ns, w, x, y, n_tokens);
  const kiln_tensor *wt = node->src[0];
  const int64_t k = wt->ne[0], n = wt->ne[1];
  const unsigned terms = kiln_cuda_gemm_terms(ns->gemm);
  /* An F32 weight is multiplied where it lies, unless the mode wants bf16 terms. */
  const bool direct = wt->type == KILN_TYPE_F32 && terms == 0;
  const int64_t tile = direct ? n : kiln_cuda_tile_rows(be, ns->gemm, k, n);
  const int64_t row_bytes = kiln_type_row_bytes(wt->type, k);
  const int64_t kk = terms ? (int64_t)terms * k : k; /* the GEMM's K */
  if (!direct && (!ns->dequant.fn || (uint64_t)tile * kiln_cuda_tile_row_bytes(ns->gemm, k) >
                                         be->scratch_bytes))
    return be->host->status_new(KILN_STATUS_INTERNAL,
                                "mul_mat node '%.*s': the weight tile was not prepared",
                                KILN_NAME_MAX, node->name);
  const unsigned term_bytes = kiln_cuda_gemm_term_bytes(ns->gemm);
  if (terms && (!ns->gemm_input.fn ||
                (uint64_t)kk * (uint64_t)n_tokens * term_bytes > be->x16_bytes || kk > INT32_MAX))
    return be->host->status_new(KILN_STATUS_INTERNAL,
                                "mul_mat node '%.*s': the activations' term operand was not prepared",
                                KILN_NAME_MAX, node->name);
  /* tf32x3's terms are TF32 values already (gemm_operand.cuh): the fast
   * TF32 compute type multiplies them exactly */
  const bool tf32 = ns->gemm == KILN_CUDA_GEMM_TF32 || ns->gemm == KILN_CUDA_GEMM_TF32X3;
  cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cudaDataType_t in_type = terms && term_bytes == 2 ? CUDA_R_16BF : CUDA_R_32F;
  CUdeviceptr b = x;
  if (terms) { /* the activations' operand, once for every tile (and the next GEMM of x) */
    const kiln_tensor *xt = node->src[1];
    if (!kiln_cuda_x16_holds(be, xt, n_tokens, false)) {
      CUdeviceptr dst = be->x16;
      int cols = n_tokens;
      void *args[] = {&x, &dst, &cols};
      be->x16_of = NULL;
      KILN_RETURN_IF_ERROR(kiln_cuda_launch(be, node, "gemm_input", ns->gemm_input.fn,
                                            kiln_cuda_stride_grid((long long)k * n_tokens,
                                                                  ns->gemm_input.block),
                                            1, ns->gemm_input.block, args));
      kiln_cuda_x16_mark(be, xt, n_tokens, false);
    }
    b = be->x16;
  }
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
      long long items = (long long)rows * k / (kiln_type_block_size(wt->type) > 1 ? 8 : 1);
      long long g = (items + ns->dequant.block - 1) / ns->dequant.block;
      KILN_RETURN_IF_ERROR(kiln_cuda_launch(be, node, "dequant_rows", ns->dequant.fn,
                                            (uint32_t)(g > 8192 ? 8192 : g < 1 ? 1 : g), 1,
                                            ns->dequant.block, args));
      a = be->scratch;
    }
    /* Column-major view: the tile is A (kk x rows, lda = kk), the
     * activations B (kk x T, ldb = kk), Y is C (N x T, ldc = N):
     * C[r0.., :] = A^T B. With bf16x3 each of A's rows is [hi | lo | hi]
     * and each of B's columns [hi ; hi ; lo] (gemm_operand.cuh). */
    BLAS_CHECK(be, node,
               cublasGemmEx(be->blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n_tokens, (int)kk, &one,
                            (const void *)(uintptr_t)a, in_type, (int)kk,
                            (const void *)(uintptr_t)b, in_type, (int)kk, &zero,
                            (void *)(uintptr_t)(y + (CUdeviceptr)r0 * 4u), CUDA_R_32F, (int)n,
                            compute, CUBLAS_GEMM_DEFAULT));
    /* rows x T outputs, a column every n values: for compute-sanitizer */
    kiln_cuda_mark_written(be, y + (CUdeviceptr)r0 * 4u, (size_t)rows * 4u, (size_t)n * 4u,
                           n_tokens);
  }
  return NULL;
}
