/* What compute-sanitizer's initcheck cannot see for itself, told to it
 * (cuda_backend.h, kiln_cuda_mark_written).
 *
 * tools/device/initcheck-probe.cu, on an H200 (2026-12-07): after a
 * cuBLAS GEMM of bf16 operands and a cuBLASLt GEMM of FP8 operands,
 * initcheck reported every read of their outputs as a read of
 * uninitialized memory, and a device-to-device copy of the FP8 output as
 * a host API access to it, while each output summed to exactly what it
 * must (an f32 GEMM, the control, drew no report): the stores of those
 * Hopper kernels are invisible to the tool, so test_gpu_ops' 162668
 * initcheck reports (all in kiln_bias_add after a bf16x3 or fp8 GEMM)
 * said nothing about kiln. The same probe's output marked initialized
 * through NVTX's memory API (NVIDIA, "NVTX API for Compute Sanitizer":
 * nvtxMemCudaMarkInitialized, in stream order) drew none.
 *
 * So after each cuBLAS or cuBLASLt GEMM the backend marks the rows it
 * wrote. NVTX is header-only: without a tool attached (compute-sanitizer
 * --nvtx true attaches one) a call returns at once; built without the
 * header (a toolkit older than NVTX 3's memory API) nothing is marked
 * and initcheck is as blind as before. */
#include "config.h"

#include "cuda_backend.h"

#ifdef HAVE_NVTX3_NVTOOLSEXTMEMCUDART_H
#include <nvtx3/nvToolsExtMemCudaRt.h>

/* Ranges a call carries at most. */
#define MARK_BATCH 64

void kiln_cuda_mark_written(kiln_cuda_backend *be, CUdeviceptr base, size_t bytes, size_t pitch,
                            int64_t n) {
  if (n < 1 || !bytes) return;
  if (pitch == bytes) bytes *= (size_t)n, n = 1; /* contiguous: one range */
  if (!be->nvtx_domain) be->nvtx_domain = nvtxDomainCreateA("kiln");
  nvtxMemVirtualRangeDesc_t r[MARK_BATCH];
  for (int64_t i = 0; i < n;) {
    size_t c = 0;
    for (; c < MARK_BATCH && i < n; c++, i++)
      r[c] = (nvtxMemVirtualRangeDesc_t){bytes, (const void *)(uintptr_t)(base + (CUdeviceptr)(i * (int64_t)pitch))};
    const nvtxMemMarkInitializedBatch_t batch = {NVTX_EXT_COMPATID_MEM, sizeof batch,
                                                 NVTX_MEM_TYPE_VIRTUAL_ADDRESS, c, sizeof r[0], r};
    nvtxMemCudaMarkInitialized((nvtxDomainHandle_t)be->nvtx_domain, (cudaStream_t)be->stream, 0,
                               &batch);
  }
}

void kiln_cuda_sanitize_close(kiln_cuda_backend *be) {
  if (be->nvtx_domain) nvtxDomainDestroy((nvtxDomainHandle_t)be->nvtx_domain);
  be->nvtx_domain = NULL;
}
#else
void kiln_cuda_mark_written(kiln_cuda_backend *be, CUdeviceptr base, size_t bytes, size_t pitch,
                            int64_t n) {
  (void)be, (void)base, (void)bytes, (void)pitch, (void)n;
}

void kiln_cuda_sanitize_close(kiln_cuda_backend *be) { (void)be; }
#endif
