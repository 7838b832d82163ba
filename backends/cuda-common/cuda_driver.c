/* The CUDA driver API through dlopen and cuGetProcAddress (cuda_driver.h). */
#include "config.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cuda_driver.h"

/* Where each member lives and the base name the driver knows it by. */
static const struct {
  size_t offset;
  const char *symbol;
} entries[] = {
#define E(member, name) {offsetof(kiln_cu, member), name}
    E(GetErrorName, "cuGetErrorName"),
    E(GetErrorString, "cuGetErrorString"),
    E(Init, "cuInit"),
    E(DriverGetVersion, "cuDriverGetVersion"),
    E(DeviceGetCount, "cuDeviceGetCount"),
    E(DeviceGet, "cuDeviceGet"),
    E(DeviceGetName, "cuDeviceGetName"),
    E(DeviceGetAttribute, "cuDeviceGetAttribute"),
    E(DeviceTotalMem, "cuDeviceTotalMem"),
    E(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    E(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease"),
    E(CtxSetCurrent, "cuCtxSetCurrent"),
    E(StreamCreate, "cuStreamCreate"),
    E(StreamDestroy, "cuStreamDestroy"),
    E(StreamSynchronize, "cuStreamSynchronize"),
    E(MemAlloc, "cuMemAlloc"),
    E(MemFree, "cuMemFree"),
    E(MemGetInfo, "cuMemGetInfo"),
    E(MemAllocHost, "cuMemAllocHost"),
    E(MemFreeHost, "cuMemFreeHost"),
    E(MemcpyHtoDAsync, "cuMemcpyHtoDAsync"),
    E(MemcpyDtoHAsync, "cuMemcpyDtoHAsync"),
    E(MemcpyDtoDAsync, "cuMemcpyDtoDAsync"),
    E(Memcpy2DAsync, "cuMemcpy2DAsync"),
    E(MemsetD8Async, "cuMemsetD8Async"),
    E(MemsetD32Async, "cuMemsetD32Async"),
    E(ModuleLoadDataEx, "cuModuleLoadDataEx"),
    E(ModuleUnload, "cuModuleUnload"),
    E(ModuleGetFunction, "cuModuleGetFunction"),
    E(FuncGetAttribute, "cuFuncGetAttribute"),
    E(FuncSetAttribute, "cuFuncSetAttribute"),
    E(OccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
    E(LaunchKernel, "cuLaunchKernel"),
    E(LaunchKernelEx, "cuLaunchKernelEx"),
    E(StreamBeginCapture, "cuStreamBeginCapture"),
    E(StreamEndCapture, "cuStreamEndCapture"),
    E(GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"),
    E(GraphLaunch, "cuGraphLaunch"),
    E(GraphExecDestroy, "cuGraphExecDestroy"),
    E(GraphDestroy, "cuGraphDestroy"),
    E(EventCreate, "cuEventCreate"),
    E(EventDestroy, "cuEventDestroy"),
    E(EventRecord, "cuEventRecord"),
    E(EventElapsedTime, "cuEventElapsedTime"),
    E(EventSynchronize, "cuEventSynchronize"),
#undef E
};

typedef CUresult (*get_proc_fn)(const char *symbol, void **pfn, int cuda_version,
                                cuuint64_t flags, CUdriverProcAddressQueryResult *status);

bool kiln_cu_load(kiln_cu *cu, char *why, size_t why_size) {
  memset(cu, 0, sizeof *cu);
  dlerror();
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(why, why_size, "no NVIDIA driver (%s)", e ? e : "libcuda.so.1: not found");
    return false;
  }
  /* dlsym returns an object pointer; POSIX guarantees it converts to a
   * function pointer, which memcpy does without a cast C forbids. */
  void *sym = dlsym(lib, "cuGetProcAddress_v2");
  get_proc_fn get_proc;
  if (!sym) {
    snprintf(why, why_size,
             "the NVIDIA driver's libcuda.so.1 has no cuGetProcAddress_v2 (a driver older than "
             "CUDA 12; update the driver)");
    dlclose(lib);
    return false;
  }
  memcpy(&get_proc, &sym, sizeof get_proc);
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
    void *fn = NULL;
    CUdriverProcAddressQueryResult qs = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult r = get_proc(entries[i].symbol, &fn, KILN_CU_API_VERSION,
                          CU_GET_PROC_ADDRESS_DEFAULT, &qs);
    if (r != CUDA_SUCCESS || qs != CU_GET_PROC_ADDRESS_SUCCESS || !fn) {
      snprintf(why, why_size,
               "the NVIDIA driver does not provide %s for CUDA %d.%d (cuGetProcAddress: error "
               "%d, query status %d)",
               entries[i].symbol, KILN_CU_API_VERSION / 1000, KILN_CU_API_VERSION % 1000 / 10,
               (int)r, (int)qs);
      dlclose(lib);
      memset(cu, 0, sizeof *cu);
      return false;
    }
    memcpy((char *)cu + entries[i].offset, &fn, sizeof fn);
  }
  cu->lib = lib;
  return true;
}

void kiln_cu_unload(kiln_cu *cu) {
  if (!cu || !cu->lib) return;
  dlclose(cu->lib);
  memset(cu, 0, sizeof *cu);
}

const char *kiln_cu_error_text(const kiln_cu *cu, CUresult r, char *buf, size_t size) {
  const char *name = NULL, *text = NULL;
  if (cu && cu->GetErrorName && cu->GetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
  if (cu && cu->GetErrorString && cu->GetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
  if (name)
    snprintf(buf, size, "%s (%s)", name, text ? text : "no description");
  else
    snprintf(buf, size, "CUDA error %d", (int)r);
  return buf;
}

kiln_status kiln_cu_error(const kiln_host_api *host, const kiln_cu *cu, CUresult r,
                          const char *call, const kiln_node *node) {
  char text[256];
  kiln_cu_error_text(cu, r, text, sizeof text);
  kiln_status_code code =
      r == CUDA_ERROR_OUT_OF_MEMORY ? KILN_STATUS_NO_MEMORY : KILN_STATUS_DEVICE;
  if (node)
    return host->status_new(code, "%s: %s in node %.*s (%s)", call, text, KILN_NAME_MAX,
                            node->name, kiln_op_name(node->op));
  return host->status_new(code, "%s: %s", call, text);
}
