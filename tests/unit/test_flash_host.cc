/* The flash prefill attention kernel (backends/cuda-common/kernels/
 * flash_attention.cu.tmpl) compiled for the host and run block by block
 * on tests/unit/cuda_block_emu.h's green threads: the kernel's own tiles,
 * barriers, shuffles, causal mask and online softmax, not a copy of them.
 * Shapes: head_dim 128 and 64, GQA groups of 7 (28/4 heads, Qwen2.5-7B)
 * and 1 (no sharing), each with cuda-batched's tiles (bq 64, bk 64, 8
 * warps) and cuda-cc120's (32, 32, 4 warps), and head_dim 80 (lanes past
 * the last value in each row of 32), and F16, BF16 and Q8_0 caches
 * (kv_type.cuh.tmpl; the reference reads the stored rows back with
 * kiln/kv_cache.h, so it sees the values the kernel sees). Passes of T = 2, 37 and 129 tokens
 * at pos0 = 0 and at a pos0 that puts the causal edge inside a key tile
 * (and the cache length one past a tile edge), so blocks see several key
 * tiles, partial tiles, tiles fully masked for some of their rows, and
 * query tiles that end past the pass's last row.
 * Against the f64 causal softmax of the same f32 inputs, token by token:
 * finite, relative L2 and |norm ratio - 1| <= 1e-6 at every token (the
 * worst is printed); cache positions past n_kv, the shared memory and the
 * unwritten output column start as NaN, so a read of any of them, or a
 * write past the pass, shows. The kernel's shared memory layout must
 * also be the size the host launches with (flash_shape.h). No GPU
 * needed: test_gpu_flash checks the same kernel on the device. */
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
#include "flash_shape.h"

struct flash_shape_host {
  const char *name;
  int head_dim, n_head, n_head_kv;
  float scale;
  int bq, bk, warps;
  size_t smem_bytes; /* the kernel's layout (flash_layout.cuh.tmpl) */
  int kv_type;       /* the caches' kiln_type (kiln/kv_cache.h) */
  const char *(*run)(const float *q, const unsigned char *k, const unsigned char *v, float *y,
                     const int *step);
};

#define KILN_HOST_EMULATION 1
#include "step_block.cuh.tmpl"

#define KILN_HOST_SHAPE q7b_batched
#define KILN_HEAD_DIM 128
#define KILN_N_HEAD 28
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.0883883461356163f /* 1/sqrt(128) in f32 */
#define KILN_BQ 64
#define KILN_BK 64
#define KILN_WARPS 8
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace q7b_batched {
#include "flash_host_shape.h"
}

#define KILN_HOST_SHAPE q7b_cc120
#define KILN_HEAD_DIM 128
#define KILN_N_HEAD 28
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.0883883461356163f
#define KILN_BQ 32
#define KILN_BK 32
#define KILN_WARPS 4
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace q7b_cc120 {
#include "flash_host_shape.h"
}

#define KILN_HOST_SHAPE mha128_cc120
#define KILN_HEAD_DIM 128
#define KILN_N_HEAD 3
#define KILN_N_HEAD_KV 3
#define KILN_SCALE 0.0883883461356163f
#define KILN_BQ 32
#define KILN_BK 32
#define KILN_WARPS 4
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace mha128_cc120 {
#include "flash_host_shape.h"
}

#define KILN_HOST_SHAPE g7_64_cc120
#define KILN_HEAD_DIM 64
#define KILN_N_HEAD 14
#define KILN_N_HEAD_KV 2
#define KILN_SCALE 0.125f /* 1/sqrt(64) */
#define KILN_BQ 32
#define KILN_BK 32
#define KILN_WARPS 4
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace g7_64_cc120 {
#include "flash_host_shape.h"
}

#define KILN_HOST_SHAPE mha64_batched
#define KILN_HEAD_DIM 64
#define KILN_N_HEAD 2
#define KILN_N_HEAD_KV 2
#define KILN_SCALE 0.125f
#define KILN_BQ 64
#define KILN_BK 64
#define KILN_WARPS 8
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace mha64_batched {
#include "flash_host_shape.h"
}

#define KILN_HOST_SHAPE odd80_batched
#define KILN_HEAD_DIM 80
#define KILN_N_HEAD 6
#define KILN_N_HEAD_KV 3
#define KILN_SCALE 0.111803397536277771f /* 1/sqrt(80) */
#define KILN_BQ 64
#define KILN_BK 64
#define KILN_WARPS 8
#define KILN_KV_F32 1
#define KILN_HOST_KV KILN_TYPE_F32
namespace odd80_batched {
#include "flash_host_shape.h"
}

