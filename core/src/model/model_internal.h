/* Internal to libkiln: the model and the architecture table shared by
 * the files of core/src/model/. Adding an architecture adds one arch_<name>.c that
 * defines a kiln__arch, and one row in arch_table.c. */
#ifndef KILN_MODEL_INTERNAL_H
#define KILN_MODEL_INTERNAL_H

#include <stddef.h>

#include "kiln/model.h"

/* One architecture, keyed by general.architecture (llama.cpp's
 * LLM_ARCH_* names). */
typedef struct kiln__arch {
  const char *name; /* general.architecture */
  kiln_arch id;
  /* Whether <arch>.rope.freq_base may be absent (then 10000, the GGUF
   * spec's default): only where the reference code trains with it. */
  bool theta_may_default;
  /* Sets what the architecture fixes rather than the file (RoPE mode,
   * biases, q/k norms) before the common keys are read. */
  void (*configure)(kiln_hparams *hp);
  /* Reads and checks the architecture's own keys after the common ones
   * (qwen35's ssm.*, layer pattern, rope sections); NULL when it has none.
   * A missing required key is KILN_STATUS_NOT_FOUND naming it. */
  kiln_status (*read_hparams)(const kiln_gguf *g, kiln_hparams *hp);
  /* Checks every weight the graph binds (shape and type), naming the first
   * wrong one; may set hp fields that come from the tensors (n_vocab,
   * tied_output). */
  kiln_status (*check_weights)(const kiln_gguf *g, kiln_hparams *hp);
  /* Whether tensor `name` is one this architecture's graph binds. */
  bool (*is_bound)(const kiln_hparams *hp, const char *name);
  /* Writes the graph; `eps` is the RMSNorm ε every norm node carries. */
  kiln_status (*build)(kiln_graph *g, const kiln_model *m, float eps);
} kiln__arch;

/* The entry for general.architecture `name`, or NULL. */
const kiln__arch *kiln__arch_find(const char *name);
/* The table itself, for listing what kiln runs: entry i < kiln__arch_count(),
 * else NULL. */
size_t kiln__arch_count(void);
const kiln__arch *kiln__arch_at(size_t i);

struct kiln_model {
  kiln_gguf *gguf;
  kiln_vocab *vocab;
  kiln_hparams hp;
  const kiln__arch *arch;
  char *chat_template;
};

/* Reads and checks the hyperparameters of architecture `arch` (not n_vocab,
 * which comes from the embedding tensor). */
kiln_status kiln__hparams_read(const kiln_gguf *g, const kiln__arch *arch, kiln_hparams *hp);

/* Checks that weight `name` exists with exactly `n_dims` dims `ne` and a
 * type kiln can compute with (norm weights and biases must be F32). */
kiln_status kiln__weight_lookup(const kiln_gguf *g, const char *name, int n_dims, const int64_t *ne,
                                bool need_f32, const kiln_gguf_tensor **out_tensor);

/* The llama-family decoder (decoder.c), shared by llama, qwen2 and qwen3:
 * pre-norm attention and SwiGLU blocks; hp->qkv_bias and hp->qk_norm say
 * which optional tensors a layer has. */
kiln_status kiln__decoder_check_weights(const kiln_gguf *g, kiln_hparams *hp);
bool kiln__decoder_is_bound(const kiln_hparams *hp, const char *name);
kiln_status kiln__decoder_build(kiln_graph *g, const kiln_model *m, float eps);

/* qwen35's own keys (qwen35_hparams.c), its arch's read_hparams. */
kiln_status kiln__qwen35_read_hparams(const kiln_gguf *g, kiln_hparams *hp);

#endif
