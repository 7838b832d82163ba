/* Internal to libkiln: what the synthetic-model writers share (synth.c,
 * the generic llama/qwen2/qwen3 one; synth_qwen35.c, qwen35's blocks),
 * defined in synth_util.c below both. */
#ifndef KILN_SYNTH_INTERNAL_H
#define KILN_SYNTH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/gguf_write.h"
#include "kiln/synth.h"

/* SplitMix64 with a Box–Muller spare. */
typedef struct kiln__synth_rng {
  uint64_t s;
  bool have_spare;
  double spare;
} kiln__synth_rng;

typedef struct kiln__synth {
  const kiln_synth_options *o;
  kiln_gguf_writer *w;
  kiln__synth_rng r;
  const char *arch; /* general.architecture, the key prefix */
} kiln__synth;

/* N(0, 1) from the stream. */
double kiln__synth_normal(kiln__synth_rng *r);

/* A [ne0, ne1] tensor of `type` drawn row by row: values offset +
 * N(0, std²), clamped to [lo, hi] when lo < hi; rows listed in `special`
 * (may be NULL) rescaled to mean-square special_ms. A matrix keeps both
 * dimensions even with one row (a one-token vocabulary, --ff 1): kiln and
 * ggml check its shape as [ne0, ne1], so writing it 1-D would make a file
 * kiln refuses; a vector (matrix false, ne1 = 1) is written 1-D. */
kiln_status kiln__synth_add(kiln__synth *s, const char *name, kiln_type type, bool matrix, int64_t ne0,
                            int64_t ne1, double std, double offset, double lo, double hi, const bool *special,
                            double special_ms);

/* "<arch>.<suffix>" = v. */
kiln_status kiln__synth_set_u32(kiln__synth *s, const char *suffix, uint32_t v);
kiln_status kiln__synth_set_f32(kiln__synth *s, const char *suffix, float v);

/* Copies every tokenizer.* key of o->vocab_from; *out_n_tokens and, per
 * token, whether it is CONTROL (malloc'd, n_tokens entries). Errors name
 * that file. */
kiln_status kiln__synth_copy_vocab(kiln__synth *s, uint32_t *out_n_tokens, bool **out_special);

/* qwen35 (synth_qwen35.c): its keys, and the tensors of every block. */
kiln_status kiln__synth_qwen35_check(const kiln_synth_options *o);
kiln_status kiln__synth_qwen35_keys(kiln__synth *s);
kiln_status kiln__synth_qwen35_blocks(kiln__synth *s);

#endif
