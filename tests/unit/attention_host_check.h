/* The checks the host-emulated split decode attention tests share
 * (test_attention_host.cc: attention_split; test_attention_mma_host.cc:
 * attention_mma), both merged by attention_merge: a shape, the f64
 * reference of a pass of one token, and the cases around a kernel's
 * boundaries, each against that reference (finite, relative L2 and
 * |norm ratio - 1| <= 1e-6 over all heads, the records of splits without
 * keys holding only their m). Include after cuda_block_emu.h,
 * kv_host_cache.h and gpu_common.h. */
#ifndef KILN_TESTS_ATTENTION_HOST_CHECK_H
#define KILN_TESTS_ATTENTION_HOST_CHECK_H

struct host_shape {
  const char *name;
  int head_dim, n_head, n_head_kv;
  float scale;
  int warps, n_split;
  int kv_type; /* the caches' kiln_type (kiln/kv_cache.h) */
  const char *(*run)(const float *q, const unsigned char *k, const unsigned char *v, float *part,
                     float *y, const int *step);
  int tile; /* keys a tile of the first kernel: a split is ceil(n / n_split) rounded up to tiles */
};

/* The f64 softmax attention of the pass's one token over keys 0..n-1. */
static inline void reference(const host_shape &s, const float *q, const float *k, const float *v,
                             int n, double *out) {
  const int hd = s.head_dim, group = s.n_head / s.n_head_kv, w = hd * s.n_head_kv;
  double *sc = (double *)kg_alloc((size_t)n * sizeof(double));
  for (int h = 0; h < s.n_head; h++) {
    const int g = h / group;
    double mx = -INFINITY;
    for (int j = 0; j < n; j++) {
      double dot = 0;
      for (int d = 0; d < hd; d++) dot += (double)q[h * hd + d] * k[(size_t)j * w + g * hd + d];
      sc[j] = dot * (double)s.scale;
      if (sc[j] > mx) mx = sc[j];
    }
    double sum = 0;
    for (int j = 0; j < n; j++) sum += (sc[j] = exp(sc[j] - mx));
    for (int d = 0; d < hd; d++) {
      double a = 0;
      for (int j = 0; j < n; j++) a += sc[j] * v[(size_t)j * w + g * hd + d];
      out[h * hd + d] = a / sum;
    }
  }
  free(sc);
}

/* Keys of each split, as the kernel computes them: ceil(n / n_split)
 * rounded up to whole tiles. */
static inline long long chunk_of(const host_shape &s, int n) {
  const long long per = ((long long)n + s.n_split - 1) / s.n_split, t = s.tile;
  return (per + t - 1) / t * t;
}

/* One case: n keys, q and the caches' values scaled by q_scale and
 * k_scale (powers of two: exact); returns 1 on failure (printed). */
