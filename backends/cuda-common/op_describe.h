/* Nodes -> kernel descriptors for every op of the CUDA backends except
 * RMS_NORM (rmsnorm_describe.h), and the node checks they rest on. These
 * need no device: the unit tests compile every template through them with
 * NVRTC alone.
 *
 * Every baked value comes from the node (its params, its tensors' shapes
 * and types) or from the launch shape the caller chose (rows per block,
 * warps); nothing here stands in for a model's parameter. Each *_describe
 * validates the node first (kiln_cuda_node_check), then returns a new
 * descriptor (the caller's: host->kdesc_free) and the launch shape. Errors
 * name the node: KILN_STATUS_INVALID_ARGUMENT for a malformed node,
 * KILN_STATUS_UNSUPPORTED for one the CUDA backends cannot run, and any
 * setter's status. */
#ifndef KILN_CUDA_OP_DESCRIBE_H
#define KILN_CUDA_OP_DESCRIBE_H

#include "kiln/plugin.h"

/* Largest head_dim the attention template takes (its per-lane registers). */
#define KILN_CUDA_MAX_HEAD_DIM 256

/* Is `type` a weight type the CUDA kernels decode (F32, F16, BF16, Q4_0,
 * Q5_0, Q8_0, Q4_K, Q6_K)? */
bool kiln_cuda_weight_type_ok(kiln_type type);

/* NULL when the CUDA backends implement node's op with its operand types
 * and params (RoPE mode, head_dim <= 256, RMSNorm weight F32/F16/BF16) and
 * every dimension fits the kernels' 32-bit indices (<= 2^31-1); otherwise
 * KILN_STATUS_UNSUPPORTED saying why. For supports(). */
kiln_status kiln_cuda_node_supports(const kiln_host_api *host, const kiln_node *node);

/* kiln_cuda_node_supports, then the static checks every backend shares
 * (backends/common/node_check.h: operands present, shapes consistent with
 * each other and with nbytes, params valid). KILN_STATUS_INVALID_ARGUMENT
 * naming the node for a malformed one. For prepare(). */
kiln_status kiln_cuda_node_check(const kiln_host_api *host, const kiln_node *node);

/* The matvec's launch shape (matvec.cu.tmpl): `warps` (1..32) warps per
 * block in groups of k_split (dividing warps) that share each row's
 * length, rows_per_group (1..8) rows per group. */
typedef struct kiln_cuda_matvec_shape {
  uint32_t warps;
  uint32_t k_split;
  uint32_t rows_per_group;
} kiln_cuda_matvec_shape;

/* Whether the matvec adds node's bias itself: a bias of F32, F16 or BF16
 * (any other type is added by bias_add after it). False without a bias. */
bool kiln_cuda_matvec_fuses_bias(const kiln_node *node);

/* MUL_MAT, decode: matvec with w_type, k = the weight's ne0, the shape's
 * values and the bias's type when it fuses it ("none" otherwise). Grid
 * (ceil(N / (warps / k_split * rows_per_group)), n_cols), block
 * 32 * warps; arguments (w, x, b, y, N, n_cols), w the weight buffer's
 * base, b the bias's (or 0). KILN_STATUS_INVALID_ARGUMENT naming the node
 * for a shape out of range. */
kiln_status kiln_cuda_matvec_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                      const kiln_node *node, const kiln_cuda_matvec_shape *shape,
                                      kiln_kdesc **out_desc);

/* MUL_MAT, prefill: the weight's rows to an f32 tile (dequant_rows) with
 * block_size threads per block; arguments (w + row0 * row_bytes, tile,
 * n_rows). */
kiln_status kiln_cuda_dequant_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                       const kiln_node *node, uint32_t block_size,
                                       kiln_kdesc **out_desc);

/* MUL_MAT with a bias (src2): bias_add with the bias's type and length;
 * arguments (b, y, n_cols). KILN_STATUS_INVALID_ARGUMENT when the node has
 * no bias. */
kiln_status kiln_cuda_bias_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                    const kiln_node *node, uint32_t block_size,
                                    kiln_kdesc **out_desc);

/* GET_ROWS: get_rows with the table's type and row length; grid n_tokens;
 * arguments (table, ids, y, n_tokens). */
kiln_status kiln_cuda_get_rows_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, uint32_t block_size,
                                        kiln_kdesc **out_desc);

/* ROPE: rope with the node's mode, n_rot, head_dim, n_head and theta;
 * grid (n_tokens, any); arguments (x, y, step), step the step block
 * (cuda_step.h) holding pos0 and n_tokens. */
kiln_status kiln_cuda_rope_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                    const kiln_node *node, uint32_t block_size,
                                    kiln_kdesc **out_desc);

/* ATTENTION: attention with the node's head_dim, n_head, n_head_kv and
 * scale, `warps` (1..32) warps per block; grid (n_head, n_tokens);
 * arguments (q, k_cache, v_cache, y, step), step the step block. */
kiln_status kiln_cuda_attention_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                         const kiln_node *node, uint32_t warps,
                                         kiln_kdesc **out_desc);

/* STORE_KV: store_kv with the cache's width (dst ne0); any grid
 * (grid-stride); arguments (src, cache, step), src the step's first
 * column, step the step block whose pos0 and n_tokens say where and how
 * much. */
kiln_status kiln_cuda_store_kv_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, uint32_t block_size,
                                        kiln_kdesc **out_desc);

/* SWIGLU and ADD: the elementwise templates; arguments (a, b, y, n). */
kiln_status kiln_cuda_eltwise_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                       const kiln_node *node, uint32_t block_size,
                                       kiln_kdesc **out_desc);

/* kcache_get for d, then kdesc_free(d) whatever the outcome; errors are
 * annotated with the node. */
kiln_status kiln_cuda_kernel_get(const kiln_host_api *host, kiln_kdesc *d, const kiln_node *node,
                                 kiln_kernel **out_kernel);

/* Shared by the describe functions (op_describe.c). */

/* Hands d out in *out_desc when st is NULL; otherwise frees d and returns
 * st annotated with the node's name. */
kiln_status kiln_cuda_describe_finish(const kiln_host_api *host, kiln_status st, kiln_kdesc *d,
                                      const kiln_node *node, kiln_kdesc **out_desc);

/* A launch dimension `what` = v must lie in lo..hi (and be a multiple of
 * 32 when asked); KILN_STATUS_INVALID_ARGUMENT naming the node otherwise. */
kiln_status kiln_cuda_describe_check_threads(const kiln_host_api *host, const kiln_node *node,
                                             const char *what, uint32_t v, uint32_t lo, uint32_t hi,
                                             bool multiple_of_32);

#endif
