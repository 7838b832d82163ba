/* qwen2 (llama.cpp's LLM_ARCH_QWEN2, llm_build_qwen2; transformers'
 * Qwen2Attention): RoPE NEOX, biases on the Q, K and V projections; θ must
 * be in the file (Qwen trains with 1e6). */
#include "config.h"

#include "model_internal.h"

static void configure(kiln_hparams *hp) {
  hp->rope_mode = KILN_ROPE_NEOX;
  hp->qkv_bias = true;
}

const kiln__arch kiln__arch_qwen2 = {
    .name = "qwen2",
    .id = KILN_ARCH_QWEN2,
    .theta_may_default = false,
    .configure = configure,
    .check_weights = kiln__decoder_check_weights,
    .is_bound = kiln__decoder_is_bound,
    .build = kiln__decoder_build,
};
