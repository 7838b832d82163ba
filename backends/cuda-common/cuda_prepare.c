/* prepare(node): every kernel the node can need, for every path a step of
 * its plan can take (one token; several tokens on a batched backend),
 * resolved through the kernel-cache service with the node's own
 * parameters and loaded, so run() never compiles, loads or looks up. */
#include "config.h"

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
#define ROPE_BLOCK 128
/* Weight-row groups below which a matvec splits rows between warps. */
#define MATVEC_SPLIT_BELOW 4096

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
  kiln_cuda_matvec_shape s = {fl->matvec_warps, 1, fl->matvec_rows_per_group};
  if (n_rows / s.rows_per_group < MATVEC_SPLIT_BELOW) s.k_split = s.warps;
  return s;
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
  if (batched && node->src[0]->type != KILN_TYPE_F32) {
    /* cuBLAS multiplies f32: other weight types go through an f32 tile. */
    KILN_RETURN_IF_ERROR(kiln_cuda_dequant_describe(host, be->compiler, node, ROWS_BLOCK, &d));
    KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->dequant.fn));
    ns->dequant.block = ROWS_BLOCK;
    int64_t k = node->src[0]->ne[0], n = node->src[0]->ne[1];
    KILN_RETURN_IF_ERROR(kiln_cuda_scratch_reserve(
        be, (uint64_t)kiln_cuda_tile_rows(be, k, n) * (uint64_t)k * sizeof(float), node));
  }
  return NULL;
}

kiln_status kiln_cuda_prepare(void *backend, const kiln_node *node) {
  kiln_cuda_backend *be = backend;
  const kiln_host_api *host = be->host;
  KILN_RETURN_IF_ERROR(kiln_cuda_node_check(host, node));
  KILN_RETURN_IF_ERROR(kiln_cuda_enter(be));
  kiln_cuda_node_state *ns = NULL;
  KILN_RETURN_IF_ERROR(state_slot(be, node, &ns));
  memset(ns, 0, sizeof *ns);
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
    break;
  case KILN_OP_MUL_MAT:
    st = prepare_mul_mat(be, node, batched, ns);
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
    st = kiln_cuda_attention_describe(host, be->compiler, node, be->fl->attention_warps_decode,
                                      &d);
    if (!st) st = get_fn(be, d, node, &ns->decode.fn);
    ns->decode.block = 32 * be->fl->attention_warps_decode;
    if (!st && batched) {
      st = kiln_cuda_attention_describe(host, be->compiler, node, be->fl->attention_warps, &d);
      if (!st) st = get_fn(be, d, node, &ns->prefill.fn);
      ns->prefill.block = 32 * be->fl->attention_warps;
    }
    break;
  case KILN_OP_SWIGLU:
  case KILN_OP_ADD:
    st = kiln_cuda_eltwise_describe(host, be->compiler, node, ELTWISE_BLOCK, &d);
    if (!st) st = get_fn(be, d, node, &ns->decode.fn);
    ns->decode.block = ELTWISE_BLOCK;
    break;
  case KILN_OP_STORE_KV:
    st = kiln_cuda_store_kv_describe(host, be->compiler, node, ELTWISE_BLOCK, &d);
    if (!st) st = get_fn(be, d, node, &ns->decode.fn);
    ns->decode.block = ELTWISE_BLOCK;
    break;
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
