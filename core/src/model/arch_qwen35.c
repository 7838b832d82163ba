/* qwen35 (Qwen3.5; llama.cpp's LLM_ARCH_QWEN35, src/models/qwen35.cpp;
 * transformers' modeling_qwen3_5.py): decoder blocks that are either
 * Gated DeltaNet linear attention (recurrent) or gated full attention, in
 * the pattern the file gives, each followed by a SwiGLU FFN behind its own
 * post-attention RMSNorm.
 *
 * What llama.cpp's converter (conversion/qwen.py, Qwen3_5TextModel) writes,
 * and so what this file reads:
 *   - every RMSNorm weight of transformers' offset form (1 + w: input and
 *     post-attention layernorms, the final norm, q_norm, k_norm) is stored
 *     already offset, so attn_norm, post_attention_norm, output_norm,
 *     attn_q_norm and attn_k_norm multiply as they are; the gated norm
 *     (linear_attn.norm -> ssm_norm) is plain w in both;
 *   - A_log is stored as ssm_a = -exp(A_log), dt_bias as ssm_dt.bias, the
 *     conv kernel squeezed to [K, channels];
 *   - with fewer q/k heads than value heads, the value heads of attn_qkv,
 *     attn_gate, ssm_alpha, ssm_beta, ssm_a, ssm_dt, ssm_conv1d and ssm_out
 *     are reordered from grouped to tiled, so value head h reads q/k head
 *     h % Hk (kiln/graph.h's GATED_DELTA_NET);
 *   - full attention's attn_q holds query and gate per head, interleaved
 *     ([q_h, gate_h], 2 * head_dim rows each).
 * Every norm's ε is attention.layer_norm_rms_epsilon (llama.cpp: the
 * RMSNorms, the gated norm and the q/k L2 norms; transformers fixes the L2
 * norms' at 1e-6, which is what every Qwen3.5 file holds). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "model_internal.h"

/* Tokens per chunk of the chunked delta rule in prefill: transformers'
 * torch_chunk_gated_delta_rule and llama.cpp's build_delta_net_chunking. */
#define QWEN35_GDN_CHUNK 64

static void configure(kiln_hparams *hp) {
  hp->rope_mode = KILN_ROPE_IMROPE;
  hp->qk_norm = true;
  hp->hybrid = true;
}

/* ---- weights -------------------------------------------------------------- */

typedef struct dims {
  int64_t E, F, qw, kvw;     /* hidden, FFN, full attention's q and k/v widths */
  int64_t Hk, Hv, Dk, Dv, K; /* linear attention */
  int64_t kd, vd, conv;      /* Hk*Dk, Hv*Dv, 2*kd + vd */
} dims;

static dims dims_of(const kiln_hparams *hp) {
  dims d = {.E = hp->n_embd, .F = hp->n_ff, .qw = (int64_t)hp->head_dim * hp->n_head,
            .kvw = (int64_t)hp->head_dim * hp->n_head_kv, .Hk = hp->ssm_n_group, .Hv = hp->ssm_dt_rank,
            .Dk = hp->ssm_d_state, .K = hp->ssm_d_conv};
  d.Dv = d.Hv ? (int64_t)hp->ssm_d_inner / d.Hv : 0;
  d.kd = d.Hk * d.Dk;
  d.vd = d.Hv * d.Dv;
  d.conv = 2 * d.kd + d.vd;
  return d;
}

typedef struct wspec {
  const char *suffix;
  int n_dims;
  int64_t ne0, ne1;
  bool f32;
} wspec;

