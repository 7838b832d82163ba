/*
 * kiln/kv_cache.h — the element types of the KV cache ([kv_cache] type):
 * their names, and the conversion of cache rows from and to f32.
 *
 * A K or V cache is a STATE tensor [head_dim * n_head_kv, n_ctx] (ne0
 * first: one column per position) of one of four types:
 *   F32   4 bytes a value, exact;
 *   F16   2 bytes, IEEE binary16, rounded to nearest even (kiln/half.h);
 *   BF16  2 bytes, bfloat16, rounded to nearest even (kiln/half.h);
 *   Q8_0  34 bytes per 32 values along ne0: GGUF's Q8_0 block (kiln/types.h),
 *         f16 d = amax / 127, int8 q = round(x / d), x' = q * d; head_dim
 *         must be a multiple of 32 so that no block straddles two heads.
 * Everything here is static inline so that the host, the plugins (which
 * never link libkiln) and the tests share one definition, as kiln/half.h.
 */
#ifndef KILN_KV_CACHE_H
#define KILN_KV_CACHE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kiln/half.h"
#include "kiln/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether `type` is one a KV cache may have: F32, F16, BF16 or Q8_0. */
static inline int kiln_kv_type_ok(int32_t type) {
  return type == KILN_TYPE_F32 || type == KILN_TYPE_F16 || type == KILN_TYPE_BF16 ||
         type == KILN_TYPE_Q8_0;
}

/* The type's name as [kv_cache] type spells it ("f32", "f16", "bf16",
 * "q8_0"), or "?" for a type a KV cache cannot have. */
static inline const char *kiln_kv_type_config_name(int32_t type) {
  switch (type) {
  case KILN_TYPE_F32: return "f32";
  case KILN_TYPE_F16: return "f16";
  case KILN_TYPE_BF16: return "bf16";
  case KILN_TYPE_Q8_0: return "q8_0";
  default: return "?";
  }
}

/* The type that [kv_cache] type value `name` names; 0 and *out_type set,
 * or -1 (and *out_type untouched) for any other string or NULL. */
static inline int kiln_kv_type_parse(const char *name, kiln_type *out_type) {
  static const kiln_type types[] = {KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16, KILN_TYPE_Q8_0};
  for (unsigned i = 0; name && i < sizeof types / sizeof types[0]; i++)
    if (!strcmp(name, kiln_kv_type_config_name(types[i]))) {
      *out_type = types[i];
      return 0;
    }
  return -1;
}

/* One Q8_0 block of 32 values x to its 34 bytes out (f16 d little-endian,
 * then 32 int8 quants), as llama.cpp's quantize_row_q8_0_ref
 * (ggml-quants.c) computes it: amax = max |x| (its MAX macro, in order),
 * d = amax / 127, id = d ? 1/d : 0, out.d = fp16(d) rounded to nearest
 * even, q_j = roundf(x_j * id) (the quants use the f32 id, not the
 * rounded d). Where the reference's int8 conversion is undefined (a NaN
 * input, or a tiny amax whose 1/d overflows), q is 0 for NaN and clamped
 * to -127..127 otherwise; every defined case is bit-identical. */
static inline void kiln_kv_quantize_q8_0_block(const float *x, uint8_t *out) {
  float amax = 0.0f;
  for (int j = 0; j < KILN_QK8_0; j++) {
    const float v = fabsf(x[j]);
    amax = amax > v ? amax : v; /* MAX(amax, fabsf(v)) */
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t h = kiln_f32_to_f16(d);
  out[0] = (uint8_t)(h & 0xffu);
  out[1] = (uint8_t)(h >> 8);
  for (int j = 0; j < KILN_QK8_0; j++) {
    const float r = roundf(x[j] * id);
    const float c = r != r ? 0.0f : r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r;
    out[2 + j] = (uint8_t)(int8_t)c;
  }
}

/* n f32 values src to a cache row segment dst of `type` (kiln_kv_type_ok;
 * for Q8_0 n a multiple of 32 and dst the start of a block): F32 copied,
 * F16/BF16 rounded to nearest even, Q8_0 by kiln_kv_quantize_q8_0_block.
 * dst holds kiln_type_row_bytes(type, n) bytes and needs no alignment. */
static inline void kiln_kv_store_row(int32_t type, const float *src, void *dst, int64_t n) {
  uint8_t *o = (uint8_t *)dst;
  switch (type) {
  case KILN_TYPE_F32: memmove(o, src, (size_t)n * sizeof(float)); break;
  case KILN_TYPE_F16:
  case KILN_TYPE_BF16:
    for (int64_t i = 0; i < n; i++) {
      const uint16_t h = type == KILN_TYPE_F16 ? kiln_f32_to_f16(src[i]) : kiln_f32_to_bf16(src[i]);
      o[2 * i] = (uint8_t)(h & 0xffu);
      o[2 * i + 1] = (uint8_t)(h >> 8);
    }
    break;
  case KILN_TYPE_Q8_0:
    for (int64_t b = 0; b < n / KILN_QK8_0; b++)
      kiln_kv_quantize_q8_0_block(src + b * KILN_QK8_0, o + b * (2 + KILN_QK8_0));
    break;
  default: break;
  }
}

/* The inverse: n values of a cache row segment src of `type` (Q8_0: n a
 * multiple of 32, src a block's start) to f32 dst, exactly as ggml
 * dequantizes them (F16/BF16 exact; Q8_0 x = q * fp32(d)). */
static inline void kiln_kv_load_row(int32_t type, const void *src, float *dst, int64_t n) {
  const uint8_t *p = (const uint8_t *)src;
  switch (type) {
  case KILN_TYPE_F32: memmove(dst, p, (size_t)n * sizeof(float)); break;
  case KILN_TYPE_F16:
    for (int64_t i = 0; i < n; i++) dst[i] = kiln_f16_to_f32((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
    break;
  case KILN_TYPE_BF16:
    for (int64_t i = 0; i < n; i++) dst[i] = kiln_bf16_to_f32((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
    break;
  case KILN_TYPE_Q8_0:
    for (int64_t b = 0; b < n / KILN_QK8_0; b++) {
      const uint8_t *blk = p + b * (2 + KILN_QK8_0);
      const float d = kiln_f16_to_f32((uint16_t)(blk[0] | (blk[1] << 8)));
      for (int j = 0; j < KILN_QK8_0; j++) dst[b * KILN_QK8_0 + j] = (float)(int8_t)blk[2 + j] * d;
    }
    break;
  default: break;
  }
}

#ifdef __cplusplus
}
#endif
#endif /* KILN_KV_CACHE_H */
