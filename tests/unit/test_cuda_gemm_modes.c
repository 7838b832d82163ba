/* Which GEMM each batched MUL_MAT takes (gemm_choice.c), for devices this
 * machine need not have: the configured mode on compute capability 7.5,
 * 8.6, 9.0 and 12.0 (kiln_cuda_gemm_on_device), then per weight type and
 * K under q16mma (kiln_cuda_gemm_of_node), and the describe_modes line
 * that counts them, so `kiln run` and `kiln bench` can say that 2 of 198
 * GEMMs took bf16x3 where q16mma was asked; and the strict reading of the
 * list-valued keys (matvec_shape, mmq_shape). No device, no CUDA call. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cuda_backend.h"

static const kiln_cuda_gemm_mode all_modes[] = {KILN_CUDA_GEMM_F32,    KILN_CUDA_GEMM_TF32,
                                                KILN_CUDA_GEMM_BF16,   KILN_CUDA_GEMM_BF16X3,
                                                KILN_CUDA_GEMM_Q16MMA, KILN_CUDA_GEMM_FP8,
                                                KILN_CUDA_GEMM_TF32X3};

/* A MUL_MAT of a [k, 64] weight of type t over 8 columns. */
typedef struct mm {
  kiln_tensor w, x, y;
  kiln_node node;
} mm;

static void make_mm(mm *m, kiln_type t, int64_t k) {
  memset(m, 0, sizeof *m);
  m->w.type = t;
  m->w.role = KILN_ROLE_WEIGHT;
  m->w.ne[0] = k;
  m->w.ne[1] = 64;
  m->x.type = m->y.type = KILN_TYPE_F32;
  m->x.ne[0] = k;
  m->x.ne[1] = m->y.ne[1] = 8;
  m->y.ne[0] = 64;
  m->node.op = KILN_OP_MUL_MAT;
  m->node.src[0] = &m->w;
  m->node.src[1] = &m->x;
  m->node.dst = &m->y;
}

static void test_device_fallbacks(void **state) {
  (void)state;
  /* cc 9.0 and 12.0 run every mode as asked */
  for (size_t i = 0; i < sizeof all_modes / sizeof all_modes[0]; i++) {
    assert_int_equal(kiln_cuda_gemm_on_device(all_modes[i], 9), all_modes[i]);
    assert_int_equal(kiln_cuda_gemm_on_device(all_modes[i], 12), all_modes[i]);
  }
  /* 8.6 (Ampere, no per-row FP8 scales): fp8 takes bf16x3, the rest stay */
  assert_int_equal(kiln_cuda_gemm_on_device(KILN_CUDA_GEMM_FP8, 8), KILN_CUDA_GEMM_BF16X3);
  assert_int_equal(kiln_cuda_gemm_on_device(KILN_CUDA_GEMM_Q16MMA, 8), KILN_CUDA_GEMM_Q16MMA);
  assert_int_equal(kiln_cuda_gemm_on_device(KILN_CUDA_GEMM_BF16X3, 8), KILN_CUDA_GEMM_BF16X3);
  assert_int_equal(kiln_cuda_gemm_on_device(KILN_CUDA_GEMM_BF16, 8), KILN_CUDA_GEMM_BF16);
  /* 7.5 (Turing, no bf16, tf32 or int8 mma.sync): every tensor-core mode
   * to f32, fp8 through bf16x3; tf32 too (cuBLAS would run it on CUDA
   * cores in f32, and the modes line must say f32) */
  assert_int_equal(kiln_cuda_gemm_on_device(KILN_CUDA_GEMM_FP8, 7), KILN_CUDA_GEMM_F32);
  assert_int_equal(kiln_cuda_gemm_on_device(KILN_CUDA_GEMM_Q16MMA, 7), KILN_CUDA_GEMM_F32);
  assert_int_equal(kiln_cuda_gemm_on_device(KILN_CUDA_GEMM_BF16X3, 7), KILN_CUDA_GEMM_F32);
  assert_int_equal(kiln_cuda_gemm_on_device(KILN_CUDA_GEMM_BF16, 7), KILN_CUDA_GEMM_F32);
  assert_int_equal(kiln_cuda_gemm_on_device(KILN_CUDA_GEMM_TF32, 7), KILN_CUDA_GEMM_F32);
  assert_int_equal(kiln_cuda_gemm_on_device(KILN_CUDA_GEMM_TF32, 8), KILN_CUDA_GEMM_TF32);
  assert_int_equal(kiln_cuda_gemm_on_device(KILN_CUDA_GEMM_TF32X3, 8), KILN_CUDA_GEMM_TF32X3);
  assert_int_equal(kiln_cuda_gemm_on_device(KILN_CUDA_GEMM_TF32X3, 7), KILN_CUDA_GEMM_F32);
  /* tf32x3's operand: the bf16x3 layout in 4-byte TF32 terms */
  assert_string_equal(kiln_cuda_gemm_operand(KILN_CUDA_GEMM_TF32X3), "tf32x3");
  assert_int_equal(kiln_cuda_gemm_terms(KILN_CUDA_GEMM_TF32X3), 3);
  assert_int_equal(kiln_cuda_gemm_term_bytes(KILN_CUDA_GEMM_TF32X3), 4);
  assert_int_equal(kiln_cuda_gemm_term_bytes(KILN_CUDA_GEMM_BF16X3), 2);
  assert_int_equal(kiln_cuda_gemm_on_device(KILN_CUDA_GEMM_F32, 7), KILN_CUDA_GEMM_F32);
}

