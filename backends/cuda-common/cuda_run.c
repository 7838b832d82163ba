/* run(step): the step's nodes as launches on the backend's stream, with
 * the kernels prepare() resolved. A step of one token takes the decode
 * path (matvec, the flavor's decode RMSNorm). A step of T > 1 tokens on
 * cuda-serial runs the whole node range T times, one token at a time
 * (token t at column t, position pos0 + t), which computes what one pass
 * over all tokens computes: a node reads only columns of its own token
 * and cache positions up to its token's, written earlier. On a batched
 * flavor each node runs once over all T tokens (GEMMs, rmsnorm_rows, ...).
 *
 * Before anything is launched each node's step is checked: the node was
 * prepared and has not changed since, its buffers exist and are large
 * enough, the tokens fit every activation's capacity and the cache, and
 * every token id is a row of the embedding table (checked on the host
 * copy of the ids, so a bad id is an error naming it, not a stray read). */
#include "config.h"

#include <string.h>

#include "cuda_backend.h"
#include "node_check.h"
#include "op_describe.h"
#include "qwen35_cuda.h"

/* Grid of a grid-stride kernel over n items. */
static uint32_t stride_grid(long long n, uint32_t block) {
  long long g = (n + block - 1) / block;
  return g < 1 ? 1 : g > 4096 ? 4096 : (uint32_t)g;
}

static kiln_status node_state(const kiln_cuda_backend *be, const kiln_node *node,
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
static CUdeviceptr col_ptr(const kiln_cuda_buffer *b, const kiln_tensor *t, int32_t col) {
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
  CUdeviceptr w = b[0]->ptr, idp = col_ptr(b[1], ids, col), y = col_ptr(b[4], node->dst, col);
  void *args[] = {&w, &idp, &y, &n};
  return kiln_cuda_launch(be, node, "get_rows", ns->decode.fn, (uint32_t)n, 1, ns->decode.block,
                          args);
}

static kiln_status run_rms_norm(kiln_cuda_backend *be, const kiln_node *node,
                                const kiln_cuda_node_state *ns, const kiln_cuda_buffer *const *b,
                                int32_t n, int32_t col) {
  const kiln_cuda_fn *f = n > 1 && ns->prefill.fn ? &ns->prefill : &ns->decode;
  CUdeviceptr x = col_ptr(b[0], node->src[0], col), w = b[1]->ptr,
              y = col_ptr(b[4], node->dst, col);
  int n_rows = (int)(n * ns->rows_per_token);
  void *args[] = {&x, &w, &y, &n_rows};
  uint32_t grid = (uint32_t)((n_rows + (int)f->per_block - 1) / (int)f->per_block);
  return kiln_cuda_launch(be, node, "rms_norm", f->fn, grid, 1, f->block, args);
}

static kiln_status run_mul_mat(kiln_cuda_backend *be, const kiln_node *node,
                               const kiln_cuda_node_state *ns, const kiln_cuda_buffer *const *b,
                               int32_t n, int32_t col) {
  const kiln_tensor *w = node->src[0];
  CUdeviceptr wp = b[0]->ptr, x = col_ptr(b[1], node->src[1], col),
              y = col_ptr(b[4], node->dst, col);
  int n_rows = (int)w->ne[1];
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
                          stride_grid((long long)n_rows * n, ns->bias.block), 1, ns->bias.block,
                          args);
}

static kiln_status run_rope(kiln_cuda_backend *be, const kiln_node *node,
                            const kiln_cuda_node_state *ns, const kiln_cuda_buffer *const *b,
                            int32_t n, int32_t col) {
  CUdeviceptr x = col_ptr(b[0], node->src[0], col), y = col_ptr(b[4], node->dst, col);
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
  CUdeviceptr src = col_ptr(b[0], node->src[0], col), cache = b[4]->ptr;
  void *args[] = {&src, &cache, &be->step_dev};
  return kiln_cuda_launch(be, node, "store_kv", ns->decode.fn,
                          stride_grid((long long)n * node->dst->ne[0] / 4 + 1, ns->decode.block),
                          1, ns->decode.block, args);
}

static kiln_status run_attention(kiln_cuda_backend *be, const kiln_node *node,
                                 const kiln_cuda_node_state *ns, const kiln_cuda_buffer *const *b,
                                 int32_t n, int32_t col) {
  CUdeviceptr q = col_ptr(b[0], node->src[0], col), kc = b[1]->ptr, vc = b[2]->ptr,
              y = col_ptr(b[4], node->dst, col);
  void *args[] = {&q, &kc, &vc, &y, &be->step_dev};
  const kiln_cuda_fn *f = n > 1 && ns->prefill.fn ? &ns->prefill : &ns->decode;
  return kiln_cuda_launch(be, node, "attention", f->fn, (uint32_t)node->p.attention.n_head,
                          (uint32_t)n, f->block, args);
}

static kiln_status run_eltwise(kiln_cuda_backend *be, const kiln_node *node,
                               const kiln_cuda_node_state *ns, const kiln_cuda_buffer *const *b,
                               int32_t n, int32_t col) {
  CUdeviceptr a = col_ptr(b[0], node->src[0], col), bb = col_ptr(b[1], node->src[1], col),
              y = col_ptr(b[4], node->dst, col);
  long long count = (long long)n * node->dst->ne[0];
  void *args[] = {&a, &bb, &y, &count};
  return kiln_cuda_launch(be, node, kiln_op_name(node->op), ns->decode.fn,
                          stride_grid(count, ns->decode.block), 1, ns->decode.block, args);
}

