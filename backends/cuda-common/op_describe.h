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
#include "flash_shape.h"

/* Largest head_dim the attention template takes (its per-lane registers). */
#define KILN_CUDA_MAX_HEAD_DIM 256

/* Is `type` a weight type the CUDA kernels decode (F32, F16, BF16, Q4_0,
 * Q5_0, Q8_0, Q4_K, Q5_K, Q6_K)? */
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

/* The matvec's launch shape (matvec.cu.tmpl, matvec_q.cu.tmpl): `warps`
 * (1..32) warps per block in groups of k_split (dividing warps) that share
 * each row's length, rows_per_group (1..8) rows per group;
 * groups_per_block (matvec_q only, 1..64): how many such sets of rows a
 * block takes one after another; stages (matvec_q only): 0, or 2..16 for
 * persistent blocks whose rows arrive by bulk copies into that many
 * shared-memory stages (groups_per_block 1, every member direct). */
typedef struct kiln_cuda_matvec_shape {
  uint32_t warps;
  uint32_t k_split;
  uint32_t rows_per_group;
  uint32_t groups_per_block;
  uint32_t stages;
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

/* MUL_MAT, prefill: the weight's rows to the GEMM's tile (dequant_rows)
 * in the operand form `operand` ("f32", "bf16", "bf16x3": gemm_operand.cuh)
 * with block_size threads per block; arguments (w + row0 * row_bytes,
 * tile, n_rows). */
kiln_status kiln_cuda_dequant_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                       const kiln_node *node, const char *operand,
                                       uint32_t block_size, kiln_kdesc **out_desc);

/* MUL_MAT, prefill: its input's columns to the GEMM's 16-bit operand
 * (gemm_input; operand "bf16" or "bf16x3") with block_size threads per
 * block; arguments (x, operand buffer, n_cols). */
kiln_status kiln_cuda_gemm_input_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                          const kiln_node *node, const char *operand,
                                          uint32_t block_size, kiln_kdesc **out_desc);

/* e4m3's largest finite value: the most fp8_max may be. */
#define KILN_CUDA_E4M3_MAX 448.0f

/* MUL_MAT, prefill, gemm = fp8: the weight's rows to the FP8 GEMM's tile
 * (fp8_rows: e4m3 rows of K rounded up to 16, then a scale a row) and the
 * input's columns to its e4m3 operand (fp8_input: a scale a token), each
 * row's largest magnitude mapped to fp8_max (in (0, 448], baked); block
 * size threads per block, one block a row or column; arguments (w + row0
 * * row_bytes, tile, n_rows) and (x, operand buffer, n_cols).
 * KILN_STATUS_INVALID_ARGUMENT naming the node for an fp8_max out of
 * range. */
kiln_status kiln_cuda_fp8_rows_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, float fp8_max,
                                        uint32_t block_size, kiln_kdesc **out_desc);
kiln_status kiln_cuda_fp8_input_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                         const kiln_node *node, float fp8_max,
                                         uint32_t block_size, kiln_kdesc **out_desc);

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

/* ATTENTION: attention with the node's head_dim, n_head, n_head_kv,
 * scale and KV type (the K cache's type: F32, F16, BF16 or Q8_0, which
 * kiln_node_check has made V's too), `warps` (1..32) warps per block; grid (n_head, n_tokens);
 * arguments (q, k_cache, v_cache, y, step), step the step block. */
kiln_status kiln_cuda_attention_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                         const kiln_node *node, uint32_t warps,
                                         kiln_kdesc **out_desc);

/* ---- split-KV decode attention (attention_split.cu.tmpl,
 * attention_merge.cu.tmpl): a pass of one token ---- */

/* The most splits of the keys ([<plugin>] attention_splits' range). */
#define KILN_CUDA_MAX_ATTN_SPLITS 256

/* Whether the split kernel can take node: at most 16 query heads per KV
 * head, and at most 64 values of a group's queries (and as many sums) per
 * lane, (n_head / n_head_kv) * ceil(head_dim / 32) <= 64. Other nodes
 * keep the one-block-per-head kernel (attention.cu.tmpl) for decode. */
