/* f32 to GGUF block formats, following ggml's reference quantizers
 * (ggml-quants.c: quantize_row_q4_0_ref, q5_0_ref, q8_0_ref, q4_K_ref and
 * q5_K_ref with make_qkx2_quants, q6_K_ref with make_qx_quants): the same
 * scale choices and searches, in the same f32 arithmetic, without
 * importance weights.
 * Block layouts are described in dequant.c.
 *
 * Two departures, both where ggml's code would convert NaN or an
 * out-of-range float to an integer (undefined behaviour): non-finite input
 * to a block format is refused, and a block whose scale is so small that its
 * reciprocal overflows (every |x| below ~1e-36) quantizes to zero. */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "byteorder.h"
#include "kiln/dequant.h"
#include "kiln/half.h"

#define QK_K 256
#define GROUP_MAX_EPS 1e-15f /* ggml: below this a group counts as all zero */

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* Round to nearest, ties to even, as ggml's nearest_int: adding 1.5 * 2^23
 * leaves the integer part in the low mantissa bits when |f| < 2^22. Larger
 * or non-finite f give a meaningless but defined value, which every caller
 * clamps. */
static int nearest_int(float f) {
  float v = f + 12582912.f;
  int32_t i;
  memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

/* 1/d, or 0 when d is 0 or so small that 1/d overflows. */
static float safe_inverse(float d) {
  if (d == 0.0f) return 0.0f;
  float id = 1.0f / d;
  return isfinite(id) ? id : 0.0f;
}

static void put_f16(uint8_t *p, float f) { kiln__wr_u16(p, kiln_f32_to_f16(f)); }
static float get_f16(const uint8_t *p) { return kiln_f16_to_f32(kiln__rd_u16(p)); }

/* ---- Q8_0, Q4_0, Q5_0: one scale per 32 values --------------------------- */

static void quant_q8_0(const float *x, uint8_t *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 32, y += 34) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f;
    const float id = safe_inverse(d);
    put_f16(y, id == 0.0f ? 0.0f : d);
    for (int j = 0; j < 32; j++) {
      /* |x*id| <= 127 up to rounding; the clamp only guards the cast */
      const float q = fminf(fmaxf(roundf(x[j] * id), -127.0f), 127.0f);
      y[2 + j] = (uint8_t)(int8_t)q;
    }
  }
}

/* ggml's (int8_t)(v) truncation of v = x*id + offset, which lies in
 * [0.5, 2*offset] up to rounding; clamped first so the cast is always
 * defined. */
static int to_level(float v, int top) { return (int)fminf(fmaxf(v, 0.0f), (float)top); }

/* The value with the largest magnitude (the first, on ties), sign kept. */
static float signed_absmax(const float *x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; j++) {
    if (amax < fabsf(x[j])) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  }
  return max;
}

static void quant_q4_0(const float *x, uint8_t *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 32, y += 18) {
    /* d maps the extreme value to -8, using all 16 levels on that side */
    const float d = signed_absmax(x, 32) / -8.0f;
    const float id = safe_inverse(d);
    put_f16(y, id == 0.0f ? 0.0f : d);
    for (int j = 0; j < 16; j++) {
      const int q0 = imin(15, to_level(x[j] * id + 8.5f, 16));
      const int q1 = imin(15, to_level(x[j + 16] * id + 8.5f, 16));
      y[2 + j] = (uint8_t)(q0 | (q1 << 4));
    }
  }
}

