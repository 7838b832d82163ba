/* The kernel templates of qwen35's ops (Gated DeltaNet, its conv and gates,
 * the gated attention's slice and sigmoid gate, interleaved MRoPE), with
 * their schemas: every value a kernel bakes is declared here, so it is in
 * the kernel's key and covered by the guard tests (test_kcache_guard*).
 * Sources are the files in kernels/, embedded at build time (local.mk). */
#include "config.h"

#include "kernel_templates.h"

#define BLOCK_SIZE \
  {"block_size", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "threads per block"}

static const char slice_source[] =
#include "grid_dep.cuh.inc"
#include "slice.cu.inc"
    ;

static const kiln_kparam_decl slice_params[] = {
    {"width", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "input values per token (src0's ne0)"},
    {"offset", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "first value taken from each group"},
    {"length", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values taken from each group"},
    {"stride", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values per group"},
    BLOCK_SIZE,
    {"x", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [width, n_tokens]"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [width / stride * length, n_tokens]"},
    {"n_tokens", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "tokens in this launch"},
};

const kiln_ktemplate kiln_cuda_t_slice = {
    .name = KILN_CUDA_T_SLICE,
    .version = 1,
    .entry = "kiln_slice",
    .source = slice_source,
    .params = slice_params,
    .n_params = sizeof slice_params / sizeof slice_params[0],
    .help = "SLICE: a block of every group of values (qwen35's query and gate heads)",
};

static const char sigmoid_mul_source[] =
#include "grid_dep.cuh.inc"
#include "sigmoid_mul.cu.inc"
    ;

static const kiln_kparam_decl sigmoid_mul_params[] = {
    BLOCK_SIZE,
    {"a", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "gate, f32"},
    {"b", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "values, f32"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "sigmoid(a) * b, f32"},
    {"n", KILN_KPARAM_I64, KILN_KPARAM_RUNTIME, "values"},
};

const kiln_ktemplate kiln_cuda_t_sigmoid_mul = {
    .name = KILN_CUDA_T_SIGMOID_MUL,
    .version = 1,
    .entry = "kiln_sigmoid_mul",
    .source = sigmoid_mul_source,
    .params = sigmoid_mul_params,
    .n_params = sizeof sigmoid_mul_params / sizeof sigmoid_mul_params[0],
    .help = "SIGMOID_MUL: sigmoid(a) * b elementwise (qwen35's attention output gate)",
};

static const char ssm_conv_source[] =
#include "grid_dep.cuh.inc"
#include "step_block.cuh.inc"
#include "wtype_select.cuh.inc"
#include "wtype_common.cuh.inc"
#include "ssm_conv.cu.inc"
    ;

static const kiln_kparam_decl ssm_conv_params[] = {
    {"channels", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "channels C: 2 * q/k width + value width"},
    {"d_conv", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "conv width K (ssm.conv_kernel), 2..16"},
    {"w_type", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED, "the conv kernel's type: F32|F16|BF16"},
    BLOCK_SIZE,
    {"x", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [C, n_tokens], the qkv projections"},
    {"w", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "the kernel [K, C] of w_type"},
    {"state", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [(K-1) * C]: the inputs before the step"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [C, n_tokens]"},
    {"n_tokens", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "tokens in this launch"},
    {"step", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME,
     "the step block (cuda_step.h): pos0 (0: the state is zeros) read there"},
};

const kiln_ktemplate kiln_cuda_t_ssm_conv = {
    .name = KILN_CUDA_T_SSM_CONV,
    .version = 2,
    .entry = "kiln_ssm_conv",
    .source = ssm_conv_source,
    .params = ssm_conv_params,
    .n_params = sizeof ssm_conv_params / sizeof ssm_conv_params[0],
    .help = "SSM_CONV: causal depthwise conv + SiLU with its state (Gated DeltaNet)",
};

static const char gdn_gate_source[] =
#include "grid_dep.cuh.inc"
#include "gdn_gate.cu.inc"
    ;

static const kiln_kparam_decl gdn_gate_params[] = {
    {"n_heads", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "value heads H"},
    BLOCK_SIZE,
    {"alpha", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [H, n_tokens]"},
    {"beta", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [H, n_tokens]"},
    {"ssm_a", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [H], A = -exp(A_log)"},
    {"dt", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [H], ssm_dt.bias"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [2H, n_tokens]: g, then beta"},
    {"n_tokens", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "tokens in this launch"},
};

const kiln_ktemplate kiln_cuda_t_gdn_gate = {
    .name = KILN_CUDA_T_GDN_GATE,
    .version = 1,
    .entry = "kiln_gdn_gate",
    .source = gdn_gate_source,
    .params = gdn_gate_params,
    .n_params = sizeof gdn_gate_params / sizeof gdn_gate_params[0],
    .help = "GDN_GATE: Gated DeltaNet's log decay and beta per head",
};

/* What both delta-rule kernels bake (gdn_common.cuh), and their arguments. */
#define GDN_PARAMS                                                                                  \
  {"n_k_heads", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "q/k heads Hk (ssm.group_count)"},              \
      {"n_v_heads", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "value heads Hv (ssm.time_step_rank)"},     \
      {"head_k_dim", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "q/k head dim Dk (ssm.state_size)"},       \
      {"head_v_dim", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "value head dim Dv"},                      \
      {"l2_eps", KILN_KPARAM_F32, KILN_KPARAM_BAKED,                                                \
       "the q/k L2 norms' epsilon, bit-exact (layer_norm_rms_epsilon)"},                           \
      {"q_scale", KILN_KPARAM_F32, KILN_KPARAM_BAKED, "q's scale 1/sqrt(Dk), bit-exact"}

#define GDN_ARGS                                                                                    \
  {"qkv", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [2*Hk*Dk + Hv*Dv, n_tokens], convolved"},     \
      {"gates", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [2*Hv, n_tokens]: g, then beta"},        \
      {"state", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [Dk*Dv*Hv], read and written"},          \
      {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [Hv*Dv, n_tokens]"},                         \
      {"n_tokens", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "tokens in this launch"},                  \
      {"step", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME,                                                \
       "the step block (cuda_step.h): pos0 (0: S = 0) read there"}

static const char gdn_recurrent_source[] =
#include "grid_dep.cuh.inc"
#include "step_block.cuh.inc"
#include "gdn_common.cuh.inc"
#include "gdn_recurrent.cu.inc"
    ;

static const kiln_kparam_decl gdn_recurrent_params[] = {
    GDN_PARAMS,
    {"warps", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "warps per block, one value column each"},
    GDN_ARGS,
};

const kiln_ktemplate kiln_cuda_t_gdn_recurrent = {
    .name = KILN_CUDA_T_GDN_RECURRENT,
    .version = 2,
    .entry = "kiln_gdn_recurrent",
    .source = gdn_recurrent_source,
    .params = gdn_recurrent_params,
    .n_params = sizeof gdn_recurrent_params / sizeof gdn_recurrent_params[0],
    .help = "GATED_DELTA_NET, token by token: a warp per value column, the state in registers",
};

static const char gdn_chunked_source[] =
#include "grid_dep.cuh.inc"
#include "step_block.cuh.inc"
#include "gdn_common.cuh.inc"
#include "gdn_chunked.cu.inc"
    ;

static const kiln_kparam_decl gdn_chunked_params[] = {
    GDN_PARAMS,
    {"chunk", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "tokens per chunk (the reference code's 64), 1..64"},
    {"cols", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "value columns per block (head_k_dim * cols <= 4096)"},
    BLOCK_SIZE,
    GDN_ARGS,
};

const kiln_ktemplate kiln_cuda_t_gdn_chunked = {
    .name = KILN_CUDA_T_GDN_CHUNKED,
    .version = 2,
    .entry = "kiln_gdn_chunked",
    .source = gdn_chunked_source,
    .params = gdn_chunked_params,
    .n_params = sizeof gdn_chunked_params / sizeof gdn_chunked_params[0],
    .help = "GATED_DELTA_NET over a prefill step: the chunked (WY) form, a block per head and column tile",
};

static const char rope_imrope_source[] =
#include "grid_dep.cuh.inc"
#include "step_block.cuh.inc"
#include "rope_imrope.cu.inc"
    ;

static const kiln_kparam_decl rope_imrope_params[] = {
    {"n_rot", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "rotated dimensions per head (even)"},
    {"head_dim", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values per head"},
    {"n_head", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "heads per token in the input"},
    {"theta", KILN_KPARAM_F32, KILN_KPARAM_BAKED, "RoPE base (rope.freq_base), bit-exact"},
    {"sect_t", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "rope.dimension_sections[0]: pairs of the t stream"},
    {"sect_h", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "rope.dimension_sections[1]: pairs of the h stream"},
    {"sect_w", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "rope.dimension_sections[2]: pairs of the w stream"},
    {"sect_e", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "rope.dimension_sections[3]: pairs of the 4th stream"},
    BLOCK_SIZE,
    {"x", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [head_dim * n_head, n_tokens]"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32, same shape; may be x"},
    {"n_tokens", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "tokens in this launch"},
    {"step", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME,
     "the step block (cuda_step.h): pos0, the first token's position, read there"},
};

const kiln_ktemplate kiln_cuda_t_rope_imrope = {
    .name = KILN_CUDA_T_ROPE_IMROPE,
    .version = 2,
    .entry = "kiln_rope_imrope",
    .source = rope_imrope_source,
    .params = rope_imrope_params,
    .n_params = sizeof rope_imrope_params / sizeof rope_imrope_params[0],
    .help = "ROPE, mode IMROPE: NEOX pairs by interleaved sections (qwen35), double angles",
};
