/* The graph: tensors and nodes in execution order, as a model builder
 * (core/src/model/) writes them and the planner reads them. */
#include "config.h"

#include "kiln/kv_cache.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph_internal.h"

kiln_status kiln__graph_add_tensor(kiln_graph *g, const char *name, kiln_type type, kiln_tensor_role role,
                                   int64_t ne0, int64_t ne1, const void *data, kiln_tensor **out) {
  if (g->n_tensors == g->cap_tensors) {
    uint32_t cap = g->cap_tensors ? 2 * g->cap_tensors : 256;
    kiln_tensor **t = realloc(g->tensors, cap * sizeof *t);
    if (!t) return kiln_status_new(KILN_STATUS_NO_MEMORY, "graph tensors");
    g->tensors = t;
    g->cap_tensors = cap;
  }
  kiln_tensor *t = calloc(1, sizeof *t);
  if (!t) return kiln_status_new(KILN_STATUS_NO_MEMORY, "graph tensor");
  t->id = (int32_t)g->n_tensors;
  t->type = type;
  t->role = role;
  t->n_dims = ne1 > 1 ? 2 : 1;
  t->ne[0] = ne0;
  t->ne[1] = ne1;
  t->ne[2] = t->ne[3] = 1;
  t->nbytes = (uint64_t)kiln_type_row_bytes(type, ne0) * (uint64_t)ne1;
  t->data = data;
  snprintf(t->name, sizeof t->name, "%s", name);
  g->tensors[g->n_tensors++] = t;
  *out = t;
  return NULL;
}

kiln_status kiln__graph_add_kv_caches(kiln_graph *g, int32_t layer, int64_t head_dim, int64_t kv_width,
                                      kiln_tensor **out_k, kiln_tensor **out_v) {
  const int64_t bs = kiln_type_block_size(g->kv_type);
  if (bs < 1 || head_dim % bs != 0)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "layer %d: [kv_cache] type %s needs head_dim to be a multiple of %lld (its "
                           "blocks run along head_dim); this model's head_dim is %lld",
                           (int)layer, kiln_kv_type_config_name(g->kv_type), (long long)bs, (long long)head_dim);
  char nm[KILN_NAME_MAX];
  snprintf(nm, sizeof nm, "blk.%d.cache_k", (int)layer);
  KILN_RETURN_IF_ERROR(kiln__graph_add_tensor(g, nm, g->kv_type, KILN_ROLE_STATE, kv_width, g->n_ctx, NULL, out_k));
  snprintf(nm, sizeof nm, "blk.%d.cache_v", (int)layer);
  return kiln__graph_add_tensor(g, nm, g->kv_type, KILN_ROLE_STATE, kv_width, g->n_ctx, NULL, out_v);
}

kiln_status kiln__graph_add_node(kiln_graph *g, kiln_op op, int32_t layer, const char *name, int64_t width,
                                 const kiln_tensor *dst_or_null, kiln_node **out_node, kiln_tensor **out_dst,
                                 int n_src, ...) {
  kiln_tensor *dst = (kiln_tensor *)dst_or_null;
  if (!dst)
    KILN_RETURN_IF_ERROR(
        kiln__graph_add_tensor(g, name, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, width, g->batch, NULL, &dst));
  if (g->n_nodes == g->cap_nodes) {
    uint32_t cap = g->cap_nodes ? 2 * g->cap_nodes : 256;
    kiln_node **n = realloc(g->nodes, cap * sizeof *n);
    if (!n) return kiln_status_new(KILN_STATUS_NO_MEMORY, "graph nodes");
    g->nodes = n;
    g->cap_nodes = cap;
  }
  kiln_node *nd = calloc(1, sizeof *nd);
  if (!nd) return kiln_status_new(KILN_STATUS_NO_MEMORY, "graph node");
  nd->id = (int32_t)g->n_nodes;
  nd->op = op;
  nd->layer = layer;
  va_list ap;
  va_start(ap, n_src);
  for (int i = 0; i < n_src; i++) nd->src[i] = va_arg(ap, const kiln_tensor *);
  va_end(ap);
  nd->dst = dst;
  snprintf(nd->name, sizeof nd->name, "%s", name);
  g->nodes[g->n_nodes++] = nd;
  if (out_node) *out_node = nd;
  if (out_dst) *out_dst = dst;
  return NULL;
}

kiln_status kiln__graph_mark_feeds_recurrent(kiln_graph *g) {
  /* Nodes are in step order, each reading only tensors written before it
   * (or weights, inputs, states): one backward pass finds, for every
   * tensor, whether a state-updating node is downstream of it. A state is
   * read and written by its own node only, so no path runs through one
   * to an earlier node. */
  bool *reaches = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *reaches);
  if (!reaches) return kiln_status_new(KILN_STATUS_NO_MEMORY, "graph: marking the inputs of recurrent states");
  for (uint32_t i = g->n_nodes; i-- > 0;) {
    kiln_node *nd = g->nodes[i];
    const bool feeds = kiln_op_state_src(nd->op) >= 0 || reaches[nd->dst->id];
    if (nd->op == KILN_OP_MUL_MAT) nd->p.mul_mat.feeds_recurrent = feeds;
    if (!feeds) continue;
    for (int k = 0; k < KILN_MAX_SRC && nd->src[k]; k++) reaches[nd->src[k]->id] = true;
  }
  free(reaches);
  return NULL;
}

void kiln_graph_free(kiln_graph *g) {
  if (!g) return;
  for (uint32_t i = 0; i < g->n_tensors; i++) free(g->tensors[i]);
  for (uint32_t i = 0; i < g->n_nodes; i++) free(g->nodes[i]);
  free(g->tensors);
  free(g->nodes);
  free(g);
}

uint32_t kiln_graph_n_tensors(const kiln_graph *g) { return g->n_tensors; }
const kiln_tensor *kiln_graph_tensor(const kiln_graph *g, uint32_t id) { return g->tensors[id]; }
uint32_t kiln_graph_n_nodes(const kiln_graph *g) { return g->n_nodes; }
const kiln_node *kiln_graph_node(const kiln_graph *g, uint32_t i) { return g->nodes[i]; }
const kiln_tensor *kiln_graph_tokens(const kiln_graph *g) { return g->tokens; }
const kiln_tensor *kiln_graph_logits(const kiln_graph *g) { return g->logits; }
int32_t kiln_graph_batch(const kiln_graph *g) { return g->batch; }
int32_t kiln_graph_n_ctx(const kiln_graph *g) { return g->n_ctx; }
