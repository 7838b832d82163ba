/* A typed KV cache for the host-emulated attention kernels
 * (test_attention_host.cc, test_flash_host.cc): rows 0 .. n_rows - 1 of the
 * f32 cache `rows` ([w, n_ctx], w = head_dim * n_head_kv values a row)
 * stored in `type` as store_kv stores them (kiln/kv_cache.h, so byte for
 * byte the kernels' own conversion), the rows past them all-ones bytes
 * (NaN in every KV type, so a read of one shows); and `rows` overwritten
 * with the stored values read back as f32, exactly what the kernels read,
 * for the reference. Returns the typed bytes (free() them), or NULL for an
 * F32 cache, which the kernels read as it is. Include after
 * "kiln/kv_cache.h" and gpu_common.h (kg_alloc). */
#ifndef KILN_TESTS_KV_HOST_CACHE_H
#define KILN_TESTS_KV_HOST_CACHE_H

static inline unsigned char *kv_host_typed_cache(int type, float *rows, int n_rows, int n_ctx, int w) {
  if (type == KILN_TYPE_F32) return NULL;
  const int64_t rb = kiln_type_row_bytes(type, w);
  unsigned char *c = (unsigned char *)kg_alloc((size_t)(rb * n_ctx));
  memset(c, 0xff, (size_t)(rb * n_ctx));
  for (int j = 0; j < n_rows; j++) {
    kiln_kv_store_row(type, rows + (size_t)j * w, c + j * rb, w);
    kiln_kv_load_row(type, c + j * rb, rows + (size_t)j * w, w);
  }
  return c;
}

#endif
