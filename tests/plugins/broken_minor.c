/* Built against a newer minor of this major than the host has: refused. */
#include "broken_common.h"
BROKEN_OPS("broken-minor", KILN_PLUGIN_ABI_MAJOR, KILN_PLUGIN_ABI_MINOR + 1, sizeof(kiln_backend_ops));
