/* Golden-set files (kiln/golden.h): what kiln_golden_load refuses, and the
 * line each refusal names. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln/golden.h"
#include "testutil.h"

KT_TMPDIR_FIXTURE("golden")

static const char *write_golden(const char *text) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/t.golden", dir);
  assert_true(kt_write_file(path, text, strlen(text)));
  return path;
}

/* Loading `text` fails with a message holding "<file>:<line>: " and needle. */
static void expect_error(const char *text, int line, const char *needle) {
  const char *p = write_golden(text);
  char where[4200];
  snprintf(where, sizeof where, "%s:%d: ", p, line);
  kiln_golden *g = NULL;
  kiln_status st = kiln_golden_load(p, &g);
  if (!st) fail_msg("loaded %zu case(s), expected an error at line %d: %s", g->n_cases, line, needle);
  const char *msg = kiln_status_message(st);
  if (!strstr(msg, where) || !strstr(msg, needle))
    fail_msg("error \"%s\" lacks \"%s\" or \"%s\"", msg, where, needle);
  kiln_status_free(st);
}

#define CASE_A "[once-upon]\nprompt = \"Once upon a time\"\nn = 4\nids = 432 383 286 261\n"

static void test_loads_the_shipped_set(void **state) {
  (void)state;
  char p[4096];
  snprintf(p, sizeof p, "%s/tests/golden/stories260K.golden", getenv("KILN_SRCDIR"));
  kiln_golden *g;
  KT_ASSERT_OK(kiln_golden_load(p, &g));
  assert_int_equal(g->n_cases, 3);
  assert_string_equal(g->cases[0].name, "once-upon");
  assert_int_equal(g->cases[0].line, 7);
  assert_int_equal(g->cases[0].n_ids, 64);
  assert_int_equal(g->cases[0].n_top, 5);
  assert_int_equal(g->cases[0].top_id[4], 323);
  kiln_golden_free(g);
}

/* The same case twice once read as one (golden 1/1): the second header is
 * named, whether the two are adjacent or not, with keys or without. */
static void test_duplicate_case(void **state) {
  (void)state;
  expect_error(CASE_A "\n" CASE_A, 6, "case [once-upon] is defined twice (first at line 1)");
  expect_error(CASE_A "[b]\nprompt = \"x\"\nn = 1\nids = 1\n" CASE_A, 9, "defined twice (first at line 1)");
  expect_error(CASE_A "; again, empty\n[once-upon]\n", 6, "defined twice");
  expect_error(CASE_A "[once-upon]\nprompt = \"again\"\n", 5, "defined twice");
}

static void test_key_set_twice(void **state) {
  (void)state;
  expect_error(CASE_A "n = 5\n", 5, "[once-upon] n: set twice (first at line 3)");
  expect_error(CASE_A "prompt = \"more\"\n", 5, "prompt: set twice (first at line 2)");
}

/* A case header with no key under it is a case without a prompt. */
static void test_empty_case(void **state) {
  (void)state;
  expect_error(CASE_A "[empty]\n", 5, "case [empty] has no prompt");
}

/* Every top entry whole: a value cut short once passed as the part read. */
static void test_top_cut_short(void **state) {
  (void)state;
  expect_error(CASE_A "top = 432:17.79 383:9.\n", 5, "entry 2 \"383:9.\" is not a whole id:logit pair");
  expect_error(CASE_A "top = 432:17.79 383:\n", 5, "entry 2 \"383:\"");
  expect_error(CASE_A "top = 432:17.79 383\n", 5, "entry 2 \"383\"");
  expect_error(CASE_A "top = 432:17.79 :1.5\n", 5, "entry 2 \":1.5\"");
  expect_error(CASE_A "top = 432:1e\n", 5, "entry 1 \"432:1e\"");
  expect_error(CASE_A "top = 432:-\n", 5, "entry 1");
  expect_error(CASE_A "top = 432:17.5x\n", 5, "entry 1");
  expect_error(CASE_A "top = -3:17.5\n", 5, "entry 1");
  expect_error(CASE_A "top = 432:nan\n", 5, "entry 1");
  expect_error(CASE_A "top = 432:1e99\n", 5, "not a finite float");
  /* an indented line continues the list; it once replaced it */
  const char *p = write_golden(CASE_A "top = 432:17.79 383:-1.5e-3\n    322:9.7 7:+2\n");
  kiln_golden *g;
  KT_ASSERT_OK(kiln_golden_load(p, &g));
  assert_int_equal(g->cases[0].n_top, 4);
  assert_int_equal(g->cases[0].top_id[1], 383);
  assert_true(g->cases[0].top_logit[1] == -1.5e-3f);
  assert_int_equal(g->cases[0].top_id[3], 7);
  kiln_golden_free(g);
  expect_error(CASE_A "top = 432:17.79\n    383:9.\n", 6, "entry 2");
}

/* More ids than n: the error is at the ids line and names n's, not at the
 * case's first key. */
static void test_ids_beyond_n_names_their_lines(void **state) {
  (void)state;
  expect_error("[once-upon]\nprompt = \"Once\"\nchat = false\nn = 2\nprompt_ids = 1 2\nids = 1 2 3\n", 6,
               "case [once-upon] lists 3 ids but n = 2 (line 4)");
  expect_error("[a]\nids = 1 2\n    3 4\nprompt = \"x\"\nn = 3\n", 2, "lists 4 ids but n = 3 (line 5)");
  expect_error("[a]\nprompt = \"x\"\nids = 1\nn = 0\n", 4, "[a] n: must be 1..65536");
}

/* Blanks inih skips and the reader once did not (\f, \v): a section after
 * them loaded its keys into no case (a crash) or the case before; now it
 * is a case of its own. After a key, a line led by any blank continues the
 * key's value, for the reader as for inih: "\v[b]" there is not a case. */
static void test_sections_after_any_blank(void **state) {
  (void)state;
  kiln_golden *g;
  KT_ASSERT_OK(kiln_golden_load(
      write_golden("\f[a]\nprompt = \"x\"\nn = 1\nids = 1\n[b]\nprompt = \"y\"\nn = 1\nids = 2\n"), &g));
  assert_int_equal(g->n_cases, 2);
  assert_string_equal(g->cases[0].name, "a");
  assert_int_equal(g->cases[0].ids[0], 1);
  assert_string_equal(g->cases[1].name, "b");
  kiln_golden_free(g);
  expect_error("[a]\nprompt = \"x\"\nn = 1\nids = 1\n\v[b]\n", 5, "[a] ids");
  expect_error("[a]\nprompt = \"x\"\nn = 1\nids = 1\n  [b]\n", 5, "[a] ids");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loads_the_shipped_set),
      cmocka_unit_test(test_duplicate_case),
      cmocka_unit_test(test_key_set_twice),
      cmocka_unit_test(test_empty_case),
      cmocka_unit_test(test_top_cut_short),
      cmocka_unit_test(test_ids_beyond_n_names_their_lines),
      cmocka_unit_test(test_sections_after_any_blank),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
