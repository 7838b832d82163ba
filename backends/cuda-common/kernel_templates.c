/* The kernel templates of the CUDA backends. Their sources are the files
 * in kernels/, turned into C string literals at build time (local.mk) and
 * glued here; their schemas are declared beside them. */
#include "config.h"

#include "kernel_templates.h"

/* The RMSNorm parameters every variant bakes, and its kernel arguments. */
#define RMSNORM_COMMON_PARAMS                                                                  \
  {"eps", KILN_KPARAM_F32, KILN_KPARAM_BAKED,                                                  \
   "the model's epsilon, added to mean(x^2) (bit-exact from the GGUF)"},                       \
      {"hidden", KILN_KPARAM_I64, KILN_KPARAM_BAKED,                                           \
       "row length: the norm weight's ne0"},                                                   \
      {"w_type", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED, "the norm weight's type: F32|F16|BF16"}, \
      {"x", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "input rows, f32, contiguous"},              \
      {"w", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "norm weight, hidden values of w_type"},     \
      {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "output rows, f32, same layout as x"},        \
      {"n_rows", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "rows in this launch"}

static const char rmsnorm_row_vec_source[] =
#include "grid_dep.cuh.inc"
#include "rmsnorm_common.cuh.inc"
#include "rmsnorm_row_vec.cu.inc"
    ;

static const kiln_kparam_decl rmsnorm_row_vec_params[] = {
    RMSNORM_COMMON_PARAMS,
    {"block_size", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "threads per block (one block per row)"},
};

static const kiln_ktemplate rmsnorm_row_vec = {
    .name = KILN_CUDA_T_RMSNORM_ROW_VEC,
    .version = 1,
    .entry = "kiln_rmsnorm_row_vec",
    .source = rmsnorm_row_vec_source,
    .params = rmsnorm_row_vec_params,
    .n_params = sizeof rmsnorm_row_vec_params / sizeof rmsnorm_row_vec_params[0],
    .help = "RMSNorm, one block per row, float4 loads (cuda-serial)",
};

static const char rmsnorm_rows_source[] =
#include "grid_dep.cuh.inc"
#include "rmsnorm_common.cuh.inc"
#include "rmsnorm_rows.cu.inc"
    ;

static const kiln_kparam_decl rmsnorm_rows_params[] = {
    RMSNORM_COMMON_PARAMS,
    {"rows_per_block", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "rows per block, one warp each"},
};

static const kiln_ktemplate rmsnorm_rows = {
    .name = KILN_CUDA_T_RMSNORM_ROWS,
    .version = 1,
    .entry = "kiln_rmsnorm_rows",
    .source = rmsnorm_rows_source,
    .params = rmsnorm_rows_params,
    .n_params = sizeof rmsnorm_rows_params / sizeof rmsnorm_rows_params[0],
    .help = "RMSNorm, one warp per row, several rows per block (cuda-batched)",
};

static const char rmsnorm_row_cc12_source[] =
#include "grid_dep.cuh.inc"
#include "rmsnorm_common.cuh.inc"
#include "rmsnorm_row_cc12.cu.inc"
    ;

static const kiln_kparam_decl rmsnorm_row_cc12_params[] = {
    RMSNORM_COMMON_PARAMS,
    {"block_size", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "threads per block (one block per row)"},
};

static const kiln_ktemplate rmsnorm_row_cc12 = {
    .name = KILN_CUDA_T_RMSNORM_ROW_CC12,
    .version = 1,
    .entry = "kiln_rmsnorm_row_cc12",
    .source = rmsnorm_row_cc12_source,
    .params = rmsnorm_row_cc12_params,
    .n_params = sizeof rmsnorm_row_cc12_params / sizeof rmsnorm_row_cc12_params[0],
    .help = "RMSNorm, one block per row, scalar loads (cuda-cc120, compute capability 12.x)",
};

/* ---- the other ops: one template each ------------------------------------ */

#define BLOCK_SIZE_PARAM \
  {"block_size", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "threads per block"}

/* The per-step parameter block (cuda_step.h), where a kernel reads pos0,
 * n_tokens and n_kv. */
#define STEP_PARAM                                                         \
  {"step", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME,                           \
   "the step block: int32 {pos0, n_tokens, n_kv, ...} (cuda_step.h)"}

static const char matvec_source[] =
#include "grid_dep.cuh.inc"
#include "wtype_select.cuh.inc"
#include "wtype_common.cuh.inc"
#include "matvec.cu.inc"
    ;

static const kiln_kparam_decl matvec_params[] = {
    {"w_type", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED,
     "the weight's type: F32|F16|BF16|Q4_0|Q5_0|Q8_0|Q4_K|Q5_K|Q6_K"},
    {"k", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "row length K: the weight's ne0"},
    {"warps", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "warps per block (1..32)"},
    {"k_split", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "warps that share each row's length (divides warps; fixes the order of the sum)"},
    {"rows_per_group", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "consecutive weight rows per group of k_split warps (1..8), sharing each read of x"},
    {"bias", KILN_KPARAM_STR, KILN_KPARAM_BAKED,
     "the bias added to each row's sum: none, or its type F32|F16|BF16"},
    {"w", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME,
     "the weight buffer's base (256-byte aligned, no padding): n_rows rows of k values of "
     "w_type"},
    {"x", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "input columns, f32 [k, n_cols]"},
    {"b", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "the bias, n_rows values (NULL: none)"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "output columns, f32 [n_rows, n_cols]"},
    {"n_rows", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "weight rows N"},
    {"n_cols", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "columns (tokens) in this launch"},
};

