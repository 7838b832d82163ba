/* The [kernel_cache] configuration section (kiln/config_schema.h). */
#include "config.h"

#include "kiln/kcache.h"

const kiln_config_key kiln_kcache_config_keys[] = {
    {"dir", KILN_CONFIG_PATH, NULL, 0, 0, NULL,
     "folder of compiled kernels (default: $XDG_CACHE_HOME/kiln, else ~/.cache/kiln)"},
    {"enabled", KILN_CONFIG_BOOL, "true", 0, 0, NULL,
     "keep compiled kernels on disk across runs (false: memory only)"},
};

const unsigned kiln_kcache_n_config_keys =
    sizeof kiln_kcache_config_keys / sizeof kiln_kcache_config_keys[0];