/* Under q16mma mmq takes the block weights it decodes with K in whole
 * 128s; everything else takes bf16x3, with the cause. Other modes keep
 * every node. */
static void test_node_choice(void **state) {
  (void)state;
  static const struct {
    kiln_type t;
    int64_t k;
    kiln_cuda_gemm_mode want;
    kiln_cuda_mmq_fit why;
  } cases[] = {
      {KILN_TYPE_Q4_0, 4096, KILN_CUDA_GEMM_Q16MMA, KILN_CUDA_MMQ_FITS},
      {KILN_TYPE_Q5_0, 128, KILN_CUDA_GEMM_Q16MMA, KILN_CUDA_MMQ_FITS},
      {KILN_TYPE_Q8_0, 3584, KILN_CUDA_GEMM_Q16MMA, KILN_CUDA_MMQ_FITS},
      {KILN_TYPE_Q4_K, 256, KILN_CUDA_GEMM_Q16MMA, KILN_CUDA_MMQ_FITS},
      {KILN_TYPE_Q5_K, 18944, KILN_CUDA_GEMM_Q16MMA, KILN_CUDA_MMQ_FITS},
      {KILN_TYPE_Q6_K, 512, KILN_CUDA_GEMM_Q16MMA, KILN_CUDA_MMQ_FITS},
      /* Q8_0 and Q4_0 rows of 32s that are no whole 128s */
      {KILN_TYPE_Q8_0, 96, KILN_CUDA_GEMM_BF16X3, KILN_CUDA_MMQ_K},
      {KILN_TYPE_Q4_0, 4128, KILN_CUDA_GEMM_BF16X3, KILN_CUDA_MMQ_K},
      {KILN_TYPE_F16, 4096, KILN_CUDA_GEMM_BF16X3, KILN_CUDA_MMQ_TYPE},
      {KILN_TYPE_BF16, 4096, KILN_CUDA_GEMM_BF16X3, KILN_CUDA_MMQ_TYPE},
      {KILN_TYPE_F32, 256, KILN_CUDA_GEMM_BF16X3, KILN_CUDA_MMQ_TYPE},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mm m;
    make_mm(&m, cases[i].t, cases[i].k);
    kiln_cuda_mmq_fit why = (kiln_cuda_mmq_fit)-1;
    kiln_cuda_gemm_mode g = kiln_cuda_gemm_of_node(KILN_CUDA_GEMM_Q16MMA, true, &m.node, &why);
    if (g != cases[i].want || why != cases[i].why)
      fail_msg("%s K %lld under q16mma: %s (cause %d), expected %s (cause %d)",
               kiln_type_name(cases[i].t), (long long)cases[i].k, kiln_cuda_gemm_name(g), (int)why,
               kiln_cuda_gemm_name(cases[i].want), (int)cases[i].why);
    /* mmq's own test agrees: the choice is its refusal, not another rule */
    assert_int_equal(kiln_cuda_mmq_ok(&m.node), g == KILN_CUDA_GEMM_Q16MMA);
    for (size_t j = 0; j < sizeof all_modes / sizeof all_modes[0]; j++) {
      if (all_modes[j] == KILN_CUDA_GEMM_Q16MMA) continue;
      assert_int_equal(kiln_cuda_gemm_of_node(all_modes[j], true, &m.node, &why), all_modes[j]);
      assert_int_equal(why, KILN_CUDA_MMQ_FITS);
    }
  }
}