/* The same kernel over F16, BF16 and Q8_0 caches (kv_type.cuh.tmpl):
 * the 7B's shape on cuda-batched's tiles and cuda-cc120's, head_dim 64. */
#define KILN_HOST_SHAPE q7b_f16
#define KILN_HEAD_DIM 128
#define KILN_N_HEAD 28
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.0883883461356163f
#define KILN_BQ 64
#define KILN_BK 64
#define KILN_WARPS 8
#define KILN_KV_F16 1
#define KILN_HOST_KV KILN_TYPE_F16
namespace q7b_f16 {
#include "flash_host_shape.h"
}

#define KILN_HOST_SHAPE q7b_bf16_cc120
#define KILN_HEAD_DIM 128
#define KILN_N_HEAD 28
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.0883883461356163f
#define KILN_BQ 32
#define KILN_BK 32
#define KILN_WARPS 4
#define KILN_KV_BF16 1
#define KILN_HOST_KV KILN_TYPE_BF16
namespace q7b_bf16_cc120 {
#include "flash_host_shape.h"
}

#define KILN_HOST_SHAPE g7_64_q8_0
#define KILN_HEAD_DIM 64
#define KILN_N_HEAD 14
#define KILN_N_HEAD_KV 2
#define KILN_SCALE 0.125f
#define KILN_BQ 64
#define KILN_BK 64
#define KILN_WARPS 8
#define KILN_KV_Q8_0 1
#define KILN_HOST_KV KILN_TYPE_Q8_0
namespace g7_64_q8_0 {
#include "flash_host_shape.h"
}

static const flash_shape_host *const shapes[] = {
    &q7b_batched::shape,   &q7b_cc120::shape, &mha128_cc120::shape, &g7_64_cc120::shape,
    &mha64_batched::shape, &odd80_batched::shape, &q7b_f16::shape, &q7b_bf16_cc120::shape,
    &g7_64_q8_0::shape};

/* The f64 causal softmax attention of token t (position pos0 + t), query
 * head h, over cache positions 0 .. pos0 + t. */
static void reference(const flash_shape_host &s, const float *q, const float *k, const float *v,
                      int T, int pos0, double *out) {
  const int hd = s.head_dim, group = s.n_head / s.n_head_kv, w = hd * s.n_head_kv;
  const int n_kv = pos0 + T;
  double *sc = (double *)kg_alloc((size_t)n_kv * sizeof(double));
  for (int t = 0; t < T; t++)
    for (int h = 0; h < s.n_head; h++) {
      const int g = h / group, n = pos0 + t + 1;
      const float *qh = q + ((size_t)t * s.n_head + h) * hd;
      double mx = -INFINITY;
      for (int j = 0; j < n; j++) {
        double dot = 0;
        for (int d = 0; d < hd; d++) dot += (double)qh[d] * k[(size_t)j * w + g * hd + d];
        sc[j] = dot * (double)s.scale;
        if (sc[j] > mx) mx = sc[j];
      }
      double sum = 0;
      for (int j = 0; j < n; j++) sum += (sc[j] = exp(sc[j] - mx));
      for (int d = 0; d < hd; d++) {
        double a = 0;
        for (int j = 0; j < n; j++) a += sc[j] * v[(size_t)j * w + g * hd + d];
        out[((size_t)t * s.n_head + h) * hd + d] = a / sum;
      }
    }
  free(sc);
}

