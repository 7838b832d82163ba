/* Nodes -> descriptors for the quantized-activation matvec (matvec_q),
 * its quantize kernel, and the fused kernels that produce its input
 * (add_rmsnorm, swiglu_q). Shapes, types, ε and biases come from the
 * nodes; the quantization from the backend's activations mode; the launch
 * shape from the caller. */
#include "config.h"

#include "kernel_templates.h"
#include "node_check.h"
#include "op_describe.h"

const char *kiln_cuda_quant_name(kiln_cuda_quant q) {
  return q == KILN_CUDA_QUANT_Q16 ? "q16" : q == KILN_CUDA_QUANT_Q8 ? "q8" : "none";
}

uint64_t kiln_cuda_xq_col_bytes(int64_t k, kiln_cuda_quant q) {
  if (q == KILN_CUDA_QUANT_NONE || k <= 0) return 0;
  /* act_quant.cuh's column: H[k] (and L[k] at 16 bits), k/32 float2
   * {s, S}, then k/8 int32 sums of X (KILN_XQ_COL_BYTES). */
  const uint64_t bytes = (uint64_t)k * (q == KILN_CUDA_QUANT_Q16 ? 2u : 1u) +
                         (uint64_t)k / 32u * 8u + (uint64_t)k / 8u * 4u;
  return (bytes + 15u) & ~(uint64_t)15u;
}

static bool block_type(kiln_type t) {
  return t == KILN_TYPE_Q4_0 || t == KILN_TYPE_Q5_0 || t == KILN_TYPE_Q8_0 || t == KILN_TYPE_Q4_K ||
         t == KILN_TYPE_Q5_K || t == KILN_TYPE_Q6_K;
}

/* Shared bytes one staged row of type t takes (matvec_q_stage.cuh's
 * SROW: the 16-byte words a warp step's 32 / LPB blocks can touch). */
static uint32_t staged_row_bytes(kiln_type t) {
  const uint32_t lpb = kiln_type_block_size(t) == 256 ? 8u : 2u; /* K-quants: 8 lanes a block */
  return 16u * (32u / lpb * (uint32_t)kiln_type_row_bytes(t, kiln_type_block_size(t)) / 16u + 2u);
}

bool kiln_cuda_matvec_q_ok(const kiln_node *node) {
  if (!node || node->op != KILN_OP_MUL_MAT || !node->src[0] || !block_type(node->src[0]->type))
    return false;
  const kiln_tensor *b = node->src[2];
  return !b || b->type == KILN_TYPE_F32 || b->type == KILN_TYPE_F16 || b->type == KILN_TYPE_BF16;
}

kiln_cuda_mvq_member kiln_cuda_mvq_member_of(const kiln_node *node) {
  kiln_cuda_mvq_member m = {node->src[0]->type, node->src[0]->ne[0], node->src[0]->ne[1],
                            node->src[2] ? (int)node->src[2]->type : -1, false};
  return m;
}

static kiln_status want_quant(const kiln_host_api *host, const kiln_node *node, kiln_cuda_quant q) {
  if (q != KILN_CUDA_QUANT_Q8 && q != KILN_CUDA_QUANT_Q16)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "quantized activations of %d bits (8 or 16)", (int)q);
  return NULL;
}