/* A plan's GEMMs as prepare() meets them: the device first, then each
 * node; the line from their tally. */
static void line_guard(kiln_cuda_gemm_mode asked, bool guard, int cc_major, int cc_minor,
                       const mm *nodes, size_t n, char *out, size_t cap) {
  const kiln_cuda_gemm_mode dev = kiln_cuda_gemm_on_device(asked, cc_major);
  kiln_cuda_gemm_tally t = {0};
  for (size_t i = 0; i < n; i++) {
    kiln_cuda_mmq_fit why;
    kiln_cuda_gemm_mode g = kiln_cuda_gemm_of_node(dev, guard, &nodes[i].node, &why);
    kiln_cuda_gemm_tally_add(&t, g, why, nodes[i].w.type);
  }
  kiln_cuda_gemm_line(asked, dev, cc_major, cc_minor, &t, out, cap);
}

static void line_for(kiln_cuda_gemm_mode asked, int cc_major, int cc_minor, const mm *nodes, size_t n,
                     char *out, size_t cap) {
  line_guard(asked, true, cc_major, cc_minor, nodes, n, out, cap);
}

static void test_line(void **state) {
  (void)state;
  /* a 7B-like layer's seven Q4_K GEMMs, an F16 one and a Q8_0 one of K 96 */
  mm nodes[9];
  for (int i = 0; i < 7; i++) make_mm(&nodes[i], KILN_TYPE_Q4_K, 3584);
  make_mm(&nodes[7], KILN_TYPE_F16, 3584);
  make_mm(&nodes[8], KILN_TYPE_Q8_0, 96);
  char line[256];

  line_for(KILN_CUDA_GEMM_Q16MMA, 9, 0, nodes, 9, line, sizeof line);
  assert_string_equal(line, "gemm q16mma: 9 batched GEMMs: 7 q16mma (Q4_K 7), 2 bf16x3 fallback "
                                "(F16 1: no mmq decoder, Q8_0 1: K % 128 != 0)");
  line_for(KILN_CUDA_GEMM_Q16MMA, 8, 6, nodes, 7, line, sizeof line);
  assert_string_equal(line, "gemm q16mma: 7 batched GEMMs: 7 q16mma (Q4_K 7), 0 bf16x3 fallback");
  line_for(KILN_CUDA_GEMM_Q16MMA, 7, 5, nodes, 9, line, sizeof line);
  assert_string_equal(line, "gemm q16mma -> f32 (compute capability 7.5 < 8.0): 9 batched GEMMs: 9 f32 "
                                "(F16 1, Q8_0 1, Q4_K 7)");

  line_for(KILN_CUDA_GEMM_FP8, 9, 0, nodes, 9, line, sizeof line);
  assert_string_equal(line, "gemm fp8: 9 batched GEMMs: 9 fp8 (F16 1, Q8_0 1, Q4_K 7)");
  line_for(KILN_CUDA_GEMM_FP8, 8, 6, nodes, 9, line, sizeof line);
  assert_string_equal(line, "gemm fp8 -> bf16x3 (compute capability 8.6 < 9.0): 9 batched GEMMs: 9 bf16x3 "
                                "(F16 1, Q8_0 1, Q4_K 7)");
  line_for(KILN_CUDA_GEMM_FP8, 7, 5, nodes, 9, line, sizeof line);
  assert_string_equal(line, "gemm fp8 -> f32 (compute capability 7.5 < 9.0): 9 batched GEMMs: 9 f32 "
                                "(F16 1, Q8_0 1, Q4_K 7)");

  line_for(KILN_CUDA_GEMM_BF16X3, 9, 0, nodes, 1, line, sizeof line);
  assert_string_equal(line, "gemm bf16x3: 1 batched GEMM: 1 bf16x3 (Q4_K 1)");
  line_for(KILN_CUDA_GEMM_BF16X3, 9, 0, nodes, 0, line, sizeof line);
  assert_string_equal(line, "gemm bf16x3: no batched GEMMs prepared");

  /* several causes of one kind count together */
  make_mm(&nodes[0], KILN_TYPE_F32, 3584);
  make_mm(&nodes[1], KILN_TYPE_F16, 3584);
  line_for(KILN_CUDA_GEMM_Q16MMA, 12, 0, nodes, 9, line, sizeof line);
  assert_string_equal(line, "gemm q16mma: 9 batched GEMMs: 5 q16mma (Q4_K 5), 4 bf16x3 fallback "
                                "(F32 1: no mmq decoder, F16 2: no mmq decoder, Q8_0 1: K % 128 != 0)");

  /* a model with no weight mmq decodes runs no q16mma at all: said as 0 */
  mm f16[3];
  for (int i = 0; i < 3; i++) make_mm(&f16[i], i == 2 ? KILN_TYPE_BF16 : KILN_TYPE_F16, 4096);
  line_for(KILN_CUDA_GEMM_Q16MMA, 9, 0, f16, 3, line, sizeof line);
  assert_string_equal(line, "gemm q16mma: 3 batched GEMMs: 0 q16mma, 3 bf16x3 fallback "
                            "(F16 2: no mmq decoder, BF16 1: no mmq decoder)");

  /* a short buffer is cut, never overrun */
  char small[16];
  memset(small, 'x', sizeof small);
  line_for(KILN_CUDA_GEMM_Q16MMA, 9, 0, nodes, 9, small, 12);
  assert_string_equal(small, "gemm q16mma");
  assert_int_equal(small[12], 'x');
  line_for(KILN_CUDA_GEMM_Q16MMA, 9, 0, nodes, 9, small, 1);
  assert_string_equal(small, "");
}

