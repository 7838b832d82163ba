/* Every section and key of core's configuration, declared once: the INI
 * reader checks against it and `kiln config --help` prints it. Backend
 * sections are declared by the plugins themselves, [kernel_cache] by the
 * kernel-cache service. */
#include "config.h"

#include <stddef.h>

#include "config_internal.h"

#define N(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

static const kiln_config_key general_keys[] = {
    {"log_level", KILN_CONFIG_ENUM, "warn", 0, 0, "error|warn|info|debug",
     "how much kiln logs to stderr (KILN_LOG_LEVEL)"},
    {"plugin_path", KILN_CONFIG_PATH, NULL, 0, 0, NULL,
     "folders searched for kiln-<name>.so, ':'-separated, before the installed plugin folder "
     "(KILN_PLUGIN_PATH)"},
};

static const kiln_config_key model_keys[] = {
    {"path", KILN_CONFIG_PATH, NULL, 0, 0, NULL, "the GGUF model `kiln run` loads without -m (KILN_MODEL)"},
    {"n_ctx", KILN_CONFIG_INT, "-1", -1, 1048576, NULL,
     "KV cache length in tokens; -1 = the model's context_length, at most 4096; 0 = the "
     "model's whole context_length (llama.cpp's -c 0)"},
};

static const kiln_config_key backend_keys[] = {
    {"name", KILN_CONFIG_STRING, "cpu", 0, 0, NULL, "the backend plugin that runs the graph (KILN_BACKEND)"},
    {"fallback", KILN_CONFIG_ENUM, "error", 0, 0, "error|cpu",
     "a node the backend cannot run: fail at plan time (error), or run it on cpu and report it"},
    {"batch", KILN_CONFIG_INT, "64", 1, 4096, NULL,
     "prefill micro-batch: the most prompt tokens one step evaluates"},
};

static const kiln_config_key kv_cache_keys[] = {
    {"type", KILN_CONFIG_ENUM, "f32", 0, 0, "f32|f16|bf16|q8_0",
     "element type of the K and V caches: f32 (4 bytes a value), f16 or bf16 (2, rounded to "
     "nearest even), q8_0 (34 bytes per 32 values, GGUF's Q8_0 blocks along head_dim, which must "
     "be a multiple of 32)"},
};

static const kiln_config_key sampling_keys[] = {
    {"temperature", KILN_CONFIG_FLOAT, "0", 0, 100, NULL, "0 = greedy (argmax); otherwise softmax(logits / T)"},
    {"top_k", KILN_CONFIG_INT, "40", 0, 1000000, NULL, "keep the k most likely tokens (0 = all)"},
    {"top_p", KILN_CONFIG_FLOAT, "0.95", 0, 1, NULL, "keep the smallest set whose probability reaches p"},
    {"seed", KILN_CONFIG_INT, "1", -1, 9007199254740991.0, NULL,
     "seed of the sampler's random stream; -1 = one drawn from /dev/urandom (kiln run prints it)"},
    {"n_predict", KILN_CONFIG_INT, "128", -1, 1048576, NULL,
     "tokens `kiln run` generates; -1 = until end of text or the KV cache is full"},
};

const kiln__config_table kiln__config_core_tables[] = {
    {"general", general_keys, N(general_keys)},
    {"model", model_keys, N(model_keys)},
    {"backend", backend_keys, N(backend_keys)},
    {"kv_cache", kv_cache_keys, N(kv_cache_keys)},
    {"sampling", sampling_keys, N(sampling_keys)},
    {NULL, NULL, 0},
};
