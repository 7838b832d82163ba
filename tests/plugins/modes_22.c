/* ABI 2.2 with 2.2's table: loads, and its describe_modes, which a 2.2
 * table does not have, is never called. */
#include "modes_common.h"
MODES_OPS("modes-22", 2, MODES_SIZE_2_2);
