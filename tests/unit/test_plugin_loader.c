/* The plugin loader refuses broken plugins before running their code, with
 * a message naming the file and the versions, and loads a valid one. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln/backend.h"
#include "kiln/host.h"
#include "testutil.h"

static const char *builddir(void) {
  const char *b = getenv("KILN_BUILDDIR");
  return b ? b : ".";
}

static char *broken_path(const char *name) {
  static char p[4096];
  snprintf(p, sizeof p, "%s/tests/plugins/.libs/kiln-%s.so", builddir(), name);
  return p;
}

static void expect_refused(const char *name, kiln_status_code code, const char *n1, const char *n2) {
  const char *path = broken_path(name);
  kiln_plugin *p = NULL;
  kiln_status st = kiln_plugin_load(path, &p);
  if (!st) fail_msg("%s loaded, expected a refusal", path);
  assert_null(p);
  const char *m = kiln_status_message(st);
  if (kiln_status_code_of(st) != code || !strstr(m, path) || !strstr(m, n1) || (n2 && !strstr(m, n2)))
    fail_msg("%s: unexpected refusal [%s] \"%s\"", name, kiln_status_code_name(kiln_status_code_of(st)), m);
  /* init would have answered with its own message: it never ran */
  assert_null(strstr(m, "init ran"));
  kiln_status_free(st);
}

static void test_missing_entry_symbol(void **state) {
  (void)state;
  expect_refused("noentry", KILN_STATUS_ABI, "no kiln_backend_entry symbol", NULL);
}

static void test_other_abi_major(void **state) {
  (void)state;
  char found[32], want[32];
  snprintf(found, sizeof found, "ABI %d.%d", KILN_PLUGIN_ABI_MAJOR + 1, 0);
  snprintf(want, sizeof want, "ABI %d.%d", KILN_PLUGIN_ABI_MAJOR, KILN_PLUGIN_ABI_MINOR);
  expect_refused("broken-abi", KILN_STATUS_ABI, found, want);
}

static void test_newer_minor(void **state) {
  (void)state;
  char found[32];
  snprintf(found, sizeof found, "ABI %d.%d is newer", KILN_PLUGIN_ABI_MAJOR, KILN_PLUGIN_ABI_MINOR + 1);
  expect_refused("broken-minor", KILN_STATUS_ABI, found, NULL);
}

static void test_short_ops_table(void **state) {
  (void)state;
  char sizes[64];
  snprintf(sizes, sizeof sizes, "is %zu bytes", offsetof(kiln_backend_ops, run));
  expect_refused("broken-short", KILN_STATUS_ABI, sizes, "needs at least");
}

static void test_name_must_match_file(void **state) {
  (void)state;
  expect_refused("broken-name", KILN_STATUS_ABI, "calls itself \"hello\"", "kiln-hello.so");
}

/* The entry symbol is checked as a symbol (ELF type, size, alignment)
 * before any of it is read as a table. */
static void test_entry_symbol_checked(void **state) {
  (void)state;
  expect_refused("broken-func", KILN_STATUS_ABI, "kiln_backend_entry is a function",
                 "not a data object");
  expect_refused("broken-tiny", KILN_STATUS_ABI, "kiln_backend_entry is 8 bytes",
                 "too small even for the ABI version fields (12 bytes)");
  char align[64];
  snprintf(align, sizeof align, "is not aligned to the %zu bytes", _Alignof(kiln_backend_ops));
  expect_refused("broken-misaligned", KILN_STATUS_ABI, align, NULL);
  char sizes[96];
  snprintf(sizes, sizeof sizes, "claims %zu bytes, but the object holds %zu",
           sizeof(kiln_backend_ops) + 64, sizeof(kiln_backend_ops));
  expect_refused("broken-oversize", KILN_STATUS_ABI, sizes, NULL);
}

/* describe_modes (ABI 2.3) is asked only of a plugin whose table has it:
 * the 2.2 plugin's object holds the same function, which must not run. */
static void open_modes_plugin(const char *name, kiln_plugin **out_p, kiln_config **out_c, kiln_backend **out_b) {
  KT_ASSERT_OK(kiln_plugin_load(broken_path(name), out_p));
  KT_ASSERT_OK(kiln_config_new(out_c));
  KT_ASSERT_OK(kiln_backend_declare_config(*out_p, *out_c));
  KT_ASSERT_OK(kiln_backend_open(*out_p, *out_c, out_b));
}

