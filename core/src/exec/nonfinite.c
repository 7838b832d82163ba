/* Non-finite logits are an error, never a sampled token: the step is run
 * again with an observer that stops at the first node whose output holds a
 * NaN or an infinity, and the error names the step and that node. Only on
 * the error path: the observer makes a step one backend call per node. */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nonfinite.h"
#include "plan_internal.h"

bool kiln__first_nonfinite(const float *v, size_t n, size_t *out_i) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(v[i])) {
      *out_i = i;
      return true;
    }
  return false;
}

static const char *value_text(float v) { return isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf"; }

typedef struct finder {
  const kiln_plan *plan;
  char where[512]; /* the first node found, or "" */
} finder;

/* Stops the step at the first node with a non-finite output. */
static kiln_status find_node(const kiln_node *node, const float *data, int32_t n_tokens,
                             int32_t pos0, void *user) {
  finder *f = user;
  size_t ne0 = (size_t)node->dst->ne[0], at;
  if (!kiln__first_nonfinite(data, ne0 * (size_t)n_tokens, &at)) return NULL;
  snprintf(f->where, sizeof f->where,
           "node %.*s (%s, on %s), token position %" PRId64 ", element %zu = %s", KILN_NAME_MAX,
           node->name, kiln_op_name(node->op), kiln_plan_node_backend(f->plan, (uint32_t)node->id),
           (int64_t)pos0 + (int64_t)(at / ne0), at % ne0, value_text(data[at]));
  return kiln_status_new(KILN_STATUS_CHECK_FAILED, "found");
}

kiln_status kiln__nonfinite_error(kiln_plan *p, uint64_t step, const int32_t *tokens, int32_t n,
                                  int32_t pos0, int32_t logit_pos, int32_t logit, float value) {
  kiln_node_observer saved;
  void *saved_user;
  kiln__plan_get_observer(p, &saved, &saved_user);
  finder f = {p, ""};
  kiln_plan_set_observer(p, find_node, &f);
  /* The same tokens at the same positions: the KV cache columns the step
   * wrote are written again with the same values. */
  kiln_status st = kiln_plan_step(p, tokens, n, pos0);
  kiln_plan_set_observer(p, saved, saved_user);
  const char *again = st && !f.where[0] ? kiln_status_message(st) : NULL;
  kiln_status err = kiln_status_new(
      KILN_STATUS_CHECK_FAILED,
      "non-finite logits at step %" PRIu64 " (positions %d..%d): logit %d of position %d is %s; "
      "first non-finite node output: %s",
      step, pos0, pos0 + n - 1, logit, logit_pos, value_text(value),
      f.where[0] ? f.where
      : again    ? "unknown (running the step again failed)"
                 : "none when the step was run again (a nondeterministic backend?)");
  if (again) err = kiln_status_annotate(err, "%s", again);
  kiln_status_free(st);
  return err;
}
