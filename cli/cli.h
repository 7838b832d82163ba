/* Shared by the `kiln` subcommands: runtime set-up from flags, errors. */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "kiln/kiln.h"

/* Flags every command that opens a runtime accepts. */
typedef struct cli_common {
  const char *config_path; /* --config */
  kiln_config_override overrides[16];
  size_t n_overrides;
  bool verbose;            /* -v */
} cli_common;

/* Records `--flag value` as section.key = value. Returns false (after a
 * message) when there are too many. */
bool cli_override(cli_common *c, const char *section, const char *key, const char *value,
                  const char *flag);

/* Opens the runtime with the environment, the file and the overrides; on
 * the build tree's own binary, the build's plugin folder is searched too. */
kiln_status cli_runtime_open(cli_common *c, kiln_runtime **out_runtime);

/* Prints "kiln <cmd>: error: <message>" and returns 1 (exit status). */
int cli_fail(const char *cmd, kiln_status st);

/* Reads a whole file (for -f); malloc'd, NUL-terminated. */
kiln_status cli_read_file(const char *path, char **out_text, size_t *out_len);

int cmd_run(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_backends(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_qa(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_parity(int argc, char **argv);
int cmd_bench(int argc, char **argv);
/* kiln kernels, with [kernel_cache] dir from the configuration (-c) unless
 * --dir is given. */
int cmd_kernels(int argc, char **argv);

#endif