bool kiln_cuda_attention_split_fits(const kiln_node *node);

/* The automatic split count: enough (split, KV head) blocks for about two
 * per SM (ceil(2 * sm_count / n_head_kv)), but no more splits than a
 * cache of n_ctx positions can fill with a tile of 32 keys each
 * (ceil(n_ctx / 32); `warps` no longer matters), and 1 ..
 * KILN_CUDA_MAX_ATTN_SPLITS. */
uint32_t kiln_cuda_attention_splits_auto(int sm_count, int64_t n_ctx, int64_t n_head_kv,
                                         uint32_t warps);

/* Bytes of the partial results for node with n_split splits: n_head *
 * n_split records of head_dim + 2 floats (attention_part.cuh.tmpl). */
uint64_t kiln_cuda_attention_part_bytes(const kiln_node *node, uint32_t n_split);

/* How a matvec's activations meet a block weight ([<plugin>] activations):
 * f32 (dequantized weights times f32 x: matvec), or x rounded per 32
 * values to 16 or 8 bits for integer dot products (matvec_q). */
typedef enum kiln_cuda_quant {
  KILN_CUDA_QUANT_NONE = 0, /* activations = f32 */
  KILN_CUDA_QUANT_Q8 = 8,   /* activations = q8 */
  KILN_CUDA_QUANT_Q16 = 16  /* activations = q16 */
} kiln_cuda_quant;

/* ATTENTION, decode: attention_split with the node's head_dim, n_head,
 * n_head_kv, scale and KV type (the K cache's), `warps` (1..32) and
 * n_split (1..256); with merge, the merge fused in (the last block of
 * each KV head merges its group's records into y, and with quant also
 * into xq as attention_merge would: kiln_cuda_attention_fused_merge_fits
 * must hold, and kiln_cuda_merge_quant_fits for a quant); without it
 * quant must be KILN_CUDA_QUANT_NONE. Grid (n_split, n_head_kv), block
 * 32 * warps; arguments (q, k_cache, v_cache, part, step, y, xq,
 * tickets), tickets n_head_kv u32 zeros. KILN_STATUS_UNSUPPORTED for a
 * node that does not fit (kiln_cuda_attention_split_fits, and the fused
 * merge's), KILN_STATUS_INVALID_ARGUMENT for warps or n_split out of
 * range or a quant it cannot take, each naming the node. */
kiln_status kiln_cuda_attention_split_describe(const kiln_host_api *host,
                                               kiln_kcompiler *compiler, const kiln_node *node,
                                               uint32_t warps, uint32_t n_split, bool merge,
                                               kiln_cuda_quant quant, kiln_kdesc **out_desc);

/* Whether attention_split can merge node's records itself at n_split
 * splits: head_dim a multiple of 32 and at most 256 records a KV head
 * (n_head / n_head_kv * n_split), few enough for one block to merge
 * faster than a launch of attention_merge (and for the tile's shared
 * memory to hold their weights). */
bool kiln_cuda_attention_fused_merge_fits(const kiln_node *node, uint32_t n_split);

/* Whether the tensor-core split kernel (attention_mma) can take node: an
 * F16 or BF16 KV cache, head_dim a multiple of 16 in 16..128, at most 16
 * query heads per KV head. */
bool kiln_cuda_attention_mma_fits(const kiln_node *node);

/* Dynamic shared memory attention_mma's block of `warps` warps takes at
 * head_dim hd: each warp's K and V tiles of 16 keys (rows of hd + 8
 * 16-bit values). */
uint32_t kiln_cuda_attention_mma_smem(int64_t hd, uint32_t warps);

/* ATTENTION, decode, on tensor cores: attention_mma with warps and
 * n_split, the records attention_merge merges (its y, xq and tickets
 * arguments unused; no fused merge). Grid (n_split, n_head_kv), block
 * 32 * warps, kiln_cuda_attention_mma_smem bytes of dynamic shared
 * memory; arguments as attention_split's. KILN_STATUS_UNSUPPORTED for a
 * node that does not fit (kiln_cuda_attention_mma_fits),
 * KILN_STATUS_INVALID_ARGUMENT for warps (1..16) or n_split out of range,
 * or warps whose tiles need more than 48 KiB of shared memory, each naming
 * the node. Needs compute capability 8.0 (mma.sync m16n8k16, cp.async):
 * the caller checks the device. */
