/* Configuration: file parsing with line numbers, schema checks, precedence,
 * file-relative paths. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln/config.h"
#include "kiln/kcache.h"
#include "testutil.h"

KT_TMPDIR_FIXTURE("config")

static char *write_ini(const char *name, const char *text) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  assert_true(kt_write_file(path, text, strlen(text)));
  return path;
}

static void test_defaults(void **state) {
  (void)state;
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_config_validate(c, false));
  const kiln_config_section *b = kiln_config_section_get(c, "backend");
  assert_string_equal(kiln_config_get_str(b, "name"), "cpu");
  assert_string_equal(kiln_config_get_str(b, "fallback"), "error");
  assert_int_equal(kiln_config_get_int(b, "batch"), 64);
  assert_string_equal(kiln_config_origin(b, "name"), "default");
  kiln_config_free(c);
}

static void test_file_values_and_origin(void **state) {
  (void)state;
  char *p = write_ini("ok.ini", "; comment\n[backend]\nname = hello\n\n[sampling]\ntemperature = 0.5\n");
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_config_load_file(c, p));
  KT_ASSERT_OK(kiln_config_validate(c, false));
  const kiln_config_section *b = kiln_config_section_get(c, "backend");
  assert_string_equal(kiln_config_get_str(b, "name"), "hello");
  char want[4200];
  snprintf(want, sizeof want, "%s:3", p);
  assert_string_equal(kiln_config_origin(b, "name"), want);
  assert_true(kiln_config_get_float(kiln_config_section_get(c, "sampling"), "temperature") == 0.5);
  kiln_config_free(c);
}

/* The error must carry file:line; `line` is where the bad entry is. */
static void expect_error(const char *text, int line, const char *needle) {
  char *p = write_ini("bad.ini", text);
  char where[4200];
  snprintf(where, sizeof where, "%s:%d", p, line);
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  kiln_status st = kiln_config_load_file(c, p);
  if (!st) st = kiln_config_validate(c, false);
  assert_non_null(st);
  if (!strstr(kiln_status_message(st), where) || !strstr(kiln_status_message(st), needle))
    fail_msg("error \"%s\" lacks \"%s\" or \"%s\"", kiln_status_message(st), where, needle);
  kiln_status_free(st);
  kiln_config_free(c);
}

static void test_unknown_key(void **state) {
  (void)state;
  expect_error("[backend]\nname = cpu\nbatchsize = 3\n", 3, "unknown key \"batchsize\"");
}

/* An unknown section is told at its own [section] line, once, not at the
 * line of the first key under it. */
static void test_unknown_section(void **state) {
  (void)state;
  expect_error("[backend]\nname = cpu\n\n[bakend]\nname = x\n", 4, "unknown section [bakend]");
  expect_error("[nosuch]\nx = 1\n", 1, "unknown section [nosuch]");
  char *p = write_ini("twice.ini", "[nosuch]\nx = 1\ny = 2\n[backend]\nname = cpu\n[nosuch]\nz = 3\n");
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_config_load_file(c, p));
  kiln_status st = kiln_config_validate(c, false);
  char want[4300];
  snprintf(want, sizeof want, "%s:1: unknown section [nosuch] (kiln config --help lists them)\n"
           "%s:6: unknown section [nosuch] (kiln config --help lists them)", p, p);
  assert_string_equal(kiln_status_message(st), want);
  kiln_status_free(st);
  kiln_config_free(c);
}

/* inih calls no handler for a [section] line with no key under it (Debian's
 * libinih is built without INI_CALL_HANDLER_ON_NEW_SECTION): such a line
 * once passed unchecked. */
static void test_unknown_section_without_keys(void **state) {
  (void)state;
  expect_error("[nosuch]\n", 1, "unknown section [nosuch]");
  expect_error("[backend]\nname = cpu\n\n[nosuch]\n; no key\n", 4, "unknown section [nosuch]");
  expect_error("[nosuch]\n[backend]\nname = cpu\n", 1, "unknown section [nosuch]");
  expect_error("\xEF\xBB\xBF  [nosuch]   ; a comment\n", 1, "unknown section [nosuch]");
}

static void on_undeclared(const char *section, void *user) {
  char *seen = user;
  strcat(seen, section);
  strcat(seen, ";");
}

/* A known section with no key is fine, and so is a plugin's, named to the
 * loader so the plugin can declare it. */
static void test_known_section_without_keys(void **state) {
  (void)state;
  static const kiln_config_key keys[] = {{"threads", KILN_CONFIG_INT, "0", 0, 64, NULL, "threads"}};
  char *p = write_ini("bare.ini", "[backend]\n[sampling]\n; none\n[cpu]\n[cpu]\n");
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_config_load_file(c, p));
  KT_ASSERT_OK(kiln_config_validate(c, true));
  char seen[64] = "";
  kiln_config_each_undeclared(c, on_undeclared, seen);
  assert_string_equal(seen, "cpu;");
  KT_ASSERT_OK(kiln_config_declare(c, "cpu", keys, 1));
  KT_ASSERT_OK(kiln_config_validate(c, false));
  kiln_config_free(c);
}

