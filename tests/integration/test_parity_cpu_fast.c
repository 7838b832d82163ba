/* The cpu backend's f32 paths against its f64 reference, per op and per
 * position, at kiln parity's default thresholds (rel L2 <= 1e-3, |norm
 * ratio - 1| <= 1e-3, cosine >= 0.9999), for every weight type kiln reads:
 * on a qwen2 model synthesized with that type for every matrix and the
 * embedding (2 layers, hidden 512, 8/2 heads, ff 1024), a prompt of 24
 * tokens run
 *   - as one micro-batch (MUL_MAT takes the dequantized-panel GEMM),
 *   - one token per step (MUL_MAT takes the dot kernels: for the
 *     block-quantized types those with int16-rounded columns, cpu_mm.h),
 *   - one token per step with exact f32 columns ([cpu] matvec = f32),
 *   - one token per step on the portable code ([cpu] simd = portable).
 * Each table's worst row is printed, so the margin is visible. */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln/parity.h"
#include "kiln/synth.h"
#include "runtime_fixture.h"
#include "testutil.h"

static char *dir;
static kiln_runtime *rt;

static int setup(void **state) {
  (void)state;
  return kt_runtime_setup("parity-fast", &dir, &rt);
}

static int teardown(void **state) {
  (void)state;
  return kt_runtime_teardown(dir, rt);
}

static kiln_model *model_of(kiln_type type) {
  char path[4096];
  snprintf(path, sizeof path, "%s/qwen2-%s.gguf", dir, kiln_type_name(type));
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_QWEN2);
  o.n_layer = 2;
  o.n_embd = 512;
  o.n_head = 8;
  o.n_head_kv = 2;
  o.n_ff = 1024;
  o.n_vocab = 2048;
  o.eps = 1e-6f;
  o.rope_theta = 1e6f;
  o.matrix_type = type;
  o.embd_type = type;
  o.tied_output = true;
  o.seed = 11;
  KT_ASSERT_OK(kiln_synth_write(&o, path));
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  return m;
}

static kiln_config_override f64 = {"cpu", "precision", "f64", "test"};
static kiln_config_override portable = {"cpu", "simd", "portable", "test"};
static kiln_config_override exact_matvec = {"cpu", "matvec", "f32", "test"};

static void check(kiln_model *m, const char *what, int32_t batch, const kiln_config_override *test_ov) {
  int32_t ids[24];
  for (int i = 0; i < 24; i++) ids[i] = 1 + (i * 389) % 2047;
  kiln_parity_options o = {0};
  o.ref = (kiln_parity_side){"cpu", &f64, 1, 0.0f};
  o.test = (kiln_parity_side){"cpu", test_ov, test_ov ? 1 : 0, 0.0f};
  o.per_op = true;
  o.batch = batch;
  kiln_parity_report *r;
  KT_ASSERT_OK(kiln_parity_run(rt, m, ids, 24, &o, &r));
  const kiln_parity_row *worst = &r->rows[0];
  for (size_t i = 0; i < r->n_rows; i++)
    if (r->rows[i].rel_l2 > worst->rel_l2) worst = &r->rows[i];
  printf("%-30s %zu rows, %zu fail; worst rel L2 %.3e at %s pos %d (norm ratio %.7f, cosine %.9f)\n", what,
         r->n_rows, r->n_fail, worst->rel_l2, worst->name, worst->pos, worst->norm_ratio, worst->cos);
  if (r->n_fail) kiln_parity_print(r, NULL, false, stdout);
  assert_int_equal(r->n_fail, 0);
  assert_int_equal(r->n_rows, (size_t)r->n_nodes * 24); /* every node, every position */
  kiln_parity_report_free(r);
}

static void test_every_type(void **state) {
  (void)state;
  static const kiln_type types[] = {KILN_TYPE_F32,  KILN_TYPE_F16,  KILN_TYPE_BF16,
                                    KILN_TYPE_Q8_0, KILN_TYPE_Q4_0, KILN_TYPE_Q5_0,
                                    KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    kiln_model *m = model_of(types[i]);
    char what[64];
    snprintf(what, sizeof what, "%s, one micro-batch:", kiln_type_name(types[i]));
    check(m, what, 24, NULL);
    snprintf(what, sizeof what, "%s, a token per step:", kiln_type_name(types[i]));
    check(m, what, 1, NULL);
    snprintf(what, sizeof what, "%s, matvec f32, a token/step:", kiln_type_name(types[i]));
    check(m, what, 1, &exact_matvec);
    snprintf(what, sizeof what, "%s, portable, a token/step:", kiln_type_name(types[i]));
    check(m, what, 1, &portable);
    kiln_model_free(m);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_type),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
