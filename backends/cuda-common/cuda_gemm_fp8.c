/* gemm = fp8: the batched prefill's MUL_MAT as a cuBLASLt FP8 GEMM,
 * Y[N, T] = W[K, N]^T X[K, T] with e4m3 operands, f32 sums and f32 output.
 *
 * The weight goes, a tile of rows at a time, through fp8_rows (each row's
 * values bit-exact to core/dequant.c, then divided by the row's scale
 * amax / fp8_max and rounded to e4m3); the activations through fp8_input
 * (the same with a scale a token), once for every GEMM that shares them
 * (the x16 cache of cuda_gemm.c). Both scales are computed on the device
 * from the data and read by cuBLASLt as OUTER_VEC_32F vectors (one f32 a
 * row of op(A), one a column of B): D[i, j] = sa[i] sb[j] sum_k qa qb.
 * They are runtime data, never part of a kernel; what the kernels bake is
 * fp8_max (448: the whole e4m3 range), and it is in their descriptors.
 *
 * e4m3 keeps 3 mantissa bits: each operand is off by up to 2^-4 of itself
 * (about 2.5% RMS), so a GEMM lands about 3e-2 from the f64 product
 * (tests/unit/test_fp8_host measures it on the emulator, test_gpu_ops on a
 * device). FP8 on Hopper takes only the "TN" layout (A transposed, B not),
 * which is the one the other modes use too: the tile is K x rows column-
 * major, read transposed. K is rounded up to 16 with zeros (cuBLASLt's FP8
 * leading dimensions are multiples of 16), and a weight whose N is not
 * (or whose tiles are not: fp8_direct) writes each tile's output through
 * an aligned buffer (lt_out) that one strided copy puts in place. The
 * GEMM's M (a tile's rows) is rounded up to 16 with zero rows of scale 1
 * (fp8_rows' n_pad) and fewer than 16 tokens to 16 zero columns
 * (fp8_input's); both outputs go through lt_out. On the H100 (cuBLASLt 13,
 * 2026-12-07) tiles of 37 and 73 rows found no algorithm
 * (CUBLAS_STATUS_NOT_SUPPORTED from the heuristic, with T 3 or padded to
 * 16) where 700 rows did, and the row padding made them pass: PyTorch's
 * scaled_mm asks the same of the matching dimension. The column padding
 * came first and did not help alone; whether T < 16 needs it was not
 * isolated, and it costs a 16-column copy. */
#include "config.h"

#include <stdio.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* cublasLt.h: a "()" declaration */
#include <cublasLt.h>
#pragma GCC diagnostic pop

#include "cuda_backend.h"
#include "node_check.h"
#include "op_describe.h"

/* The value a row's largest magnitude maps to: e4m3's largest finite
 * value, so the largest weight of a row is kept to 3 bits and the
 * smallest normal is 2^-15 of it (below, subnormals lose bits). */
#define FP8_MAX KILN_CUDA_E4M3_MAX
#define FP8_BLOCK 256
#define FP8_WORKSPACE ((uint64_t)32 << 20) /* cuBLASLt's recommendation for Hopper */

