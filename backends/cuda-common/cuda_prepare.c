/* prepare(node): every kernel the node can need, for every path a step of
 * its plan can take (one token; several tokens on a batched backend),
 * resolved through the kernel-cache service with the node's own
 * parameters and loaded, so run() never compiles, loads or looks up. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "node_check.h"
#include "op_describe.h"
#include "qwen35_cuda.h"

/* Fixed launch shapes of the kernels with a baked block size; fixed so the
 * same node always resolves the same kernel. */
#define ELTWISE_BLOCK 256
#define ROWS_BLOCK 256
/* attention_mma's warps a block: 4 x 8.5 KiB of tiles at head_dim 128 */
#define MMA_ATTENTION_WARPS 4
#define ROPE_BLOCK 128
/* Weight-row groups below which a matvec splits rows between warps. */
#define MATVEC_SPLIT_BELOW 4096
#define QUANTIZE_BLOCK 256

kiln_status kiln_cuda_supports(void *backend, const kiln_node *node) {
  const kiln_cuda_backend *be = backend;
  return kiln_cuda_node_supports(be->host, node);
}

/* The state slot of node->id, grown as needed. */
static kiln_status state_slot(kiln_cuda_backend *be, const kiln_node *node,
                              kiln_cuda_node_state **out) {
  if (node->id < 0)
    return kiln_node_error(be->host, KILN_STATUS_INVALID_ARGUMENT, node, "node id %d",
                           (int)node->id);
  uint32_t id = (uint32_t)node->id;
  if (id >= be->n_states) {
    uint32_t n = be->n_states ? be->n_states : 64;
    while (n <= id) n *= 2;
    kiln_cuda_node_state *s = realloc(be->states, n * sizeof *s);
    if (!s) return be->host->status_new(KILN_STATUS_NO_MEMORY, "%s: node states", be->fl->name);
    memset(s + be->n_states, 0, (n - be->n_states) * sizeof *s);
    be->states = s;
    be->n_states = n;
  }
  *out = &be->states[id];
  return NULL;
}

/* The most tokens a step can give the node: its activations' capacity. */
static int64_t capacity(const kiln_node *node) {
  switch (node->op) {
  case KILN_OP_GET_ROWS: return node->src[1]->ne[0];
  case KILN_OP_STORE_KV: return node->src[0]->ne[1];
  default: return node->dst->ne[1];
  }
}

static kiln_status get_fn(kiln_cuda_backend *be, kiln_kdesc *d, const kiln_node *node,
                          CUfunction *out_fn) {
  kiln_kernel *k = NULL;
  KILN_RETURN_IF_ERROR(kiln_cuda_kernel_get(be->host, d, node, &k));
  return kiln_cuda_kernel_fn(be, k, node, out_fn);
}

static kiln_status prepare_norm(kiln_cuda_backend *be, const kiln_node *node,
                                kiln_cuda_rmsnorm_variant v, kiln_cuda_fn *out,
                                int64_t *out_rows_per_token) {
  /* row_vec reads float4s; a row length that is not a multiple of 4 (no
   * llama-family model has one) takes the warp-per-row kernel instead. */
  if (v == KILN_CUDA_RMSNORM_ROW_VEC && node->src[1]->ne[0] % 4 != 0) v = KILN_CUDA_RMSNORM_ROWS;
  kiln_kdesc *d = NULL;
  kiln_cuda_rmsnorm_launch l;
  KILN_RETURN_IF_ERROR(kiln_cuda_rmsnorm_describe(be->host, be->compiler, v, node, &d, &l));
  KILN_RETURN_IF_ERROR(get_fn(be, d, node, &out->fn));
  out->block = l.block_dim;
  out->per_block = l.rows_per_block;
  *out_rows_per_token = l.rows_per_token;
  return NULL;
}

/* The matvec's shape for a weight of n_rows rows. With few rows (the
 * attention projections, ffn_down: a few thousand) one warp per group of
 * rows would leave most of the device idle for lack of warps, so the
 * block's warps share each row's length (k_split = warps); with many
 * rows, each warp streams its own rows' whole length, which needs no
 * synchronization. */
static kiln_cuda_matvec_shape matvec_shape(const kiln_cuda_flavor *fl, int64_t n_rows) {
  kiln_cuda_matvec_shape s = {fl->matvec_warps, 1, fl->matvec_rows_per_group, 1, 0};
  if (n_rows / s.rows_per_group < MATVEC_SPLIT_BELOW) s.k_split = s.warps;
  return s;
}

/* gemm = q16mma, a weight mmq takes: mmq and the quantize kernel of its
 * input (q16 whatever [<plugin>] activations says: the GEMM's accuracy is
 * q16's), and room for every column the input can hold. A weight mmq does
 * not take (F32, F16, BF16; K not a multiple of 128) keeps bf16x3. */
