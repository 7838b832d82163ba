/* The weight decoders every CUDA template that reads a GGUF weight uses
 * (backends/cuda-common/kernels/wtype_common.cuh.tmpl: the f32-activation
 * matvec, dequant_rows for the prefill GEMMs, get_rows, bias_add),
 * compiled for the host once per weight type as the kernels bake it:
 * kiln_wt_get for every value and kiln_wt_get8 for every 8 values of rows
 * packed field by field (tests/gpu's kg_pack_weight: random quants, finite
 * scales), each equal bit for bit to kiln_dequantize, which is ggml's
 * arithmetic; for Q5_K also the blocks of q5_k_ref.h (every byte of the
 * scales, qh and qs taking each of its 256 values, d and dmin of both
 * signs, subnormal to 4e4). A wrong nibble, high bit, scale, min or order
 * of operations changes a value. No GPU needed: test_gpu_ops and
 * test_gpu_bounds run the same decoders inside the kernels on a device. */
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
#include "kiln/dequant.h"
#include "kiln/half.h"
#include "kiln/types.h"
}
#include "q5_k_ref.h"

/* The host build of the decoders (wtype_common.cuh: f16 through
 * kiln/half.h). The CUDA qualifiers and intrinsics they use, for the host: each
 * rounding pinned (volatile: no contraction into an FMA), as __fmul_rn and
 * __fsub_rn pin it on the device. */
#define KILN_HOST_EMULATION 1
#define __device__
#define __forceinline__ inline
static inline float __fmul_rn(float a, float b) {
  volatile float p = a * b;
  return p;
}
static inline float __fsub_rn(float a, float b) {
  volatile float d = a - b;
  return d;
}
static inline float __uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

namespace wt_f32 {
#define KILN_WT_F32 1
#include "wtype_host_one.h"
#undef KILN_WT_F32
} // namespace wt_f32
namespace wt_f16 {
#define KILN_WT_F16 1
#include "wtype_host_one.h"
#undef KILN_WT_F16
} // namespace wt_f16
namespace wt_bf16 {
#define KILN_WT_BF16 1
#include "wtype_host_one.h"
#undef KILN_WT_BF16
} // namespace wt_bf16
namespace wt_q4_0 {
#define KILN_WT_Q4_0 1
#include "wtype_host_one.h"
#undef KILN_WT_Q4_0
} // namespace wt_q4_0
namespace wt_q5_0 {
#define KILN_WT_Q5_0 1
#include "wtype_host_one.h"
#undef KILN_WT_Q5_0
} // namespace wt_q5_0
namespace wt_q8_0 {
#define KILN_WT_Q8_0 1
#include "wtype_host_one.h"
#undef KILN_WT_Q8_0
} // namespace wt_q8_0
namespace wt_q4_k {
#define KILN_WT_Q4_K 1
#include "wtype_host_one.h"
#undef KILN_WT_Q4_K
} // namespace wt_q4_k
namespace wt_q5_k {
#define KILN_WT_Q5_K 1
#include "wtype_host_one.h"
#undef KILN_WT_Q5_K
} // namespace wt_q5_k
namespace wt_q6_k {
#define KILN_WT_Q6_K 1
#include "wtype_host_one.h"
#undef KILN_WT_Q6_K
} // namespace wt_q6_k

typedef struct decoder {
  kiln_type type;
  float (*get)(const unsigned char *, long long);
  bool (*get8)(const unsigned char *, long long, float *);
  long long row_bytes_256;
} decoder;

#define DECODER(t, ns) {t, ns::get, ns::get8, ns::row_bytes_256}
static const decoder decoders[] = {
    DECODER(KILN_TYPE_F32, wt_f32),   DECODER(KILN_TYPE_F16, wt_f16),
    DECODER(KILN_TYPE_BF16, wt_bf16), DECODER(KILN_TYPE_Q4_0, wt_q4_0),
    DECODER(KILN_TYPE_Q5_0, wt_q5_0), DECODER(KILN_TYPE_Q8_0, wt_q8_0),
    DECODER(KILN_TYPE_Q4_K, wt_q4_k), DECODER(KILN_TYPE_Q5_K, wt_q5_k),
    DECODER(KILN_TYPE_Q6_K, wt_q6_k),
};

