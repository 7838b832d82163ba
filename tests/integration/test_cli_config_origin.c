/* kiln run through the command, on a configuration with a value that the
 * backend refuses when the planner opens it: the error names the file and
 * line of that value, as the schema's errors do. The backend is the test
 * plugin kiln-cfg-origin (tests/plugins/cfg_origin.c), whose open()
 * refuses an odd [cfg-origin] widgets through
 * backends/common/config_origin.h, as the backends refuse their own values:
 * the CUDA plugins' open() is reached only where a device is, and the cpu
 * plugin's checks repeat the schema's. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln_proc.h"
#include "testutil.h"

static void test_run_names_file_and_line(void **state) {
  (void)state;
  char *model = kt_model_path("stories260K.gguf");
  assert_non_null(model);
  char *dir = kt_mkdtemp("cli-origin");
  char ini[4200], want[4400];
  snprintf(ini, sizeof ini, "%s/widgets.ini", dir);
  static const char text[] = "; the test plugin's widgets come in pairs\n"
                             "[backend]\n"
                             "name = cfg-origin\n"
                             "\n"
                             "[cfg-origin]\n"
                             "widgets = 3\n";
  assert_true(kt_write_file(ini, text, strlen(text)));
  const char *args[] = {"run", "-m", model, "--config", ini, "-p", "Once", "-n", "1", NULL};
  kt_proc p;
  assert_true(kt_kiln(args, NULL, 0, false, &p));
  printf("exit %d, stderr: %s", p.status, p.err);
  assert_int_equal(p.status, 1);
  snprintf(want, sizeof want, "%s:6: [cfg-origin] widgets = 3 is odd\n", ini);
  assert_non_null(strstr(p.err, want));
  kt_proc_free(&p);
  kt_rm_rf(dir);
  free(dir);
  free(model);
}

int main(void) {
  if (!kt_have_model("stories260K.gguf")) return 77;
  /* the test plugins' folder before the build's */
  const char *build = getenv("KILN_BUILDDIR"), *plugins = getenv("KILN_PLUGIN_PATH");
  char path[8300];
  snprintf(path, sizeof path, "%s/tests/plugins/.libs%s%s", build ? build : ".", plugins ? ":" : "",
           plugins ? plugins : "");
  setenv("KILN_PLUGIN_PATH", path, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_run_names_file_and_line),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
