/* ABI 2.3: its describe_modes line reaches the host. */
#include "modes_common.h"
MODES_OPS("modes-23", 3, sizeof(kiln_backend_ops));
