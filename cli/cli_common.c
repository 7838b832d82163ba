/* Runtime set-up and error reporting shared by the subcommands. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

bool cli_override(cli_common *c, const char *section, const char *key, const char *value,
                  const char *flag) {
  if (c->n_overrides == sizeof c->overrides / sizeof c->overrides[0]) {
    fprintf(stderr, "kiln: too many option overrides\n");
    return false;
  }
  c->overrides[c->n_overrides++] = (kiln_config_override){section, key, value, flag};
  return true;
}

/* When this binary is the one in the build tree (not installed), the
 * plugins built beside it are found without configuration. */
static void add_build_plugins(cli_common *c) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return;
  exe[n] = 0;
  size_t b = strlen(KILN_ABS_BUILDDIR);
  if (strncmp(exe, KILN_ABS_BUILDDIR, b) != 0 || exe[b] != '/') return;
  static char path[PATH_MAX * 2];
  const char *env = getenv("KILN_PLUGIN_PATH");
  snprintf(path, sizeof path, "%s%s%s/.libs", env && *env ? env : "", env && *env ? ":" : "",
           KILN_ABS_BUILDDIR);
  setenv("KILN_PLUGIN_PATH", path, 1);
}

kiln_status cli_runtime_open(cli_common *c, kiln_runtime **out_runtime) {
  add_build_plugins(c);
  kiln_runtime_options opt = {c->config_path, true, c->overrides, c->n_overrides};
  return kiln_runtime_open(&opt, out_runtime);
}

int cli_fail(const char *cmd, kiln_status st) {
  fprintf(stderr, "kiln %s: error: %s\n", cmd, kiln_status_message(st));
  kiln_status_free(st);
  return 1;
}

kiln_status cli_read_file(const char *path, char **out_text, size_t *out_len) {
  *out_text = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return kiln_status_new(KILN_STATUS_NOT_FOUND, "%s: %s", path, strerror(errno));
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (cap - len - 1 == 0) {
      char *g = realloc(buf, cap * 2);
      if (!g) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = g;
      cap *= 2;
    }
  }
  bool err = ferror(f);
  fclose(f);
  if (!buf) return kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: reading", path);
  if (err) {
    free(buf);
    return kiln_status_new(KILN_STATUS_IO, "%s: read error", path);
  }
  buf[len] = 0;
  *out_text = buf;
  *out_len = len;
  return NULL;
}

#include "cmd_kernels.h"

int cmd_kernels(int argc, char **argv) {
  /* Take -c/--config for ourselves; pass the rest, plus --dir from
   * [kernel_cache] when the user gave none. */
  cli_common cc = {0};
  char *args[64];
  int n = 0;
  bool have_dir = false;
  for (int i = 0; i < argc && n < 60; i++) {
    if ((!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config")) && i + 1 < argc) {
      cc.config_path = argv[++i];
      continue;
    }
    if (!strncmp(argv[i], "--dir", 5)) have_dir = true;
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return kiln_cmd_kernels(argc, argv);
    args[n++] = argv[i];
  }
  kiln_runtime *rt = NULL;
  if (!have_dir) {
    kiln_status st = cli_runtime_open(&cc, &rt);
    if (st) return cli_fail("kernels", st);
    const kiln_config_section *s = kiln_config_section_get(kiln_runtime_config(rt), "kernel_cache");
    const char *dir = kiln_config_get_str(s, "dir");
    if (dir) {
      args[n++] = "--dir";
      args[n++] = (char *)dir;
    }
  }
  args[n] = NULL;
  int rc = kiln_cmd_kernels(n, args);
  kiln_runtime_free(rt);
  return rc;
}
