/* matvec_q's block decoders (backends/cuda-common/kernels/
 * matvec_q_types.cuh.tmpl) compiled for the host, both activation widths:
 * for every block type, rows of GGUF blocks packed field by field
 * (tests/gpu's kg_pack_weight: every quant bit pattern) times x quantized
 * in act_quant.cuh's layout, every lane's share of every block added,
 * must equal the f64 sum of the dequantized weights (kiln_dequantize)
 * times the quantized x within f32 rounding (1e-6 of the sum of |terms|).
 * A decoder that takes a wrong nibble, high bit, scale or run, or a lane
 * mapping that misses or repeats a value, is off by far more; a load
 * whose address breaks the alignment the device needs fails (the host
 * primitives check it). No GPU needed: the GPU suites (test_gpu_matvec_q)
 * check the same arithmetic inside the kernels on the device. */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include <cmocka.h>

#include "gpu_common.h"
#include "kiln/dequant.h"
#include "kiln/half.h"
#include "kiln/types.h"
}
#include "q5_k_ref.h"

/* The CUDA vector types and qualifiers the kernel headers use. */
#define __device__
#define __forceinline__ inline
struct uint4 {
  unsigned x, y, z, w;
};
struct uint2 {
  unsigned x, y;
};
struct float2 {
  float x, y;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
static inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t v = (uint64_t)y << 32 | x;
  unsigned r = 0;
  for (int i = 0; i < 4; i++) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 255u) << (8 * i);
  return r;
}
/* act_quant.cuh's warp helpers are compiled, never called here. */
#define __shfl_xor_sync(mask, v, o) (v)
static inline int __float2int_rn(float f) { return (int)rintf(f); }

#define KILN_XQ_BITS 16
namespace q16 {
#include "act_quant.cuh.tmpl"
#include "matvec_q_host_prims.h"
#include "matvec_q_types.cuh.tmpl"
#include "matvec_q_stage.cuh.tmpl"
#include "matvec_q_host_check.h"
} // namespace q16
#undef KILN_XQ_BITS
#define KILN_XQ_BITS 8
namespace q8 {
#include "act_quant.cuh.tmpl"
#include "matvec_q_host_prims.h"
#include "matvec_q_types.cuh.tmpl"
#include "matvec_q_stage.cuh.tmpl"
#include "matvec_q_host_check.h"
} // namespace q8

static const kiln_type types[] = {KILN_TYPE_Q4_0, KILN_TYPE_Q5_0, KILN_TYPE_Q8_0,
                                  KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K};

/* The weight's values split as the kernels take them: a = the weight with
 * its blocks' minimum zeroed (Q4_K's, Q5_K's dmin), m = a - w (0 for the
 * types without a minimum). */
static void split_min(kiln_type type, const uint8_t *w, size_t wbytes, int k, int rows,
                      const float *full, float **out_a, float *m) {
  *out_a = (float *)full;
  if (type != KILN_TYPE_Q4_K && type != KILN_TYPE_Q5_K) return;
  const size_t bb = (size_t)kiln_type_block_bytes(type);
  uint8_t *nomin = (uint8_t *)kg_alloc(wbytes);
  memcpy(nomin, w, wbytes);
  for (size_t b = 0; b < wbytes / bb; b++) nomin[bb * b + 2] = nomin[bb * b + 3] = 0;
  *out_a = kg_dequant(type, nomin, k, rows);
  for (int64_t i = 0; i < (int64_t)k * rows; i++) m[i] = (*out_a)[i] - full[i];
  free(nomin);
}

static void test_decoders(void **state) {
  (void)state;
  int bad = 0;
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
    for (int k = 256; k <= 2816; k += 1280) { /* 256, 1536, 2816 */
      const kiln_type type = types[ti];
      kg_rng r = kg_rng_new((uint64_t)(ti * 100 + k));
      const int rows = 3;
      const int64_t rb = kiln_type_row_bytes(type, k);
      const size_t wbytes = rb > 0 ? (size_t)rb * (size_t)rows : 0;
      assert_true(wbytes > 0);
      /* The device's buffer: a 256-byte aligned base, rows back to back. */
      uint8_t *packed = kg_pack_weight(type, k, rows, 0, 0, &r);
      uint8_t *w = (uint8_t *)aligned_alloc(256, (wbytes + 255) / 256 * 256);
      memcpy(w, packed, wbytes);
      float *full = kg_dequant(type, w, k, rows), *a;
      float *m = (float *)kg_alloc((size_t)(k * rows) * sizeof(float));
      split_min(type, w, wbytes, k, rows, full, &a, m);
      float *x = (float *)kg_alloc((size_t)k * sizeof(float));
      uint8_t *xq = (uint8_t *)aligned_alloc(256, (size_t)(4 * k + 256));
      for (int row = 0; row < rows; row++) {
        kg_fill(&r, x, k, -1, 1);
        if (row == 1)
          for (int i = 32; i < 64; i++) x[i] = 0.0f; /* an all-zero block */
        const uint8_t *wr = w + row * rb;
        const float *ar = a + (int64_t)row * k, *mr = m + (int64_t)row * k;
        const double e16 = q16::type_error(type, wr, ar, mr, x, k, xq);
        const double e8 = q8::type_error(type, wr, ar, mr, x, k, xq);
        const bool ok = e16 <= 1e-6 && e8 <= 1e-6;
        printf("%-4s K=%-4d row %d: relative error q16 %.2e, q8 %.2e%s\n", kiln_type_name(type), k,
               row, e16, e8, ok ? "" : "  FAIL");
        bad += !ok;
      }
      free(x);
      free(xq);
      if (a != full) free(a);
      free(full);
      free(m);
      free(w);
      free(packed);
    }
  assert_int_equal(bad, 0);
}

