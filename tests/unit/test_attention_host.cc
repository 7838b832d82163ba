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
#include "attention_host_check.h"



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
