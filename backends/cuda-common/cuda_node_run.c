/* One node of a pass: the checks run() makes before it launches anything
 * for a node (prepared and unchanged since, buffers there and large
 * enough, the pass's tokens within every activation's capacity and the
 * cache, every token id a row of the embedding table, checked on the host
 * copy of the ids), and the node's launches on its own (cuda_backend.h,
 * kiln_cuda_bind and kiln_cuda_node_launch). The fused launches
 * (cuda_fuse.c) and the pass loop (cuda_run.c) sit above. */
#include "config.h"

#include <string.h>

#include "cuda_backend.h"
#include "node_check.h"
#include "op_describe.h"
#include "qwen35_cuda.h"

/* Grid of a grid-stride kernel over n items. */
uint32_t kiln_cuda_stride_grid(long long n, uint32_t block) {
  long long g = (n + block - 1) / block;
  return g < 1 ? 1 : g > 4096 ? 4096 : (uint32_t)g;
}

kiln_status kiln_cuda_node_state_of(const kiln_cuda_backend *be, const kiln_node *node,
                                    const kiln_cuda_node_state **out) {
  if (node->id < 0 || (uint32_t)node->id >= be->n_states || be->states[node->id].node != node ||
      memcmp(&be->states[node->id].snap, node, sizeof *node) != 0)
    return kiln_node_error(be->host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "was not prepared on %s (or changed since prepare())",
                           be->fl->name);
  *out = &be->states[node->id];
  return NULL;
}

/* The buffer of tensor t, checked against t. */
static kiln_status buffer_of(const kiln_cuda_backend *be, const kiln_step *step,
                             const kiln_node *node, const kiln_tensor *t,
                             const kiln_cuda_buffer **out) {
  const kiln_cuda_buffer *b = t->id >= 0 ? step->bufs[t->id] : NULL;
  if (!b)
    return kiln_node_error(be->host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "tensor '%.*s' (id %d) has no %s buffer", KILN_NAME_MAX, t->name,
                           (int)t->id, be->fl->name);
  if (b->nbytes < t->nbytes)
    return kiln_node_error(be->host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "buffer of '%.*s' holds %llu bytes, the tensor %llu",
                           KILN_NAME_MAX, t->name, (unsigned long long)b->nbytes,
                           (unsigned long long)t->nbytes);
  *out = b;
  return NULL;
}

/* Device address of tensor t's column `col` (activations and inputs; other
 * roles are addressed whole). */
CUdeviceptr kiln_cuda_col_ptr(const kiln_cuda_buffer *b, const kiln_tensor *t, int32_t col) {
  if (t->role == KILN_ROLE_ACTIVATION) return b->ptr + (CUdeviceptr)col * (CUdeviceptr)t->ne[0] * 4u;
  if (t->role == KILN_ROLE_INPUT) return b->ptr + (CUdeviceptr)col * 4u;
  return b->ptr;
}

static kiln_status check_cols(const kiln_cuda_backend *be, const kiln_node *node,
                              const kiln_tensor *t, int64_t cols_needed) {
  int64_t cap = t->role == KILN_ROLE_INPUT ? t->ne[0] : t->ne[1];
  if (cols_needed > cap)
    return kiln_node_error(be->host, KILN_STATUS_OUT_OF_RANGE, node,
                           "the step needs %lld columns of '%.*s', which holds %lld",
                           (long long)cols_needed, KILN_NAME_MAX, t->name, (long long)cap);
  return NULL;
}

static kiln_status run_get_rows(kiln_cuda_backend *be, const kiln_node *node,
                                const kiln_cuda_node_state *ns, const kiln_cuda_buffer *const *b,
                                int32_t n, int32_t col, int32_t pos0) {
  const kiln_tensor *table = node->src[0], *ids = node->src[1];
  if (!b[1]->host_ids)
    return kiln_node_error(be->host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "token ids '%.*s' must be an I32 INPUT tensor", KILN_NAME_MAX,
                           ids->name);
  for (int32_t t = 0; t < n; t++) {
    int32_t id = b[1]->host_ids[col + t];
    if (id < 0 || id >= table->ne[1])
      return kiln_node_error(be->host, KILN_STATUS_OUT_OF_RANGE, node,
                             "token id %d (batch index %d, position %d) is outside [0, %lld), "
                             "the rows of '%.*s'",
                             (int)id, (int)(col + t), (int)(pos0 + t), (long long)table->ne[1],
                             KILN_NAME_MAX, table->name);
  }
  CUdeviceptr w = b[0]->ptr, idp = kiln_cuda_col_ptr(b[1], ids, col), y = kiln_cuda_col_ptr(b[4], node->dst, col);
  void *args[] = {&w, &idp, &y, &n};
  return kiln_cuda_launch(be, node, "get_rows", ns->decode.fn, (uint32_t)n, 1, ns->decode.block,
                          args);
}

