/* kiln backends: every plugin on the search path, its ABI and hardware. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kiln/escape.h"

static void usage(FILE *out) {
  fputs("usage: kiln backends [--config FILE]\n"
        "\n"
        "Lists the backend plugins (kiln-<name>.so) on the plugin search path: the\n"
        "ABI each was built for, whether its hardware is present (device, compute\n"
        "capability, memory) or why it is unavailable, its numeric modes (the\n"
        "config keys that change its arithmetic: activations, matvec,\n"
        "recurrent_guard, gemm, precision)\n"
        "as configured, whether it can split a model across several devices\n"
        "(tensor parallelism: NCCL's version and the devices, or why not), and\n"
        "any plugin that fails to load, with the loader's reason.\n",
        out);
}

typedef struct list_state {
  kiln_runtime *rt;
  kiln_plugin_registry *r;
  int n, n_bad;
} list_state;

/* Plugin-provided text and folder names, escaped for the terminal. */
#define ESC(buf, text) (kiln_escape((buf), sizeof(buf), (text), strlen(text), KILN_ESCAPE_KEEP_BACKSLASH), (buf))

static void show(const char *name, const char *path, void *user) {
  char e1[512], e2[512], e3[512];
  list_state *ls = user;
  kiln_plugin *p;
  ls->n++;
  kiln_status st = kiln_plugin_registry_get(ls->r, name, &p);
  if (st) {
    ls->n_bad++;
    printf("%-14s NOT LOADED  %s\n", ESC(e1, name), ESC(e2, kiln_status_message(st)));
    kiln_status_free(st);
    return;
  }
  const kiln_backend_ops *e = kiln_plugin_entry(p);
  kiln_probe_info info;
  st = kiln_plugin_probe(p, &info);
  printf("%-14s ABI %u.%u    %s\n", ESC(e1, name), e->abi_major, e->abi_minor,
         ESC(e2, e->description ? e->description : ""));
  printf("%-14s file        %s\n", "", ESC(e1, path));
  if (st) {
    printf("%-14s probe       failed: %s\n", "", ESC(e1, kiln_status_message(st)));
    kiln_status_free(st);
  } else if (info.available) {
    printf("%-14s available   %s%s%s\n", "", ESC(e1, info.device), info.detail[0] ? ", " : "",
           ESC(e3, info.detail));
  } else {
    printf("%-14s unavailable %s\n", "", ESC(e1, info.reason));
  }
  char tp[320];
  st = kiln_plugin_probe_parallel(p, kiln_runtime_config(ls->rt), tp, sizeof tp);
  if (st) {
    printf("%-14s parallel    probe failed: %s\n", "", kiln_status_message(st));
    kiln_status_free(st);
  } else if (tp[0]) {
    printf("%-14s parallel    %s\n", "", tp);
  }
  char modes[320];
  if (cli_numerics(ls->rt, name, NULL, modes, sizeof modes)[0])
    printf("%-14s numerics    %s\n", "", modes);
}

int cmd_backends(int argc, char **argv) {
  static const struct option longopts[] = {
      {"config", required_argument, 0, 'c'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  cli_common cc = {.cmd = "backends"};
  int opt;
  optind = 1;
  /* --config alone: -c is the context size in every other command */
  while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    if (opt == 'c') {
      if (!cli_set_config(&cc, optarg)) return 2;
    } else if (opt == 'h') {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (optind != argc) {
    fprintf(stderr, "kiln backends: unexpected argument \"%s\"\n", argv[optind]);
    return 2;
  }
  kiln_runtime *rt;
  kiln_status st = cli_runtime_open(&cc, &rt);
  if (st) return cli_exit(&cc, st);
  list_state ls = {rt, kiln_runtime_plugins(rt), 0, 0};
  printf("kiln %s, plugin ABI %d.%d\n\n", kiln_version(), KILN_PLUGIN_ABI_MAJOR, KILN_PLUGIN_ABI_MINOR);
  kiln_plugin_registry_scan(ls.r, show, &ls);
  if (!ls.n) printf("no plugins found (KILN_PLUGIN_PATH or [general] plugin_path add folders)\n");
  kiln_runtime_free(rt);
  return 0;
}
