/* `kiln kernels` (cli/cmd_kernels.c): --schema lists ε for every RMSNorm
 * template, --list shows cached entries with their full descriptors,
 * --clear empties the cache and nothing else. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../cli/cmd_kernels.h"
#include "kcache_testhost.h"
#include "kernel_templates.h"
#include "nvrtc_compile.h"
#include "testutil.h"

/* Runs kiln_cmd_kernels with argv, capturing its stdout and stderr
 * together into *out. */
static int run(char **out, int argc, ...) {
  char *argv[16];
  va_list ap;
  va_start(ap, argc);
  for (int i = 0; i < argc; i++) argv[i] = va_arg(ap, char *);
  va_end(ap);
  argv[argc] = NULL;
  fflush(stdout);
  fflush(stderr);
  int saved = dup(1), saved_err = dup(2);
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  dup2(fileno(tmp), 1);
  dup2(fileno(tmp), 2);
  int rc = kiln_cmd_kernels(argc, argv);
  fflush(stdout);
  fflush(stderr);
  dup2(saved, 1);
  dup2(saved_err, 2);
  close(saved);
  close(saved_err);
  long n = ftell(tmp);
  if (n < 0) n = 0;
  fseek(tmp, 0, SEEK_END);
  n = ftell(tmp);
  rewind(tmp);
  *out = calloc(1, (size_t)n + 1);
  size_t got = fread(*out, 1, (size_t)n, tmp);
  (*out)[got] = '\0';
  fclose(tmp);
  return rc;
}

/* The text of template `name`'s block in --schema output (up to the blank
 * line that ends it), malloc'd, or NULL. */
static char *block_of(const char *out, const char *name) {
  size_t n = strlen(name);
  for (const char *p = out; (p = strstr(p, name)); p++) {
    if ((p == out || p[-1] == '\n') && p[n] == ' ') {
      const char *end = strstr(p, "\n\n");
      size_t len = end ? (size_t)(end - p) : strlen(p);
      char *b = malloc(len + 1);
      memcpy(b, p, len);
      b[len] = '\0';
      return b;
    }
  }
  return NULL;
}

static void test_schema_lists_eps(void **state) {
  char *dir = kt_mkdtemp("kcache-cli");
  char *out;
  assert_int_equal(run(&out, 4, "kernels", "--dir", dir, "--schema"), 0);
  printf("%s", out);
  unsigned rmsnorm = 0;
  for (unsigned i = 0; i < kiln_cuda_n_templates; i++) {
    const kiln_ktemplate *t = kiln_cuda_templates[i];
    char *b = block_of(out, t->name);
    if (!b) fail_msg("--schema does not list template %s", t->name);
    /* every declared parameter, with its kind and type */
    for (uint32_t j = 0; j < t->n_params; j++) {
      char line[128];
      snprintf(line, sizeof line, "  %-8s %-16s %-6s ",
               t->params[j].kind == KILN_KPARAM_BAKED ? "baked" : "runtime", t->params[j].name,
               kiln_kparam_type_name(t->params[j].type));
      if (!strstr(b, line)) fail_msg("template %s: no line \"%s\" in:\n%s", t->name, line, b);
    }
    if (strncmp(t->name, "rmsnorm", 7) == 0) {
      rmsnorm++;
      assert_non_null(strstr(b, "  baked    eps              f32    "));
    }
    free(b);
  }
  assert_int_equal(rmsnorm, 3);
  free(out);
  kt_rm_rf(dir);
  free(dir);
}

static void test_list_and_clear(void **state) {
  char *dir = kt_mkdtemp("kcache-cli");
  /* fill the cache as a backend would */
  kiln_kcache *kc = kt_kcache_open(dir, NULL);
  const kiln_host_api *h = kt_kcache_host();
  KT_ASSERT_OK(kiln_cuda_templates_register(h, kc));
  kiln_nvrtc nv;
  kiln_kcompiler *c;
  KT_ASSERT_OK(kiln_nvrtc_register(&nv, h, kc, "sm_90", &c));
  static const float eps[2] = {1e-5f, 1e-6f};
  for (int i = 0; i < 2; i++) {
    kiln_kdesc *d;
    KT_ASSERT_OK(h->kdesc_new(c, KILN_CUDA_T_RMSNORM_ROWS, &d));
    KT_ASSERT_OK(h->kdesc_set_f32(d, "eps", eps[i]));
    KT_ASSERT_OK(h->kdesc_set_i64(d, "hidden", 896));
    KT_ASSERT_OK(h->kdesc_set_dtype(d, "w_type", KILN_TYPE_F32));
    KT_ASSERT_OK(h->kdesc_set_i64(d, "rows_per_block", 8));
    kiln_kernel *k;
    KT_ASSERT_OK(h->kcache_get(d, &k));
    h->kdesc_free(d);
  }
  kiln_kcache_close(kc);
  char keep[512], junk[512];
  snprintf(keep, sizeof keep, "%s/notes.txt", dir);
  assert_true(kt_write_file(keep, "mine", 4));
  /* a user's file that happens to be named like an entry */
  snprintf(junk, sizeof junk, "%s/0123456789abcdef0123456789abcdef.kk", dir);
  assert_true(kt_write_file(junk, "precious\n", 9));

  char *out;
  assert_int_equal(run(&out, 4, "kernels", "--dir", dir, "--list"), 0);
  printf("%s", out);
  assert_non_null(strstr(out, "    template rmsnorm_rows\n"));
  assert_non_null(strstr(out, "    param eps f32 0x3727c5ac   (9.99999975e-06)\n"));
  assert_non_null(strstr(out, "    param eps f32 0x358637bd   (9.99999997e-07)\n"));
  assert_non_null(strstr(out, "    param hidden i64 896\n"));
  assert_non_null(strstr(out, "    arch sm_90\n"));
  assert_non_null(strstr(out, "    kernel-abi 1\n"));
  assert_non_null(strstr(out, "0123456789abcdef0123456789abcdef.kk  INVALID: "));
  assert_non_null(strstr(out, "3 cached kernels in "));
  assert_non_null(strstr(out, "(1 invalid)"));
  free(out);

  char dirarg[600];
  snprintf(dirarg, sizeof dirarg, "--dir=%s/sub", keep); /* under a file: cannot exist */
  assert_int_equal(run(&out, 3, "kernels", "--clear", dirarg), 1);
  free(out);
  snprintf(dirarg, sizeof dirarg, "--dir=%s", dir);
  /* --clear removes the two entries the cache wrote; the file --list
   * called INVALID is not a cache file (no entry header): it stays, and
   * the report says so and why */
  assert_int_equal(run(&out, 3, "kernels", "--clear", dirarg), 0);
  printf("%s", out);
  assert_non_null(strstr(out, "removed 2 files from "));
  assert_non_null(strstr(out, "; left 2 files (reasons above)"));
  assert_non_null(strstr(out, "left 0123456789abcdef0123456789abcdef.kk: does not begin with "
                              "the cache-entry header"));
  assert_non_null(strstr(out, "left notes.txt: not named like a cache entry"));
  free(out);
  assert_int_equal(access(keep, F_OK), 0);
  size_t n;
  char *text = NULL;
  FILE *f = fopen(junk, "rb");
  assert_non_null(f);
  text = calloc(1, 64);
  n = fread(text, 1, 63, f);
  fclose(f);
  assert_int_equal(n, 9);
  assert_string_equal(text, "precious\n");
  free(text);
  assert_int_equal(run(&out, 3, "kernels", dirarg, "--list"), 0);
  assert_non_null(strstr(out, "1 cached kernel in "));
  assert_non_null(strstr(out, "(1 invalid)"));
  free(out);
  kt_rm_rf(dir);
  free(dir);
}

