/* Exports an 8-byte object named kiln_backend_entry: too small even for
 * the ABI version fields, so the loader must not read struct_size. */
#include <stdint.h>
extern const uint32_t kiln_backend_entry[2];
const uint32_t kiln_backend_entry[2] = {1, 0};
