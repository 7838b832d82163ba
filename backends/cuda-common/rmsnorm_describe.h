/* RMSNorm nodes -> kernel descriptors, for the CUDA backends' prepare():
 * the only place the model's ε, row length and weight type reach a GPU
 * kernel. */
#ifndef KILN_CUDA_RMSNORM_DESCRIBE_H
#define KILN_CUDA_RMSNORM_DESCRIBE_H

#include "kiln/plugin.h"

typedef enum kiln_cuda_rmsnorm_variant {
  KILN_CUDA_RMSNORM_ROW_VEC = 0,  /* cuda-serial: one block per row, float4 (hidden % 4 == 0) */
  KILN_CUDA_RMSNORM_ROWS = 1,     /* cuda-batched: one warp per row, several rows per block */
  KILN_CUDA_RMSNORM_ROW_CC12 = 2  /* cuda-cc120: one block per row, scalar loads */
} kiln_cuda_rmsnorm_variant;

/* How to launch the kernel a descriptor names. A step of n_tokens tokens
 * has n_rows = n_tokens * rows_per_token rows, and runs
 * ceil(n_rows / rows_per_block) blocks of block_dim threads with arguments
 * (x, w, y, n_rows). */
typedef struct kiln_cuda_rmsnorm_launch {
  int64_t hidden;          /* row length: the weight's ne0 */
  int64_t rows_per_token;  /* src0->ne[0] / hidden */
  uint32_t block_dim;      /* threads per block (baked into the kernel) */
  uint32_t rows_per_block; /* rows per block (1 for the per-row kernels) */
} kiln_cuda_rmsnorm_launch;

/* The template name of a variant ("rmsnorm_row_vec"), or NULL. */
const char *kiln_cuda_rmsnorm_template(kiln_cuda_rmsnorm_variant v);

/* Checks an RMS_NORM node (graph.h: src0 F32 rows, src1 the F32/F16/BF16
 * weight of ne0 = hidden, src0->ne[0] a multiple of hidden, dst F32 like
 * src0, ε finite and > 0) and fills a new descriptor for variant v
 * compiled by `compiler`, with the node's own ε (bit-exact), hidden and
 * weight type and the block shape chosen from hidden. *out_desc is the
 * caller's (host->kdesc_free). Errors, naming the node:
 * KILN_STATUS_INVALID_ARGUMENT for a malformed node, KILN_STATUS_UNSUPPORTED
 * for one the variant cannot run (row_vec with hidden % 4 != 0, another
 * weight type), and any setter's status. */
kiln_status kiln_cuda_rmsnorm_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                       kiln_cuda_rmsnorm_variant v, const kiln_node *node,
                                       kiln_kdesc **out_desc, kiln_cuda_rmsnorm_launch *out_launch);

/* describe + kcache_get + kdesc_free: what prepare(node) calls. The kernel
 * belongs to the service (valid until the compiler is unregistered). */
kiln_status kiln_cuda_rmsnorm_prepare(const kiln_host_api *host, kiln_kcompiler *compiler,
                                      kiln_cuda_rmsnorm_variant v, const kiln_node *node,
                                      kiln_kernel **out_kernel,
                                      kiln_cuda_rmsnorm_launch *out_launch);

#endif
