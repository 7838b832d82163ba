/* gdn_body.h — the Gated DeltaNet arithmetic of op_gated_delta_net.c,
 * included there twice: with GDN_REAL = float (precision f32) and double
 * (f64), GDN_FN(name) naming each copy and GDN_EXP / GDN_SQRT its math. One
 * body, so the reference (double) and the f32 path cannot drift apart.
 *
 * A head's state S is held as Dv rows of Dk values, S_j[i] = S[i][j], the
 * layout of the RECURRENT tensor (kiln/graph.h), so every update below is
 * a run over contiguous values. */

static GDN_REAL GDN_FN(dot)(const GDN_REAL *a, const GDN_REAL *b, int64_t n) {
  GDN_REAL s = 0;
  for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

/* y = x / sqrt(sum x^2 + eps) * scale (transformers' l2norm, then q's
 * 1/sqrt(Dk); llama.cpp's build_gdn_l2_norm). */
static void GDN_FN(l2norm)(const float *x, int64_t n, float eps, GDN_REAL scale, GDN_REAL *y) {
  GDN_REAL ss = 0;
  for (int64_t i = 0; i < n; i++) ss += (GDN_REAL)x[i] * (GDN_REAL)x[i];
  const GDN_REAL inv = (GDN_REAL)1 / GDN_SQRT(ss + (GDN_REAL)eps);
  for (int64_t i = 0; i < n; i++) y[i] = (GDN_REAL)x[i] * inv * scale;
}

/* One token of head h (transformers' torch_recurrent_gated_delta_rule). */
static void GDN_FN(step)(const gdn_task *a, int64_t h, int64_t t, GDN_REAL *S, GDN_REAL *qn,
                         GDN_REAL *kn) {
  const kiln_gdn_params *p = a->p;
  const int64_t Dk = p->head_k_dim, Dv = p->head_v_dim, kh = h % p->n_k_heads;
  const float *row = a->qkv + t * a->qkv_w;
  GDN_FN(l2norm)(row + kh * Dk, Dk, p->l2_eps, (GDN_REAL)p->q_scale, qn);
  GDN_FN(l2norm)(row + a->k_off + kh * Dk, Dk, p->l2_eps, 1, kn);
  const float *v = row + a->v_off + h * Dv;
  const GDN_REAL decay = GDN_EXP((GDN_REAL)a->gates[t * 2 * p->n_v_heads + h]);
  const GDN_REAL beta = (GDN_REAL)a->gates[t * 2 * p->n_v_heads + p->n_v_heads + h];
  float *y = a->y + t * a->y_w + h * Dv;
  for (int64_t j = 0; j < Dv; j++) {
    GDN_REAL *Sj = S + j * Dk, kv = 0;
    for (int64_t i = 0; i < Dk; i++) {
      Sj[i] *= decay;
      kv += Sj[i] * kn[i];
    }
    const GDN_REAL delta = beta * ((GDN_REAL)v[j] - kv);
    GDN_REAL o = 0;
    for (int64_t i = 0; i < Dk; i++) {
      Sj[i] += kn[i] * delta;
      o += Sj[i] * qn[i];
    }
    y[j] = (float)o;
  }
}

/* Tokens t0 .. t0+n-1 of head h as one chunk (the WY form of
 * transformers' torch_chunk_gated_delta_rule, without its padding: padded
 * tokens have k = v = 0 and change nothing). With cum_r the running sum of
 * g inside the chunk and A[r][s] = beta_r (k_r . k_s) e^(cum_r - cum_s)
 * for s < r, the unit lower-triangular system (I + A) solved by forward
 * substitution gives U = (I+A)^-1 (beta v) and W = (I+A)^-1 (beta e^cum k);
 * then with the state S before the chunk
 *   v'_r  = U_r - W_r S
 *   out_r = e^cum_r q_r S + sum_{s<=r} (q_r . k_s) e^(cum_r - cum_s) v'_s
 *   S    <- e^cum_last S + sum_s k_s e^(cum_last - cum_s) v'_s^T
 * Exponents are always differences cum_r - cum_s <= 0 or cum <= 0, so
 * nothing overflows. */
static void GDN_FN(chunk)(const gdn_task *a, int64_t h, int64_t t0, int64_t n, GDN_REAL *S,
                          GDN_REAL *buf) {
  const kiln_gdn_params *p = a->p;
  const int64_t Dk = p->head_k_dim, Dv = p->head_v_dim, Hv = p->n_v_heads;
  const int64_t kh = h % p->n_k_heads;
  GDN_REAL *Q = buf, *K = Q + n * Dk, *W = K + n * Dk, *U = W + n * Dk, *M = U + n * Dv;
  GDN_REAL *cum = M + n * n, *beta = cum + n;
  for (int64_t r = 0; r < n; r++) {
    const int64_t t = t0 + r;
    const float *row = a->qkv + t * a->qkv_w;
    GDN_FN(l2norm)(row + kh * Dk, Dk, p->l2_eps, (GDN_REAL)p->q_scale, Q + r * Dk);
    GDN_FN(l2norm)(row + a->k_off + kh * Dk, Dk, p->l2_eps, 1, K + r * Dk);
    cum[r] = (r ? cum[r - 1] : 0) + (GDN_REAL)a->gates[t * 2 * Hv + h];
    beta[r] = (GDN_REAL)a->gates[t * 2 * Hv + Hv + h];
  }
  /* Forward substitution, row by row. */
  for (int64_t r = 0; r < n; r++) {
    const float *v = a->qkv + (t0 + r) * a->qkv_w + a->v_off + h * Dv;
    GDN_REAL *Ur = U + r * Dv, *Wr = W + r * Dk;
    const GDN_REAL ec = GDN_EXP(cum[r]);
    for (int64_t j = 0; j < Dv; j++) Ur[j] = beta[r] * (GDN_REAL)v[j];
    for (int64_t i = 0; i < Dk; i++) Wr[i] = beta[r] * ec * K[r * Dk + i];
    for (int64_t s = 0; s < r; s++) {
      const GDN_REAL c = beta[r] * GDN_FN(dot)(K + r * Dk, K + s * Dk, Dk) * GDN_EXP(cum[r] - cum[s]);
      for (int64_t j = 0; j < Dv; j++) Ur[j] -= c * U[s * Dv + j];
      for (int64_t i = 0; i < Dk; i++) Wr[i] -= c * W[s * Dk + i];
    }
  }
  /* v' = U - W S, in place of U. */
  for (int64_t r = 0; r < n; r++)
    for (int64_t j = 0; j < Dv; j++) U[r * Dv + j] -= GDN_FN(dot)(W + r * Dk, S + j * Dk, Dk);
  /* The causal, decayed q.k of the chunk. */
  for (int64_t r = 0; r < n; r++)
    for (int64_t s = 0; s <= r; s++)
      M[r * n + s] = GDN_FN(dot)(Q + r * Dk, K + s * Dk, Dk) * GDN_EXP(cum[r] - cum[s]);
  for (int64_t r = 0; r < n; r++) {
    float *y = a->y + (t0 + r) * a->y_w + h * Dv;
    const GDN_REAL ec = GDN_EXP(cum[r]);
    for (int64_t j = 0; j < Dv; j++) {
      GDN_REAL o = ec * GDN_FN(dot)(Q + r * Dk, S + j * Dk, Dk);
      for (int64_t s = 0; s <= r; s++) o += M[r * n + s] * U[s * Dv + j];
      y[j] = (float)o;
    }
  }
  /* The state after the chunk; K rows take their decay to the chunk's end. */
  const GDN_REAL el = GDN_EXP(cum[n - 1]);
  for (int64_t s = 0; s < n; s++) {
    const GDN_REAL d = GDN_EXP(cum[n - 1] - cum[s]);
    for (int64_t i = 0; i < Dk; i++) K[s * Dk + i] *= d;
  }
  for (int64_t j = 0; j < Dv; j++) {
    GDN_REAL *Sj = S + j * Dk;
    for (int64_t i = 0; i < Dk; i++) {
      GDN_REAL acc = Sj[i] * el;
      for (int64_t s = 0; s < n; s++) acc += K[s * Dk + i] * U[s * Dv + j];
      Sj[i] = acc;
    }
  }
}

/* Every token of head h: the recurrence for a one-token step, chunks of
 * p->chunk tokens for longer ones. buf is the worker's scratch. */
static void GDN_FN(head)(const gdn_task *a, int64_t h, void *scratch) {
  const kiln_gdn_params *p = a->p;
  const int64_t Dk = p->head_k_dim, Dv = p->head_v_dim;
  GDN_REAL *S = scratch, *buf = S + Dk * Dv;
  float *state = a->state + h * Dv * Dk;
  for (int64_t e = 0; e < Dk * Dv; e++) S[e] = a->fresh ? 0 : (GDN_REAL)state[e];
  if (a->T == 1) {
    GDN_FN(step)(a, h, 0, S, buf, buf + Dk);
  } else {
    for (int64_t t0 = 0; t0 < a->T; t0 += p->chunk) {
      const int64_t n = a->T - t0 < p->chunk ? a->T - t0 : p->chunk;
      GDN_FN(chunk)(a, h, t0, n, S, buf);
    }
  }
  for (int64_t e = 0; e < Dk * Dv; e++) state[e] = (float)S[e];
}
