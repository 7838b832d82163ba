/* Device memory of the CUDA backends: one cuMemAlloc per tensor of exactly
 * its bytes (weights keep their GGUF bytes, quantized stays quantized; no
 * padding, so no kernel can lean on any), synchronous copies on
 * the backend's stream (large downloads through a pinned staging buffer),
 * and the optional poison fill (a test's way to prove that no kernel reads
 * memory it did not write). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"

kiln_status kiln_cuda_mem_alloc(kiln_cuda_backend *be, uint64_t bytes, const kiln_node *node,
                                CUdeviceptr *out_ptr) {
  const kiln_host_api *host = be->host;
  *out_ptr = 0;
  CUdeviceptr p = 0;
  KILN_CU_CHECK(host, be->cu, node, MemAlloc(&p, (size_t)bytes));
  if (be->poison >= 0) {
    CUresult r = be->cu->MemsetD8Async(p, (unsigned char)be->poison, (size_t)bytes, be->stream);
    if (r == CUDA_SUCCESS) r = be->cu->StreamSynchronize(be->stream);
    if (r != CUDA_SUCCESS) {
      be->cu->MemFree(p);
      return kiln_cu_error(host, be->cu, r, "cuMemsetD8Async(poison)", node);
    }
  }
  *out_ptr = p;
  return NULL;
}

kiln_status kiln_cuda_mem_reserve(kiln_cuda_backend *be, CUdeviceptr *p, uint64_t *have,
                                  uint64_t bytes, const kiln_node *node, const char *what,
                                  bool *grown) {
  *grown = false;
  if (bytes <= *have) return NULL;
  if (*p) {
    KILN_CU_CHECK(be->host, be->cu, node, StreamSynchronize(be->stream));
    KILN_CU_CHECK(be->host, be->cu, node, MemFree(*p));
    *p = 0;
    *have = 0;
  }
  *grown = true;
  KILN_RETURN_IF_ERROR(be->host->status_annotate(kiln_cuda_mem_alloc(be, bytes, node, p),
                                                 "%s of %llu bytes", what,
                                                 (unsigned long long)bytes));
  *have = bytes;
  return NULL;
}

kiln_status kiln_cuda_buffer_alloc(void *backend, const kiln_tensor *t, void **out_buf) {
  kiln_cuda_backend *be = backend;
  const kiln_host_api *host = be->host;
  *out_buf = NULL;
  KILN_RETURN_IF_ERROR(kiln_cuda_enter(be));
  kiln_cuda_graph_drop_all(be);
  kiln_cuda_buffer *b = calloc(1, sizeof *b);
  if (!b) return host->status_new(KILN_STATUS_NO_MEMORY, "%s: buffer of '%.*s'", be->fl->name,
                                  KILN_NAME_MAX, t->name);
  b->nbytes = t->nbytes;
  /* Exactly the tensor's bytes: no kernel may read past them, and
   * compute-sanitizer's memcheck can only catch one that does when the
   * allocation ends where the tensor ends (cuda_backend.h). */
  b->alloc = t->nbytes ? t->nbytes : 1;
  b->role = t->role;
  if (t->role == KILN_ROLE_INPUT && t->type == KILN_TYPE_I32) {
    b->host_ids = calloc(1, (size_t)b->alloc);
    if (!b->host_ids) {
      free(b);
      return host->status_new(KILN_STATUS_NO_MEMORY, "%s: id shadow of '%.*s'", be->fl->name,
                              KILN_NAME_MAX, t->name);
    }
  }
  kiln_status st = kiln_cuda_mem_alloc(be, b->alloc, NULL, &b->ptr);
  if (st) {
    free(b->host_ids);
    free(b);
    return host->status_annotate(st, "%s: %llu bytes for '%.*s'", be->fl->name,
                                 (unsigned long long)t->nbytes, KILN_NAME_MAX, t->name);
  }
  *out_buf = b;
  return NULL;
}

void kiln_cuda_buffer_free(void *backend, void *buf) {
  kiln_cuda_backend *be = backend;
  kiln_cuda_buffer *b = buf;
  if (!b) return;
  const bool ctx = be->cu->CtxSetCurrent(be->ctx) == CUDA_SUCCESS;
  if (ctx) kiln_cuda_graph_drop_all(be); /* no graph may use the memory freed here */
  if (ctx && b->ptr) be->cu->MemFree(b->ptr);
  free(b->host_ids);
  free(b);
}

static kiln_status check_range(const kiln_cuda_backend *be, const char *what,
                               const kiln_cuda_buffer *b, uint64_t offset, uint64_t nbytes) {
  if (!b)
    return be->host->status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: %s with a NULL buffer",
                                be->fl->name, what);
  if (offset > b->nbytes || nbytes > b->nbytes - offset)
    return be->host->status_new(KILN_STATUS_OUT_OF_RANGE,
                                "%s: %s of %llu bytes at offset %llu leaves a buffer of %llu bytes",
                                be->fl->name, what, (unsigned long long)nbytes,
                                (unsigned long long)offset, (unsigned long long)b->nbytes);
  return NULL;
}

/* Uploads of at most this many bytes go through the pinned upload staging
 * buffer and return at once. */
#define UP_STAGING_MAX ((uint64_t)64 << 10)

/* A small upload without waiting for the device: src is copied into pinned
 * memory (so the caller may reuse it when this returns, as the ABI
 * demands), and the device copy is queued on the stream, after the work
 * already there (which may read the buffer) and before any launched
 * later. The staging buffer is reused only once its last copy has run.
 * Leaves *out_done false when pinned memory cannot be had (the caller then
 * copies synchronously). */