static kiln_status prepare_mmq(kiln_cuda_backend *be, const kiln_node *node,
                               kiln_cuda_node_state *ns) {
  const kiln_cuda_mmq_shape shape = be->mmq_shape;
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(
      kiln_cuda_mmq_describe(be->host, be->compiler, node, KILN_CUDA_QUANT_Q16, &shape, &d));
  KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->mmq.fn));
  ns->mmq.block = 32 * shape.warps;
  ns->mmq.per_block = shape.tile_m;
  ns->mmq_tile_n = shape.tile_n;
  KILN_RETURN_IF_ERROR(kiln_cuda_quantize_describe(be->host, be->compiler, node,
                                                   KILN_CUDA_QUANT_Q16, QUANTIZE_BLOCK, &d));
  KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->mmq_input.fn));
  ns->mmq_input.block = QUANTIZE_BLOCK;
  return kiln_cuda_x16_reserve(be,
                               kiln_cuda_xq_col_bytes(node->src[0]->ne[0], KILN_CUDA_QUANT_Q16) *
                                   (uint64_t)node->src[1]->ne[1],
                               node);
}

static kiln_status prepare_mul_mat(kiln_cuda_backend *be, const kiln_node *node, bool batched,
                                   kiln_cuda_node_state *ns) {
  const kiln_host_api *host = be->host;
  kiln_kdesc *d = NULL;
  const kiln_cuda_matvec_shape shape = matvec_shape(be->fl, node->src[0]->ne[1]);
  KILN_RETURN_IF_ERROR(kiln_cuda_matvec_describe(host, be->compiler, node, &shape, &d));
  KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->decode.fn));
  ns->decode.block = 32 * shape.warps;
  ns->decode.per_block = shape.warps / shape.k_split * shape.rows_per_group; /* rows */
  ns->bias_fused = kiln_cuda_matvec_fuses_bias(node);
  if (node->src[2] && (!ns->bias_fused || batched)) {
    KILN_RETURN_IF_ERROR(kiln_cuda_bias_describe(host, be->compiler, node, ELTWISE_BLOCK, &d));
    KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->bias.fn));
    ns->bias.block = ELTWISE_BLOCK;
  }
  if (!batched) return NULL;
  /* the node's GEMM, kept for describe_modes to count */
  ns->gemm_batched = true;
  ns->gemm = kiln_cuda_gemm_of_node(be->gemm, be->recurrent_guard, node, &ns->gemm_why);
  if (ns->gemm == KILN_CUDA_GEMM_FP8) return kiln_cuda_fp8_prepare(be, node, ns);
  if (ns->gemm == KILN_CUDA_GEMM_Q16MMA) return prepare_mmq(be, node, ns);
  /* q16mma's fallback is bf16x3 in both: the same operand and terms */
  const unsigned terms = kiln_cuda_gemm_terms(ns->gemm);
  const int64_t k = node->src[0]->ne[0], n = node->src[0]->ne[1];
  const char *operand = kiln_cuda_gemm_operand(ns->gemm);
  if (node->src[0]->type != KILN_TYPE_F32 || terms) {
    /* cuBLAS reads the weight through a tile in the GEMM's operand form,
     * except an F32 weight in the f32 modes. */
    KILN_RETURN_IF_ERROR(kiln_cuda_dequant_describe(host, be->compiler, node, operand, ROWS_BLOCK, &d));
    KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->dequant.fn));
    ns->dequant.block = ROWS_BLOCK;
    KILN_RETURN_IF_ERROR(kiln_cuda_scratch_reserve(
        be, (uint64_t)kiln_cuda_tile_rows(be, ns->gemm, k, n) * kiln_cuda_tile_row_bytes(ns->gemm, k),
        node));
  }
  if (terms) {
    /* The activations' operand: every column the input can hold. */
    KILN_RETURN_IF_ERROR(kiln_cuda_gemm_input_describe(host, be->compiler, node, operand, ELTWISE_BLOCK, &d));
    KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->gemm_input.fn));
    ns->gemm_input.block = ELTWISE_BLOCK;
    KILN_RETURN_IF_ERROR(kiln_cuda_x16_reserve(
        be, (uint64_t)terms * (uint64_t)k * (uint64_t)node->src[1]->ne[1] *
                kiln_cuda_gemm_term_bytes(ns->gemm), node));
  }
  return NULL;
}

/* Makes the quantized-activation scratch hold at least `bytes`; a new one
 * holds no tensor's column yet. */
static kiln_status xq_reserve(kiln_cuda_backend *be, uint64_t bytes, const kiln_node *node) {
  bool grown = false;
  kiln_status st = kiln_cuda_mem_reserve(be, &be->xq, &be->xq_bytes, bytes, node,
                                         "the quantized-activation scratch", &grown);
  if (grown) be->xq_of = NULL;
  return st;
}

/* Makes the split decode attention's partials hold at least `bytes`. */
static kiln_status attn_part_reserve(kiln_cuda_backend *be, uint64_t bytes,
                                     const kiln_node *node) {
  bool grown = false;
  return kiln_cuda_mem_reserve(be, &be->attn_part, &be->attn_part_bytes, bytes, node,
                               "the split-attention partials", &grown);
}

/* Makes the fused merge's tickets cover n KV heads, a new buffer zeroed. */
static kiln_status attn_tickets_reserve(kiln_cuda_backend *be, uint32_t n, const kiln_node *node) {
  bool grown = false;
  KILN_RETURN_IF_ERROR(kiln_cuda_mem_reserve(be, &be->attn_tickets, &be->attn_tickets_bytes,
                                             4u * (uint64_t)n, node,
                                             "the split-attention tickets", &grown));
  if (!grown) return NULL;
  const CUresult r = be->cu->MemsetD32Async(be->attn_tickets, 0, n, be->stream);
  if (r == CUDA_SUCCESS) return NULL;
  be->attn_tickets_bytes = 0; /* not zeroed: the next prepare allocates again */
  return kiln_cu_error(be->host, be->cu, r, "cuMemsetD32Async(tickets)", node);
}

