/* kiln config: the reference of every section and key, or the effective
 * values with where each came from. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out) {
  fputs("usage: kiln config [--help | --keys | --show] [--config FILE] [flags]\n"
        "\n"
        "  --keys    every section and key kiln accepts: type, range, default, help\n"
        "            (core's sections, [kernel_cache], and the sections of the plugins\n"
        "            found on the plugin path)\n"
        "  --show    the effective configuration: each value and its origin (default,\n"
        "            FILE:LINE, an environment variable or a flag)\n"
        "  --help    this text, then the --keys reference\n"
        "\n"
        "The flags every model command takes (-m, -c, -b, -t, -B, --fallback) apply, so\n"
        "--show says what they set.\n",
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
  enum { O_KEYS = CLI_OPT_FIRST_FREE, O_SHOW };
  static const struct option longopts[] = {CLI_MODEL_LONGOPTS,
                                           {"keys", no_argument, 0, O_KEYS},
                                           {"show", no_argument, 0, O_SHOW},
                                           {"help", no_argument, 0, 'h'},
                                           {0, 0, 0, 0}};
  cli_common cc = {.cmd = "config"};
  int mode = 0;
  bool help = false;
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, CLI_MODEL_SHORTOPTS "h", longopts, NULL)) != -1) {
    int common = cli_model_flag(&cc, opt, optarg);
    if (common < 0) return CLI_EXIT_USAGE;
    if (common) continue;
    switch (opt) {
    case O_KEYS: case O_SHOW:
      if (mode && mode != opt) return cli_usage_error("config", "--keys and --show: one at a time");
      mode = opt;
      break;
    case 'h': help = true; break;
    default: usage(stderr); return CLI_EXIT_USAGE;
    }
  }
  if (optind != argc) return cli_usage_error("config", "unexpected argument \"%s\"", argv[optind]);
  kiln_runtime *rt;
  kiln_status st = cli_runtime_open(&cc, &rt);
  if (st) return cli_exit(&cc, st);
  kiln_plugin_registry_scan(kiln_runtime_plugins(rt), declare_all, rt);
  if (help) {
    usage(stdout);
    printf("\n");
  }
  if (mode == O_SHOW) kiln_config_print(kiln_runtime_config(rt), stdout);
  else kiln_config_print_help(kiln_runtime_config(rt), stdout);
  kiln_runtime_free(rt);
  return 0;
}
