/* A table whose struct_size claims more bytes than its object holds: the
 * loader would read past the end of the symbol. Refused, naming both. */
#include "broken_common.h"
BROKEN_OPS("broken-oversize", KILN_PLUGIN_ABI_MAJOR, KILN_PLUGIN_ABI_MINOR,
           sizeof(kiln_backend_ops) + 64);
