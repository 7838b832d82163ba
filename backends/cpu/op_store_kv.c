/* STORE_KV: the step's K or V rows src0 [W, T] go to columns pos0 ..
 * pos0+T-1 of the cache dst [W, n_ctx]. Those columns are contiguous, so
 * it is one copy; cpu_node_run() has checked they are inside the cache. */
#include "config.h"

#include <string.h>

#include "cpu_ops.h"

kiln_status cpu_op_store_kv(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  const int64_t W = node->dst->ne[0];
  float *cache = io->dst;
  memmove(cache + (int64_t)io->pos0 * W, io->src[0],
          (size_t)((int64_t)io->n_tokens * W) * sizeof(float));
  return NULL;
}