/* ATTENTION for steps of one token: split-KV attention (attention_split,
 * or attention_mma on tensor cores where [<plugin>] decode_attention = mma
 * and kiln_cuda_attention_mma_fits, over n_split splits of the keys for
 * each KV head, attention_split's last block of
 * each merging the group where [<plugin>] attention_merge = fused and
 * kiln_cuda_attention_fused_merge_fits, else then attention_merge) where the
 * node fits it, n_split from [<plugin>] attention_splits or
 * chosen for the device's SMs and the cache's length (n_ctx: the K
 * cache's positions); otherwise one block per query head. */
static kiln_status prepare_attention_decode(kiln_cuda_backend *be, const kiln_node *node,
                                            kiln_cuda_node_state *ns) {
  kiln_kdesc *d = NULL;
  if (!kiln_cuda_attention_split_fits(node)) {
    const uint32_t warps = be->fl->attention_warps_decode;
    KILN_RETURN_IF_ERROR(kiln_cuda_attention_describe(be->host, be->compiler, node, warps, &d));
    ns->decode.block = 32 * warps;
    return get_fn(be, d, node, &ns->decode.fn);
  }
  const bool mma = be->attn_mma && kiln_cuda_attention_mma_fits(node);
  const uint32_t warps = mma ? MMA_ATTENTION_WARPS : be->fl->attention_warps_split;
  const uint32_t n_split =
      be->attn_splits_forced
          ? be->attn_splits_forced
          : kiln_cuda_attention_splits_auto(be->sm_count, node->src[1]->ne[1],
                                            node->p.attention.n_head_kv, warps);
  /* With quantized activations the merge writes its output quantized too:
   * the output projection reads it next (kiln_cuda_xq_set at the launch). */
  const kiln_cuda_quant mq = kiln_cuda_merge_quant_fits(node) ? be->act : KILN_CUDA_QUANT_NONE;
  const bool fused =
      !mma && !be->attn_merge_kernel && kiln_cuda_attention_fused_merge_fits(node, n_split);
  if (mma) {
    KILN_RETURN_IF_ERROR(
        kiln_cuda_attention_mma_describe(be->host, be->compiler, node, warps, n_split, &d));
    ns->decode.shared = kiln_cuda_attention_mma_smem(node->p.attention.head_dim, warps);
  } else {
    KILN_RETURN_IF_ERROR(kiln_cuda_attention_split_describe(
        be->host, be->compiler, node, warps, n_split, fused, fused ? mq : KILN_CUDA_QUANT_NONE, &d));
    ns->decode.shared = 0;
  }
  KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->decode.fn));
  ns->decode.block = 32 * warps;
  ns->attn_merge.fn = NULL;
  if (fused) {
    KILN_RETURN_IF_ERROR(attn_tickets_reserve(be, (uint32_t)node->p.attention.n_head_kv, node));
  } else {
    KILN_RETURN_IF_ERROR(
        kiln_cuda_attention_merge_describe(be->host, be->compiler, node, warps, n_split, mq, &d));
    KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->attn_merge.fn));
    ns->attn_merge.block = 32 * warps;
  }
  ns->attn_splits = n_split;
  ns->attn_fused_merge = fused;
  ns->merge_quant = mq != KILN_CUDA_QUANT_NONE;
  if (ns->merge_quant)
    KILN_RETURN_IF_ERROR(xq_reserve(
        be, kiln_cuda_xq_col_bytes((int64_t)node->p.attention.head_dim * node->p.attention.n_head, mq),
        node));
  return attn_part_reserve(be, kiln_cuda_attention_part_bytes(node, n_split), node);
}

/* ATTENTION for steps of several tokens on a batched flavor: flash
 * attention (flash_attention, the flavor's tiles) unless [<plugin>]
 * prefill_attention = rows, the node is one it cannot hold
 * (kiln_cuda_flash_fits), or the device cannot give a block the shared
 * memory it needs (said once per node at info level); otherwise the
 * one-block-per-(head, token) kernel. */
static kiln_status prepare_attention_prefill(kiln_cuda_backend *be, const kiln_node *node,
                                             kiln_cuda_node_state *ns) {
  const kiln_cuda_flash_shape *fs = &be->fl->flash;
  kiln_kdesc *d = NULL;
  if (be->prefill_flash && kiln_cuda_flash_fits(node, fs)) {
    const uint64_t smem =
        kiln_cuda_flash_smem_bytes((uint32_t)node->p.attention.head_dim, fs->bq, fs->bk);
    if (smem <= (uint64_t)be->smem_optin) {
      KILN_RETURN_IF_ERROR(kiln_cuda_flash_attention_describe(be->host, be->compiler, node, fs, &d));
      CUfunction fn = NULL;
      KILN_RETURN_IF_ERROR(get_fn(be, d, node, &fn));
      /* Above the default 48 KiB a launch fails unless the function is
       * allowed more; setting it again for another node is harmless. */
      if (smem > 48u * 1024u)
        KILN_CU_CHECK(be->host, be->cu, node,
                      FuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       (int)smem));
      ns->prefill = (kiln_cuda_fn){.fn = fn, .block = 32 * fs->warps, .per_block = fs->bq,
                                   .shared = (uint32_t)smem};
      return NULL;
    }
    be->host->log(KILN_LOG_INFO, be->fl->name,
                  "%.*s: flash attention needs %llu bytes of shared memory a block, the device "
                  "allows %d: one block per (head, token) instead",
                  KILN_NAME_MAX, node->name, (unsigned long long)smem, be->smem_optin);
  }
  const uint32_t warps = be->fl->attention_warps;
  KILN_RETURN_IF_ERROR(kiln_cuda_attention_describe(be->host, be->compiler, node, warps, &d));
  ns->prefill = (kiln_cuda_fn){.block = 32 * warps};
  return get_fn(be, d, node, &ns->prefill.fn);
}