/* recurrent_guard = f32: a GEMM whose output feeds a recurrent state takes
 * the exact f32 GEMM in every mode (as its decode matvec takes f32
 * columns), the rest keep the mode; off leaves every node to the mode.
 * The line says which took f32 and why. */
static void test_recurrent_guard(void **state) {
  (void)state;
  mm m;
  make_mm(&m, KILN_TYPE_Q8_0, 4096);
  m.node.p.mul_mat.feeds_recurrent = true;
  for (size_t j = 0; j < sizeof all_modes / sizeof all_modes[0]; j++) {
    kiln_cuda_mmq_fit why = (kiln_cuda_mmq_fit)-1;
    assert_int_equal(kiln_cuda_gemm_of_node(all_modes[j], true, &m.node, &why), KILN_CUDA_GEMM_F32);
    assert_int_equal(why, all_modes[j] == KILN_CUDA_GEMM_F32 ? KILN_CUDA_MMQ_FITS : KILN_CUDA_GEMM_GUARDED);
    assert_int_equal(kiln_cuda_gemm_of_node(all_modes[j], false, &m.node, &why), all_modes[j]);
    assert_int_equal(why, KILN_CUDA_MMQ_FITS);
  }
  /* a Qwen3.5-like plan: three GEMMs feed a delta rule, one (after the
   * last) does not, one F16 weight feeds one */
  mm nodes[5];
  for (int i = 0; i < 4; i++) {
    make_mm(&nodes[i], KILN_TYPE_Q8_0, 4096);
    nodes[i].node.p.mul_mat.feeds_recurrent = i < 3;
  }
  make_mm(&nodes[4], KILN_TYPE_F16, 4096);
  nodes[4].node.p.mul_mat.feeds_recurrent = true;
  char line[256];
  line_guard(KILN_CUDA_GEMM_BF16X3, true, 9, 0, nodes, 5, line, sizeof line);
  assert_string_equal(line, "gemm bf16x3: 5 batched GEMMs: 1 bf16x3 (Q8_0 1), 4 f32 (F16 1, Q8_0 3) "
                            "by recurrent_guard");
  line_guard(KILN_CUDA_GEMM_BF16X3, false, 9, 0, nodes, 5, line, sizeof line);
  assert_string_equal(line, "gemm bf16x3: 5 batched GEMMs: 5 bf16x3 (F16 1, Q8_0 4)");
  line_guard(KILN_CUDA_GEMM_Q16MMA, true, 9, 0, nodes, 5, line, sizeof line);
  assert_string_equal(line, "gemm q16mma: 5 batched GEMMs: 1 q16mma (Q8_0 1), 0 bf16x3 fallback, "
                            "4 f32 (F16 1, Q8_0 3) by recurrent_guard");
  /* f32 asked (or a device that has nothing else): nothing to guard */
  line_guard(KILN_CUDA_GEMM_BF16X3, true, 7, 5, nodes, 5, line, sizeof line);
  assert_string_equal(line, "gemm bf16x3 -> f32 (compute capability 7.5 < 8.0): 5 batched GEMMs: 5 f32 "
                            "(F16 1, Q8_0 4)");
}

