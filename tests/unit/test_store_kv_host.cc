/* store_kv's F16, BF16 and Q8_0 writes (backends/cuda-common/kernels/
 * store_kv.cu.tmpl with kv_type.cuh.tmpl) compiled for the host and run
 * block by block on tests/unit/cuda_block_emu.h's green threads: the
 * bytes each writes for a step of n_tokens columns at pos0 must be exactly
 * kiln/kv_cache.h's kiln_kv_store_row of the same rows (Q8_0: llama.cpp's
 * quantize_row_q8_0_ref, which test_kv_cache checks kiln_kv_store_row
 * against), the cache outside those columns untouched. Grids smaller and
 * larger than the work (the kernel's grid-stride loops, one warp per Q8_0
 * block), widths of one block and of several, values from 1e-6 to 1e4, a
 * zero block. And rope_store (rope_store.cu.tmpl, the fused decode RoPE
 * and K/V stores) with F16 and BF16 caches: its cache rows must be exactly
 * the F32 variant's rows (the same kernel, the same rotation) converted by
 * kiln_kv_store_row, its rotated q and k identical, other cache rows
 * untouched. No GPU needed. */
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

#define KILN_HOST_EMULATION 1
#include "step_block.cuh.tmpl"

typedef const char *(*store_fn)(unsigned grid, const float *src, unsigned char *cache, const int *step);

#define KILN_KV_F16 1
#define KILN_WIDTH 64
#define KILN_BLOCK 64
#define kiln_store_kv f16_64_store /* distinct extern "C" names */
namespace f16_64 {
#include "kv_type.cuh.tmpl"
#include "store_kv.cu.tmpl"
static const char *run(unsigned grid, const float *src, unsigned char *cache, const int *step) {
  return kiln_emu::launch(kiln_emu_dim3{grid, 1, 1}, KILN_BLOCK, [&] { kiln_store_kv(src, cache, step); });
}
}
#undef kiln_store_kv
#undef KILN_KV_F16
#undef KILN_WIDTH
#undef KILN_BLOCK
#undef KILN_KV_BYTES

#define KILN_KV_BF16 1
#define KILN_WIDTH 96
#define KILN_BLOCK 32
#define kiln_store_kv bf16_96_store /* distinct extern "C" names */
namespace bf16_96 {
#include "kv_type.cuh.tmpl"
#include "store_kv.cu.tmpl"
static const char *run(unsigned grid, const float *src, unsigned char *cache, const int *step) {
  return kiln_emu::launch(kiln_emu_dim3{grid, 1, 1}, KILN_BLOCK, [&] { kiln_store_kv(src, cache, step); });
}
}
#undef kiln_store_kv
#undef KILN_KV_BF16
#undef KILN_WIDTH
#undef KILN_BLOCK
#undef KILN_KV_BYTES

#define KILN_KV_Q8_0 1
#define KILN_WIDTH 32
#define KILN_BLOCK 64
#define kiln_store_kv q8_32_store /* distinct extern "C" names */
namespace q8_32 {
#include "kv_type.cuh.tmpl"
#include "store_kv.cu.tmpl"
static const char *run(unsigned grid, const float *src, unsigned char *cache, const int *step) {
  return kiln_emu::launch(kiln_emu_dim3{grid, 1, 1}, KILN_BLOCK, [&] { kiln_store_kv(src, cache, step); });
}
}
#undef kiln_store_kv
#undef KILN_WIDTH
#undef KILN_BLOCK
#undef KILN_KV_BYTES
#define KILN_WIDTH 256
#define KILN_BLOCK 128
#define kiln_store_kv q8_256_store /* distinct extern "C" names */
namespace q8_256 {
#include "kv_type.cuh.tmpl"
#include "store_kv.cu.tmpl"
static const char *run(unsigned grid, const float *src, unsigned char *cache, const int *step) {
  return kiln_emu::launch(kiln_emu_dim3{grid, 1, 1}, KILN_BLOCK, [&] { kiln_store_kv(src, cache, step); });
}
}
#undef kiln_store_kv
#undef KILN_KV_Q8_0
#undef KILN_WIDTH
#undef KILN_BLOCK
#undef KILN_KV_BYTES

/* rope_store: NEOX, 4 query and 2 KV heads of 64, rotating 48 (16 pass
 * through), θ 1e6; one kernel per cache type. */
typedef const char *(*rope_store_fn)(unsigned gy, const float *q, float *qo, const float *k, float *ko,
                                     unsigned char *kc, const float *v, unsigned char *vc, const int *step);