/* Whether a block type's blocks are only 2-byte aligned (sizes 18, 22, 34,
 * 210): read directly, a decoder takes them in 2-byte pieces, and every
 * piece fetches whole sectors again (L1 is bypassed for weights). Q4_K's
 * 144 and Q5_K's 176 bytes are multiples of 16: read directly, in 16-byte
 * loads. */
static bool mvq_unaligned(kiln_type t) { return t != KILN_TYPE_Q4_K && t != KILN_TYPE_Q5_K; }

/* The persistent bulk-copy shape (stages > 0) for the matrices m[0..n-1]
 * where the H200 measured it faster (tools/device/mvq-bulk/, README
 * "Speed"; 2026-12-04, with programmatic launch): 7B-wide Q4_K gate+up
 * (3584 x 2 x 18944) 23.1 us against 28.4 block per set, the Q4_K down
 * projection (18944 x 3584) 14.0 against 20.3, the Q6_K down projection
 * 25.0 against 32.6 staged (the same shape: 8 warps sharing a row), the
 * Q6_K output head (3584 x 152064) 138.1 against 190.4 (8 rows a group);
 * the small Q/K/V and output projections were not faster, so they keep the
 * block-per-set grid. Q5_K takes Q4_K's shapes (Q5_K_M's and Q5_K_S's
 * gate+up and down, a Q4_K_M's fused attn_qkv): the same lanes and
 * 16-byte loads, 176 bytes a block for 144; no device has measured Q5_K
 * yet, so these are Q4_K's numbers, not its own. Warps 0: none. */
static kiln_cuda_matvec_shape mvq_bulk_shape(const kiln_cuda_mvq_member *m, uint32_t n) {
  int64_t rows = 0;
  bool all_q4k = true, all_q6k = true; /* all_q4k: Q4_K or Q5_K */
  for (uint32_t i = 0; i < n; i++) {
    rows += m[i].rows;
    all_q4k = all_q4k && (m[i].w_type == KILN_TYPE_Q4_K || m[i].w_type == KILN_TYPE_Q5_K);
    all_q6k = all_q6k && m[i].w_type == KILN_TYPE_Q6_K;
  }
  const bool long_rows = m[0].k >= 8192;
  if (all_q4k && !long_rows && rows >= 16384) return (kiln_cuda_matvec_shape){8, 4, 8, 1, 2};
  if ((all_q4k || all_q6k) && long_rows && rows >= 2048)
    return (kiln_cuda_matvec_shape){8, 8, 4, 1, 2};
  if (all_q6k && !long_rows && rows >= 32768) return (kiln_cuda_matvec_shape){4, 4, 8, 1, 2};
  return (kiln_cuda_matvec_shape){0, 0, 0, 0, 0};
}

/* Whether a block of `shape` over m fits the device's shared memory (with
 * 1 KiB for the block's static arrays and the driver's share). */
static bool mvq_bulk_fits(const kiln_cuda_backend *be, const kiln_cuda_mvq_member *m, uint32_t n,
                          const kiln_cuda_matvec_shape *shape) {
  return (uint64_t)shape->stages * kiln_cuda_mvq_stage_bytes(m, n, shape) + 1024u <=
         (uint64_t)be->smem_optin;
}

/* matvec_q's shape for the matrices m[0..n-1], and which of them are
 * staged through shared memory ([<plugin>] matvec_load; auto: the
 * unaligned types). [<plugin>] matvec_shape when set; else with
 * matvec_load = bulk (compute capability 9.0 and up: open() checks) or
 * auto on a 9.x device (where it was measured: the cc120 flavor's 12.x
 * devices have less shared memory a multiprocessor), the bulk shape
 * where one was measured faster (bulk: 8,4,4,1,2 where none was); else
 * chosen by the H200 sweep of tools/device/mvq-sweep.sh (7B-wide Q4_K and
 * Q6_K matrices; README, "Speed"): mostly direct rows take 4 warps sharing
 * a row 4 ways (2 ways for rows of 8192 values or more), mostly staged
 * rows 8 warps sharing it 4 ways with 4 rows a group (2 for few long
 * rows). Q5_K, direct like Q4_K, takes Q4_K's shapes unmeasured (no device
 * has run it). A shape with stages reads every matrix directly. */
