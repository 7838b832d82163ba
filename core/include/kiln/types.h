/*
 * kiln/types.h — tensor element types, with the ids and block layouts of
 * ggml (ggml.h `enum ggml_type`, the GGUF spec's `ggml_type`).
 *
 * Everything here is static inline so that plugins, which never link
 * libkiln, use the same traits as the host.
 *
 * Block layouts (little-endian, as written in GGUF files):
 *   Q4_0: 32 values, 18 bytes  = f16 d; u8 qs[16]            x = d*(q-8)
 *   Q5_0: 32 values, 22 bytes  = f16 d; u8 qh[4]; u8 qs[16]   x = d*(q-16)
 *   Q8_0: 32 values, 34 bytes  = f16 d; i8 qs[32]             x = d*q
 *   Q4_K: 256 values, 144 bytes = f16 d; f16 dmin; u8 scales[12]; u8 qs[128]
 *   Q5_K: 256 values, 176 bytes = f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]
 *   Q6_K: 256 values, 210 bytes = u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d
 * (core/dequant.c has the full definitions and follows ggml-quants.c.)
 */
#ifndef KILN_TYPES_H
#define KILN_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ggml type ids (GGUF tensor_info.type). Only the types kiln reads are
 * named; any other id in a file is rejected by the GGUF reader, naming the
 * tensor and the id. I32 is kiln's own use for token ids. */
typedef enum kiln_type {
  KILN_TYPE_F32 = 0,
  KILN_TYPE_F16 = 1,
  KILN_TYPE_Q4_0 = 2,
  KILN_TYPE_Q5_0 = 6,
  KILN_TYPE_Q8_0 = 8,
  KILN_TYPE_Q4_K = 12,
  KILN_TYPE_Q5_K = 13,
  KILN_TYPE_Q6_K = 14,
  KILN_TYPE_I32 = 26,
  KILN_TYPE_BF16 = 30,
  KILN_TYPE_COUNT = 39 /* one past the largest ggml id kiln knows of */
} kiln_type;

#define KILN_QK4_0 32
#define KILN_QK5_0 32
#define KILN_QK8_0 32
#define KILN_QK_K 256
#define KILN_K_SCALE_SIZE 12

/* Values per block (1 for plain types); 0 for an id kiln does not read. */
static inline int64_t kiln_type_block_size(int32_t type) {
  switch (type) {
  case KILN_TYPE_F32: case KILN_TYPE_F16: case KILN_TYPE_BF16: case KILN_TYPE_I32: return 1;
  case KILN_TYPE_Q4_0: return KILN_QK4_0;
  case KILN_TYPE_Q5_0: return KILN_QK5_0;
  case KILN_TYPE_Q8_0: return KILN_QK8_0;
  case KILN_TYPE_Q4_K: case KILN_TYPE_Q5_K: case KILN_TYPE_Q6_K: return KILN_QK_K;
  default: return 0;
  }
}

/* Bytes per block; 0 for an id kiln does not read. */
static inline int64_t kiln_type_block_bytes(int32_t type) {
  switch (type) {
  case KILN_TYPE_F32: case KILN_TYPE_I32: return 4;
  case KILN_TYPE_F16: case KILN_TYPE_BF16: return 2;
  case KILN_TYPE_Q4_0: return 2 + KILN_QK4_0 / 2;
  case KILN_TYPE_Q5_0: return 2 + 4 + KILN_QK5_0 / 2;
  case KILN_TYPE_Q8_0: return 2 + KILN_QK8_0;
  case KILN_TYPE_Q4_K: return 2 + 2 + KILN_K_SCALE_SIZE + KILN_QK_K / 2;
  case KILN_TYPE_Q5_K: return 2 + 2 + KILN_K_SCALE_SIZE + KILN_QK_K / 8 + KILN_QK_K / 2;
  case KILN_TYPE_Q6_K: return KILN_QK_K / 2 + KILN_QK_K / 4 + KILN_QK_K / 16 + 2;
  default: return 0;
  }
}

/* Upper-case name as ggml prints it ("Q4_K"), or "?" for an unknown id. */
static inline const char *kiln_type_name(int32_t type) {
  switch (type) {
  case KILN_TYPE_F32: return "F32";
  case KILN_TYPE_F16: return "F16";
  case KILN_TYPE_BF16: return "BF16";
  case KILN_TYPE_I32: return "I32";
  case KILN_TYPE_Q4_0: return "Q4_0";
  case KILN_TYPE_Q5_0: return "Q5_0";
  case KILN_TYPE_Q8_0: return "Q8_0";
  case KILN_TYPE_Q4_K: return "Q4_K";
  case KILN_TYPE_Q5_K: return "Q5_K";
  case KILN_TYPE_Q6_K: return "Q6_K";
  default: return "?";
  }
}

/* Is `type` one kiln can hold in a tensor? */
static inline int kiln_type_is_known(int32_t type) { return kiln_type_block_size(type) != 0; }

/* Is `type` a block-quantized type (dequantized before arithmetic)? */
static inline int kiln_type_is_quantized(int32_t type) { return kiln_type_block_size(type) > 1; }

/* Bytes of one row of `ne0` values, or -1 when ne0 is not a whole number of
 * blocks (ggml refuses such rows too), the type is unknown, or the size
 * does not fit in int64. */
static inline int64_t kiln_type_row_bytes(int32_t type, int64_t ne0) {
  int64_t bs = kiln_type_block_size(type);
  if (bs == 0 || ne0 < 0 || ne0 % bs != 0) return -1;
  if (ne0 / bs > INT64_MAX / kiln_type_block_bytes(type)) return -1; /* would overflow */
  return (ne0 / bs) * kiln_type_block_bytes(type);
}

#ifdef __cplusplus
}
#endif
#endif /* KILN_TYPES_H */