static kiln_status upload_staged(kiln_cuda_backend *be, kiln_cuda_buffer *b, uint64_t offset,
                                 const void *src, uint64_t nbytes, bool *out_done) {
  *out_done = false;
  if (!be->up_staging) {
    if (be->cu->MemAllocHost(&be->up_staging, (size_t)UP_STAGING_MAX) != CUDA_SUCCESS) {
      be->up_staging = NULL;
      return NULL;
    }
    KILN_CU_CHECK(be->host, be->cu, NULL, EventCreate(&be->up_ev, CU_EVENT_DISABLE_TIMING));
  }
  if (be->up_pending) KILN_CU_CHECK(be->host, be->cu, NULL, EventSynchronize(be->up_ev));
  memcpy(be->up_staging, src, (size_t)nbytes);
  KILN_CU_CHECK(be->host, be->cu, NULL,
                MemcpyHtoDAsync(b->ptr + offset, be->up_staging, (size_t)nbytes, be->stream));
  KILN_CU_CHECK(be->host, be->cu, NULL, EventRecord(be->up_ev, be->stream));
  be->up_pending = true;
  *out_done = true;
  return NULL;
}

kiln_status kiln_cuda_buffer_upload(void *backend, void *buf, uint64_t offset, const void *src,
                                    uint64_t nbytes) {
  kiln_cuda_backend *be = backend;
  kiln_cuda_buffer *b = buf;
  KILN_RETURN_IF_ERROR(check_range(be, "upload", b, offset, nbytes));
  if (!nbytes) return NULL;
  KILN_RETURN_IF_ERROR(kiln_cuda_enter(be));
  const double t0 = be->prof.on ? kiln_cuda_now_ms() : 0.0;
  if (nbytes <= UP_STAGING_MAX) {
    bool done = false;
    KILN_RETURN_IF_ERROR(upload_staged(be, b, offset, src, nbytes, &done));
    if (done) {
      if (b->host_ids) memcpy((char *)b->host_ids + offset, src, (size_t)nbytes);
      if (be->prof.on) kiln_cuda_prof_xfer(be, 0, nbytes, kiln_cuda_now_ms() - t0);
      return NULL;
    }
  }
  /* The copy waits for work already queued on the stream (which may read
   * the buffer) and is complete when this returns. */
  KILN_CU_CHECK(be->host, be->cu, NULL,
                MemcpyHtoDAsync(b->ptr + offset, src, (size_t)nbytes, be->stream));
  KILN_CU_CHECK(be->host, be->cu, NULL, StreamSynchronize(be->stream));
  if (b->host_ids) memcpy((char *)b->host_ids + offset, src, (size_t)nbytes);
  if (be->prof.on) kiln_cuda_prof_xfer(be, 0, nbytes, kiln_cuda_now_ms() - t0);
  return NULL;
}

/* Downloads of at least this many bytes go through the pinned staging
 * buffer, in pieces of at most STAGING_MAX. A copy from device memory
 * into pageable memory is staged by the driver itself, piece by piece, at
 * a fraction of the bus's speed, and the executor downloads the logits
 * (600 KiB for a 152k vocabulary) after every decode step. */
#define STAGING_MIN ((uint64_t)64 << 10)
#define STAGING_MAX ((uint64_t)8 << 20)

/* The staging buffer, at least `bytes` (<= STAGING_MAX) long; NULL when
 * pinned memory cannot be had (then the copy goes direct). */
static void *staging(kiln_cuda_backend *be, uint64_t bytes) {
  if (be->staging && be->staging_bytes >= bytes) return be->staging;
  if (be->staging) be->cu->MemFreeHost(be->staging);
  be->staging = NULL;
  be->staging_bytes = 0;
  uint64_t want = (bytes + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
  if (be->cu->MemAllocHost(&be->staging, (size_t)want) != CUDA_SUCCESS) {
    be->staging = NULL;
    return NULL;
  }
  be->staging_bytes = want;
  return be->staging;
}

kiln_status kiln_cuda_buffer_download(void *backend, void *buf, uint64_t offset, void *dst,
                                      uint64_t nbytes) {
  kiln_cuda_backend *be = backend;
  kiln_cuda_buffer *b = buf;
  KILN_RETURN_IF_ERROR(check_range(be, "download", b, offset, nbytes));
  if (!nbytes) return NULL;
  KILN_RETURN_IF_ERROR(kiln_cuda_enter(be));
  const double t0 = be->prof.on ? kiln_cuda_now_ms() : 0.0;
  const uint64_t piece = nbytes < STAGING_MAX ? nbytes : STAGING_MAX;
  void *st = nbytes >= STAGING_MIN ? staging(be, piece) : NULL;
  if (!st) {
    KILN_CU_CHECK(be->host, be->cu, NULL,
                  MemcpyDtoHAsync(dst, b->ptr + offset, (size_t)nbytes, be->stream));
    KILN_CU_CHECK(be->host, be->cu, NULL, StreamSynchronize(be->stream));
  } else {
    for (uint64_t done = 0; done < nbytes; done += piece) {
      const uint64_t n = nbytes - done < piece ? nbytes - done : piece;
      KILN_CU_CHECK(be->host, be->cu, NULL,
                    MemcpyDtoHAsync(st, b->ptr + offset + done, (size_t)n, be->stream));
      KILN_CU_CHECK(be->host, be->cu, NULL, StreamSynchronize(be->stream));
      memcpy((char *)dst + done, st, (size_t)n);
    }
  }
  if (be->prof.on) kiln_cuda_prof_xfer(be, 1, nbytes, kiln_cuda_now_ms() - t0);
  return NULL;
}