static kiln_cuda_matvec_shape mvq_shape(const kiln_cuda_backend *be, kiln_cuda_mvq_member *m,
                                        uint32_t n) {
  int64_t staged_rows = 0, rows = 0;
  for (uint32_t i = 0; i < n; i++) {
    m[i].staged = be->mvq_load == 2 || (be->mvq_load == 0 && mvq_unaligned(m[i].w_type));
    staged_rows += m[i].staged ? m[i].rows : 0;
    rows += m[i].rows;
  }
  kiln_cuda_matvec_shape s = {0, 0, 0, 0, 0};
  if (be->mvq_forced.warps) {
    s = be->mvq_forced;
  } else if ((be->mvq_load == 0 && be->cc_major == 9) || be->mvq_load == 3) {
    s = mvq_bulk_shape(m, n);
    if (!s.warps && be->mvq_load == 3) s = (kiln_cuda_matvec_shape){8, 4, 4, 1, 2};
    if (s.warps && !mvq_bulk_fits(be, m, n, &s)) s.warps = 0;
  }
  if (s.warps) {
    if (s.stages)
      for (uint32_t i = 0; i < n; i++) m[i].staged = false;
    return s;
  }
  const bool long_rows = m[0].k >= 8192;
  s = (kiln_cuda_matvec_shape){4, long_rows ? 2u : 4u, 2, 1, 0};
  if (2 * staged_rows > rows)
    s = (kiln_cuda_matvec_shape){8, 4, long_rows && rows < 8192 ? 2u : 4u, 1, 0};
  return s;
}

/* Blocks of matvec_q over `rows` rows. */
static uint32_t mvq_blocks(const kiln_cuda_matvec_shape *s, int64_t rows) {
  const int64_t rpb = (int64_t)(s->warps / s->k_split * s->rows_per_group * s->groups_per_block);
  return (uint32_t)((rows + rpb - 1) / rpb);
}

/* The launch of matvec_q function fn of `shape` over m: the grid's x and
 * the dynamic shared memory. Without stages a block per set of rows; with
 * stages as many persistent blocks as the multiprocessors hold at once (at
 * most one a set), the function allowed the stages' shared memory. */
static kiln_status mvq_launch_shape(kiln_cuda_backend *be, const kiln_node *node, CUfunction fn,
                                    const kiln_cuda_mvq_member *m, uint32_t n,
                                    const kiln_cuda_matvec_shape *shape, uint32_t *out_grid,
                                    uint32_t *out_shared) {
  *out_shared = 0;
  if (!shape->stages) {
    uint32_t grid = 0;
    for (uint32_t i = 0; i < n; i++) grid += mvq_blocks(shape, m[i].rows);
    *out_grid = grid;
    return NULL;
  }
  const uint64_t smem = (uint64_t)shape->stages * kiln_cuda_mvq_stage_bytes(m, n, shape);
  if (smem + 1024u > (uint64_t)be->smem_optin)
    return kiln_node_error(be->host, KILN_STATUS_UNSUPPORTED, node,
                           "matvec_q with %u stages needs %llu bytes of shared memory a block, "
                           "the device allows %d ([%s] matvec_shape)",
                           shape->stages, (unsigned long long)smem, be->smem_optin, be->fl->name);
  if (smem > 48u * 1024u)
    KILN_CU_CHECK(be->host, be->cu, node,
                  FuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem));
  int per_sm = 0;
  KILN_CU_CHECK(be->host, be->cu, node,
                OccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, (int)(32 * shape->warps),
                                                          (size_t)smem));
  if (per_sm < 1)
    return kiln_node_error(be->host, KILN_STATUS_UNSUPPORTED, node,
                           "matvec_q with %u stages: no block of %u warps and %llu bytes of "
                           "shared memory fits a multiprocessor",
                           shape->stages, shape->warps, (unsigned long long)smem);
  const uint64_t most = (uint64_t)per_sm * (uint64_t)be->sm_count;
  const uint32_t sets = kiln_cuda_mvq_sets(m, n, shape);
  *out_grid = most < sets ? (uint32_t)most : sets;
  *out_shared = (uint32_t)smem;
  return NULL;
}

/* A profile label for a matvec_q of n matrices: "matvec_q16 Q4_K 3584x3584
 * +bias, Q6_K 3584x512 [T=1]" ("matvec_q16 bulk ..." with stages). */
static void mvq_label(const kiln_cuda_backend *be, const kiln_cuda_mvq_member *m, uint32_t n,
                      const kiln_cuda_matvec_shape *shape, char *buf, size_t size) {
  int used = snprintf(buf, size, "matvec_%s%s", kiln_cuda_quant_name(be->act),
                      shape->stages ? " bulk" : "");
  for (uint32_t i = 0; i < n && used > 0 && (size_t)used < size; i++)
    used += snprintf(buf + used, size - (size_t)used, "%s %s %lldx%lld%s%s", i ? "," : "",
                     kiln_type_name(m[i].w_type), (long long)m[i].k, (long long)m[i].rows,
                     m[i].bias >= 0 ? " +bias" : "", m[i].staged ? " staged" : "");
  if (used > 0 && (size_t)used < size) snprintf(buf + used, size - (size_t)used, " [T=1]");
}

/* node (a matvec_q matrix) joins the MUL_MAT just before it when that one
 * reads the same input with the same row length: a layer's Q, K, V (or
 * gate, up) become one launch, prepared on the group's first node. */
