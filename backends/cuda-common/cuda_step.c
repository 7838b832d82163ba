/* Writing the per-step parameter block (cuda_step.h). */
#include "config.h"

#include "cuda_backend.h"

const char kiln_cuda_step_block_source[] =
#include "step_block.cuh.inc"
    ;

kiln_status kiln_cuda_step_write(kiln_cuda_backend *be, int32_t pos0, int32_t n_tokens) {
  if (n_tokens < 1 || pos0 < 0 || pos0 > INT32_MAX - n_tokens)
    return be->host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                                "%s: step block for %d tokens at position %d", be->fl->name,
                                (int)n_tokens, (int)pos0);
  const uint32_t v[3] = {(uint32_t)pos0, (uint32_t)n_tokens, (uint32_t)(pos0 + n_tokens)};
  static const int field[3] = {KILN_CUDA_STEP_POS0, KILN_CUDA_STEP_N_TOKENS, KILN_CUDA_STEP_N_KV};
  for (int i = 0; i < 3; i++)
    KILN_CU_CHECK(be->host, be->cu, NULL,
                  MemsetD32Async(be->step_dev + 4u * (CUdeviceptr)field[i], v[i], 1, be->stream));
  return NULL;
}
