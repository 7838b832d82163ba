/* The body of test_matvec_q_host.cc for one activation width (KILN_XQ_BITS),
 * included inside that width's namespace after the decoders. */

/* x quantized into one column laid out as act_quant.cuh says, the way
 * kiln_xq_store_block does it: per 32 values s = max|x| / Q and
 * X = rint(x * (Q / max|x|)), the f32 sum, the sums of X per 8. */
static void quantize_column(const float *x, int k, kiln_u8 *xq, double *xhat) {
  const float q = (float)KILN_XQ_MAX;
  for (int b = 0; b < k / 32; b++) {
    float amax = 0.0f, sum = 0.0f;
    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
    for (int i = 0; i < 32; i++) sum += x[32 * b + i]; /* the order is immaterial here */
    const float s = amax / q, inv = amax > 0.0f ? q / amax : 0.0f;
    int runs[4] = {0, 0, 0, 0};
    for (int i = 0; i < 32; i++) {
      volatile float prod = x[32 * b + i] * inv;
      int v = (int)rintf(prod);
      v = v > KILN_XQ_MAX ? KILN_XQ_MAX : v < -KILN_XQ_MAX ? -KILN_XQ_MAX : v;
      const int j = 32 * b + i;
#if KILN_XQ_BITS == 16
      xq[j] = (kiln_u8)(v >> 8);
      xq[KILN_XQ_L_OFF(k) + j] = (kiln_u8)(v & 255);
#else
      xq[j] = (kiln_u8)v;
#endif
      runs[i / 8] += v;
      xhat[j] = (double)s * (double)v;
    }
    memcpy(xq + KILN_XQ_S_OFF(k) + 8 * b, &s, 4);
    memcpy(xq + KILN_XQ_S_OFF(k) + 8 * b + 4, &sum, 4);
    memcpy(xq + KILN_XQ_I_OFF(k) + 16 * b, runs, 16);
  }
}

/* One row of K values of type T: the lanes' shares of every block, added
 * in double, against the f64 sum of a_i xhat_i - m_i x_i (the kernel's
 * arithmetic: Q4_K's and Q5_K's minimum times the exact x). Returns the
 * relative error. */
template <int T>
static double row_error(kiln_type type, const uint8_t *w, const float *a, const float *m,
                        const float *x, int k, kiln_u8 *xq) {
  typedef kiln_mq<T> Q;
  double *xhat = (double *)kg_alloc((size_t)k * sizeof(double));
  quantize_column(x, k, xq, xhat);
  double got = 0.0, ref = 0.0, mag = 0.0;
  for (int blk = 0; blk < k / Q::QK; blk++)
    for (int sub = 0; sub < Q::LPB; sub++) {
      typename Q::frag f;
      Q::load(f, xq, k, blk * Q::QK, sub);
      got += Q::dot(w + (long long)blk * Q::BYTES, sub, f);
    }
  for (int i = 0; i < k; i++) {
    ref += (double)a[i] * xhat[i] - (double)m[i] * (double)x[i];
    mag += fabs((double)a[i] * xhat[i]) + fabs((double)m[i] * (double)x[i]);
  }
  free(xhat);
  (void)type;
  return fabs(got - ref) / (mag > 0 ? mag : 1.0);
}

static double type_error(kiln_type type, const uint8_t *w, const float *a, const float *m,
                         const float *x, int k, kiln_u8 *xq) {
  switch (type) {
  case KILN_TYPE_Q4_0: return row_error<KILN_QT_Q4_0>(type, w, a, m, x, k, xq);
  case KILN_TYPE_Q5_0: return row_error<KILN_QT_Q5_0>(type, w, a, m, x, k, xq);
  case KILN_TYPE_Q8_0: return row_error<KILN_QT_Q8_0>(type, w, a, m, x, k, xq);
  case KILN_TYPE_Q4_K: return row_error<KILN_QT_Q4_K>(type, w, a, m, x, k, xq);
  case KILN_TYPE_Q5_K: return row_error<KILN_QT_Q5_K>(type, w, a, m, x, k, xq);
  case KILN_TYPE_Q6_K: return row_error<KILN_QT_Q6_K>(type, w, a, m, x, k, xq);
  default: fail_msg("no decoder for %s", kiln_type_name(type));
  }
  return 1.0;
}

