/* The prefill's integer tensor-core GEMM (gemm = q16mma: backends/
 * cuda-common/kernels/quantize.cu.tmpl, then mmq.cu.tmpl with
 * mmq_types.cuh.tmpl and imma.cuh.tmpl) compiled for the host and run
 * block by block on tests/unit/cuda_block_emu.h, mma.sync m16n8k32 and
 * m16n8k16 (s8 x s8 and s8 x u8) emulated from the PTX ISA's fragment
 * layouts (imma.cuh: each output gathered from the lanes and registers
 * that hold its operands), for every block weight type at the backend's
 * tile (128 x 64, 4 warps) and Q4_K / Q6_K at others (64 x 32 over 8 warps
 * in a 4 x 2 grid, 16 x 8 in one warp), on random GGUF blocks
 * (kg_pack_weight) and activations with a 30x outlier block, an all-zero
 * block and a column 1000x smaller, over partial tiles at both edges
 * (N = 160 rows, T = 70 tokens):
 *   - against the f64 product of the dequantized weights (core/dequant.c)
 *     and the f32 activations: relative L2 and |norm ratio - 1| within
 *     5e-5 at q16, the worst column's too (cosine is printed, never
 *     enough alone); q8 (one IMMA pass, llama.cpp's MMQ precision) is
 *     run too and must come out worse than q16 by 10x, so a kernel that
 *     dropped the lo pass fails;
 *   - against the decode path on the same quantized activations
 *     (matvec_q_types.cuh's kiln_mq<T>::dot, every lane's share of every
 *     block, the q16 matvec that passes the 7B's parity): relative L2
 *     within 2e-6 (the same exact integer sums, scales applied in another
 *     f32 order);
 *   - the largest integer sums each type can form (every quant and scale
 *     at its extreme, |X| = 32767 everywhere) the same way: no s32 sum
 *     overflows;
 *   - every output written (y starts as NaN), none past the edges.
 * No GPU needed: tests/gpu/test_gpu_ops runs the same kernels on a device. */
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

/* What act_quant.cuh and matvec_q_host_prims.h use beyond the emulator's. */
struct alignas(8) float2 {
  float x, y;
};
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
static inline int __float2int_rn(float f) { return (int)rintf(f); }
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t v = (uint64_t)y << 32 | x;
  unsigned r = 0;
  for (int i = 0; i < 4; i++) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 255u) << (8 * i);
  return r;
}

#define KILN_HOST_EMULATION 1

typedef struct mmq_shape {
  const char *name;
  int bits, k, tm, tn, warps;
  long long col_stride;
  const char *(*quantize)(const float *x, unsigned char *xq, int n_cols);
  const char *(*gemm)(const unsigned char *w, const unsigned char *xq, float *y, int n_rows,
                      int n_cols);
} mmq_shape;

enum { K = 512, N_ROWS = 160, N_COLS = 70 };