#define KILN_ROPE_NEOX 1
#define KILN_N_ROT 48
#define KILN_HEAD_DIM 64
#define KILN_THETA 1000000.0f
#define KILN_N_HEAD 4
#define KILN_N_HEAD_KV 2
#define KILN_BLOCK 64
#define KILN_ROPE_STORE_NS(ns)                                                                     \
  static const char *run(unsigned gy, const float *q, float *qo, const float *k, float *ko,        \
                         unsigned char *kc, const float *v, unsigned char *vc, const int *step) {  \
    return kiln_emu::launch(kiln_emu_dim3{1, gy, 1}, KILN_BLOCK,                                   \
                            [&] { kiln_rope_store(q, qo, k, ko, kc, v, vc, step); });               \
  }
#define KILN_KV_F32 1
#define kiln_rope_store rs_f32_store
namespace rs_f32 {
#include "rope_common.cuh.tmpl"
#include "kv_type.cuh.tmpl"
#include "rope_store.cu.tmpl"
KILN_ROPE_STORE_NS(rs_f32)
}
#undef kiln_rope_store
#undef KILN_KV_F32
#undef KILN_KV_BYTES
#undef KILN_HALF
#undef KILN_KVW
#undef KILN_NQ
#undef KILN_NK
#define KILN_KV_F16 1
#define kiln_rope_store rs_f16_store
namespace rs_f16 {
#include "rope_common.cuh.tmpl"
#include "kv_type.cuh.tmpl"
#include "rope_store.cu.tmpl"
KILN_ROPE_STORE_NS(rs_f16)
}
#undef kiln_rope_store
#undef KILN_KV_F16
#undef KILN_KV_BYTES
#undef KILN_HALF
#undef KILN_KVW
#undef KILN_NQ
#undef KILN_NK
#define KILN_KV_BF16 1
#define kiln_rope_store rs_bf16_store
namespace rs_bf16 {
#include "rope_common.cuh.tmpl"
#include "kv_type.cuh.tmpl"
#include "rope_store.cu.tmpl"
KILN_ROPE_STORE_NS(rs_bf16)
}
#undef kiln_rope_store
#undef KILN_KV_BF16
#undef KILN_KV_BYTES

static void test_rope_store_types(void **state) {
  (void)state;
  const int qw = KILN_N_HEAD * KILN_HEAD_DIM, kvw = KILN_N_HEAD_KV * KILN_HEAD_DIM, n_ctx = 40;
  const int pos0 = 29; /* a decode pass: one token */
  const int step[8] = {pos0, 1, pos0 + 1, 0, 0, 0, 0, 0};
  kg_rng r = kg_rng_new(99);
  float *q = (float *)kg_alloc(qw * sizeof(float)), *k = (float *)kg_alloc(kvw * sizeof(float));
  float *v = (float *)kg_alloc(kvw * sizeof(float));
  kg_fill(&r, q, qw, -3, 3);
  kg_fill(&r, k, kvw, -3, 3);
  kg_fill(&r, v, kvw, -2, 2);
  float qo32[4 * 64], ko32[2 * 64];
  unsigned char *kc32 = (unsigned char *)kg_alloc((size_t)kvw * 4 * n_ctx);
  unsigned char *vc32 = (unsigned char *)kg_alloc((size_t)kvw * 4 * n_ctx);
  memset(kc32, 0, (size_t)kvw * 4 * n_ctx);
  memset(vc32, 0, (size_t)kvw * 4 * n_ctx);
  const char *err = rs_f32::run(3, q, qo32, k, ko32, kc32, v, vc32, step);
  assert_null(err);
  /* the f32 kernel: the K cache's column is the rotated k, the V cache's v */
  assert_memory_equal(kc32 + (size_t)pos0 * kvw * 4, ko32, sizeof ko32);
  assert_memory_equal(vc32 + (size_t)pos0 * kvw * 4, v, (size_t)kvw * 4);
  static const rope_store_fn fns[] = {rs_f16::run, rs_bf16::run};
  static const kiln_type types[] = {KILN_TYPE_F16, KILN_TYPE_BF16};
  int bad = 0;
  for (int t = 0; t < 2; t++) {
    const int64_t rb = kiln_type_row_bytes(types[t], kvw);
    unsigned char *kc = (unsigned char *)kg_alloc((size_t)(rb * n_ctx)), *vc = (unsigned char *)kg_alloc((size_t)(rb * n_ctx));
    unsigned char *want = (unsigned char *)kg_alloc((size_t)rb);
    memset(kc, 0xa5, (size_t)(rb * n_ctx));
    memset(vc, 0xa5, (size_t)(rb * n_ctx));
    float qo[4 * 64], ko[2 * 64];
    for (unsigned gy = 1; gy <= 3; gy += 2) {
      assert_null(fns[t](gy, q, qo, k, ko, kc, v, vc, step));
      int64_t diff = memcmp(qo, qo32, sizeof qo) != 0 || memcmp(ko, ko32, sizeof ko) != 0;
      for (int c = 0; c < 2; c++) {
        const unsigned char *got = c ? vc : kc;
        kiln_kv_store_row(types[t], (const float *)((c ? vc32 : kc32) + (size_t)pos0 * kvw * 4), want, kvw);
        for (int64_t i = 0; i < rb; i++) diff += got[pos0 * rb + i] != want[i];
        for (int64_t i = 0; i < rb * n_ctx; i++)
          if ((i < pos0 * rb || i >= (pos0 + 1) * rb) && got[i] != 0xa5) diff++;
      }
      printf("  rope_store %s grid.y %u: %lld bytes differ from the f32 kernel's converted%s\n",
             kiln_type_name(types[t]), gy, (long long)diff, diff ? "  FAIL" : "");
      bad += diff != 0;
    }
    free(kc);
    free(vc);
    free(want);
  }
  free(q);
  free(k);
  free(v);
  free(kc32);
  free(vc32);
  assert_int_equal(bad, 0);
}

