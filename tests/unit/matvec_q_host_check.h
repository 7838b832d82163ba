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
 * arithmetic: Q4_K's minimum times the exact x). Returns the relative
 * error. */
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
  case KILN_TYPE_Q6_K: return row_error<KILN_QT_Q6_K>(type, w, a, m, x, k, xq);
  default: fail_msg("no decoder for %s", kiln_type_name(type));
  }
  return 1.0;
}
