/* kiln-cuda-cc120.so: NVIDIA GPUs of compute capability 12.x (RTX 50xx,
 * GB10): the simple per-row RMSNorm (rmsnorm_row_cc12, scalar loads) and
 * the 12.x launch shapes (two warps per matvec block, two per attention
 * block, four per split decode attention block, flash prefill attention
 * in tiles of 32 query rows and 32 keys with 4 warps, whose 69 KiB of
 * shared memory at head_dim 256 fits sm_120's 99 KiB a block, for parts
 * with fewer SMs and less L2), compiled for the
 * device's exact sm_120 / sm_121; prefill batched as cuda-batched.
 *
 * On a lower compute capability probe() reports the device with a note
 * (probe cannot see the config) and open() refuses unless
 * [cuda-cc120] allow_lower_cc = true; then the same 12.x variants are
 * compiled for that device's own sm_XY (e.g. sm_90 on an H200), never for
 * an arch the device is not. Everything behind the table is
 * backends/cuda-common (cuda_backend.h, KILN_CUDA_PLUGIN_ENTRY). */
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
                                       KILN_CUDA_KEY_GEMM_SCRATCH, KILN_CUDA_KEY_ALLOW_LOWER_CC,
                                       KILN_CUDA_KEY_DEVICES, KILN_CUDA_KEY_TENSOR_PARALLEL};

KILN_CUDA_PLUGIN_ENTRY("cuda-cc120",
                       "NVIDIA GPU of compute capability 12.x (RTX 50xx, GB10): sm_120/sm_121 "
                       "kernel variants",
                       keys, .prefill = KILN_CUDA_PREFILL_BATCHED,
                       .norm_decode = KILN_CUDA_RMSNORM_ROW_CC12,
                       .norm_prefill = KILN_CUDA_RMSNORM_ROW_CC12,
                       .matvec_warps = 2, .matvec_rows_per_group = 2,
                       .attention_warps = 2,
                       .attention_warps_decode = 8, .attention_warps_split = 4,
                       .flash = {.bq = 32, .bk = 32, .warps = 4},
                       .cc_major = 12, .has_gemm_keys = true, .has_allow_lower_cc = true);
