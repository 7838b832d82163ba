/* The sampler: greedy argmax, determinism per seed, top-k/top-p limits,
 * refusing NaN logits. */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kiln/sampler.h"
#include "testutil.h"

static void test_greedy_argmax_lowest_on_ties(void **state) {
  (void)state;
  float l[5] = {1.0f, 3.0f, -2.0f, 3.0f, 0.0f};
  kiln_sampler *s;
  KT_ASSERT_OK(kiln_sampler_new(&(kiln_sampler_options){0.0f, 40, 0.95f, 1}, &s));
  int32_t t;
  KT_ASSERT_OK(kiln_sampler_sample(s, l, 5, &t));
  assert_int_equal(t, 1);
  kiln_sampler_free(s);
}

static void draw(uint64_t seed, int32_t *out, int n) {
  float l[8] = {0.1f, 0.5f, 0.2f, 0.9f, 0.3f, 0.0f, 0.4f, 0.8f};
  kiln_sampler *s;
  KT_ASSERT_OK(kiln_sampler_new(&(kiln_sampler_options){1.0f, 0, 1.0f, seed}, &s));
  for (int i = 0; i < n; i++) KT_ASSERT_OK(kiln_sampler_sample(s, l, 8, &out[i]));
  kiln_sampler_free(s);
}

static void test_seed_reproduces(void **state) {
  (void)state;
  int32_t a[64], b[64], c[64];
  draw(7, a, 64);
  draw(7, b, 64);
  draw(8, c, 64);
  assert_memory_equal(a, b, sizeof a);
  assert_memory_not_equal(a, c, sizeof a);
}

static void test_top_k_and_top_p_limit_choices(void **state) {
  (void)state;
  float l[6] = {5.0f, 4.0f, 3.0f, 2.0f, 1.0f, 0.0f};
  kiln_sampler *s;
  KT_ASSERT_OK(kiln_sampler_new(&(kiln_sampler_options){2.0f, 2, 1.0f, 3}, &s));
  int seen[6] = {0};
  for (int i = 0; i < 2000; i++) {
    int32_t t;
    KT_ASSERT_OK(kiln_sampler_sample(s, l, 6, &t));
    seen[t]++;
  }
  kiln_sampler_free(s);
  assert_true(seen[0] > 0 && seen[1] > 0);
  assert_int_equal(seen[2] + seen[3] + seen[4] + seen[5], 0);

  /* top_p tiny: only the most likely token survives */
  KT_ASSERT_OK(kiln_sampler_new(&(kiln_sampler_options){1.0f, 0, 0.01f, 3}, &s));
  for (int i = 0; i < 100; i++) {
    int32_t t;
    KT_ASSERT_OK(kiln_sampler_sample(s, l, 6, &t));
    assert_int_equal(t, 0);
  }
  kiln_sampler_free(s);
}

static void test_refuses_nan_and_bad_options(void **state) {
  (void)state;
  float l[3] = {0.0f, NAN, 1.0f};
  kiln_sampler *s;
  KT_ASSERT_OK(kiln_sampler_new(&(kiln_sampler_options){0.0f, 0, 1.0f, 0}, &s));
  int32_t t;
  KT_ASSERT_ERR(kiln_sampler_sample(s, l, 3, &t), KILN_STATUS_CHECK_FAILED, "NaN");
  float inf[2] = {-INFINITY, -INFINITY};
  KT_ASSERT_ERR(kiln_sampler_sample(s, inf, 2, &t), KILN_STATUS_CHECK_FAILED, "no finite");
  kiln_sampler_free(s);
  KT_ASSERT_ERR(kiln_sampler_new(&(kiln_sampler_options){-1.0f, 0, 1.0f, 0}, &s),
                KILN_STATUS_INVALID_ARGUMENT, "temperature");
  KT_ASSERT_ERR(kiln_sampler_new(&(kiln_sampler_options){1.0f, 0, 1.5f, 0}, &s),
                KILN_STATUS_INVALID_ARGUMENT, "top_p");
  /* top_p = 0 keeps only the most likely token */
  float l2[4] = {0.0f, 3.0f, 2.9f, 1.0f};
  KT_ASSERT_OK(kiln_sampler_new(&(kiln_sampler_options){1.0f, 0, 0.0f, 5}, &s));
  for (int i = 0; i < 50; i++) {
    KT_ASSERT_OK(kiln_sampler_sample(s, l2, 4, &t));
    assert_int_equal(t, 1);
  }
  kiln_sampler_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_greedy_argmax_lowest_on_ties),
      cmocka_unit_test(test_seed_reproduces),
      cmocka_unit_test(test_top_k_and_top_p_limit_choices),
      cmocka_unit_test(test_refuses_nan_and_bad_options),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