/* --list and --clear only look: a folder that is not there is reported,
 * never created (neither a --dir nor the default one), and --schema needs
 * no folder at all. An empty --dir is an error, not the default folder. */
static void test_missing_folder_not_created(void **state) {
  (void)state;
  char *dir = kt_mkdtemp("kcache-cli-absent");
  char parent[512], absent[600], want[700], xdg[512], xdg_kiln[600];
  snprintf(parent, sizeof parent, "%s/absent", dir);
  snprintf(absent, sizeof absent, "%s/cache", parent);
  snprintf(want, sizeof want, "no cache folder at %s\n", absent);
  static const char *const actions[] = {"--list", "--clear", "--schema"};
  for (int i = 0; i < 3; i++) {
    char *out;
    assert_int_equal(run(&out, 4, "kernels", "--dir", absent, actions[i]), 0);
    if (i < 2 && !strstr(out, want)) fail_msg("%s: no \"%s\" in:\n%s", actions[i], want, out);
    free(out);
    if (access(parent, F_OK) == 0) fail_msg("kiln kernels %s created %s", actions[i], parent);
  }

  /* the default folder ($XDG_CACHE_HOME/kiln) is not created either */
  char *saved = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
  snprintf(xdg, sizeof xdg, "%s/xdg", dir);
  snprintf(xdg_kiln, sizeof xdg_kiln, "no cache folder at %s/kiln\n", xdg);
  setenv("XDG_CACHE_HOME", xdg, 1);
  char *out;
  assert_int_equal(run(&out, 2, "kernels", "--list"), 0);
  assert_non_null(strstr(out, xdg_kiln));
  free(out);
  assert_int_equal(run(&out, 2, "kernels", "--clear"), 0);
  assert_non_null(strstr(out, xdg_kiln));
  free(out);

  /* an empty --dir is refused, not taken as the default */
  assert_int_equal(run(&out, 4, "kernels", "--dir", "", "--list"), 2);
  assert_non_null(strstr(out, "--dir: empty path"));
  free(out);
  assert_int_equal(run(&out, 3, "kernels", "--dir=", "--clear"), 2);
  assert_non_null(strstr(out, "--dir: empty path"));
  free(out);
  assert_int_equal(access(xdg, F_OK), -1);
  if (saved) setenv("XDG_CACHE_HOME", saved, 1);
  else unsetenv("XDG_CACHE_HOME");
  free(saved);

  /* a path that is a file, not a folder: an error, nothing created */
  char file[600];
  snprintf(file, sizeof file, "%s/plain", dir);
  assert_true(kt_write_file(file, "x", 1));
  assert_int_equal(run(&out, 4, "kernels", "--dir", file, "--list"), 1);
  assert_non_null(strstr(out, "not a folder"));
  free(out);
  kt_rm_rf(dir);
  free(dir);
}

static void test_usage(void **state) {
  char *out;
  assert_int_equal(run(&out, 2, "kernels", "--help"), 0);
  assert_non_null(strstr(out, "usage: kiln kernels"));
  free(out);
  assert_int_equal(run(&out, 1, "kernels"), 2);
  free(out);
  assert_int_equal(run(&out, 2, "kernels", "--frobnicate"), 2);
  free(out);
  assert_int_equal(run(&out, 3, "kernels", "--list", "--clear"), 2);
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schema_lists_eps),
      cmocka_unit_test(test_list_and_clear),
      cmocka_unit_test(test_missing_folder_not_created),
      cmocka_unit_test(test_usage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
