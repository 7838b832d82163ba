/* Internal to libkiln: runtime services the session needs. */
#ifndef KILN_RUNTIME_INTERNAL_H
#define KILN_RUNTIME_INTERNAL_H

#include "kiln/kiln.h"

/* Loads plugin `name` and declares its config section (defaults) in the
 * runtime's configuration if the configuration did not name it. */
kiln_status kiln__runtime_declare_backend(kiln_runtime *rt, const char *name);

#endif
