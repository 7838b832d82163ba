/* The kernel templates of the CUDA backends (the .tmpl files in kernels/,
 * embedded at build time), and their registration with the kernel-cache service. */
#ifndef KILN_CUDA_KERNEL_TEMPLATES_H
#define KILN_CUDA_KERNEL_TEMPLATES_H

#include "kiln/plugin.h"

/* Template names, for kdesc_new. */
#define KILN_CUDA_T_RMSNORM_ROW_VEC "rmsnorm_row_vec"
#define KILN_CUDA_T_RMSNORM_ROWS "rmsnorm_rows"
#define KILN_CUDA_T_RMSNORM_ROW_CC12 "rmsnorm_row_cc12"
#define KILN_CUDA_T_MATVEC "matvec"
#define KILN_CUDA_T_DEQUANT_ROWS "dequant_rows"
#define KILN_CUDA_T_GEMM_INPUT "gemm_input"
#define KILN_CUDA_T_MMQ "mmq"
#define KILN_CUDA_T_FP8_ROWS "fp8_rows"
#define KILN_CUDA_T_FP8_INPUT "fp8_input"
#define KILN_CUDA_T_BIAS_ADD "bias_add"
#define KILN_CUDA_T_GET_ROWS "get_rows"
#define KILN_CUDA_T_ROPE "rope"
#define KILN_CUDA_T_ATTENTION "attention"
#define KILN_CUDA_T_ATTENTION_SPLIT "attention_split"
#define KILN_CUDA_T_ATTENTION_MMA "attention_mma"
#define KILN_CUDA_T_ATTENTION_MERGE "attention_merge"
#define KILN_CUDA_T_FLASH_ATTENTION "flash_attention"
#define KILN_CUDA_T_SWIGLU "swiglu"
#define KILN_CUDA_T_ADD "add"
#define KILN_CUDA_T_STORE_KV "store_kv"
#define KILN_CUDA_T_QUANTIZE "quantize"
#define KILN_CUDA_T_MATVEC_Q "matvec_q"
#define KILN_CUDA_T_ADD_RMSNORM "add_rmsnorm"
#define KILN_CUDA_T_SWIGLU_Q "swiglu_q"
#define KILN_CUDA_T_ROPE_STORE "rope_store"
/* qwen35 (qwen35_templates.c) */
#define KILN_CUDA_T_SLICE "slice"
#define KILN_CUDA_T_SIGMOID_MUL "sigmoid_mul"
#define KILN_CUDA_T_SSM_CONV "ssm_conv"
#define KILN_CUDA_T_GDN_GATE "gdn_gate"
#define KILN_CUDA_T_GDN_RECURRENT "gdn_recurrent"
#define KILN_CUDA_T_GDN_CHUNKED "gdn_chunked"
#define KILN_CUDA_T_ROPE_IMROPE "rope_imrope"

/* qwen35's templates (qwen35_templates.c), part of the list below. */
extern const kiln_ktemplate kiln_cuda_t_slice, kiln_cuda_t_sigmoid_mul, kiln_cuda_t_ssm_conv,
    kiln_cuda_t_gdn_gate, kiln_cuda_t_gdn_recurrent, kiln_cuda_t_gdn_chunked, kiln_cuda_t_rope_imrope;

/* Every template cuda-common defines. */
extern const kiln_ktemplate *const kiln_cuda_templates[];
extern const unsigned kiln_cuda_n_templates;

/* Registers every template with kc through the host table (re-registering
 * is a no-op, so each CUDA backend may call it from open()). Errors: the
 * first registration's status. */
kiln_status kiln_cuda_templates_register(const kiln_host_api *host, kiln_kcache *kc);

#endif
