/* STORE_KV: the step's K or V rows src0 [W, T] (f32) go to columns pos0 ..
 * pos0+T-1 of the cache dst [W, n_ctx], converted to the cache's type
 * (kiln/kv_cache.h: F32 copied, F16/BF16 rounded to nearest even, Q8_0 as
 * llama.cpp's quantize_row_q8_0_ref). The columns are contiguous rows of
 * kiln_type_row_bytes(type, W) bytes; cpu_node_run() has checked they are
 * inside the cache. */
#include "config.h"

#include <string.h>

#include "kiln/kv_cache.h"

#include "cpu_ops.h"

kiln_status cpu_op_store_kv(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  (void)ctx;
  const kiln_tensor *c = node->dst;
  const int64_t W = c->ne[0], rb = kiln_type_row_bytes(c->type, W);
  const float *src = io->src[0];
  uint8_t *cache = (uint8_t *)io->dst + (int64_t)io->pos0 * rb;
  if (c->type == KILN_TYPE_F32) {
    memmove(cache, src, (size_t)((int64_t)io->n_tokens * W) * sizeof(float));
    return NULL;
  }
  for (int64_t t = 0; t < io->n_tokens; t++) kiln_kv_store_row(c->type, src + t * W, cache + t * rb, W);
  return NULL;
}