static kiln_status prepare_mvq_group(kiln_cuda_backend *be, const kiln_node *node,
                                     kiln_cuda_node_state *ns) {
  if (!be->fuse || node->id < 1 || (uint32_t)node->id > be->n_states) return NULL;
  kiln_cuda_node_state *prev = &be->states[node->id - 1];
  if (!prev->node || !prev->mvq.fn || prev->snap.src[1] != node->src[1] ||
      prev->mvq_self.k != ns->mvq_self.k)
    return NULL;
  kiln_cuda_node_state *lead = prev;
  if (node->id >= 2) {
    kiln_cuda_node_state *pp = &be->states[node->id - 2];
    if (pp->node && pp->n_group == 2 && pp->group[1] == prev->node) lead = pp;
  }
  const uint32_t n = lead == prev ? 2 : 3;
  kiln_cuda_mvq_member m[3];
  const kiln_node *nodes[3];
  for (uint32_t i = 0; i + 1 < n; i++) {
    const kiln_cuda_node_state *s = &be->states[lead->snap.id + (int32_t)i];
    m[i] = s->mvq_self;
    nodes[i] = s->node;
  }
  m[n - 1] = ns->mvq_self;
  nodes[n - 1] = node;
  const kiln_cuda_matvec_shape shape = mvq_shape(be, m, n);
  kiln_kdesc *d = NULL;
  kiln_cuda_fn f = {0};
  KILN_RETURN_IF_ERROR(
      kiln_cuda_matvec_q_describe(be->host, be->compiler, node, m, n, &shape, be->act, &d));
  KILN_RETURN_IF_ERROR(get_fn(be, d, node, &f.fn));
  f.block = 32 * shape.warps;
  uint32_t grid = 0;
  KILN_RETURN_IF_ERROR(mvq_launch_shape(be, node, f.fn, m, n, &shape, &grid, &f.shared));
  char label[sizeof be->prof.kinds[0].label];
  mvq_label(be, m, n, &shape, label, sizeof label);
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < n; i++)
    bytes += (uint64_t)kiln_type_row_bytes(m[i].w_type, m[i].k) * (uint64_t)m[i].rows;
  KILN_RETURN_IF_ERROR(kiln_cuda_prof_kind_of(be, label, bytes, 0, &lead->prof_fused[2]));
  lead->mvq_group = f;
  lead->n_group = n;
  lead->grid_group = grid;
  for (uint32_t i = 0; i < 3; i++) lead->group[i] = i < n ? nodes[i] : NULL;
  return NULL;
}

/* activations = q16 / q8: matvec_q of this matrix, its quantize kernel,
 * the scratch, and the group it may join; none for a matvec that feeds a
 * recurrent state under recurrent_guard = f32 (kiln/graph.h,
 * kiln_mul_mat_params), which then takes the f32 matvec prepare_mul_mat
 * made, and whose producer (fused norm, SwiGLU) writes no quantized copy
 * for it (cuda_fuse.c asks for matvec_q). */
static kiln_status prepare_mvq(kiln_cuda_backend *be, const kiln_node *node,
                               kiln_cuda_node_state *ns) {
  if (be->act == KILN_CUDA_QUANT_NONE || !kiln_cuda_matvec_q_ok(node)) return NULL;
  if (be->recurrent_guard && node->p.mul_mat.feeds_recurrent) return NULL;
  const kiln_host_api *host = be->host;
  ns->mvq_self = kiln_cuda_mvq_member_of(node);
  const kiln_cuda_matvec_shape shape = mvq_shape(be, &ns->mvq_self, 1);
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(
      kiln_cuda_matvec_q_describe(host, be->compiler, node, &ns->mvq_self, 1, &shape, be->act, &d));
  KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->mvq.fn));
  ns->mvq.block = 32 * shape.warps;
  /* per_block: the grid, in blocks */
  KILN_RETURN_IF_ERROR(mvq_launch_shape(be, node, ns->mvq.fn, &ns->mvq_self, 1, &shape,
                                        &ns->mvq.per_block, &ns->mvq.shared));
  KILN_RETURN_IF_ERROR(
      kiln_cuda_quantize_describe(host, be->compiler, node, be->act, QUANTIZE_BLOCK, &d));
  KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->quantize.fn));
  ns->quantize.block = QUANTIZE_BLOCK;
  KILN_RETURN_IF_ERROR(xq_reserve(be, kiln_cuda_xq_col_bytes(ns->mvq_self.k, be->act), node));
  char label[sizeof be->prof.kinds[0].label];
  snprintf(label, sizeof label, "quantize %s %lld [T=1]", kiln_cuda_quant_name(be->act),
           (long long)ns->mvq_self.k);
  KILN_RETURN_IF_ERROR(kiln_cuda_prof_kind_of(be, label, 0, 0, &ns->prof_fused[0]));
  mvq_label(be, &ns->mvq_self, 1, &shape, label, sizeof label);
  KILN_RETURN_IF_ERROR(kiln_cuda_prof_kind_of(be, label, node->src[0]->nbytes, 0, &ns->prof_fused[1]));
  return prepare_mvq_group(be, node, ns);
}

/* Threads of an add_rmsnorm block for rows of `hidden`: about 4 values a
 * thread, whole warps. */
static uint32_t add_norm_block(int64_t hidden) {
  int64_t b = ((hidden + 3) / 4 + 31) / 32 * 32;
  return b < 32 ? 32 : b > 1024 ? 1024 : (uint32_t)b;
}

