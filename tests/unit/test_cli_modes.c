/* How the CLI places a describe_modes line (kiln/plugin.h) among the
 * configured modes it prints (cli/cli_common.c): the item that begins with
 * a config key's name and a space stands in for that key's value
 * (cli_modes_item), and the items no key placed follow, ", "-separated
 * (cli_modes_append_rest), cut at the buffer and never past it. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cli.h"

static const char line[] = "gemm q16mma: 2 batched GEMMs: 1 q16mma (Q4_K 1), 1 bf16x3 fallback "
                           "(F16 1: no mmq decoder); gemmish 3 nodes; rms_norm f64 sums: 11 nodes";

static void test_item_by_key(void **state) {
  (void)state;
  size_t len = 0;
  const char *it = cli_modes_item(line, "gemm", &len);
  assert_non_null(it);
  assert_ptr_equal(it, line);
  assert_int_equal(len, strlen("gemm q16mma: 2 batched GEMMs: 1 q16mma (Q4_K 1), 1 bf16x3 fallback "
                               "(F16 1: no mmq decoder)"));
  /* a key is a whole word: "gemmish" is not gemm's, "gem" is nobody's */
  it = cli_modes_item(line, "gemmish", &len);
  assert_non_null(it);
  assert_int_equal(len, strlen("gemmish 3 nodes"));
  assert_true(strncmp(it, "gemmish 3 nodes", len) == 0);
  assert_null(cli_modes_item(line, "gem", &len));
  it = cli_modes_item(line, "rms_norm", &len);
  assert_non_null(it);
  assert_string_equal(it, "rms_norm f64 sums: 11 nodes");
  assert_null(cli_modes_item("", "gemm", &len));
  assert_null(cli_modes_item("gemm", "gemm", &len)); /* the key alone says nothing */
}

static void test_rest_after_the_keys(void **state) {
  (void)state;
  char buf[256] = "activations q16, gemm q16mma: ...";
  const char *const placed[] = {"activations", NULL, "gemm"};
  cli_modes_append_rest(buf, sizeof buf, line, placed, 3);
  assert_string_equal(buf, "activations q16, gemm q16mma: ..., gemmish 3 nodes, rms_norm f64 sums: 11 nodes");
  /* nothing before: no leading separator; nothing placed: every item */
  char all[256] = "";
  cli_modes_append_rest(all, sizeof all, "a 1; b 2", NULL, 0);
  assert_string_equal(all, "a 1, b 2");
  /* cut at the buffer, its last byte the NUL, nothing written past */
  char small[16];
  memset(small, 'x', sizeof small);
  small[0] = '\0';
  cli_modes_append_rest(small, 12, line, placed, 3);
  assert_string_equal(small, "gemmish 3 n");
  assert_int_equal(small[12], 'x');
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_item_by_key),
      cmocka_unit_test(test_rest_after_the_keys),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
