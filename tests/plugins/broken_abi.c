/* Built for another ABI major: refused before any of its code runs. */
#include "broken_common.h"
BROKEN_OPS("broken-abi", KILN_PLUGIN_ABI_MAJOR + 1, 0, sizeof(kiln_backend_ops));