#define LT_CHECK(be, node, call)                                              \
  do {                                                                        \
    cublasStatus_t lt_s_ = (call);                                            \
    if (lt_s_ != CUBLAS_STATUS_SUCCESS)                                       \
      return kiln_cuda_blas_error((be), lt_s_, #call, (node));                \
  } while (0)

static int64_t k16(int64_t k) { return (k + 15) / 16 * 16; }

/* Whether each tile's output can go straight into Y: cuBLASLt's FP8
 * kernels want the leading dimension (N) and every tile's start row r0
 * (so its pointer, 4 r0 bytes on) in whole 16s. kiln_cuda_tile_rows gives
 * whole 128s but fewer rows where 128 do not fit gemm_scratch_mib (a
 * large K and a small scratch), so both are checked. */
static bool fp8_direct(int64_t n, int64_t tile) { return n % 16 == 0 && tile % 16 == 0; }

/* The GEMM's columns for t tokens: t, or 16 of which 16 - t are padding. */
#define FP8_MIN_COLS 16
static int64_t fp8_cols(int64_t t) { return t < FP8_MIN_COLS ? FP8_MIN_COLS : t; }

kiln_status kiln_cuda_fp8_open(kiln_cuda_backend *be) {
  LT_CHECK(be, NULL, cublasLtCreate(&be->lt));
  return NULL;
}

void kiln_cuda_fp8_close(kiln_cuda_backend *be) {
  if (be->lt) cublasLtDestroy(be->lt);
  be->lt = NULL;
}

static kiln_status get_fn(kiln_cuda_backend *be, kiln_kdesc *d, const kiln_node *node,
                          CUfunction *out_fn) {
  kiln_kernel *k = NULL;
  KILN_RETURN_IF_ERROR(kiln_cuda_kernel_get(be->host, d, node, &k));
  return kiln_cuda_kernel_fn(be, k, node, out_fn);
}

kiln_status kiln_cuda_fp8_prepare(kiln_cuda_backend *be, const kiln_node *node,
                                  kiln_cuda_node_state *ns) {
  const kiln_host_api *host = be->host;
  const int64_t k = node->src[0]->ne[0], n = node->src[0]->ne[1];
  const uint64_t cols = (uint64_t)node->src[1]->ne[1];
  if (k16(k) > INT32_MAX)
    return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node, "gemm = fp8: K %lld too large",
                           (long long)k);
  kiln_kdesc *d = NULL;
  KILN_RETURN_IF_ERROR(kiln_cuda_fp8_rows_describe(host, be->compiler, node, FP8_MAX, FP8_BLOCK, &d));
  KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->dequant.fn));
  ns->dequant.block = FP8_BLOCK;
  KILN_RETURN_IF_ERROR(kiln_cuda_fp8_input_describe(host, be->compiler, node, FP8_MAX, FP8_BLOCK, &d));
  KILN_RETURN_IF_ERROR(get_fn(be, d, node, &ns->gemm_input.fn));
  ns->gemm_input.block = FP8_BLOCK;
  /* a tile's rows in whole 16s (fp8_rows pads them) */
  const int64_t tile = kiln_cuda_tile_rows(be, KILN_CUDA_GEMM_FP8, k, n);
  KILN_RETURN_IF_ERROR(kiln_cuda_scratch_reserve(
      be, (uint64_t)k16(tile) * kiln_cuda_tile_row_bytes(KILN_CUDA_GEMM_FP8, k), node));
  /* every column the input can hold (16 at least), then a scale each */
  KILN_RETURN_IF_ERROR(
      kiln_cuda_x16_reserve(be, (uint64_t)fp8_cols((int64_t)cols) * ((uint64_t)k16(k) + 4u), node));
  bool grown = false;
  KILN_RETURN_IF_ERROR(kiln_cuda_mem_reserve(be, &be->lt_ws, &be->lt_ws_bytes, FP8_WORKSPACE,
                                             node, "cuBLASLt's workspace", &grown));
  /* the aligned output: every tile's columns where the weight's rows are
   * not fp8_direct, else the padded columns of fewer than 16 tokens */
  const uint64_t out_cols = fp8_direct(n, tile) ? FP8_MIN_COLS : (uint64_t)fp8_cols((int64_t)cols);
  return kiln_cuda_mem_reserve(be, &be->lt_out, &be->lt_out_bytes,
                               (uint64_t)k16(tile) * out_cols * 4u, node,
                               "the FP8 GEMM's aligned output", &grown);
}

/* The layouts and the operation of one tile's GEMM, destroyed together. */
typedef struct fp8_gemm {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, d;
  cublasLtMatmulPreference_t pref;
} fp8_gemm;

static void fp8_gemm_free(fp8_gemm *g) {
  if (g->pref) cublasLtMatmulPreferenceDestroy(g->pref);
  if (g->d) cublasLtMatrixLayoutDestroy(g->d);
  if (g->b) cublasLtMatrixLayoutDestroy(g->b);
  if (g->a) cublasLtMatrixLayoutDestroy(g->a);
  if (g->op) cublasLtMatmulDescDestroy(g->op);
}

/* C[rows, T] (ldc n) = diag(sa) A^T B diag(sb): A the tile (kk x rows), B
 * the activations (kk x T), sa after A's bytes, sb after B's. */