/* RMS_NORM of whole rows: add_rmsnorm with the producing ADD folded in,
 * and (activations q16 / q8) quantizing the normed row, with and without
 * the ADD; run() uses them where the neighbours are there. */
static kiln_status prepare_norm_fused(kiln_cuda_backend *be, const kiln_node *node,
                                      kiln_cuda_node_state *ns) {
  const int64_t hidden = node->src[1]->ne[0];
  if (!be->fuse || ns->rows_per_token != 1 || node->src[0]->ne[0] != hidden) return NULL;
  const uint32_t block = add_norm_block(hidden);
  kiln_kdesc *d = NULL;
  char label[sizeof be->prof.kinds[0].label];
  KILN_RETURN_IF_ERROR(kiln_cuda_add_rmsnorm_describe(be->host, be->compiler, node, true,
                                                      KILN_CUDA_QUANT_NONE, block, &d));
  KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->add_norm.fn));
  ns->add_norm.block = block;
  snprintf(label, sizeof label, "add+rms_norm %lld [T=1]", (long long)hidden);
  KILN_RETURN_IF_ERROR(kiln_cuda_prof_kind_of(be, label, 0, 0, &ns->prof_fused[0]));
  if (be->act == KILN_CUDA_QUANT_NONE || hidden % 32 != 0) return NULL;
  KILN_RETURN_IF_ERROR(
      kiln_cuda_add_rmsnorm_describe(be->host, be->compiler, node, true, be->act, block, &d));
  KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->add_norm_q.fn));
  ns->add_norm_q.block = block;
  KILN_RETURN_IF_ERROR(
      kiln_cuda_add_rmsnorm_describe(be->host, be->compiler, node, false, be->act, block, &d));
  KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->norm_q.fn));
  ns->norm_q.block = block;
  KILN_RETURN_IF_ERROR(xq_reserve(be, kiln_cuda_xq_col_bytes(hidden, be->act), node));
  snprintf(label, sizeof label, "add+rms_norm+%s %lld [T=1]", kiln_cuda_quant_name(be->act),
           (long long)hidden);
  KILN_RETURN_IF_ERROR(kiln_cuda_prof_kind_of(be, label, 0, 0, &ns->prof_fused[1]));
  snprintf(label, sizeof label, "rms_norm+%s %lld [T=1]", kiln_cuda_quant_name(be->act),
           (long long)hidden);
  return kiln_cuda_prof_kind_of(be, label, 0, 0, &ns->prof_fused[2]);
}

/* SWIGLU whose output a matvec_q reads: swiglu_q. */
static kiln_status prepare_swiglu_fused(kiln_cuda_backend *be, const kiln_node *node,
                                        kiln_cuda_node_state *ns) {
  if (!be->fuse || be->act == KILN_CUDA_QUANT_NONE || node->dst->ne[0] % 32 != 0) return NULL;
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(
      kiln_cuda_swiglu_q_describe(be->host, be->compiler, node, be->act, ELTWISE_BLOCK, &d));
  KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->swiglu_q.fn));
  ns->swiglu_q.block = ELTWISE_BLOCK;
  KILN_RETURN_IF_ERROR(
      xq_reserve(be, kiln_cuda_xq_col_bytes(node->dst->ne[0], be->act), node));
  char label[sizeof be->prof.kinds[0].label];
  snprintf(label, sizeof label, "swiglu+%s %lld [T=1]", kiln_cuda_quant_name(be->act),
           (long long)node->dst->ne[0]);
  return kiln_cuda_prof_kind_of(be, label, 0, 0, &ns->prof_fused[0]);
}

/* The second of a layer's cache stores (node: STORE_KV of V) right after
 * ROPE(q), ROPE(k) with the same rotation and the store of the rotated K,
 * both caches F32, F16 or BF16: rope_store for them on ROPE(q)'s state,
 * for run() to use when the four nodes come together. Made here, where
 * the caches' type is known (a Q8_0 cache keeps the separate kernels:
 * store_kv quantizes whole blocks). */
static kiln_status prepare_rope_fused(kiln_cuda_backend *be, const kiln_node *node) {
  if (!be->fuse || node->id < 3) return NULL;
  kiln_cuda_node_state *qs = &be->states[node->id - 3];
  const kiln_cuda_node_state *ks = &be->states[node->id - 2], *ss = &be->states[node->id - 1];
  if (!qs->node || !ks->node || !ss->node || qs->snap.op != KILN_OP_ROPE ||
      ks->snap.op != KILN_OP_ROPE || ss->snap.op != KILN_OP_STORE_KV)
    return NULL;
  const kiln_rope_params *q = &qs->snap.p.rope, *k = &ks->snap.p.rope;
  if (q->mode == KILN_ROPE_IMROPE || q->mode != k->mode || q->n_rot != k->n_rot ||
      q->head_dim != k->head_dim || q->theta != k->theta || ss->node->src[0] != ks->node->dst)
    return NULL;
  const kiln_type kv = node->dst->type;
  if (ss->node->dst->type != kv ||
      (kv != KILN_TYPE_F32 && kv != KILN_TYPE_F16 && kv != KILN_TYPE_BF16))
    return NULL;
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(
      kiln_cuda_rope_store_describe(be->host, be->compiler, q, ks->node, kv, ROPE_BLOCK, &d));
  kiln_cuda_fn f = {0};
  KILN_RETURN_IF_ERROR(get_fn(be, d, ks->node, &f.fn));
  f.block = ROPE_BLOCK;
  char label[sizeof be->prof.kinds[0].label];
  snprintf(label, sizeof label, "rope+store_kv %dx%d [T=1]", (int)q->n_head, (int)k->n_head);
  KILN_RETURN_IF_ERROR(kiln_cuda_prof_kind_of(be, label, 0, 0, &qs->prof_fused[0]));
  qs->rope_store = f;
  qs->rope_k = ks->node;
  qs->rope_store_kv = kv;
  return NULL;
}