/* The staged path (matvec_q_stage.cuh) over `rows` rows of one weight (w,
 * 256-byte aligned, rows back to back): for every group of RPG rows and
 * every warp step, the 32 lanes emulated in turn (load, park into a
 * poisoned buffer, dot), against each lane's direct sums over the same
 * blocks in the same order: equal bit for bit. Every weight load must
 * fall inside the weight. Returns the number of differing sums. */
template <int T, int K, int RPG>
static int staged_mismatches(const kiln_u8 *w, int rows, const float *x, kiln_u8 *xq) {
  typedef kiln_mq<T> Q;
  typedef kiln_mq_stage<T, K, RPG> S;
  double *xhat = (double *)kg_alloc((size_t)K * sizeof(double));
  quantize_column(x, K, xq, xhat);
  free(xhat);
  const kiln_u8 *w_end = w + (long long)rows * S::ROW_BYTES;
  alignas(16) static kiln_u8 sbuf[RPG * S::SROW];
  static uint4 st[32][S::LOADS];
  kiln_host_lo = w;
  kiln_host_hi = w_end;
  kiln_host_slo = sbuf;
  kiln_host_shi = sbuf + sizeof sbuf;
  int bad = 0;
  for (int row0 = 0; row0 < rows; row0 += RPG) {
    const int nr = rows - row0 < RPG ? rows - row0 : RPG;
    float acc_s[32][RPG], acc_d[32][RPG];
    memset(acc_s, 0, sizeof acc_s);
    memset(acc_d, 0, sizeof acc_d);
    for (int s = 0; s < S::STEPS; s++) {
      memset(sbuf, 0xA5, sizeof sbuf); /* a byte read but not parked decodes wrongly */
      for (int lane = 0; lane < 32; lane++) S::load(w, w_end, row0, nr, s, lane, st[lane]);
      for (int lane = 0; lane < 32; lane++) S::park(sbuf, nr, lane, st[lane]);
      for (int lane = 0; lane < 32; lane++) {
        S::dot(sbuf, w, row0, nr, s, xq, lane, acc_s[lane]);
        const int bi = lane / Q::LPB, sub = lane % Q::LPB, blk = s * S::BPS + bi;
        if (blk >= S::NB) continue;
        typename Q::frag f;
        Q::load(f, xq, K, blk * Q::QK, sub);
        for (int r = 0; r < nr; r++)
          acc_d[lane][r] += Q::dot(w + (long long)(row0 + r) * S::ROW_BYTES +
                                       (long long)blk * Q::BYTES,
                                   sub, f);
      }
    }
    for (int lane = 0; lane < 32; lane++)
      for (int r = 0; r < nr; r++) bad += memcmp(&acc_s[lane][r], &acc_d[lane][r], sizeof(float)) != 0;
  }
  kiln_host_lo = kiln_host_hi = NULL;
  kiln_host_slo = kiln_host_shi = NULL;
  return bad;
}

template <int K, int RPG>
static int staged_type_mismatches(kiln_type type, const kiln_u8 *w, int rows, const float *x,
                                  kiln_u8 *xq) {
  switch (type) {
  case KILN_TYPE_Q4_0: return staged_mismatches<KILN_QT_Q4_0, K, RPG>(w, rows, x, xq);
  case KILN_TYPE_Q5_0: return staged_mismatches<KILN_QT_Q5_0, K, RPG>(w, rows, x, xq);
  case KILN_TYPE_Q8_0: return staged_mismatches<KILN_QT_Q8_0, K, RPG>(w, rows, x, xq);
  case KILN_TYPE_Q4_K: return staged_mismatches<KILN_QT_Q4_K, K, RPG>(w, rows, x, xq);
  case KILN_TYPE_Q5_K: return staged_mismatches<KILN_QT_Q5_K, K, RPG>(w, rows, x, xq);
  case KILN_TYPE_Q6_K: return staged_mismatches<KILN_QT_Q6_K, K, RPG>(w, rows, x, xq);
  default: fail_msg("no decoder for %s", kiln_type_name(type));
  }
  return 1;
}