/* load = staged: the same sums as the direct reads, bit for bit, for every
 * block type, row lengths whose last step is partial (K = 2816: Q6_K's
 * 11 blocks in steps of 4, rows of 2310 bytes that start and end off the
 * 16-byte grid, so the tail word is read in pieces), groups of 2 and 3
 * rows over 5 rows (a partial last group), both widths. */
static void test_staged(void **state) {
  (void)state;
  int bad = 0;
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
    for (int ki = 0; ki < 2; ki++) {
      const kiln_type type = types[ti];
      const int k = ki ? 2816 : 768, rows = 5;
      kg_rng r = kg_rng_new((uint64_t)(ti * 7 + ki + 1000));
      const size_t wbytes = (size_t)kiln_type_row_bytes(type, k) * rows;
      uint8_t *packed = kg_pack_weight(type, k, rows, 0, 0, &r);
      uint8_t *w = (uint8_t *)aligned_alloc(256, (wbytes + 255) / 256 * 256);
      memcpy(w, packed, wbytes);
      float *x = (float *)kg_alloc((size_t)k * sizeof(float));
      uint8_t *xq = (uint8_t *)aligned_alloc(256, (size_t)(4 * k + 256));
      kg_fill(&r, x, k, -1, 1);
      int n = 0;
      if (ki) {
        n += q16::staged_type_mismatches<2816, 2>(type, w, rows, x, xq);
        n += q16::staged_type_mismatches<2816, 3>(type, w, rows, x, xq);
        n += q8::staged_type_mismatches<2816, 2>(type, w, rows, x, xq);
      } else {
        n += q16::staged_type_mismatches<768, 2>(type, w, rows, x, xq);
        n += q8::staged_type_mismatches<768, 3>(type, w, rows, x, xq);
      }
      printf("%-4s K=%-4d staged: %d sums differ from the direct reads%s\n", kiln_type_name(type),
             k, n, n ? "  FAIL" : "");
      bad += n;
      free(x);
      free(xq);
      free(w);
      free(packed);
    }
  assert_int_equal(bad, 0);
}

/* Q5_K on every bit pattern: the 256 blocks of q5_k_ref.h (every byte of
 * the scales, qh and qs takes each of its 256 values once over them; d and
 * dmin f16 of both signs, subnormal to 4e4), a block a row against random
 * x, and the block of the largest integer sums (every level 31, every
 * scale 63) against x = +1 and -1 (X = +-32767 at 16 bits): each within
 * f32 rounding of the f64 sum, both widths. */
static void test_q5_k_every_pattern(void **state) {
  (void)state;
  const int k = 256, rows = 256 + 2;
  uint8_t *w = (uint8_t *)aligned_alloc(256, (size_t)rows * 176 + 256);
  for (int b = 0; b < 256; b++) q5r_block(b, w + 176 * b);
  for (int e = 0; e < 2; e++) { /* d = 1, dmin = 0; then d = dmin = 1 */
    uint8_t *p = w + 176 * (256 + e);
    memset(p, 0xFF, 176);
    p[0] = 0x00, p[1] = 0x3c, p[2] = 0x00, p[3] = (uint8_t)(e ? 0x3c : 0x00);
  }
  const size_t wbytes = (size_t)rows * 176;
  float *full = kg_dequant(KILN_TYPE_Q5_K, w, k, rows), *a;
  float *m = (float *)kg_alloc((size_t)(k * rows) * sizeof(float));
  split_min(KILN_TYPE_Q5_K, w, wbytes, k, rows, full, &a, m);
  float *x = (float *)kg_alloc((size_t)k * sizeof(float));
  uint8_t *xq = (uint8_t *)aligned_alloc(256, (size_t)(4 * k + 256));
  kg_rng r = kg_rng_new(5151);
  int bad = 0;
  double worst16 = 0, worst8 = 0;
  for (int row = 0; row < rows; row++) {
    const int extreme = row >= 256;
    for (int sign = 0; sign < (extreme ? 2 : 1); sign++) {
      if (extreme)
        for (int i = 0; i < k; i++) x[i] = sign ? -1.0f : 1.0f;
      else
        kg_fill(&r, x, k, -1, 1);
      const uint8_t *wr = w + (size_t)row * 176;
      const float *ar = a + (int64_t)row * k, *mr = m + (int64_t)row * k;
      const double e16 = q16::type_error(KILN_TYPE_Q5_K, wr, ar, mr, x, k, xq);
      const double e8 = q8::type_error(KILN_TYPE_Q5_K, wr, ar, mr, x, k, xq);
      worst16 = e16 > worst16 ? e16 : worst16;
      worst8 = e8 > worst8 ? e8 : worst8;
      if (!(e16 <= 1e-6 && e8 <= 1e-6)) {
        printf("Q5_K block %d%s: relative error q16 %.2e, q8 %.2e  FAIL\n", row,
               extreme ? (sign ? " (x = -1)" : " (x = +1)") : "", e16, e8);
        bad++;
      }
    }
  }
  printf("Q5_K, 258 blocks of every bit pattern: worst relative error q16 %.2e, q8 %.2e\n", worst16,
         worst8);
  free(x);
  free(xq);
  free(a);
  free(full);
  free(m);
  free(w);
  assert_int_equal(bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_decoders), cmocka_unit_test(test_staged),
                                     cmocka_unit_test(test_q5_k_every_pattern)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
