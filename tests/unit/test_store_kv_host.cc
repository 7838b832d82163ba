/* store_kv's F16, BF16 and Q8_0 writes (backends/cuda-common/kernels/
 * store_kv.cu.tmpl with kv_type.cuh.tmpl) compiled for the host and run
 * block by block on tests/unit/cuda_block_emu.h's green threads: the
 * bytes each writes for a step of n_tokens columns at pos0 must be exactly
 * kiln/kv_cache.h's kiln_kv_store_row of the same rows (Q8_0: llama.cpp's
 * quantize_row_q8_0_ref, which test_kv_cache checks kiln_kv_store_row
 * against), the cache outside those columns untouched. Grids smaller and
 * larger than the work (the kernel's grid-stride loops, one warp per Q8_0
 * block), widths of one block and of several, values from 1e-6 to 1e4, a
 * zero block. No GPU needed. */
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
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_store_kv_types)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
