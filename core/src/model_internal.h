/* Internal to libkiln: model and graph internals shared by model_*.c and
 * the executor. */
#ifndef KILN_MODEL_INTERNAL_H
#define KILN_MODEL_INTERNAL_H

#include "kiln/model.h"

struct kiln_model {
  kiln_gguf *gguf;
  kiln_vocab *vocab;
  kiln_hparams hp;
  char *chat_template;
};

struct kiln_graph {
  kiln_tensor **tensors;
  uint32_t n_tensors, cap_tensors;
  kiln_node **nodes;
  uint32_t n_nodes, cap_nodes;
  const kiln_tensor *tokens, *logits;
  int32_t batch, n_ctx;
};

/* Reads and checks the hyperparameters (not n_vocab, which comes from the
 * embedding tensor). */
kiln_status kiln__hparams_read(const kiln_gguf *g, kiln_hparams *hp);

/* Checks that weight `name` exists with exactly `n_dims` dims `ne` and a
 * type kiln can compute with (norm weights and biases must be F32). */
kiln_status kiln__weight_lookup(const kiln_gguf *g, const char *name, int n_dims, const int64_t *ne,
                                bool need_f32, const kiln_gguf_tensor **out_tensor);

#endif
