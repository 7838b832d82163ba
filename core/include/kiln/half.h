/*
 * kiln/half.h — IEEE 754 binary16 and bfloat16 to and from binary32.
 *
 * Static inline and bit-exact (every f16 and bf16 value, subnormals, ±inf
 * and NaN included, maps to the f32 with the same value), so the host, the
 * plugins and the tests share one definition. f32 -> f16 rounds to nearest
 * even, as ggml's GGML_FP32_TO_FP16 and numpy's astype(float16) do;
 * f32 -> bf16 rounds to nearest even and keeps NaN a quiet NaN, as ggml's
 * ggml_compute_fp32_to_bf16 does.
 */
#ifndef KILN_HALF_H
#define KILN_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline float kiln_bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t kiln_f32_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float kiln_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return kiln_bits_to_f32(sign | 0x7f800000u | (man << 13)); /* inf, NaN */
  if (exp == 0) {
    if (man == 0) return kiln_bits_to_f32(sign); /* ±0 */
    /* subnormal: value = man * 2^-24, exact in f32 */
    float v = (float)man * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return kiln_bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t kiln_f32_to_f16(float f) {
  uint32_t x = kiln_f32_to_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return (uint16_t)(sign | 0x7e00u); /* NaN */
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to inf */
  if (absx < 0x38800000u) {
    /* result is subnormal or zero: round(absval * 2^24) to nearest even */
    if (absx < 0x33000000u) return (uint16_t)sign; /* < 2^-25: rounds to 0 */
    uint32_t e = absx >> 23;
    uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* 14 + (113 - e) - 1 + ... */
    /* value = m * 2^(e-150); want m * 2^(e-150+24) = m >> (126-e) */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
  }
  /* normal: rebias exponent, round mantissa from 23 to 10 bits */
  uint32_t r = absx - 0x38000000u; /* exponent -= 112 */
  uint32_t q = r >> 13;
  uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
  return (uint16_t)(sign | q);
}

static inline float kiln_bf16_to_f32(uint16_t h) { return kiln_bits_to_f32((uint32_t)h << 16); }

static inline uint16_t kiln_f32_to_bf16(float f) {
  uint32_t u = kiln_f32_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64u); /* quiet NaN */
  return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

#ifdef __cplusplus
}
#endif
#endif /* KILN_HALF_H */