struct kernel {
  const char *name;
  int type, width;
  store_fn run;
};

static const kernel kernels[] = {
    {"f16 w64", KILN_TYPE_F16, 64, f16_64::run},
    {"bf16 w96", KILN_TYPE_BF16, 96, bf16_96::run},
    {"q8_0 w32", KILN_TYPE_Q8_0, 32, q8_32::run},
    {"q8_0 w256", KILN_TYPE_Q8_0, 256, q8_256::run},
};

static int run_case(const kernel &k, int pos0, int n_tokens, unsigned grid, uint64_t seed) {
  const int n_ctx = pos0 + n_tokens + 2, W = k.width;
  const int64_t rb = kiln_type_row_bytes(k.type, W);
  float *src = (float *)kg_alloc((size_t)n_tokens * W * sizeof(float));
  unsigned char *got = (unsigned char *)kg_alloc((size_t)(rb * n_ctx));
  unsigned char *want = (unsigned char *)kg_alloc((size_t)(rb * n_ctx));
  kg_rng r = kg_rng_new(seed);
  for (int t = 0; t < n_tokens; t++) {
    const double scale = pow(10.0, kg_uniform(&r, -6, 4));
    kg_fill(&r, src + (size_t)t * W, W, -scale, scale);
  }
  if (n_tokens > 1) memset(src + W, 0, 32 * sizeof(float)); /* a zero block */
  memset(got, 0xa5, (size_t)(rb * n_ctx));
  memset(want, 0xa5, (size_t)(rb * n_ctx));
  for (int t = 0; t < n_tokens; t++)
    kiln_kv_store_row(k.type, src + (size_t)t * W, want + (pos0 + t) * rb, W);
  const int step[8] = {pos0, n_tokens, pos0 + n_tokens, 0, 0, 0, 0, 0};
  const char *err = k.run(grid, src, got, step);
  int bad = 0;
  if (err) {
    printf("  FAIL %-9s pos0 %d n %d grid %u: %s\n", k.name, pos0, n_tokens, grid, err);
    bad = 1;
  } else {
    int64_t diff = 0, first = -1;
    for (int64_t i = 0; i < rb * n_ctx; i++)
      if (got[i] != want[i]) {
        diff++;
        if (first < 0) first = i;
      }
    printf("  %-9s pos0 %-3d n %-3d grid %-3u: %lld of %lld bytes differ%s\n", k.name, pos0, n_tokens,
           grid, (long long)diff, (long long)(rb * n_ctx), diff ? "  FAIL" : "");
    if (diff) printf("    first at byte %lld (row %lld)\n", (long long)first, (long long)(first / rb));
    bad = diff != 0;
  }
  free(src);
  free(got);
  free(want);
  return bad;
}

static void test_store_kv_types(void **state) {
  (void)state;
  int bad = 0;
  for (const kernel &k : kernels) {
    bad += run_case(k, 0, 1, 1, 1);
    bad += run_case(k, 5, 1, 3, 2);
    bad += run_case(k, 3, 7, 1, 3);  /* fewer threads than values: grid-stride */
    bad += run_case(k, 0, 16, 9, 4); /* more blocks than work for some */
  }
  assert_int_equal(bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_store_kv_types),
                                     cmocka_unit_test(test_rope_store_types)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