static kiln_status run_rms_norm(kiln_cuda_backend *be, const kiln_node *node,
                                const kiln_cuda_node_state *ns, const kiln_cuda_buffer *const *b,
                                int32_t n, int32_t col) {
  const kiln_cuda_fn *f = n > 1 && ns->prefill.fn ? &ns->prefill : &ns->decode;
  CUdeviceptr x = kiln_cuda_col_ptr(b[0], node->src[0], col), w = b[1]->ptr,
              y = kiln_cuda_col_ptr(b[4], node->dst, col);
  int n_rows = (int)(n * ns->rows_per_token);
  void *args[] = {&x, &w, &y, &n_rows};
  uint32_t grid = (uint32_t)((n_rows + (int)f->per_block - 1) / (int)f->per_block);
  return kiln_cuda_launch(be, node, "rms_norm", f->fn, grid, 1, f->block, args);
}

/* matvec_q of one matrix, its input already in the scratch (n == 1). */
static kiln_status run_mvq(kiln_cuda_backend *be, const kiln_node *node,
                           const kiln_cuda_node_state *ns, const kiln_cuda_buffer *const *b,
                           int32_t col) {
  CUdeviceptr w = b[0]->ptr, bias = node->src[2] ? b[2]->ptr : 0, none = 0,
              y = kiln_cuda_col_ptr(b[4], node->dst, col), xq = be->xq;
  int n_cols = 1;
  void *args[] = {&w, &none, &none, &bias, &none, &none, &y, &none, &none, &xq, &n_cols};
  return kiln_cuda_launch_shared(be, node, "matvec_q", ns->mvq.fn, ns->mvq.per_block, 1,
                                 ns->mvq.block, ns->mvq.shared, args);
}

static kiln_status run_mul_mat(kiln_cuda_backend *be, const kiln_node *node,
                               const kiln_cuda_node_state *ns, const kiln_cuda_buffer *const *b,
                               int32_t n, int32_t col) {
  const kiln_tensor *w = node->src[0];
  CUdeviceptr wp = b[0]->ptr, x = kiln_cuda_col_ptr(b[1], node->src[1], col),
              y = kiln_cuda_col_ptr(b[4], node->dst, col);
  int n_rows = (int)w->ne[1];
  if (n == 1 && ns->mvq.fn) {
    if (!kiln_cuda_xq_holds(be, node->src[1]))
      return kiln_node_error(be->host, KILN_STATUS_INTERNAL, node,
                             "its input is not in the quantized-activation scratch");
    return run_mvq(be, node, ns, b, col);
  }
  if (n > 1 && be->fl->prefill == KILN_CUDA_PREFILL_BATCHED) {
    KILN_RETURN_IF_ERROR(kiln_cuda_mul_mat_gemm(be, node, ns, wp, x, y, n));
  } else {
    CUdeviceptr bias = node->src[2] && ns->bias_fused ? b[2]->ptr : 0;
    void *args[] = {&wp, &x, &bias, &y, &n_rows, &n};
    uint32_t rpb = ns->decode.per_block;
    KILN_RETURN_IF_ERROR(kiln_cuda_launch(be, node, "matvec", ns->decode.fn,
                                          (uint32_t)((n_rows + (int)rpb - 1) / (int)rpb),
                                          (uint32_t)n, ns->decode.block, args));
    if (ns->bias_fused) return NULL;
  }
  if (!node->src[2]) return NULL;
  CUdeviceptr bias = b[2]->ptr;
  void *args[] = {&bias, &y, &n};
  return kiln_cuda_launch(be, node, "bias_add", ns->bias.fn,
                          kiln_cuda_stride_grid((long long)n_rows * n, ns->bias.block), 1, ns->bias.block,
                          args);
}

