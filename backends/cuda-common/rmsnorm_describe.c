/* RMSNorm nodes -> kernel descriptors. Every baked value comes from the
 * node (ε from its params, hidden and the weight type from its weight
 * tensor) or is derived from those; there are no constants here that could
 * stand in for a model's parameter. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "kernel_templates.h"
#include "rmsnorm_describe.h"

const char *kiln_cuda_rmsnorm_template(kiln_cuda_rmsnorm_variant v) {
  switch (v) {
  case KILN_CUDA_RMSNORM_ROW_VEC: return KILN_CUDA_T_RMSNORM_ROW_VEC;
  case KILN_CUDA_RMSNORM_ROWS: return KILN_CUDA_T_RMSNORM_ROWS;
  case KILN_CUDA_RMSNORM_ROW_CC12: return KILN_CUDA_T_RMSNORM_ROW_CC12;
  default: return NULL;
  }
}

static uint32_t round_up_32(int64_t n, uint32_t lo, uint32_t hi) {
  int64_t r = (n + 31) / 32 * 32;
  return r < lo ? lo : r > hi ? hi : (uint32_t)r;
}

/* Validates the node and works out the launch shape. */
static kiln_status check_node(const kiln_host_api *host, kiln_cuda_rmsnorm_variant v,
                              const kiln_node *node, kiln_cuda_rmsnorm_launch *out) {
  if (!node) return host->status_new(KILN_STATUS_INVALID_ARGUMENT, "rms_norm: NULL node");
  const char *nm = node->name;
  if (node->op != KILN_OP_RMS_NORM)
    return host->status_new(KILN_STATUS_INVALID_ARGUMENT, "node %s: op %s is not rms_norm", nm,
                            kiln_op_name(node->op));
  const kiln_tensor *x = node->src[0], *w = node->src[1], *y = node->dst;
  if (!x || !w || !y)
    return host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                            "node %s: rms_norm needs src0 (rows), src1 (weight) and dst", nm);
  if (x->type != KILN_TYPE_F32 || y->type != KILN_TYPE_F32)
    return host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                            "node %s: rms_norm input and output must be F32 (are %s, %s)", nm,
                            kiln_type_name(x->type), kiln_type_name(y->type));
  if (w->type != KILN_TYPE_F32 && w->type != KILN_TYPE_F16 && w->type != KILN_TYPE_BF16)
    return host->status_new(KILN_STATUS_UNSUPPORTED,
                            "node %s: rms_norm weight %s is %s; the CUDA kernels take F32, F16 "
                            "or BF16",
                            nm, w->name, kiln_type_name(w->type));
  int64_t hidden = w->ne[0], width = x->ne[0];
  if (hidden <= 0 || width <= 0 || width % hidden != 0 || hidden > INT32_MAX)
    return host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                            "node %s: input rows of %lld are not a whole number of weight rows "
                            "(weight %s ne0 = %lld)",
                            nm, (long long)width, w->name, (long long)hidden);
  if (y->ne[0] != width)
    return host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                            "node %s: output ne0 %lld differs from input ne0 %lld", nm,
                            (long long)y->ne[0], (long long)width);
  float eps = node->p.rms_norm.eps;
  if (!isfinite(eps) || !(eps > 0.0f))
    return host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                            "node %s: rms_norm epsilon %g must be finite and positive", nm,
                            (double)eps);
  out->hidden = hidden;
  out->rows_per_token = width / hidden;
  switch (v) {
  case KILN_CUDA_RMSNORM_ROW_VEC:
    if (hidden % 4 != 0)
      return host->status_new(KILN_STATUS_UNSUPPORTED,
                              "node %s: rmsnorm_row_vec needs hidden %% 4 == 0 (hidden %lld)", nm,
                              (long long)hidden);
    out->block_dim = round_up_32(hidden / 4, 32, 1024);
    out->rows_per_block = 1;
    break;
  case KILN_CUDA_RMSNORM_ROWS:
    /* Short rows: more of them per block keeps the SMs' warp slots full. */
    out->rows_per_block = hidden <= 1024 ? 8 : 4;
    out->block_dim = 32 * out->rows_per_block;
    break;
  case KILN_CUDA_RMSNORM_ROW_CC12:
    out->block_dim = round_up_32(hidden, 32, 256);
    out->rows_per_block = 1;
    break;
  default:
    return host->status_new(KILN_STATUS_INVALID_ARGUMENT, "node %s: unknown rmsnorm variant %d",
                            nm, (int)v);
  }
  return NULL;
}

kiln_status kiln_cuda_rmsnorm_describe(const kiln_host_api *host, kiln_kcompiler *compiler,
                                       kiln_cuda_rmsnorm_variant v, const kiln_node *node,
                                       kiln_kdesc **out_desc, kiln_cuda_rmsnorm_launch *out_launch) {
  kiln_cuda_rmsnorm_launch l;
  memset(&l, 0, sizeof l);
  KILN_RETURN_IF_ERROR(check_node(host, v, node, &l));
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(host->kdesc_new(compiler, kiln_cuda_rmsnorm_template(v), &d));
  kiln_status st = host->kdesc_set_f32(d, "eps", node->p.rms_norm.eps);
  if (!st) st = host->kdesc_set_i64(d, "hidden", l.hidden);
  if (!st) st = host->kdesc_set_dtype(d, "w_type", node->src[1]->type);
  if (!st && v == KILN_CUDA_RMSNORM_ROWS)
    st = host->kdesc_set_i64(d, "rows_per_block", l.rows_per_block);
  else if (!st)
    st = host->kdesc_set_i64(d, "block_size", l.block_dim);
  if (st) {
    host->kdesc_free(d);
    return host->status_annotate(st, "node %s", node->name);
  }
  *out_desc = d;
  if (out_launch) *out_launch = l;
  return NULL;
}

kiln_status kiln_cuda_rmsnorm_prepare(const kiln_host_api *host, kiln_kcompiler *compiler,
                                      kiln_cuda_rmsnorm_variant v, const kiln_node *node,
                                      kiln_kernel **out_kernel,
                                      kiln_cuda_rmsnorm_launch *out_launch) {
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(kiln_cuda_rmsnorm_describe(host, compiler, v, node, &d, out_launch));
  kiln_status st = host->kcache_get(d, out_kernel);
  host->kdesc_free(d);
  return host->status_annotate(st, "node %s", node->name);
}