/* The tensors of block l, by kind; *out_n of them. */
static void block_weights(const kiln_hparams *hp, uint32_t l, wspec *w, size_t *out_n) {
  const dims d = dims_of(hp);
  size_t n = 0;
  w[n++] = (wspec){"attn_norm.weight", 1, d.E, 1, true};
  w[n++] = (wspec){"post_attention_norm.weight", 1, d.E, 1, true};
  w[n++] = (wspec){"ffn_gate.weight", 2, d.E, d.F, false};
  w[n++] = (wspec){"ffn_up.weight", 2, d.E, d.F, false};
  w[n++] = (wspec){"ffn_down.weight", 2, d.F, d.E, false};
  if (hp->recurrent[l]) {
    w[n++] = (wspec){"attn_qkv.weight", 2, d.E, d.conv, false};
    w[n++] = (wspec){"attn_gate.weight", 2, d.E, d.vd, false};
    w[n++] = (wspec){"ssm_conv1d.weight", 2, d.K, d.conv, false};
    w[n++] = (wspec){"ssm_dt.bias", 1, d.Hv, 1, true};
    w[n++] = (wspec){"ssm_a", 1, d.Hv, 1, true};
    w[n++] = (wspec){"ssm_alpha.weight", 2, d.E, d.Hv, false};
    w[n++] = (wspec){"ssm_beta.weight", 2, d.E, d.Hv, false};
    w[n++] = (wspec){"ssm_norm.weight", 1, d.Dv, 1, true};
    w[n++] = (wspec){"ssm_out.weight", 2, d.vd, d.E, false};
  } else {
    w[n++] = (wspec){"attn_q.weight", 2, d.E, 2 * d.qw, false};
    w[n++] = (wspec){"attn_k.weight", 2, d.E, d.kvw, false};
    w[n++] = (wspec){"attn_v.weight", 2, d.E, d.kvw, false};
    w[n++] = (wspec){"attn_output.weight", 2, d.qw, d.E, false};
    w[n++] = (wspec){"attn_q_norm.weight", 1, hp->head_dim, 1, true};
    w[n++] = (wspec){"attn_k_norm.weight", 1, hp->head_dim, 1, true};
  }
  *out_n = n;
}

#define MAX_BLOCK_WEIGHTS 16

static kiln_status check_weights(const kiln_gguf *g, kiln_hparams *hp) {
  const kiln_gguf_tensor *t;
  const kiln_gguf_tensor *emb = kiln_gguf_find_tensor(g, "token_embd.weight");
  if (!emb) return kiln_status_new(KILN_STATUS_NOT_FOUND, "tensor token_embd.weight is missing");
  if (emb->n_dims != 2 || emb->ne[0] != hp->n_embd || emb->ne[1] < 1 || emb->ne[1] > INT32_MAX)
    return kiln_status_new(KILN_STATUS_MALFORMED, "tensor token_embd.weight must be [%u x n_vocab]", hp->n_embd);
  hp->n_vocab = (uint32_t)emb->ne[1];
  int64_t e[2] = {hp->n_embd, hp->n_vocab};
  KILN_RETURN_IF_ERROR(kiln__weight_lookup(g, "output_norm.weight", 1, e, true, &t));
  hp->tied_output = kiln_gguf_find_tensor(g, "output.weight") == NULL;
  if (!hp->tied_output) KILN_RETURN_IF_ERROR(kiln__weight_lookup(g, "output.weight", 2, e, false, &t));
  for (uint32_t l = 0; l < hp->n_layer; l++) {
    wspec w[MAX_BLOCK_WEIGHTS];
    size_t n;
    block_weights(hp, l, w, &n);
    for (size_t i = 0; i < n; i++) {
      char name[96];
      snprintf(name, sizeof name, "blk.%u.%s", l, w[i].suffix);
      int64_t ne[2] = {w[i].ne0, w[i].ne1};
      kiln_status st = kiln__weight_lookup(g, name, w[i].n_dims, ne, w[i].f32, &t);
      if (st)
        return kiln_status_annotate(st, "block %u is %s", l,
                                    hp->recurrent[l] ? "recurrent (Gated DeltaNet)" : "full attention");
    }
  }
  return NULL;
}

static bool is_bound(const kiln_hparams *hp, const char *name) {
  static const char *global[] = {"token_embd.weight", "output_norm.weight", "output.weight"};
  for (size_t i = 0; i < sizeof global / sizeof global[0]; i++)
    if (!strcmp(name, global[i])) return true;
  unsigned l;
  int used = 0;
  if (sscanf(name, "blk.%u.%n", &l, &used) != 1 || used == 0) return false;
  /* An MTP (nextn) block drafts tokens for speculative decoding; the
   * trunk's output does not depend on it, so kiln accepts and ignores it. */
  if (l >= hp->n_layer) return l < hp->n_layer + hp->n_nextn;
  wspec w[MAX_BLOCK_WEIGHTS];
  size_t n;
  block_weights(hp, l, w, &n);
  for (size_t i = 0; i < n; i++)
    if (!strcmp(name + used, w[i].suffix)) return true;
  return false;
}

