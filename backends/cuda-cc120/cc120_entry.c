/* kiln-cuda-cc120.so: NVIDIA GPUs of compute capability 12.x (RTX 50xx,
 * GB10): the simple per-row RMSNorm (rmsnorm_row_cc12, scalar loads) and
 * the 12.x launch shapes (two rows per matvec block and two warps per
 * attention block, for parts with fewer SMs and less L2), compiled for the
 * device's exact sm_120 / sm_121; prefill batched as cuda-batched.
 *
 * On a lower compute capability probe() reports the device with a note
 * (probe cannot see the config) and open() refuses unless
 * [cuda-cc120] allow_lower_cc = true; then the same 12.x variants are
 * compiled for that device's own sm_XY (e.g. sm_90 on an H200), never for
 * an arch the device is not. Everything behind the table is
 * backends/cuda-common (cuda_backend.h). */
#include "config.h"

#include "cuda_backend.h"
#include "cuda_config_keys.h"

static const kiln_cuda_flavor flavor = {
    .name = "cuda-cc120",
    .prefill = KILN_CUDA_PREFILL_BATCHED,
    .norm_decode = KILN_CUDA_RMSNORM_ROW_CC12,
    .norm_prefill = KILN_CUDA_RMSNORM_ROW_CC12,
    .matvec_rows_per_block = 2,
    .attention_warps = 2,
    .cc_major = 12,
    .has_gemm_keys = true,
    .has_allow_lower_cc = true,
};

static const kiln_config_key keys[] = {KILN_CUDA_KEY_DEVICE, KILN_CUDA_KEY_POISON,
                                       KILN_CUDA_KEY_GEMM, KILN_CUDA_KEY_GEMM_SCRATCH,
                                       KILN_CUDA_KEY_ALLOW_LOWER_CC};

static kiln_status cc120_init(const kiln_host_api *host, void **out_plugin) {
  return kiln_cuda_init(&flavor, host, out_plugin);
}

const kiln_backend_ops kiln_backend_entry = {
    .abi_major = KILN_PLUGIN_ABI_MAJOR,
    .abi_minor = KILN_PLUGIN_ABI_MINOR,
    .struct_size = sizeof(kiln_backend_ops),
    .name = "cuda-cc120",
    .description = "NVIDIA GPU of compute capability 12.x (RTX 50xx, GB10): sm_120/sm_121 "
                   "kernel variants",
    .config_keys = keys,
    .n_config_keys = sizeof keys / sizeof keys[0],
    .init = cc120_init,
    .fini = kiln_cuda_fini,
    .probe = kiln_cuda_probe,
    .open = kiln_cuda_open,
    .close = kiln_cuda_close,
    .supports = kiln_cuda_supports,
    .buffer_alloc = kiln_cuda_buffer_alloc,
    .buffer_map_weight = NULL,
    .buffer_free = kiln_cuda_buffer_free,
    .buffer_upload = kiln_cuda_buffer_upload,
    .buffer_download = kiln_cuda_buffer_download,
    .prepare = kiln_cuda_prepare,
    .run = kiln_cuda_run,
    .sync = kiln_cuda_sync,
};
