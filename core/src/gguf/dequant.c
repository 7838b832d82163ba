/* GGUF block formats to f32, bit-exact to ggml's reference dequantizers
 * (ggml-quants.c, dequantize_row_q4_0 / q5_0 / q8_0 / q4_K / q5_K / q6_K): the
 * same f32 operations in the same order, so every value equals what
 * llama.cpp's scalar CPU path produces for the same block. (kiln builds with
 * -std=c11, under which gcc does not contract a*b-c into an FMA, so the
 * rounding is the one written here.)
 *
 * Block layouts, little-endian (ggml-common.h):
 *   Q4_0  18 bytes: f16 d; u8 qs[16]. Value j < 16 is the low nibble of
 *         qs[j], value j + 16 the high nibble; x = (q - 8) * d.
 *   Q5_0  22 bytes: f16 d; u8 qh[4] (a u32: bit j is the 5th bit of value
 *         j); u8 qs[16] (nibbles as Q4_0); x = (q - 16) * d.
 *   Q8_0  34 bytes: f16 d; i8 qs[32]; x = q * d.
 *   Q4_K  144 bytes: f16 d; f16 dmin; u8 scales[12]: eight 6-bit scales and
 *         eight 6-bit mins (sub-blocks 0-3 in the low 6 bits of bytes 0-3 and
 *         4-7; sub-blocks 4-7 split into a nibble in bytes 8-11 and 2 high
 *         bits in the top of bytes 0-7); u8 qs[128]: each 32-byte group holds
 *         sub-block 2k in its low nibbles and 2k+1 in its high nibbles;
 *         x = d*sc*q - dmin*m.
 *   Q5_K  176 bytes: f16 d; f16 dmin; u8 scales[12] (packed as Q4_K's);
 *         u8 qh[32]; u8 qs[128] (nibbles as Q4_K's). Value l of sub-block
 *         j (0..7) takes its fifth bit from bit j of qh[l]; x = d*sc*q -
 *         dmin*m with q in 0..31.
 *   Q6_K  210 bytes: u8 ql[128] (low 4 bits); u8 qh[64] (high 2 bits);
 *         i8 scales[16] (one per 16 values); f16 d; x = d*sc*(q - 32).
 *         Each 128-value half uses 64 ql bytes and 32 qh bytes: value l,
 *         l+32, l+64, l+96 take ql[l] low, ql[l+32] low, ql[l] high,
 *         ql[l+32] high nibbles and qh[l] bits 0-1, 2-3, 4-5, 6-7. */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "byteorder.h"
#include "kiln/dequant.h"
#include "kiln/half.h"

static float rd_f16(const uint8_t *p) { return kiln_f16_to_f32(kiln__rd_u16(p)); }

static void dequant_q4_0(const uint8_t *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, b += 18, y += 32) {
    const float d = rd_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
      const int x0 = (qs[j] & 0x0f) - 8;
      const int x1 = (qs[j] >> 4) - 8;
      y[j] = (float)x0 * d;
      y[j + 16] = (float)x1 * d;
    }
  }
}

static void dequant_q5_0(const uint8_t *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, b += 22, y += 32) {
    const float d = rd_f16(b);
    const uint32_t qh = kiln__rd_u32(b + 2);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
      const int h0 = (int)((qh >> j) & 1u) << 4;
      const int h1 = (int)((qh >> (j + 16)) & 1u) << 4;
      const int x0 = ((qs[j] & 0x0f) | h0) - 16;
      const int x1 = ((qs[j] >> 4) | h1) - 16;
      y[j] = (float)x0 * d;
      y[j + 16] = (float)x1 * d;
    }
  }
}

static void dequant_q8_0(const uint8_t *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, b += 34, y += 32) {
    const float d = rd_f16(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
  }
}

