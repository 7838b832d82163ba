/* The tensor-core split decode attention (backends/cuda-common/kernels/
 * attention_mma.cu.tmpl with mma_sync.cuh.tmpl, merged by
 * attention_merge.cu.tmpl) compiled for the host and run block by block
 * on tests/unit/cuda_block_emu.h's green threads, mma.sync emulated from
 * the PTX ISA's m16n8k16 fragment layout (each output the f64 sum of its
 * 16 exact products, rounded to f32) and the asynchronous copies as plain
 * ones: Qwen2.5-7B's heads (head_dim 128, 28 query heads on 4 KV heads) on
 * F16 and BF16 caches, a full group of 16 query heads at head_dim 64, one
 * head a KV head at head_dim 16 in one warp, and the raw q.k of 115200 of
 * test_gpu_ops (q of 40: Q scaled below f16's range and back), and small
 * queries against large keys (q scaled up clear of f16's subnormals). For each,
 * keys around every boundary (attention_host_check.h: 1 and 2 keys, one
 * 16-key tile and one key either side, one tile a split and either side,
 * four tiles a split, full and partial), against the f64 softmax of the
 * values the caches hold: finite, relative L2 and |norm ratio - 1| <=
 * 1e-6; cache rows past the last key, the records, y and the kernel's
 * shared memory start as NaN, so a read of any of them shows. No GPU
 * needed: test_gpu_attention runs the kernel on the device. */
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
#include "kiln/half.h"
#include "kiln/kv_cache.h"
}

#include "cuda_block_emu.h"
#include "kv_host_cache.h"
#include "attention_host_check.h"

#define KILN_HOST_EMULATION 1
#include "step_block.cuh.tmpl"

#define KILN_HOST_SHAPE qwen7b_f16
#define KILN_HEAD_DIM 128
#define KILN_N_HEAD 28
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.0883883461356163f /* 1/sqrt(128) in f32 */
#define KILN_WARPS 4
#define KILN_N_SPLIT 4
#define KILN_MMA_f16 1
#define KILN_HOST_KV KILN_TYPE_F16
namespace qwen7b_f16 {
#include "attention_mma_host_shape.h"
}

#define KILN_HOST_SHAPE qwen7b_bf16
#define KILN_HEAD_DIM 128
#define KILN_N_HEAD 28
#define KILN_N_HEAD_KV 4
#define KILN_SCALE 0.0883883461356163f
#define KILN_WARPS 4
#define KILN_N_SPLIT 3
#define KILN_MMA_bf16 1
#define KILN_HOST_KV KILN_TYPE_BF16
namespace qwen7b_bf16 {
#include "attention_mma_host_shape.h"
}

#define KILN_HOST_SHAPE g16
#define KILN_HEAD_DIM 64
#define KILN_N_HEAD 16
#define KILN_N_HEAD_KV 1
#define KILN_SCALE 0.125f
#define KILN_WARPS 2
#define KILN_N_SPLIT 3
#define KILN_MMA_f16 1
#define KILN_HOST_KV KILN_TYPE_F16
namespace g16 {
#include "attention_mma_host_shape.h"
}

#define KILN_HOST_SHAPE one_warp
#define KILN_HEAD_DIM 16
#define KILN_N_HEAD 2
#define KILN_N_HEAD_KV 2
#define KILN_SCALE 0.25f
#define KILN_WARPS 1
#define KILN_N_SPLIT 2
#define KILN_MMA_bf16 1
#define KILN_HOST_KV KILN_TYPE_BF16
namespace one_warp {
#include "attention_mma_host_shape.h"
}

#define KILN_HOST_SHAPE huge
#define KILN_HEAD_DIM 64
#define KILN_N_HEAD 4
#define KILN_N_HEAD_KV 2
#define KILN_SCALE 0.125f
#define KILN_WARPS 2
#define KILN_N_SPLIT 2
#define KILN_MMA_f16 1
#define KILN_HOST_KV KILN_TYPE_F16
namespace huge {
#include "attention_mma_host_shape.h"
}

static void test_mma_attention(void **state) {
  (void)state;
  int bad = 0;
  bad += run_shape(qwen7b_f16::shape, false);
  bad += run_shape(qwen7b_bf16::shape, false);
  bad += run_shape(g16::shape, false);
  bad += run_shape(one_warp::shape, false);
  bad += run_shape(huge::shape, true);
  /* small queries against large keys: q's f16 terms must be scaled up
   * clear of the subnormals (2^-14 and 2^8: 1.2e-6 to 8e-5 without) */
  bad += run_case(qwen7b_f16::shape, 257, false, 0x1p-14f, 0x1p8f);
  bad += run_case(qwen7b_f16::shape, 257, false, 0x1p-18f, 0x1p12f);
  bad += run_case(qwen7b_bf16::shape, 257, false, 0x1p-18f, 0x1p12f);
  assert_int_equal(bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_mma_attention)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
