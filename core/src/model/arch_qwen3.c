/* qwen3 (llama.cpp's LLM_ARCH_QWEN3, llm_build_qwen3; transformers'
 * Qwen3Attention): RoPE NEOX, no biases, a per-head RMSNorm on q and k over
 * head_dim before RoPE; θ must be in the file. */
#include "config.h"

#include "model_internal.h"

static void configure(kiln_hparams *hp) {
  hp->rope_mode = KILN_ROPE_NEOX;
  hp->qk_norm = true;
}

const kiln__arch kiln__arch_qwen3 = {
    .name = "qwen3",
    .id = KILN_ARCH_QWEN3,
    .theta_may_default = false,
    .configure = configure,
    .check_weights = kiln__decoder_check_weights,
    .is_bound = kiln__decoder_is_bound,
    .build = kiln__decoder_build,
};