static void quant_q5_0(const float *x, uint8_t *y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, x += 32, y += 22) {
    const float d = signed_absmax(x, 32) / -16.0f;
    const float id = safe_inverse(d);
    put_f16(y, id == 0.0f ? 0.0f : d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
      const int q0 = imin(31, to_level(x[j] * id + 16.5f, 32));
      const int q1 = imin(31, to_level(x[j + 16] * id + 16.5f, 32));
      y[6 + j] = (uint8_t)((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= (uint32_t)((q0 >> 4) & 1) << j;
      qh |= (uint32_t)((q1 >> 4) & 1) << (j + 16);
    }
    kiln__wr_u32(y + 2, qh);
  }
}

/* ---- Q4_K: 8 sub-blocks of 32 with 6-bit scales and mins ---------------- */

/* ggml's make_qkx2_quants: levels L[i] in 0..nmax and (scale, min) with
 * x ~ scale*L - the_min, minimising the weighted squared error over nstep+1
 * candidate inverse scales around nmax/(max-min), each refined by weighted
 * least squares. Returns the scale; *the_min gets the (non-negative) min. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; i++) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; i++) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  float iscale = (float)nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; i++) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = (uint8_t)imax(0, imin(nmax, l));
    const float diff = scale * L[i] + min - x[i];
    best_error += weights[i] * (diff * diff);
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; is++) {
    iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; i++) {
      const int l = imax(0, imin(nmax, nearest_int(iscale * (x[i] - min))));
      Laux[i] = (uint8_t)l;
      const float w = weights[i];
      sum_l += w * (float)l;
      sum_l2 += w * (float)l * (float)l;
      sum_xl += w * (float)l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; i++) {
        const float diff = this_scale * Laux[i] + this_min - x[i];
        cur_error += weights[i] * (diff * diff);
      }
      if (cur_error < best_error) {
        memcpy(L, Laux, (size_t)n);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

/* Scale and min of Q4_K sub-block j from the 12 packed bytes (as in
 * dequant.c). */
static void q4k_scale_min(int j, const uint8_t *s, uint8_t *sc, uint8_t *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (uint8_t)((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
    *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

/* The super-block header of Q4_K and Q5_K from the sub-blocks' scales and
 * mins: f16 d = max_scale / 63 and dmin = max_min / 63 at y, and at y + 4
 * the twelve bytes of 6-bit factors (each the nearest to 63 x its value
 * over the largest), packed as q4k_scale_min reads them. */
static void pack_k_scales(const float scales[8], const float mins[8], float max_scale,
                          float max_min, uint8_t *y) {
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t *s = y + 4;
  memset(s, 0, 12);
  for (int j = 0; j < 8; j++) {
    uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
    uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
    ls = ls < 63 ? ls : 63;
    lm = lm < 63 ? lm : 63;
    if (j < 4) {
      s[j] = ls;
      s[j + 4] = lm;
    } else {
      s[j + 4] = (uint8_t)((ls & 0x0f) | ((lm & 0x0f) << 4));
      s[j - 4] |= (uint8_t)((ls >> 4) << 6);
      s[j] |= (uint8_t)((lm >> 4) << 6);
    }
  }
  put_f16(y, max_scale / 63.0f);
  put_f16(y + 2, max_min / 63.0f);
}

/* The levels L (0..nmax) of a Q4_K or Q5_K super-block x against its
 * scales as stored at y (f16 d and dmin, 6-bit factors): ggml requantizes
 * so that the levels fit the rounded scales, not the searched ones. A
 * sub-block whose scale is 0 keeps the levels of the search. */
static void requantize_k(const float *x, const uint8_t *y, int nmax, uint8_t *L) {
  const float d_all = get_f16(y), dmin_all = get_f16(y + 2);
  for (int j = 0; j < 8; j++) {
    uint8_t sc, m;
    q4k_scale_min(j, y + 4, &sc, &m);
    const float d = d_all * (float)sc;
    if (d == 0.0f) continue;
    const float dm = dmin_all * (float)m;
    for (int ii = 0; ii < 32; ii++) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = (uint8_t)imax(0, imin(nmax, l));
    }
  }
}

/* The sub-blocks' scales and mins of a Q4_K or Q5_K super-block x (levels
 * 0..nmax, ggml's search parameters rmin, nstep), their levels into L, and
 * the largest of each (both >= 0: the min is subtracted). */
static void search_k_scales(const float *x, int nmax, float rmin, int nstep, uint8_t *L,
                            float scales[8], float mins[8], float *max_scale, float *max_min) {
  uint8_t Laux[32];
  float weights[32];
  *max_scale = 0;
  *max_min = 0;
  for (int j = 0; j < 8; j++) {
    const float *xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
    const float av_x = sqrtf(sum_x2 / 32);
    for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(xs[l]);
    scales[j] = make_qkx2_quants(32, nmax, xs, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f,
                                 nstep);
    if (scales[j] > *max_scale) *max_scale = scales[j];
    if (mins[j] > *max_min) *max_min = mins[j];
  }
}

static void quant_q4_k(const float *x, uint8_t *y, int64_t nb) {
  uint8_t L[QK_K];
  float mins[8], scales[8];
  for (int64_t i = 0; i < nb; i++, x += QK_K, y += 144) {
    float max_scale, max_min;
    search_k_scales(x, 15, -1.0f, 20, L, scales, mins, &max_scale, &max_min);
    pack_k_scales(scales, mins, max_scale, max_min, y);
    requantize_k(x, y, 15, L);
    uint8_t *q = y + 16;
    for (int j = 0; j < QK_K; j += 64, q += 32) {
      for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

/* ---- Q5_K: Q4_K's sub-blocks with 5-bit levels ---------------------------- */

/* ggml's quantize_row_q5_K_ref: the search over levels 0..31 with rmin
 * -0.5 and 15 steps (Q4_K: -1, 20), the header as Q4_K's, then the low
 * nibbles packed as Q4_K's and each level's fifth bit in qh: bit j of
 * qh[l] for value l of sub-block j. */
static void quant_q5_k(const float *x, uint8_t *y, int64_t nb) {
  uint8_t L[QK_K];
  float mins[8], scales[8];
  for (int64_t i = 0; i < nb; i++, x += QK_K, y += 176) {
    float max_scale, max_min;
    search_k_scales(x, 31, -0.5f, 15, L, scales, mins, &max_scale, &max_min);
    pack_k_scales(scales, mins, max_scale, max_min, y);
    requantize_k(x, y, 31, L);
    uint8_t *qh = y + 16, *q = y + 48;
    memset(qh, 0, 32);
    for (int j = 0; j < 8; j += 2, q += 32) {
      for (int l = 0; l < 32; l++) {
        const uint8_t l1 = L[32 * j + l], l2 = L[32 * j + 32 + l];
        qh[l] |= (uint8_t)(((l1 >> 4) << j) | ((l2 >> 4) << (j + 1)));
        q[l] = (uint8_t)((l1 & 0x0f) | ((l2 & 0x0f) << 4));
      }
    }
  }
}

/* ---- Q6_K: 16 sub-blocks of 16 with int8 scales ------------------------- */

/* ggml's make_qx_quants with rmse_type 1 and no importance weights: levels
 * L[i] in 0..2*nmax-1 (stored offset by nmax) and a scale minimising the
 * x^2-weighted squared error over 19 candidate inverse scales around
 * -nmax/max. Returns the scale (0 for an all-zero group). */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; i++) {
    const float ax = fabsf(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < GROUP_MAX_EPS) {
    for (int i = 0; i < n; i++) L[i] = 0;
    return 0.0f;
  }
  float iscale = -(float)nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; i++) {
    const int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = (int8_t)(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * (float)l;
    suml2 += w * (float)l * (float)l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; is++) {
    if (is == 0) continue;
    iscale = -((float)nmax + 0.1f * (float)is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; i++) {
      const int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * (float)l;
      suml2 += w * (float)l * (float)l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; i++) {
        const int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

static void quant_q6_k(const float *x, uint8_t *y, int64_t nb) {
  int8_t L[QK_K];
  float scales[16];
  for (int64_t i = 0; i < nb; i++, x += QK_K, y += 210) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ib++) {
      scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
      if (fabsf(scales[ib]) > max_abs_scale) {
        max_abs_scale = fabsf(scales[ib]);
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < GROUP_MAX_EPS) {
      memset(y, 0, 210);
      continue;
    }
    /* The largest-magnitude scale maps to -128, the end of the int8 range. */
    const float iscale = -128.0f / max_scale;
    put_f16(y + 208, 1 / iscale);
    int8_t *sc = (int8_t *)(y + 192);
    for (int ib = 0; ib < 16; ib++) sc[ib] = (int8_t)imin(127, nearest_int(iscale * scales[ib]));
    const float d_all = get_f16(y + 208);
    for (int j = 0; j < 16; j++) {
      const float d = d_all * (float)sc[j];
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ii++) {
        const int l = imax(-32, imin(31, nearest_int(x[16 * j + ii] / d)));
        L[16 * j + ii] = (int8_t)(l + 32);
      }
    }
    uint8_t *ql = y, *qh = y + 128;
    for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; l++) {
        const uint8_t q1 = (uint8_t)L[j + l], q2 = (uint8_t)L[j + l + 32];
        const uint8_t q3 = (uint8_t)L[j + l + 64], q4 = (uint8_t)L[j + l + 96];
        ql[l] = (uint8_t)((q1 & 0x0f) | ((q3 & 0x0f) << 4));
        ql[l + 32] = (uint8_t)((q2 & 0x0f) | ((q4 & 0x0f) << 4));
        qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

/* Block scales are stored as f16: a block whose scale would pass 65504 (it
 * holds values beyond about 8e6 for Q8_0, 5e5 for Q4_0) cannot be stored,
 * and ggml would write an infinite scale. The bounds below are the largest
 * magnitude each format's scale can carry. Q6_K is bounded by its range;
 * Q4_K and Q5_K by their mins, which come first: a sub-block's min (up to
 * about its largest |x|) is 63 steps of the f16 dmin at most, so |x| must
 * stay below 63 x 65504 (halved for the search's slack), while the scale,
 * a range over 15 (31) levels, would allow 15 (31) times more: a Q4_K
 * block of values near -3e7 was let through and dequantized to -inf
 * before this bound. */
static kiln_status check_scales_fit(kiln_type type, const float *x, int64_t nb) {
  double limit;
  switch (type) {
  case KILN_TYPE_Q8_0: limit = 127.0 * 65504; break;
  case KILN_TYPE_Q4_0: limit = 8.0 * 65504; break;
  case KILN_TYPE_Q5_0: limit = 16.0 * 65504; break;
  case KILN_TYPE_Q4_K:
  case KILN_TYPE_Q5_K: limit = 63.0 * 65504 / 2; break;
  case KILN_TYPE_Q6_K: limit = 32.0 * 128 * 65504 / 2; break;
  default: return NULL;
  }
  const int64_t bs = kiln_type_block_size(type);
  for (int64_t i = 0; i < nb; i++) {
    double amax = 0;
    for (int64_t j = 0; j < bs; j++) amax = fmax(amax, fabs((double)x[i * bs + j]));
    if (amax > limit) {
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "kiln_quantize: block %" PRId64
                             " holds |x| = %g, beyond what an f16 "
                             "%s block scale can represent (about %g)",
                             i, amax, kiln_type_name(type), limit);
    }
  }
  return NULL;
}

kiln_status kiln_quantize(kiln_type type, const float *src, void *dst, int64_t n) {
  const int64_t bs = kiln_type_block_size(type);
  if (bs == 0 || type == KILN_TYPE_I32) {
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "kiln_quantize: type id %d (%s) is not a float type kiln writes",
                           (int)type, kiln_type_name(type));
  }
  if (n < 0 || n % bs != 0) {
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "kiln_quantize: %" PRId64
                           " values of %s is not a whole number of "
                           "%" PRId64 "-value blocks",
                           n, kiln_type_name(type), bs);
  }
  if (n == 0) return NULL;
  if (!src || !dst)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kiln_quantize: NULL buffer");
  if (kiln_type_is_quantized(type)) {
    for (int64_t i = 0; i < n; i++) {
      if (!isfinite(src[i])) {
        return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                               "kiln_quantize: value %" PRId64 " is %g: %s cannot hold it", i,
                               (double)src[i], kiln_type_name(type));
      }
    }
  }
  uint8_t *y = dst;
  const int64_t nb = n / bs;
  KILN_RETURN_IF_ERROR(check_scales_fit(type, src, nb));
  switch (type) {
  case KILN_TYPE_F32: memcpy(dst, src, (size_t)n * 4); break;
  case KILN_TYPE_F16:
  case KILN_TYPE_BF16:
    for (int64_t i = 0; i < n; i++) {
      const int f16 = type == KILN_TYPE_F16;
      const uint16_t h = f16 ? kiln_f32_to_f16(src[i]) : kiln_f32_to_bf16(src[i]);
      /* a finite value that rounds to infinity is an error, not a result */
      if ((h & 0x7fff) == (f16 ? 0x7c00 : 0x7f80) && isfinite(src[i])) {
        return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                               "kiln_quantize: value %" PRId64 " (%g) overflows %s", i,
                               (double)src[i], f16 ? "f16 (max 65504)" : "bf16");
      }
      kiln__wr_u16(y + 2 * i, h);
    }
    break;
  case KILN_TYPE_Q8_0: quant_q8_0(src, y, nb); break;
  case KILN_TYPE_Q4_0: quant_q4_0(src, y, nb); break;
  case KILN_TYPE_Q5_0: quant_q5_0(src, y, nb); break;
  case KILN_TYPE_Q4_K: quant_q4_k(src, y, nb); break;
  case KILN_TYPE_Q5_K: quant_q5_k(src, y, nb); break;
  case KILN_TYPE_Q6_K: quant_q6_k(src, y, nb); break;
  default:
    return kiln_status_new(KILN_STATUS_INTERNAL, "kiln_quantize: type %s not handled",
                           kiln_type_name(type));
  }
  return NULL;
}
