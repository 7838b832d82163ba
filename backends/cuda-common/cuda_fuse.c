/* Fused launches (cuda_backend.h, kiln_cuda_fuse_at): in a pass of one
 * token, neighbouring nodes run as one kernel where prepare() made one and
 * the step holds the nodes it stands for side by side:
 *   ADD, RMS_NORM of its output        -> add_rmsnorm (+ the normed row
 *                                         quantized when a matvec_q reads it next);
 *   RMS_NORM, matvec_q of its output   -> add_rmsnorm without the add, quantizing;
 *   SWIGLU, matvec_q of its output     -> swiglu_q;
 *   2 or 3 matvec_q of one input       -> one matvec_q launch (Q/K/V, gate/up);
 *   ROPE(q), ROPE(k), STORE_KV(k), STORE_KV(v)  -> rope_store (F32, F16 or
 *                                         BF16 caches: the type it was made for).
 * Every node is bound (checked) as if it ran alone, and writes the same
 * tensors; a node run on its own (the parity observer runs one node per
 * step) simply takes its unfused kernel. */
#include "config.h"

#include "cuda_backend.h"

/* The node at i if the step has one there. */
static const kiln_node *at(const kiln_step *step, uint32_t i) {
  return i < step->n_nodes ? step->nodes[i] : NULL;
}

/* Whether nd (may be NULL) is a MUL_MAT taking matvec_q on input t. */
static bool mvq_reads(const kiln_cuda_backend *be, const kiln_node *nd, const kiln_tensor *t) {
  if (!nd || nd->op != KILN_OP_MUL_MAT || nd->src[1] != t) return false;
  const kiln_cuda_node_state *ns = NULL;
  kiln_status st = kiln_cuda_node_state_of(be, nd, &ns);
  if (st) {
    be->host->status_free(st); /* it fails again, and is reported, when it runs */
    return false;
  }
  return ns->mvq.fn != NULL;
}

static kiln_status launch_norm(kiln_cuda_backend *be, const kiln_cuda_fn *f,
                               const kiln_cuda_bound *add, const kiln_cuda_bound *norm,
                               int32_t col, bool quant, uint32_t kind) {
  const kiln_node *nn = norm->node;
  CUdeviceptr a = kiln_cuda_col_ptr(norm->b[0], nn->src[0], col), b = 0, sum = 0,
              w = norm->b[1]->ptr, y = kiln_cuda_col_ptr(norm->b[4], nn->dst, col),
              xq = quant ? be->xq : 0;
  if (add) {
    const kiln_node *an = add->node;
    a = kiln_cuda_col_ptr(add->b[0], an->src[0], col);
    b = kiln_cuda_col_ptr(add->b[1], an->src[1], col);
    sum = kiln_cuda_col_ptr(add->b[4], an->dst, col);
  }
  int n_rows = 1;
  void *args[] = {&a, &b, &sum, &w, &y, &xq, &n_rows};
  KILN_RETURN_IF_ERROR(kiln_cuda_prof_begin(be));
  kiln_status st = kiln_cuda_launch(be, nn, "add_rmsnorm", f->fn, 1, 1, f->block, args);
  if (st) {
    be->prof.open = false;
    return st;
  }
  if (quant) kiln_cuda_xq_set(be, nn->dst);
  else if (be->xq_of == nn->dst || (add && be->xq_of == add->node->dst)) be->xq_of = NULL;
  return kiln_cuda_prof_end(be, kind);
}

/* ADD at i and the RMS_NORM of its output at i + 1; or an RMS_NORM at i
 * whose output a matvec_q reads next. */
static kiln_status fuse_norm(kiln_cuda_backend *be, const kiln_step *step, uint32_t i,
                             int32_t col, int32_t pos, uint32_t *out_used) {
  const kiln_node *first = at(step, i);
  const bool with_add = first->op == KILN_OP_ADD;
  const kiln_node *norm = with_add ? at(step, i + 1) : first;
  if (!norm || norm->op != KILN_OP_RMS_NORM || (with_add && norm->src[0] != first->dst))
    return NULL;
  const kiln_cuda_node_state *ns = NULL;
  kiln_status st = kiln_cuda_node_state_of(be, norm, &ns);
  if (st) {
    be->host->status_free(st); /* reported when the node runs alone */
    return NULL;
  }
  const bool quant = mvq_reads(be, at(step, with_add ? i + 2 : i + 1), norm->dst);
  const kiln_cuda_fn *f = with_add ? (quant && ns->add_norm_q.fn ? &ns->add_norm_q : &ns->add_norm)
                                   : &ns->norm_q;
  if (!f->fn || (!with_add && !quant)) return NULL;
  kiln_cuda_bound ab, nb;
  if (with_add) KILN_RETURN_IF_ERROR(kiln_cuda_bind(be, step, first, 1, col, pos, &ab));
  KILN_RETURN_IF_ERROR(kiln_cuda_bind(be, step, norm, 1, col, pos, &nb));
  const bool q = f != &ns->add_norm;
  const uint32_t kind = !with_add ? ns->prof_fused[2] : q ? ns->prof_fused[1] : ns->prof_fused[0];
  KILN_RETURN_IF_ERROR(launch_norm(be, f, with_add ? &ab : NULL, &nb, col, q, kind));
  *out_used = with_add ? 2 : 1;
  return NULL;
}

