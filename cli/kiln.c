/* The `kiln` command: one subcommand per job (DESIGN.md, "The kiln
 * command"). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_kernels.h"

typedef struct command {
  const char *name;
  int (*main)(int argc, char **argv);
  const char *summary;
} command;

static const command commands[] = {
    {"run", cmd_run, "generate text from a prompt, or hold a conversation (-i)"},
    {"tokenize", cmd_tokenize, "text to token ids and pieces (as llama-tokenize)"},
    {"detokenize", cmd_detokenize, "token ids to text"},
    {"perplexity", cmd_perplexity, "perplexity over a text file (as llama-perplexity)"},
    {"inspect", cmd_inspect, "print a GGUF model's metadata, hyperparameters and tensors"},
    {"backends", cmd_backends, "list backend plugins, their ABI and hardware"},
    {"config", cmd_config, "print the configuration reference or the effective configuration"},
    {"parity", cmd_parity, "compare a backend with a reference, per op and per token position"},
    {"bench", cmd_bench, "prefill and decode throughput of a backend on a model"},
    {"qa", cmd_qa, "replay a golden set of prompts and reference token ids"},
    {"synth", cmd_synth, "write a synthetic model with seeded random weights"},
    {"kernels", cmd_kernels, "the kernel cache: template schemas, cached entries, clear"},
};

static void usage(FILE *out) {
  fprintf(out, "usage: kiln <command> [options]   (kiln <command> --help for its options)\n\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\nkiln %s. Environment: KILN_CONFIG, KILN_BACKEND, KILN_MODEL, KILN_PLUGIN_PATH,\n"
               "KILN_LOG_LEVEL, KILN_FALLBACK, KILN_KERNEL_CACHE_DIR override the configuration file;\n"
               "flags override both.\n",
          kiln_version());
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("kiln %s\n", kiln_version());
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (strcmp(argv[1], commands[i].name) != 0) continue;
    /* getopt's own messages name argv[0]: "kiln run: unrecognized option" */
    char name[32];
    snprintf(name, sizeof name, "kiln %s", commands[i].name);
    char *cmd_name = argv[1];
    argv[1] = name;
    int rc = commands[i].main(argc - 1, argv + 1);
    argv[1] = cmd_name;
    /* Output that did not reach its file (a full disk, a closed pipe) is a
     * failure, not a success with text missing. */
    if (fflush(stdout) != 0 || ferror(stdout)) {
      fprintf(stderr, "kiln %s: error: writing standard output: %s\n", argv[1], strerror(errno ? errno : EIO));
      return CLI_EXIT_FAIL;
    }
    return rc;
  }
  fprintf(stderr, "kiln: unknown command \"%s\"\n\n", argv[1]);
  usage(stderr);
  return CLI_EXIT_USAGE;
}
