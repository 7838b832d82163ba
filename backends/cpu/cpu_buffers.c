/* Host-memory buffers of the cpu backend. A buffer remembers its size so
 * that upload and download can refuse a range outside it instead of
 * writing past the end. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cpu_ops.h"

kiln_status cpu_buffer_alloc(const cpu_ctx *ctx, const kiln_tensor *t, cpu_buffer **out_buf) {
  *out_buf = NULL;
  cpu_buffer *b = calloc(1, sizeof *b);
  /* aligned_alloc wants a size that is a multiple of the alignment; 64
   * bytes keeps every row start a cache line apart from malloc's headers. */
  size_t size = (size_t)((t->nbytes + 63u) & ~(uint64_t)63u);
  if (size == 0) size = 64;
  if (b && (uint64_t)size >= t->nbytes) b->data = aligned_alloc(64, size);
  if (!b || !b->data) {
    free(b);
    return ctx->status_new(KILN_STATUS_NO_MEMORY, "cpu: cannot allocate %llu bytes for '%.*s'",
                           (unsigned long long)t->nbytes, KILN_NAME_MAX, t->name);
  }
  b->nbytes = t->nbytes;
  b->owned = true;
  *out_buf = b;
  return NULL;
}

kiln_status cpu_buffer_map_weight(const cpu_ctx *ctx, const kiln_tensor *t,
                                  cpu_buffer **out_buf) {
  *out_buf = NULL;
  if (!t->data)
    return ctx->status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "cpu: tensor '%.*s' has no host data to map", KILN_NAME_MAX, t->name);
  cpu_buffer *b = calloc(1, sizeof *b);
  if (!b)
    return ctx->status_new(KILN_STATUS_NO_MEMORY, "cpu: cannot allocate a buffer for '%.*s'",
                           KILN_NAME_MAX, t->name);
  /* The mapping is read-only to us (PROT_READ in the GGUF reader); the
   * cast only lets one struct hold both kinds, and `owned` keeps uploads
   * and frees away from it. */
  b->data = (void *)(uintptr_t)t->data;
  b->nbytes = t->nbytes;
  b->owned = false;
  *out_buf = b;
  return NULL;
}

void cpu_buffer_free(cpu_buffer *buf) {
  if (!buf) return;
  if (buf->owned) free(buf->data);
  free(buf);
}

static kiln_status check_range(const cpu_ctx *ctx, const char *what, const cpu_buffer *buf,
                               uint64_t offset, uint64_t nbytes) {
  if (offset > buf->nbytes || nbytes > buf->nbytes - offset)
    return ctx->status_new(KILN_STATUS_OUT_OF_RANGE,
                           "cpu: %s of %llu bytes at offset %llu leaves a buffer of %llu bytes",
                           what, (unsigned long long)nbytes, (unsigned long long)offset,
                           (unsigned long long)buf->nbytes);
  return NULL;
}

kiln_status cpu_buffer_upload(const cpu_ctx *ctx, cpu_buffer *buf, uint64_t offset,
                              const void *src, uint64_t nbytes) {
  if (!buf) return ctx->status_new(KILN_STATUS_INVALID_ARGUMENT, "cpu: upload to a NULL buffer");
  if (!buf->owned)
    return ctx->status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "cpu: upload into a mapped weight (read-only file mapping)");
  KILN_RETURN_IF_ERROR(check_range(ctx, "upload", buf, offset, nbytes));
  if (nbytes) memcpy((char *)buf->data + offset, src, (size_t)nbytes);
  return NULL;
}

kiln_status cpu_buffer_download(const cpu_ctx *ctx, const cpu_buffer *buf, uint64_t offset,
                                void *dst, uint64_t nbytes) {
  if (!buf)
    return ctx->status_new(KILN_STATUS_INVALID_ARGUMENT, "cpu: download from a NULL buffer");
  KILN_RETURN_IF_ERROR(check_range(ctx, "download", buf, offset, nbytes));
  if (nbytes) memcpy(dst, (const char *)buf->data + offset, (size_t)nbytes);
  return NULL;
}
