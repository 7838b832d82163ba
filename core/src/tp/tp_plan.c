/* The tensor-parallel plan (kiln/tp.h): Megatron-style splits of a
 * llama-family graph, derived from the graph's nodes and the weights they
 * read, with every split checked to divide evenly. */
#include "config.h"

#include "kiln/tp.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "tp_internal.h"

/* A projection's split, by the suffix of its weight's name. `count` is what
 * N must divide (heads, KV heads, FFN columns, vocabulary rows), `what`
 * names it with its GGUF key. */
typedef struct proj_rule {
  const char *suffix;
  kiln_tp_split split;
  const char *what;
} proj_rule;

static const proj_rule proj_rules[] = {
    {"attn_q.weight", KILN_TP_SPLIT_ROWS, "query heads (attention.head_count)"},
    {"attn_k.weight", KILN_TP_SPLIT_ROWS, "KV heads (attention.head_count_kv)"},
    {"attn_v.weight", KILN_TP_SPLIT_ROWS, "KV heads (attention.head_count_kv)"},
    {"ffn_gate.weight", KILN_TP_SPLIT_ROWS, "FFN columns (feed_forward_length)"},
    {"ffn_up.weight", KILN_TP_SPLIT_ROWS, "FFN columns (feed_forward_length)"},
    {"attn_output.weight", KILN_TP_SPLIT_K, "query heads (attention.head_count)"},
    {"ffn_down.weight", KILN_TP_SPLIT_K, "FFN columns (feed_forward_length)"},
    {"output.weight", KILN_TP_SPLIT_ROWS, "vocabulary rows"},
    {"token_embd.weight", KILN_TP_SPLIT_ROWS, "vocabulary rows"}, /* tied output */
};

static const proj_rule *find_rule(const char *name) {
  const char *suffix = name;
  unsigned l;
  int used = 0;
  if (sscanf(name, "blk.%u.%n", &l, &used) == 1 && used > 0) suffix = name + used;
  else if (strncmp(name, "blk.", 4) == 0) return NULL;
  for (size_t i = 0; i < sizeof proj_rules / sizeof proj_rules[0]; i++)
    if (strcmp(suffix, proj_rules[i].suffix) == 0) {
      /* output/token_embd only outside the blocks, attn_* only inside */
      bool global = proj_rules[i].suffix[0] == 'o' || proj_rules[i].suffix[0] == 't';
      if (global != (suffix == name)) return NULL;
      return &proj_rules[i];
    }
  return NULL;
}

/* How many of rule r's units weight w has: heads from hp, FFN columns and
 * vocabulary rows from the weight's shape. */
static int64_t rule_count(const proj_rule *r, const kiln_tensor *w, const kiln_hparams *hp) {
  if (strstr(r->what, "query heads")) return hp->n_head;
  if (strstr(r->what, "KV heads")) return hp->n_head_kv;
  return r->split == KILN_TP_SPLIT_K ? w->ne[0] : w->ne[1];
}

static kiln_status plan_mul_mat(kiln_tp_plan *p, const kiln_node *nd, const kiln_hparams *hp) {
  const kiln_tensor *w = nd->src[0], *x = nd->src[1], *b = nd->src[2];
  uint32_t i = (uint32_t)nd->id;
  int32_t n = p->n;
  const proj_rule *r = find_rule(w->name);
  if (!r)
    return kiln_status_new(KILN_STATUS_UNSUPPORTED, "node %s: weight %s has no tensor-parallel split", nd->name,
                           w->name);
  int64_t count = rule_count(r, w, hp);
  if (count % n)
    return kiln_status_new(KILN_STATUS_UNSUPPORTED, "%s: %" PRId64 " %s do not divide among %d shards", w->name,
                           count, r->what, n);
  kiln_tp_layout in = p->tensor_layout[x->id];
  if (r->split == KILN_TP_SPLIT_ROWS) {
    if (in != KILN_TP_REPLICATED)
      return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                             "node %s: a column-parallel projection needs its whole input, and %s is sharded",
                             nd->name, x->name);
    p->src_split[i][0] = KILN_TP_SPLIT_ROWS;
    if (b) p->src_split[i][2] = KILN_TP_SPLIT_COLUMN;
    p->dst_split[i] = KILN_TP_SPLIT_COLUMN;
    p->layout[i] = KILN_TP_SHARDED;
    p->tensor_layout[nd->dst->id] = KILN_TP_SHARDED;
    if (strcmp(r->suffix, "output.weight") == 0 || strcmp(r->suffix, "token_embd.weight") == 0)
      p->collective[i] = KILN_TP_GATHER;
    return NULL;
  }
  /* row-parallel: each shard multiplies its block of every row by its
   * block of the input, so the input must be sharded in the same blocks */
  int64_t k = w->ne[0] / n, bs = kiln_type_block_size(w->type);
  if (in != KILN_TP_SHARDED)
    return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                           "node %s: a row-parallel projection needs a sharded input, and %s is not", nd->name,
                           x->name);
  if (bs < 1 || k % bs)
    return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                           "%s: a shard's %" PRId64 " of %" PRId64 " values per row are not a whole number of "
                           "%s blocks (%" PRId64 ") at %d shards",
                           w->name, k, w->ne[0], kiln_type_name(w->type), bs, n);
  if (b)
    return kiln_status_new(KILN_STATUS_UNSUPPORTED, "node %s: a row-parallel projection with a bias (%s)",
                           nd->name, b->name);
  p->src_split[i][0] = KILN_TP_SPLIT_K;
  p->src_split[i][1] = KILN_TP_SPLIT_COLUMN;
  p->layout[i] = n > 1 ? KILN_TP_PARTIAL : KILN_TP_REPLICATED;
  if (n > 1) {
    p->collective[i] = KILN_TP_ALL_REDUCE;
    p->n_all_reduce++;
  }
  p->tensor_layout[nd->dst->id] = KILN_TP_REPLICATED; /* after the all-reduce */
  return NULL;
}