static kiln_status run_rope(kiln_cuda_backend *be, const kiln_node *node,
                            const kiln_cuda_node_state *ns, const kiln_cuda_buffer *const *b,
                            int32_t n, int32_t col) {
  CUdeviceptr x = kiln_cuda_col_ptr(b[0], node->src[0], col), y = kiln_cuda_col_ptr(b[4], node->dst, col);
  void *args[] = {&x, &y, &be->step_dev};
  /* Enough blocks per token for one pair (or passed-through value) per thread. */
  const kiln_rope_params *p = &node->p.rope;
  const int64_t rot = p->n_head * (p->n_rot / 2), pass = p->n_head * (p->head_dim - p->n_rot);
  const int64_t per_token = rot > pass ? rot : pass;
  int64_t gy = (per_token + ns->decode.block - 1) / ns->decode.block;
  gy = gy < 1 ? 1 : gy > 65535 ? 65535 : gy;
  return kiln_cuda_launch(be, node, "rope", ns->decode.fn, (uint32_t)n, (uint32_t)gy,
                          ns->decode.block, args);
}

/* The cache position comes from the step block: no launch argument or
 * copy address carries it. */
static kiln_status run_store_kv(kiln_cuda_backend *be, const kiln_node *node,
                                const kiln_cuda_node_state *ns, const kiln_cuda_buffer *const *b,
                                int32_t n, int32_t col) {
  CUdeviceptr src = kiln_cuda_col_ptr(b[0], node->src[0], col), cache = b[4]->ptr;
  void *args[] = {&src, &cache, &be->step_dev};
  return kiln_cuda_launch(be, node, "store_kv", ns->decode.fn,
                          kiln_cuda_stride_grid((long long)n * node->dst->ne[0] / 4 + 1, ns->decode.block),
                          1, ns->decode.block, args);
}

/* Column host_ids[col + t] of src0 to column col + t of dst, t < n: one
 * device-to-device copy each, ids checked on the host copy. The copy
 * addresses come from this step's ids, so a step with this node is never
 * captured as a graph (cuda_graph.c). */
static kiln_status run_get_columns(kiln_cuda_backend *be, const kiln_node *node,
                                   const kiln_cuda_buffer *const *b, int32_t n, int32_t col) {
  const kiln_tensor *x = node->src[0], *ids = node->src[1];
  if (!b[1]->host_ids)
    return kiln_node_error(be->host, KILN_STATUS_INVALID_ARGUMENT, node,
                           "column ids '%.*s' must be an I32 INPUT tensor", KILN_NAME_MAX,
                           ids->name);
  const uint64_t col_bytes = (uint64_t)x->ne[0] * 4u;
  for (int32_t t = 0; t < n; t++) {
    int32_t id = b[1]->host_ids[col + t];
    if (id < 0 || id >= x->ne[1])
      return kiln_node_error(be->host, KILN_STATUS_OUT_OF_RANGE, node,
                             "column id %d (entry %d) is outside [0, %lld), the columns of "
                             "'%.*s'",
                             (int)id, (int)(col + t), (long long)x->ne[1], KILN_NAME_MAX,
                             x->name);
  }
  for (int32_t t = 0; t < n; t++) {
    CUdeviceptr src = b[0]->ptr + (CUdeviceptr)(col_bytes * (uint64_t)b[1]->host_ids[col + t]);
    KILN_CU_CHECK(be->host, be->cu, node,
                  MemcpyDtoDAsync(kiln_cuda_col_ptr(b[4], node->dst, col + t), src,
                                  (size_t)col_bytes, be->stream));
  }
  return NULL;
}

/* A pass of one token with the split kernel prepared: attention_split's
 * (n_split, n_head_kv) blocks, then attention_merge's n_head unless the
 * split kernel merges itself; the grids fixed at prepare, the keys' count
 * read from the step block. */
