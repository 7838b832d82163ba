/* Its entry says "hello" but its file is kiln-broken-name.so: refused. */
#include "broken_common.h"
BROKEN_OPS("hello", KILN_PLUGIN_ABI_MAJOR, KILN_PLUGIN_ABI_MINOR, sizeof(kiln_backend_ops));
