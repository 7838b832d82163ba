/*
 * mm_avx2.h — what the AVX2 weight kernels (mm_avx2_*.c) share (internal):
 * the lane sum, tail masks, f16 scales, and CPU_MM_DEFINE, which turns one
 * type's block decoder into its dot and deq kernels (cpu_mm.h), so the two
 * decode a row with the very same instructions.
 *
 * A type's block decoder is a macro BLOCK(row, b, SINK) that decodes block b
 * of a row and, for every group of 8 consecutive values k .. k+7 in it,
 * computes their exact f32 values (kiln_dequantize's, operation for
 * operation where rounding could differ) into a __m256 w and expands
 * SINK(w, k); float types also have a TAIL_BLOCK for the last n < 8 values
 * of a row (every block type's K is a multiple of its block). Include only
 * from files built for x86-64 (cpu_simd.h's CPU_HAVE_AVX2_KERNELS).
 */
#ifndef KILN_CPU_MM_AVX2_H
#define KILN_CPU_MM_AVX2_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "cpu_mm.h"
#include "cpu_simd.h"

#define CPU_AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* Fully unrolls a loop over a few registers' worth (tokens, tile rows, the
 * 8-value groups of a block), so arrays of __m256 stay in registers. */
#define CPU_MM_UNROLL _Pragma("GCC unroll 16")

/* The 8 lanes' sum in a fixed tree: ((0+4)+(2+6)) + ((1+5)+(3+7)). */
CPU_AVX2_INLINE float cpu_mm_hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

/* Lanes 0 .. n-1 set (n in 0..8), for maskload. */
CPU_AVX2_INLINE __m256i cpu_mm_tail_mask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* A little-endian f16 at p as f32 (exact, as kiln_f16_to_f32). */
CPU_AVX2_INLINE float cpu_mm_f16(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

/* The low 8 bytes of q as signed or unsigned ints, then f32. */
CPU_AVX2_INLINE __m256 cpu_mm_i8x8(__m128i q) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)); }
CPU_AVX2_INLINE __m256 cpu_mm_u8x8(__m128i q) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q)); }

/* Q4_K's and Q5_K's 12 packed bytes of 6-bit scales and mins (GGUF's
 * layout): the scale and min of sub-block j ... */
static inline void cpu_mm_kq_scale_min(int j, const uint8_t *s, int *sc, int *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

/* ... and all 8 of each as floats, unpacked four bytes at a time. */
CPU_AVX2_INLINE void cpu_mm_kq_scales8(const uint8_t *s, __m256 *sc, __m256 *mn) {
  uint32_t u[3];
  memcpy(u, s, 12);
  const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
  const uint32_t sc_lo = u[0] & m6, mn_lo = u[1] & m6;
  const uint32_t sc_hi = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);
  const uint32_t mn_hi = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4);
  const __m128i v = _mm_setr_epi32((int)sc_lo, (int)sc_hi, (int)mn_lo, (int)mn_hi);
  *sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
  *mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));
}


/* ---- the two kernels from a block decoder -------------------------------- */

#define CPU_MM_DOT_SINK(w_, k_)                                                                    \
  CPU_MM_UNROLL for (int t_ = 0; t_ < NX; t_++)                                                    \
    acc[i_][t_] = _mm256_fmadd_ps((w_), _mm256_loadu_ps(x + t_ * xs + (k_)), acc[i_][t_]);

#define CPU_MM_DOT_TAIL(w_, k_, n_)                                                                \
  {                                                                                                \
    const __m256i m_ = cpu_mm_tail_mask(n_);                                                       \
    CPU_MM_UNROLL for (int t_ = 0; t_ < NX; t_++)                                                  \
      acc[i_][t_] = _mm256_fmadd_ps((w_), _mm256_maskload_ps(x + t_ * xs + (k_), m_), acc[i_][t_]); \
  }

#define CPU_MM_DEQ_SINK(w_, k_) _mm256_storeu_ps(o + (k_), (w_));
#define CPU_MM_DEQ_TAIL(w_, k_, n_) _mm256_storeu_ps(o + (k_), (w_)); /* zeros past n */

/* Rows decoded side by side in the dot kernel for NX columns: each row's
 * sum is one chain of dependent FMAs, so with few columns one row alone
 * would wait on the FMA latency; NR(NX) x NX accumulators keep the units
 * busy and fit the 16 registers. For one column (decode) a block's decode
 * is long enough to hide that latency, and a second row only adds register
 * pressure: one row at a time decoded 12-25% faster on the 0.5B shape
 * (Q4_K_M, Q8_0) on this project's 2-core Zen machine. Rows never mix, so
 * each row's arithmetic is unchanged. */
