/* kiln kernels from the command: [kernel_cache] dir of the configuration
 * (--config, $KILN_CONFIG) unless --dir is given; the rest is
 * kiln_cmd_kernels (cmd_kernels.c, which the kernel-cache tests call too). */
#include "config.h"

#include <string.h>

#include "cli.h"
#include "cmd_kernels.h"

int cmd_kernels(int argc, char **argv) {
  cli_common cc = {.cmd = "kernels"};
  char *args[64];
  int n = 0;
  bool have_dir = false;
  for (int i = 0; i < argc; i++) {
    if (n >= 60) return cli_usage_error("kernels", "too many arguments");
    if (!strcmp(argv[i], "--config")) {
      if (i + 1 == argc) return cli_usage_error("kernels", "--config needs a FILE");
      if (!cli_set_config(&cc, argv[++i])) return 2;
      continue;
    }
    if (!strncmp(argv[i], "--config=", 9)) {
      if (!cli_set_config(&cc, argv[i] + 9)) return 2;
      continue;
    }
    if (!strncmp(argv[i], "--dir", 5)) have_dir = true;
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return kiln_cmd_kernels(argc, argv);
    args[n++] = argv[i];
  }
  kiln_runtime *rt = NULL;
  if (!have_dir) {
    kiln_status st = cli_runtime_open(&cc, &rt);
    if (st) return cli_exit(&cc, st);
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