static inline int run_case(const host_shape &s, int n, bool huge_scores, float q_scale = 1.0f,
                           float k_scale = 1.0f) {
  const int hd = s.head_dim, w = hd * s.n_head_kv, n_ctx = n + 2;
  const size_t qn = (size_t)hd * s.n_head, cn = (size_t)w * n_ctx;
  const size_t rec = (size_t)hd + 2, pn = (size_t)s.n_head * s.n_split * rec;
  float *q = (float *)kg_alloc(qn * sizeof(float)), *k = (float *)kg_alloc(cn * sizeof(float));
  float *v = (float *)kg_alloc(cn * sizeof(float)), *y = (float *)kg_alloc(qn * sizeof(float));
  float *part = (float *)kg_alloc(pn * sizeof(float));
  double *ref = (double *)kg_alloc(qn * sizeof(double));
  kg_rng r = kg_rng_new((uint64_t)(n * 131 + hd));
  if (huge_scores) { /* test_gpu_ops's attention_huge: raw q.k 115200 - 2.5 j */
    for (int h = 0; h < s.n_head; h++)
      for (int d = 0; d < hd; d++) q[h * hd + d] = h % 2 ? -40.0f : 40.0f;
    for (int j = 0; j < n_ctx; j++)
      for (int g = 0; g < s.n_head_kv; g++)
        for (int d = 0; d < hd; d++) {
          const int jj = g ? n_ctx - 1 - j : j;
          k[(size_t)j * w + g * hd + d] = 45.0f - (d < 32 ? (float)jj / 512.0f : 0.0f);
        }
  } else {
    kg_fill(&r, q, (int64_t)qn, -2, 2);
    kg_fill(&r, k, (int64_t)cn, -2, 2);
  }
  kg_fill(&r, v, (int64_t)cn, -1, 1);
  for (size_t i = 0; i < qn; i++) q[i] *= q_scale;
  for (size_t i = 0; i < cn; i++) k[i] *= k_scale;
  for (size_t i = (size_t)w * n; i < cn; i++) k[i] = v[i] = NAN; /* never to be read */
  for (size_t i = 0; i < pn; i++) part[i] = NAN;
  for (size_t i = 0; i < qn; i++) y[i] = NAN;
  const int step[8] = {n - 1, 1, n, 0, 0, 0, 0, 0};
  /* a typed cache, and k, v as the kernels read it (kv_host_cache.h) */
  unsigned char *kt = kv_host_typed_cache(s.kv_type, k, n, n_ctx, w),
                *vt = kv_host_typed_cache(s.kv_type, v, n, n_ctx, w);
  const unsigned char *kc = kt ? kt : (const unsigned char *)k, *vc = vt ? vt : (const unsigned char *)v;
  reference(s, q, k, v, n, ref);
  const char *err = s.run(q, kc, vc, part, y, step);
  free(kt);
  free(vt);
  int bad = 0;
  if (err) {
    printf("  FAIL %-8s n_kv %-5d: %s\n", s.name, n, err);
    bad = 1;
  } else {
    kg_metrics m = kg_compare_f64(y, ref, (int64_t)qn);
    /* the records: a split with keys written whole, one without only its m */
    const long long chunk = chunk_of(s, n);
    int rec_bad = 0;
    for (int h = 0; h < s.n_head; h++)
      for (int sp = 0; sp < s.n_split; sp++) {
        const float *p = part + ((size_t)h * s.n_split + sp) * rec;
        const bool empty = chunk * sp >= n;
        if (empty ? !(isinf(p[0]) && p[0] < 0) : !isfinite(p[0])) rec_bad++;
        for (size_t i = 1; i < rec; i++)
          if (empty ? !isnan(p[i]) : !isfinite(p[i])) rec_bad++;
      }
    const bool ok = kg_close(&m, 1e-6) && rec_bad == 0;
    printf("  %-8s n_kv %-5d chunk %-4lld rel L2 %.3e, |ratio-1| %.3e, max abs %.3e, finite %s, "
           "records %s%s\n",
           s.name, n, chunk, m.rel_l2, fabs(m.norm_ratio - 1.0), m.max_abs,
           m.finite ? "yes" : "NO", rec_bad ? "WRONG" : "as written", ok ? "" : "  FAIL");
    bad = !ok;
  }
  free(q);
  free(k);
  free(v);
  free(y);
  free(part);
  free(ref);
  return bad;
}

/* n_kv at the kernels' boundaries for shape s. */
static inline int run_shape(const host_shape &s, bool huge_scores) {
  const int T = s.tile, S = s.n_split;
  const int ns[] = {1, 2, T - 1, T, T + 1, S * T - 1, S * T, S * T + 1, 3 * S * T + 5,
                    4 * T * S - 1, 4 * T * S + T + 1};
  int bad = 0;
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    bool seen = ns[i] < 1;
    for (size_t j = 0; j < i; j++) seen = seen || ns[j] == ns[i];
    if (!seen) bad += run_case(s, ns[i], huge_scores);
  }
  return bad;
}

#endif
