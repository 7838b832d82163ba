/* The per-step parameter block of the CUDA backends: the values that
 * change from one step to the next, in device memory, so that no kernel
 * bakes them and a captured decode step replays with the current ones
 * (DESIGN.md, "Speed": ik_llama.cpp replayed a graph with a stale n_kv
 * baked into a kernel).
 *
 * The block is kiln_cuda_backend.step_dev: KILN_CUDA_STEP_FIELDS int32,
 * owned by the backend (allocated in open(), freed in close()). run()
 * writes it at the start of every pass over the step's nodes, in stream
 * order, before the pass's first launch: one pass per step on the batched
 * flavors and for a step of one token, one pass per token on cuda-serial's
 * token loop (there each pass is a step of one token at pos0 + t). A
 * kernel that needs a per-step value takes `const int *step` as a runtime
 * argument and reads the field there (kernels/step_block.cuh.tmpl defines
 * the same indices for the kernels; test_cuda_templates checks that they
 * agree). The layout is shared with the attention and KV-cache kernels:
 * keep it. */
#ifndef KILN_CUDA_STEP_H
#define KILN_CUDA_STEP_H

#include <stdint.h>

#include "kiln/status.h"

#define KILN_CUDA_STEP_POS0 0     /* position of the pass's first token */
#define KILN_CUDA_STEP_N_TOKENS 1 /* tokens in the pass (>= 1) */
#define KILN_CUDA_STEP_N_KV 2     /* cache positions the pass's last token sees: pos0 + n_tokens */
#define KILN_CUDA_STEP_FIELDS 8   /* fields 3..7 are reserved (0) */

/* The kernels' copy of the indices (kernels/step_block.cuh.tmpl), for the
 * test that keeps the two in step. */
extern const char kiln_cuda_step_block_source[];

struct kiln_cuda_backend;

/* Writes {pos0, n_tokens, pos0 + n_tokens} to the block, ordered on the
 * backend's stream before whatever is launched next (by-value memsets: no
 * host memory has to outlive the call). KILN_STATUS_INVALID_ARGUMENT for
 * n_tokens < 1, pos0 < 0 or a sum past INT32_MAX; a driver error
 * otherwise. */
kiln_status kiln_cuda_step_write(struct kiln_cuda_backend *be, int32_t pos0, int32_t n_tokens);

#endif
