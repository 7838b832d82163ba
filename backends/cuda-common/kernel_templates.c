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

const kiln_ktemplate *const kiln_cuda_templates[] = {
    &rmsnorm_row_vec,
    &rmsnorm_rows,
    &rmsnorm_row_cc12,
};
const unsigned kiln_cuda_n_templates = sizeof kiln_cuda_templates / sizeof kiln_cuda_templates[0];

kiln_status kiln_cuda_templates_register(const kiln_host_api *host, kiln_kcache *kc) {
  for (unsigned i = 0; i < kiln_cuda_n_templates; i++)
    KILN_RETURN_IF_ERROR(host->kcache_register_template(kc, kiln_cuda_templates[i]));
  return NULL;
}
