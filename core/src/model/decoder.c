/* The llama-family decoder: its tensors and its graph as kiln nodes
 * (kiln/graph.h). One builder serves llama, qwen2 and qwen3 (arch_*.c):
 * they differ in RoPE mode, Q/K/V biases (qwen2) and per-head q/k RMSNorm
 * (qwen3), as llama.cpp's llm_build_llama, llm_build_qwen2 and
 * llm_build_qwen3 do. */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "model_internal.h"

/* Every weight the graph will bind, checked up front so a bad file fails
 * at load, naming the tensor, rather than at plan time. */
kiln_status kiln__decoder_check_weights(const kiln_gguf *g, kiln_hparams *hp) {
  const kiln_gguf_tensor *t;
  int64_t qw = (int64_t)hp->head_dim * hp->n_head, kvw = (int64_t)hp->head_dim * hp->n_head_kv;
  const kiln_gguf_tensor *emb = kiln_gguf_find_tensor(g, "token_embd.weight");
  if (!emb) return kiln_status_new(KILN_STATUS_NOT_FOUND, "tensor token_embd.weight is missing");
  if (emb->n_dims != 2 || emb->ne[0] != hp->n_embd || emb->ne[1] < 1 || emb->ne[1] > INT32_MAX)
    return kiln_status_new(KILN_STATUS_MALFORMED, "tensor token_embd.weight must be [%u x n_vocab]",
                           hp->n_embd);
  hp->n_vocab = (uint32_t)emb->ne[1];
  int64_t e[2] = {hp->n_embd, hp->n_vocab};
  KILN_RETURN_IF_ERROR(kiln__weight_lookup(g, "output_norm.weight", 1, e, true, &t));
  hp->tied_output = kiln_gguf_find_tensor(g, "output.weight") == NULL;
  if (!hp->tied_output) KILN_RETURN_IF_ERROR(kiln__weight_lookup(g, "output.weight", 2, e, false, &t));

  for (uint32_t l = 0; l < hp->n_layer; l++) {
    struct {
      const char *suffix;
      int n_dims;
      int64_t ne0, ne1;
      bool f32;
      bool want;
    } w[] = {
        {"attn_norm.weight", 1, hp->n_embd, 1, true, true},
        {"attn_q.weight", 2, hp->n_embd, qw, false, true},
        {"attn_k.weight", 2, hp->n_embd, kvw, false, true},
        {"attn_v.weight", 2, hp->n_embd, kvw, false, true},
        {"attn_output.weight", 2, qw, hp->n_embd, false, true},
        {"ffn_norm.weight", 1, hp->n_embd, 1, true, true},
        {"ffn_gate.weight", 2, hp->n_embd, hp->n_ff, false, true},
        {"ffn_up.weight", 2, hp->n_embd, hp->n_ff, false, true},
        {"ffn_down.weight", 2, hp->n_ff, hp->n_embd, false, true},
        {"attn_q.bias", 1, qw, 1, true, hp->qkv_bias},
        {"attn_k.bias", 1, kvw, 1, true, hp->qkv_bias},
        {"attn_v.bias", 1, kvw, 1, true, hp->qkv_bias},
        {"attn_q_norm.weight", 1, hp->head_dim, 1, true, hp->qk_norm},
        {"attn_k_norm.weight", 1, hp->head_dim, 1, true, hp->qk_norm},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
      if (!w[i].want) continue;
      char name[96];
      snprintf(name, sizeof name, "blk.%u.%s", l, w[i].suffix);
      int64_t ne[2] = {w[i].ne0, w[i].ne1};
      KILN_RETURN_IF_ERROR(kiln__weight_lookup(g, name, w[i].n_dims, ne, w[i].f32, &t));
    }
  }
  return NULL;
}

/* Whether tensor `name` is one the graph binds for these hyperparameters. */
bool kiln__decoder_is_bound(const kiln_hparams *hp, const char *name) {
  static const char *global[] = {"token_embd.weight", "output_norm.weight", "output.weight"};
  for (size_t i = 0; i < sizeof global / sizeof global[0]; i++)
    if (!strcmp(name, global[i])) return true;
  unsigned l;
  int used = 0;
  if (sscanf(name, "blk.%u.%n", &l, &used) != 1 || used == 0 || l >= hp->n_layer) return false;
  const char *suffix = name + used;
  static const char *always[] = {"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
                                 "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
                                 "ffn_down.weight"};
  for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
    if (!strcmp(suffix, always[i])) return true;
  if (hp->qkv_bias && (!strcmp(suffix, "attn_q.bias") || !strcmp(suffix, "attn_k.bias") || !strcmp(suffix, "attn_v.bias")))
    return true;
  if (hp->qk_norm && (!strcmp(suffix, "attn_q_norm.weight") || !strcmp(suffix, "attn_k_norm.weight"))) return true;
  return false;
}

