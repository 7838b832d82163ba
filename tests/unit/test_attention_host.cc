/* The split-KV decode attention kernels (backends/cuda-common/kernels/
 * attention_split.cu.tmpl and attention_merge.cu.tmpl) compiled for the
 * host and run block by block on tests/unit/cuda_block_emu.h's green
 * threads, for shapes whose every path a device would take is small
 * enough to emulate: Qwen2.5-7B's heads (head_dim 128, 28 query heads on
 * 4 KV heads), an odd head_dim 80 with 6/3 heads, stories260K's head_dim
 * 8, one warp a block with a group of one, and the raw q.k of 115200 of
 * test_gpu_ops (scaled scores of 14400, exact in f32), and F16, BF16 and
 * Q8_0 caches (kv_type.cuh.tmpl; the reference reads the stored rows back
 * with kiln/kv_cache.h, so it sees the values the kernels see). For each, keys
 * around every boundary the kernels have: 1 and 2 keys, one tile and one
 * key either side, one tile a split when every split is full and one key
 * either side, and four tiles a split (the prefetched next tile), full and
 * with a partial last tile; also Qwen3.5's head_dim 256 (16-key tiles),
 * an odd group on 16-key tiles in one warp, and head_dim 18 (not a
 * multiple of 4); and the split kernel merging itself (merge = 1, its
 * tickets set back to 0 by each launch) in five of those shapes. Against
 * the f64 softmax of
 * the same f32 inputs: finite, relative L2 and |norm ratio - 1| <= 1e-6
 * over all heads; cache rows past the last key, the partial results and
 * y start as NaN, so a read of any of them shows; the record of a split
 * without keys keeps its NaN l and acc (the kernels write only its m).
 * No GPU needed: test_gpu_attention checks the same kernels on the
 * device. */
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
#include "kiln/kv_cache.h"
}

#include "cuda_block_emu.h"
#include "kv_host_cache.h"

struct host_shape {
  const char *name;
  int head_dim, n_head, n_head_kv;
  float scale;
  int warps, n_split;
  int kv_type; /* the caches' kiln_type (kiln/kv_cache.h) */
  const char *(*run)(const float *q, const unsigned char *k, const unsigned char *v, float *part,
                     float *y, const int *step);
};

#define KILN_HOST_EMULATION 1
#include "step_block.cuh.tmpl"

#define KILN_HOST_SHAPE qwen7b
#define KILN_HEAD_DIM 128
#define KILN_N_HEAD 28
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.0883883461356163f /* 1/sqrt(128) in f32 */
#define KILN_WARPS 8
#define KILN_N_SPLIT 4
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace qwen7b {
#include "attention_host_shape.h"
}

#define KILN_HOST_SHAPE odd80
#define KILN_HEAD_DIM 80
#define KILN_N_HEAD 6
#define KILN_N_HEAD_KV 3
#define KILN_SCALE 0.111803397536277771f /* 1/sqrt(80) */
#define KILN_WARPS 4
#define KILN_N_SPLIT 3
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace odd80 {
#include "attention_host_shape.h"
}

#define KILN_HOST_SHAPE stories
#define KILN_HEAD_DIM 8
#define KILN_N_HEAD 8
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.353553384542465210f /* 1/sqrt(8) */
#define KILN_WARPS 2
#define KILN_N_SPLIT 5
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace stories {
#include "attention_host_shape.h"
}

#define KILN_HOST_SHAPE one_warp
#define KILN_HEAD_DIM 32
#define KILN_N_HEAD 4
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.176776695296636881f /* 1/sqrt(32) */
#define KILN_WARPS 1
#define KILN_N_SPLIT 3
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace one_warp {
#include "attention_host_shape.h"
}

#define KILN_HOST_SHAPE huge
#define KILN_HEAD_DIM 64
#define KILN_N_HEAD 4
#define KILN_N_HEAD_KV 2
#define KILN_SCALE 0.125f
#define KILN_WARPS 2
#define KILN_N_SPLIT 2
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace huge {
#include "attention_host_shape.h"
}

/* One split over a long cache (attention_splits = 1): every key in one
 * block's running sums. */