/* A SWIGLU at i whose output a matvec_q reads next. */
static kiln_status fuse_swiglu(kiln_cuda_backend *be, const kiln_step *step, uint32_t i,
                               int32_t col, int32_t pos, uint32_t *out_used) {
  const kiln_node *nd = at(step, i);
  if (!mvq_reads(be, at(step, i + 1), nd->dst)) return NULL;
  kiln_cuda_bound nb;
  KILN_RETURN_IF_ERROR(kiln_cuda_bind(be, step, nd, 1, col, pos, &nb));
  const kiln_cuda_node_state *ns = nb.ns;
  if (!ns->swiglu_q.fn) return NULL;
  CUdeviceptr a = kiln_cuda_col_ptr(nb.b[0], nd->src[0], col),
              b = kiln_cuda_col_ptr(nb.b[1], nd->src[1], col),
              y = kiln_cuda_col_ptr(nb.b[4], nd->dst, col), xq = be->xq;
  int n_cols = 1;
  void *args[] = {&a, &b, &y, &xq, &n_cols};
  const uint32_t per = ns->swiglu_q.block;
  KILN_RETURN_IF_ERROR(kiln_cuda_prof_begin(be));
  kiln_status st = kiln_cuda_launch(be, nd, "swiglu_q", ns->swiglu_q.fn,
                                    (uint32_t)((nd->dst->ne[0] + per - 1) / per), 1, per, args);
  if (st) {
    be->prof.open = false;
    return st;
  }
  kiln_cuda_xq_set(be, nd->dst);
  *out_used = 1;
  return kiln_cuda_prof_end(be, ns->prof_fused[0]);
}

/* The matvec_q group led by the MUL_MAT at i, its members next to it. */
static kiln_status fuse_group(kiln_cuda_backend *be, const kiln_step *step, uint32_t i,
                              int32_t col, int32_t pos, uint32_t *out_used) {
  const kiln_node *lead = at(step, i);
  const kiln_cuda_node_state *ls = NULL;
  kiln_status st = kiln_cuda_node_state_of(be, lead, &ls);
  if (st) {
    be->host->status_free(st); /* reported when the node runs alone */
    return NULL;
  }
  const uint32_t n = ls->n_group;
  if (n < 2 || !ls->mvq_group.fn) return NULL;
  for (uint32_t m = 1; m < n; m++)
    if (at(step, i + m) != ls->group[m]) return NULL;
  kiln_cuda_bound nb[3];
  for (uint32_t m = 0; m < n; m++)
    KILN_RETURN_IF_ERROR(kiln_cuda_bind(be, step, ls->group[m], 1, col, pos, &nb[m]));
  if (!kiln_cuda_xq_holds(be, lead->src[1])) {
    KILN_RETURN_IF_ERROR(kiln_cuda_prof_begin(be));
    st = kiln_cuda_quantize_input(be, &nb[0], col);
    if (st) {
      be->prof.open = false;
      return st;
    }
    KILN_RETURN_IF_ERROR(kiln_cuda_prof_end(be, ls->prof_fused[0]));
  }
  CUdeviceptr w[3] = {0}, b[3] = {0}, y[3] = {0}, xq = be->xq;
  for (uint32_t m = 0; m < n; m++) {
    const kiln_node *nd = nb[m].node;
    w[m] = nb[m].b[0]->ptr;
    b[m] = nd->src[2] ? nb[m].b[2]->ptr : 0;
    y[m] = kiln_cuda_col_ptr(nb[m].b[4], nd->dst, col);
  }
  int n_cols = 1;
  void *args[] = {&w[0], &w[1], &w[2], &b[0], &b[1], &b[2], &y[0], &y[1], &y[2], &xq, &n_cols};
  KILN_RETURN_IF_ERROR(kiln_cuda_prof_begin(be));
  st = kiln_cuda_launch_shared(be, lead, "matvec_q group", ls->mvq_group.fn, ls->grid_group, 1,
                               ls->mvq_group.block, ls->mvq_group.shared, args);
  if (st) {
    be->prof.open = false;
    return st;
  }
  *out_used = n;
  return kiln_cuda_prof_end(be, ls->prof_fused[2]);
}

