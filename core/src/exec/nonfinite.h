/* Internal to libkiln: the non-finite-logits error of kiln_session_eval()
 * (nonfinite.c). */
#ifndef KILN_NONFINITE_H
#define KILN_NONFINITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/plan.h"

/* Whether v[0..n) holds a NaN or an infinity; the first one's index goes
 * to *out_i. */
bool kiln__first_nonfinite(const float *v, size_t n, size_t *out_i);

/* The error for a step whose logits are not finite: step `step` (counted
 * from the session's start) fed tokens[0..n) at pos0, and logit `logit` of
 * position logit_pos came out as `value`. Runs the step again to name the
 * first node whose output is not finite (the observer set on p, if any,
 * is put back). KILN_STATUS_CHECK_FAILED. */
kiln_status kiln__nonfinite_error(kiln_plan *p, uint64_t step, const int32_t *tokens, int32_t n,
                                  int32_t pos0, int32_t logit_pos, int32_t logit, float value);

#endif
