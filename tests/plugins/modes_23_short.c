/* Claims ABI 2.3 with 2.2's table: refused, naming both sizes. */
#include "modes_common.h"
MODES_OPS("modes-23-short", 3, MODES_SIZE_2_2);