kiln_status kiln_cuda_describe_modes(void *backend, char *out_line, size_t cap) {
  const kiln_cuda_backend *be = backend;
  if (!cap) return NULL;
  out_line[0] = '\0';
  if (!be->fl->has_gemm_keys) return NULL; /* cuda-serial: no GEMM */
  kiln_cuda_gemm_tally t = {0};
  for (uint32_t i = 0; i < be->n_states; i++) {
    const kiln_cuda_node_state *ns = &be->states[i];
    if (ns->node && ns->gemm_batched)
      kiln_cuda_gemm_tally_add(&t, ns->gemm, ns->gemm_why, ns->node->src[0]->type);
  }
  kiln_cuda_gemm_line(be->gemm_asked, be->gemm, be->cc_major, be->cc_minor, &t, out_line, cap);
  return NULL;
}

kiln_status kiln_cuda_prepare(void *backend, const kiln_node *node) {
  kiln_cuda_backend *be = backend;
  const kiln_host_api *host = be->host;
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  KILN_RETURN_IF_ERROR(kiln_cuda_enter(be));
  kiln_cuda_graph_drop_all(be); /* a graph belongs to the plan as it was */
  kiln_cuda_node_state *ns = NULL;
  KILN_RETURN_IF_ERROR(state_slot(be, node, &ns));
  memset(ns, 0, sizeof *ns);
  for (int i = 0; i < 3; i++) ns->prof_fused[i] = UINT32_MAX;
  const bool batched = be->fl->prefill == KILN_CUDA_PREFILL_BATCHED && capacity(node) > 1;
  kiln_kdesc *d = NULL;
  kiln_status st = NULL;
  switch (node->op) {
  case KILN_OP_GET_ROWS:
    st = kiln_cuda_get_rows_describe(host, be->compiler, node, ELTWISE_BLOCK, &d);
    if (!st) st = get_fn(be, d, node, &ns->decode.fn);
    ns->decode.block = ELTWISE_BLOCK;
    break;
  case KILN_OP_RMS_NORM:
    st = prepare_norm(be, node, be->fl->norm_decode, &ns->decode, &ns->rows_per_token);
    if (!st && batched)
      st = prepare_norm(be, node, be->fl->norm_prefill, &ns->prefill, &ns->rows_per_token);
    if (!st) st = prepare_norm_fused(be, node, ns);
    break;
  case KILN_OP_MUL_MAT:
    st = prepare_mul_mat(be, node, batched, ns);
    if (!st) st = prepare_mvq(be, node, ns);
    break;
  case KILN_OP_SLICE: case KILN_OP_SIGMOID_MUL: case KILN_OP_SSM_CONV: case KILN_OP_GDN_GATE:
  case KILN_OP_GATED_DELTA_NET:
    st = kiln_cuda_qwen35_prepare(be, node, batched, ns);
    break;
  case KILN_OP_ROPE:
    if (node->p.rope.mode == KILN_ROPE_IMROPE) {
      st = kiln_cuda_qwen35_prepare(be, node, batched, ns);
      break;
    }
    st = kiln_cuda_rope_describe(host, be->compiler, node, ROPE_BLOCK, &d);
    if (!st) st = get_fn(be, d, node, &ns->decode.fn);
    ns->decode.block = ROPE_BLOCK;
    break;
  case KILN_OP_ATTENTION:
    st = prepare_attention_decode(be, node, ns);
    if (!st && batched) st = prepare_attention_prefill(be, node, ns);
    break;
  case KILN_OP_SWIGLU:
  case KILN_OP_ADD:
    st = kiln_cuda_eltwise_describe(host, be->compiler, node, ELTWISE_BLOCK, &d);
    if (!st) st = get_fn(be, d, node, &ns->decode.fn);
    ns->decode.block = ELTWISE_BLOCK;
    if (!st && node->op == KILN_OP_SWIGLU) st = prepare_swiglu_fused(be, node, ns);
    break;
  case KILN_OP_STORE_KV:
    st = kiln_cuda_store_kv_describe(host, be->compiler, node, ELTWISE_BLOCK, &d);
    if (!st) st = get_fn(be, d, node, &ns->decode.fn);
    ns->decode.block = ELTWISE_BLOCK;
    if (!st) st = prepare_rope_fused(be, node);
    break;
  case KILN_OP_GET_COLUMNS:
    break; /* device-to-device copies: no kernel */
  default:
    st = kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node, "op id %d", (int)node->op);
  }
  if (!st) st = kiln_cuda_prof_prepare(be, node, ns);
  if (st) {
    memset(ns, 0, sizeof *ns);
    return st;
  }
  ns->node = node;
  memcpy(&ns->snap, node, sizeof *node); /* padding too: run() compares bytes */
  return NULL;
}
