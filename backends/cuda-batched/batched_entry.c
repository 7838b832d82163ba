/* kiln-cuda-batched.so: NVIDIA GPUs, the whole prompt in one pass per
 * micro-batch: rmsnorm_rows over every row, Q/K/V/O and FFN projections as
 * cuBLAS GEMMs (f32 by default), batched RoPE and causal attention; a
 * step of one token (decode) as cuda-serial. Everything behind the table
 * is backends/cuda-common (cuda_backend.h). */
#include "config.h"

#include "cuda_backend.h"
#include "cuda_config_keys.h"

static const kiln_cuda_flavor flavor = {
    .name = "cuda-batched",
    .prefill = KILN_CUDA_PREFILL_BATCHED,
    .norm_decode = KILN_CUDA_RMSNORM_ROW_VEC,
    .norm_prefill = KILN_CUDA_RMSNORM_ROWS,
    .matvec_rows_per_block = 4,
    .attention_warps = 4,
    .cc_major = 0,
    .has_gemm_keys = true,
    .has_allow_lower_cc = false,
};

static const kiln_config_key keys[] = {KILN_CUDA_KEY_DEVICE, KILN_CUDA_KEY_POISON,
                                       KILN_CUDA_KEY_GEMM, KILN_CUDA_KEY_GEMM_SCRATCH};

static kiln_status batched_init(const kiln_host_api *host, void **out_plugin) {
  return kiln_cuda_init(&flavor, host, out_plugin);
}

const kiln_backend_ops kiln_backend_entry = {
    .abi_major = KILN_PLUGIN_ABI_MAJOR,
    .abi_minor = KILN_PLUGIN_ABI_MINOR,
    .struct_size = sizeof(kiln_backend_ops),
    .name = "cuda-batched",
    .description = "NVIDIA GPU: batched prefill (cuBLAS GEMMs, batched RoPE and attention)",
    .config_keys = keys,
    .n_config_keys = sizeof keys / sizeof keys[0],
    .init = batched_init,
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
