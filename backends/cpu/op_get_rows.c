/* GET_ROWS: the token embedding lookup. dst[:, t] = row ids[t] of the
 * table src0 [H, V], dequantized to f32 (ggml_get_rows). */
#include "config.h"

#include <string.h>

#include "cpu_ops.h"

kiln_status cpu_op_get_rows(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  const kiln_tensor *table = node->src[0];
  const int64_t H = table->ne[0], V = table->ne[1];
  const int64_t row_bytes = kiln_type_row_bytes(table->type, H);
  const int32_t *ids = io->src[1];
  float *dst = io->dst;

  /* Check every id before writing anything, so a bad id leaves dst as it
   * was rather than half filled. */
  for (int32_t t = 0; t < io->n_tokens; t++) {
    if (ids[t] < 0 || ids[t] >= V)
      return cpu_node_error(ctx, KILN_STATUS_OUT_OF_RANGE, node,
                            "token id %d (batch index %d, position %d) is outside [0, %lld), "
                            "the rows of '%.*s'",
                            (int)ids[t], (int)t, (int)(io->pos0 + t), (long long)V,
                            KILN_NAME_MAX, table->name);
  }
  for (int32_t t = 0; t < io->n_tokens; t++) {
    const float *row;
    float *out = dst + (int64_t)t * H;
    /* Dequantizing straight into the output column needs no scratch. */
    kiln_status st = cpu_weight_row(ctx, table->type, io->src[0], row_bytes, ids[t], H, out, &row);
    if (st) return ctx->status_annotate(st, "get_rows node '%.*s'", KILN_NAME_MAX, node->name);
    if (row != out) memcpy(out, row, (size_t)H * sizeof(float));
  }
  return NULL;
}