/* ---- the graph ------------------------------------------------------------ */

static kiln_status bind(kiln_graph *g, const kiln_model *m, const char *name, kiln_tensor **out) {
  const kiln_gguf_tensor *gt = kiln_gguf_find_tensor(m->gguf, name);
  if (!gt) return kiln_status_new(KILN_STATUS_NOT_FOUND, "tensor %s is missing", name);
  kiln_status st = kiln__graph_add_tensor(g, name, gt->type, KILN_ROLE_WEIGHT, gt->ne[0], gt->ne[1], gt->data, out);
  if (!st) {
    (*out)->n_dims = gt->n_dims;
    (*out)->nbytes = gt->nbytes;
  }
  return st;
}

/* One block's builder state: the graph, the model, the block and ε. */
typedef struct blk {
  kiln_graph *g;
  const kiln_model *m;
  uint32_t l;
  float eps;
  char nm[KILN_NAME_MAX];
} blk;

static const char *bname(blk *b, const char *suffix) {
  snprintf(b->nm, sizeof b->nm, "blk.%u.%s", b->l, suffix);
  return b->nm;
}

static kiln_status bweight(blk *b, const char *suffix, kiln_tensor **out) {
  char name[96];
  snprintf(name, sizeof name, "blk.%u.%s", b->l, suffix);
  return bind(b->g, b->m, name, out);
}

/* out = RMS_NORM(x) * weight `suffix`, node named `node_name`. */
static kiln_status norm(blk *b, const char *suffix, const char *node_name, int64_t width, kiln_tensor *x,
                        kiln_tensor **out) {
  kiln_tensor *w;
  kiln_node *nd;
  KILN_RETURN_IF_ERROR(bweight(b, suffix, &w));
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(b->g, KILN_OP_RMS_NORM, (int32_t)b->l, bname(b, node_name), width,
                                            NULL, &nd, out, 2, x, w));
  nd->p.rms_norm.eps = b->eps;
  return NULL;
}

static kiln_status matmul(blk *b, const char *suffix, const char *node_name, int64_t width, kiln_tensor *x,
                          kiln_tensor **out) {
  kiln_tensor *w;
  KILN_RETURN_IF_ERROR(bweight(b, suffix, &w));
  return kiln__graph_add_node(b->g, KILN_OP_MUL_MAT, (int32_t)b->l, bname(b, node_name), width, NULL, NULL,
                              out, 2, w, x);
}

/* Gated DeltaNet (transformers' Qwen3_5GatedDeltaNet.forward): h -> the
 * block's mixer output, before the residual. */
