/*
 * kiln/model.h — a GGUF model: its hyperparameters, vocabulary and graph.
 *
 * Architectures: llama (llama.cpp's LLM_ARCH_LLAMA: RoPE NORM), qwen2
 * (Q/K/V biases, RoPE NEOX), qwen3 (per-head q_norm/k_norm, RoPE NEOX) and
 * qwen35 (Qwen3.5: Gated DeltaNet layers interleaved with gated full
 * attention, llama.cpp's LLM_ARCH_QWEN35), read from the `<arch>.*` keys
 * llama.cpp's converter writes. A required key
 * that is missing is an error naming it (KILN_STATUS_NOT_FOUND); a weight
 * whose shape or type is wrong is an error naming the tensor, the expected
 * and the found shape (KILN_STATUS_MALFORMED). Defaults are taken only where
 * the GGUF spec or the model's reference code defines one, and
 * kiln_hparams_print() says "(default)" beside each.
 *
 * Ownership: a kiln_model owns its kiln_gguf mapping, vocabulary and
 * hyperparameters; a kiln_graph built from it borrows the mapping (weight
 * data pointers) and must be freed first.
 */
#ifndef KILN_MODEL_H
#define KILN_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/gguf.h"
#include "kiln/graph.h"
#include "kiln/status.h"
#include "kiln/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kiln_arch {
  KILN_ARCH_LLAMA = 0,
  KILN_ARCH_QWEN2 = 1,
  KILN_ARCH_QWEN3 = 2,
  KILN_ARCH_QWEN35 = 3
} kiln_arch;

/* The most decoder blocks a hybrid (qwen35) file may have: its layer
 * pattern is held in kiln_hparams. */
#define KILN_MAX_LAYERS 1024

/* The effective hyperparameters. Widths are in elements. */
typedef struct kiln_hparams {
  kiln_arch arch;
  char arch_name[16];    /* general.architecture */
  uint32_t n_vocab;      /* rows of token_embd.weight (its ne1) */
  uint32_t n_ctx_train;  /* <arch>.context_length */
  uint32_t n_embd;       /* <arch>.embedding_length */
  uint32_t n_layer;      /* <arch>.block_count */
  uint32_t n_ff;         /* <arch>.feed_forward_length */
  uint32_t n_head;       /* <arch>.attention.head_count */
  uint32_t n_head_kv;    /* <arch>.attention.head_count_kv (GGUF spec default: n_head) */
  uint32_t head_dim;     /* <arch>.attention.key_length (default n_embd / n_head) */
  uint32_t n_rot;        /* <arch>.rope.dimension_count (default head_dim) */
  float eps;             /* <arch>.attention.layer_norm_rms_epsilon, exact f32 (required) */
  float rope_theta;      /* <arch>.rope.freq_base (llama: default 10000; qwen: required) */
  kiln_rope_mode rope_mode;
  bool qkv_bias;         /* qwen2: attn_{q,k,v}.bias */
  bool qk_norm;          /* qwen3: attn_{q,k}_norm.weight over head_dim */
  bool tied_output;      /* no output.weight: logits use token_embd.weight */
  /* Which values came from defaults rather than the file. */
  bool n_head_kv_default, head_dim_default, n_rot_default, theta_default;
  /* qwen35 (hybrid: n_recurrent > 0 or the architecture has such layers).
   * Every norm's ε is `eps` above (llama.cpp reads all of them from
   * layer_norm_rms_epsilon: the RMSNorms, the gated ssm_norm and the L2
   * norms of q and k in the linear-attention layers). */
  bool hybrid;                /* the architecture interleaves recurrent layers */
  uint32_t ssm_d_conv;        /* <arch>.ssm.conv_kernel: conv width K */
  uint32_t ssm_d_inner;       /* <arch>.ssm.inner_size: value width Hv * Dv */
  uint32_t ssm_d_state;       /* <arch>.ssm.state_size: key head dim Dk */
  uint32_t ssm_dt_rank;       /* <arch>.ssm.time_step_rank: value heads Hv */
  uint32_t ssm_n_group;       /* <arch>.ssm.group_count: q/k heads Hk */
  uint32_t full_attn_interval; /* <arch>.full_attention_interval; 0 when absent */
  bool pattern_from_array;    /* the pattern is <arch>.attention.recurrent_layers */
  int32_t rope_sections[4];   /* <arch>.rope.dimension_sections (IMROPE, in pairs) */
  uint32_t n_nextn;           /* <arch>.nextn_predict_layers: MTP blocks after the n_layer
                                 trunk blocks (accepted, not run); 0 when absent */
  uint32_t n_recurrent;       /* how many of the n_layer blocks are recurrent */
  bool recurrent[KILN_MAX_LAYERS]; /* block l is Gated DeltaNet (else full attention) */
} kiln_hparams;