/* Binds GGUF tensor `name` (already checked by kiln_model_open). */
static kiln_status weight(kiln_graph *g, const kiln_model *m, const char *name, kiln_tensor **out) {
  const kiln_gguf_tensor *gt = kiln_gguf_find_tensor(m->gguf, name);
  if (!gt) return kiln_status_new(KILN_STATUS_NOT_FOUND, "tensor %s is missing", name);
  kiln_status st = kiln__graph_add_tensor(g, name, gt->type, KILN_ROLE_WEIGHT, gt->ne[0], gt->ne[1], gt->data, out);
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

kiln_status kiln__decoder_build(kiln_graph *g, const kiln_model *m, float eps) {
  const kiln_hparams *hp = &m->hp;
  int64_t qw = (int64_t)hp->head_dim * hp->n_head, kvw = (int64_t)hp->head_dim * hp->n_head_kv;
  char nm[KILN_NAME_MAX];
  kiln_tensor *tokens, *emb, *x, *t;
  kiln_node *nd;

  KILN_RETURN_IF_ERROR(kiln__graph_add_tensor(g, "tokens", KILN_TYPE_I32, KILN_ROLE_INPUT, g->batch, 1, NULL, &tokens));
  tokens->n_dims = 1;
  g->tokens = tokens;
  KILN_RETURN_IF_ERROR(weight(g, m, "token_embd.weight", &emb));
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_GET_ROWS, -1, "inp_embd", hp->n_embd, NULL, NULL, &x, 2, emb, tokens));

#define LNAME(suffix) (snprintf(nm, sizeof nm, "blk.%u.%s", l, suffix), nm)
  for (uint32_t l = 0; l < hp->n_layer; l++) {
    int32_t L = (int32_t)l;
    kiln_tensor *w, *b, *h, *q, *k, *v, *a;
    /* attention block */
    KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "attn_norm.weight", &w));
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_RMS_NORM, L, LNAME("attn_norm"), hp->n_embd, NULL, &nd, &h, 2, x, w));
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
      KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_MUL_MAT, L, LNAME(proj[i]), width[i], NULL, NULL, qkv[i], 3, w, h, b));
    }
    if (hp->qk_norm) {
      KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "attn_q_norm.weight", &w));
      KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_RMS_NORM, L, LNAME("q_norm"), qw, NULL, &nd, &q, 2, q, w));
      nd->p.rms_norm.eps = eps;
      KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "attn_k_norm.weight", &w));
      KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_RMS_NORM, L, LNAME("k_norm"), kvw, NULL, &nd, &k, 2, k, w));
      nd->p.rms_norm.eps = eps;
    }
    const kiln_rope_params rope = {hp->rope_mode, (int32_t)hp->n_rot, (int32_t)hp->head_dim,
                                   (int32_t)hp->n_head, hp->rope_theta, {0, 0, 0, 0}};
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_ROPE, L, LNAME("rope_q"), qw, NULL, &nd, &q, 1, q));
    nd->p.rope = rope;
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_ROPE, L, LNAME("rope_k"), kvw, NULL, &nd, &k, 1, k));
    nd->p.rope = rope;
    nd->p.rope.n_head = (int32_t)hp->n_head_kv;

    kiln_tensor *kc, *vc;
    KILN_RETURN_IF_ERROR(kiln__graph_add_kv_caches(g, L, hp->head_dim, kvw, &kc, &vc));
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_STORE_KV, L, LNAME("store_k"), kvw, kc, NULL, NULL, 1, k));
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_STORE_KV, L, LNAME("store_v"), kvw, vc, NULL, NULL, 1, v));
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_ATTENTION, L, LNAME("attn"), qw, NULL, &nd, &a, 3, q, kc, vc));
    nd->p.attention.n_head = (int32_t)hp->n_head;
    nd->p.attention.n_head_kv = (int32_t)hp->n_head_kv;
    nd->p.attention.head_dim = (int32_t)hp->head_dim;
    nd->p.attention.scale = (float)(1.0 / sqrt((double)hp->head_dim));

    KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "attn_output.weight", &w));
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_MUL_MAT, L, LNAME("attn_output"), hp->n_embd, NULL, NULL, &t, 2, w, a));
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_ADD, L, LNAME("attn_residual"), hp->n_embd, NULL, NULL, &x, 2, x, t));

    /* feed-forward block (SwiGLU) */
    kiln_tensor *gate, *up, *s;
    KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "ffn_norm.weight", &w));
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_RMS_NORM, L, LNAME("ffn_norm"), hp->n_embd, NULL, &nd, &h, 2, x, w));
    nd->p.rms_norm.eps = eps;
    KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "ffn_gate.weight", &w));
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_MUL_MAT, L, LNAME("ffn_gate"), hp->n_ff, NULL, NULL, &gate, 2, w, h));
    KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "ffn_up.weight", &w));
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_MUL_MAT, L, LNAME("ffn_up"), hp->n_ff, NULL, NULL, &up, 2, w, h));
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_SWIGLU, L, LNAME("ffn_swiglu"), hp->n_ff, NULL, NULL, &s, 2, gate, up));
    KILN_RETURN_IF_ERROR(layer_weight(g, m, l, "ffn_down.weight", &w));
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_MUL_MAT, L, LNAME("ffn_down"), hp->n_embd, NULL, NULL, &t, 2, w, s));
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_ADD, L, LNAME("ffn_residual"), hp->n_embd, NULL, NULL, &x, 2, x, t));
  }
#undef LNAME

  kiln_tensor *w, *out_w;
  KILN_RETURN_IF_ERROR(weight(g, m, "output_norm.weight", &w));
  if (hp->tied_output) out_w = emb; /* llama.cpp: output = token_embd when output.weight is absent */
  else KILN_RETURN_IF_ERROR(weight(g, m, "output.weight", &out_w));
  return kiln__graph_add_head(g, x, w, out_w, eps);
}