static void close_modes_plugin(kiln_plugin *p, kiln_config *c, kiln_backend *b) {
  kiln_backend_close(b);
  kiln_config_free(c);
  kiln_plugin_unload(p);
}

static void test_describe_modes_by_minor(void **state) {
  (void)state;
  kiln_plugin *p;
  kiln_config *c;
  kiln_backend *b;
  char line[128];
  open_modes_plugin("modes-23", &p, &c, &b);
  memset(line, 'x', sizeof line);
  KT_ASSERT_OK(kiln_backend_describe_modes(b, line, sizeof line));
  assert_string_equal(line, "widgets exact: 3 of 4 nodes (1 approximate: too wide)");
  /* cut to cap, NUL included; cap 0 writes nothing */
  memset(line, 'x', sizeof line);
  KT_ASSERT_OK(kiln_backend_describe_modes(b, line, 8));
  assert_string_equal(line, "widgets");
  assert_int_equal(line[8], 'x');
  KT_ASSERT_OK(kiln_backend_describe_modes(b, line, 0));
  assert_int_equal(line[0], 'w');
  close_modes_plugin(p, c, b);

  open_modes_plugin("modes-22", &p, &c, &b);
  memset(line, 'x', sizeof line);
  KT_ASSERT_OK(kiln_backend_describe_modes(b, line, sizeof line));
  assert_string_equal(line, "");
  close_modes_plugin(p, c, b);

  char sizes[64];
  snprintf(sizes, sizeof sizes, "is %zu bytes, ABI %d.3 needs at least %zu", offsetof(kiln_backend_ops, describe_modes),
           KILN_PLUGIN_ABI_MAJOR,
           offsetof(kiln_backend_ops, describe_modes) + sizeof(((kiln_backend_ops *)0)->describe_modes));
  expect_refused("modes-23-short", KILN_STATUS_ABI, sizes, NULL);
}

/* A configuration with cfg-origin's section declared and `ini` read from
 * dir/bad.ini (its path in ini_path). */
static kiln_config *origin_config(kiln_plugin *p, const char *dir, const char *ini, char *ini_path,
                                  size_t cap) {
  snprintf(ini_path, cap, "%s/bad.ini", dir);
  assert_true(kt_write_file(ini_path, ini, strlen(ini)));
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_backend_declare_config(p, c));
  KT_ASSERT_OK(kiln_config_load_file(c, ini_path));
  KT_ASSERT_OK(kiln_config_validate(c, false));
  return c;
}

static void expect_open_refused(kiln_plugin *p, const kiln_config *c, const char *want) {
  kiln_backend *b = NULL;
  kiln_status st = kiln_backend_open(p, c, &b);
  assert_null(b);
  if (kiln_status_code_of(st) != KILN_STATUS_INVALID_ARGUMENT || strcmp(kiln_status_message(st), want) != 0)
    fail_msg("open: [%s] \"%s\", expected \"%s\"", kiln_status_code_name(kiln_status_code_of(st)),
             kiln_status_message(st), want);
  kiln_status_free(st);
}

/* open() refuses a value of its section naming where it came from (the
 * host table's cfg_origin, ABI 2.4, through config_origin.h): the file and
 * line, or the flag that set it last. */
static void test_open_refusal_names_origin(void **state) {
  (void)state;
  kiln_plugin *p;
  KT_ASSERT_OK(kiln_plugin_load(broken_path("cfg-origin"), &p));
  char *dir = kt_mkdtemp("cfg-origin");
  char ini[4200], want[4400];
  kiln_config *c = origin_config(p, dir, "; widgets come in pairs\n[cfg-origin]\n\nwidgets = 3\n", ini,
                                 sizeof ini);
  snprintf(want, sizeof want, "backend cfg-origin: %s:4: [cfg-origin] widgets = 3 is odd", ini);
  expect_open_refused(p, c, want);
  KT_ASSERT_OK(kiln_config_set(c, "cfg-origin", "widgets", "5", "--widgets"));
  KT_ASSERT_OK(kiln_config_validate(c, false));
  expect_open_refused(p, c, "backend cfg-origin: --widgets: [cfg-origin] widgets = 5 is odd");
  kiln_config_free(c);
  /* an accepted value opens */
  c = origin_config(p, dir, "[cfg-origin]\nwidgets = 4\n", ini, sizeof ini);
  kiln_backend *b = NULL;
  KT_ASSERT_OK(kiln_backend_open(p, c, &b));
  kiln_backend_close(b);
  kiln_config_free(c);
  kiln_plugin_unload(p);
  kt_rm_rf(dir);
  free(dir);
}

