/* One instantiation of the FP8 GEMM's operand kernels compiled for the
 * host (test_fp8_host.cc): include inside a namespace of its own after
 * defining KILN_WT_<TYPE> (the weight type), KILN_K, KILN_BLOCK and
 * KILN_HOST_SHAPE (a token naming the instantiation); defines rows(grid,
 * w, tile, n_rows) and input(grid, x, y, n_cols), each a launch of the
 * kernel on the emulator (nullptr, or what went wrong), and undefines
 * every macro the kernels and the caller set, ready for the next one. Not
 * a header of its own: no include guard. */
#define KILN_HOST_CAT2(a, b) a##b
#define KILN_HOST_CAT(a, b) KILN_HOST_CAT2(a, b)
/* Distinct names for the kernels' extern "C" entries. */
#define kiln_fp8_rows KILN_HOST_CAT(KILN_HOST_SHAPE, _rows)
#define kiln_fp8_input KILN_HOST_CAT(KILN_HOST_SHAPE, _input)
#include "wtype_common.cuh.tmpl"
#include "fp8_e4m3.cuh.tmpl"
#include "fp8_rows.cu.tmpl"
#include "fp8_input.cu.tmpl"

static const char *rows(unsigned grid, const unsigned char *w, unsigned char *tile, int n_rows, int n_pad) {
  return kiln_emu::launch(kiln_emu_dim3{grid, 1, 1}, KILN_BLOCK,
                          [&] { kiln_fp8_rows(w, tile, n_rows, n_pad); });
}
static const char *input(unsigned grid, const float *x, unsigned char *y, int n_cols, int n_pad) {
  return kiln_emu::launch(kiln_emu_dim3{grid, 1, 1}, KILN_BLOCK,
                          [&] { kiln_fp8_input(x, y, n_cols, n_pad); });
}
static const long long k = KILN_K, k16 = KILN_FP8_K16;
static const kiln_type type = KILN_HOST_TYPE;

#undef kiln_fp8_rows
#undef kiln_fp8_input
#undef KILN_HOST_CAT2
#undef KILN_HOST_CAT
#undef KILN_HOST_SHAPE
#undef KILN_HOST_TYPE
#undef KILN_K
#undef KILN_BLOCK
#undef KILN_FP8_K16
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