#define CPU_MM_NR(nx) ((nx) == 1 ? 1 : (nx) == 2 ? 4 : 3)
#define CPU_MM_MAX_NR 4

/* The deq kernel from BLOCK and TAIL_BLOCK (see CPU_MM_DEFINE_F). */
#define CPU_MM_DEFINE_DEQ(p, BS, BLOCK, TAIL_BLOCK)                                                \
  CPU_AVX2 static void p##_deq(const uint8_t *w, int64_t rb, int64_t K, int64_t n_rows, float *out, \
                               int64_t os) {                                                       \
    const int64_t nb_ = K / (BS);                                                                  \
    for (int64_t r = 0; r < n_rows; r++) {                                                         \
      const uint8_t *row = w + r * rb;                                                             \
      float *o = out + r * os;                                                                     \
      for (int64_t b_ = 0; b_ < nb_; b_++) {                                                       \
        BLOCK(row, b_, CPU_MM_DEQ_SINK)                                                            \
      }                                                                                            \
      if (nb_ * (BS) < K) {                                                                        \
        TAIL_BLOCK(row, nb_ * (BS), (int)(K - nb_ * (BS)), CPU_MM_DEQ_TAIL)                        \
      }                                                                                            \
    }                                                                                              \
  }

/* The rows of a dot kernel for NX columns, NR(NX) rows at a time. */
#define CPU_MM_DOT_ROWS(p, NX)                                                                     \
  {                                                                                                \
    const int nr_ = CPU_MM_NR(NX);                                                                 \
    for (; r + nr_ <= n_rows; r += nr_)                                                            \
      p##_dot_rows(w + r * rb, rb, K, x, xs, y + r, ys, nr_, NX);                                  \
    for (; r < n_rows; r++) p##_dot_rows(w + r * rb, rb, K, x, xs, y + r, ys, 1, NX);              \
  }

/* The n_x switch of a dot kernel: NX a constant in each inlined copy. */
#define CPU_MM_DOT_SWITCH(p, XT)                                                                   \
  CPU_AVX2 static void p##_dot(const uint8_t *w, int64_t rb, int64_t K, int64_t n_rows, XT x,      \
                               int64_t xs, int n_x, float *y, int64_t ys) {                        \
    int64_t r = 0;                                                                                 \
    switch (n_x) {                                                                                 \
    case 1: CPU_MM_DOT_ROWS(p, 1) break;                                                           \
    case 2: CPU_MM_DOT_ROWS(p, 2) break;                                                           \
    case 3: CPU_MM_DOT_ROWS(p, 3) break;                                                           \
    default: CPU_MM_DOT_ROWS(p, 4) break;                                                          \
    }                                                                                              \
  }

/* The f32 dot kernel `<p>_dot` from a type's block decoder: BLOCK(row, b,
 * SINK) expands SINK(w, k) for each group of 8 of the BS values of block b
 * of a row; TAIL_BLOCK(row, k0, n, TAIL) expands TAIL(w, k0, n) for the n <
 * 8 values past the last whole group. */
#define CPU_MM_DEFINE_DOT_F32(p, BS, BLOCK, TAIL_BLOCK)                                            \
  CPU_AVX2_INLINE void p##_dot_rows(const uint8_t *w, int64_t rb, int64_t K, const float *x,       \
                                    int64_t xs, float *y, int64_t ys, const int NR, const int NX) { \
    __m256 acc[CPU_MM_MAX_NR][CPU_MM_MAX_DOT_X];                                                   \
    CPU_MM_UNROLL for (int i_ = 0; i_ < NR; i_++)                                                  \
      CPU_MM_UNROLL for (int t_ = 0; t_ < NX; t_++) acc[i_][t_] = _mm256_setzero_ps();             \
    const int64_t nb_ = K / (BS);                                                                  \
    for (int64_t b_ = 0; b_ < nb_; b_++) {                                                         \
      CPU_MM_UNROLL for (int i_ = 0; i_ < NR; i_++) {                                              \
        const uint8_t *row = w + i_ * rb;                                                          \
        BLOCK(row, b_, CPU_MM_DOT_SINK)                                                            \
      }                                                                                            \
    }                                                                                              \
    if (nb_ * (BS) < K) {                                                                          \
      CPU_MM_UNROLL for (int i_ = 0; i_ < NR; i_++) {                                              \
        const uint8_t *row = w + i_ * rb;                                                          \
        TAIL_BLOCK(row, nb_ * (BS), (int)(K - nb_ * (BS)), CPU_MM_DOT_TAIL)                        \
      }                                                                                            \
    }                                                                                              \
    CPU_MM_UNROLL for (int i_ = 0; i_ < NR; i_++)                                                  \
      CPU_MM_UNROLL for (int t_ = 0; t_ < NX; t_++) y[t_ * ys + i_] = cpu_mm_hsum8(acc[i_][t_]);   \
  }                                                                                                \
  CPU_MM_DOT_SWITCH(p, const float *)