#define KILN_HOST_SHAPE qwen7b_one
#define KILN_HEAD_DIM 128
#define KILN_N_HEAD 28
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.0883883461356163f
#define KILN_WARPS 8
#define KILN_N_SPLIT 1
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace qwen7b_one {
#include "attention_host_shape.h"
}

/* Qwen3.5-9B's full-attention heads: head_dim 256 takes tiles of 16 keys,
 * two heads' segments a warp. */
#define KILN_HOST_SHAPE qwen35
#define KILN_HEAD_DIM 256
#define KILN_N_HEAD 16
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.0625f
#define KILN_WARPS 8
#define KILN_N_SPLIT 3
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace qwen35 {
#include "attention_host_shape.h"
}

/* An odd group on 16-key tiles (a warp's second segment past the last
 * head), one warp (no prefetch: the tile does not fit its registers). */
#define KILN_HOST_SHAPE g3_hd136
#define KILN_HEAD_DIM 136
#define KILN_N_HEAD 6
#define KILN_N_HEAD_KV 2
#define KILN_SCALE 0.0857492925712544f
#define KILN_WARPS 1
#define KILN_N_SPLIT 2
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace g3_hd136 {
#include "attention_host_shape.h"
}

/* head_dim not a multiple of 4: the scalar q.k. */
#define KILN_HOST_SHAPE hd18
#define KILN_HEAD_DIM 18
#define KILN_N_HEAD 3
#define KILN_N_HEAD_KV 1
#define KILN_SCALE 0.235702260395515842f
#define KILN_WARPS 2
#define KILN_N_SPLIT 2
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace hd18 {
#include "attention_host_shape.h"
}

/* The same kernels over F16, BF16 and Q8_0 caches (kv_type.cuh.tmpl). */
#define KILN_HOST_SHAPE kv_f16
#define KILN_HEAD_DIM 128
#define KILN_N_HEAD 28
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.0883883461356163f
#define KILN_WARPS 8
#define KILN_N_SPLIT 4
#define KILN_KV_F16 1
#define KILN_HOST_KV KILN_TYPE_F16
namespace kv_f16 {
#include "attention_host_shape.h"
}

#define KILN_HOST_SHAPE kv_bf16
#define KILN_HEAD_DIM 80
#define KILN_N_HEAD 6
#define KILN_N_HEAD_KV 3
#define KILN_SCALE 0.111803397536277771f
#define KILN_WARPS 4
#define KILN_N_SPLIT 3
#define KILN_KV_BF16 1
#define KILN_HOST_KV KILN_TYPE_BF16
namespace kv_bf16 {
#include "attention_host_shape.h"
}

#define KILN_HOST_SHAPE kv_q8_0
#define KILN_HEAD_DIM 64
#define KILN_N_HEAD 8
#define KILN_N_HEAD_KV 2
#define KILN_SCALE 0.125f
#define KILN_WARPS 4
#define KILN_N_SPLIT 3
#define KILN_KV_Q8_0 1
#define KILN_HOST_KV KILN_TYPE_Q8_0
namespace kv_q8_0 {
#include "attention_host_shape.h"
}

/* The split kernel merging itself (merge = 1): the 7B's heads at 4 and at
 * 20 splits (tg128's count: every block but the last of a KV head takes a
 * ticket and leaves), one warp a block with a group of one, Qwen3.5's
 * head_dim 256, a Q8_0 cache. */
#define KILN_HOST_SHAPE qwen7b_fm
#define KILN_HEAD_DIM 128
#define KILN_N_HEAD 28
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.0883883461356163f
#define KILN_WARPS 8
#define KILN_N_SPLIT 4
#define KILN_FUSED_MERGE 1
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace qwen7b_fm {
#include "attention_host_shape.h"
}

#define KILN_HOST_SHAPE qwen7b_fm20
#define KILN_HEAD_DIM 128
#define KILN_N_HEAD 28
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.0883883461356163f
#define KILN_WARPS 8
#define KILN_N_SPLIT 20
#define KILN_FUSED_MERGE 1
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace qwen7b_fm20 {
#include "attention_host_shape.h"
}

