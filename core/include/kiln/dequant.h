/*
 * kiln/dequant.h — GGUF block formats to f32, and f32 back to them.
 *
 * Dequantization is bit-exact to ggml's reference (ggml-quants.c,
 * dequantize_row_*): the same operations in the same order in f32, so every
 * value equals what llama.cpp's CPU path produces for the same block.
 * Quantizers follow ggml's reference quantizers (quantize_row_*_ref); they
 * are used by the GGUF writer and `kiln synth` (round trips are tested, not
 * bit-identity with every llama.cpp release).
 */
#ifndef KILN_DEQUANT_H
#define KILN_DEQUANT_H

#include <stdint.h>

#include "kiln/status.h"
#include "kiln/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Converts n values of `type` at src to f32 at dst. n must be a multiple of
 * the type's block size (KILN_STATUS_INVALID_ARGUMENT otherwise, or for a
 * type kiln does not read). F32 is copied, F16/BF16 converted exactly. */
kiln_status kiln_dequantize(kiln_type type, const void *src, float *dst, int64_t n);

/* The inverse, for F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K and Q6_K: writes
 * kiln_type_row_bytes(type, n) bytes to dst. Same errors as above. */
kiln_status kiln_quantize(kiln_type type, const float *src, void *dst, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* KILN_DEQUANT_H */