/* Every activation source of nd has layout *out, or it is an error. */
static kiln_status same_layout(const kiln_tp_plan *p, const kiln_node *nd, int first, int last,
                               kiln_tp_layout *out) {
  *out = p->tensor_layout[nd->src[first]->id];
  for (int s = first + 1; s <= last && nd->src[s]; s++)
    if (p->tensor_layout[nd->src[s]->id] != *out)
      return kiln_status_new(KILN_STATUS_UNSUPPORTED, "node %s (%s): %s is %s and %s is not", nd->name,
                             kiln_op_name(nd->op), nd->src[first]->name,
                             *out == KILN_TP_SHARDED ? "sharded" : "whole", nd->src[s]->name);
  return NULL;
}

static kiln_status plan_node(kiln_tp_plan *p, const kiln_node *nd, const kiln_hparams *hp) {
  uint32_t i = (uint32_t)nd->id;
  kiln_tp_layout l = KILN_TP_REPLICATED;
  switch (nd->op) {
  case KILN_OP_GET_ROWS: break; /* the embedding lookup: every shard holds the whole table */
  case KILN_OP_MUL_MAT: return plan_mul_mat(p, nd, hp);
  case KILN_OP_RMS_NORM:
    l = p->tensor_layout[nd->src[0]->id];
    /* Per-head norms (qwen3's q_norm, k_norm) stay inside a shard's
     * heads; a norm over a whole row cannot run on a block of it. */
    if (l == KILN_TP_SHARDED && (nd->src[0]->ne[0] / p->n) % nd->src[1]->ne[0])
      return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                             "node %s: an RMSNorm over rows of %" PRId64 " values cannot run on blocks of %" PRId64,
                             nd->name, nd->src[1]->ne[0], nd->src[0]->ne[0] / p->n);
    break;
  case KILN_OP_GET_COLUMNS: /* the output head's columns: as its input, whole */
  case KILN_OP_ROPE:
  case KILN_OP_STORE_KV:
    l = p->tensor_layout[nd->src[0]->id];
    if (nd->op == KILN_OP_STORE_KV) {
      p->tensor_layout[nd->dst->id] = l; /* the KV cache, sharded by KV heads */
      p->dst_split[i] = l == KILN_TP_SHARDED ? KILN_TP_SPLIT_COLUMN : KILN_TP_SPLIT_NONE;
    }
    break;
  case KILN_OP_ATTENTION:
    KILN_RETURN_IF_ERROR(same_layout(p, nd, 0, 2, &l));
    if (l == KILN_TP_SHARDED && (nd->p.attention.n_head % p->n || nd->p.attention.n_head_kv % p->n))
      return kiln_status_new(KILN_STATUS_UNSUPPORTED, "node %s: %d query heads and %d KV heads among %d shards",
                             nd->name, nd->p.attention.n_head, nd->p.attention.n_head_kv, p->n);
    break;
  case KILN_OP_SWIGLU:
  case KILN_OP_ADD:
  case KILN_OP_SIGMOID_MUL: KILN_RETURN_IF_ERROR(same_layout(p, nd, 0, 1, &l)); break;
  default:
    return kiln_status_new(KILN_STATUS_UNSUPPORTED, "node %s (%s): tensor parallelism has no split for this op",
                           nd->name, kiln_op_name(nd->op));
  }
  p->layout[i] = l;
  if (l == KILN_TP_SHARDED) {
    for (int s = 0; s < KILN_MAX_SRC && nd->src[s]; s++)
      if (nd->src[s]->role != KILN_ROLE_WEIGHT) p->src_split[i][s] = KILN_TP_SPLIT_COLUMN;
    if (nd->op != KILN_OP_STORE_KV) p->dst_split[i] = KILN_TP_SPLIT_COLUMN;
  }
  if (nd->op != KILN_OP_STORE_KV) p->tensor_layout[nd->dst->id] = l;
  return NULL;
}