/* rows x k values at w (256-byte aligned, rows back to back, as the
 * device's buffers): the number of values whose bits differ from
 * kiln_dequantize's, through kiln_wt_get and (block types) kiln_wt_get8. */
static int mismatches(const decoder *dec, const uint8_t *w, int k, int rows) {
  const int64_t rb = kiln_type_row_bytes(dec->type, k);
  float *want = kg_dequant(dec->type, w, k, rows);
  int bad = 0;
  for (int r = 0; r < rows; r++) {
    const uint8_t *row = w + (int64_t)r * rb;
    const float *wr = want + (int64_t)r * k;
    for (int i = 0; i < k; i++) {
      const float got = dec->get(row, i);
      if (memcmp(&got, &wr[i], 4) != 0 && bad++ < 5)
        printf("  %s row %d value %d: kiln_wt_get %.9g, kiln_dequantize %.9g\n",
               kiln_type_name(dec->type), r, i, (double)got, (double)wr[i]);
    }
    for (int i0 = 0; i0 < k; i0 += 8) {
      float y[8];
      if (!dec->get8(row, i0, y)) break;
      for (int i = 0; i < 8; i++)
        if (memcmp(&y[i], &wr[i0 + i], 4) != 0 && bad++ < 5)
          printf("  %s row %d value %d: kiln_wt_get8 %.9g, kiln_dequantize %.9g\n",
                 kiln_type_name(dec->type), r, i0 + i, (double)y[i], (double)wr[i0 + i]);
    }
  }
  free(want);
  return bad;
}

static uint8_t *device_copy(const uint8_t *p, size_t n) {
  uint8_t *w = (uint8_t *)aligned_alloc(256, (n + 255) / 256 * 256);
  if (!w) fail_msg("out of memory");
  memcpy(w, p, n);
  return w;
}

static void test_every_type(void **state) {
  (void)state;
  int bad = 0;
  for (size_t di = 0; di < sizeof decoders / sizeof decoders[0]; di++) {
    const decoder *dec = &decoders[di];
    assert_int_equal(dec->row_bytes_256, kiln_type_row_bytes(dec->type, 256));
    for (int k = 256; k <= 2816; k += 2560) { /* 256, 2816 */
      const int rows = 3;
      kg_rng r = kg_rng_new((uint64_t)(di * 31 + k));
      uint8_t *packed = kg_pack_weight(dec->type, k, rows, 0, 0, &r);
      uint8_t *w = device_copy(packed, (size_t)kiln_type_row_bytes(dec->type, k) * rows);
      const int n = mismatches(dec, w, k, rows);
      printf("%-4s K=%-4d: %d of %d values differ from kiln_dequantize%s\n",
             kiln_type_name(dec->type), k, n, k * rows, n ? "  FAIL" : "");
      bad += n;
      free(w);
      free(packed);
    }
  }
  assert_int_equal(bad, 0);
}

static void test_q5_k_every_pattern(void **state) {
  (void)state;
  uint8_t blocks[256 * 176];
  for (int b = 0; b < 256; b++) q5r_block(b, blocks + 176 * b);
  uint8_t *w = device_copy(blocks, sizeof blocks);
  const decoder *dec = NULL;
  for (size_t di = 0; di < sizeof decoders / sizeof decoders[0]; di++)
    if (decoders[di].type == KILN_TYPE_Q5_K) dec = &decoders[di];
  assert_non_null(dec);
  /* as 256 rows of one block and as one row of 256 blocks */
  const int n = mismatches(dec, w, 256, 256) + mismatches(dec, w, 256 * 256, 1);
  printf("Q5_K, 256 blocks of every bit pattern: %d of %d values differ from kiln_dequantize\n", n,
         2 * 256 * 256);
  free(w);
  assert_int_equal(n, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_type),
                                     cmocka_unit_test(test_q5_k_every_pattern)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