static kiln_status run_attention_split(kiln_cuda_backend *be, const kiln_node *node,
                                       const kiln_cuda_node_state *ns, CUdeviceptr q,
                                       CUdeviceptr kc, CUdeviceptr vc, CUdeviceptr y) {
  CUdeviceptr part = be->attn_part;
  if (!part || be->attn_part_bytes < kiln_cuda_attention_part_bytes(node, ns->attn_splits))
    return kiln_node_error(be->host, KILN_STATUS_INTERNAL, node,
                           "the split-attention partials hold %llu bytes, fewer than it needs",
                           (unsigned long long)be->attn_part_bytes);
  CUdeviceptr xq = ns->merge_quant ? be->xq : 0, tickets = be->attn_tickets;
  if (ns->attn_fused_merge &&
      (!tickets || be->attn_tickets_bytes < 4u * (uint64_t)node->p.attention.n_head_kv))
    return kiln_node_error(be->host, KILN_STATUS_INTERNAL, node,
                           "the split-attention tickets hold %llu bytes, fewer than it needs",
                           (unsigned long long)be->attn_tickets_bytes);
  void *split_args[] = {&q, &kc, &vc, &part, &be->step_dev, &y, &xq, &tickets};
  KILN_RETURN_IF_ERROR(kiln_cuda_launch_shared(be, node, "attention_split", ns->decode.fn,
                                               ns->attn_splits,
                                               (uint32_t)node->p.attention.n_head_kv,
                                               ns->decode.block, ns->decode.shared, split_args));
  if (ns->attn_fused_merge) {
    if (ns->merge_quant) kiln_cuda_xq_set(be, node->dst);
    return NULL;
  }
  void *merge_args[] = {&part, &y, &xq};
  KILN_RETURN_IF_ERROR(kiln_cuda_launch(be, node, "attention_merge", ns->attn_merge.fn,
                                        (uint32_t)node->p.attention.n_head, 1,
                                        ns->attn_merge.block, merge_args));
  if (ns->merge_quant) kiln_cuda_xq_set(be, node->dst);
  return NULL;
}

static kiln_status run_attention(kiln_cuda_backend *be, const kiln_node *node,
                                 const kiln_cuda_node_state *ns, const kiln_cuda_buffer *const *b,
                                 int32_t n, int32_t col) {
  CUdeviceptr q = kiln_cuda_col_ptr(b[0], node->src[0], col), kc = b[1]->ptr, vc = b[2]->ptr,
              y = kiln_cuda_col_ptr(b[4], node->dst, col);
  if (!(n > 1 && ns->prefill.fn) && ns->attn_splits) {
    if (n != 1)
      return kiln_node_error(be->host, KILN_STATUS_INTERNAL, node,
                             "the split decode attention takes one token, not %d", (int)n);
    return run_attention_split(be, node, ns, q, kc, vc, y);
  }
  void *args[] = {&q, &kc, &vc, &y, &be->step_dev};
  if (n > 1 && ns->prefill.fn && ns->prefill.per_block) {
    /* flash attention: ceil(n * group / bq) query tiles for each KV head;
     * positions from the step block, whose n_tokens is n here (col 0) */
    const kiln_attention_params *p = &node->p.attention;
    const uint64_t rows = (uint64_t)n * (uint64_t)(p->n_head / p->n_head_kv);
    const uint64_t tiles = (rows + ns->prefill.per_block - 1) / ns->prefill.per_block;
    return kiln_cuda_launch_shared(be, node, "flash_attention", ns->prefill.fn, (uint32_t)tiles,
                                   (uint32_t)p->n_head_kv, ns->prefill.block, ns->prefill.shared,
                                   args);
  }
  const kiln_cuda_fn *f = n > 1 && ns->prefill.fn ? &ns->prefill : &ns->decode;
  return kiln_cuda_launch(be, node, "attention", f->fn, (uint32_t)node->p.attention.n_head,
                          (uint32_t)n, f->block, args);
}

static kiln_status run_eltwise(kiln_cuda_backend *be, const kiln_node *node,
                               const kiln_cuda_node_state *ns, const kiln_cuda_buffer *const *b,
                               int32_t n, int32_t col) {
  CUdeviceptr a = kiln_cuda_col_ptr(b[0], node->src[0], col), bb = kiln_cuda_col_ptr(b[1], node->src[1], col),
              y = kiln_cuda_col_ptr(b[4], node->dst, col);
  long long count = (long long)n * node->dst->ne[0];
  void *args[] = {&a, &bb, &y, &count};
  return kiln_cuda_launch(be, node, kiln_op_name(node->op), ns->decode.fn,
                          kiln_cuda_stride_grid(count, ns->decode.block), 1, ns->decode.block, args);
}

