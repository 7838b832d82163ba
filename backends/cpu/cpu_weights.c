/* Weight rows as f32: the one place the cpu backend reads weight bytes.
 * Every non-F32 type goes through the host's dequantizer (core/dequant.c),
 * so the cpu backend sees exactly the values GGUF defines, and a new type
 * needs no code here beyond its name in cpu_weight_type_ok(). */
#include "config.h"

#include <string.h>

#include "cpu_ops.h"

bool cpu_weight_type_ok(kiln_type type) {
  switch (type) {
  case KILN_TYPE_F32: case KILN_TYPE_F16: case KILN_TYPE_BF16: case KILN_TYPE_Q4_0:
  case KILN_TYPE_Q5_0: case KILN_TYPE_Q8_0: case KILN_TYPE_Q4_K: case KILN_TYPE_Q5_K:
  case KILN_TYPE_Q6_K:
    return true;
  default:
    return false;
  }
}

kiln_status cpu_weight_row(const cpu_ctx *ctx, kiln_type type, const void *base,
                           int64_t row_bytes, int64_t row, int64_t n, float *scratch,
                           const float **out_row) {
  const unsigned char *p = (const unsigned char *)base + row * row_bytes;
  if (type == KILN_TYPE_F32) {
    if (((uintptr_t)p & (sizeof(float) - 1)) == 0) {
      *out_row = (const float *)(const void *)p;
      return NULL;
    }
    /* A GGUF tensor is aligned to 32 bytes, but a weight from elsewhere
     * need not be: copy rather than read a misaligned float. */
    memcpy(scratch, p, (size_t)n * sizeof(float));
    *out_row = scratch;
    return NULL;
  }
  kiln_status st = ctx->dequantize(type, p, scratch, n);
  if (st) return ctx->status_annotate(st, "dequantizing row %lld of a %s weight", (long long)row,
                                      kiln_type_name(type));
  *out_row = scratch;
  return NULL;
}
