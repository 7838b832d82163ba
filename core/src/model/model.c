/* Opening a model: GGUF, hyperparameters, weight checks, vocabulary. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/escape.h"
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

/* A tensor the graph would not use means the file is not the model kiln
 * would run (a block_count smaller than the layers present, RoPE scaling
 * factors kiln does not apply, ...): refuse it rather than run something
 * else silently, as llama.cpp refuses a wrong tensor count. */
static kiln_status check_no_unused(const kiln_model *m) {
  for (uint64_t i = 0; i < kiln_gguf_n_tensors(m->gguf); i++) {
    const kiln_gguf_tensor *t = kiln_gguf_tensor_at(m->gguf, i);
    char name[96];
    snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
    if (!m->arch->is_bound(&m->hp, name))
      return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                             "tensor %s is not part of kiln's %s graph with %s.block_count = %u: the file "
                             "holds something kiln would not run",
                             name, m->hp.arch_name, m->hp.arch_name, m->hp.n_layer);
  }
  return NULL;
}

/* general.architecture, looked up in the table (arch_table.c). */
static kiln_status read_arch(kiln_model *m) {
  char name[sizeof m->hp.arch_name];
  KILN_RETURN_IF_ERROR(kiln_gguf_get_str(m->gguf, "general.architecture", name, sizeof name));
  m->arch = kiln__arch_find(name);
  if (m->arch) return NULL;
  char list[128];
  size_t w = 0;
  for (size_t i = 0; i < kiln__arch_count() && w < sizeof list; i++)
    w += (size_t)snprintf(list + w, sizeof list - w, "%s%s", i ? ", " : "", kiln__arch_at(i)->name);
  char q[KILN_QUOTE_CAP(64)];
  return kiln_status_new(KILN_STATUS_UNSUPPORTED, "general.architecture = %s: kiln runs %s",
                         kiln_quote(q, sizeof q, name, strlen(name), 64), list);
}

kiln_status kiln_model_open(const char *path, kiln_model **out_model) {
  *out_model = NULL;
  kiln_model *m = calloc(1, sizeof *m);
  if (!m) return kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: opening model", path);
  kiln_status st = kiln_gguf_open(path, &m->gguf);
  if (!st) st = read_arch(m);
  if (!st) st = kiln__hparams_read(m->gguf, m->arch, &m->hp);
  if (!st && kiln_gguf_n_tensors(m->gguf) == 0)
    st = kiln_status_new(KILN_STATUS_UNSUPPORTED, "the file has no tensors (a vocabulary-only GGUF?)");
  if (!st) st = m->arch->check_weights(m->gguf, &m->hp);
  if (!st) st = check_no_unused(m);
  if (!st && kiln_gguf_find_kv(m->gguf, "tokenizer.ggml.model")) st = kiln_vocab_load(m->gguf, &m->vocab);
  if (!st && m->vocab && (uint32_t)kiln_vocab_n_tokens(m->vocab) > m->hp.n_vocab)
    st = kiln_status_new(KILN_STATUS_MALFORMED,
                         "the vocabulary has %d tokens but token_embd.weight only %u rows",
                         kiln_vocab_n_tokens(m->vocab), m->hp.n_vocab);
  if (!st) {
    const kiln_gguf_kv *kv = kiln_gguf_find_kv(m->gguf, "tokenizer.chat_template");
    kiln_gguf_str t;
    /* get_text refuses a NUL inside, which strndup would cut the template at */
    if (kv && kv->type == KILN_GGUF_STRING &&
        !(st = kiln_gguf_get_text(m->gguf, "tokenizer.chat_template", &t))) {
      m->chat_template = strndup(t.ptr, (size_t)t.len);
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
