/* kiln_status: codes, messages, annotation order, NULL handling. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kiln/status.h"
#include "testutil.h"

static kiln_status fails_deep(void) {
  return kiln_status_new(KILN_STATUS_MALFORMED, "offset %d: bad", 12);
}

static kiln_status fails_middle(void) {
  KILN_RETURN_IF_ERROR(kiln_status_annotate(fails_deep(), "tensor %s", "blk.0.attn_q.weight"));
  return NULL;
}

static void test_annotation_prepends_context(void **state) {
  (void)state;
  kiln_status st = kiln_status_annotate(fails_middle(), "model.gguf");
  assert_int_equal(kiln_status_code_of(st), KILN_STATUS_MALFORMED);
  assert_string_equal(kiln_status_message(st), "model.gguf: tensor blk.0.attn_q.weight: offset 12: bad");
  kiln_status_free(st);
}

static void test_null_is_success(void **state) {
  (void)state;
  assert_null(kiln_status_annotate(NULL, "context"));
  assert_int_equal(kiln_status_code_of(NULL), KILN_STATUS_OK);
  assert_string_equal(kiln_status_message(NULL), "");
  kiln_status_free(NULL);
}

static void test_ok_code_is_not_success(void **state) {
  (void)state;
  /* A status object always means failure, even if created with OK. */
  kiln_status st = kiln_status_new(KILN_STATUS_OK, "oops");
  assert_non_null(st);
  assert_int_not_equal(kiln_status_code_of(st), KILN_STATUS_OK);
  kiln_status_free(st);
}

static void test_code_names(void **state) {
  (void)state;
  assert_string_equal(kiln_status_code_name(KILN_STATUS_ABI), "ABI");
  assert_string_equal(kiln_status_code_name(KILN_STATUS_CHECK_FAILED), "CHECK_FAILED");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_annotation_prepends_context),
      cmocka_unit_test(test_null_is_success),
      cmocka_unit_test(test_ok_code_is_not_success),
      cmocka_unit_test(test_code_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
