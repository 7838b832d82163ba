/* Opening a model: GGUF, hyperparameters, weight checks, vocabulary. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

kiln_status kiln__weight_lookup(const kiln_gguf *g, const char *name, int n_dims, const int64_t *ne,
                                bool need_f32, const kiln_gguf_tensor **out_tensor) {
  const kiln_gguf_tensor *t = kiln_gguf_find_tensor(g, name);
  *out_tensor = t;
  if (!t) return kiln_status_new(KILN_STATUS_NOT_FOUND, "tensor %s is missing", name);
  bool same = t->n_dims == n_dims;
  for (int i = 0; i < n_dims && same; i++) same = t->ne[i] == ne[i];
  if (!same) {
    char want[96], got[96];
    int w = 0, h = 0;
    for (int i = 0; i < n_dims; i++) w += snprintf(want + w, sizeof want - (size_t)w, "%s%" PRId64, i ? "x" : "", ne[i]);
    for (int i = 0; i < t->n_dims; i++)
      h += snprintf(got + h, sizeof got - (size_t)h, "%s%" PRId64, i ? "x" : "", t->ne[i]);
    return kiln_status_new(KILN_STATUS_MALFORMED, "tensor %s has shape [%s], the hyperparameters say [%s]",
                           name, got, want);
  }
  if (need_f32 && t->type != KILN_TYPE_F32)
    return kiln_status_new(KILN_STATUS_UNSUPPORTED, "tensor %s is %s; kiln reads norm weights and biases as F32",
                           name, kiln_type_name(t->type));
  return NULL;
}

/* Every weight the graph will bind, checked up front so a bad file fails
 * at load, naming the tensor, rather than at plan time. */
static kiln_status check_weights(kiln_model *m) {
  const kiln_hparams *hp = &m->hp;
  const kiln_gguf *g = m->gguf;
  const kiln_gguf_tensor *t;
  int64_t qw = (int64_t)hp->head_dim * hp->n_head, kvw = (int64_t)hp->head_dim * hp->n_head_kv;
  const kiln_gguf_tensor *emb = kiln_gguf_find_tensor(g, "token_embd.weight");
  if (!emb) return kiln_status_new(KILN_STATUS_NOT_FOUND, "tensor token_embd.weight is missing");
  if (emb->n_dims != 2 || emb->ne[0] != hp->n_embd || emb->ne[1] < 1 || emb->ne[1] > INT32_MAX)
    return kiln_status_new(KILN_STATUS_MALFORMED, "tensor token_embd.weight must be [%u x n_vocab]",
                           hp->n_embd);
  m->hp.n_vocab = (uint32_t)emb->ne[1];
  int64_t e[2] = {hp->n_embd, hp->n_vocab};
  KILN_RETURN_IF_ERROR(kiln__weight_lookup(g, "output_norm.weight", 1, e, true, &t));
  m->hp.tied_output = kiln_gguf_find_tensor(g, "output.weight") == NULL;
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
static bool is_bound(const kiln_hparams *hp, const char *name) {
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

/* A tensor the graph would not use means the file is not the model kiln
 * would run (a block_count smaller than the layers present, RoPE scaling
 * factors kiln does not apply, ...): refuse it rather than run something
 * else silently, as llama.cpp refuses a wrong tensor count. */
static kiln_status check_no_unused(const kiln_model *m) {
  for (uint64_t i = 0; i < kiln_gguf_n_tensors(m->gguf); i++) {
    const kiln_gguf_tensor *t = kiln_gguf_tensor_at(m->gguf, i);
    char name[96];
    snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
    if (!is_bound(&m->hp, name))
      return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                             "tensor %s is not part of kiln's %s graph with %s.block_count = %u: the file "
                             "holds something kiln would not run",
                             name, m->hp.arch_name, m->hp.arch_name, m->hp.n_layer);
  }
  return NULL;
}

kiln_status kiln_model_open(const char *path, kiln_model **out_model) {
  *out_model = NULL;
  kiln_model *m = calloc(1, sizeof *m);
  if (!m) return kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: opening model", path);
  kiln_status st = kiln_gguf_open(path, &m->gguf);
  if (!st) st = kiln__hparams_read(m->gguf, &m->hp);
  if (!st && kiln_gguf_n_tensors(m->gguf) == 0)
    st = kiln_status_new(KILN_STATUS_UNSUPPORTED, "the file has no tensors (a vocabulary-only GGUF?)");
  if (!st) st = check_weights(m);
  if (!st) st = check_no_unused(m);
  if (!st && kiln_gguf_find_kv(m->gguf, "tokenizer.ggml.model")) st = kiln_vocab_load(m->gguf, &m->vocab);
  if (!st && m->vocab && (uint32_t)kiln_vocab_n_tokens(m->vocab) > m->hp.n_vocab)
    st = kiln_status_new(KILN_STATUS_MALFORMED,
                         "the vocabulary has %d tokens but token_embd.weight only %u rows",
                         kiln_vocab_n_tokens(m->vocab), m->hp.n_vocab);
  if (!st) {
    const kiln_gguf_kv *kv = kiln_gguf_find_kv(m->gguf, "tokenizer.chat_template");
    if (kv && kv->type == KILN_GGUF_STRING) {
      m->chat_template = strndup(kv->v.str.ptr, (size_t)kv->v.str.len);
      if (!m->chat_template) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "chat template");
    }
  }
  if (st) {
    kiln_model_free(m);
    /* The GGUF reader's messages already name the file. */
    return strstr(kiln_status_message(st), path) ? st : kiln_status_annotate(st, "%s", path);
  }
  *out_model = m;
  return NULL;
}

void kiln_model_free(kiln_model *m) {
  if (!m) return;
  kiln_vocab_free(m->vocab);
  kiln_gguf_close(m->gguf);
  free(m->chat_template);
  free(m);
}

const kiln_hparams *kiln_model_hparams(const kiln_model *m) { return &m->hp; }
const kiln_gguf *kiln_model_gguf(const kiln_model *m) { return m->gguf; }
const kiln_vocab *kiln_model_vocab(const kiln_model *m) { return m->vocab; }
const char *kiln_model_chat_template(const kiln_model *m) { return m->chat_template; }