bool kiln_cuda_xq_holds(const kiln_cuda_backend *be, const kiln_tensor *t) {
  return be->xq_of == t && be->xq_pass == be->pass;
}

void kiln_cuda_xq_set(kiln_cuda_backend *be, const kiln_tensor *t) {
  be->xq_of = t;
  be->xq_pass = be->pass;
}

kiln_status kiln_cuda_quantize_input(kiln_cuda_backend *be, const kiln_cuda_bound *nb,
                                     int32_t col) {
  const kiln_node *node = nb->node;
  const kiln_cuda_node_state *ns = nb->ns;
  CUdeviceptr x = kiln_cuda_col_ptr(nb->b[1], node->src[1], col), xq = be->xq;
  int n_cols = 1;
  void *args[] = {&x, &xq, &n_cols};
  const uint32_t per = ns->quantize.block;
  KILN_RETURN_IF_ERROR(kiln_cuda_launch(
      be, node, "quantize", ns->quantize.fn,
      (uint32_t)((node->src[0]->ne[0] + per - 1) / per), 1, per, args));
  kiln_cuda_xq_set(be, node->src[1]);
  return NULL;
}

kiln_status kiln_cuda_bind(const kiln_cuda_backend *be, const kiln_step *step,
                           const kiln_node *node, int32_t n, int32_t col, int32_t pos,
                           kiln_cuda_bound *out) {
  memset(out, 0, sizeof *out);
  out->node = node;
  KILN_RETURN_IF_ERROR(kiln_cuda_node_state_of(be, node, &out->ns));
  /* b[0..3]: sources, b[4]: dst */
  for (int s = 0; s < KILN_MAX_SRC; s++)
    if (node->src[s]) KILN_RETURN_IF_ERROR(buffer_of(be, step, node, node->src[s], &out->b[s]));
  KILN_RETURN_IF_ERROR(buffer_of(be, step, node, node->dst, &out->b[KILN_MAX_SRC]));
  for (int s = 0; s <= KILN_MAX_SRC; s++) {
    const kiln_tensor *t = s < KILN_MAX_SRC ? node->src[s] : node->dst;
    if (!t) continue;
    if (t->role == KILN_ROLE_ACTIVATION || t->role == KILN_ROLE_INPUT)
      KILN_RETURN_IF_ERROR(check_cols(be, node, t, (int64_t)col + n));
    if (t->role == KILN_ROLE_STATE) KILN_RETURN_IF_ERROR(check_cols(be, node, t, (int64_t)pos + n));
  }
  return NULL;
}

kiln_status kiln_cuda_node_launch(kiln_cuda_backend *be, const kiln_cuda_bound *nb, int32_t n,
                                  int32_t col, int32_t pos) {
  const kiln_node *node = nb->node;
  const kiln_cuda_node_state *ns = nb->ns;
  const kiln_cuda_buffer *const *b = nb->b;
  switch (node->op) {
  case KILN_OP_GET_ROWS: return run_get_rows(be, node, ns, b, n, col, pos);
  case KILN_OP_RMS_NORM: return run_rms_norm(be, node, ns, b, n, col);
  case KILN_OP_MUL_MAT: return run_mul_mat(be, node, ns, b, n, col);
  case KILN_OP_ROPE:
    return node->p.rope.mode == KILN_ROPE_IMROPE ? kiln_cuda_qwen35_run(be, node, ns, b, n, col, pos)
                                                  : run_rope(be, node, ns, b, n, col);
  case KILN_OP_SLICE: case KILN_OP_SIGMOID_MUL: case KILN_OP_SSM_CONV: case KILN_OP_GDN_GATE:
  case KILN_OP_GATED_DELTA_NET: return kiln_cuda_qwen35_run(be, node, ns, b, n, col, pos);
  case KILN_OP_STORE_KV: return run_store_kv(be, node, ns, b, n, col);
  case KILN_OP_GET_COLUMNS: return run_get_columns(be, node, b, n, col);
  case KILN_OP_ATTENTION: return run_attention(be, node, ns, b, n, col);
  case KILN_OP_SWIGLU:
  case KILN_OP_ADD: return run_eltwise(be, node, ns, b, n, col);
  default: return kiln_node_error(be->host, KILN_STATUS_UNSUPPORTED, node, "op id %d", (int)node->op);
  }
}