static kiln_status linear_attention(blk *b, kiln_tensor *h, kiln_tensor **out) {
  const kiln_hparams *hp = &b->m->hp;
  const dims d = dims_of(hp);
  const int32_t L = (int32_t)b->l;
  kiln_tensor *qkv, *z, *al, *be, *gates, *conv, *o, *w, *A, *dt, *cs, *ss;
  kiln_node *nd;
  KILN_RETURN_IF_ERROR(matmul(b, "attn_qkv.weight", "attn_qkv", d.conv, h, &qkv));
  KILN_RETURN_IF_ERROR(matmul(b, "attn_gate.weight", "attn_gate", d.vd, h, &z));
  KILN_RETURN_IF_ERROR(matmul(b, "ssm_alpha.weight", "ssm_alpha", d.Hv, h, &al));
  KILN_RETURN_IF_ERROR(matmul(b, "ssm_beta.weight", "ssm_beta", d.Hv, h, &be));
  KILN_RETURN_IF_ERROR(bweight(b, "ssm_a", &A));
  KILN_RETURN_IF_ERROR(bweight(b, "ssm_dt.bias", &dt));
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(b->g, KILN_OP_GDN_GATE, L, bname(b, "ssm_gates"), 2 * d.Hv, NULL,
                                            NULL, &gates, 4, al, be, A, dt));
  /* The layer memory: conv and delta-rule states, allocated with the plan. */
  KILN_RETURN_IF_ERROR(kiln__graph_add_tensor(b->g, bname(b, "conv_state"), KILN_TYPE_F32, KILN_ROLE_RECURRENT,
                                              (d.K - 1) * d.conv, 1, NULL, &cs));
  KILN_RETURN_IF_ERROR(kiln__graph_add_tensor(b->g, bname(b, "ssm_state"), KILN_TYPE_F32, KILN_ROLE_RECURRENT,
                                              d.Dk * d.Dv * d.Hv, 1, NULL, &ss));
  KILN_RETURN_IF_ERROR(bweight(b, "ssm_conv1d.weight", &w));
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(b->g, KILN_OP_SSM_CONV, L, bname(b, "ssm_conv"), d.conv, NULL, NULL,
                                            &conv, 3, qkv, w, cs));
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(b->g, KILN_OP_GATED_DELTA_NET, L, bname(b, "gated_delta_net"), d.vd,
                                            NULL, &nd, &o, 3, conv, gates, ss));
  nd->p.gdn = (kiln_gdn_params){
      .n_k_heads = (int32_t)d.Hk,
      .n_v_heads = (int32_t)d.Hv,
      .head_k_dim = (int32_t)d.Dk,
      .head_v_dim = (int32_t)d.Dv,
      .chunk = QWEN35_GDN_CHUNK,
      .l2_eps = b->eps,
      .q_scale = (float)(1.0 / sqrt((double)d.Dk)),
  };
  /* The gated norm: RMSNorm per value head, then times silu(z). */
  KILN_RETURN_IF_ERROR(norm(b, "ssm_norm.weight", "ssm_norm", d.vd, o, &o));
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(b->g, KILN_OP_SWIGLU, L, bname(b, "ssm_gated"), d.vd, NULL, NULL, &o,
                                            2, z, o));
  return matmul(b, "ssm_out.weight", "ssm_out", d.E, o, out);
}

/* Gated full attention (transformers' Qwen3_5Attention.forward). */
static kiln_status full_attention(blk *b, kiln_tensor *h, kiln_tensor **out) {
  const kiln_hparams *hp = &b->m->hp;
  const dims d = dims_of(hp);
  const int32_t L = (int32_t)b->l, hd = (int32_t)hp->head_dim;
  kiln_tensor *qg, *q, *gate, *k, *v, *kc, *vc, *a;
  kiln_node *nd;
  KILN_RETURN_IF_ERROR(matmul(b, "attn_q.weight", "attn_q", 2 * d.qw, h, &qg));
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(b->g, KILN_OP_SLICE, L, bname(b, "attn_q_heads"), d.qw, NULL, &nd, &q,
                                            1, qg));
  nd->p.slice = (kiln_slice_params){.offset = 0, .length = hd, .stride = 2 * hd};
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(b->g, KILN_OP_SLICE, L, bname(b, "attn_gate_heads"), d.qw, NULL, &nd,
                                            &gate, 1, qg));
  nd->p.slice = (kiln_slice_params){.offset = hd, .length = hd, .stride = 2 * hd};
  KILN_RETURN_IF_ERROR(matmul(b, "attn_k.weight", "attn_k", d.kvw, h, &k));
  KILN_RETURN_IF_ERROR(matmul(b, "attn_v.weight", "attn_v", d.kvw, h, &v));
  KILN_RETURN_IF_ERROR(norm(b, "attn_q_norm.weight", "q_norm", d.qw, q, &q));
  KILN_RETURN_IF_ERROR(norm(b, "attn_k_norm.weight", "k_norm", d.kvw, k, &k));
  kiln_rope_params rope = {KILN_ROPE_IMROPE, (int32_t)hp->n_rot, hd, (int32_t)hp->n_head, hp->rope_theta,
                           {hp->rope_sections[0], hp->rope_sections[1], hp->rope_sections[2],
                            hp->rope_sections[3]}};
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(b->g, KILN_OP_ROPE, L, bname(b, "rope_q"), d.qw, NULL, &nd, &q, 1, q));
  nd->p.rope = rope;
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(b->g, KILN_OP_ROPE, L, bname(b, "rope_k"), d.kvw, NULL, &nd, &k, 1, k));
  rope.n_head = (int32_t)hp->n_head_kv;
  nd->p.rope = rope;
  KILN_RETURN_IF_ERROR(kiln__graph_add_kv_caches(b->g, L, hd, d.kvw, &kc, &vc));
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(b->g, KILN_OP_STORE_KV, L, bname(b, "store_k"), d.kvw, kc, NULL, NULL,
                                            1, k));
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(b->g, KILN_OP_STORE_KV, L, bname(b, "store_v"), d.kvw, vc, NULL, NULL,
                                            1, v));
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(b->g, KILN_OP_ATTENTION, L, bname(b, "attn"), d.qw, NULL, &nd, &a, 3,
                                            q, kc, vc));
  nd->p.attention = (kiln_attention_params){(int32_t)hp->n_head, (int32_t)hp->n_head_kv, hd,
                                            (float)(1.0 / sqrt((double)hd))};
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(b->g, KILN_OP_SIGMOID_MUL, L, bname(b, "attn_gated"), d.qw, NULL, NULL,
                                            &a, 2, gate, a));
  return matmul(b, "attn_output.weight", "attn_output", d.E, a, out);
}

