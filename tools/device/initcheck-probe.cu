// Does compute-sanitizer's initcheck see the stores of cuBLAS's and
// cuBLASLt's Hopper GEMMs? (tools/device/perf-notes.md v11: every initcheck
// report of test_gpu_ops is a read of a GEMM's output right after a bf16x3
// or fp8 GEMM, none after f32, tf32 or bf16.) Run on the GPU machine with
// tools/device/initcheck-probe.sh; each stage prints its name, then a
// kernel reads every output value the stage's GEMM wrote. Under initcheck,
// reports between "stage X" and the next line belong to stage X; a stage
// whose GEMM output is reported as uninitialized while its values are
// right (the check line) is initcheck not seeing those stores.
//   f32      cublasGemmEx, f32 operands, CUBLAS_COMPUTE_32F (the control)
//   bf16k    cublasGemmEx, bf16 operands, K = 1536 (bf16x3's 3 x 512)
//   fp8      cublasLtMatmul, e4m3, outer-vector f32 scales (gemm = fp8)
//   fp8copy  fp8's output copied device to device, then read
//   bf16nvtx bf16k again into a fresh output, marked initialized through
//            NVTX's memory API (nvtxMemCudaMarkInitialized) before the read:
//            under `--nvtx true` that stage must report nothing if marking
//            is the way to tell initcheck about stores it cannot see
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExtMemCudaRt.h>