#define KILN_XQ_BITS 16
#define KILN_MMQ_Q4_0 1
#define KILN_K 512
#define KILN_BLOCK 128
#define KILN_TM 128
#define KILN_TN 64
#define KILN_WARPS 4
#define KILN_PREFETCH 0
#define KILN_HOST_SHAPE q4_0_std
namespace q4_0_std {
#include "mmq_host_shape.h"
}
#define KILN_XQ_BITS 16
#define KILN_MMQ_Q5_0 1
#define KILN_K 512
#define KILN_BLOCK 128
#define KILN_TM 128
#define KILN_TN 64
#define KILN_WARPS 4
#define KILN_PREFETCH 0
#define KILN_HOST_SHAPE q5_0_std
namespace q5_0_std {
#include "mmq_host_shape.h"
}
#define KILN_XQ_BITS 16
#define KILN_MMQ_Q8_0 1
#define KILN_K 512
#define KILN_BLOCK 128
#define KILN_TM 128
#define KILN_TN 64
#define KILN_WARPS 4
#define KILN_PREFETCH 0
#define KILN_HOST_SHAPE q8_0_std
namespace q8_0_std {
#include "mmq_host_shape.h"
}
#define KILN_XQ_BITS 16
#define KILN_MMQ_Q4_K 1
#define KILN_K 512
#define KILN_BLOCK 128
#define KILN_TM 128
#define KILN_TN 64
#define KILN_WARPS 4
#define KILN_PREFETCH 0
#define KILN_HOST_SHAPE q4_k_std
namespace q4_k_std {
#include "mmq_host_shape.h"
}
#define KILN_XQ_BITS 16
#define KILN_MMQ_Q5_K 1
#define KILN_K 512
#define KILN_BLOCK 128
#define KILN_TM 128
#define KILN_TN 64
#define KILN_WARPS 4
#define KILN_PREFETCH 0
#define KILN_HOST_SHAPE q5_k_std
namespace q5_k_std {
#include "mmq_host_shape.h"
}
#define KILN_XQ_BITS 16
#define KILN_MMQ_Q6_K 1
#define KILN_K 512
#define KILN_BLOCK 128
#define KILN_TM 128
#define KILN_TN 64
#define KILN_WARPS 4
#define KILN_PREFETCH 0
#define KILN_HOST_SHAPE q6_k_std
namespace q6_k_std {
#include "mmq_host_shape.h"
}
/* other tiles: 8 warps in a 4 x 2 grid, and one warp */
#define KILN_XQ_BITS 16
#define KILN_MMQ_Q4_K 1
#define KILN_K 512
#define KILN_BLOCK 256
#define KILN_TM 64
#define KILN_TN 32
#define KILN_WARPS 8
#define KILN_PREFETCH 0
#define KILN_HOST_SHAPE q4_k_w8
namespace q4_k_w8 {
#include "mmq_host_shape.h"
}
#define KILN_XQ_BITS 16
#define KILN_MMQ_Q6_K 1
#define KILN_K 512
#define KILN_BLOCK 256
#define KILN_TM 64
#define KILN_TN 32
#define KILN_WARPS 8
#define KILN_PREFETCH 0
#define KILN_HOST_SHAPE q6_k_w8
namespace q6_k_w8 {
#include "mmq_host_shape.h"
}
#define KILN_XQ_BITS 16
#define KILN_MMQ_Q6_K 1
#define KILN_K 512
#define KILN_BLOCK 32
#define KILN_TM 16
#define KILN_TN 8
#define KILN_WARPS 1
#define KILN_PREFETCH 0
#define KILN_HOST_SHAPE q6_k_w1
namespace q6_k_w1 {
#include "mmq_host_shape.h"
}
/* prefetch 1: the next step's units staged in registers during the
 * compute */