kiln_status kiln_cuda_attention_mma_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                             const kiln_node *node, uint32_t warps,
                                             uint32_t n_split, kiln_kdesc **out_desc);

/* ATTENTION, decode: attention_merge for the node's head_dim and
 * n_split, with quant (the activations mode, or KILN_CUDA_QUANT_NONE)
 * also writing y quantized for the output projection's matvec_q (k =
 * head_dim * n_head; needs head_dim % 32 == 0: kiln_cuda_merge_quant_fits);
 * grid n_head, block 32 * warps; arguments (part, y, xq).
 * KILN_STATUS_INVALID_ARGUMENT (naming the node) for warps or n_split out
 * of range or a quant the node's head_dim cannot take. */
kiln_status kiln_cuda_attention_merge_describe(const kiln_host_api *host,
                                               kiln_kcompiler *compiler, const kiln_node *node,
                                               uint32_t warps, uint32_t n_split,
                                               kiln_cuda_quant quant, kiln_kdesc **out_desc);

/* Whether attention_merge can quantize node's output (head_dim % 32 == 0). */
bool kiln_cuda_merge_quant_fits(const kiln_node *node);

/* ---- flash prefill attention (flash_attention.cu.tmpl): a pass of
 * several tokens ---- */

/* Whether flash_attention can take node with the flavor's tiles: head_dim
 * a multiple of 4 up to 256, n_head a multiple of n_head_kv, bq 1..16 rows
 * for each of 1..32 warps, bk 32/64/96/128, and (bq / warps) *
 * ceil(head_dim / 32) <= 64 output values a lane. Others keep the
 * one-block-per-(head, token) kernel (attention.cu.tmpl). Whether the
 * device has the shared memory (kiln_cuda_flash_smem_bytes) is the
 * caller's question. */
bool kiln_cuda_flash_fits(const kiln_node *node, const kiln_cuda_flash_shape *shape);

/* ATTENTION, prefill: flash_attention with the node's head_dim, n_head,
 * n_head_kv and scale and the shape's bq, bk and warps; grid
 * (ceil(n_tokens * n_head / n_head_kv / bq), n_head_kv), block 32 * warps,
 * kiln_cuda_flash_smem_bytes(head_dim, bq, bk) of dynamic shared memory;
 * arguments (q, k_cache, v_cache, y, step). KILN_STATUS_UNSUPPORTED,
 * naming the node and the reason, for what kiln_cuda_flash_fits refuses. */
kiln_status kiln_cuda_flash_attention_describe(const kiln_host_api *host,
                                               kiln_kcompiler *compiler, const kiln_node *node,
                                               const kiln_cuda_flash_shape *shape,
                                               kiln_kdesc **out_desc);

/* STORE_KV: store_kv with the cache's width (dst ne0) and KV type (dst's
 * type: F32, F16, BF16, or Q8_0 with the width a multiple of 32); any grid
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

/* ---- quantized activations (act_quant.cuh) and the fused kernels
 * (fused_describe.c) ---- */

/* "none", "q8", "q16": the mode as the templates bake it. */
const char *kiln_cuda_quant_name(kiln_cuda_quant q);

/* Bytes of one quantized column of k values (act_quant.cuh's
 * KILN_XQ_COL_STRIDE), k a multiple of 32; 0 for QUANT_NONE. */
uint64_t kiln_cuda_xq_col_bytes(int64_t k, kiln_cuda_quant q);

/* ---- the integer tensor-core prefill GEMM (gemm = q16mma, mmq.cu.tmpl,
 * mmq_describe.c) ---- */

/* Its tile: tile_m weight rows (a multiple of 16) by tile_n tokens (a
 * multiple of 8), `warps` warps dividing the tile's 16 x 8 fragments; and
 * its staging: prefetch 1 reads the next 128-value step into registers
 * while the warps compute this one (more registers a thread), 0 reads,
 * then computes. */
