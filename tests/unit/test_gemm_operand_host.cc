/* The prefill GEMM's operand kernels (backends/cuda-common/kernels/
 * dequant_rows.cu.tmpl, gemm_input.cu.tmpl, gemm_operand.cuh.tmpl)
 * compiled for the host and run block by block on tests/unit/
 * cuda_block_emu.h, for every weight type in the bf16x3 form and for Q4_K
 * and F32 in the f32 and bf16 forms, with grids smaller and larger than
 * the work:
 *   - the tile: f32 values bit for bit core/dequant.c's (kiln_dequantize),
 *     bf16 values kiln/half.h's rounding of them, bf16x3 rows [hi | lo |
 *     hi] with hi the rounding and lo the rounding of what hi leaves;
 *   - the activations: bf16 [k, n] or bf16x3 columns [hi ; hi ; lo] of x,
 *     the same way;
 *   - the sums the GEMM forms from them (each row of the tile times each
 *     column of the operand over 3 k terms, products exact, in f64): for
 *     bf16x3 within 3e-5 relative L2 (and norm ratio) of the f64 product
 *     of the f32 values on rows with outliers of 30x, where one bf16 term
 *     (bf16) is off by more than 1e-4: so a layout that paired the wrong
 *     terms (hi.lo twice, or lo.lo) fails; tf32x3 (the same layout in TF32
 *     terms, f32 words) within 3e-7 (it measures 3-8e-8, bf16x3 2-4e-6),
 *     its terms checked against TF32 rounding by frexp and rint.
 * No GPU needed: tests/gpu/test_gpu_ops runs the same kernels through
 * cuBLAS on a device. */
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
#include "kiln/half.h"
#include "kiln/types.h"
}

#include "cuda_block_emu.h"

/* The device's rounded products and differences, as the host computes them
 * (each rounding its own: no fused multiply-add); cuda_block_emu.h has the
 * bit casts. */
static inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
static inline float __fsub_rn(float a, float b) {
  volatile float r = a - b;
  return r;
}

#define KILN_HOST_EMULATION 1
#include "grid_dep.cuh.tmpl"

enum { K = 512 }; /* KILN_K below: a row of two K-quant blocks, sixteen of 32 */