/* kiln_cuda_parse_uints: what sscanf's %u let through (a sign that wraps,
 * text after the last number, overflow) is refused. */
static void test_parse_uints(void **state) {
  (void)state;
  uint32_t v[4];
  static const struct {
    const char *s;
    int n;
    uint32_t v[4];
  } good[] = {{"128,64,4", 3, {128, 64, 4}},
              {"128,64,4,1", 4, {128, 64, 4, 1}},
              {"0", 1, {0}},
              {"1000000,1,2", 3, {1000000, 1, 2}},
              {"007,8", 2, {7, 8}}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    memset(v, 0xAB, sizeof v);
    const int n = kiln_cuda_parse_uints(good[i].s, v, 4);
    if (n != good[i].n) fail_msg("\"%s\": %d numbers, want %d", good[i].s, n, good[i].n);
    for (int j = 0; j < n; j++)
      if (v[j] != good[i].v[j]) fail_msg("\"%s\"[%d] = %u, want %u", good[i].s, j, v[j], good[i].v[j]);
  }
  static const char *const bad[] = {"",       "abc",          "128,64,4x",  "128,64,4,",
                                    ",128",   "128,,64",      "128;64",     "-4294967168,64,4",
                                    "+128,64,4", "128,64,-4", "4294967424,64,4", "1000001",
                                    "128, 64, 4", "128,64,4\t# tab", "1,2,3,4,5", "AUTO"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (kiln_cuda_parse_uints(bad[i], v, 4) != -1) fail_msg("\"%s\" was read", bad[i]);
  assert_int_equal(kiln_cuda_parse_uints(NULL, v, 4), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_fallbacks),
      cmocka_unit_test(test_node_choice),
      cmocka_unit_test(test_line),
      cmocka_unit_test(test_recurrent_guard),
      cmocka_unit_test(test_parse_uints),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
