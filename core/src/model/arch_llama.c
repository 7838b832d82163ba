/* llama (llama.cpp's LLM_ARCH_LLAMA, llm_build_llama): RoPE NORM, no
 * biases; RoPE θ may default to 10000 as Meta's reference code trains it. */
#include "config.h"

#include "model_internal.h"

static void configure(kiln_hparams *hp) { hp->rope_mode = KILN_ROPE_NORM; }

const kiln__arch kiln__arch_llama = {
    .name = "llama",
    .id = KILN_ARCH_LLAMA,
    .theta_may_default = true,
    .configure = configure,
    .check_weights = kiln__decoder_check_weights,
    .is_bound = kiln__decoder_is_bound,
    .build = kiln__decoder_build,
};