static const kiln_ktemplate matvec = {
    .name = KILN_CUDA_T_MATVEC,
    .version = 4,
    .entry = "kiln_matvec",
    .source = matvec_source,
    .params = matvec_params,
    .n_params = sizeof matvec_params / sizeof matvec_params[0],
    .help = "MUL_MAT for decode: rows per warp group, block types staged in 16-byte loads "
            "through shared memory, dequantized in registers, f32 sums, the bias fused",
};

/* The GEMM operand form both prefill-operand templates bake. */
#define GEMM_OPERAND_PARAM                                                        \
  {"operand", KILN_KPARAM_STR, KILN_KPARAM_BAKED,                                 \
   "the GEMM's operand form ([<plugin>] gemm): f32, bf16, bf16x3 (hi and lo "    \
   "bf16 terms, three K terms a value) or tf32x3 (the same in TF32 terms)"}

static const char dequant_rows_source[] =
#include "grid_dep.cuh.inc"
#include "wtype_select.cuh.inc"
#include "wtype_common.cuh.inc"
#include "gemm_operand.cuh.inc"
#include "dequant_rows.cu.inc"
    ;

static const kiln_kparam_decl dequant_rows_params[] = {
    {"w_type", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED, "the weight's type"},
    {"k", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "row length K: the weight's ne0"},
    GEMM_OPERAND_PARAM,
    BLOCK_SIZE_PARAM,
    {"w", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "the first weight row of the tile"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME,
     "the tile: n_rows rows of k f32 or bf16, or of 3 k bf16 (bf16x3) or f32 words (tf32x3)"},
    {"n_rows", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "rows in the tile"},
};

static const kiln_ktemplate dequant_rows = {
    .name = KILN_CUDA_T_DEQUANT_ROWS,
    .version = 2,
    .entry = "kiln_dequant_rows",
    .source = dequant_rows_source,
    .params = dequant_rows_params,
    .n_params = sizeof dequant_rows_params / sizeof dequant_rows_params[0],
    .help = "weight rows to the prefill GEMM's tile (bit-exact to core/dequant.c, then f32, "
            "bf16, or the bf16x3 or tf32x3 split)",
};

static const char gemm_input_source[] =
#include "grid_dep.cuh.inc"
#include "gemm_operand.cuh.inc"
#include "gemm_input.cu.inc"
    ;