/* One node over tokens col .. col+n-1 of the step (positions pos ..);
 * `multi`: the step has several tokens (the profile's kind). */
static kiln_status run_node(kiln_cuda_backend *be, const kiln_step *step, const kiln_node *node,
                            int32_t n, int32_t col, int32_t pos, int multi) {
  const kiln_cuda_node_state *ns = NULL;
  KILN_RETURN_IF_ERROR(node_state(be, node, &ns));
  /* b[0..3]: sources, b[4]: dst */
  const kiln_cuda_buffer *b[KILN_MAX_SRC + 1] = {NULL};
  for (int s = 0; s < KILN_MAX_SRC; s++)
    if (node->src[s]) KILN_RETURN_IF_ERROR(buffer_of(be, step, node, node->src[s], &b[s]));
  KILN_RETURN_IF_ERROR(buffer_of(be, step, node, node->dst, &b[KILN_MAX_SRC]));
  for (int s = 0; s <= KILN_MAX_SRC; s++) {
    const kiln_tensor *t = s < KILN_MAX_SRC ? node->src[s] : node->dst;
    if (!t) continue;
    if (t->role == KILN_ROLE_ACTIVATION || t->role == KILN_ROLE_INPUT)
      KILN_RETURN_IF_ERROR(check_cols(be, node, t, (int64_t)col + n));
    if (t->role == KILN_ROLE_STATE) KILN_RETURN_IF_ERROR(check_cols(be, node, t, (int64_t)pos + n));
  }
  KILN_RETURN_IF_ERROR(kiln_cuda_prof_begin(be));
  kiln_status st;
  switch (node->op) {
  case KILN_OP_GET_ROWS: st = run_get_rows(be, node, ns, b, n, col, pos); break;
  case KILN_OP_RMS_NORM: st = run_rms_norm(be, node, ns, b, n, col); break;
  case KILN_OP_MUL_MAT: st = run_mul_mat(be, node, ns, b, n, col); break;
  case KILN_OP_ROPE:
    st = node->p.rope.mode == KILN_ROPE_IMROPE ? kiln_cuda_qwen35_run(be, node, ns, b, n, col, pos)
                                                : run_rope(be, node, ns, b, n, col);
    break;
  case KILN_OP_SLICE: case KILN_OP_SIGMOID_MUL: case KILN_OP_SSM_CONV: case KILN_OP_GDN_GATE:
  case KILN_OP_GATED_DELTA_NET: st = kiln_cuda_qwen35_run(be, node, ns, b, n, col, pos); break;
  case KILN_OP_STORE_KV: st = run_store_kv(be, node, ns, b, n, col); break;
  case KILN_OP_ATTENTION: st = run_attention(be, node, ns, b, n, col); break;
  case KILN_OP_SWIGLU:
  case KILN_OP_ADD: st = run_eltwise(be, node, ns, b, n, col); break;
  default:
    st = kiln_node_error(be->host, KILN_STATUS_UNSUPPORTED, node, "op id %d", (int)node->op);
  }
  if (st) {
    be->prof.open = false; /* the record is dropped */
    return st;
  }
  return kiln_cuda_prof_end(be, ns->prof_kind[multi]);
}

/* The step's nodes, one token at a time on cuda-serial; each pass starts
 * by writing its positions into the step block, which the kernels read. */
static kiln_status run_nodes(kiln_cuda_backend *be, const kiln_step *step, int multi) {
  if (be->fl->prefill == KILN_CUDA_PREFILL_SERIAL) {
    for (int32_t t = 0; t < step->n_tokens; t++) {
      KILN_RETURN_IF_ERROR(kiln_cuda_step_write(be, step->pos0 + t, 1));
      for (uint32_t i = 0; i < step->n_nodes; i++)
        KILN_RETURN_IF_ERROR(run_node(be, step, step->nodes[i], 1, t, step->pos0 + t, multi));
    }
    return NULL;
  }
  KILN_RETURN_IF_ERROR(kiln_cuda_step_write(be, step->pos0, step->n_tokens));
  for (uint32_t i = 0; i < step->n_nodes; i++)
    KILN_RETURN_IF_ERROR(
        run_node(be, step, step->nodes[i], step->n_tokens, 0, step->pos0, multi));
  return NULL;
}

kiln_status kiln_cuda_run(void *backend, const kiln_step *step) {
  kiln_cuda_backend *be = backend;
  if (step->n_tokens < 1 || step->pos0 < 0 || step->pos0 > INT32_MAX - step->n_tokens)
    return be->host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                                "%s: step of %d tokens at position %d", be->fl->name,
                                (int)step->n_tokens, (int)step->pos0);
  KILN_RETURN_IF_ERROR(kiln_cuda_enter(be));
  const int multi = step->n_tokens > 1;
  const double t0 = be->prof.on ? kiln_cuda_now_ms() : 0.0;
  KILN_RETURN_IF_ERROR(kiln_cuda_prof_step_begin(be, multi));
  kiln_status st = run_nodes(be, step, multi);
  if (!be->prof.on) return st;
  if (st) {
    kiln_cuda_prof_step_abort(be); /* a failed step is not timed */
    return st;
  }
  return kiln_cuda_prof_step_end(be, step->n_tokens, kiln_cuda_now_ms() - t0);
}
