/* Shared by the `kiln` subcommands: the flags every model command takes,
 * runtime and session set-up, prompts, exit statuses, progress and JSON. */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kiln/kiln.h"

/* Exit statuses, one rule for every subcommand: 0 done, 1 failed (bad
 * input, a failed check), 2 a command line that cannot be used (an unknown
 * option, a missing or malformed argument, a flag's value out of range). */
enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };

/* Flags every model command accepts (and the runtime built from them). */
typedef struct cli_common {
  const char *cmd;         /* "run", named in messages */
  const char *config_path; /* --config */
  kiln_config_override overrides[24];
  size_t n_overrides;
  bool verbose;            /* -v */
  /* set by cli_runtime_open when the configuration fails only because of a
   * value given on the command line: cli_exit then returns CLI_EXIT_USAGE */
  bool flags_at_fault;
} cli_common;

/* getopt codes of the shared long-only flags. */
enum { CLI_OPT_CONFIG = 0x1000, CLI_OPT_FALLBACK, CLI_OPT_FIRST_FREE };

/* The shared flags, llama.cpp's spelling where it has the same thing:
 * -m/--model, -c/--ctx-size ([model] n_ctx), -b/--batch-size ([backend]
 * batch), -t/--threads ([cpu] threads); kiln's own: -B/--backend,
 * --config, --fallback, -v/--verbose. */
#define CLI_MODEL_SHORTOPTS "m:c:b:t:B:v"
#define CLI_MODEL_LONGOPTS                                                                                       \
  {"model", required_argument, 0, 'm'}, {"ctx-size", required_argument, 0, 'c'},                                \
      {"batch-size", required_argument, 0, 'b'}, {"threads", required_argument, 0, 't'},                        \
      {"backend", required_argument, 0, 'B'}, {"config", required_argument, 0, CLI_OPT_CONFIG},                 \
      {"fallback", required_argument, 0, CLI_OPT_FALLBACK}, {"verbose", no_argument, 0, 'v'}
/* Their lines for a command's --help. */
#define CLI_MODEL_HELP                                                                                           \
  "  -m, --model FILE       GGUF model ([model] path)\n"                                                        \
  "  -c, --ctx-size N       KV cache positions ([model] n_ctx; 0 = the model's whole context,\n"   \
  "                         -1 = that, at most 4096: the default)\n"               \
  "  -b, --batch-size N     prefill micro-batch ([backend] batch)\n"                                           \
  "  -t, --threads N        cpu backend threads ([cpu] threads; 0 = one per online CPU)\n"                     \
  "  -B, --backend NAME     backend plugin ([backend] name): cpu, cuda-serial, cuda-batched, ...\n"           \
  "      --config FILE      configuration file (else $KILN_CONFIG)\n"                                          \
  "      --fallback MODE    error | cpu: nodes the backend cannot run ([backend] fallback)\n"                 \
  "  -v, --verbose          the hyperparameters and the plan first (stderr)\n"

/* Handles one of the shared flags: 1 when it was one, 0 when opt is not a
 * shared flag, -1 after a message when it cannot be taken (exit 2). */
int cli_model_flag(cli_common *c, int opt, const char *arg);

/* llama.cpp's flags of several letters after one dash (-cnv, -sys), which
 * getopt would read as bundled letters: each becomes its long option. */
typedef struct cli_alias {
  const char *from, *to;
} cli_alias;
/* Rewrites argv[1..argc) in place (up to "--"); aliases ends with {NULL}. */
void cli_rewrite_aliases(int argc, char **argv, const cli_alias *aliases);

/* Checks `--flag value` for section.key against the schema while the
 * command line is read, so a bad value is the command line's fault (exit
 * 2) however late the value would be used (parity's --test-kv, in one
 * session only). False after "kiln CMD: error: FLAG: [section] key: ..."
 * on stderr. A backend's section, declared when its plugin loads, passes
 * here and is checked by cli_runtime_open. */
bool cli_flag_value_ok(const char *cmd, const char *section, const char *key, const char *value, const char *flag);

/* Records `--flag value` as section.key = value, checked by
 * cli_flag_value_ok. Returns false (after a message) when it fails that or
 * there are too many. */
bool cli_override(cli_common *c, const char *section, const char *key, const char *value, const char *flag);

/* --config FILE: the one configuration file of the run. A second --config
 * is refused with a message naming both (files are not merged: the keys of
 * one are overridden by flags and KILN_* variables), so that the last one
 * does not silently win. Returns false after the message. */
bool cli_set_config(cli_common *c, const char *path);

/* Opens the runtime with the environment, the file and the overrides; on
 * the build tree's own binary, the build's plugin folder is searched too.
 * When it fails, and would not without the command line's overrides,
 * c->flags_at_fault is set; so it is for an empty --config and for a
 * -B/--backend that names no plugin found (cli_backend_check). */
kiln_status cli_runtime_open(cli_common *c, kiln_runtime **out_runtime);

