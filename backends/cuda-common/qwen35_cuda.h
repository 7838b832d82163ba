/* prepare() and run() of qwen35's ops (SLICE, SIGMOID_MUL, SSM_CONV,
 * GDN_GATE, GATED_DELTA_NET, ROPE IMROPE) on the CUDA backends
 * (qwen35_cuda.c), for cuda_prepare.c and cuda_run.c. */
#ifndef KILN_CUDA_QWEN35_H
#define KILN_CUDA_QWEN35_H

#include "cuda_backend.h"

/* Resolves and loads the node's kernels into ns (decode; prefill for a
 * batched step of GATED_DELTA_NET when `batched`). Errors name the node:
 * the describe functions' (qwen35_describe.h) and the kernel cache's. */
kiln_status kiln_cuda_qwen35_prepare(kiln_cuda_backend *be, const kiln_node *node, bool batched,
                                     kiln_cuda_node_state *ns);

/* Launches the node over tokens col .. col+n-1 at positions pos ..;
 * b[0..3] are the sources' buffers, b[4] dst's, already checked. */
kiln_status kiln_cuda_qwen35_run(kiln_cuda_backend *be, const kiln_node *node, const kiln_cuda_node_state *ns,
                                 const kiln_cuda_buffer *const *b, int32_t n, int32_t col, int32_t pos);

#endif