static kiln_status fp8_gemm_run(kiln_cuda_backend *be, const kiln_node *node, fp8_gemm *g,
                                CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, int rows, int t,
                                int kk, int ldc) {
  const void *sa = (const void *)(uintptr_t)(a + (CUdeviceptr)rows * (CUdeviceptr)kk);
  const void *sb = (const void *)(uintptr_t)(b + (CUdeviceptr)t * (CUdeviceptr)kk);
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const int32_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  LT_CHECK(be, node, cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  LT_CHECK(be, node, cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LT_CHECK(be, node, cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  LT_CHECK(be, node, cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &vec, sizeof vec));
  LT_CHECK(be, node, cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &vec, sizeof vec));
  LT_CHECK(be, node, cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
  LT_CHECK(be, node, cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
  LT_CHECK(be, node, cublasLtMatrixLayoutCreate(&g->a, CUDA_R_8F_E4M3, (uint64_t)kk, (uint64_t)rows, kk));
  LT_CHECK(be, node, cublasLtMatrixLayoutCreate(&g->b, CUDA_R_8F_E4M3, (uint64_t)kk, (uint64_t)t, kk));
  LT_CHECK(be, node, cublasLtMatrixLayoutCreate(&g->d, CUDA_R_32F, (uint64_t)rows, (uint64_t)t, ldc));
  LT_CHECK(be, node, cublasLtMatmulPreferenceCreate(&g->pref));
  const uint64_t ws = be->lt_ws_bytes;
  LT_CHECK(be, node, cublasLtMatmulPreferenceSetAttribute(g->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t h;
  int found = 0;
  LT_CHECK(be, node, cublasLtMatmulAlgoGetHeuristic(be->lt, g->op, g->a, g->b, g->d, g->d, g->pref, 1, &h, &found));
  if (found < 1)
    return be->host->status_new(KILN_STATUS_UNSUPPORTED,
                                "cuBLASLt has no FP8 algorithm for a %d x %d x %d GEMM (ldc %d) "
                                "in node %.*s (%s)",
                                rows, t, kk, ldc, KILN_NAME_MAX, node->name, kiln_op_name(node->op));
  const float one = 1.0f, zero = 0.0f;
  void *cp = (void *)(uintptr_t)c;
  LT_CHECK(be, node, cublasLtMatmul(be->lt, g->op, &one, (const void *)(uintptr_t)a, g->a,
                                    (const void *)(uintptr_t)b, g->b, &zero, cp, g->d, cp, g->d,
                                    &h.algo, (void *)(uintptr_t)be->lt_ws, ws, be->stream));
  return NULL;
}

kiln_status kiln_cuda_mul_mat_fp8(kiln_cuda_backend *be, const kiln_node *node,
                                  const kiln_cuda_node_state *ns, CUdeviceptr w, CUdeviceptr x,
                                  CUdeviceptr y, int32_t n_tokens) {
  const kiln_tensor *wt = node->src[0];
  const int64_t k = wt->ne[0], n = wt->ne[1], kk = k16(k);
  const int64_t tile = kiln_cuda_tile_rows(be, KILN_CUDA_GEMM_FP8, k, n);
  const int64_t row_bytes = kiln_type_row_bytes(wt->type, k);
  if (!be->lt || !be->lt_ws || !ns->dequant.fn || !ns->gemm_input.fn ||
      (uint64_t)k16(tile) * kiln_cuda_tile_row_bytes(KILN_CUDA_GEMM_FP8, k) > be->scratch_bytes ||
      (uint64_t)fp8_cols(n_tokens) * ((uint64_t)kk + 4u) > be->x16_bytes)
    return be->host->status_new(KILN_STATUS_INTERNAL,
                                "mul_mat node '%.*s': the FP8 GEMM was not prepared",
                                KILN_NAME_MAX, node->name);
  /* a weight of other N, or tiles of other rows, or fewer than 16 tokens
   * (padded), writes each tile through lt_out (fp8_direct) */
  const int cols = (int)fp8_cols(n_tokens);
  const bool aligned = fp8_direct(n, tile) && cols == n_tokens;
  if (!aligned && (uint64_t)k16(tile) * (uint64_t)cols * 4u > be->lt_out_bytes)
    return be->host->status_new(KILN_STATUS_INTERNAL,
                                "mul_mat node '%.*s': the FP8 GEMM's output was not prepared",
                                KILN_NAME_MAX, node->name);
  const kiln_tensor *xt = node->src[1];
  if (!kiln_cuda_x16_holds(be, xt, n_tokens, false)) {
    CUdeviceptr dst = be->x16;
    int n_cols = n_tokens, n_pad = cols;
    void *args[] = {&x, &dst, &n_cols, &n_pad};
    be->x16_of = NULL;
    KILN_RETURN_IF_ERROR(kiln_cuda_launch(be, node, "fp8_input", ns->gemm_input.fn,
                                          (uint32_t)(n_pad > 65535 ? 65535 : n_pad), 1,
                                          ns->gemm_input.block, args));
    kiln_cuda_x16_mark(be, xt, n_tokens, false);
  }
  for (int64_t r0 = 0; r0 < n; r0 += tile) {
    int rows = (int)(n - r0 < tile ? n - r0 : tile), m = (int)k16(rows); /* aligned: m == rows */
    CUdeviceptr src = w + (CUdeviceptr)(r0 * row_bytes), dst = be->scratch;
    void *args[] = {&src, &dst, &rows, &m};
    KILN_RETURN_IF_ERROR(kiln_cuda_launch(be, node, "fp8_rows", ns->dequant.fn,
                                          (uint32_t)(m > 65535 ? 65535 : m), 1,
                                          ns->dequant.block, args));
    fp8_gemm g = {0};
    const CUdeviceptr out = aligned ? y + (CUdeviceptr)r0 * 4u : be->lt_out;
    const int ldc = aligned ? (int)n : m;
    kiln_status st = fp8_gemm_run(be, node, &g, be->scratch, be->x16, out, m, cols, (int)kk, ldc);
    fp8_gemm_free(&g);
    KILN_RETURN_IF_ERROR(st);
    /* m x cols outputs, a column every ldc values: for compute-sanitizer */
    kiln_cuda_mark_written(be, out, (size_t)m * 4u, (size_t)ldc * 4u, cols);
    if (!aligned) { /* the tile's rows x T outputs to their place in Y */
      CUDA_MEMCPY2D c = {0};
      c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
      c.srcDevice = be->lt_out;
      c.srcPitch = (size_t)ldc * 4u;
      c.dstDevice = y + (CUdeviceptr)r0 * 4u;
      c.dstPitch = (size_t)n * 4u;
      c.WidthInBytes = (size_t)rows * 4u;
      c.Height = (size_t)n_tokens; /* the padding columns stay behind */
      KILN_CU_CHECK(be->host, be->cu, node, Memcpy2DAsync(&c, be->stream));
    }
  }
  return NULL;
}