/* A backend named on the command line by `flag` (-B, parity's --ref and
 * --test): an error naming the flag and the name, with c->flags_at_fault
 * set, when rt finds no plugin of that name; NULL when it does. */
kiln_status cli_backend_check(cli_common *c, kiln_runtime *rt, const char *flag, const char *name);

/* [model] path of the runtime's configuration, or an error saying to give
 * -m (a command line that cannot be used: c->flags_at_fault set). */
kiln_status cli_model_path(cli_common *c, kiln_runtime *rt, const char **out_path);

/* kiln_model_open(path), its error prefixed with where [model] path was
 * set ("conf/my.ini:3: [model] path: ...", "KILN_MODEL: ...") unless -m
 * gave it: a relative path from a file is resolved against the file's
 * folder, which the message alone would not explain. */
kiln_status cli_model_open(kiln_runtime *rt, const char *path, kiln_model **out_model);

/* kiln_session_open, with a status line on a terminal while the plan is
 * made, kernels compiled and weights uploaded. */
kiln_status cli_session_open(kiln_runtime *rt, const kiln_model *m, const kiln_session_options *opt,
                             kiln_session **out_session);

/* Prints "kiln <cmd>: error: <message>" and returns the exit status:
 * CLI_EXIT_USAGE when c->flags_at_fault, else CLI_EXIT_FAIL. */
int cli_exit(const cli_common *c, kiln_status st);
/* The same without a cli_common: always CLI_EXIT_FAIL. */
int cli_fail(const char *cmd, kiln_status st);
/* "kiln <cmd>: <message>" for a command line that cannot be used; returns
 * CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The backend's numeric modes, the config keys that change its arithmetic
 * (activations, matvec, recurrent_guard, gemm, precision; those its plugin
 * declares), with their effective values from rt's configuration (the
 * default when its section is not declared), as "activations q16,
 * recurrent_guard f32, gemm f32" into buf; "" when it has none. With a
 * plan, recurrent_guard is left out where no matvec of its graph feeds a
 * recurrent state (it changes nothing there) and otherwise says how many
 * do: "recurrent_guard f32 (183 of 226 matvecs feed a recurrent state)";
 * and what the plan's backend says ran (cli_plan_modes) stands in for the
 * configured value of the key it names ("gemm q16mma: 198 batched GEMMs:
 * 196 q16mma (Q4_K 196), 2 bf16x3 fallback (F16 2: no mmq decoder)"), its
 * other items after the keys. */
const char *cli_numerics(const kiln_runtime *rt, const char *backend, kiln_plan *plan, char *buf,
                         size_t size);

/* kiln_plan_describe_modes(plan, backend) into line (cap bytes; a line
 * that fills it ends in "...", so a cut is seen); on an error, a warning
 * on stderr and "". CLI_MODES_MAX is the callers' cap. */
#define CLI_MODES_MAX 512
void cli_plan_modes(kiln_plan *plan, const char *backend, char *line, size_t cap);
/* The item of a describe_modes line (items separated by "; ") that begins
 * with key and a space: its start, its length in *out_len; NULL when none. */
const char *cli_modes_item(const char *line, const char *key, size_t *out_len);
/* Appends to the string in buf (size bytes), ", "-separated, the items of
 * line that begin with none of placed[0..n_placed) (NULL entries skipped). */
void cli_modes_append_rest(char *buf, size_t size, const char *line, const char *const *placed, size_t n_placed);

/* Reads a whole file, or standard input when path is "-"; malloc'd,
 * NUL-terminated (the text may hold NULs: use *out_len). At most 64 MiB. */
kiln_status cli_read_file(const char *path, char **out_text, size_t *out_len);

/* The prompt of -p TEXT or -f FILE (exactly one must be given, else a
 * usage message and false): -p's text with llama.cpp's escapes processed
 * when `escape` (\n \r \t \' \" \\ \xHH; other backslashes stay), -f's
 * bytes as they are. *out_text is malloc'd. On a read error *out_status is
 * set and true returned. */
bool cli_prompt(const char *cmd, const char *prompt, const char *file, bool escape, char **out_text,
                size_t *out_len, kiln_status *out_status);

/* Whether progress goes to stderr: only when it is a terminal. */
bool cli_progress_on(void);
/* Replaces the progress line (printf format); nothing when progress is off. */
void cli_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Clears the progress line. */
void cli_progress_clear(void);

/* A JSON string of len bytes of text; bytes that are not UTF-8 become
 * U+FFFD (JSON strings hold only Unicode). */
json_t *cli_json_text(const char *text, size_t len);
/* Prints j to stdout on one line and frees it; false on a write error. */
bool cli_json_print(json_t *j);

int cmd_run(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_backends(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_qa(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_parity(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
/* kiln kernels, with [kernel_cache] dir from the configuration (--config)
 * unless --dir is given. */
int cmd_kernels(int argc, char **argv);

#endif