static const char *origin_must_not_run(const kiln_config_section *sec, const char *key) {
  (void)sec;
  fail_msg("cfg_origin(%s) was called through a host table of ABI 2.3", key);
  return NULL;
}

/* A host table of 2.3 ends before cfg_origin: the plugins take it, never
 * call what lies past its end, and refuse a value with today's message. */
static void test_open_refusal_older_host(void **state) {
  (void)state;
  kiln_host_api old = *kiln_host_api_get();
  old.abi_minor = 3;
  old.struct_size = KILN_HOST_API_SIZE_2_3;
  old.cfg_origin = origin_must_not_run;
  kiln_plugin *p;
  KT_ASSERT_OK(kiln_plugin_load(broken_path("cfg-origin"), &p));
  char *dir = kt_mkdtemp("cfg-origin");
  char ini[4200];
  kiln_config *c = origin_config(p, dir, "[cfg-origin]\nwidgets = 3\n", ini, sizeof ini);
  const kiln_backend_ops *e = kiln_plugin_entry(p);
  void *pl = NULL, *be = NULL;
  KT_ASSERT_OK(e->init(&old, &pl));
  kiln_status st = e->open(pl, kiln_config_section_get(c, "cfg-origin"), &be);
  assert_null(be);
  assert_string_equal(kiln_status_message(st), "[cfg-origin] widgets = 3 is odd");
  kiln_status_free(st);
  e->fini(pl);
  kiln_config_free(c);
  kiln_plugin_unload(p);
  /* the cpu plugin opens on it */
  kiln_plugin_registry *r;
  KT_ASSERT_OK(kiln_plugin_registry_new(getenv("KILN_PLUGIN_PATH"), &r));
  KT_ASSERT_OK(kiln_plugin_registry_get(r, "cpu", &p));
  e = kiln_plugin_entry(p);
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_backend_declare_config(p, c));
  KT_ASSERT_OK(e->init(&old, &pl));
  KT_ASSERT_OK(e->open(pl, kiln_config_section_get(c, "cpu"), &be));
  e->close(be);
  e->fini(pl);
  kiln_config_free(c);
  kiln_plugin_registry_free(r);
  kt_rm_rf(dir);
  free(dir);
}

static void test_not_a_shared_object(void **state) {
  (void)state;
  char *dir = kt_mkdtemp("plugin");
  char path[4200];
  snprintf(path, sizeof path, "%s/kiln-junk.so", dir);
  assert_true(kt_write_file(path, "not an ELF file", 15));
  kiln_plugin *p;
  KT_ASSERT_ERR(kiln_plugin_load(path, &p), KILN_STATUS_IO, "not an ELF shared object");
  kt_rm_rf(dir);
  free(dir);
}

static void test_valid_plugin_loads(void **state) {
  (void)state;
  kiln_plugin_registry *r;
  KT_ASSERT_OK(kiln_plugin_registry_new(getenv("KILN_PLUGIN_PATH"), &r));
  kiln_plugin *p;
  KT_ASSERT_OK(kiln_plugin_registry_get(r, "hello", &p));
  assert_string_equal(kiln_plugin_name(p), "hello");
  kiln_probe_info info;
  KT_ASSERT_OK(kiln_plugin_probe(p, &info));
  assert_true(info.available);
  KT_ASSERT_ERR(kiln_plugin_registry_get(r, "no-such-backend", &p), KILN_STATUS_NOT_FOUND,
                "kiln-no-such-backend.so");
  kiln_plugin_registry_free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_missing_entry_symbol),
      cmocka_unit_test(test_other_abi_major),
      cmocka_unit_test(test_newer_minor),
      cmocka_unit_test(test_short_ops_table),
      cmocka_unit_test(test_name_must_match_file),
      cmocka_unit_test(test_entry_symbol_checked),
      cmocka_unit_test(test_describe_modes_by_minor),
      cmocka_unit_test(test_open_refusal_names_origin),
      cmocka_unit_test(test_open_refusal_older_host),
      cmocka_unit_test(test_not_a_shared_object),
      cmocka_unit_test(test_valid_plugin_loads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