#define KILN_XQ_BITS 16
#define KILN_MMQ_Q4_K 1
#define KILN_K 512
#define KILN_BLOCK 128
#define KILN_TM 128
#define KILN_TN 64
#define KILN_WARPS 4
#define KILN_PREFETCH 1
#define KILN_HOST_SHAPE q4_k_pf
namespace q4_k_pf {
#include "mmq_host_shape.h"
}
#define KILN_XQ_BITS 16
#define KILN_MMQ_Q5_K 1
#define KILN_K 512
#define KILN_BLOCK 128
#define KILN_TM 128
#define KILN_TN 64
#define KILN_WARPS 4
#define KILN_PREFETCH 1
#define KILN_HOST_SHAPE q5_k_pf
namespace q5_k_pf {
#include "mmq_host_shape.h"
}
#define KILN_XQ_BITS 16
#define KILN_MMQ_Q6_K 1
#define KILN_K 512
#define KILN_BLOCK 128
#define KILN_TM 128
#define KILN_TN 64
#define KILN_WARPS 4
#define KILN_PREFETCH 1
#define KILN_HOST_SHAPE q6_k_pf
namespace q6_k_pf {
#include "mmq_host_shape.h"
}
#define KILN_XQ_BITS 16
#define KILN_MMQ_Q8_0 1
#define KILN_K 512
#define KILN_BLOCK 128
#define KILN_TM 128
#define KILN_TN 64
#define KILN_WARPS 4
#define KILN_PREFETCH 1
#define KILN_HOST_SHAPE q8_0_pf
namespace q8_0_pf {
#include "mmq_host_shape.h"
}
#define KILN_XQ_BITS 16
#define KILN_MMQ_Q4_K 1
#define KILN_K 512
#define KILN_BLOCK 256
#define KILN_TM 64
#define KILN_TN 32
#define KILN_WARPS 8
#define KILN_PREFETCH 1
#define KILN_HOST_SHAPE q4_k_w8_pf
namespace q4_k_w8_pf {
#include "mmq_host_shape.h"
}
#define KILN_XQ_BITS 16
#define KILN_MMQ_Q6_K 1
#define KILN_K 512
#define KILN_BLOCK 32
#define KILN_TM 16
#define KILN_TN 8
#define KILN_WARPS 1
#define KILN_PREFETCH 1
#define KILN_HOST_SHAPE q6_k_w1_pf
namespace q6_k_w1_pf {
#include "mmq_host_shape.h"
}
/* q8: one IMMA pass */
#define KILN_XQ_BITS 8
#define KILN_MMQ_Q4_K 1
#define KILN_K 512
#define KILN_BLOCK 128
#define KILN_TM 128
#define KILN_TN 64
#define KILN_WARPS 4
#define KILN_PREFETCH 0
#define KILN_HOST_SHAPE q4_k_q8
namespace q4_k_q8 {
#include "mmq_host_shape.h"
}
#define KILN_XQ_BITS 8
#define KILN_MMQ_Q6_K 1
#define KILN_K 512
#define KILN_BLOCK 128
#define KILN_TM 128
#define KILN_TN 64
#define KILN_WARPS 4
#define KILN_PREFETCH 0
#define KILN_HOST_SHAPE q6_k_q8
namespace q6_k_q8 {
#include "mmq_host_shape.h"
}

/* The decode path's q16 decoders (matvec_q_types.cuh), on the host. */
#define KILN_XQ_BITS 16
namespace dec16 {
#include "act_quant.cuh.tmpl"
#include "matvec_q_host_prims.h"
#include "matvec_q_types.cuh.tmpl"

/* Row r of w times quantized column xq, as matvec_q sums it: every lane's
 * share of every block. */
template <int T> static double row_dot(const kiln_u8 *w, int k, const kiln_u8 *xq) {
  typedef kiln_mq<T> Q;
  double s = 0.0;
  for (int blk = 0; blk < k / Q::QK; blk++)
    for (int sub = 0; sub < Q::LPB; sub++) {
      typename Q::frag f;
      Q::load(f, xq, k, blk * Q::QK, sub);
      s += Q::dot(w + (long long)blk * Q::BYTES, sub, f);
    }
  return s;
}
static double dot(kiln_type type, const kiln_u8 *w, int k, const kiln_u8 *xq) {
  switch (type) {
  case KILN_TYPE_Q4_0: return row_dot<KILN_QT_Q4_0>(w, k, xq);
  case KILN_TYPE_Q5_0: return row_dot<KILN_QT_Q5_0>(w, k, xq);
  case KILN_TYPE_Q8_0: return row_dot<KILN_QT_Q8_0>(w, k, xq);
  case KILN_TYPE_Q4_K: return row_dot<KILN_QT_Q4_K>(w, k, xq);
  case KILN_TYPE_Q5_K: return row_dot<KILN_QT_Q5_K>(w, k, xq);
  case KILN_TYPE_Q6_K: return row_dot<KILN_QT_Q6_K>(w, k, xq);
  default: fail_msg("no decoder for %s", kiln_type_name(type));
  }
  return 0.0;
}
} // namespace dec16
#undef KILN_XQ_BITS

