/* One shard's graph (kiln/tp.h): the plan's graph node for node, on the
 * shard's slices. Weights split by rows are views into the model's mapping
 * (a block of whole rows is contiguous); weights split within their rows
 * (row-parallel) are gathered into copies the shard owns. */
#include "config.h"

#include "kiln/tp.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "tp_internal.h"

struct kiln_tp_shard {
  kiln_graph *g;
  void **copies;
  uint32_t n_copies;
};

/* Shard s's tensor for t used under `split`, made on first use. map holds
 * one entry per (weight, split): a weight may be read whole by one node and
 * split by another (a tied token_embd). An activation or cache has one
 * split, the one its writer gave it, and every reader must agree. */
static kiln_status shard_tensor(kiln_tp_shard *sh, const kiln_tp_plan *p, int32_t s, const kiln_tensor *t,
                                kiln_tp_split split, kiln_tensor **map, kiln_tensor **out) {
  bool weight = t->role == KILN_ROLE_WEIGHT;
  kiln_tensor **slot = &map[(size_t)t->id * 4 + (size_t)(weight ? split : 0)];
  if (*slot) {
    int64_t ne0, ne1;
    kiln__tp_split_shape(t, split, p->n, &ne0, &ne1);
    if ((*slot)->ne[0] != ne0 || (*slot)->ne[1] != ne1)
      return kiln_status_new(KILN_STATUS_INTERNAL, "shard %d: %s is read with another split than it was written",
                             s, t->name);
    *out = *slot;
    return NULL;
  }
  int32_t n = p->n;
  int64_t ne0, ne1;
  kiln__tp_split_shape(t, split, n, &ne0, &ne1);
  const uint8_t *data = t->data;
  if (t->role == KILN_ROLE_WEIGHT && split != KILN_TP_SPLIT_NONE) {
    int64_t full_row = kiln_type_row_bytes(t->type, t->ne[0]), row = kiln_type_row_bytes(t->type, ne0);
    if (full_row <= 0 || row <= 0 || (split != KILN_TP_SPLIT_ROWS && row * n != full_row))
      return kiln_status_new(KILN_STATUS_INTERNAL, "shard %d: %s cannot be cut into %d blocks of its rows", s,
                             t->name, n);
    if (split == KILN_TP_SPLIT_ROWS) {
      data += (size_t)s * (size_t)ne1 * (size_t)full_row;
    } else if (split == KILN_TP_SPLIT_COLUMN && t->ne[1] == 1) {
      data += (size_t)s * (size_t)row; /* a bias: block s of one row */
    } else {
      uint8_t *c = malloc((size_t)row * (size_t)ne1);
      void **cs = realloc(sh->copies, (sh->n_copies + 1) * sizeof *cs);
      if (!c || !cs) {
        free(c);
        if (cs) sh->copies = cs;
        return kiln_status_new(KILN_STATUS_NO_MEMORY, "shard %d: a copy of %s", s, t->name);
      }
      sh->copies = cs;
      sh->copies[sh->n_copies++] = c;
      for (int64_t r = 0; r < ne1; r++)
        memcpy(c + (size_t)r * (size_t)row, data + (size_t)r * (size_t)full_row + (size_t)s * (size_t)row,
               (size_t)row);
      data = c;
    }
  }
  kiln_tensor *st;
  KILN_RETURN_IF_ERROR(kiln__graph_add_tensor(sh->g, t->name, t->type, t->role, ne0, ne1, data, &st));
  st->n_dims = t->n_dims;
  if (t->role == KILN_ROLE_INPUT) st->nbytes = t->nbytes; /* I32 [batch], stored as ne0 */
  *slot = st;
  *out = st;
  return NULL;
}

static kiln_status build(kiln_tp_shard *sh, const kiln_tp_plan *p, int32_t s, kiln_tensor **map) {
  const kiln_graph *g = p->g;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const kiln_node *nd = g->nodes[i];
    const kiln_tensor *src[KILN_MAX_SRC] = {0};
    kiln_tensor *t;
    for (int k = 0; k < KILN_MAX_SRC && nd->src[k]; k++) {
      KILN_RETURN_IF_ERROR(shard_tensor(sh, p, s, nd->src[k], p->src_split[i][k], map, &t));
      src[k] = t;
    }
    kiln_tensor *dst;
    KILN_RETURN_IF_ERROR(shard_tensor(sh, p, s, nd->dst, p->dst_split[i], map, &dst));
    kiln_node *out;
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(sh->g, nd->op, nd->layer, nd->name, dst->ne[0], dst, &out, NULL, 4,
                                              src[0], src[1], src[2], src[3]));
    out->p = nd->p;
    if (p->layout[i] == KILN_TP_SHARDED && nd->op == KILN_OP_ROPE) out->p.rope.n_head /= p->n;
    if (p->layout[i] == KILN_TP_SHARDED && nd->op == KILN_OP_ATTENTION) {
      out->p.attention.n_head /= p->n; /* the GQA ratio stays n_head / n_head_kv */
      out->p.attention.n_head_kv /= p->n;
    }
  }
  kiln_tensor *t;
  KILN_RETURN_IF_ERROR(shard_tensor(sh, p, s, g->tokens, KILN_TP_SPLIT_NONE, map, &t));
  sh->g->tokens = t;
  if (g->out_ids) { /* the output head runs on the columns out_ids names */
    KILN_RETURN_IF_ERROR(shard_tensor(sh, p, s, g->out_ids, KILN_TP_SPLIT_NONE, map, &t));
    sh->g->out_ids = t;
    sh->g->head_first = g->head_first;
  }
  uint32_t last = g->n_nodes - 1;
  if (!g->n_nodes || g->nodes[last]->dst != g->logits)
    return kiln_status_new(KILN_STATUS_INTERNAL, "shard %d: the logits are not the last node's output", s);
  sh->g->logits = sh->g->nodes[last]->dst;
  return NULL;
}

kiln_status kiln_tp_shard_build(const kiln_tp_plan *p, int32_t shard, kiln_tp_shard **out_shard) {
  *out_shard = NULL;
  if (shard < 0 || shard >= p->n)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "shard %d of %d", shard, p->n);
  kiln_tp_shard *sh = calloc(1, sizeof *sh);
  kiln_tensor **map = calloc((size_t)p->g->n_tensors * 4 + 1, sizeof *map);
  if (sh) sh->g = calloc(1, sizeof *sh->g);
  if (!sh || !sh->g || !map) {
    free(map);
    kiln_tp_shard_free(sh);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "shard %d", shard);
  }
  sh->g->batch = p->g->batch;
  sh->g->n_ctx = p->g->n_ctx;
  kiln_status st = build(sh, p, shard, map);
  free(map);
  if (st) {
    kiln_tp_shard_free(sh);
    return kiln_status_annotate(st, "building shard %d of %d", shard, p->n);
  }
  *out_shard = sh;
  return NULL;
}

void kiln_tp_shard_free(kiln_tp_shard *sh) {
  if (!sh) return;
  kiln_graph_free(sh->g);
  for (uint32_t i = 0; i < sh->n_copies; i++) free(sh->copies[i]);
  free(sh->copies);
  free(sh);
}

const kiln_graph *kiln_tp_shard_graph(const kiln_tp_shard *sh) { return sh->g; }