kiln_status kiln_tp_plan_create(const kiln_graph *g, const kiln_hparams *hp, int32_t n_shards,
                                kiln_tp_plan **out_plan) {
  *out_plan = NULL;
  if (n_shards < 1 || n_shards > KILN_TP_MAX_SHARDS)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "tensor parallelism over %d shards: 1..%d", n_shards,
                           KILN_TP_MAX_SHARDS);
  if (hp->hybrid)
    return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                           "tensor parallelism over %d shards: %s's recurrent (Gated DeltaNet) layers have no "
                           "split yet; llama, qwen2 and qwen3 have",
                           n_shards, hp->arch_name);
  kiln_tp_plan *p = calloc(1, sizeof *p);
  if (!p) return kiln_status_new(KILN_STATUS_NO_MEMORY, "tensor-parallel plan");
  p->g = g;
  p->n = n_shards;
  uint32_t nn = g->n_nodes ? g->n_nodes : 1, nt = g->n_tensors ? g->n_tensors : 1;
  p->layout = calloc(nn, sizeof *p->layout);
  p->collective = calloc(nn, sizeof *p->collective);
  p->src_split = calloc(nn, sizeof *p->src_split);
  p->dst_split = calloc(nn, sizeof *p->dst_split);
  p->tensor_layout = calloc(nt, sizeof *p->tensor_layout);
  kiln_status st = NULL;
  if (!p->layout || !p->collective || !p->src_split || !p->dst_split || !p->tensor_layout)
    st = kiln_status_new(KILN_STATUS_NO_MEMORY, "tensor-parallel plan");
  for (uint32_t i = 0; !st && i < g->n_nodes; i++) st = plan_node(p, g->nodes[i], hp);
  if (!st && g->logits && p->tensor_layout[g->logits->id] != KILN_TP_SHARDED)
    st = kiln_status_new(KILN_STATUS_INTERNAL, "tensor-parallel plan: the logits are not split by vocabulary");
  if (st) {
    kiln_tp_plan_free(p);
    return kiln_status_annotate(st, "tensor-parallel plan for %d shards", n_shards);
  }
  *out_plan = p;
  return NULL;
}

void kiln_tp_plan_free(kiln_tp_plan *p) {
  if (!p) return;
  free(p->layout);
  free(p->collective);
  free(p->src_split);
  free(p->dst_split);
  free(p->tensor_layout);
  free(p);
}

int32_t kiln_tp_plan_shards(const kiln_tp_plan *p) { return p->n; }
const kiln_graph *kiln_tp_plan_graph(const kiln_tp_plan *p) { return p->g; }
kiln_tp_split kiln_tp_plan_src_split(const kiln_tp_plan *p, uint32_t node, int src) {
  return p->src_split[node][src];
}
kiln_tp_split kiln_tp_plan_dst_split(const kiln_tp_plan *p, uint32_t node) { return p->dst_split[node]; }
kiln_tp_layout kiln_tp_plan_node_layout(const kiln_tp_plan *p, uint32_t node) { return p->layout[node]; }
kiln_tp_collective kiln_tp_plan_node_collective(const kiln_tp_plan *p, uint32_t node) {
  return p->collective[node];
}
uint32_t kiln_tp_plan_n_all_reduce(const kiln_tp_plan *p) { return p->n_all_reduce; }

void kiln__tp_split_shape(const kiln_tensor *t, kiln_tp_split split, int32_t n, int64_t *ne0, int64_t *ne1) {
  *ne0 = t->ne[0];
  *ne1 = t->ne[1];
  if (split == KILN_TP_SPLIT_ROWS) *ne1 /= n;
  else if (split == KILN_TP_SPLIT_K || split == KILN_TP_SPLIT_COLUMN) *ne0 /= n;
}

void kiln_tp_plan_print(const kiln_tp_plan *p, FILE *out) {
  static const char *split_names[] = {"whole", "rows", "row blocks", "columns"};
  uint32_t n_split = 0;
  for (uint32_t i = 0; i < p->g->n_nodes; i++) {
    const kiln_node *nd = p->g->nodes[i];
    for (int s = 0; s < KILN_MAX_SRC && nd->src[s]; s++) {
      const kiln_tensor *t = nd->src[s];
      if (t->role != KILN_ROLE_WEIGHT || p->src_split[i][s] == KILN_TP_SPLIT_NONE) continue;
      int64_t a, b;
      kiln__tp_split_shape(t, p->src_split[i][s], p->n, &a, &b);
      fprintf(out, "  %-28s %-10s [%" PRId64 " x %" PRId64 "] of [%" PRId64 " x %" PRId64 "]\n", t->name,
              split_names[p->src_split[i][s]], a, b, t->ne[0], t->ne[1]);
      n_split++;
    }
    if (p->collective[i] == KILN_TP_ALL_REDUCE) fprintf(out, "  all-reduce after %s\n", nd->name);
    if (p->collective[i] == KILN_TP_GATHER) fprintf(out, "  gather after %s\n", nd->name);
  }
  fprintf(out, "tensor parallel: %d shards, %u weights split, %u all-reduce points\n", p->n, n_split,
          p->n_all_reduce);
}