kiln_status kiln_cuda_matvec_q_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, const kiln_cuda_mvq_member *m,
                                        uint32_t n_members, const kiln_cuda_matvec_shape *shape,
                                        kiln_cuda_quant q, kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  if (!kiln_cuda_matvec_q_ok(node))
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "matvec_q needs a mul_mat of a block weight (Q4_0, Q5_0, Q8_0, Q4_K, "
                           "Q5_K, Q6_K) with no bias or an F32, F16 or BF16 one");
  KILN_RETURN_IF_ERROR(want_quant(host, node, q));
  if (n_members < 1 || n_members > 3)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "%u matrices in one matvec_q (1..3)", n_members);
  KILN_RETURN_IF_ERROR(
      kiln_cuda_describe_check_threads(host, node, "warps", shape->warps, 1, 32, false));
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, node, "k_split", shape->k_split, 1,
                                                        shape->warps, false));
  if (shape->warps % shape->k_split != 0)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "k_split %u does not divide warps %u", shape->k_split, shape->warps);
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, node, "rows_per_group",
                                                        shape->rows_per_group, 1, 8, false));
  KILN_RETURN_IF_ERROR(kiln_cuda_describe_check_threads(host, node, "groups_per_block",
                                                        shape->groups_per_block, 1, 64, false));
  if (shape->stages == 1 || shape->stages > 16)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "matvec_q stages %u (0, or 2..16)", shape->stages);
  if (shape->stages && shape->groups_per_block != 1)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "matvec_q with %u stages takes groups_per_block 1, not %u",
                           shape->stages, shape->groups_per_block);
  for (uint32_t i = 0; i < n_members; i++) {
    if (!block_type(m[i].w_type) || m[i].k != m[0].k || m[i].rows < 1 ||
        m[i].k % kiln_type_block_size(m[i].w_type) != 0 ||
        (m[i].bias >= 0 && m[i].bias != KILN_TYPE_F32 && m[i].bias != KILN_TYPE_F16 &&
         m[i].bias != KILN_TYPE_BF16))
      return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                             "matvec_q matrix %u (%s, k %lld, %lld rows) does not fit the group "
                             "(k %lld)",
                             i, kiln_type_name(m[i].w_type), (long long)m[i].k,
                             (long long)m[i].rows, (long long)m[0].k);
  }
  uint32_t srow = 0;
  for (uint32_t i = 0; i < n_members; i++)
    if (m[i].staged && staged_row_bytes(m[i].w_type) > srow) srow = staged_row_bytes(m[i].w_type);
  if (srow && shape->stages)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "matvec_q with %u stages reads every matrix directly (none staged)",
                           shape->stages);
  if (srow) {
    if ((uint64_t)shape->warps * shape->rows_per_group * srow > 48u * 1024u)
      return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                             "staged matvec_q: %u warps x %u rows x %u bytes exceed 48 KiB of "
                             "shared memory",
                             shape->warps, shape->rows_per_group, srow);
  }
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_MATVEC_Q, &d));
  kiln_status st = host->kdesc_set_str(d, "quant", kiln_cuda_quant_name(q));
  if (!st) st = host->kdesc_set_i64(d, "k", m[0].k);
  if (!st) st = host->kdesc_set_i64(d, "warps", shape->warps);
  if (!st) st = host->kdesc_set_i64(d, "k_split", shape->k_split);
  if (!st) st = host->kdesc_set_i64(d, "rows_per_group", shape->rows_per_group);
  if (!st) st = host->kdesc_set_i64(d, "groups_per_block", shape->groups_per_block);
  if (!st) st = host->kdesc_set_i64(d, "stages", shape->stages);
  static const char *const type_p[3] = {"type0", "type1", "type2"};
  static const char *const rows_p[3] = {"rows0", "rows1", "rows2"};
  static const char *const bias_p[3] = {"bias0", "bias1", "bias2"};
  static const char *const load_p[3] = {"load0", "load1", "load2"};
  for (uint32_t i = 0; i < 3 && !st; i++) {
    const bool here = i < n_members;
    st = host->kdesc_set_str(d, type_p[i], here ? kiln_type_name(m[i].w_type) : "none");
    if (!st) st = host->kdesc_set_i64(d, rows_p[i], here ? m[i].rows : 0);
    if (!st)
      st = host->kdesc_set_str(d, bias_p[i],
                               here && m[i].bias >= 0 ? kiln_type_name((kiln_type)m[i].bias)
                                                      : "none");
    if (!st) st = host->kdesc_set_str(d, load_p[i], here && m[i].staged ? "staged" : "direct");
  }
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

