/* kiln-cuda-stale.so, TEST ONLY (never installed): cuda-serial linked with
 * a build of cuda_graph.c (KILN_CUDA_TEST_STALE_STEP) whose captured decode
 * step carries the positions of the step it was captured from, as if a
 * position were baked into a captured kernel. tests/gpu/
 * test_gpu_replay_stale runs the 64-step replay test against it, which
 * must fail: `make check` expects the failure (XFAIL_TESTS), so the replay
 * test is shown able to catch a stale per-step value. */
#include "config.h"

#include "cuda_backend.h"
#include "cuda_config_keys.h"

/* cuda-serial's keys: cuda-common reads them all at open() */
static const kiln_config_key keys[] = {KILN_CUDA_SERIAL_KEYS};

KILN_CUDA_PLUGIN_ENTRY("cuda-stale",
                       "TEST ONLY: cuda-serial whose captured decode step replays stale positions",
                       keys, .prefill = KILN_CUDA_PREFILL_SERIAL,
                       .norm_decode = KILN_CUDA_RMSNORM_ROW_VEC,
                       .norm_prefill = KILN_CUDA_RMSNORM_ROW_VEC,
                       .matvec_warps = 4, .matvec_rows_per_group = 2,
                       .attention_warps = 4, .attention_warps_decode = 16, .attention_warps_split = 8);
