/* The CUDA driver API, resolved at run time: dlopen("libcuda.so.1"), then
 * cuGetProcAddress (CUDA 12's signature, with flags and a status) for every
 * entry point the CUDA backends call. Nothing links libcuda, so the
 * plugins load on a machine without the NVIDIA driver and say so in
 * probe() (DESIGN.md, "Link facts").
 *
 * Each member has the type of the cuda.h prototype it stands for
 * (__typeof__ of the header's declaration, so a wrong signature cannot be
 * written here), and is looked up under its base name with
 * KILN_CU_API_VERSION, which selects the ABI of those prototypes (e.g.
 * cuMemAlloc -> cuMemAlloc_v2). */
#ifndef KILN_CUDA_DRIVER_H
#define KILN_CUDA_DRIVER_H

#include <cuda.h>

#include "kiln/plugin.h"

/* The driver ABI the prototypes below follow: CUDA 12.0, whose signatures
 * of every function used here are those of the CUDA 13 headers. */
#define KILN_CU_API_VERSION 12000

#define KILN_CU_FN(member, api) __typeof__(&api) member

typedef struct kiln_cu {
  void *lib; /* the dlopen handle */
  KILN_CU_FN(GetErrorName, cuGetErrorName);
  KILN_CU_FN(GetErrorString, cuGetErrorString);
  KILN_CU_FN(Init, cuInit);
  KILN_CU_FN(DriverGetVersion, cuDriverGetVersion);
  KILN_CU_FN(DeviceGetCount, cuDeviceGetCount);
  KILN_CU_FN(DeviceGet, cuDeviceGet);
  KILN_CU_FN(DeviceGetName, cuDeviceGetName);
  KILN_CU_FN(DeviceGetAttribute, cuDeviceGetAttribute);
  KILN_CU_FN(DeviceTotalMem, cuDeviceTotalMem);
  KILN_CU_FN(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain);
  KILN_CU_FN(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease);
  KILN_CU_FN(CtxSetCurrent, cuCtxSetCurrent);
  KILN_CU_FN(StreamCreate, cuStreamCreate);
  KILN_CU_FN(StreamDestroy, cuStreamDestroy);
  KILN_CU_FN(StreamSynchronize, cuStreamSynchronize);
  KILN_CU_FN(MemAlloc, cuMemAlloc);
  KILN_CU_FN(MemFree, cuMemFree);
  KILN_CU_FN(MemGetInfo, cuMemGetInfo);
  KILN_CU_FN(MemAllocHost, cuMemAllocHost);
  KILN_CU_FN(MemFreeHost, cuMemFreeHost);
  KILN_CU_FN(MemcpyHtoDAsync, cuMemcpyHtoDAsync);
  KILN_CU_FN(MemcpyDtoHAsync, cuMemcpyDtoHAsync);
  KILN_CU_FN(MemcpyDtoDAsync, cuMemcpyDtoDAsync);
  KILN_CU_FN(Memcpy2DAsync, cuMemcpy2DAsync);
  KILN_CU_FN(MemsetD8Async, cuMemsetD8Async);
  KILN_CU_FN(MemsetD32Async, cuMemsetD32Async);
  KILN_CU_FN(ModuleLoadDataEx, cuModuleLoadDataEx);
  KILN_CU_FN(ModuleUnload, cuModuleUnload);
  KILN_CU_FN(ModuleGetFunction, cuModuleGetFunction);
  KILN_CU_FN(FuncGetAttribute, cuFuncGetAttribute);
  /* a kernel's dynamic shared memory above 48 KiB (flash_attention) */
  KILN_CU_FN(FuncSetAttribute, cuFuncSetAttribute);
  /* matvec_q's persistent grid: blocks a multiprocessor holds at once */
  KILN_CU_FN(OccupancyMaxActiveBlocksPerMultiprocessor, cuOccupancyMaxActiveBlocksPerMultiprocessor);
  KILN_CU_FN(LaunchKernel, cuLaunchKernel);
  /* programmatic dependent launch (grid_dep.cuh, cuda_kernel.c) */
  KILN_CU_FN(LaunchKernelEx, cuLaunchKernelEx);
  /* graphs: the captured decode step (cuda_graph.c) */
  KILN_CU_FN(StreamBeginCapture, cuStreamBeginCapture);
  KILN_CU_FN(StreamEndCapture, cuStreamEndCapture);
  KILN_CU_FN(GraphInstantiateWithFlags, cuGraphInstantiateWithFlags);
  KILN_CU_FN(GraphLaunch, cuGraphLaunch);
  KILN_CU_FN(GraphExecDestroy, cuGraphExecDestroy);
  KILN_CU_FN(GraphDestroy, cuGraphDestroy);
  /* events: the opt-in profile (cuda_profile.c) */
  KILN_CU_FN(EventCreate, cuEventCreate);
  KILN_CU_FN(EventDestroy, cuEventDestroy);
  KILN_CU_FN(EventRecord, cuEventRecord);
  KILN_CU_FN(EventElapsedTime, cuEventElapsedTime);
  KILN_CU_FN(EventSynchronize, cuEventSynchronize);
} kiln_cu;

/* Loads the driver library and every entry point into *cu. On failure
 * stores nothing usable, writes why into why[why_size] ("no NVIDIA driver
 * (libcuda.so.1: cannot open shared object file: ...)", "the driver has
 * no cuGetProcAddress_v2 (older than CUDA 12)", "cuGetProcAddress(cuInit):
 * ...") and returns false. */
bool kiln_cu_load(kiln_cu *cu, char *why, size_t why_size);

/* dlclose; NULL or an unloaded table is fine. */
void kiln_cu_unload(kiln_cu *cu);

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for r, into buf. */
const char *kiln_cu_error_text(const kiln_cu *cu, CUresult r, char *buf, size_t size);

/* A KILN_STATUS_DEVICE (KILN_STATUS_NO_MEMORY for CUDA_ERROR_OUT_OF_MEMORY)
 * status naming the call's text, the CUDA error and, when node is not
 * NULL, the node: "cuMemAlloc(&p, 4096): CUDA_ERROR_OUT_OF_MEMORY (out of
 * memory) in node blk.3.attn_q". */
kiln_status kiln_cu_error(const kiln_host_api *host, const kiln_cu *cu, CUresult r,
                          const char *call, const kiln_node *node);

/* Evaluates a driver call through table `cu_`; on failure returns the
 * status above from the enclosing function. */
#define KILN_CU_CHECK(host_, cu_, node_, call)                                \
  do {                                                                        \
    CUresult kiln_cu_r_ = (cu_)->call;                                        \
    if (kiln_cu_r_ != CUDA_SUCCESS)                                           \
      return kiln_cu_error((host_), (cu_), kiln_cu_r_, "cu" #call, (node_));  \
  } while (0)

#endif
