/* kiln-cuda-batched.so: NVIDIA GPUs, the whole prompt in one pass per
 * micro-batch: rmsnorm_rows over every row, Q/K/V/O and FFN projections as
 * cuBLAS GEMMs (f32 by default), batched RoPE and causal attention as
 * flash attention in tiles of 64 query rows and 64 keys, 8 warps (145 KiB
 * of shared memory a block at head_dim 256, within sm_80/sm_90's opt-in
 * limit; a device with less takes the rows kernel for such nodes); a
 * step of one token (decode) as cuda-serial. Everything behind the table
 * is backends/cuda-common (cuda_backend.h, KILN_CUDA_PLUGIN_ENTRY). */
#include "config.h"

#include "cuda_backend.h"
#include "cuda_config_keys.h"

static const kiln_config_key keys[] = {KILN_CUDA_KEY_DEVICE, KILN_CUDA_KEY_POISON,
                                       KILN_CUDA_KEY_PROFILE, KILN_CUDA_KEY_ACTIVATIONS, KILN_CUDA_KEY_RECURRENT_GUARD, KILN_CUDA_KEY_MATVEC_LOAD,
                                       KILN_CUDA_KEY_MATVEC_SHAPE, KILN_CUDA_KEY_ATTENTION_SPLITS,
                                       KILN_CUDA_KEY_ATTENTION_MERGE,
                                       KILN_CUDA_KEY_DECODE_ATTENTION,
                                       KILN_CUDA_KEY_PREFILL_ATTENTION,
                                       KILN_CUDA_KEY_FUSE, KILN_CUDA_KEY_GRAPH, KILN_CUDA_KEY_PDL, KILN_CUDA_KEY_GEMM, KILN_CUDA_KEY_MMQ_SHAPE,
                                       KILN_CUDA_KEY_GEMM_SCRATCH,
                                       KILN_CUDA_KEY_DEVICES, KILN_CUDA_KEY_TENSOR_PARALLEL};

KILN_CUDA_PLUGIN_ENTRY("cuda-batched",
                       "NVIDIA GPU: batched prefill (cuBLAS GEMMs, batched RoPE and attention)",
                       keys, .prefill = KILN_CUDA_PREFILL_BATCHED,
                       .norm_decode = KILN_CUDA_RMSNORM_ROW_VEC,
                       .norm_prefill = KILN_CUDA_RMSNORM_ROWS,
                       .matvec_warps = 4, .matvec_rows_per_group = 2,
                       .attention_warps = 4,
                       .attention_warps_decode = 16, .attention_warps_split = 8,
                       .flash = {.bq = 64, .bk = 64, .warps = 8},
                       .has_gemm_keys = true);