typedef struct kiln_cuda_mmq_shape {
  uint32_t tile_m;
  uint32_t tile_n;
  uint32_t warps;
  uint32_t prefetch;
} kiln_cuda_mmq_shape;

/* Whether the shape's geometry is one mmq.cu.tmpl takes (tile_m a
 * multiple of 16 in 16..256, tile_n of 8 in 8..256, warps 1..16 dividing
 * the tile's 16 x 8 fragments evenly) and its shared memory for the
 * largest type (Q4_K/Q5_K/Q6_K) and activations q is at most 48 KiB, and
 * prefetch is 0 or 1:
 * what [<plugin>] mmq_shape is checked against when the backend opens. */
bool kiln_cuda_mmq_shape_ok(const kiln_cuda_mmq_shape *shape, kiln_cuda_quant q);

/* Whether mmq decodes weights of type t (Q4_0, Q5_0, Q8_0, Q4_K, Q5_K,
 * Q6_K), and whether it can take MUL_MAT node (such a weight, K a
 * multiple of 128); prepare() gives any other node the bf16x3 GEMM
 * (kiln_cuda_gemm_of_node, cuda_backend.h). kiln_cuda_mmq_fit_of says
 * why not, for the line that counts them (describe_modes). */
typedef enum kiln_cuda_mmq_fit {
  KILN_CUDA_MMQ_FITS = 0,    /* mmq takes it */
  KILN_CUDA_MMQ_NOT_MUL_MAT, /* another op */
  KILN_CUDA_MMQ_TYPE,        /* a weight type mmq has no decoder for (F32, F16, BF16) */
  KILN_CUDA_MMQ_K,           /* K not whole 128-value steps */
  /* Not mmq's: the node feeds a recurrent state and recurrent_guard = f32
   * gives it the exact f32 GEMM, in every mode (kiln_cuda_gemm_of_node) */
  KILN_CUDA_GEMM_GUARDED
} kiln_cuda_mmq_fit;
bool kiln_cuda_mmq_type_ok(kiln_type t);
kiln_cuda_mmq_fit kiln_cuda_mmq_fit_of(const kiln_node *node);
bool kiln_cuda_mmq_ok(const kiln_node *node);

/* The static shared memory of mmq's block for weights of type t,
 * activations q and the shape. */
uint32_t kiln_cuda_mmq_shared_bytes(kiln_type t, kiln_cuda_quant q,
                                    const kiln_cuda_mmq_shape *shape);

/* MUL_MAT, prefill: mmq with the weight's type (mmq_type), its K, the
 * activations' quant (q16 or q8), and the shape (at most 48 KiB of shared
 * memory); grid (ceil(N / tile_m), ceil(n_cols / tile_n)), block 32 warps;
 * arguments (w, xq, y, N, n_cols): the weight buffer's base, its input
 * quantized by the quantize template at KILN_XQ_COL_STRIDE(K) a column,
 * and the f32 output [N, n_cols]. KILN_STATUS_UNSUPPORTED for a node
 * kiln_cuda_mmq_ok refuses, KILN_STATUS_INVALID_ARGUMENT for a bad shape. */
kiln_status kiln_cuda_mmq_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                   const kiln_node *node, kiln_cuda_quant q,
                                   const kiln_cuda_mmq_shape *shape, kiln_kdesc **out_desc);

/* Whether matvec_q can run MUL_MAT `node`: a block weight (Q4_0, Q5_0,
 * Q8_0, Q4_K, Q5_K, Q6_K) and no bias or an F32/F16/BF16 one. */
bool kiln_cuda_matvec_q_ok(const kiln_node *node);

/* What matvec_q needs of one of its matrices, copied from its node at
 * prepare time (so a group is described without its nodes). */
typedef struct kiln_cuda_mvq_member {
  kiln_type w_type;
  int64_t k, rows;
  int bias;    /* -1: none, else the bias's kiln_type */
  bool staged; /* its weight read through shared memory (load_m = staged) */
} kiln_cuda_mvq_member;

