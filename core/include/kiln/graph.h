/*
 * kiln/graph.h — tensors, nodes and steps: what the executor hands a backend.
 *
 * A model builder (core/model_*.c) turns a GGUF file into a graph: a table of
 * tensors and an ordered list of nodes, one op each, with a typed parameter
 * struct per op. The graph is static; a *step* runs a contiguous range of its
 * nodes for a batch of n_tokens tokens at positions pos0 .. pos0+n_tokens-1.
 *
 * Shapes are ggml's: ne[0] is the innermost (contiguous) dimension, so a
 * matrix of N rows of K values is ne = [K, N], and an activation holding one
 * vector of width H per token is ne = [H, T]. For activations, ne[1] is the
 * capacity (the largest batch the plan was made for); a step uses the first
 * n_tokens columns. All activations and KV caches are F32, contiguous.
 *
 * Ownership: the graph owns its tensors and nodes; backends receive const
 * pointers that stay valid from prepare() until the backend is closed.
 *
 * This header is part of the plugin ABI (kiln/plugin.h): changing a struct
 * here changes KILN_PLUGIN_ABI_MAJOR.
 */
#ifndef KILN_GRAPH_H
#define KILN_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_MAX_DIMS 4
#define KILN_MAX_SRC 4
#define KILN_NAME_MAX 64

/* What a tensor is for; decides who fills it and when. */
typedef enum kiln_tensor_role {
  KILN_ROLE_WEIGHT = 0,     /* read-only, from the GGUF file (data points into the mmap) */
  KILN_ROLE_ACTIVATION = 1, /* written by one node per step, [width, capacity] F32 */
  KILN_ROLE_STATE = 2,      /* persists across steps: the KV cache, [width, n_ctx] F32 */
  KILN_ROLE_INPUT = 3       /* written by the executor each step: token ids, I32 [capacity] */
} kiln_tensor_role;

typedef struct kiln_tensor {
  int32_t id;                 /* index in the graph's tensor table */
  kiln_type type;             /* element type (ggml id) */
  kiln_tensor_role role;
  int32_t n_dims;             /* 1..KILN_MAX_DIMS */
  int64_t ne[KILN_MAX_DIMS];  /* elements per dimension, ne0 first; unused dims are 1 */
  uint64_t nbytes;            /* bytes of the whole tensor */
  const void *data;           /* WEIGHT: its bytes in the mapped file; otherwise NULL */
  char name[KILN_NAME_MAX];   /* GGUF name ("blk.0.attn_q.weight") or a node output name */
} kiln_tensor;

/* The ops of a llama-family decoder. Each names its sources in src[] order. */
typedef enum kiln_op {
  /* dst[H,T] = rows src0[H,V] at ids src1 (I32 [T]); any weight type. */
  KILN_OP_GET_ROWS = 0,
  /* dst = src0 / sqrt(mean(src0^2) + eps) * src1, per row of length
   * src1->ne[0] (the weight); src0 holds ne[0]-long rows, contiguous.
   * (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization".) */
  KILN_OP_RMS_NORM = 1,
  /* dst[N,T] = src0[K,N] (weight, any type) x src1[K,T] (+ src2[N] bias if
   * present, qwen2's Q/K/V): dst[n,t] = sum_k W[k,n] x[k,t] + b[n]. */
  KILN_OP_MUL_MAT = 2,
  /* Rotary position embedding in place of a copy: dst = rope(src0), src0 is
   * [head_dim*n_head, T], token t at position pos0+t (Su et al. 2021,
   * "RoFormer"; NORM pairs (2i, 2i+1) as llama's reference code does, NEOX
   * pairs (i, i+n_rot/2) as GPT-NeoX and qwen2/qwen3 do). */
  KILN_OP_ROPE = 3,
  /* Copies src0[W,T] into columns pos0..pos0+T-1 of the KV cache dst
   * (STATE, [W, n_ctx]). dst is both read and written. */
  KILN_OP_STORE_KV = 4,
  /* Causal attention with GQA: dst[head_dim*n_head, T] from Q src0 [same],
   * K cache src1 and V cache src2 ([head_dim*n_head_kv, n_ctx]); token t
   * attends to cache positions 0..pos0+t. Query head h reads KV head
   * h / (n_head / n_head_kv). softmax(scale * q.k) v (Vaswani et al. 2017). */
  KILN_OP_ATTENTION = 5,
  /* dst = silu(src0) * src1, elementwise (SwiGLU; Shazeer 2020). */
  KILN_OP_SWIGLU = 6,
  /* dst = src0 + src1, elementwise, same shape. */
  KILN_OP_ADD = 7,
  KILN_OP_COUNT = 8
} kiln_op;

