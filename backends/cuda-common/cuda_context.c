/* Making a backend's CUDA context current on the calling thread: the first
 * thing every entry point that touches the device does. Below the plugin,
 * buffer, GEMM and run files alike, so none of them calls up into another. */
#include "config.h"

#include "cuda_backend.h"

kiln_status kiln_cuda_enter(kiln_cuda_backend *be) {
  KILN_CU_CHECK(be->host, be->cu, NULL, CtxSetCurrent(be->ctx));
  return NULL;
}
