/*
 * kiln/synth.h — synthetic models: a GGUF file of a named architecture and
 * shape with seeded random weights (`kiln synth`).
 *
 * Tests build their llama/qwen2/qwen3-shaped models with it instead of
 * committing model files. The vocabulary, when wanted, is copied from
 * another GGUF (every tokenizer.* key, e.g. from ggml-vocab-qwen2.gguf, the
 * real Qwen2 vocabulary as llama.cpp's converter wrote it), and CONTROL
 * tokens' embedding rows can be given a chosen mean-square — the
 * near-zero-norm ChatML rows that exposed the ε defect (DESIGN.md).
 *
 * Weights are drawn from N(0, σ²) by a SplitMix64 stream seeded with
 * `seed` (Box–Muller in double), so a seed gives the same file everywhere;
 * large tensors are drawn on every online CPU, each row from its place in
 * the stream, so the bytes do not depend on the thread count.
 * Embeddings have σ = sqrt(embd_ms) (default mean-square 3e-4, as in real
 * Qwen embeddings), matrices σ = 1/sqrt(K) (fan-in), norm weights
 * 1 + N(0, 0.1²), biases N(0, 0.02²). qwen35 adds the linear-attention
 * tensors (synth_qwen35.c): the conv kernel σ = 1/sqrt(K), ssm_dt.bias
 * N(0, 1), ssm_a = -exp(N(0, 0.5²)) with the exponent clamped to
 * ±0.9, and every norm weight clamped to [0.5, 2] — so the float32
 * round trip a converter makes (w - 1 + 1, log then exp) can be exact
 * (tests/golden/make_golden_qwen35.py relies on it).
 */
#ifndef KILN_SYNTH_H
#define KILN_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/model.h"
#include "kiln/status.h"
#include "kiln/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_synth_options {
  kiln_arch arch;
  uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv;
  uint32_t head_dim;     /* 0: n_embd / n_head (written as attention.key_length) */
  uint32_t n_rot;        /* 0: head_dim (rope.dimension_count) */
  uint32_t n_ctx;        /* context_length */
  uint32_t n_vocab;      /* rows of token_embd when vocab_from is NULL */
  float eps;             /* attention.layer_norm_rms_epsilon, written bit-exactly */
  float rope_theta;      /* rope.freq_base; 0 = leave the key out (llama only) */
  kiln_type matrix_type; /* projections and FFN: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q5_K,
                            Q6_K */
  kiln_type embd_type;   /* token_embd (and output when untied) */
  bool tied_output;      /* no output.weight */
  uint64_t seed;
  double embd_ms;        /* mean-square of ordinary embedding rows; 0 = 3e-4 */
  double special_ms;     /* CONTROL tokens' rows get exactly this mean-square; 0 = like the rest */
  const char *vocab_from; /* GGUF whose tokenizer.* keys are copied; NULL = no vocabulary */
  uint32_t vocab_rows;    /* with vocab_from: token_embd rows, >= its tokens (extra rows pad, as
                             checkpoints pad theirs: Qwen3.5's 248320), and the token list
                             padded to as many with "[PAD<id>]" of type UNUSED, as llama.cpp's
                             converter writes them (llama.cpp sizes token_embd by the token
                             count); KILN_STATUS_UNSUPPORTED for a vocabulary with
                             tokenizer.ggml.scores; 0 = as many as tokens */
  const char *name;       /* general.name; NULL = "kiln-synth" */
  /* qwen35 only (ignored otherwise), written as llama.cpp's converter
   * writes a Qwen3.5 checkpoint (conversion/qwen.py): */
  const char *layer_pattern;   /* one letter per layer, R (Gated DeltaNet) or F (full attention),
                                  written as attention.recurrent_layers; NULL: from the interval */
  uint32_t full_attn_interval; /* full_attention_interval: every Nth block is full attention;
                                  with layer_pattern unused: the interval the pattern follows
                                  is written, or none */
  uint32_t ssm_conv;           /* ssm.conv_kernel: conv width (>= 2) */
  uint32_t ssm_groups;         /* ssm.group_count: q/k heads */
  uint32_t ssm_heads;          /* ssm.time_step_rank: value heads, a multiple of ssm_groups */
  uint32_t ssm_state;          /* ssm.state_size: q/k head dim */
  uint32_t ssm_head_v;         /* value head dim (ssm.inner_size = ssm_heads * ssm_head_v) */
  int32_t rope_sections[4];    /* rope.dimension_sections (in rotated pairs: sum <= n_rot / 2) */
} kiln_synth_options;

/* Fills o with a small default for arch: llama-shaped, 2 layers, 64 wide;
 * qwen35: 4 blocks (R R R F), 64 wide, head_dim 32 rotating 8 with sections
 * [2, 1, 1, 0], conv 4, q/k heads 2, value heads 4, head dims 16, θ 1e7. */
void kiln_synth_defaults(kiln_synth_options *o, kiln_arch arch);

/* Writes the model to `path` atomically (temp file + rename). Errors:
 * KILN_STATUS_INVALID_ARGUMENT naming the option that is inconsistent
 * (e.g. n_embd not a multiple of the quant block, head counts that do not
 * divide), errors of reading vocab_from (naming that file) and of writing. */
kiln_status kiln_synth_write(const kiln_synth_options *o, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* KILN_SYNTH_H */
