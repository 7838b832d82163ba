/* kiln_session_rewind: the KV cache rows past the rewound position are
 * written again before any step reads them, so a rewound sequence's logits
 * equal a fresh one's, bit for bit on the cpu backend (the same shapes give
 * the same reductions); a model with recurrent state (Qwen3.5) refuses a
 * rewind past 0, naming the tensor; positions outside the sequence are
 * refused. kiln bench -d rests on it. */
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
#include "kiln/plan.h"
#include "kiln/synth.h"
#include "runtime_fixture.h"
#include "testutil.h"

#define N_HEAD 12 /* the shared prefix */
#define N_TAIL 6

static char *dir;
static kiln_runtime *rt;

static int setup(void **state) {
  (void)state;
  return kt_runtime_setup("rewind", &dir, &rt);
}

static int teardown(void **state) {
  (void)state;
  return kt_runtime_teardown(dir, rt);
}

static kiln_session *open_cpu(const kiln_model *m) {
  kiln_session_options o = {"cpu", 64, 0, 0, 0.0f, NULL, 0};
  kiln_session *s = NULL;
  KT_ASSERT_OK(kiln_session_open(rt, m, &o, &s));
  return s;
}

static void test_rewound_logits_equal_a_fresh_run(void **state) {
  (void)state;
  if (!kt_have_model("stories260K.gguf")) skip();
  char *path = kt_model_path("stories260K.gguf");
  kiln_model *m = NULL;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  free(path);
  const uint32_t nv = kiln_model_hparams(m)->n_vocab;
  int32_t head[N_HEAD], tail[N_TAIL], other[N_TAIL + 3];
  for (int i = 0; i < N_HEAD; i++) head[i] = (int32_t)((7 + 31 * i) % nv);
  for (int i = 0; i < N_TAIL; i++) tail[i] = (int32_t)((100 + 13 * i) % nv);
  for (int i = 0; i < N_TAIL + 3; i++) other[i] = (int32_t)((211 + 17 * i) % nv);
  float *want = malloc((size_t)nv * N_TAIL * sizeof *want), *got = malloc((size_t)nv * N_TAIL * sizeof *got);
  assert_non_null(want);
  assert_non_null(got);

  kiln_session *s = open_cpu(m);
  KT_ASSERT_OK(kiln_session_eval(s, head, N_HEAD, NULL, NULL));
  KT_ASSERT_OK(kiln_session_eval(s, tail, N_TAIL, NULL, want));
  KT_ASSERT_OK(kiln_plan_sync(kiln_session_plan(s))); /* what kiln bench waits on after its depth */
  /* Other tokens at the same positions and past them, then back. */
  KT_ASSERT_OK(kiln_session_rewind(s, N_HEAD));
  assert_int_equal(kiln_session_pos(s), N_HEAD);
  KT_ASSERT_OK(kiln_session_eval(s, other, N_TAIL + 3, NULL, NULL));
  KT_ASSERT_OK(kiln_session_rewind(s, N_HEAD));
  KT_ASSERT_OK(kiln_session_eval(s, tail, N_TAIL, NULL, got));
  assert_memory_equal(want, got, (size_t)nv * N_TAIL * sizeof *got);
  /* Token by token after a rewind too (decode steps, not one batch). */
  KT_ASSERT_OK(kiln_session_rewind(s, N_HEAD));
  for (int i = 0; i < N_TAIL; i++)
    KT_ASSERT_OK(kiln_session_eval(s, tail + i, 1, got + (size_t)nv * i, NULL));
  double worst = 0;
  for (size_t i = 0; i < (size_t)nv * N_TAIL; i++) {
    double d = (double)got[i] - want[i];
    if (d < 0) d = -d;
    if (d > worst) worst = d;
  }
  assert_true(worst < 1e-4); /* one batch and single steps round differently */

  /* Outside the sequence: refused, the position kept. */
  const int32_t pos = kiln_session_pos(s);
  KT_ASSERT_ERR(kiln_session_rewind(s, pos + 1), KILN_STATUS_OUT_OF_RANGE, "positions 0..");
  KT_ASSERT_ERR(kiln_session_rewind(s, -1), KILN_STATUS_OUT_OF_RANGE, "rewind to position -1");
  assert_int_equal(kiln_session_pos(s), pos);
  KT_ASSERT_OK(kiln_session_rewind(s, 0));
  assert_int_equal(kiln_session_pos(s), 0);
  free(want);
  free(got);
  kiln_session_free(s);
  kiln_model_free(m);
}

static void test_recurrent_state_cannot_rewind(void **state) {
  (void)state;
  char path[4096];
  snprintf(path, sizeof path, "%s/q35.gguf", dir);
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_QWEN35);
  KT_ASSERT_OK(kiln_synth_write(&o, path));
  kiln_model *m = NULL;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  kiln_session *s = open_cpu(m);
  const int32_t ids[3] = {1, 2, 3};
  KT_ASSERT_OK(kiln_session_eval(s, ids, 3, NULL, NULL));
  KT_ASSERT_ERR(kiln_session_rewind(s, 1), KILN_STATUS_UNSUPPORTED, "is recurrent state");
  assert_int_equal(kiln_session_pos(s), 3);
  KT_ASSERT_OK(kiln_session_rewind(s, 0)); /* a reset is always possible */
  assert_int_equal(kiln_session_pos(s), 0);
  kiln_session_free(s);
  kiln_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rewound_logits_equal_a_fresh_run),
      cmocka_unit_test(test_recurrent_state_cannot_rewind),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
