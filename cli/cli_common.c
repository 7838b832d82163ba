/* Runtime set-up and error reporting shared by the subcommands. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
 * plugins built beside it are found without configuration: searched after
 * whatever the configuration and KILN_PLUGIN_PATH name. */
static const char *build_plugins(void) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return NULL;
  exe[n] = 0;
  size_t b = strlen(KILN_ABS_BUILDDIR);
  if (strncmp(exe, KILN_ABS_BUILDDIR, b) != 0 || exe[b] != '/') return NULL;
  return KILN_ABS_BUILDDIR "/.libs";
}

kiln_status cli_runtime_open(cli_common *c, kiln_runtime **out_runtime) {
  kiln_runtime_options opt = {c->config_path, true, c->overrides, c->n_overrides, build_plugins()};
  return kiln_runtime_open(&opt, out_runtime);
}

int cli_fail(const char *cmd, kiln_status st) {
  fprintf(stderr, "kiln %s: error: %s\n", cmd, kiln_status_message(st));
  kiln_status_free(st);
  return 1;
}

/* A prompt file larger than this is refused: no context holds it, and a
 * device like /dev/zero must not eat the machine's memory. */
#define CLI_MAX_PROMPT_BYTES (64u << 20)

kiln_status cli_read_file(const char *path, char **out_text, size_t *out_len) {
  *out_text = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return kiln_status_new(KILN_STATUS_NOT_FOUND, "%s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fclose(f);
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: not a regular file", path);
  }
  if ((uint64_t)sb.st_size > CLI_MAX_PROMPT_BYTES) {
    fclose(f);
    return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "%s: %lld bytes; a prompt file may hold at most %u MiB", path,
                           (long long)sb.st_size, CLI_MAX_PROMPT_BYTES >> 20);
  }
  size_t cap = (size_t)sb.st_size + 1;
  char *buf = malloc(cap);
  if (!buf) {
    fclose(f);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: reading", path);
  }
  size_t len = fread(buf, 1, cap - 1, f);
  bool err = ferror(f);
  fclose(f);
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
