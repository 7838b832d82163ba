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
 * n_tokens columns. All activations and recurrent states are F32,
 * contiguous; a KV cache is F32, F16, BF16 or Q8_0 ([kv_cache] type,
 * kiln/kv_cache.h), contiguous, one row of kiln_type_row_bytes(type, ne0)
 * bytes per position (Q8_0: blocks of 32 along ne0, never across heads).
 *
 * Ownership: the graph owns its tensors and nodes; backends receive const
 * pointers that stay valid from prepare() until the backend is closed.
 *
 * This header is part of the plugin ABI (kiln/plugin.h): changing a struct
 * here changes KILN_PLUGIN_ABI_MAJOR (a new member of the node's parameter
 * union that adds no bytes, whose zero means what older hosts meant, is a
 * minor change).
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
  KILN_ROLE_STATE = 2,      /* persists across steps: the KV cache, [width, n_ctx] of its KV type */
  KILN_ROLE_INPUT = 3,      /* written by the executor each step: token ids, I32 [capacity] */
  /* A recurrent layer's memory, [width, 1] F32: read and rewritten whole
   * by the one node that owns it (SSM_CONV's conv state, GATED_DELTA_NET's
   * delta-rule state), so it persists across the steps of a sequence. It is
   * sized and allocated at plan time; a step at pos0 = 0 starts a sequence
   * and reads it as zeros (kiln_session_reset), so its contents are never
   * needed before that first write. */
  KILN_ROLE_RECURRENT = 4
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

