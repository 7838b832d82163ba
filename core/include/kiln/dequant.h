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

/* Converts n values of `type` at src to f32 at dst (n / block size blocks,
 * read as little-endian bytes; src needs no alignment; src and dst must not
 * overlap). n must be a multiple of the type's block size
 * (KILN_STATUS_INVALID_ARGUMENT otherwise, or for I32 or a type kiln does
 * not read, or NULL buffers with n > 0; n = 0 does nothing). F32 is copied,
 * F16/BF16 converted exactly (kiln/half.h). Never fails on the bytes
 * themselves: any block dequantizes (an f16 scale of inf or NaN gives inf
 * or NaN values, as in ggml). */
kiln_status kiln_dequantize(kiln_type type, const void *src, float *dst, int64_t n);

/* The inverse, for F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q5_K and Q6_K:
 * writes kiln_type_row_bytes(type, n) bytes to dst. Same argument errors as
 * above, and KILN_STATUS_INVALID_ARGUMENT naming the value or block when
 * the input cannot be stored: a NaN or infinity for a block type; a finite
 * value that would round to infinity in F16/BF16; a block whose f16 scale
 * would overflow (|x| beyond about 8.3e6 for Q8_0, 5.2e5 for Q4_0, 1.0e6
 * for Q5_0, 2.1e6 for Q4_K and Q5_K, 1.3e8 for Q6_K). Infinities pass
 * through F16/BF16, where they are representable. Departure from ggml: a block whose scale is
 * too small for its reciprocal to be finite (every |x| under ~1e-36)
 * quantizes to zeros instead of NaN. */
kiln_status kiln_quantize(kiln_type type, const float *src, void *dst, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* KILN_DEQUANT_H */
