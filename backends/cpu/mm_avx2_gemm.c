/* The blocked f32 GEMM of MUL_MAT's prefill (cpu_mm.h): a panel of
 * dequantized weight rows times a micro-batch of activation columns.
 *
 * The register tile is 4 rows x 3 columns: twelve 8-lane accumulators,
 * three x vectors and one weight vector fill the 16 ymm registers, and
 * each step of 8 values issues 12 FMAs for 7 loads, so the FMA units, not
 * the loads, set the pace. Edge tiles (fewer rows or columns) compute each
 * output with the same operations, so results do not depend on where a
 * tile boundary falls (nor on how threads split the rows). */
#include "config.h"

#include "cpu_simd.h"

#if CPU_HAVE_AVX2_KERNELS
#include "mm_avx2.h"

#define TILE_R 4
#define TILE_C 3

CPU_AVX2_INLINE void tile(const float *panel, int64_t k8, int64_t K, const float *x, int64_t xs,
                          float *y, int64_t ys, const int R, const int C) {
  __m256 acc[TILE_R][TILE_C];
  CPU_MM_UNROLL for (int r = 0; r < R; r++)
    CPU_MM_UNROLL for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
  const int64_t full = K & ~(int64_t)7;
  for (int64_t k = 0; k < full; k += 8) {
    __m256 xv[TILE_C];
    CPU_MM_UNROLL for (int c = 0; c < C; c++) xv[c] = _mm256_loadu_ps(x + c * xs + k);
    CPU_MM_UNROLL for (int r = 0; r < R; r++) {
      const __m256 wv = _mm256_load_ps(panel + r * k8 + k);
      CPU_MM_UNROLL for (int c = 0; c < C; c++) acc[r][c] = _mm256_fmadd_ps(wv, xv[c], acc[r][c]);
    }
  }
  if (full < K) { /* the panel holds zeros past K; x is not read there */
    const __m256i m = cpu_mm_tail_mask((int)(K - full));
    __m256 xv[TILE_C];
    CPU_MM_UNROLL for (int c = 0; c < C; c++) xv[c] = _mm256_maskload_ps(x + c * xs + full, m);
    CPU_MM_UNROLL for (int r = 0; r < R; r++) {
      const __m256 wv = _mm256_load_ps(panel + r * k8 + full);
      CPU_MM_UNROLL for (int c = 0; c < C; c++) acc[r][c] = _mm256_fmadd_ps(wv, xv[c], acc[r][c]);
    }
  }
  CPU_MM_UNROLL for (int r = 0; r < R; r++)
    CPU_MM_UNROLL for (int c = 0; c < C; c++) y[c * ys + r] = cpu_mm_hsum8(acc[r][c]);
}

/* The tile for R rows and C columns, R and C constants once inlined. */
CPU_AVX2 static void tile_any(const float *panel, int64_t k8, int64_t K, const float *x, int64_t xs,
                              float *y, int64_t ys, int R, int C) {
#define TILE_CASE(r, c)                                                                            \
  case (r) * 4 + (c): tile(panel, k8, K, x, xs, y, ys, r, c); return;
  switch (R * 4 + C) {
    TILE_CASE(1, 1) TILE_CASE(1, 2) TILE_CASE(1, 3)
    TILE_CASE(2, 1) TILE_CASE(2, 2) TILE_CASE(2, 3)
    TILE_CASE(3, 1) TILE_CASE(3, 2) TILE_CASE(3, 3)
    TILE_CASE(4, 1) TILE_CASE(4, 2) TILE_CASE(4, 3)
  default: return;
  }
#undef TILE_CASE
}

CPU_AVX2 void cpu_mm_gemm_avx2(const float *panel, int64_t K, int64_t n_rows, const float *x,
                               int64_t xs, int64_t T, float *y, int64_t ys) {
  const int64_t k8 = cpu_mm_k8(K);
  for (int64_t t = 0; t < T; t += TILE_C) {
    const int C = T - t < TILE_C ? (int)(T - t) : TILE_C;
    for (int64_t r = 0; r < n_rows; r += TILE_R) {
      const int R = n_rows - r < TILE_R ? (int)(n_rows - r) : TILE_R;
      tile_any(panel + r * k8, k8, K, x + t * xs, xs, y + t * ys + r, ys, R, C);
    }
  }
}

#endif
