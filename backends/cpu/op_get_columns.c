/* GET_COLUMNS: dst[:, t] = src0[:, ids[t]], the columns of the last hidden
 * state whose logits are read (kiln/graph.h). A copy: no arithmetic, so
 * both precisions give the same bits. */
#include "config.h"

#include <string.h>

#include "cpu_ops.h"

kiln_status cpu_op_get_columns(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  const kiln_tensor *x = node->src[0];
  const int64_t W = x->ne[0];
  const int32_t *ids = io->src[1];
  /* Every id first, so a bad one leaves dst untouched. */
  for (int32_t t = 0; t < io->n_tokens; t++) {
    if (ids[t] < 0 || ids[t] >= x->ne[1])
      return cpu_node_error(ctx, KILN_STATUS_OUT_OF_RANGE, node,
                            "column id %d (entry %d) is outside [0, %lld), the columns of '%.*s'",
                            (int)ids[t], (int)t, (long long)x->ne[1], KILN_NAME_MAX, x->name);
  }
  const float *src = io->src[0];
  float *dst = io->dst;
  for (int32_t t = 0; t < io->n_tokens; t++)
    memcpy(dst + (int64_t)t * W, src + (int64_t)ids[t] * W, (size_t)W * sizeof(float));
  return NULL;
}
