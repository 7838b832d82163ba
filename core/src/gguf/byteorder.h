/* Little-endian loads and stores for GGUF headers and quantized blocks.
 *
 * GGUF is little-endian on disk; assembling values byte by byte keeps the
 * reader, the writer and the dequantizers correct on any host, and compilers
 * turn these into single loads on little-endian machines. Internal to
 * libkiln (static inline: nothing here is exported). */
#ifndef KILN_SRC_BYTEORDER_H
#define KILN_SRC_BYTEORDER_H

#include <stdint.h>
#include <string.h>

static inline uint16_t kiln__rd_u16(const uint8_t *p) {
  return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t kiln__rd_u32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t kiln__rd_u64(const uint8_t *p) {
  return (uint64_t)kiln__rd_u32(p) | ((uint64_t)kiln__rd_u32(p + 4) << 32);
}

static inline float kiln__rd_f32(const uint8_t *p) {
  uint32_t u = kiln__rd_u32(p);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline double kiln__rd_f64(const uint8_t *p) {
  uint64_t u = kiln__rd_u64(p);
  double d;
  memcpy(&d, &u, 8);
  return d;
}

static inline void kiln__wr_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static inline void kiln__wr_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline void kiln__wr_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline void kiln__wr_f32(uint8_t *p, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  kiln__wr_u32(p, u);
}

#endif /* KILN_SRC_BYTEORDER_H */
