/* Claims a table shorter than ABI 1.0's (as if built from an older, shorter
 * kiln/plugin.h): refused, naming both sizes. */
#include "broken_common.h"
BROKEN_OPS("broken-short", KILN_PLUGIN_ABI_MAJOR, KILN_PLUGIN_ABI_MINOR,
           offsetof(kiln_backend_ops, run));