uint64_t kiln_cuda_mvq_stage_bytes(const kiln_cuda_mvq_member *m, uint32_t n_members,
                                   const kiln_cuda_matvec_shape *shape) {
  const uint64_t rpb = (uint64_t)shape->warps / shape->k_split * shape->rows_per_group;
  uint64_t most = 0;
  for (uint32_t i = 0; i < n_members; i++) {
    const uint64_t span = (rpb * (uint64_t)kiln_type_row_bytes(m[i].w_type, m[i].k) + 30u) / 16u * 16u;
    if (span > most) most = span;
  }
  return most;
}

uint32_t kiln_cuda_mvq_sets(const kiln_cuda_mvq_member *m, uint32_t n_members,
                            const kiln_cuda_matvec_shape *shape) {
  const int64_t rpb = (int64_t)shape->warps / shape->k_split * shape->rows_per_group;
  uint32_t sets = 0;
  for (uint32_t i = 0; i < n_members; i++) sets += (uint32_t)((m[i].rows + rpb - 1) / rpb);
  return sets;
}

kiln_status kiln_cuda_quantize_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, kiln_cuda_quant q,
                                        uint32_t block_size, kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  if (node->op != KILN_OP_MUL_MAT || node->src[0]->ne[0] % 32 != 0)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "quantize needs a mul_mat whose rows are whole 32-value blocks");
  KILN_RETURN_IF_ERROR(want_quant(host, node, q));
  KILN_RETURN_IF_ERROR(
      kiln_cuda_describe_check_threads(host, node, "block_size", block_size, 32, 1024, true));
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_QUANTIZE, &d));
  kiln_status st = host->kdesc_set_str(d, "quant", kiln_cuda_quant_name(q));
  if (!st) st = host->kdesc_set_i64(d, "k", node->src[0]->ne[0]);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

kiln_status kiln_cuda_add_rmsnorm_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                           const kiln_node *node, bool add, kiln_cuda_quant q,
                                           uint32_t block_size, kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  if (node->op != KILN_OP_RMS_NORM)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node, "not an rms_norm");
  const int64_t hidden = node->src[1]->ne[0];
  if (node->src[0]->ne[0] != hidden)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "add_rmsnorm normalizes whole rows: the weight has %lld values, a row "
                           "%lld",
                           (long long)hidden, (long long)node->src[0]->ne[0]);
  if (q != KILN_CUDA_QUANT_NONE) {
    KILN_RETURN_IF_ERROR(want_quant(host, node, q));
    if (hidden % 32 != 0)
      return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                             "a row of %lld values is not whole 32-value blocks to quantize",
                             (long long)hidden);
  }
  KILN_RETURN_IF_ERROR(
      kiln_cuda_describe_check_threads(host, node, "block_size", block_size, 32, 1024, true));
  if ((hidden + block_size - 1) / block_size > 32)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "a row of %lld values needs more than %u threads", (long long)hidden,
                           block_size);
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_ADD_RMSNORM, &d));
  kiln_status st = host->kdesc_set_f32(d, "eps", node->p.rms_norm.eps);
  if (!st) st = host->kdesc_set_i64(d, "hidden", hidden);
  if (!st) st = host->kdesc_set_dtype(d, "w_type", node->src[1]->type);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  if (!st) st = host->kdesc_set_i64(d, "add", add ? 1 : 0);
  if (!st) st = host->kdesc_set_str(d, "quant", kiln_cuda_quant_name(q));
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}

kiln_status kiln_cuda_swiglu_q_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                        const kiln_node *node, kiln_cuda_quant q,
                                        uint32_t block_size, kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  if (node->op != KILN_OP_SWIGLU || node->dst->ne[0] % 32 != 0)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "swiglu_q needs a swiglu whose width is whole 32-value blocks");
  KILN_RETURN_IF_ERROR(want_quant(host, node, q));
  KILN_RETURN_IF_ERROR(
      kiln_cuda_describe_check_threads(host, node, "block_size", block_size, 32, 1024, true));
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_SWIGLU_Q, &d));
  kiln_status st = host->kdesc_set_str(d, "quant", kiln_cuda_quant_name(q));
  if (!st) st = host->kdesc_set_i64(d, "k", node->dst->ne[0]);
  if (!st) st = host->kdesc_set_i64(d, "block_size", block_size);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}
