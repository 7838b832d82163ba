/* qwen35's nodes -> kernel descriptors for the CUDA backends, and what the
 * CUDA kernels of those ops support. Like op_describe.h: every baked value
 * comes from the node (its params, its tensors' shapes and types) or from
 * the launch shape the caller chose; each *_describe validates the node
 * first (kiln_cuda_node_check) and returns a new descriptor (the caller's:
 * host->kdesc_free). Errors name the node: KILN_STATUS_INVALID_ARGUMENT for
 * a malformed node, KILN_STATUS_UNSUPPORTED for one the kernels cannot run,
 * and any setter's status. No device is needed (the unit tests compile
 * every template through these with NVRTC alone). */
#ifndef KILN_CUDA_QWEN35_DESCRIBE_H
#define KILN_CUDA_QWEN35_DESCRIBE_H

#include "kiln/plugin.h"

/* The chunked delta rule's limits: tokens per chunk (its shared-memory
 * matrix) and head_k_dim (its state tile, and the recurrent kernel's
 * registers). */
#define KILN_CUDA_GDN_MAX_CHUNK 64
#define KILN_CUDA_GDN_MAX_DK 256
/* The conv kernel keeps K weights and K-1 inputs in registers. */
#define KILN_CUDA_SSM_MAX_CONV 16

/* NULL when the CUDA kernels run this qwen35 node (SLICE, SIGMOID_MUL,
 * SSM_CONV, GDN_GATE, GATED_DELTA_NET, ROPE IMROPE) with its types and
 * sizes: F32 activations and states; the conv kernel F32, F16 or BF16 and
 * at most 16 wide; GDN_GATE's A and bias F32; head_k_dim <= 256 and chunk
 * <= 64. Otherwise KILN_STATUS_UNSUPPORTED saying why. For cuda_check.c. */
kiln_status kiln_cuda_qwen35_supports(const kiln_host_api *host, const kiln_node *node);

/* SLICE: slice with src0's width and the node's offset, length, stride;
 * arguments (x, y, n_tokens), grid-stride over n_tokens * groups * length. */
kiln_status kiln_cuda_slice_describe(const kiln_host_api *host, kiln_kcompiler *compiler, const kiln_node *node,
                                     uint32_t block_size, kiln_kdesc **out_desc);

/* SIGMOID_MUL: arguments (a, b, y, n). */
kiln_status kiln_cuda_sigmoid_mul_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                           const kiln_node *node, uint32_t block_size, kiln_kdesc **out_desc);

/* SSM_CONV: ssm_conv with the channel count, conv width and kernel type;
 * grid ceil(channels / block_size); arguments (x, w, state, y, n_tokens,
 * pos0). */
kiln_status kiln_cuda_ssm_conv_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, uint32_t block_size, kiln_kdesc **out_desc);

/* GDN_GATE: gdn_gate with the head count; arguments (alpha, beta, A, dt,
 * y, n_tokens), grid-stride over n_tokens * heads. */
kiln_status kiln_cuda_gdn_gate_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, uint32_t block_size, kiln_kdesc **out_desc);

/* GATED_DELTA_NET, one token at a time: gdn_recurrent with the node's
 * heads, dims, l2_eps and q_scale and `warps` (1..32) warps per block;
 * grid (n_v_heads, ceil(head_v_dim / warps)); arguments (qkv, gates,
 * state, y, n_tokens, pos0). */
kiln_status kiln_cuda_gdn_recurrent_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                             const kiln_node *node, uint32_t warps, kiln_kdesc **out_desc);

/* GATED_DELTA_NET over a prefill step: gdn_chunked with the same values,
 * the node's chunk, `block_size` threads and as many value columns per
 * block as fit (32, fewer for head_k_dim > 128), in *out_cols; grid
 * (n_v_heads, ceil(head_v_dim / cols)); arguments as above. */
kiln_status kiln_cuda_gdn_chunked_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                           const kiln_node *node, uint32_t block_size, kiln_kdesc **out_desc,
                                           uint32_t *out_cols);

/* ROPE, mode IMROPE: rope_imrope with n_rot, head_dim, n_head, θ and the
 * four sections; grid (n_tokens, any); arguments (x, y, n_tokens, pos0). */
kiln_status kiln_cuda_rope_imrope_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                           const kiln_node *node, uint32_t block_size, kiln_kdesc **out_desc);

#endif
