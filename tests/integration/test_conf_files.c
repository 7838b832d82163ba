/* Every shipped configuration file loads and validates (with the plugins
 * of this build), so an example can never drift out of the schema. */
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
#include "testutil.h"

static void load(const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/conf/%s", getenv("KILN_SRCDIR"), name);
  /* only the plugin folder comes from the test environment */
  kiln_config_override ov[] = {{"general", "plugin_path", getenv("KILN_PLUGIN_PATH"), "KILN_PLUGIN_PATH"}};
  kiln_runtime *rt;
  kiln_status st = kiln_runtime_open(&(kiln_runtime_options){.config_path = path, .use_environment = false, .overrides = ov, .n_overrides = 1}, &rt);
  if (st) fail_msg("%s: %s", path, kiln_status_message(st));
  kiln_runtime_free(rt);
}

static void test_kiln_ini(void **state) {
  (void)state;
  load("kiln.ini");
}
static void test_cpu_ini(void **state) {
  (void)state;
  load("cpu.ini");
}
static void test_hello_ini(void **state) {
  (void)state;
  load("hello.ini");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kiln_ini),
      cmocka_unit_test(test_cpu_ini),
      cmocka_unit_test(test_hello_ini),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