/* The member record of node (kiln_cuda_matvec_q_ok must hold). */
kiln_cuda_mvq_member kiln_cuda_mvq_member_of(const kiln_node *node);

/* matvec_q for 1..3 matrices sharing one input (same k) with the launch
 * shape (as matvec's) and q (Q8 or Q16); node names the errors. Grid
 * (sum of ceil(rows_m / (warps / k_split * rows_per_group *
 * groups_per_block)), n_cols), or with stages > 0 (x from 1 to that sum:
 * the blocks are persistent) and kiln_cuda_mvq_stage_bytes x stages of
 * dynamic shared memory; block 32 * warps; arguments (w0, w1, w2, b0, b1,
 * b2, y0, y1, y2, xq, n_cols), unused matrices' pointers 0.
 * KILN_STATUS_INVALID_ARGUMENT for a shape out of range, stages with a
 * staged member or groups_per_block > 1. */
kiln_status kiln_cuda_matvec_q_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, const kiln_cuda_mvq_member *m,
                                        uint32_t n_members, const kiln_cuda_matvec_shape *shape,
                                        kiln_cuda_quant q, kiln_kdesc **out_desc);

/* Bytes of one stage of matvec_q with stages > 0 (matvec_q.cu.tmpl's
 * KILN_MB_STAGE): a set of warps / k_split * rows_per_group rows of the
 * widest member, from the 16-byte word at or below its first byte to the
 * word past its last. */
uint64_t kiln_cuda_mvq_stage_bytes(const kiln_cuda_mvq_member *m, uint32_t n_members,
                                   const kiln_cuda_matvec_shape *shape);

/* Sets of rows of matvec_q with stages > 0 over the members: the most
 * blocks its grid can use. */
uint32_t kiln_cuda_mvq_sets(const kiln_cuda_mvq_member *m, uint32_t n_members,
                            const kiln_cuda_matvec_shape *shape);

/* quantize of MUL_MAT node's input (k = the weight's ne0, a multiple of
 * 32): grid (ceil(k / block_size), n_cols); arguments (x, xq, n_cols). */
kiln_status kiln_cuda_quantize_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, kiln_cuda_quant q,
                                        uint32_t block_size, kiln_kdesc **out_desc);

/* add_rmsnorm for RMS_NORM node (a whole-row norm: its weight as long as
 * its rows): eps, the row length and the weight type from the node, `add`
 * (fold the ADD that produced the norm's input in), q (NONE: no
 * quantized output). Grid n_rows; arguments (a, b, sum, w, y, xq,
 * n_rows). KILN_STATUS_INVALID_ARGUMENT for a per-head norm, or q with a
 * row that is not whole 32-value blocks. */
kiln_status kiln_cuda_add_rmsnorm_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                           const kiln_node *node, bool add, kiln_cuda_quant q,
                                           uint32_t block_size, kiln_kdesc **out_desc);

/* swiglu_q for SWIGLU node (width a multiple of 32), q Q8 or Q16: grid
 * (ceil(width / block_size), n_cols); arguments (a, b, y, xq, n_cols). */
kiln_status kiln_cuda_swiglu_q_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, kiln_cuda_quant q,
                                        uint32_t block_size, kiln_kdesc **out_desc);

/* rope_store for ROPE node q (the query heads) and ROPE node k (the key
 * heads: the same mode, n_rot, head_dim and theta, its n_head the KV
 * heads), writing caches of kv_type (the two STORE_KV nodes' caches);
 * node k names the errors. Grid (n_tokens, any); arguments (q, qo, k, ko,
 * k_cache, v, v_cache, step). KILN_STATUS_INVALID_ARGUMENT when the two
 * RoPEs differ in more than their heads, KILN_STATUS_UNSUPPORTED for a
 * kv_type other than F32, F16, BF16. */
kiln_status kiln_cuda_rope_store_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                          const kiln_rope_params *q, const kiln_node *k,
                                          kiln_type kv_type, uint32_t block_size,
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