/* One pass of T tokens at pos0; returns 1 on failure (printed). */
static int run_case(const flash_shape_host &s, int T, int pos0) {
  const int hd = s.head_dim, w = hd * s.n_head_kv, n_kv = pos0 + T, n_ctx = n_kv + 3;
  const size_t col = (size_t)hd * s.n_head, qn = col * (T + 1), cn = (size_t)w * n_ctx;
  float *q = (float *)kg_alloc(qn * sizeof(float)), *k = (float *)kg_alloc(cn * sizeof(float));
  float *v = (float *)kg_alloc(cn * sizeof(float)), *y = (float *)kg_alloc(qn * sizeof(float));
  double *ref = (double *)kg_alloc(col * T * sizeof(double));
  kg_rng r = kg_rng_new((uint64_t)(T * 7919 + pos0 * 131 + hd + s.bq));
  kg_fill(&r, q, (int64_t)(col * T), -2, 2);
  kg_fill(&r, k, (int64_t)cn, -2, 2);
  kg_fill(&r, v, (int64_t)cn, -1, 1);
  for (size_t i = col * T; i < qn; i++) q[i] = NAN; /* a column past the pass */
  for (size_t i = (size_t)w * n_kv; i < cn; i++) k[i] = v[i] = NAN; /* never to be read */
  for (size_t i = 0; i < qn; i++) y[i] = NAN;
  const int step[8] = {pos0, T, n_kv, 0, 0, 0, 0, 0};
  /* a typed cache, and k, v as the kernels read it (kv_host_cache.h) */
  unsigned char *kt = kv_host_typed_cache(s.kv_type, k, n_kv, n_ctx, w),
                *vt = kv_host_typed_cache(s.kv_type, v, n_kv, n_ctx, w);
  const unsigned char *kc = kt ? kt : (const unsigned char *)k, *vc = vt ? vt : (const unsigned char *)v;
  reference(s, q, k, v, T, pos0, ref);
  const char *err = s.run(q, kc, vc, y, step);
  free(kt);
  free(vt);
  int bad = 0;
  if (err) {
    printf("  FAIL %-14s T %-3d pos0 %-3d: %s\n", s.name, T, pos0, err);
    return 1;
  }
  double worst_l2 = 0, worst_ratio = 0;
  int worst_t = 0, bad_t = 0;
  bool finite = true;
  for (int t = 0; t < T; t++) {
    const kg_metrics m = kg_compare_f64(y + col * t, ref + col * t, (int64_t)col);
    finite = finite && m.finite;
    if (!kg_close(&m, 1e-6)) bad_t++;
    if (!(m.rel_l2 <= worst_l2)) {
      worst_l2 = m.rel_l2;
      worst_t = t;
    }
    if (!(fabs(m.norm_ratio - 1.0) <= worst_ratio)) worst_ratio = fabs(m.norm_ratio - 1.0);
  }
  int past = 0; /* the column past the pass stays unwritten */
  for (size_t i = col * T; i < qn; i++) past += !isnan(y[i]);
  const kg_metrics all = kg_compare_f64(y, ref, (int64_t)(col * T));
  bad = bad_t > 0 || past > 0 || !finite;
  printf("  %-14s T %-3d pos0 %-3d n_kv %-3d worst token %-3d rel L2 %.3e, worst |ratio-1| "
         "%.3e; all: rel L2 %.3e, cosine %.9f, finite %s%s%s\n",
         s.name, T, pos0, n_kv, worst_t, worst_l2, worst_ratio, all.rel_l2, all.cosine,
         finite ? "yes" : "NO", past ? ", WROTE PAST THE PASS" : "", bad ? "  FAIL" : "");
  free(q);
  free(k);
  free(v);
  free(y);
  free(ref);
  return bad;
}

/* pos0 = 0, and a pos0 putting the last token's causal edge a few keys
 * into a tile and n_kv one past a tile edge (for T = 2: the first token's
 * limit exactly at a tile edge, the second one past it). */
static int run_shape(const flash_shape_host &s) {
  const int BK = s.bk;
  const int cases[][2] = {{2, 0}, {2, 2 * BK - 1}, {37, 0}, {37, BK + 5 - 37 + BK},
                          {129, 0}, {129, 2 * BK + 1 - 129 + BK}, {2, 3000}, {3, 4000}};
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int T = cases[i][0], pos0 = cases[i][1] < 0 ? 0 : cases[i][1];
    bad += run_case(s, T, pos0);
  }
  return bad;
}

static void test_flash_attention(void **state) {
  (void)state;
  int bad = 0;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) bad += run_shape(*shapes[i]);
  assert_int_equal(bad, 0);
}

/* The layout the kernel indexes is the size the host launches with. */
static void test_smem_size_agrees(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const flash_shape_host &s = *shapes[i];
    const uint64_t host =
        kiln_cuda_flash_smem_bytes((uint32_t)s.head_dim, (uint32_t)s.bq, (uint32_t)s.bk);
    printf("  %-14s shared memory %zu bytes (kernel), %llu (host)\n", s.name, s.smem_bytes,
           (unsigned long long)host);
    assert_int_equal(host, s.smem_bytes);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_smem_size_agrees),
                                     cmocka_unit_test(test_flash_attention)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