/* ||a - b|| / ||b||, ||a|| / ||b|| and cosine over n values (a f32, b f64). */
typedef struct err3 {
  double rel, ratio, cosine;
} err3;
static err3 compare(const float *a, const double *b, size_t n, size_t stride) {
  double d2 = 0, a2 = 0, b2 = 0, ab = 0;
  for (size_t i = 0; i < n; i++) {
    const double x = a[i * stride], y = b[i * stride];
    d2 += (x - y) * (x - y), a2 += x * x, b2 += y * y, ab += x * y;
  }
  err3 e = {sqrt(d2 / b2), sqrt(a2 / b2), ab / sqrt(a2 * b2)};
  if (!isfinite(e.rel) || !isfinite(e.ratio)) e.rel = e.ratio = INFINITY;
  return e;
}

/* The largest integer sums a sub-block can give: every weight block of
 * `type` at its extreme quant (Q8_0 -128, Q6_K q - 32 = -32 with every
 * scale -128, Q4_K / Q5_K every level and scale 63 with no minimum) and d
 * = 1, for extreme_x (every |x| of a block equal: X = +-32767). */
static void extreme_blocks(kiln_type type, uint8_t *w, size_t wbytes) {
  const size_t bb = (size_t)kiln_type_block_bytes(type);
  for (uint8_t *b = w; b < w + wbytes; b += bb) {
    switch (type) {
    case KILN_TYPE_Q8_0: memset(b + 2, 0x80, 32); b[0] = 0x00, b[1] = 0x3c; break;
    case KILN_TYPE_Q6_K:
      memset(b, 0, 192);
      memset(b + 192, 0x80, 16);
      b[208] = 0x00, b[209] = 0x3c;
      break;
    default: /* Q4_K, Q5_K */
      memset(b, 0xFF, bb);
      b[0] = 0x00, b[1] = 0x3c, b[2] = b[3] = 0x00;
    }
  }
}

/* x of all +1 or -1 per block (the sign from the block's index and the
 * column), so every block quantizes to X = +-32767 (q16) or +-127. */
static void extreme_x(float *x, int k, int t) {
  for (int c = 0; c < t; c++)
    for (int i = 0; i < k; i++) x[(size_t)c * k + i] = ((i / 32 + c) % 3 == 0) ? -1.0f : 1.0f;
}

/* One case: shape s on weights of `type` (random blocks, or with extreme
 * set the largest integer sums, extreme_blocks and extreme_x). Returns 0
 * when it passes; sets *out_rel to the whole output's relative L2
 * against f64. */
