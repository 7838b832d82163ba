/* One instantiation of the prefill's integer tensor-core GEMM (quantize,
 * then mmq) compiled for the host (test_mmq_host.cc): include inside a
 * namespace of its own after defining KILN_MMQ_<TYPE> (the weight type),
 * KILN_XQ_BITS (16 or 8), KILN_K, KILN_BLOCK (quantize's threads),
 * KILN_TM, KILN_TN, KILN_WARPS, KILN_PREFETCH (mmq's tile and staging) and KILN_HOST_SHAPE (a token
 * naming it); defines `shape`, an mmq_shape, and undefines every macro the
 * kernels and the caller set, ready for the next one. Not a header of its
 * own: no include guard. */
#define KILN_HOST_CAT2(a, b) a##b
#define KILN_HOST_CAT(a, b) KILN_HOST_CAT2(a, b)
#define kiln_mmq KILN_HOST_CAT(KILN_HOST_SHAPE, _mmq)
#define kiln_quantize KILN_HOST_CAT(KILN_HOST_SHAPE, _quantize)
#include "act_quant.cuh.tmpl"
#include "quantize.cu.tmpl"
#include "imma.cuh.tmpl"
#include "mmq_types.cuh.tmpl"
#include "mmq.cu.tmpl"

static const char *quantize(const float *x, unsigned char *xq, int n_cols) {
  const unsigned blocks = (KILN_K / 32 + KILN_BLOCK / 32 - 1) / (KILN_BLOCK / 32);
  return kiln_emu::launch(kiln_emu_dim3{blocks, (unsigned)n_cols, 1}, KILN_BLOCK,
                          [&] { kiln_quantize(x, xq, n_cols); });
}
static const char *gemm(const unsigned char *w, const unsigned char *xq, float *y, int n_rows,
                        int n_cols) {
  return kiln_emu::launch(kiln_emu_dim3{(unsigned)((n_rows + KILN_TM - 1) / KILN_TM),
                                        (unsigned)((n_cols + KILN_TN - 1) / KILN_TN), 1},
                          32 * KILN_WARPS, [&] { kiln_mmq(w, xq, y, n_rows, n_cols); });
}

#define KILN_HOST_STR2(a) #a
#define KILN_HOST_STR(a) KILN_HOST_STR2(a)
static const mmq_shape shape = {KILN_HOST_STR(KILN_HOST_SHAPE), KILN_XQ_BITS, KILN_K, KILN_TM,
                                KILN_TN, KILN_WARPS, (long long)KILN_XQ_COL_STRIDE(KILN_K),
                                quantize, gemm};

#undef KILN_HOST_CAT2
#undef KILN_HOST_CAT
#undef KILN_HOST_STR2
#undef KILN_HOST_STR
#undef kiln_mmq
#undef kiln_quantize
#undef KILN_HOST_SHAPE
#undef KILN_K
#undef KILN_BLOCK
#undef KILN_TM
#undef KILN_TN
#undef KILN_WARPS
#undef KILN_PREFETCH
#undef KILN_WU
#undef KILN_NWU
#undef KILN_NSU
#undef KILN_NXU
#undef KILN_NXSU
#undef KILN_PER_THREAD
#undef KILN_THREADS
#undef KILN_KSTEP
#undef KILN_KS
#undef KILN_NSB
#undef KILN_NXB
#undef KILN_WM
#undef KILN_WN
#undef KILN_FM
#undef KILN_FN
#undef KILN_MMQ_QK
#undef KILN_MMQ_BYTES
#undef KILN_MMQ_SB
#undef KILN_MMQ_MIN
#undef KILN_MMQ_WIDE
#undef KILN_MMQ_Q4_0
#undef KILN_MMQ_Q5_0
#undef KILN_MMQ_Q8_0
#undef KILN_MMQ_Q4_K
#undef KILN_MMQ_Q5_K
#undef KILN_MMQ_Q6_K
#undef KILN_XQ_BITS
