/* kiln-cuda-serial.so: NVIDIA GPUs, the prompt through the decode path one
 * token at a time (matvec kernels, rmsnorm_row_vec). The simplest CUDA
 * backend: no cuBLAS, one kernel family per op. Everything behind the
 * table is backends/cuda-common (cuda_backend.h, KILN_CUDA_PLUGIN_ENTRY). */
#include "config.h"

#include "cuda_backend.h"
#include "cuda_config_keys.h"

static const kiln_config_key keys[] = {KILN_CUDA_SERIAL_KEYS};

KILN_CUDA_PLUGIN_ENTRY("cuda-serial",
                       "NVIDIA GPU: prefill one token at a time through the decode kernels", keys,
                       .prefill = KILN_CUDA_PREFILL_SERIAL,
                       .norm_decode = KILN_CUDA_RMSNORM_ROW_VEC,
                       .norm_prefill = KILN_CUDA_RMSNORM_ROW_VEC,
                       .matvec_warps = 4, .matvec_rows_per_group = 2,
                       .attention_warps = 4,
                       .attention_warps_decode = 16, .attention_warps_split = 8);