typedef struct kiln_model kiln_model;

/* Opens and validates `path`: GGUF, hyperparameters, every weight's shape
 * and type, the vocabulary (a model without one loads, but cannot
 * tokenize: kiln_model_vocab() returns NULL). Errors name the file. */
kiln_status kiln_model_open(const char *path, kiln_model **out_model);
void kiln_model_free(kiln_model *m);

const kiln_hparams *kiln_model_hparams(const kiln_model *m);
const kiln_gguf *kiln_model_gguf(const kiln_model *m);
const kiln_vocab *kiln_model_vocab(const kiln_model *m); /* NULL if the file has none */
/* The chat template (tokenizer.chat_template), or NULL. */
const char *kiln_model_chat_template(const kiln_model *m);

/* Prints the effective hyperparameters, one per line, ε with its exact f32
 * bits ("eps = 9.99999997e-07 (f32 0x358637bd)"). */
void kiln_hparams_print(const kiln_hparams *hp, FILE *out);

/* The decoder as a graph of kiln_nodes (kiln/graph.h), for batches of up to
 * `batch` tokens and a KV cache of n_ctx positions. Node names follow the
 * GGUF tensor names: "blk.3.attn_norm", "blk.3.q_norm", then the output
 * head "out_columns" (the columns whose logits are read), "output_norm",
 * "logits"; qwen35's recurrent blocks add "blk.0.ssm_conv",
 * "blk.0.gated_delta_net", "blk.0.ssm_norm", and own RECURRENT tensors
 * "blk.0.conv_state" and "blk.0.ssm_state" in place of a KV cache. */
typedef struct kiln_graph kiln_graph;

typedef struct kiln_graph_options {
  int32_t batch; /* the most tokens one step evaluates, >= 1 */
  int32_t n_ctx; /* KV cache positions, >= 1 */
  /* Testing the tests: plan every norm (RMSNorms, and qwen35's q/k L2
   * norms) with this ε instead of the model's (`kiln parity --test-eps`),
   * to show that parity sees the difference. 0 = the model's ε. */
  float eps_override;
  /* Element type of every K and V cache (kiln/kv_cache.h): F32 (0, the
   * default of a zeroed struct), F16, BF16 or Q8_0 ([kv_cache] type). */
  kiln_type kv_type;
} kiln_graph_options;

/* KILN_STATUS_INVALID_ARGUMENT for batch or n_ctx < 1 or batch > n_ctx, a
 * kv_type a KV cache cannot have, or a block-quantized kv_type whose block
 * (32 for Q8_0) does not divide head_dim (the error names the layer and
 * head_dim). */
kiln_status kiln_graph_build(const kiln_model *m, const kiln_graph_options *opt,
                             kiln_graph **out_graph);
void kiln_graph_free(kiln_graph *g);

uint32_t kiln_graph_n_tensors(const kiln_graph *g);
const kiln_tensor *kiln_graph_tensor(const kiln_graph *g, uint32_t id);
uint32_t kiln_graph_n_nodes(const kiln_graph *g);
const kiln_node *kiln_graph_node(const kiln_graph *g, uint32_t i);
/* The INPUT tensor of token ids (I32 [batch]) and the logits ([n_vocab,
 * batch]: column i holds the logits of the i-th output column a step asked
 * for, kiln/plan.h's kiln_plan_step_outputs()). */
const kiln_tensor *kiln_graph_tokens(const kiln_graph *g);
const kiln_tensor *kiln_graph_logits(const kiln_graph *g);
int32_t kiln_graph_batch(const kiln_graph *g);
int32_t kiln_graph_n_ctx(const kiln_graph *g);

#ifdef __cplusplus
}
#endif
#endif /* KILN_MODEL_H */