#define CK(x)                                                                      \
  do {                                                                             \
    auto e_ = (x);                                                                 \
    if ((int)e_ != 0) {                                                            \
      std::printf("%s failed: %d at line %d\n", #x, (int)e_, __LINE__);             \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

// Sums every value of y (n of them) into *out: reads all of them.
__global__ void read_all(const float *y, long long n, double *out) {
  double s = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    s += y[i];
  atomicAdd(out, s);
}

static double sum_on_device(const float *y, long long n) {
  double *d, h = 0;
  CK(cudaMalloc(&d, sizeof(double)));
  CK(cudaMemset(d, 0, sizeof(double)));
  read_all<<<64, 256>>>(y, n, d);
  CK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
  CK(cudaFree(d));
  return h;
}

int main() {
  const int M = 704, N = 16, K = 1536; // rows, tokens, K: test_gpu_ops-like
  cublasHandle_t blas;
  cublasLtHandle_t lt;
  CK(cublasCreate(&blas));
  CK(cublasLtCreate(&lt));
  const float one = 1.0f, zero = 0.0f;

  // f32 operands of ones: every output is K
  float *a32, *b32, *y;
  CK(cudaMalloc(&a32, sizeof(float) * K * M));
  CK(cudaMalloc(&b32, sizeof(float) * K * N));
  CK(cudaMalloc(&y, sizeof(float) * M * N));
  std::vector<float> ones((size_t)K * M, 1.0f);
  CK(cudaMemcpy(a32, ones.data(), sizeof(float) * K * M, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b32, ones.data(), sizeof(float) * K * N, cudaMemcpyHostToDevice));

  std::printf("stage f32\n");
  std::fflush(stdout);
  CK(cublasSetMathMode(blas, CUBLAS_PEDANTIC_MATH));
  CK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &one, a32, CUDA_R_32F, K, b32,
                  CUDA_R_32F, K, &zero, y, CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  std::printf("check f32: sum %.0f, want %.0f\n", sum_on_device(y, (long long)M * N),
              (double)K * M * N);

  // bf16 operands of ones, a fresh output
  __nv_bfloat16 *a16, *b16;
  float *y2;
  CK(cudaMalloc(&a16, sizeof(__nv_bfloat16) * K * M));
  CK(cudaMalloc(&b16, sizeof(__nv_bfloat16) * K * N));
  CK(cudaMalloc(&y2, sizeof(float) * M * N));
  std::vector<__nv_bfloat16> ones16((size_t)K * M, __float2bfloat16(1.0f));
  CK(cudaMemcpy(a16, ones16.data(), sizeof(__nv_bfloat16) * K * M, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b16, ones16.data(), sizeof(__nv_bfloat16) * K * N, cudaMemcpyHostToDevice));
  std::printf("stage bf16k\n");
  std::fflush(stdout);
  CK(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));
  CK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &one, a16, CUDA_R_16BF, K, b16,
                  CUDA_R_16BF, K, &zero, y2, CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  std::printf("check bf16k: sum %.0f, want %.0f\n", sum_on_device(y2, (long long)M * N),
              (double)K * M * N);

  // e4m3 ones with scale vectors of ones (cuda_gemm_fp8.c's layout)
  unsigned char *a8, *b8;
  float *sa, *sb, *y3, *y4;
  CK(cudaMalloc(&a8, (size_t)K * M));
  CK(cudaMalloc(&b8, (size_t)K * N));
  CK(cudaMalloc(&sa, sizeof(float) * M));
  CK(cudaMalloc(&sb, sizeof(float) * N));
  CK(cudaMalloc(&y3, sizeof(float) * M * N));
  CK(cudaMalloc(&y4, sizeof(float) * M * N));
  CK(cudaMemset(a8, 0x38, (size_t)K * M)); // 0x38: e4m3 1.0
  CK(cudaMemset(b8, 0x38, (size_t)K * N));
  CK(cudaMemcpy(sa, ones.data(), sizeof(float) * M, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(sb, ones.data(), sizeof(float) * N, cudaMemcpyHostToDevice));
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, ld;
  CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const int32_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &vec, sizeof vec));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &vec, sizeof vec));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, M, K));
  CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, N, K));
  CK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, M, N, M));
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws_bytes = (size_t)32 << 20;
  void *ws;
  CK(cudaMalloc(&ws, ws_bytes));
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                          sizeof ws_bytes));
  cublasLtMatmulHeuristicResult_t h;
  int found = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &h, &found));
  if (found < 1) {
    std::printf("fp8: no algorithm\n");
    return 1;
  }
  std::printf("stage fp8\n");
  std::fflush(stdout);
  CK(cublasLtMatmul(lt, op, &one, a8, la, b8, lb, &zero, y3, ld, y3, ld, &h.algo, ws, ws_bytes, 0));
  std::printf("check fp8: sum %.0f, want %.0f\n", sum_on_device(y3, (long long)M * N),
              (double)K * M * N);
  std::printf("stage fp8copy\n");
  std::fflush(stdout);
  CK(cudaMemcpy(y4, y3, sizeof(float) * M * N, cudaMemcpyDeviceToDevice));
  std::printf("check fp8copy: sum %.0f, want %.0f\n", sum_on_device(y4, (long long)M * N),
              (double)K * M * N);
  // bf16k again, its fresh output marked initialized before it is read
  float *y5;
  CK(cudaMalloc(&y5, sizeof(float) * M * N));
  std::printf("stage bf16nvtx\n");
  std::fflush(stdout);
  CK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &one, a16, CUDA_R_16BF, K, b16,
                  CUDA_R_16BF, K, &zero, y5, CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  nvtxDomainHandle_t dom = nvtxDomainCreateA("initcheck-probe");
  nvtxMemVirtualRangeDesc_t range = {sizeof(float) * M * N, y5};
  nvtxMemMarkInitializedBatch_t mark = {NVTX_EXT_COMPATID_MEM, sizeof mark,
                                        NVTX_MEM_TYPE_VIRTUAL_ADDRESS, 1, sizeof range, &range};
  nvtxMemCudaMarkInitialized(dom, 0, 0, &mark);
  std::printf("check bf16nvtx: sum %.0f, want %.0f\n", sum_on_device(y5, (long long)M * N),
              (double)K * M * N);
  std::printf("stage end\n");
  return 0;
}