static void test_bad_values(void **state) {
  (void)state;
  expect_error("[backend]\nbatch = many\n", 2, "not an integer");
  expect_error("[backend]\n\nbatch = 0\n", 3, "outside");
  expect_error("[backend]\nfallback = gpu\n", 2, "not one of error|cpu");
  expect_error("[sampling]\ntemperature = nan\n", 2, "not a finite number");
  expect_error("[sampling]\ntemperature = 1e999\n", 2, "not a finite number");
  /* an underflow (strtod's ERANGE) is named as one, not as a non-number */
  expect_error("[sampling]\ntemperature = 1e-320\n", 2, "below the smallest normal double");
  expect_error("[sampling]\ntop_p = 1.5\n", 2, "outside");
}

/* "[model] path =" once read as unset while "[backend] name =" was an
 * error: every string and path key refuses an empty value, at its line. */
static void test_empty_values(void **state) {
  (void)state;
  expect_error("[model]\npath =\n", 2, "[model] path: an empty value");
  expect_error("[general]\n\nplugin_path = \n", 3, "[general] plugin_path: an empty value");
  expect_error("[backend]\nname =\n", 2, "[backend] name: an empty value");
  expect_error("[kv_cache]\ntype =\n", 2, "[kv_cache] type");

  char *p = write_ini("kc.ini", "[kernel_cache]\nenabled = false\ndir =\n");
  char where[4200];
  snprintf(where, sizeof where, "%s:3: [kernel_cache] dir: an empty value", p);
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_config_declare(c, "kernel_cache", kiln_kcache_config_keys, kiln_kcache_n_config_keys));
  KT_ASSERT_OK(kiln_config_load_file(c, p));
  KT_ASSERT_ERR(kiln_config_validate(c, false), KILN_STATUS_INVALID_ARGUMENT, where);
  kiln_config_free(c);

  /* a flag's empty value names the flag */
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_ERR(kiln_config_set(c, "model", "path", "", "--model"), KILN_STATUS_INVALID_ARGUMENT,
                "--model: [model] path: an empty value");
  kiln_config_free(c);

  /* a key whose default is "" says what empty means: it takes one */
  static const kiln_config_key keys[] = {
      {"devices", KILN_CONFIG_STRING, "", 0, 0, NULL, "empty = the one device"},
      {"tag", KILN_CONFIG_STRING, NULL, 0, 0, NULL, "a label"},
  };
  p = write_ini("plug.ini", "[plug]\ndevices =\n");
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_config_declare(c, "plug", keys, 2));
  KT_ASSERT_OK(kiln_config_load_file(c, p));
  KT_ASSERT_OK(kiln_config_validate(c, false));
  assert_string_equal(kiln_config_get_str(kiln_config_section_get(c, "plug"), "devices"), "");
  kiln_config_free(c);
  p = write_ini("plug.ini", "[plug]\ntag =\n");
  snprintf(where, sizeof where, "%s:2: [plug] tag: an empty value", p);
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_config_declare(c, "plug", keys, 2));
  KT_ASSERT_OK(kiln_config_load_file(c, p));
  KT_ASSERT_ERR(kiln_config_validate(c, false), KILN_STATUS_INVALID_ARGUMENT, where);
  kiln_config_free(c);
}

static void test_duplicate_and_syntax(void **state) {
  (void)state;
  expect_error("[backend]\nname = cpu\nname = hello\n", 3, "set twice");
  expect_error("[general]\nplugin_path = /a\n    :/b\n", 3, "an indented line continues [general] plugin_path");
  expect_error("[general\nlog_level = info\n", 1, "syntax error");
  expect_error("[backend]\nthis line has no equals sign\n", 2, "syntax error");
  expect_error("name = cpu\n", 1, "outside any [section]");
}

/* "n_predict = 4\0junk" once read as 4: inih sees each line as a C string. */
static void test_nul_in_value(void **state) {
  (void)state;
  static const char text[] = "[sampling]\ntemperature = 0\nn_predict = 4\0junk\n";
  char p[4200];
  snprintf(p, sizeof p, "%s/nul.ini", dir);
  assert_true(kt_write_file(p, text, sizeof text - 1));
  char where[4300];
  snprintf(where, sizeof where, "%s:3: a NUL byte at column 14", p);
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_ERR(kiln_config_load_file(c, p), KILN_STATUS_INVALID_ARGUMENT, where);
  kiln_config_free(c);
}

static void test_missing_file(void **state) {
  (void)state;
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  char p[4200];
  snprintf(p, sizeof p, "%s/nope.ini", dir);
  KT_ASSERT_ERR(kiln_config_load_file(c, p), KILN_STATUS_NOT_FOUND, p);
  kiln_config_free(c);
}