static int run_case(const mmq_shape &s, kiln_type type, uint64_t seed, double *out_rel,
                    bool extreme = false) {
  const int k = s.k, n = N_ROWS, t = N_COLS;
  kg_rng r = kg_rng_new(seed);
  const size_t wbytes = (size_t)kiln_type_row_bytes(type, k) * n;
  uint8_t *packed = kg_pack_weight(type, k, n, 0, 0, &r);
  uint8_t *w = (uint8_t *)aligned_alloc(256, (wbytes + 255) / 256 * 256);
  memcpy(w, packed, wbytes);
  if (extreme) extreme_blocks(type, w, wbytes);
  float *wd = kg_dequant(type, w, k, n);
  float *x = (float *)kg_alloc((size_t)k * t * sizeof(float));
  kg_fill(&r, x, (int64_t)k * t, -1, 1);
  for (int i = 64; i < 96; i++) x[(size_t)3 * k + i] *= 30.0f; /* an outlier block */
  for (int i = 128; i < 160; i++) x[(size_t)5 * k + i] = 0.0f; /* an all-zero block */
  for (int i = 0; i < k; i++) x[(size_t)7 * k + i] *= 1e-3f;   /* a small column */
  if (extreme) extreme_x(x, k, t);
  const size_t xq_bytes = (size_t)s.col_stride * t;
  unsigned char *xq = (unsigned char *)aligned_alloc(256, (xq_bytes + 255) / 256 * 256);
  memset(xq, 0xA5, xq_bytes);
  float *y = (float *)kg_alloc((size_t)n * t * sizeof(float));
  for (size_t i = 0; i < (size_t)n * t; i++) y[i] = NAN;
  const char *e = s.quantize(x, xq, t);
  if (!e) e = s.gemm(w, xq, y, n, t);
  if (e) fail_msg("%s: %s", s.name, e);

  double *ref = (double *)kg_alloc((size_t)n * t * sizeof(double));
  double *dec = (double *)kg_alloc((size_t)n * t * sizeof(double));
  for (int c = 0; c < t; c++)
    for (int row = 0; row < n; row++) {
      double acc = 0.0;
      for (int i = 0; i < k; i++) acc += (double)wd[(size_t)row * k + i] * (double)x[(size_t)c * k + i];
      ref[(size_t)c * n + row] = acc;
      if (s.bits == 16)
        dec[(size_t)c * n + row] = dec16::dot(type, w + (size_t)row * kiln_type_row_bytes(type, k),
                                              k, xq + (size_t)c * s.col_stride);
    }
  int bad = 0;
  size_t unwritten = 0;
  for (size_t i = 0; i < (size_t)n * t; i++) unwritten += !isfinite(y[i]);
  const err3 all = compare(y, ref, (size_t)n * t, 1);
  double worst_col = 0, worst_ratio = 0;
  for (int c = 0; c < t; c++) {
    const err3 ec = compare(y + (size_t)c * n, ref + (size_t)c * n, (size_t)n, 1);
    worst_col = ec.rel > worst_col ? ec.rel : worst_col;
    worst_ratio = fabs(ec.ratio - 1) > worst_ratio ? fabs(ec.ratio - 1) : worst_ratio;
  }
  const double tol = s.bits == 16 ? 5e-5 : 2e-2;
  bool ok = unwritten == 0 && all.rel <= tol && fabs(all.ratio - 1) <= tol && worst_col <= tol &&
            worst_ratio <= tol;
  printf("%-9s %-4s q%d tile %3dx%-3d %d warps: vs f64 rel L2 %.2e (worst column %.2e), "
         "|ratio-1| %.2e (worst %.2e), cosine %.9f, unwritten %zu",
         s.name, kiln_type_name(type), s.bits, s.tm, s.tn, s.warps, all.rel, worst_col,
         fabs(all.ratio - 1), worst_ratio, all.cosine, unwritten);
  if (s.bits == 16) {
    const err3 ed = compare(y, dec, (size_t)n * t, 1);
    printf("; vs decode q16 rel L2 %.2e, |ratio-1| %.2e", ed.rel, fabs(ed.ratio - 1));
    ok = ok && ed.rel <= 2e-6 && fabs(ed.ratio - 1) <= 2e-6;
  }
  printf("%s\n", ok ? "" : "  FAIL");
  bad += !ok;
  *out_rel = all.rel;
  free(ref);
  free(dec);
  free(y);
  free(xq);
  free(x);
  free(wd);
  free(w);
  free(packed);
  return bad;
}

static void test_every_type(void **state) {
  (void)state;
  double rel;
  int bad = 0;
  bad += run_case(q4_0_std::shape, KILN_TYPE_Q4_0, 1, &rel);
  bad += run_case(q5_0_std::shape, KILN_TYPE_Q5_0, 2, &rel);
  bad += run_case(q8_0_std::shape, KILN_TYPE_Q8_0, 3, &rel);
  bad += run_case(q4_k_std::shape, KILN_TYPE_Q4_K, 4, &rel);
  bad += run_case(q5_k_std::shape, KILN_TYPE_Q5_K, 5, &rel);
  bad += run_case(q6_k_std::shape, KILN_TYPE_Q6_K, 6, &rel);
  assert_int_equal(bad, 0);
}

