/* Internal to libkiln: what the executor's own diagnostics need of a plan
 * beyond kiln/plan.h. */
#ifndef KILN_PLAN_INTERNAL_H
#define KILN_PLAN_INTERNAL_H

#include "kiln/plan.h"

/* The observer set with kiln_plan_set_observer() (NULLs when none), so a
 * diagnostic can put it back after running a step with its own. */
void kiln__plan_get_observer(const kiln_plan *p, kiln_node_observer *out_fn, void **out_user);

#endif