/* The ops of the decoders kiln runs. Each names its sources in src[] order. */
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
  /* Copies src0[W,T] (F32) into columns pos0..pos0+T-1 of the KV cache dst
   * (STATE, [W, n_ctx]) converted to dst's type (kiln/kv_cache.h:
   * kiln_kv_store_row: F16/BF16 rounded to nearest even, Q8_0 as llama.cpp's
   * quantize_row_q8_0_ref). dst is both read and written. */
  KILN_OP_STORE_KV = 4,
  /* Causal attention with GQA: dst[head_dim*n_head, T] from Q src0 [same],
   * K cache src1 and V cache src2 ([head_dim*n_head_kv, n_ctx], one KV type,
   * each value read as kiln_kv_load_row converts it); token t
   * attends to cache positions 0..pos0+t. Query head h reads KV head
   * h / (n_head / n_head_kv). softmax(scale * q.k) v (Vaswani et al. 2017). */
  KILN_OP_ATTENTION = 5,
  /* dst = silu(src0) * src1, elementwise (SwiGLU; Shazeer 2020). */
  KILN_OP_SWIGLU = 6,
  /* dst = src0 + src1, elementwise, same shape. */
  KILN_OP_ADD = 7,
  /* Qwen3.5 (qwen35; llama.cpp's src/models/qwen35.cpp, transformers'
   * modeling_qwen3_5.py). */
  /* Gathers a block of every group of columns: src0 [W, T] is W / stride
   * groups of `stride` values; dst [length * W / stride, T] holds values
   * offset .. offset+length-1 of each group, in order:
   *   dst[g*length + j, t] = src0[g*stride + offset + j, t].
   * (qwen35's joint query/gate projection interleaves them per head.) */
  KILN_OP_SLICE = 8,
  /* dst = sigmoid(src0) * src1, elementwise, sigmoid(a) = 1 / (1 + e^-a)
   * (qwen35's output gate of full attention). */
  KILN_OP_SIGMOID_MUL = 9,
  /* Causal depthwise convolution over time, then SiLU (Mamba's short
   * convolution; ggml_ssm_conv + ggml_silu): src0 [C, T] the step's
   * inputs, src1 [K, C] the kernel (any float weight type; ne0 = K, the
   * conv width), src2 [(K-1) * C, 1] RECURRENT: the K-1 inputs before the
   * step, oldest first, element k*C + c. With in(p) the input at position
   * p (the step's src0 for p >= pos0, the state before it, zeros before
   * position 0):
   *   dst[c, t] = silu(sum_{k<K} src1[k, c] * in(pos0 + t - (K-1) + k)[c])
   * and afterwards src2 holds in(pos0+T-K+1 .. pos0+T-1). A step at
   * pos0 = 0 reads the state as zeros. */
  KILN_OP_SSM_CONV = 10,
  /* The gated delta rule's per-head gates (transformers'
   * Qwen3_5GatedDeltaNet): src0 [H, T] alpha projections, src1 [H, T] beta
   * projections, src2 [H] A (the GGUF's ssm_a = -exp(A_log)), src3 [H] the
   * time-step bias (ssm_dt.bias); dst [2H, T]:
   *   dst[h, t]     = softplus(src0[h, t] + src3[h]) * src2[h]   (log decay g <= 0)
   *   dst[H + h, t] = sigmoid(src1[h, t])                        (beta)
   * softplus(x) = log(1 + e^x), and x for x > 20 (torch's and ggml's). */
  KILN_OP_GDN_GATE = 11,
  /* Gated DeltaNet (Yang, Kautz & Hatamizadeh 2024, "Gated Delta
   * Networks"): src0 [2*Hk*Dk + Hv*Dv, T] the convolved q, k, v (q heads,
   * then k heads, then v heads, each head contiguous), src1 [2*Hv, T] the
   * gates (GDN_GATE: g then beta), src2 [Dk*Dv*Hv, 1] RECURRENT: per value
   * head h a state S_h [Dk x Dv], element S_h[i][j] at (h*Dv + j)*Dk + i
   * (llama.cpp's layout); dst [Hv*Dv, T]. Value head h reads q/k head
   * h % Hk (the converter stores value heads tiled, llama.cpp's order).
   * Per token, with q, k L2-normalised (x / sqrt(sum x^2 + l2_eps)):
   *   S_h <- S_h * exp(g_h)
   *   S_h <- S_h + k (beta_h (v_h - S_h^T k))^T
   *   dst_h = S_h^T (q * q_scale)
   * Steps of one token run that recurrence; longer steps the equivalent
   * chunked (WY) form over chunks of `chunk` tokens (transformers'
   * torch_chunk_gated_delta_rule). A step at pos0 = 0 starts from S = 0;
   * src2 holds the state after the step's last token. */
  KILN_OP_GATED_DELTA_NET = 12,
  /* dst[W,T] column t = column src1[t] of src0 [W, capacity] (an F32
   * activation written by an earlier step of the same eval); src1 is an I32
   * INPUT [capacity] of column indices, each in [0, src0->ne[1]). The output
   * head starts with it, so the output norm and the logits are computed only
   * for the positions whose logits are read (the last prompt token in
   * `kiln run`, every token for parity); ggml_get_rows on an activation, as
   * llama.cpp's inp_out_ids does. */
  KILN_OP_GET_COLUMNS = 13,
  KILN_OP_COUNT = 14
} kiln_op;

typedef enum kiln_rope_mode {
  KILN_ROPE_NORM = 0, /* llama: rotate pairs (x[2i], x[2i+1]) */
  KILN_ROPE_NEOX = 2, /* qwen2, qwen3: rotate pairs (x[i], x[i + n_rot/2]); ggml's mode id 2 */
  /* qwen35: NEOX pairs whose positions come from interleaved multimodal
   * sections (ggml's GGML_ROPE_TYPE_IMROPE, id 40; transformers'
   * interleaved MRoPE). Pair i has sector s = i % (sum of sections) and
   * turns by p * theta^(-2i/n_rot), p from stream t when s % 3 == 0 and
   * s < 3*sections[0], h when s % 3 == 1 and s < 3*sections[1], w when
   * s % 3 == 2 and s < 3*sections[2], else the fourth stream. For text
   * (all kiln runs), t = h = w = the token's position and the fourth
   * stream is 0, as llama.cpp sets them: a pair of the fourth stream does
   * not turn. */
  KILN_ROPE_IMROPE = 40
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
  /* IMROPE only (rope.dimension_sections, in pairs): t, h, w and the
   * fourth stream; each >= 0, sum in 1..head_dim. 0 for the other modes. */
  int32_t sections[4];
} kiln_rope_params;