static void test_other_tiles(void **state) {
  (void)state;
  double rel;
  int bad = 0;
  bad += run_case(q4_k_w8::shape, KILN_TYPE_Q4_K, 7, &rel);
  bad += run_case(q6_k_w8::shape, KILN_TYPE_Q6_K, 8, &rel);
  bad += run_case(q6_k_w1::shape, KILN_TYPE_Q6_K, 9, &rel);
  assert_int_equal(bad, 0);
}

/* The largest integer sums (Q8_0: 32 x 128 x 32767 = 1.3e8 a sub-block,
 * 256 x sum(q H) just as large before the lo pass; Q6_K's scale -128 times
 * 16 x 32 x 32767) stay exact in the s32 accumulators: within f32 rounding
 * of f64 as the random cases are. */
static void test_extremes(void **state) {
  (void)state;
  double rel;
  int bad = 0;
  bad += run_case(q8_0_std::shape, KILN_TYPE_Q8_0, 12, &rel, true);
  bad += run_case(q6_k_std::shape, KILN_TYPE_Q6_K, 13, &rel, true);
  bad += run_case(q4_k_std::shape, KILN_TYPE_Q4_K, 14, &rel, true);
  bad += run_case(q5_k_std::shape, KILN_TYPE_Q5_K, 15, &rel, true);
  assert_int_equal(bad, 0);
}

/* q8 (the hi bytes alone) against q16 on the same weights and x: q16's
 * lo pass must make it at least 10x closer to f64. */
static void test_q8_against_q16(void **state) {
  (void)state;
  double r16, r8;
  int bad = 0;
  bad += run_case(q4_k_std::shape, KILN_TYPE_Q4_K, 10, &r16);
  bad += run_case(q4_k_q8::shape, KILN_TYPE_Q4_K, 10, &r8);
  printf("Q4_K: q16 %.2e, q8 %.2e (%.0fx)\n", r16, r8, r8 / r16);
  bad += !(r8 >= 10 * r16);
  bad += run_case(q6_k_std::shape, KILN_TYPE_Q6_K, 11, &r16);
  bad += run_case(q6_k_q8::shape, KILN_TYPE_Q6_K, 11, &r8);
  printf("Q6_K: q16 %.2e, q8 %.2e (%.0fx)\n", r16, r8, r8 / r16);
  bad += !(r8 >= 10 * r16);
  assert_int_equal(bad, 0);
}

/* prefetch = 1 stages the same bytes into the same tiles one step ahead:
 * the same sums in the same order, so the same errors to the last bit as
 * prefetch = 0 on the same data (every unit kind, the wide and the 4-value
 * weight loads, per-thread shares that divide evenly and that do not). */
static void test_prefetch(void **state) {
  (void)state;
  struct {
    const mmq_shape *pf, *base;
    kiln_type type;
  } const pairs[] = {{&q4_k_pf::shape, &q4_k_std::shape, KILN_TYPE_Q4_K},
                     {&q5_k_pf::shape, &q5_k_std::shape, KILN_TYPE_Q5_K},
                     {&q6_k_pf::shape, &q6_k_std::shape, KILN_TYPE_Q6_K},
                     {&q8_0_pf::shape, &q8_0_std::shape, KILN_TYPE_Q8_0},
                     {&q4_k_w8_pf::shape, &q4_k_w8::shape, KILN_TYPE_Q4_K},
                     {&q6_k_w1_pf::shape, &q6_k_w1::shape, KILN_TYPE_Q6_K}};
  int bad = 0;
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    double a, b;
    bad += run_case(*pairs[i].base, pairs[i].type, 20 + (int)i, &b);
    bad += run_case(*pairs[i].pf, pairs[i].type, 20 + (int)i, &a);
    if (a != b) {
      printf("  FAIL %s: rel L2 %.17g, without prefetch %.17g\n", pairs[i].pf->name, a, b);
      bad++;
    }
  }
  assert_int_equal(bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_type),
                                     cmocka_unit_test(test_other_tiles),
                                     cmocka_unit_test(test_prefetch),
                                     cmocka_unit_test(test_extremes),
                                     cmocka_unit_test(test_q8_against_q16)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
