/* The llama-family decoder as kiln nodes (kiln/graph.h). One builder serves
 * llama, qwen2 and qwen3: they differ in RoPE mode, Q/K/V biases (qwen2)
 * and per-head q/k RMSNorm (qwen3), as llama.cpp's llm_build_llama,
 * llm_build_qwen2 and llm_build_qwen3 do. */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

static kiln_status add_tensor(kiln_graph *g, const char *name, kiln_type type, kiln_tensor_role role,
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

/* Binds GGUF tensor `name` (already checked by kiln_model_open). */
static kiln_status weight(kiln_graph *g, const kiln_model *m, const char *name, kiln_tensor **out) {
  const kiln_gguf_tensor *gt = kiln_gguf_find_tensor(m->gguf, name);
  if (!gt) return kiln_status_new(KILN_STATUS_NOT_FOUND, "tensor %s is missing", name);
  kiln_status st = add_tensor(g, name, gt->type, KILN_ROLE_WEIGHT, gt->ne[0], gt->ne[1], gt->data, out);
  if (!st) {
    (*out)->n_dims = gt->n_dims;
    (*out)->nbytes = gt->nbytes;
  }
  return st;
}

static kiln_status layer_weight(kiln_graph *g, const kiln_model *m, uint32_t l, const char *suffix,
                                kiln_tensor **out) {
  char name[96];
  snprintf(name, sizeof name, "blk.%u.%s", l, suffix);
  return weight(g, m, name, out);
}

/* A node writing a fresh F32 activation [width, batch] named like the node. */
static kiln_status node(kiln_graph *g, kiln_op op, int32_t layer, const char *name, int64_t width,
                        const kiln_tensor *dst_or_null, kiln_node **out_node, kiln_tensor **out_dst,
                        int n_src, ...) {
  kiln_tensor *dst = (kiln_tensor *)dst_or_null;
  if (!dst) KILN_RETURN_IF_ERROR(add_tensor(g, name, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, width, g->batch, NULL, &dst));
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

static kiln_status build(kiln_graph *g, const kiln_model *m, float eps) {
  const kiln_hparams *hp = &m->hp;
  int64_t qw = (int64_t)hp->head_dim * hp->n_head, kvw = (int64_t)hp->head_dim * hp->n_head_kv;
  char nm[KILN_NAME_MAX];
  kiln_tensor *tokens, *emb, *x, *t;
  kiln_node *nd;

  KILN_RETURN_IF_ERROR(add_tensor(g, "tokens", KILN_TYPE_I32, KILN_ROLE_INPUT, g->batch, 1, NULL, &tokens));
  tokens->n_dims = 1;
  g->tokens = tokens;
  KILN_RETURN_IF_ERROR(weight(g, m, "token_embd.weight", &emb));
  KILN_RETURN_IF_ERROR(node(g, KILN_OP_GET_ROWS, -1, "inp_embd", hp->n_embd, NULL, NULL, &x, 2, emb, tokens));

#define LNAME(suffix) (snprintf(nm, sizeof nm, "blk.%u.%s", l, suffix), nm)
  for (uint32_t l = 0; l < hp->n_layer; l++) {
    int32_t L = (int32_t)l;
    kiln_tensor *w, *b, *h, *q, *k, *v, *a;
    /* attention block */
    KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "attn_norm.weight", &w));
    KILN_RETURN_IF_ERROR(node(g, KILN_OP_RMS_NORM, L, LNAME("attn_norm"), hp->n_embd, NULL, &nd, &h, 2, x, w));
    nd->p.rms_norm.eps = eps;

    kiln_tensor **qkv[3] = {&q, &k, &v};
    const char *proj[3] = {"attn_q", "attn_k", "attn_v"};
    int64_t width[3] = {qw, kvw, kvw};
    for (int i = 0; i < 3; i++) {
      char wn[32], bn[32];
      snprintf(wn, sizeof wn, "%s.weight", proj[i]);
      snprintf(bn, sizeof bn, "%s.bias", proj[i]);
      KILN_RETURN_IF_ERROR(layer_weight(g, m, l, wn, &w));
      b = NULL;
      if (hp->qkv_bias) KILN_RETURN_IF_ERROR(layer_weight(g, m, l, bn, &b));
      KILN_RETURN_IF_ERROR(node(g, KILN_OP_MUL_MAT, L, LNAME(proj[i]), width[i], NULL, NULL, qkv[i], 3, w, h, b));
    }
    if (hp->qk_norm) {
      KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "attn_q_norm.weight", &w));
      KILN_RETURN_IF_ERROR(node(g, KILN_OP_RMS_NORM, L, LNAME("q_norm"), qw, NULL, &nd, &q, 2, q, w));
      nd->p.rms_norm.eps = eps;
      KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "attn_k_norm.weight", &w));
      KILN_RETURN_IF_ERROR(node(g, KILN_OP_RMS_NORM, L, LNAME("k_norm"), kvw, NULL, &nd, &k, 2, k, w));
      nd->p.rms_norm.eps = eps;
    }
    const kiln_rope_params rope = {hp->rope_mode, (int32_t)hp->n_rot, (int32_t)hp->head_dim,
                                   (int32_t)hp->n_head, hp->rope_theta};
    KILN_RETURN_IF_ERROR(node(g, KILN_OP_ROPE, L, LNAME("rope_q"), qw, NULL, &nd, &q, 1, q));
    nd->p.rope = rope;
    KILN_RETURN_IF_ERROR(node(g, KILN_OP_ROPE, L, LNAME("rope_k"), kvw, NULL, &nd, &k, 1, k));
    nd->p.rope = rope;
    nd->p.rope.n_head = (int32_t)hp->n_head_kv;

    kiln_tensor *kc, *vc;
    KILN_RETURN_IF_ERROR(add_tensor(g, LNAME("cache_k"), KILN_TYPE_F32, KILN_ROLE_STATE, kvw, g->n_ctx, NULL, &kc));
    KILN_RETURN_IF_ERROR(add_tensor(g, LNAME("cache_v"), KILN_TYPE_F32, KILN_ROLE_STATE, kvw, g->n_ctx, NULL, &vc));
    KILN_RETURN_IF_ERROR(node(g, KILN_OP_STORE_KV, L, LNAME("store_k"), kvw, kc, NULL, NULL, 1, k));
    KILN_RETURN_IF_ERROR(node(g, KILN_OP_STORE_KV, L, LNAME("store_v"), kvw, vc, NULL, NULL, 1, v));
    KILN_RETURN_IF_ERROR(node(g, KILN_OP_ATTENTION, L, LNAME("attn"), qw, NULL, &nd, &a, 3, q, kc, vc));
    nd->p.attention.n_head = (int32_t)hp->n_head;
    nd->p.attention.n_head_kv = (int32_t)hp->n_head_kv;
    nd->p.attention.head_dim = (int32_t)hp->head_dim;
    nd->p.attention.scale = (float)(1.0 / sqrt((double)hp->head_dim));

    KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "attn_output.weight", &w));
    KILN_RETURN_IF_ERROR(node(g, KILN_OP_MUL_MAT, L, LNAME("attn_output"), hp->n_embd, NULL, NULL, &t, 2, w, a));
    KILN_RETURN_IF_ERROR(node(g, KILN_OP_ADD, L, LNAME("attn_residual"), hp->n_embd, NULL, NULL, &x, 2, x, t));

    /* feed-forward block (SwiGLU) */
    kiln_tensor *gate, *up, *s;
    KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "ffn_norm.weight", &w));
    KILN_RETURN_IF_ERROR(node(g, KILN_OP_RMS_NORM, L, LNAME("ffn_norm"), hp->n_embd, NULL, &nd, &h, 2, x, w));
    nd->p.rms_norm.eps = eps;
    KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "ffn_gate.weight", &w));
    KILN_RETURN_IF_ERROR(node(g, KILN_OP_MUL_MAT, L, LNAME("ffn_gate"), hp->n_ff, NULL, NULL, &gate, 2, w, h));
    KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "ffn_up.weight", &w));
    KILN_RETURN_IF_ERROR(node(g, KILN_OP_MUL_MAT, L, LNAME("ffn_up"), hp->n_ff, NULL, NULL, &up, 2, w, h));
    KILN_RETURN_IF_ERROR(node(g, KILN_OP_SWIGLU, L, LNAME("ffn_swiglu"), hp->n_ff, NULL, NULL, &s, 2, gate, up));
    KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "ffn_down.weight", &w));
    KILN_RETURN_IF_ERROR(node(g, KILN_OP_MUL_MAT, L, LNAME("ffn_down"), hp->n_embd, NULL, NULL, &t, 2, w, s));
    KILN_RETURN_IF_ERROR(node(g, KILN_OP_ADD, L, LNAME("ffn_residual"), hp->n_embd, NULL, NULL, &x, 2, x, t));
  }