typedef enum kiln_rope_mode {
  KILN_ROPE_NORM = 0, /* llama: rotate pairs (x[2i], x[2i+1]) */
  KILN_ROPE_NEOX = 2  /* qwen2, qwen3: rotate pairs (x[i], x[i + n_rot/2]); ggml's mode id 2 */
} kiln_rope_mode;

typedef struct kiln_rms_norm_params {
  float eps; /* the model's ε, bit-exact from the GGUF (e.g. llama.attention.layer_norm_rms_epsilon) */
} kiln_rms_norm_params;

typedef struct kiln_rope_params {
  kiln_rope_mode mode;
  int32_t n_rot;    /* rotated dimensions per head (rope.dimension_count), even, <= head_dim */
  int32_t head_dim;
  int32_t n_head;   /* heads in src0 */
  float theta;      /* RoPE θ (rope.freq_base): dim pair i turns at pos * θ^(-2i/n_rot) rad */
} kiln_rope_params;

typedef struct kiln_attention_params {
  int32_t n_head;    /* query heads */
  int32_t n_head_kv; /* KV heads; n_head % n_head_kv == 0 (GQA) */
  int32_t head_dim;
  float scale;       /* softmax scale, 1/sqrt(head_dim) */
} kiln_attention_params;

typedef struct kiln_node {
  int32_t id;                      /* index in the graph's node list */
  kiln_op op;
  int32_t layer;                   /* decoder block, or -1 outside the blocks */
  const kiln_tensor *src[KILN_MAX_SRC]; /* NULL past the last source */
  const kiln_tensor *dst;
  char name[KILN_NAME_MAX];        /* "blk.3.attn_norm": what parity tables print */
  union {
    kiln_rms_norm_params rms_norm;
    kiln_rope_params rope;
    kiln_attention_params attention;
  } p;
} kiln_node;

/* One call of a backend's run(): nodes[0..n_nodes) are consecutive nodes of
 * the plan, all assigned to this backend, run in order. */
typedef struct kiln_step {
  const kiln_node *const *nodes;
  uint32_t n_nodes;
  int32_t n_tokens;  /* columns of every activation in this step, >= 1 */
  int32_t pos0;      /* position of the first token (KV cache column) */
  void *const *bufs; /* this backend's buffer for tensor id i, NULL where it has none */
} kiln_step;

/* Short lower-case name of an op ("rms_norm"); inline so plugins can use it. */
static inline const char *kiln_op_name(kiln_op op) {
  switch (op) {
  case KILN_OP_GET_ROWS: return "get_rows";
  case KILN_OP_RMS_NORM: return "rms_norm";
  case KILN_OP_MUL_MAT: return "mul_mat";
  case KILN_OP_ROPE: return "rope";
  case KILN_OP_STORE_KV: return "store_kv";
  case KILN_OP_ATTENTION: return "attention";
  case KILN_OP_SWIGLU: return "swiglu";
  case KILN_OP_ADD: return "add";
  default: return "?";
  }
}

#ifdef __cplusplus
}
#endif
#endif /* KILN_GRAPH_H */