/* Scale and min of Q4_K sub-block j (0..7) from the 12 packed bytes. */
static void q4k_scale_min(int j, const uint8_t *s, uint8_t *sc, uint8_t *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (uint8_t)((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
    *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

static void dequant_q4_k(const uint8_t *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, b += 144) {
    const float d = rd_f16(b);
    const float dmin = rd_f16(b + 2);
    const uint8_t *scales = b + 4;
    const uint8_t *q = b + 16;
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      q4k_scale_min(is, scales, &sc, &m);
      const float d1 = d * (float)sc, m1 = dmin * (float)m;
      q4k_scale_min(is + 1, scales, &sc, &m);
      const float d2 = d * (float)sc, m2 = dmin * (float)m;
      for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0x0f) - m1;
      for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
    }
  }
}

/* As Q4_K with a fifth bit per value: d1 * q is exact in f32 (an 11-bit
 * f16 times a 6-bit scale times a 5-bit q), so only the subtraction
 * rounds, as in ggml. */
static void dequant_q5_k(const uint8_t *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, b += 176) {
    const float d = rd_f16(b);
    const float dmin = rd_f16(b + 2);
    const uint8_t *scales = b + 4;
    const uint8_t *qh = b + 16;
    const uint8_t *q = b + 48;
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      q4k_scale_min(is, scales, &sc, &m);
      const float d1 = d * (float)sc, m1 = dmin * (float)m;
      q4k_scale_min(is + 1, scales, &sc, &m);
      const float d2 = d * (float)sc, m2 = dmin * (float)m;
      for (int l = 0; l < 32; l++) {
        const int h = (qh[l] >> is) & 1;
        *y++ = d1 * (float)((q[l] & 0x0f) | (h << 4)) - m1;
      }
      for (int l = 0; l < 32; l++) {
        const int h = (qh[l] >> (is + 1)) & 1;
        *y++ = d2 * (float)((q[l] >> 4) | (h << 4)) - m2;
      }
    }
  }
}

static void dequant_q6_k(const uint8_t *b, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, b += 210) {
    const uint8_t *ql = b;
    const uint8_t *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    const float d = rd_f16(b + 208);
    for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; l++) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * (float)sc[is] * (float)q1;
        y[l + 32] = d * (float)sc[is + 2] * (float)q2;
        y[l + 64] = d * (float)sc[is + 4] * (float)q3;
        y[l + 96] = d * (float)sc[is + 6] * (float)q4;
      }
    }
  }
}

kiln_status kiln_dequantize(kiln_type type, const void *src, float *dst, int64_t n) {
  const int64_t bs = kiln_type_block_size(type);
  if (bs == 0 || type == KILN_TYPE_I32) {
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "kiln_dequantize: type id %d (%s) is not a float type kiln reads",
                           (int)type, kiln_type_name(type));
  }
  if (n < 0 || n % bs != 0) {
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "kiln_dequantize: %" PRId64
                           " values of %s is not a whole number of "
                           "%" PRId64 "-value blocks",
                           n, kiln_type_name(type), bs);
  }
  if (n == 0) return NULL;
  if (!src || !dst) {
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kiln_dequantize: NULL buffer");
  }
  const uint8_t *b = src;
  const int64_t nb = n / bs;
  switch (type) {
  case KILN_TYPE_F32:
    memcpy(dst, src, (size_t)n * 4); /* kiln targets little-endian hosts */
    break;
  case KILN_TYPE_F16:
    for (int64_t i = 0; i < n; i++) dst[i] = rd_f16(b + 2 * i);
    break;
  case KILN_TYPE_BF16:
    for (int64_t i = 0; i < n; i++) dst[i] = kiln_bf16_to_f32(kiln__rd_u16(b + 2 * i));
    break;
  case KILN_TYPE_Q4_0: dequant_q4_0(b, dst, nb); break;
  case KILN_TYPE_Q5_0: dequant_q5_0(b, dst, nb); break;
  case KILN_TYPE_Q8_0: dequant_q8_0(b, dst, nb); break;
  case KILN_TYPE_Q4_K: dequant_q4_k(b, dst, nb); break;
  case KILN_TYPE_Q5_K: dequant_q5_k(b, dst, nb); break;
  case KILN_TYPE_Q6_K: dequant_q6_k(b, dst, nb); break;
  default:
    return kiln_status_new(KILN_STATUS_INTERNAL, "kiln_dequantize: type %s not handled",
                           kiln_type_name(type));
  }
  return NULL;
}