/* ROPE of Q at i, then its K RoPE, the store of the rotated K and a store
 * of V, both into caches of the K heads' width and of the type rope_store
 * was made for. */
static kiln_status fuse_rope(kiln_cuda_backend *be, const kiln_step *step, uint32_t i,
                             int32_t col, int32_t pos, uint32_t *out_used) {
  const kiln_node *rq = at(step, i), *rk = at(step, i + 1), *sk = at(step, i + 2),
                  *sv = at(step, i + 3);
  const kiln_cuda_node_state *qs = NULL;
  kiln_status st = kiln_cuda_node_state_of(be, rq, &qs);
  if (st) {
    be->host->status_free(st); /* reported when the node runs alone */
    return NULL;
  }
  if (!qs->rope_store.fn || !rk || rk != qs->rope_k || !sk || !sv ||
      sk->op != KILN_OP_STORE_KV || sv->op != KILN_OP_STORE_KV || sk->src[0] != rk->dst)
    return NULL;
  const int64_t kvw = rk->dst->ne[0];
  if (sk->dst->type != qs->rope_store_kv || sv->dst->type != qs->rope_store_kv || sk->dst->ne[0] != kvw ||
      sv->dst->ne[0] != kvw || sv->src[0]->ne[0] != kvw)
    return NULL;
  kiln_cuda_bound b[4];
  const kiln_node *nodes[4] = {rq, rk, sk, sv};
  for (int m = 0; m < 4; m++)
    KILN_RETURN_IF_ERROR(kiln_cuda_bind(be, step, nodes[m], 1, col, pos, &b[m]));
  CUdeviceptr q = kiln_cuda_col_ptr(b[0].b[0], rq->src[0], col),
              qo = kiln_cuda_col_ptr(b[0].b[4], rq->dst, col),
              k = kiln_cuda_col_ptr(b[1].b[0], rk->src[0], col),
              ko = kiln_cuda_col_ptr(b[1].b[4], rk->dst, col), kc = b[2].b[4]->ptr,
              v = kiln_cuda_col_ptr(b[3].b[0], sv->src[0], col), vc = b[3].b[4]->ptr;
  void *args[] = {&q, &qo, &k, &ko, &kc, &v, &vc, &be->step_dev};
  const kiln_rope_params *p = &rq->p.rope;
  const int64_t items = (int64_t)p->n_head * (p->n_rot / 2) + (int64_t)rk->p.rope.n_head * (p->n_rot / 2) + kvw;
  const uint32_t block = qs->rope_store.block;
  int64_t gy = (items + block - 1) / block;
  gy = gy < 1 ? 1 : gy > 65535 ? 65535 : gy;
  KILN_RETURN_IF_ERROR(kiln_cuda_prof_begin(be));
  st = kiln_cuda_launch(be, rq, "rope_store", qs->rope_store.fn, 1, (uint32_t)gy, block, args);
  if (st) {
    be->prof.open = false;
    return st;
  }
  if (be->xq_of == rq->dst || be->xq_of == rk->dst) be->xq_of = NULL;
  *out_used = 4;
  return kiln_cuda_prof_end(be, qs->prof_fused[0]);
}

kiln_status kiln_cuda_fuse_at(kiln_cuda_backend *be, const kiln_step *step, uint32_t i,
                              int32_t col, int32_t pos, uint32_t *out_used) {
  *out_used = 0;
  const kiln_node *nd = at(step, i);
  if (!be->fuse || !nd) return NULL;
  switch (nd->op) {
  case KILN_OP_ADD:
  case KILN_OP_RMS_NORM: return fuse_norm(be, step, i, col, pos, out_used);
  case KILN_OP_SWIGLU: return fuse_swiglu(be, step, i, col, pos, out_used);
  case KILN_OP_MUL_MAT: return fuse_group(be, step, i, col, pos, out_used);
  case KILN_OP_ROPE: return fuse_rope(be, step, i, col, pos, out_used);
  default: return NULL;
  }
}
