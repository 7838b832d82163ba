/* kiln_plan_describe_modes: the numeric modes in effect on a plan's
 * backend, as its plugin's describe_modes (ABI 2.3) says them after every
 * node is prepared. hello says how many RMSNorms it sums in f64; cpu has
 * no describe_modes, which reads as ""; a backend the plan does not hold
 * is KILN_STATUS_NOT_FOUND. Synthetic llama models (kiln/synth.h), no
 * device. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln/kiln.h"
#include "kiln/synth.h"
#include "runtime_fixture.h"
#include "testutil.h"

static char *dir;
static kiln_runtime *rt;
static kiln_model *model;

static int setup(void **state) {
  (void)state;
  if (kt_runtime_setup("plan-modes", &dir, &rt)) return -1;
  char path[4200];
  snprintf(path, sizeof path, "%s/llama.gguf", dir);
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_LLAMA);
  o.n_layer = 3;
  o.seed = 11;
  return kt_synth_open(&o, path, &model);
}

static int teardown(void **state) {
  (void)state;
  kiln_model_free(model);
  return kt_runtime_teardown(dir, rt);
}

static kiln_session *open_on(const char *backend, int fallback) {
  kiln_session *s;
  KT_ASSERT_OK(kiln_session_open(rt, model, &(kiln_session_options){.backend = backend, .fallback_cpu = fallback}, &s));
  return s;
}

/* hello runs the RMSNorms (3 layers x 2, and the output norm) and the
 * adds; every other node falls back to cpu, which has no describe_modes. */
static void test_hello_says_its_modes(void **state) {
  (void)state;
  kiln_session *s = open_on("hello", 1);
  kiln_plan *p = kiln_session_plan(s);
  char line[128];
  memset(line, 'x', sizeof line);
  KT_ASSERT_OK(kiln_plan_describe_modes(p, NULL, line, sizeof line));
  assert_string_equal(line, "rms_norm f64 sums: 7 nodes");
  KT_ASSERT_OK(kiln_plan_describe_modes(p, "hello", line, sizeof line));
  assert_string_equal(line, "rms_norm f64 sums: 7 nodes");
  memset(line, 'x', sizeof line);
  KT_ASSERT_OK(kiln_plan_describe_modes(p, "cpu", line, sizeof line));
  assert_string_equal(line, "");
  /* cut to cap with its NUL; cap 0 writes nothing */
  memset(line, 'x', sizeof line);
  KT_ASSERT_OK(kiln_plan_describe_modes(p, NULL, line, 9));
  assert_string_equal(line, "rms_norm");
  assert_int_equal(line[9], 'x');
  KT_ASSERT_OK(kiln_plan_describe_modes(p, NULL, line, 0));
  assert_int_equal(line[0], 'r');
  line[0] = 'x';
  KT_ASSERT_ERR(kiln_plan_describe_modes(p, "cuda-batched", line, sizeof line), KILN_STATUS_NOT_FOUND,
                "the plan has no backend cuda-batched (it runs on hello and cpu)");
  assert_string_equal(line, "");
  kiln_session_free(s);
}

/* cpu alone: no describe_modes, so "" (the configuration says it all). */
static void test_cpu_has_none(void **state) {
  (void)state;
  kiln_session *s = open_on("cpu", 0);
  kiln_plan *p = kiln_session_plan(s);
  char line[64] = "stale";
  KT_ASSERT_OK(kiln_plan_describe_modes(p, NULL, line, sizeof line));
  assert_string_equal(line, "");
  KT_ASSERT_ERR(kiln_plan_describe_modes(p, "hello", line, sizeof line), KILN_STATUS_NOT_FOUND,
                "the plan has no backend hello (it runs on cpu)");
  kiln_session_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hello_says_its_modes),
      cmocka_unit_test(test_cpu_has_none),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