typedef struct kiln_attention_params {
  int32_t n_head;    /* query heads */
  int32_t n_head_kv; /* KV heads; n_head % n_head_kv == 0 (GQA) */
  int32_t head_dim;
  float scale;       /* softmax scale, 1/sqrt(head_dim) */
} kiln_attention_params;

typedef struct kiln_slice_params {
  int32_t offset; /* first value taken from each group, >= 0 */
  int32_t length; /* values taken from each group, >= 1, offset + length <= stride */
  int32_t stride; /* values per group; divides src0's width */
} kiln_slice_params;

/* MUL_MAT: what the graph knows about where its output goes, for the
 * numeric policies of backends (the op's arithmetic does not read it). Set
 * by kiln_graph_build for every MUL_MAT node; zero in a graph from an
 * older host (ABI 2.1), which reads as "false". */
typedef struct kiln_mul_mat_params {
  /* True when a node that updates a RECURRENT state (kiln_op_state_src(op)
   * >= 0: SSM_CONV, GATED_DELTA_NET) reads this node's output, directly or
   * through later nodes of the same step (the residual stream carries it
   * to every later block). An error such a matvec makes reaches the delta
   * rule's q and k, whose readout S^T q nearly cancels in some heads, and
   * the per-head gated RMSNorm scales those heads back up: rounding
   * errors come out several times larger (README, "Qwen3.5"). Backends
   * with quantized decode activations keep these matvecs exact ([cpu] /
   * [cuda-*] recurrent_guard). False for every MUL_MAT of a graph without
   * recurrent layers, and for those after the last one (the logits). */
  bool feeds_recurrent;
} kiln_mul_mat_params;

typedef struct kiln_gdn_params {
  int32_t n_k_heads;  /* q/k heads Hk (ssm.group_count) */
  int32_t n_v_heads;  /* value heads Hv (ssm.time_step_rank), a multiple of Hk */
  int32_t head_k_dim; /* Dk (ssm.state_size) */
  int32_t head_v_dim; /* Dv (ssm.inner_size / Hv) */
  int32_t chunk;      /* tokens per chunk of the chunked form (the reference code's 64), >= 1 */
  float l2_eps;       /* ε of the q/k L2 norms, bit-exact (layer_norm_rms_epsilon in llama.cpp) */
  float q_scale;      /* q's scale, 1/sqrt(Dk) */
} kiln_gdn_params;

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
    kiln_slice_params slice;
    kiln_gdn_params gdn;
    kiln_mul_mat_params mul_mat; /* ABI 2.2 */
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
  case KILN_OP_SLICE: return "slice";
  case KILN_OP_SIGMOID_MUL: return "sigmoid_mul";
  case KILN_OP_SSM_CONV: return "ssm_conv";
  case KILN_OP_GDN_GATE: return "gdn_gate";
  case KILN_OP_GATED_DELTA_NET: return "gated_delta_net";
  case KILN_OP_GET_COLUMNS: return "get_columns";
  default: return "?";
  }
}

/* The source a node of `op` updates in place, its RECURRENT state (src2 of
 * SSM_CONV and GATED_DELTA_NET), or -1 for ops that write only dst.
 * Inline so plugins can use it. */
static inline int kiln_op_state_src(kiln_op op) {
  return op == KILN_OP_SSM_CONV || op == KILN_OP_GATED_DELTA_NET ? 2 : -1;
}

#ifdef __cplusplus
}
#endif
#endif /* KILN_GRAPH_H */