/* The kernels of a float type: `<p>_kernels` with dot_f32 and deq, from its
 * block decoder (above). */
#define CPU_MM_DEFINE_F(p, BS, BLOCK, TAIL_BLOCK)                                                  \
  CPU_MM_DEFINE_DOT_F32(p, BS, BLOCK, TAIL_BLOCK)                                                  \
  CPU_MM_DEFINE_DEQ(p, BS, BLOCK, TAIL_BLOCK)                                                      \
  const cpu_mm_kernels p##_kernels = {p##_dot, NULL, p##_deq};

/* ---- block-quantized types against int16 columns (dot_q16) --------------- */

/* Group g (32 values) of the row being decoded, as 16 + 16 int16 weight
 * integers wa (values 0..15) and wb (16..31) with one scale f: weight =
 * f * integer. Adds f * d_g * (wa.q + wb.q) to each column's accumulator;
 * the integer products and their sums are exact (int32). */
#define CPU_MM_QSINK1(wa_, wb_, f_, g_)                                                            \
  CPU_MM_UNROLL for (int t_ = 0; t_ < NX; t_++) {                                                  \
    const int16_t *xq_ = x[t_].q + (int64_t)(g_) * 32;                                             \
    const __m256i sum_ = _mm256_add_epi32(                                                         \
        _mm256_madd_epi16((wa_), _mm256_load_si256((const __m256i *)(const void *)xq_)),           \
        _mm256_madd_epi16((wb_), _mm256_load_si256((const __m256i *)(const void *)(xq_ + 16))));   \
    acc[i_][t_] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum_), _mm256_set1_ps((f_) * x[t_].d[(g_)]),  \
                                  acc[i_][t_]);                                                    \
  }

/* Group g_ of a super-block whose per-column multipliers (weight scale x
 * column scale) the decoder has stored in mult_[t][g_] (8 groups, t < NX):
 * one multiplier for the group (QSINK1M), or one per half (QSINK2M). */
#define CPU_MM_QSINK1M(wa_, wb_, mult_, g_)                                                        \
  CPU_MM_UNROLL for (int t_ = 0; t_ < NX; t_++) {                                                  \
    const int16_t *xq_ = xg_[t_] + 32 * (g_);                                                      \
    const __m256i sum_ = _mm256_add_epi32(                                                         \
        _mm256_madd_epi16((wa_), _mm256_load_si256((const __m256i *)(const void *)xq_)),           \
        _mm256_madd_epi16((wb_), _mm256_load_si256((const __m256i *)(const void *)(xq_ + 16))));   \
    acc[i_][t_] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum_), _mm256_broadcast_ss(&(mult_)[t_][(g_)]), \
                                  acc[i_][t_]);                                                    \
  }

#define CPU_MM_QSINK2M(wa_, wb_, ma_, mb_, g_)                                                     \
  CPU_MM_UNROLL for (int t_ = 0; t_ < NX; t_++) {                                                  \
    const int16_t *xq_ = xg_[t_] + 32 * (g_);                                                      \
    const __m256i sa_ = _mm256_madd_epi16((wa_), _mm256_load_si256((const __m256i *)(const void *)xq_)); \
    const __m256i sb_ = _mm256_madd_epi16((wb_), _mm256_load_si256((const __m256i *)(const void *)(xq_ + 16))); \
    acc[i_][t_] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sa_), _mm256_broadcast_ss(&(ma_)[t_][(g_)]), acc[i_][t_]); \
    acc[i_][t_] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sb_), _mm256_broadcast_ss(&(mb_)[t_][(g_)]), acc[i_][t_]); \
  }

/* For each column, the 8 products scale8 x (its block scales of the
 * super-block's 8 groups), into mult_[t] (an aligned float[NX][8] the
 * decoder declares); xg_[t] points at the super-block's 256 values of q. */