#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_bf16x3 1
#define KILN_WT_F32 1
#define KILN_HOST_SHAPE f32_x3
namespace f32_x3 {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_bf16x3 1
#define KILN_WT_F16 1
#define KILN_HOST_SHAPE f16_x3
namespace f16_x3 {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_bf16x3 1
#define KILN_WT_BF16 1
#define KILN_HOST_SHAPE bf16_x3
namespace bf16_x3 {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_bf16x3 1
#define KILN_WT_Q4_0 1
#define KILN_HOST_SHAPE q4_0_x3
namespace q4_0_x3 {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_bf16x3 1
#define KILN_WT_Q5_0 1
#define KILN_HOST_SHAPE q5_0_x3
namespace q5_0_x3 {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_bf16x3 1
#define KILN_WT_Q8_0 1
#define KILN_HOST_SHAPE q8_0_x3
namespace q8_0_x3 {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_bf16x3 1
#define KILN_WT_Q4_K 1
#define KILN_HOST_SHAPE q4_k_x3
namespace q4_k_x3 {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_bf16x3 1
#define KILN_WT_Q5_K 1
#define KILN_HOST_SHAPE q5_k_x3
namespace q5_k_x3 {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_bf16x3 1
#define KILN_WT_Q6_K 1
#define KILN_HOST_SHAPE q6_k_x3
namespace q6_k_x3 {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_bf16 1
#define KILN_WT_Q4_K 1
#define KILN_HOST_SHAPE q4_k_b1
namespace q4_k_b1 {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_bf16 1
#define KILN_WT_F32 1
#define KILN_HOST_SHAPE f32_b1
namespace f32_b1 {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_f32 1
#define KILN_WT_Q4_K 1
#define KILN_HOST_SHAPE q4_k_f
namespace q4_k_f {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_f32 1
#define KILN_WT_Q6_K 1
#define KILN_HOST_SHAPE q6_k_f
namespace q6_k_f {
#include "dequant_host_shape.h"
}

#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_tf32x3 1
#define KILN_WT_F32 1
#define KILN_HOST_SHAPE f32_t3
namespace f32_t3 {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_tf32x3 1
#define KILN_WT_F16 1
#define KILN_HOST_SHAPE f16_t3
namespace f16_t3 {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_tf32x3 1
#define KILN_WT_Q8_0 1
#define KILN_HOST_SHAPE q8_0_t3
namespace q8_0_t3 {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_tf32x3 1
#define KILN_WT_Q4_K 1
#define KILN_HOST_SHAPE q4_k_t3
namespace q4_k_t3 {
#include "dequant_host_shape.h"
}
#define KILN_K 512
#define KILN_BLOCK 64
#define KILN_OPERAND_tf32x3 1
#define KILN_WT_Q6_K 1
#define KILN_HOST_SHAPE q6_k_t3
namespace q6_k_t3 {
#include "dequant_host_shape.h"
}

typedef const char *(*dequant_fn)(unsigned grid, const unsigned char *w, void *tile, int n_rows);
typedef const char *(*input_fn)(unsigned grid, const float *x, void *y, int n_cols);

typedef struct form {
  kiln_type type;
  int terms; /* 0: f32 values; 1: bf16; 3: bf16x3 or tf32x3 */
  dequant_fn dequant;
  input_fn input; /* NULL for f32 */
  bool tf32;      /* the terms are TF32 values in f32 words (tf32x3) */
} form;

static const form forms[] = {
    {KILN_TYPE_F32, 3, f32_x3::dequant, f32_x3::input, false},
    {KILN_TYPE_F16, 3, f16_x3::dequant, f16_x3::input, false},
    {KILN_TYPE_BF16, 3, bf16_x3::dequant, bf16_x3::input, false},
    {KILN_TYPE_Q4_0, 3, q4_0_x3::dequant, q4_0_x3::input, false},
    {KILN_TYPE_Q5_0, 3, q5_0_x3::dequant, q5_0_x3::input, false},
    {KILN_TYPE_Q8_0, 3, q8_0_x3::dequant, q8_0_x3::input, false},
    {KILN_TYPE_Q4_K, 3, q4_k_x3::dequant, q4_k_x3::input, false},
    {KILN_TYPE_Q5_K, 3, q5_k_x3::dequant, q5_k_x3::input, false},
    {KILN_TYPE_Q6_K, 3, q6_k_x3::dequant, q6_k_x3::input, false},
    {KILN_TYPE_Q4_K, 1, q4_k_b1::dequant, q4_k_b1::input, false},
    {KILN_TYPE_F32, 1, f32_b1::dequant, f32_b1::input, false},
    {KILN_TYPE_Q4_K, 0, q4_k_f::dequant, NULL, false},
    {KILN_TYPE_Q6_K, 0, q6_k_f::dequant, NULL, false},
    {KILN_TYPE_F32, 3, f32_t3::dequant, f32_t3::input, true},
    {KILN_TYPE_F16, 3, f16_t3::dequant, f16_t3::input, true},
    {KILN_TYPE_Q8_0, 3, q8_0_t3::dequant, q8_0_t3::input, true},
    {KILN_TYPE_Q4_K, 3, q4_k_t3::dequant, q4_k_t3::input, true},
    {KILN_TYPE_Q6_K, 3, q6_k_t3::dequant, q6_k_t3::input, true},
};

enum { ROWS = 7, COLS = 5 };
static const unsigned grids[] = {1, 3, 200}; /* fewer, some and more threads than values */

static uint16_t lo_of(float v, uint16_t hi) { return kiln_f32_to_bf16(v - kiln_bf16_to_f32(hi)); }

/* v rounded to TF32's 11 significant bits, ties to even, by another road
 * than the kernel's bit arithmetic (frexp, rint in the default rounding
 * mode); normal values only, as the test's are. */
static float tf32_of(float v) {
  int e;
  const double m = frexp((double)v, &e); /* v = m 2^e, 0.5 <= |m| < 1 */
  return (float)ldexp(rint(ldexp(m, 11)), e - 11);
}
static float tf32_lo_of(float v, float hi) { return tf32_of(v - hi); }

/* The tile's values: what the form says of the f32 weights, bit for bit. */
static void check_tile(const form *f, const void *tile, const float *ref, unsigned grid) {
  for (int r = 0; r < ROWS; r++)
    for (int i = 0; i < K; i++) {
      const float v = ref[(size_t)r * K + i];
      if (f->terms == 0) {
        const float got = static_cast<const float *>(tile)[(size_t)r * K + i];
        if (kiln_f32_to_bits(got) != kiln_f32_to_bits(v))
          fail_msg("%s f32 tile (grid %u): row %d value %d is %a, core/dequant.c's %a",
                   kiln_type_name(f->type), grid, r, i, got, v);
        continue;
      }
      if (f->tf32) {
        const float *row = static_cast<const float *>(tile) + (size_t)r * 3 * K;
        const float hi = tf32_of(v), lo = tf32_lo_of(v, hi);
        if (kiln_f32_to_bits(row[i]) != kiln_f32_to_bits(hi) ||
            kiln_f32_to_bits(row[K + i]) != kiln_f32_to_bits(lo) ||
            kiln_f32_to_bits(row[2 * K + i]) != kiln_f32_to_bits(hi))
          fail_msg("%s tf32x3 tile (grid %u): row %d value %d is [%a | %a | %a], want [%a | %a | %a]",
                   kiln_type_name(f->type), grid, r, i, row[i], row[K + i], row[2 * K + i], hi, lo, hi);
        continue;
      }
      const uint16_t *row = static_cast<const uint16_t *>(tile) + (size_t)r * f->terms * K;
      const uint16_t hi = kiln_f32_to_bf16(v);
      if (row[i] != hi)
        fail_msg("%s bf16%s tile (grid %u): row %d value %d hi is 0x%04x, want 0x%04x",
                 kiln_type_name(f->type), f->terms == 3 ? "x3" : "", grid, r, i, row[i], hi);
      if (f->terms == 3 && (row[K + i] != lo_of(v, hi) || row[2 * K + i] != hi))
        fail_msg("%s bf16x3 tile (grid %u): row %d value %d is [%04x | %04x | %04x], want "
                 "[%04x | %04x | %04x]",
                 kiln_type_name(f->type), grid, r, i, row[i], row[K + i], row[2 * K + i], hi,
                 lo_of(v, hi), hi);
    }
}

/* The activations' operand, as the form lays it out. */
static void check_input(const form *f, const void *yv, const float *x, unsigned grid) {
  const uint16_t *y = static_cast<const uint16_t *>(yv);
  for (int c = 0; c < COLS; c++)
    for (int i = 0; i < K; i++) {
      const float v = x[(size_t)c * K + i];
      if (f->tf32) {
        const float *col = static_cast<const float *>(yv) + (size_t)c * 3 * K;
        const float hi = tf32_of(v), lo = tf32_lo_of(v, hi);
        if (kiln_f32_to_bits(col[i]) != kiln_f32_to_bits(hi) ||
            kiln_f32_to_bits(col[K + i]) != kiln_f32_to_bits(hi) ||
            kiln_f32_to_bits(col[2 * K + i]) != kiln_f32_to_bits(lo))
          fail_msg("gemm_input tf32x3 (grid %u): column %d value %d is wrong", grid, c, i);
        continue;
      }
      const uint16_t hi = kiln_f32_to_bf16(v);
      const uint16_t *col = y + (size_t)c * f->terms * K;
      const bool ok = f->terms == 1 ? col[i] == hi
                                    : col[i] == hi && col[K + i] == hi && col[2 * K + i] == lo_of(v, hi);
      if (!ok)
        fail_msg("gemm_input bf16%s (grid %u): column %d value %d is wrong", f->terms == 3 ? "x3" : "",
                 grid, c, i);
    }
}

/* Each column of the GEMM the operands feed (3 k or k terms, products
 * exact in f64), against the f64 product of the f32 weights and x. */
static double term(const form *f, const void *v, size_t j) {
  return f->tf32 ? (double)static_cast<const float *>(v)[j]
                 : (double)kiln_bf16_to_f32(static_cast<const uint16_t *>(v)[j]);
}

static kg_metrics gemm_error(const form *f, const void *tile, const void *xin, const float *ref,
                             const float *x) {
  const int kk = f->terms * K;
  static float test[ROWS * COLS];
  static double want[ROWS * COLS];
  for (int c = 0; c < COLS; c++)
    for (int r = 0; r < ROWS; r++) {
      double s = 0, t = 0;
      for (int j = 0; j < kk; j++)
        s += term(f, tile, (size_t)r * kk + j) * term(f, xin, (size_t)c * kk + j);
      for (int i = 0; i < K; i++) t += (double)ref[(size_t)r * K + i] * (double)x[(size_t)c * K + i];
      test[c * ROWS + r] = (float)s;
      want[c * ROWS + r] = t;
    }
  return kg_compare_f64(test, want, ROWS * COLS);
}

static void test_operands(void **state) {
  (void)state;
  kg_rng rng = kg_rng_new(20261207);
  float *x = static_cast<float *>(kg_alloc(sizeof(float) * K * COLS));
  kg_fill(&rng, x, (int64_t)K * COLS, -1.0, 1.0);
  for (int i = 0; i < K * COLS; i += 37) x[i] *= 30.0f; /* outliers, as hidden states have */
  for (size_t fi = 0; fi < sizeof forms / sizeof forms[0]; fi++) {
    const form *f = &forms[fi];
    uint8_t *w = kg_pack_weight(f->type, K, ROWS, 0, 0, &rng);
    float *ref = kg_dequant(f->type, w, K, ROWS);
    const unsigned term_bytes = f->tf32 ? 4u : 2u;
    const size_t tile_bytes = (size_t)ROWS * K * (f->terms ? term_bytes * (unsigned)f->terms : 4u);
    const size_t xin_bytes = (size_t)term_bytes * 3 * K * COLS;
    void *tile = kg_alloc(tile_bytes);
    void *xin = kg_alloc(xin_bytes);
    for (size_t g = 0; g < sizeof grids / sizeof grids[0]; g++) {
      memset(tile, 0xff, tile_bytes);
      const char *e = f->dequant(grids[g], w, tile, ROWS);
      if (e) fail_msg("%s dequant_rows: %s", kiln_type_name(f->type), e);
      check_tile(f, tile, ref, grids[g]);
      if (!f->input) continue;
      memset(xin, 0xff, xin_bytes);
      e = f->input(grids[g], x, xin, COLS);
      if (e) fail_msg("gemm_input: %s", e);
      check_input(f, xin, x, grids[g]);
    }
    if (f->terms) {
      const kg_metrics m = gemm_error(f, tile, xin, ref, x);
      printf("%-5s %s: GEMM rel L2 %.2e, norm ratio - 1 %.2e\n", kiln_type_name(f->type),
             f->tf32 ? "tf32x3" : f->terms == 3 ? "bf16x3" : "bf16  ", m.rel_l2, m.norm_ratio - 1.0);
      /* tf32x3: 22 significant bits a value, Wl.Xl left out (~2^-22) */
      if (f->tf32 && !kg_close(&m, 3e-7))
        fail_msg("%s tf32x3: rel L2 %.3e, norm ratio %.9f against the f64 product",
                 kiln_type_name(f->type), m.rel_l2, m.norm_ratio);
      if (!f->tf32 && f->terms == 3 && !kg_close(&m, 3e-5))
        fail_msg("%s bf16x3: rel L2 %.3e, norm ratio %.9f against the f64 product",
                 kiln_type_name(f->type), m.rel_l2, m.norm_ratio);
      if (f->terms == 1 && m.rel_l2 < 1e-4)
        fail_msg("%s bf16: rel L2 %.3e: one term should be coarser than this (is the test "
                 "blind?)", kiln_type_name(f->type), m.rel_l2);
    }
    free(xin);
    free(tile);
    free(ref);
    free(w);
  }
  free(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_operands)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