static kiln_status build(kiln_graph *g, const kiln_model *m, float eps) {
  const kiln_hparams *hp = &m->hp;
  const int64_t E = hp->n_embd, F = hp->n_ff;
  kiln_tensor *tokens, *emb, *x, *t, *h, *gate, *up, *w, *out_w;
  KILN_RETURN_IF_ERROR(kiln__graph_add_tensor(g, "tokens", KILN_TYPE_I32, KILN_ROLE_INPUT, g->batch, 1, NULL, &tokens));
  tokens->n_dims = 1;
  g->tokens = tokens;
  KILN_RETURN_IF_ERROR(bind(g, m, "token_embd.weight", &emb));
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_GET_ROWS, -1, "inp_embd", E, NULL, NULL, &x, 2, emb, tokens));
  for (uint32_t l = 0; l < hp->n_layer; l++) {
    blk b = {.g = g, .m = m, .l = l, .eps = eps};
    const int32_t L = (int32_t)l;
    KILN_RETURN_IF_ERROR(norm(&b, "attn_norm.weight", "attn_norm", E, x, &h));
    KILN_RETURN_IF_ERROR(hp->recurrent[l] ? linear_attention(&b, h, &t) : full_attention(&b, h, &t));
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_ADD, L, bname(&b, "attn_residual"), E, NULL, NULL, &x, 2, x, t));
    KILN_RETURN_IF_ERROR(norm(&b, "post_attention_norm.weight", "post_attention_norm", E, x, &h));
    KILN_RETURN_IF_ERROR(matmul(&b, "ffn_gate.weight", "ffn_gate", F, h, &gate));
    KILN_RETURN_IF_ERROR(matmul(&b, "ffn_up.weight", "ffn_up", F, h, &up));
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_SWIGLU, L, bname(&b, "ffn_swiglu"), F, NULL, NULL, &t, 2,
                                              gate, up));
    KILN_RETURN_IF_ERROR(matmul(&b, "ffn_down.weight", "ffn_down", E, t, &t));
    KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_ADD, L, bname(&b, "ffn_residual"), E, NULL, NULL, &x, 2, x, t));
  }
  KILN_RETURN_IF_ERROR(bind(g, m, "output_norm.weight", &w));
  if (hp->tied_output) out_w = emb; /* llama.cpp: output = token_embd when output.weight is absent */
  else KILN_RETURN_IF_ERROR(bind(g, m, "output.weight", &out_w));
  return kiln__graph_add_head(g, x, w, out_w, eps);
}

const kiln__arch kiln__arch_qwen35 = {
    .name = "qwen35",
    .id = KILN_ARCH_QWEN35,
    .theta_may_default = false,
    .configure = configure,
    .read_hparams = kiln__qwen35_read_hparams,
    .check_weights = check_weights,
    .is_bound = is_bound,
    .build = build,
};