#define KILN_HOST_SHAPE one_warp_fm
#define KILN_HEAD_DIM 32
#define KILN_N_HEAD 4
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.176776695296636881f
#define KILN_WARPS 1
#define KILN_N_SPLIT 3
#define KILN_FUSED_MERGE 1
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace one_warp_fm {
#include "attention_host_shape.h"
}

#define KILN_HOST_SHAPE qwen35_fm
#define KILN_HEAD_DIM 256
#define KILN_N_HEAD 16
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.0625f
#define KILN_WARPS 8
#define KILN_N_SPLIT 3
#define KILN_FUSED_MERGE 1
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace qwen35_fm {
#include "attention_host_shape.h"
}

#define KILN_HOST_SHAPE kv_q8_0_fm
#define KILN_HEAD_DIM 64
#define KILN_N_HEAD 8
#define KILN_N_HEAD_KV 2
#define KILN_SCALE 0.125f
#define KILN_WARPS 4
#define KILN_N_SPLIT 3
#define KILN_FUSED_MERGE 1
#define KILN_KV_Q8_0 1
#define KILN_HOST_KV KILN_TYPE_Q8_0
namespace kv_q8_0_fm {
#include "attention_host_shape.h"
}

/* The f64 softmax attention of the pass's one token over keys 0..n-1. */
static void reference(const host_shape &s, const float *q, const float *k, const float *v,
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

/* Keys a tile of the split kernel (its KILN_TK). */
static int tile_of(const host_shape &s) { return s.head_dim <= 128 ? 32 : 16; }

/* Keys of each split, as the kernel computes them: ceil(n / n_split)
 * rounded up to whole tiles. */
static long long chunk_of(const host_shape &s, int n) {
  const long long per = ((long long)n + s.n_split - 1) / s.n_split, t = tile_of(s);
  return (per + t - 1) / t * t;
}

/* One case: n keys; returns 1 on failure (printed). */
static int run_case(const host_shape &s, int n, bool huge_scores) {
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
static int run_shape(const host_shape &s, bool huge_scores) {
  const int T = tile_of(s), S = s.n_split;
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

static void test_split_attention(void **state) {
  (void)state;
  int bad = 0;
  bad += run_shape(qwen7b::shape, false);
  bad += run_shape(odd80::shape, false);
  bad += run_shape(stories::shape, false);
  bad += run_shape(one_warp::shape, false);
  bad += run_shape(huge::shape, true);
  bad += run_case(qwen7b_one::shape, 4097, false); /* test_gpu_attention's longest one-split case */
  bad += run_shape(qwen35::shape, false);
  bad += run_shape(g3_hd136::shape, false);
  bad += run_shape(hd18::shape, false);
  bad += run_shape(kv_f16::shape, false);
  bad += run_shape(kv_bf16::shape, false);
  bad += run_shape(kv_q8_0::shape, false);
  bad += run_shape(qwen7b_fm::shape, false);
  bad += run_shape(qwen7b_fm20::shape, false);
  bad += run_shape(one_warp_fm::shape, false);
  bad += run_shape(qwen35_fm::shape, false);
  bad += run_shape(kv_q8_0_fm::shape, false);
  assert_int_equal(bad, 0);
}

/* A barrier only some threads reach is reported, not hung on. */
static void test_emulator_reports_deadlock(void **state) {
  (void)state;
  const char *e = kiln_emu::launch(kiln_emu_dim3{1, 1, 1}, 64, [] {
    if (threadIdx.x < 32) __syncthreads();
  });
  assert_non_null(e);
  assert_non_null(strstr(e, "deadlock"));
  int out[64];
  e = kiln_emu::launch(kiln_emu_dim3{1, 1, 1}, 64, [&] {
    const int lane = (int)(threadIdx.x % 32);
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, lane, 1) + 100 * __shfl_sync(0xffffffffu, lane, 31 - lane);
  });
  assert_null(e);
  for (int i = 0; i < 64; i++) assert_int_equal(out[i], ((i % 32) ^ 1) + 100 * (31 - i % 32));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_emulator_reports_deadlock),
                                     cmocka_unit_test(test_split_attention)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
