/* One instantiation of the prefill GEMM's operand kernels compiled for the
 * host (test_gemm_operand_host.cc): include inside a namespace of its own
 * after defining KILN_WT_<TYPE> (the weight type), KILN_OPERAND_<form>
 * (f32, bf16, bf16x3, tf32x3), KILN_K, KILN_BLOCK and KILN_HOST_SHAPE (a
 * token naming the instantiation); defines dequant(grid, w, tile, n_rows)
 * and, for the term forms, input(grid, x, y, n_cols), each a launch of the
 * kernel on the emulator (nullptr, or what went wrong), and undefines
 * every macro the kernels and the caller set, ready for the next one. Not
 * a header of its own: no include guard. */
#define KILN_HOST_CAT2(a, b) a##b
#define KILN_HOST_CAT(a, b) KILN_HOST_CAT2(a, b)
/* Distinct names for the kernels' extern "C" entries. */
#define kiln_dequant_rows KILN_HOST_CAT(KILN_HOST_SHAPE, _dequant)
#define kiln_gemm_input KILN_HOST_CAT(KILN_HOST_SHAPE, _input)
#include "wtype_common.cuh.tmpl"
#include "gemm_operand.cuh.tmpl"
#include "dequant_rows.cu.tmpl"
#if KILN_OPERAND_TERMS > 0
#include "gemm_input.cu.tmpl"
#endif

static const char *dequant(unsigned grid, const unsigned char *w, void *tile, int n_rows) {
  return kiln_emu::launch(kiln_emu_dim3{grid, 1, 1}, KILN_BLOCK, [&] {
    kiln_dequant_rows(w, static_cast<kiln_tile_t *>(tile), n_rows);
  });
}
#if KILN_OPERAND_TERMS > 0
static const char *input(unsigned grid, const float *x, void *y, int n_cols) {
  return kiln_emu::launch(kiln_emu_dim3{grid, 1, 1}, KILN_BLOCK,
                          [&] { kiln_gemm_input(x, static_cast<kiln_term_t *>(y), n_cols); });
}
#endif
static const int terms = KILN_OPERAND_TERMS;

#undef kiln_dequant_rows
#undef kiln_gemm_input
#undef KILN_HOST_CAT2
#undef KILN_HOST_CAT
#undef KILN_HOST_SHAPE
#undef KILN_K
#undef KILN_BLOCK
#undef KILN_TILE_ROW
#undef KILN_OPERAND_TERMS
#undef KILN_OPERAND_f32
#undef KILN_OPERAND_bf16
#undef KILN_OPERAND_bf16x3
#undef KILN_OPERAND_tf32x3
#undef KILN_OPERAND_TF32
#undef kiln_x3_split
#undef KILN_WT_BLOCK
#undef KILN_WT_BYTES
#undef KILN_WT_QUANT
#undef KILN_WT_ROW_BYTES
#undef KILN_WT_F32
#undef KILN_WT_F16
#undef KILN_WT_BF16
#undef KILN_WT_Q4_0
#undef KILN_WT_Q5_0
#undef KILN_WT_Q8_0
#undef KILN_WT_Q4_K
#undef KILN_WT_Q5_K
#undef KILN_WT_Q6_K