#undef LNAME

  kiln_tensor *w, *out_w, *logits;
  KILN_RETURN_IF_ERROR(weight(g, m, "output_norm.weight", &w));
  KILN_RETURN_IF_ERROR(node(g, KILN_OP_RMS_NORM, -1, "output_norm", hp->n_embd, NULL, &nd, &x, 2, x, w));
  nd->p.rms_norm.eps = eps;
  if (hp->tied_output) out_w = emb; /* llama.cpp: output = token_embd when output.weight is absent */
  else KILN_RETURN_IF_ERROR(weight(g, m, "output.weight", &out_w));
  KILN_RETURN_IF_ERROR(node(g, KILN_OP_MUL_MAT, -1, "logits", hp->n_vocab, NULL, NULL, &logits, 2, out_w, x));
  g->logits = logits;
  return NULL;
}

kiln_status kiln_graph_build(const kiln_model *m, const kiln_graph_options *opt, kiln_graph **out_graph) {
  *out_graph = NULL;
  if (opt->batch < 1 || opt->n_ctx < 1 || opt->batch > opt->n_ctx)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "graph: batch %d and n_ctx %d must be >= 1 with batch <= n_ctx", opt->batch,
                           opt->n_ctx);
  kiln_graph *g = calloc(1, sizeof *g);
  if (!g) return kiln_status_new(KILN_STATUS_NO_MEMORY, "graph");
  g->batch = opt->batch;
  g->n_ctx = opt->n_ctx;
  float eps = opt->eps_override > 0.0f ? opt->eps_override : m->hp.eps;
  kiln_status st = build(g, m, eps);
  if (st) {
    kiln_graph_free(g);
    return kiln_status_annotate(st, "building the %s graph", m->hp.arch_name);
  }
  *out_graph = g;
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
