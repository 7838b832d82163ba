/* [cpu] recurrent_guard (kiln/graph.h, kiln_mul_mat_params): on the small
 * Qwen3.5 of qwen35_fixture.h (Q8_0 matrices, 4 blocks R R R F, hidden
 * 256, 8 value heads of 32 over 4 q/k heads of 32), 32 ids run one token
 * per step, so every MUL_MAT takes the decode kernels, against the cpu's
 * f64 reference at kiln parity's default thresholds:
 *   - recurrent_guard = off, the int16 columns (cpu_mm.h) in every matvec:
 *     fails, and first at the output of a Gated DeltaNet block's delta
 *     rule or gated norm (gated_delta_net, ssm_norm, ssm_gated, ssm_out),
 *     where that block's delta-rule input (ssm_conv: q, k, v) at the same
 *     position is within 5e-4 and at least 3 times smaller: the rule's
 *     readout S^T q of a head whose output nearly cancels has a large
 *     relative error, which the per-head RMSNorm (ssm_norm) scales up to
 *     the weight of every other head (README, "Qwen3.5");
 *   - the default (recurrent_guard = f32: exact columns for the matvecs a
 *     recurrent state reads): passes every row, with a margin.
 * The int16 path exists only with the AVX2 kernels: without them (the
 * test side planned with [cpu] simd = avx2 fails to open) the test skips.
 * Seed 1 is one of 9 in seeds 1-12 of this shape whose guard-off run
 * fails (worst rows 1.0e-3 to 4.8e-3); every one of the 12 passes with the
 * guard (worst 7.6e-5 to 1.0e-4). */
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
#include "qwen35_fixture.h"
#include "runtime_fixture.h"
#include "testutil.h"

#define N_IDS 32

static char *dir;
static kiln_runtime *rt;
static kiln_model *model;

static int setup(void **state) {
  (void)state;
  if (kt_runtime_setup("parity-guard", &dir, &rt)) return -1;
  char path[4096];
  snprintf(path, sizeof path, "%s/qwen35-q8.gguf", dir);
  kiln_synth_options o;
  kt_qwen35_guard_options(&o);
  return kt_synth_open(&o, path, &model);
}

static int teardown(void **state) {
  (void)state;
  kiln_model_free(model);
  return kt_runtime_teardown(dir, rt);
}

static const kiln_config_override f64 = {"cpu", "precision", "f64", "test"};

/* The report of the ids one per step, the test side with [cpu] simd =
 * avx2 and recurrent_guard = guard; NULL when this machine has no AVX2
 * kernels (the side fails to open). */
static kiln_parity_report *parity(const char *guard) {
  const kiln_config_override test[] = {{"cpu", "simd", "avx2", "test"},
                                       {"cpu", "recurrent_guard", guard, "test"}};
  int32_t ids[N_IDS];
  kt_qwen35_guard_ids(ids, N_IDS);
  kiln_parity_options o = {0};
  o.ref = (kiln_parity_side){"cpu", &f64, 1, 0.0f};
  o.test = (kiln_parity_side){"cpu", test, 2, 0.0f};
  o.per_op = true;
  o.batch = 1; /* every step one token: the decode kernels */
  kiln_parity_report *r = NULL;
  kiln_status st = kiln_parity_run(rt, model, ids, N_IDS, &o, &r);
  if (st && kiln_status_code_of(st) == KILN_STATUS_UNAVAILABLE) {
    printf("no AVX2 kernels here (%s): no int16 columns to test\n", kiln_status_message(st));
    kiln_status_free(st);
    return NULL;
  }
  KT_ASSERT_OK(st);
  assert_int_equal(r->n_rows, (size_t)r->n_nodes * N_IDS);
  return r;
}

static const kiln_parity_row *worst(const kiln_parity_report *r) {
  const kiln_parity_row *w = &r->rows[0];
  for (size_t i = 0; i < r->n_rows; i++)
    if (r->rows[i].rel_l2 > w->rel_l2) w = &r->rows[i];
  return w;
}

static bool ends_with(const char *name, const char *suffix) {
  size_t n = strlen(name), s = strlen(suffix);
  return n > s && name[n - s - 1] == '.' && strcmp(name + n - s, suffix) == 0;
}

static void test_int16_everywhere_fails_at_the_delta_rule(void **state) {
  (void)state;
  kiln_parity_report *r = parity("off");
  if (!r) skip();
  const kiln_parity_row *w = worst(r);
  printf("recurrent_guard off: %zu of %zu rows fail; worst rel L2 %.3e at %s pos %d\n", r->n_fail, r->n_rows,
         w->rel_l2, w->name, w->pos);
  assert_true(r->n_fail > 0);
  const kiln_parity_row *f = &r->rows[r->first_fail];
  printf("first failing row: %s (%s) at %d, rel L2 %.3e, norm ratio %.6f\n", f->name, f->op, f->pos, f->rel_l2,
         f->norm_ratio);
  assert_true(ends_with(f->name, "gated_delta_net") || ends_with(f->name, "ssm_norm") ||
              ends_with(f->name, "ssm_gated") || ends_with(f->name, "ssm_out"));
  /* The amplification: at that position the block's delta-rule input
   * (ssm_conv: q, k, v) is far inside the threshold. */
  char conv[KILN_NAME_MAX];
  snprintf(conv, sizeof conv, "%.*sssm_conv", (int)(strrchr(f->name, '.') - f->name + 1), f->name);
  const kiln_parity_row *in = NULL;
  for (size_t i = 0; i < r->n_rows; i++)
    if (r->rows[i].pos == f->pos && strcmp(r->rows[i].name, conv) == 0) in = &r->rows[i];
  assert_non_null(in);
  printf("its block's ssm_conv at %d: rel L2 %.3e (x%.1f)\n", in->pos, in->rel_l2, f->rel_l2 / in->rel_l2);
  assert_true(in->rel_l2 < 5e-4);
  assert_true(f->rel_l2 > 3.0 * in->rel_l2);
  kiln_parity_report_free(r);
}

static void test_guard_passes(void **state) {
  (void)state;
  kiln_parity_report *r = parity("f32");
  if (!r) skip();
  const kiln_parity_row *w = worst(r);
  printf("recurrent_guard f32: %zu of %zu rows fail; worst rel L2 %.3e at %s pos %d\n", r->n_fail, r->n_rows,
         w->rel_l2, w->name, w->pos);
  if (r->n_fail) kiln_parity_print(r, NULL, false, stdout);
  assert_int_equal(r->n_fail, 0);
  assert_true(w->rel_l2 < 3e-4); /* measured 9.2e-5: the matvecs after the last delta rule stay int16 */
  kiln_parity_report_free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_int16_everywhere_fails_at_the_delta_rule),
      cmocka_unit_test(test_guard_passes),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