static void test_precedence(void **state) {
  (void)state;
  char *p = write_ini("prec.ini", "[backend]\nname = hello\nfallback = cpu\n");
  setenv("KILN_BACKEND", "cuda-serial", 1);
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_config_load_file(c, p));
  KT_ASSERT_OK(kiln_config_apply_env(c));
  KT_ASSERT_OK(kiln_config_set(c, "backend", "batch", "7", "--batch"));
  KT_ASSERT_OK(kiln_config_validate(c, false));
  const kiln_config_section *b = kiln_config_section_get(c, "backend");
  assert_string_equal(kiln_config_get_str(b, "name"), "cuda-serial"); /* env beats file */
  assert_string_equal(kiln_config_origin(b, "name"), "KILN_BACKEND");
  assert_string_equal(kiln_config_get_str(b, "fallback"), "cpu");     /* file beats default */
  assert_int_equal(kiln_config_get_int(b, "batch"), 7);               /* flag */
  kiln_config_free(c);

  /* a flag beats the environment */
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_config_apply_env(c));
  KT_ASSERT_OK(kiln_config_set(c, "backend", "name", "cpu", "--backend"));
  KT_ASSERT_OK(kiln_config_validate(c, false));
  assert_string_equal(kiln_config_get_str(kiln_config_section_get(c, "backend"), "name"), "cpu");
  kiln_config_free(c);
  unsetenv("KILN_BACKEND");

  /* a bad flag value names the flag */
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_ERR(kiln_config_set(c, "backend", "batch", "-1", "--batch"), KILN_STATUS_OUT_OF_RANGE, "--batch");
  kiln_config_free(c);
}

static void test_paths_relative_to_file(void **state) {
  (void)state;
  char *p = write_ini("paths.ini", "[model]\npath = models/m.gguf\n[general]\nplugin_path = a:/abs/b\n");
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_config_load_file(c, p));
  KT_ASSERT_OK(kiln_config_validate(c, false));
  char want[4200];
  snprintf(want, sizeof want, "%s/models/m.gguf", dir);
  assert_string_equal(kiln_config_get_str(kiln_config_section_get(c, "model"), "path"), want);
  snprintf(want, sizeof want, "%s/a:/abs/b", dir);
  assert_string_equal(kiln_config_get_str(kiln_config_section_get(c, "general"), "plugin_path"), want);
  kiln_config_free(c);
}

static const kiln_config_key plugin_keys[] = {
    {"threads", KILN_CONFIG_INT, "0", 0, 64, NULL, "threads"},
    {"precision", KILN_CONFIG_ENUM, "f32", 0, 0, "f32|f64", "accumulation"},
};

static void test_plugin_section_declared_late(void **state) {
  (void)state;
  char *p = write_ini("plug.ini", "[backend]\nname = cpu\n[cpu]\nprecision = f64\n");
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_config_load_file(c, p));
  KT_ASSERT_OK(kiln_config_validate(c, true)); /* [cpu] not declared yet: kept */
  KT_ASSERT_OK(kiln_config_declare(c, "cpu", plugin_keys, 2));
  KT_ASSERT_OK(kiln_config_validate(c, false));
  const kiln_config_section *s = kiln_config_section_get(c, "cpu");
  assert_string_equal(kiln_config_get_str(s, "precision"), "f64");
  assert_int_equal(kiln_config_get_int(s, "threads"), 0);
  kiln_config_free(c);

  p = write_ini("plug2.ini", "[cpu]\n\nprecision = f16\n");
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_config_load_file(c, p));
  KT_ASSERT_OK(kiln_config_declare(c, "cpu", plugin_keys, 2));
  char where[4200];
  snprintf(where, sizeof where, "%s:3", p);
  KT_ASSERT_ERR(kiln_config_validate(c, false), KILN_STATUS_INVALID_ARGUMENT, where);
  kiln_config_free(c);
}

static void test_help_lists_every_key(void **state) {
  (void)state;
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  kiln_config_print_help(c, f);
  fclose(f);
  assert_non_null(strstr(buf, "[backend]"));
  assert_non_null(strstr(buf, "fallback"));
  assert_non_null(strstr(buf, "one of error|cpu"));
  assert_non_null(strstr(buf, "[sampling]"));
  free(buf);
  kiln_config_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_file_values_and_origin),
      cmocka_unit_test(test_unknown_key),
      cmocka_unit_test(test_unknown_section),
      cmocka_unit_test(test_unknown_section_without_keys),
      cmocka_unit_test(test_known_section_without_keys),
      cmocka_unit_test(test_bad_values),
      cmocka_unit_test(test_empty_values),
      cmocka_unit_test(test_duplicate_and_syntax),
      cmocka_unit_test(test_nul_in_value),
      cmocka_unit_test(test_missing_file),
      cmocka_unit_test(test_precedence),
      cmocka_unit_test(test_paths_relative_to_file),
      cmocka_unit_test(test_plugin_section_declared_late),
      cmocka_unit_test(test_help_lists_every_key),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
