/* kiln config: the reference of every section and key, or the effective
 * values with where each came from. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out) {
  fputs("usage: kiln config [--help | --keys | --show] [-c CONFIG] [-b BACKEND]\n"
        "\n"
        "  --keys    every section and key kiln accepts: type, range, default, help\n"
        "            (core's sections, [kernel_cache], and the sections of the plugins\n"
        "            found on the plugin path)\n"
        "  --show    the effective configuration: each value and its origin (default,\n"
        "            FILE:LINE, an environment variable or a flag)\n"
        "  --help    this text, then the --keys reference\n",
        out);
}

static void declare_all(const char *name, const char *path, void *user) {
  (void)path;
  kiln_runtime *rt = user;
  kiln_plugin *p;
  kiln_status st = kiln_plugin_registry_get(kiln_runtime_plugins(rt), name, &p);
  if (!st) st = kiln_backend_declare_config(p, (kiln_config *)kiln_runtime_config(rt));
  if (st) {
    fprintf(stderr, "kiln config: plugin %s: %s\n", name, kiln_status_message(st));
    kiln_status_free(st);
  }
}

int cmd_config(int argc, char **argv) {
  static const struct option longopts[] = {{"config", required_argument, 0, 'c'},
                                           {"backend", required_argument, 0, 'b'},
                                           {"keys", no_argument, 0, 'k'},
                                           {"show", no_argument, 0, 's'},
                                           {"help", no_argument, 0, 'h'},
                                           {0, 0, 0, 0}};
  cli_common cc = {0};
  int mode = 0;
  bool help = false;
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "c:b:h", longopts, NULL)) != -1) {
    switch (opt) {
    case 'c': cc.config_path = optarg; break;
    case 'b': cli_override(&cc, "backend", "name", optarg, "--backend"); break;
    case 'k': case 's':
      if (mode && mode != opt) {
        fprintf(stderr, "kiln config: --keys and --show: one at a time\n");
        return 2;
      }
      mode = opt;
      break;
    case 'h': help = true; break;
    default: usage(stderr); return 2;
    }
  }
  if (optind != argc) {
    fprintf(stderr, "kiln config: unexpected argument \"%s\"\n", argv[optind]);
    return 2;
  }
  kiln_runtime *rt;
  kiln_status st = cli_runtime_open(&cc, &rt);
  if (st) return cli_fail("config", st);
  kiln_plugin_registry_scan(kiln_runtime_plugins(rt), declare_all, rt);
  if (help) {
    usage(stdout);
    printf("\n");
  }
  if (mode == 's') kiln_config_print(kiln_runtime_config(rt), stdout);
  else kiln_config_print_help(kiln_runtime_config(rt), stdout);
  kiln_runtime_free(rt);
  return 0;
}