#define CPU_MM_QSCALES8(mult_, scale8_, b_)                                                        \
  CPU_MM_UNROLL for (int t_ = 0; t_ < NX; t_++)                                                    \
    _mm256_store_ps((mult_)[t_], _mm256_mul_ps((scale8_), _mm256_loadu_ps(x[t_].d + 8 * (b_))));

/* A min per group (weight = ... - min8[g]): subtracts min8[g] x d_g x
 * sum(q over group g) from the accumulators, one group per lane (the lane
 * sum adds them up with the rest). */
#define CPU_MM_QMINS8(min8_, b_)                                                                   \
  CPU_MM_UNROLL for (int t_ = 0; t_ < NX; t_++)                                                    \
    acc[i_][t_] = _mm256_fnmadd_ps(                                                                \
        _mm256_mul_ps((min8_), _mm256_loadu_ps(x[t_].d + 8 * (b_))),                               \
        _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(const void *)(x[t_].s + 8 * (b_)))), \
        acc[i_][t_]);

/* xg_[t] for super-block b_ (256 values). */
#define CPU_MM_QCOLS256(b_)                                                                        \
  const int16_t *xg_[CPU_MM_MAX_DOT_X];                                                            \
  CPU_MM_UNROLL for (int t_ = 0; t_ < NX; t_++) xg_[t_] = x[t_].q + 256 * (b_);

/* The kernels of a block-quantized type: `<p>_kernels` with dot_f32,
 * dot_q16 and deq. BLOCK as for CPU_MM_DEFINE_F (the exact values, for deq
 * and dot_f32);
 * QBLOCK(row, b) decodes block b into integers and expands CPU_MM_QSINK1
 * (32-value blocks) or, per group of 32 of a 256-value super-block,
 * CPU_MM_QSINK1M / QSINK2M after CPU_MM_QSCALES8 (and CPU_MM_QMINS8 where
 * the type has mins). A row's result is the lane sum of its accumulator. */
#define CPU_MM_DEFINE_Q(p, BS, BLOCK, QBLOCK)                                                      \
  CPU_MM_DEFINE_DOT_F32(p, BS, BLOCK, CPU_MM_NO_TAIL)                                              \
  CPU_AVX2_INLINE void p##_q16_dot_rows(const uint8_t *w, int64_t rb, int64_t K, const cpu_mm_q16 *x, \
                                    int64_t xs, float *y, int64_t ys, const int NR, const int NX) { \
    (void)xs;                                                                                      \
    __m256 acc[CPU_MM_MAX_NR][CPU_MM_MAX_DOT_X];                                                   \
    CPU_MM_UNROLL for (int i_ = 0; i_ < NR; i_++)                                                  \
      CPU_MM_UNROLL for (int t_ = 0; t_ < NX; t_++) acc[i_][t_] = _mm256_setzero_ps();             \
    const int64_t nb_ = K / (BS);                                                                  \
    for (int64_t b_ = 0; b_ < nb_; b_++) {                                                         \
      CPU_MM_UNROLL for (int i_ = 0; i_ < NR; i_++) {                                              \
        const uint8_t *row = w + i_ * rb;                                                          \
        QBLOCK(row, b_)                                                                            \
      }                                                                                            \
    }                                                                                              \
    CPU_MM_UNROLL for (int i_ = 0; i_ < NR; i_++)                                                  \
      CPU_MM_UNROLL for (int t_ = 0; t_ < NX; t_++)                                                \
        y[t_ * ys + i_] = cpu_mm_hsum8(acc[i_][t_]);                                               \
  }                                                                                                \
  CPU_MM_DOT_SWITCH(p##_q16, const cpu_mm_q16 *)                                                   \
  CPU_AVX2 static void p##_dot_q16(const uint8_t *w, int64_t rb, int64_t K, int64_t n_rows,        \
                                   const cpu_mm_q16 *x, int n_x, float *y, int64_t ys) {           \
    p##_q16_dot(w, rb, K, n_rows, x, 0, n_x, y, ys);                                               \
  }                                                                                                \
  CPU_MM_DEFINE_DEQ(p, BS, BLOCK, CPU_MM_NO_TAIL)                                                  \
  const cpu_mm_kernels p##_kernels = {p##_dot, p##_dot_q16, p##_deq};

/* TAIL_BLOCK of the block types, whose rows are whole blocks. */
#define CPU_MM_NO_TAIL(row, k0, n, TAIL) (void)(row);

#endif /* KILN_CPU_MM_AVX2_H */
