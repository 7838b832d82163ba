/* MUL_MAT nodes -> the mmq prefill GEMM's descriptor (gemm = q16mma,
 * kernels/mmq.cu.tmpl): which weights it takes, its tile shape's limits,
 * and its shared memory, so that prepare() can fall back to the bf16x3
 * GEMM for a node it cannot take instead of failing. */
#include "config.h"

#include "kernel_templates.h"
#include "node_check.h"
#include "op_describe.h"

bool kiln_cuda_mmq_type_ok(kiln_type t) {
  return t == KILN_TYPE_Q4_0 || t == KILN_TYPE_Q5_0 || t == KILN_TYPE_Q8_0 ||
         t == KILN_TYPE_Q4_K || t == KILN_TYPE_Q5_K || t == KILN_TYPE_Q6_K;
}

kiln_cuda_mmq_fit kiln_cuda_mmq_fit_of(const kiln_node *node) {
  if (node->op != KILN_OP_MUL_MAT) return KILN_CUDA_MMQ_NOT_MUL_MAT;
  const kiln_tensor *w = node->src[0];
  if (!kiln_cuda_mmq_type_ok(w->type)) return KILN_CUDA_MMQ_TYPE;
  /* whole 128-value steps (mmq.cu.tmpl's KILN_KSTEP); the K-quants' rows
   * are whole 256-value blocks already */
  if (w->ne[0] % 128 != 0 || w->ne[0] % kiln_type_block_size(w->type) != 0) return KILN_CUDA_MMQ_K;
  return KILN_CUDA_MMQ_FITS;
}

bool kiln_cuda_mmq_ok(const kiln_node *node) { return kiln_cuda_mmq_fit_of(node) == KILN_CUDA_MMQ_FITS; }

/* mmq.cu.tmpl's static shared memory for the shape: the weight's quants
 * and the activations' H (and L) rows of 144 bytes, the weight's scales
 * (and minimums) per sub-block, the activations' {s, S} per 32 values. */
uint32_t kiln_cuda_mmq_shared_bytes(kiln_type t, kiln_cuda_quant q,
                                    const kiln_cuda_mmq_shape *shape) {
  const uint32_t sb = t == KILN_TYPE_Q6_K ? 16u : 32u, nsb = 128u / sb;
  const bool min = t == KILN_TYPE_Q4_K || t == KILN_TYPE_Q5_K;
  return shape->tile_m * 144u + shape->tile_n * 144u * (q == KILN_CUDA_QUANT_Q16 ? 2u : 1u) +
         shape->tile_m * nsb * 4u * (min ? 2u : 1u) + shape->tile_n * 4u * 8u;
}

/* the geometry alone (mmq.cu.tmpl's #error lines) */
static bool mmq_geometry_ok(const kiln_cuda_mmq_shape *shape) {
  const uint32_t tm = shape->tile_m, tn = shape->tile_n, wp = shape->warps;
  if (tm < 16 || tm > 256 || tm % 16 != 0 || tn < 8 || tn > 256 || tn % 8 != 0 || wp < 1 ||
      wp > 16 || shape->prefetch > 1)
    return false;
  const uint32_t wm = wp < tm / 16 ? wp : tm / 16;
  return wp % wm == 0 && (tm / 16) % wm == 0 && (tn / 8) % (wp / wm) == 0;
}

bool kiln_cuda_mmq_shape_ok(const kiln_cuda_mmq_shape *shape, kiln_cuda_quant q) {
  /* Q4_K's scales and minimums take as many bytes as Q6_K's scales per 16
   * values: either is the largest */
  return mmq_geometry_ok(shape) &&
         kiln_cuda_mmq_shared_bytes(KILN_TYPE_Q4_K, q, shape) <= 48u * 1024u &&
         kiln_cuda_mmq_shared_bytes(KILN_TYPE_Q6_K, q, shape) <= 48u * 1024u;
}

kiln_status kiln_cuda_mmq_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                   const kiln_node *node, kiln_cuda_quant q,
                                   const kiln_cuda_mmq_shape *shape, kiln_kdesc **out_desc) {
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  if (!kiln_cuda_mmq_ok(node))
    return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node,
                           "mmq takes Q4_0|Q5_0|Q8_0|Q4_K|Q5_K|Q6_K weights with K a multiple "
                           "of 128, not %s with K %lld",
                           kiln_type_name(node->src[0]->type), (long long)node->src[0]->ne[0]);
  if (q != KILN_CUDA_QUANT_Q16 && q != KILN_CUDA_QUANT_Q8)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "mmq's activations must be q16 or q8");
  const uint32_t tm = shape->tile_m, tn = shape->tile_n, wp = shape->warps;
  if (!mmq_geometry_ok(shape))
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "mmq tile %ux%u with %u warps, prefetch %u: tile_m must be a "
                           "multiple of 16 (16..256), tile_n of 8 (8..256), the warps must "
                           "divide the tile's 16x8 fragments evenly, prefetch 0 or 1",
                           tm, tn, wp, shape->prefetch);
  const uint32_t smem = kiln_cuda_mmq_shared_bytes(node->src[0]->type, q, shape);
  if (smem > 48u * 1024u)
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "mmq tile %ux%u needs %u bytes of shared memory, past 48 KiB", tm, tn,
                           smem);
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, KILN_CUDA_T_MMQ, &d));
  kiln_status st = host->kdesc_set_dtype(d, "mmq_type", node->src[0]->type);
  if (!st) st = host->kdesc_set_str(d, "quant", kiln_cuda_quant_name(q));
  if (!st) st = host->kdesc_set_i64(d, "k", node->src[0]->ne[0]);
  if (!st) st = host->kdesc_set_i64(d, "tile_m", tm);
  if (!st) st = host->kdesc_set_i64(d, "tile_n", tn);
  if (!st) st = host->kdesc_set_i64(d, "warps", wp);
  if (!st) st = host->kdesc_set_i64(d, "prefetch", shape->prefetch);
  return kiln_cuda_describe_finish(host, st, d, node, out_desc);
}