static const kiln_kparam_decl gemm_input_params[] = {
    {"k", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values per column: the weight's K"},
    GEMM_OPERAND_PARAM,
    BLOCK_SIZE_PARAM,
    {"x", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [k, n_cols]"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME,
     "bf16 [k, n_cols], or [3 k, n_cols] of bf16 (bf16x3) or of f32 words (tf32x3)"},
    {"n_cols", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "columns (tokens) in this launch"},
};

static const kiln_ktemplate gemm_input = {
    .name = KILN_CUDA_T_GEMM_INPUT,
    .version = 1,
    .entry = "kiln_gemm_input",
    .source = gemm_input_source,
    .params = gemm_input_params,
    .n_params = sizeof gemm_input_params / sizeof gemm_input_params[0],
    .help = "the prefill GEMM's activations to its term operand (bf16, or the bf16x3 or tf32x3 "
            "split)",
};

/* The integer tensor-core prefill GEMM (gemm = q16mma): quantized weights
 * read directly, activations as the decode matvec_q's q16 input. */
static const char mmq_source[] =
#include "grid_dep.cuh.inc"
#include "quant_mode.cuh.inc"
#include "act_quant.cuh.inc"
#include "imma.cuh.inc"
#include "mmq_types.cuh.inc"
#include "mmq.cu.inc"
    ;

static const kiln_kparam_decl mmq_params[] = {
    {"mmq_type", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED,
     "the weight's type: Q4_0|Q5_0|Q8_0|Q4_K|Q5_K|Q6_K (mmq_types.cuh)"},
    {"quant", KILN_KPARAM_STR, KILN_KPARAM_BAKED,
     "the activations' quantization: q16 (two IMMA passes, hi and lo bytes) | q8 (one)"},
    {"k", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "row length K: the weight's ne0 (a multiple of 128 and of its block)"},
    {"tile_m", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "weight rows per block (a multiple of 16)"},
    {"tile_n", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "tokens per block (a multiple of 8)"},
    {"warps", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "warps per block, dividing the tile's 16x8 fragments"},
    {"prefetch", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "1: the next 128-value step's weights and activations are read into registers while the "
     "warps compute this one; 0: read, then compute"},
    {"w", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME,
     "the weight buffer's base (256-byte aligned, no padding): n_rows rows of k values"},
    {"xq", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME,
     "the input's columns quantized (act_quant.cuh) at KILN_XQ_COL_STRIDE(k)"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "output, f32 [n_rows, n_cols]"},
    {"n_rows", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "weight rows N"},
    {"n_cols", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "columns (tokens) in this launch"},
};

static const kiln_ktemplate mmq = {
    .name = KILN_CUDA_T_MMQ,
    .version = 1,
    .entry = "kiln_mmq",
    .source = mmq_source,
    .params = mmq_params,
    .n_params = sizeof mmq_params / sizeof mmq_params[0],
    .help = "MUL_MAT for prefill on integer tensor cores (mma.sync m16n8k32/k16 s8, sm_80+): "
            "block weights decoded to int8 tiles in shared memory, activations q16 as hi and "
            "lo bytes, exact integer sums per sub-block, scales in f32",
};

/* The FP8 GEMM's operands (gemm = fp8): e4m3 bytes with one f32 scale a
 * row (weights) or a token (activations), found on the device from the
 * data and passed to cuBLASLt as runtime data; only the value a row's
 * largest magnitude maps to is baked (fp8_e4m3.cuh). */
#define FP8_MAX_PARAM                                                          \
  {"fp8_max", KILN_KPARAM_F32, KILN_KPARAM_BAKED,                              \
   "the e4m3 value a row's largest magnitude maps to: scale = amax / fp8_max " \
   "(448: e4m3's whole range)"}

static const char fp8_rows_source[] =
#include "grid_dep.cuh.inc"
#include "wtype_select.cuh.inc"
#include "wtype_common.cuh.inc"
#include "fp8_e4m3.cuh.inc"
#include "fp8_rows.cu.inc"
    ;

static const kiln_kparam_decl fp8_rows_params[] = {
    {"w_type", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED, "the weight's type"},
    {"k", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "row length K: the weight's ne0"},
    FP8_MAX_PARAM,
    BLOCK_SIZE_PARAM,
    {"w", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "the first weight row of the tile"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME,
     "the tile: n_pad rows of K rounded up to 16 e4m3 bytes, then n_pad f32 scales "
     "(dynamic, one a row; 1 for a padding row)"},
    {"n_rows", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "weight rows in the tile"},
    {"n_pad", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "rows written: n_rows, then zero rows up to a whole 16"},
};

static const kiln_ktemplate fp8_rows = {
    .name = KILN_CUDA_T_FP8_ROWS,
    .version = 2,
    .entry = "kiln_fp8_rows",
    .source = fp8_rows_source,
    .params = fp8_rows_params,
    .n_params = sizeof fp8_rows_params / sizeof fp8_rows_params[0],
    .help = "weight rows to the FP8 GEMM's tile: e4m3 with a scale a row (amax / fp8_max)",
};

static const char fp8_input_source[] =
#include "grid_dep.cuh.inc"
#include "fp8_e4m3.cuh.inc"
#include "fp8_input.cu.inc"
    ;

static const kiln_kparam_decl fp8_input_params[] = {
    {"k", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values per column: the weight's K"},
    FP8_MAX_PARAM,
    BLOCK_SIZE_PARAM,
    {"x", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [k, n_cols]"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME,
     "n_pad columns of K rounded up to 16 e4m3 bytes, then n_pad f32 scales (dynamic, one "
     "a token; 1 for a padding column)"},
    {"n_cols", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "columns (tokens) in this launch"},
    {"n_pad", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME,
     "columns written: n_cols, then zero columns up to the GEMM's fewest (16)"},
};

static const kiln_ktemplate fp8_input = {
    .name = KILN_CUDA_T_FP8_INPUT,
    .version = 2,
    .entry = "kiln_fp8_input",
    .source = fp8_input_source,
    .params = fp8_input_params,
    .n_params = sizeof fp8_input_params / sizeof fp8_input_params[0],
    .help = "the FP8 GEMM's activations: e4m3 with a dynamic scale a token (amax / fp8_max)",
};

static const char bias_add_source[] =
#include "grid_dep.cuh.inc"
#include "wtype_select.cuh.inc"
#include "wtype_common.cuh.inc"
#include "bias_add.cu.inc"
    ;

static const kiln_kparam_decl bias_add_params[] = {
    {"w_type", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED, "the bias's type"},
    {"n", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "bias length N (output rows)"},
    BLOCK_SIZE_PARAM,
    {"b", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "the bias, n values of w_type"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [n, n_cols], added to in place"},
    {"n_cols", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "columns (tokens) in this launch"},
};

static const kiln_ktemplate bias_add = {
    .name = KILN_CUDA_T_BIAS_ADD,
    .version = 1,
    .entry = "kiln_bias_add",
    .source = bias_add_source,
    .params = bias_add_params,
    .n_params = sizeof bias_add_params / sizeof bias_add_params[0],
    .help = "adds a MUL_MAT's bias (qwen2's Q/K/V) to every column",
};

static const char get_rows_source[] =
#include "grid_dep.cuh.inc"
#include "wtype_select.cuh.inc"
#include "wtype_common.cuh.inc"
#include "get_rows.cu.inc"
    ;

static const kiln_kparam_decl get_rows_params[] = {
    {"w_type", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED, "the embedding table's type"},
    {"hidden", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "row length: the table's ne0"},
    BLOCK_SIZE_PARAM,
    {"table", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "the embedding table"},
    {"ids", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "token ids, i32 [n_tokens], checked by the host"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [hidden, n_tokens]"},
    {"n_tokens", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "tokens in this launch"},
};

static const kiln_ktemplate get_rows = {
    .name = KILN_CUDA_T_GET_ROWS,
    .version = 1,
    .entry = "kiln_get_rows",
    .source = get_rows_source,
    .params = get_rows_params,
    .n_params = sizeof get_rows_params / sizeof get_rows_params[0],
    .help = "GET_ROWS: token embedding rows of any weight type as f32",
};

static const char rope_source[] =
#include "grid_dep.cuh.inc"
#include "step_block.cuh.inc"
#include "rope_common.cuh.inc"
#include "rope.cu.inc"
    ;

static const kiln_kparam_decl rope_params[] = {
    {"mode", KILN_KPARAM_STR, KILN_KPARAM_BAKED, "NORM (pairs 2i, 2i+1) or NEOX (pairs i, i+n_rot/2)"},
    {"n_rot", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "rotated dimensions per head (even)"},
    {"head_dim", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values per head"},
    {"n_head", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "heads per token in the input"},
    {"theta", KILN_KPARAM_F32, KILN_KPARAM_BAKED, "RoPE base (rope.freq_base), bit-exact"},
    BLOCK_SIZE_PARAM,
    {"x", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [head_dim * n_head, n_tokens]"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32, same shape; may be x"},
    STEP_PARAM,
};

static const kiln_ktemplate rope = {
    .name = KILN_CUDA_T_ROPE,
    .version = 4,
    .entry = "kiln_rope",
    .source = rope_source,
    .params = rope_params,
    .n_params = sizeof rope_params / sizeof rope_params[0],
    .help = "rotary position embedding, angles and rotation in double",
};

static const char attention_source[] =
#include "grid_dep.cuh.inc"
#include "step_block.cuh.inc"
#include "kv_type.cuh.inc"
#include "attention.cu.inc"
    ;

static const kiln_kparam_decl attention_params[] = {
    {"head_dim", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values per head (at most 256)"},
    {"n_head", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "query heads"},
    {"n_head_kv", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "KV heads (n_head % n_head_kv == 0)"},
    {"scale", KILN_KPARAM_F32, KILN_KPARAM_BAKED, "softmax scale (1/sqrt(head_dim)), bit-exact"},
    {"warps", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "warps per (head, token) block"},
    {"kv_type", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED,
     "the K/V caches' element type: F32|F16|BF16|Q8_0 (kv_type.cuh; Q8_0 needs head_dim % 32 == 0)"},
    {"q", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "queries, f32 [head_dim * n_head, n_tokens]"},
    {"k_cache", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "K cache, kv_type [head_dim * n_head_kv, n_ctx]"},
    {"v_cache", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "V cache, same shape"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "output, shaped like q"},
    STEP_PARAM,
};

static const kiln_ktemplate attention = {
    .name = KILN_CUDA_T_ATTENTION,
    .version = 3,
    .entry = "kiln_attention",
    .source = attention_source,
    .params = attention_params,
    .n_params = sizeof attention_params / sizeof attention_params[0],
    .help = "causal GQA attention, online softmax with max subtraction, f32 math over a kv_type cache",
};

/* Split-KV decode attention (flash-decoding): attention_split's blocks
 * write partial softmax results, attention_merge combines them. */
static const char attention_split_source[] =
#include "grid_dep.cuh.inc"
#include "step_block.cuh.inc"
#include "kv_type.cuh.inc"
#include "quant_mode.cuh.inc"
#include "act_quant.cuh.inc"
#include "attention_part.cuh.inc"
#include "attention_split.cu.inc"
    ;

static const kiln_kparam_decl attention_split_params[] = {
    {"head_dim", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values per head (at most 256)"},
    {"n_head", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "query heads"},
    {"n_head_kv", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "KV heads; n_head / n_head_kv query heads (at most 16) share each block's K/V reads"},
    {"scale", KILN_KPARAM_F32, KILN_KPARAM_BAKED, "softmax scale (1/sqrt(head_dim)), bit-exact"},
    {"warps", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "warps per (split, KV head) block"},
    {"n_split", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "splits of the keys (1..256): the grid's x; each split's length comes from the step block"},
    {"kv_type", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED,
     "the K/V caches' element type: F32|F16|BF16|Q8_0 (kv_type.cuh; Q8_0 needs head_dim % 32 == 0)"},
    {"merge", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "1: the block that takes a KV head's last ticket merges its group's records into y "
     "(no attention_merge launch); 0: the records only"},
    {"quant", KILN_KPARAM_STR, KILN_KPARAM_BAKED,
     "with merge = 1, y also written quantized per 32 values for the next matvec_q: "
     "q16 | q8 | none"},
    {"k", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values of the output column, head_dim * n_head"},
    {"q", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "the pass's query column, f32 [head_dim * n_head]"},
    {"k_cache", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "K cache, kv_type [head_dim * n_head_kv, n_ctx]"},
    {"v_cache", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "V cache, same shape"},
    {"part", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME,
     "partial results, n_head * n_split records of head_dim + 2 floats (attention_part.cuh)"},
    STEP_PARAM,
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME,
     "merge = 1: the output column, f32 [head_dim * n_head]; else unused"},
    {"xq", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "merge = 1 and quant q16 / q8: y quantized"},
    {"tickets", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME,
     "merge = 1: n_head_kv u32 counters, 0 before a launch and 0 after it"},
};

static const kiln_ktemplate attention_split = {
    .name = KILN_CUDA_T_ATTENTION_SPLIT,
    .version = 5,
    .entry = "kiln_attention_split",
    .source = attention_split_source,
    .params = attention_split_params,
    .n_params = sizeof attention_split_params / sizeof attention_split_params[0],
    .help = "decode attention, first half: one block per (split of the keys, KV head) for all "
            "of the head's GQA query heads, tiles of 32 keys (16 above head_dim 128) in shared "
            "memory, online softmax with max subtraction, f32 math over a kv_type cache; "
            "with merge = 1 the last block of each KV head merges its group",
};

static const char attention_mma_source[] =
#include "grid_dep.cuh.inc"
#include "step_block.cuh.inc"
#include "mma_sync.cuh.inc"
#include "attention_part.cuh.inc"
#include "attention_mma.cu.inc"
    ;

static const kiln_kparam_decl attention_mma_params[] = {
    {"head_dim", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values per head (a multiple of 16, at most 128)"},
    {"n_head", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "query heads"},
    {"n_head_kv", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "KV heads; n_head / n_head_kv query heads (at most 16) are the rows of each mma"},
    {"scale", KILN_KPARAM_F32, KILN_KPARAM_BAKED, "softmax scale (1/sqrt(head_dim)), bit-exact"},
    {"warps", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "warps per (split, KV head) block"},
    {"n_split", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "splits of the keys (1..256): the grid's x; each split's length comes from the step block"},
    {"mma_type", KILN_KPARAM_STR, KILN_KPARAM_BAKED,
     "the K/V caches' 16-bit type, the tensor cores' input: f16 | bf16 (mma_sync.cuh)"},
    {"q", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "the pass's query column, f32 [head_dim * n_head]"},
    {"k_cache", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "K cache, mma_type [head_dim * n_head_kv, n_ctx]"},
    {"v_cache", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "V cache, same shape"},
    {"part", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME,
     "partial results, n_head * n_split records of head_dim + 2 floats (attention_part.cuh)"},
    STEP_PARAM,
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "unused (attention_split's argument list)"},
    {"xq", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "unused"},
    {"tickets", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "unused"},
};

static const kiln_ktemplate attention_mma = {
    .name = KILN_CUDA_T_ATTENTION_MMA,
    .version = 1,
    .entry = "kiln_attention_mma",
    .source = attention_mma_source,
    .params = attention_mma_params,
    .n_params = sizeof attention_mma_params / sizeof attention_mma_params[0],
    .help = "split-KV decode attention on tensor cores over an f16 or bf16 cache (mma.sync, "
            "f32-grade operands as 2-3 terms): the records attention_merge merges",
};

static const char attention_merge_source[] =
#include "grid_dep.cuh.inc"
#include "quant_mode.cuh.inc"
#include "act_quant.cuh.inc"
#include "attention_part.cuh.inc"
#include "attention_merge.cu.inc"
    ;

static const kiln_kparam_decl attention_merge_params[] = {
    {"head_dim", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values per head (at most 256)"},
    {"n_split", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "splits attention_split wrote (1..256)"},
    {"warps", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "warps per (query head) block"},
    {"quant", KILN_KPARAM_STR, KILN_KPARAM_BAKED,
     "y also written quantized per 32 values for the next matvec_q: q16 | q8 | none"},
    {"k", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values of the output column, head_dim * n_head"},
    {"part", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "attention_split's partial results"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "output column, f32 [head_dim * n_head]"},
    {"xq", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "y quantized (quant q16 / q8), else unused"},
};

static const kiln_ktemplate attention_merge = {
    .name = KILN_CUDA_T_ATTENTION_MERGE,
    .version = 3,
    .entry = "kiln_attention_merge",
    .source = attention_merge_source,
    .params = attention_merge_params,
    .n_params = sizeof attention_merge_params / sizeof attention_merge_params[0],
    .help = "decode attention, second half: one block per query head merges the splits' "
            "partial softmax results against their overall maximum (and quantizes y for "
            "the output projection's matvec_q)",
};

/* Flash prefill attention: one block per (tile of query rows of one GQA
 * group, KV head), the K/V tiles in dynamic shared memory. */
static const char flash_attention_source[] =
#include "grid_dep.cuh.inc"
#include "step_block.cuh.inc"
#include "kv_type.cuh.inc"
#include "flash_layout.cuh.inc"
#include "flash_attention.cu.inc"
    ;

static const kiln_kparam_decl flash_attention_params[] = {
    {"head_dim", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values per head (a multiple of 4, at most 256)"},
    {"n_head", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "query heads: q's and y's column is head_dim * n_head"},
    {"n_head_kv", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "KV heads; the GQA ratio n_head / n_head_kv query heads share each block's K/V tiles"},
    {"scale", KILN_KPARAM_F32, KILN_KPARAM_BAKED, "softmax scale (1/sqrt(head_dim)), bit-exact"},
    {"bq", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "query rows ((token, query head) pairs of one group) per block, bq / warps per warp (<= 16)"},
    {"bk", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "cache positions per K/V tile (32, 64, 96 or 128)"},
    {"warps", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "warps per block"},
    {"kv_type", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED,
     "the K/V caches' element type: F32|F16|BF16|Q8_0 (kv_type.cuh; Q8_0 needs head_dim % 32 == 0)"},
    {"q", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "queries, f32 [head_dim * n_head, n_tokens]"},
    {"k_cache", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "K cache, kv_type [head_dim * n_head_kv, n_ctx]"},
    {"v_cache", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "V cache, same shape"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "output, shaped like q"},
    STEP_PARAM,
};

static const kiln_ktemplate flash_attention = {
    .name = KILN_CUDA_T_FLASH_ATTENTION,
    .version = 2,
    .entry = "kiln_flash_attention",
    .source = flash_attention_source,
    .params = flash_attention_params,
    .n_params = sizeof flash_attention_params / sizeof flash_attention_params[0],
    .help = "prefill attention (several tokens), flash attention: one block per (bq query rows "
            "of one GQA group, KV head) over K/V tiles of bk positions in shared memory, causal "
            "mask, online softmax with max subtraction, f32 FMAs over a kv_type cache",
};

static const char store_kv_source[] =
#include "grid_dep.cuh.inc"
#include "step_block.cuh.inc"
#include "kv_type.cuh.inc"
#include "store_kv.cu.inc"
    ;

static const kiln_kparam_decl store_kv_params[] = {
    {"width", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values per cache position: the cache's ne0"},
    {"kv_type", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED,
     "the K/V caches' element type: F32|F16|BF16|Q8_0 (kv_type.cuh; Q8_0 needs head_dim % 32 == 0)"},
    BLOCK_SIZE_PARAM,
    {"src", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "the step's K or V, f32 [width, n_tokens]"},
    {"cache", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "the cache, kv_type [width, n_ctx]"},
    STEP_PARAM,
};

static const kiln_ktemplate store_kv = {
    .name = KILN_CUDA_T_STORE_KV,
    .version = 2,
    .entry = "kiln_store_kv",
    .source = store_kv_source,
    .params = store_kv_params,
    .n_params = sizeof store_kv_params / sizeof store_kv_params[0],
    .help = "STORE_KV: the step's columns into the kv_type cache at the step block's positions",
};

static const char swiglu_source[] =
#include "grid_dep.cuh.inc"
#include "swiglu.cu.inc"
    ;

static const kiln_kparam_decl swiglu_params[] = {
    BLOCK_SIZE_PARAM,
    {"a", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "gate, f32"},
    {"b", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "up, f32"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "silu(a) * b, f32"},
    {"n", KILN_KPARAM_I64, KILN_KPARAM_RUNTIME, "values"},
};

static const kiln_ktemplate swiglu = {
    .name = KILN_CUDA_T_SWIGLU,
    .version = 1,
    .entry = "kiln_swiglu",
    .source = swiglu_source,
    .params = swiglu_params,
    .n_params = sizeof swiglu_params / sizeof swiglu_params[0],
    .help = "SWIGLU: silu(a) * b elementwise",
};

static const char add_source[] =
#include "grid_dep.cuh.inc"
#include "add.cu.inc"
    ;

static const kiln_kparam_decl add_params[] = {
    BLOCK_SIZE_PARAM,
    {"a", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32"},
    {"b", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "a + b, f32"},
    {"n", KILN_KPARAM_I64, KILN_KPARAM_RUNTIME, "values"},
};

static const kiln_ktemplate add = {
    .name = KILN_CUDA_T_ADD,
    .version = 1,
    .entry = "kiln_add",
    .source = add_source,
    .params = add_params,
    .n_params = sizeof add_params / sizeof add_params[0],
    .help = "ADD: a + b elementwise (residuals)",
};

/* ---- quantized activations and the fused kernels ------------------------ */

#define QUANT_PARAM                                                        \
  {"quant", KILN_KPARAM_STR, KILN_KPARAM_BAKED,                            \
   "activations quantized per 32 values: q16 | q8 (none: not quantized)"}

static const char quantize_source[] =
#include "grid_dep.cuh.inc"
#include "quant_mode.cuh.inc"
#include "act_quant.cuh.inc"
#include "quantize.cu.inc"
    ;

static const kiln_kparam_decl quantize_params[] = {
    QUANT_PARAM,
    {"k", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values per column (a multiple of 32)"},
    BLOCK_SIZE_PARAM,
    {"x", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [k, n_cols]"},
    {"xq", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "quantized columns (act_quant.cuh)"},
    {"n_cols", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "columns (tokens) in this launch"},
};

static const kiln_ktemplate quantize = {
    .name = KILN_CUDA_T_QUANTIZE,
    .version = 1,
    .entry = "kiln_quantize",
    .source = quantize_source,
    .params = quantize_params,
    .n_params = sizeof quantize_params / sizeof quantize_params[0],
    .help = "a matvec_q input: f32 columns to integers per 32 values with f32 scales and sums",
};

static const char matvec_q_source[] =
#include "grid_dep.cuh.inc"
#include "quant_mode.cuh.inc"
#include "act_quant.cuh.inc"
#include "matvec_q_prims.cuh.inc"
#include "matvec_q_types.cuh.inc"
#include "matvec_q_stage.cuh.inc"
#include "matvec_q.cu.inc"
    ;

#define MVQ_MATRIX_PARAMS(i)                                                       \
  {"type" #i, KILN_KPARAM_STR, KILN_KPARAM_BAKED,                                  \
   "matrix " #i "'s weight type: Q4_0|Q5_0|Q8_0|Q4_K|Q5_K|Q6_K (none: absent)"},   \
      {"rows" #i, KILN_KPARAM_I64, KILN_KPARAM_BAKED,                              \
       "matrix " #i "'s rows N (its ne1; 0: absent)"},                             \
      {"bias" #i, KILN_KPARAM_STR, KILN_KPARAM_BAKED,                              \
       "matrix " #i "'s bias: none, or its type F32|F16|BF16"},                    \
      {"load" #i, KILN_KPARAM_STR, KILN_KPARAM_BAKED,                              \
       "how matrix " #i "'s weight is read: direct (each lane its blocks' bytes, "  \
       "from the weight, or with stages > 0 from the block's copy of them) or "    \
       "staged (16-byte loads through shared memory)"}

static const kiln_kparam_decl matvec_q_params[] = {
    QUANT_PARAM,
    {"k", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "row length K shared by the matrices: their ne0"},
    {"warps", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "warps per block (1..32)"},
    {"k_split", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "warps that share each row's blocks (divides warps; fixes the order of the sum)"},
    {"rows_per_group", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "consecutive rows per group of k_split warps (1..8), sharing each load of x"},
    {"groups_per_block", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "sets of the block's groups of rows it takes one after another (1..64)"},
    {"stages", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "0: a block per set of rows; 2..16: persistent blocks whose rows arrive by bulk copies "
     "into that many shared-memory stages (matvec_load = bulk; compute capability 9.0 and "
     "up; needs every load direct and groups_per_block = 1)"},
    MVQ_MATRIX_PARAMS(0),
    MVQ_MATRIX_PARAMS(1),
    MVQ_MATRIX_PARAMS(2),
    {"w0", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "matrix 0's weight (no padding)"},
    {"w1", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "matrix 1's weight, or unused"},
    {"w2", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "matrix 2's weight, or unused"},
    {"b0", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "matrix 0's bias, or unused"},
    {"b1", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "matrix 1's bias, or unused"},
    {"b2", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "matrix 2's bias, or unused"},
    {"y0", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "matrix 0's output, f32 [rows0, n_cols]"},
    {"y1", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "matrix 1's output, or unused"},
    {"y2", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "matrix 2's output, or unused"},
    {"xq", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "the quantized input columns"},
    {"n_cols", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "columns (tokens) in this launch"},
};

static const kiln_ktemplate matvec_q = {
    .name = KILN_CUDA_T_MATVEC_Q,
    .version = 3,
    .entry = "kiln_matvec_q",
    .source = matvec_q_source,
    .params = matvec_q_params,
    .n_params = sizeof matvec_q_params / sizeof matvec_q_params[0],
    .help = "MUL_MAT for decode, activations q16/q8: dp4a dot products of block weights with "
            "quantized x, up to three matrices sharing x in one launch, biases fused",
};

static const char add_rmsnorm_source[] =
#include "grid_dep.cuh.inc"
#include "quant_mode.cuh.inc"
#include "act_quant.cuh.inc"
#include "rmsnorm_common.cuh.inc"
#include "add_rmsnorm.cu.inc"
    ;

static const kiln_kparam_decl add_rmsnorm_params[] = {
    {"eps", KILN_KPARAM_F32, KILN_KPARAM_BAKED,
     "the RMS_NORM node's epsilon, added to mean(v^2) (bit-exact from the GGUF)"},
    {"hidden", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "row length: the norm weight's ne0"},
    {"w_type", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED, "the norm weight's type: F32|F16|BF16"},
    BLOCK_SIZE_PARAM,
    {"add", KILN_KPARAM_I64, KILN_KPARAM_BAKED,
     "1: the input is a + b (the residual ADD folded in, its sum written); 0: a"},
    QUANT_PARAM,
    {"a", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 rows"},
    {"b", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 rows added to a (add = 1)"},
    {"sum", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "a + b, the ADD's output (add = 1); may be a or b"},
    {"w", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "norm weight, hidden values of w_type"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "the normed rows, f32"},
    {"xq", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "y quantized (quant q16/q8)"},
    {"n_rows", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "rows in this launch"},
};

static const kiln_ktemplate add_rmsnorm = {
    .name = KILN_CUDA_T_ADD_RMSNORM,
    .version = 1,
    .entry = "kiln_add_rmsnorm",
    .source = add_rmsnorm_source,
    .params = add_rmsnorm_params,
    .n_params = sizeof add_rmsnorm_params / sizeof add_rmsnorm_params[0],
    .help = "residual ADD + RMSNorm (+ quantizing the normed row for matvec_q) in one launch",
};

static const char swiglu_q_source[] =
#include "grid_dep.cuh.inc"
#include "quant_mode.cuh.inc"
#include "act_quant.cuh.inc"
#include "swiglu_q.cu.inc"
    ;

static const kiln_kparam_decl swiglu_q_params[] = {
    QUANT_PARAM,
    {"k", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values per column (a multiple of 32)"},
    BLOCK_SIZE_PARAM,
    {"a", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "gate, f32"},
    {"b", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "up, f32"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "silu(a) * b, f32"},
    {"xq", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "y quantized for the down projection"},
    {"n_cols", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "columns (tokens) in this launch"},
};

static const kiln_ktemplate swiglu_q = {
    .name = KILN_CUDA_T_SWIGLU_Q,
    .version = 1,
    .entry = "kiln_swiglu_q",
    .source = swiglu_q_source,
    .params = swiglu_q_params,
    .n_params = sizeof swiglu_q_params / sizeof swiglu_q_params[0],
    .help = "SWIGLU and the quantization of its output for matvec_q in one launch",
};

static const char rope_store_source[] =
#include "grid_dep.cuh.inc"
#include "step_block.cuh.inc"
#include "rope_common.cuh.inc"
#include "kv_type.cuh.inc"
#include "rope_store.cu.inc"
    ;

static const kiln_kparam_decl rope_store_params[] = {
    {"mode", KILN_KPARAM_STR, KILN_KPARAM_BAKED, "NORM (pairs 2i, 2i+1) or NEOX (pairs i, i+n_rot/2)"},
    {"n_rot", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "rotated dimensions per head (even)"},
    {"head_dim", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "values per head"},
    {"theta", KILN_KPARAM_F32, KILN_KPARAM_BAKED, "RoPE base (rope.freq_base), bit-exact"},
    {"n_head", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "query heads (the Q RoPE's n_head)"},
    {"n_head_kv", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "key/value heads (the K RoPE's n_head)"},
    {"kv_type", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED,
     "the K/V caches' element type: F32|F16|BF16 (a Q8_0 cache is not fused)"},
    BLOCK_SIZE_PARAM,
    {"q", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [head_dim * n_head, n_tokens]"},
    {"qo", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "rotated q; may be q"},
    {"k", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [head_dim * n_head_kv, n_tokens]"},
    {"ko", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "rotated k; may be k"},
    {"k_cache", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "kv_type K cache [head_dim * n_head_kv, n_ctx]"},
    {"v", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "f32 [head_dim * n_head_kv, n_tokens]"},
    {"v_cache", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "kv_type V cache, shaped like the K cache"},
    STEP_PARAM,
};

static const kiln_ktemplate rope_store = {
    .name = KILN_CUDA_T_ROPE_STORE,
    .version = 2,
    .entry = "kiln_rope_store",
    .source = rope_store_source,
    .params = rope_store_params,
    .n_params = sizeof rope_store_params / sizeof rope_store_params[0],
    .help = "RoPE of Q and K and their K/V cache stores at the step block's position, one launch",
};

const kiln_ktemplate *const kiln_cuda_templates[] = {
    &rmsnorm_row_vec, &rmsnorm_rows, &rmsnorm_row_cc12, &matvec,   &dequant_rows,
    &gemm_input,      &bias_add,        &get_rows,     &rope,             &attention, &swiglu,
    &add,             &store_kv,     &quantize,         &matvec_q,  &add_rmsnorm,
    &swiglu_q,        &rope_store,   &attention_split,  &attention_merge, &flash_attention,
    &attention_mma,   &mmq,             &fp8_rows,     &fp8_input,
    /* qwen35 */
    &kiln_cuda_t_slice, &kiln_cuda_t_sigmoid_mul, &kiln_cuda_t_ssm_conv, &kiln_cuda_t_gdn_gate,
    &kiln_cuda_t_gdn_recurrent, &kiln_cuda_t_gdn_chunked, &kiln_cuda_t_rope_imrope,
};
const unsigned kiln_cuda_n_templates = sizeof kiln_cuda_templates / sizeof kiln_cuda_templates[0];

kiln_status kiln_cuda_templates_register(const kiln_host_api *host, kiln_kcache *kc) {
  for (unsigned i = 0; i < kiln_cuda_n_templates; i++)
    KILN_RETURN_IF_ERROR(host->kcache_register_template(kc, kiln_cuda_templates[i]));
  return NULL;
}
