/* The shared flags, runtime and session set-up, and exit statuses. */
#include "config.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "kiln/escape.h"

bool cli_flag_value_ok(const char *cmd, const char *section, const char *key, const char *value, const char *flag) {
  kiln_config *cfg = NULL;
  kiln_status st = kiln_config_new(&cfg);
  /* core's sections are declared here; a backend's section is only once
   * its plugin loads, and cli_runtime_open checks its values then */
  if (!st) st = kiln_config_set(cfg, section, key, value, flag);
  kiln_config_free(cfg);
  if (!st) return true;
  cli_fail(cmd ? cmd : "", st);
  return false;
}

bool cli_override(cli_common *c, const char *section, const char *key, const char *value, const char *flag) {
  if (c->n_overrides == sizeof c->overrides / sizeof c->overrides[0]) {
    fprintf(stderr, "kiln %s: too many option overrides\n", c->cmd ? c->cmd : "");
    return false;
  }
  if (!cli_flag_value_ok(c->cmd, section, key, value, flag)) return false;
  c->overrides[c->n_overrides++] = (kiln_config_override){section, key, value, flag};
  return true;
}

bool cli_set_config(cli_common *c, const char *path) {
  if (c->config_path) {
    char a[KILN_QUOTE_CAP(200)], b[KILN_QUOTE_CAP(200)];
    fprintf(stderr,
            "kiln %s: --config given twice (%s, then %s): a run reads one configuration file; "
            "override its keys with flags or KILN_* variables\n",
            c->cmd ? c->cmd : "", kiln_quote(a, sizeof a, c->config_path, strlen(c->config_path), 200),
            kiln_quote(b, sizeof b, path, strlen(path), 200));
    return false;
  }
  c->config_path = path;
  return true;
}

int cli_model_flag(cli_common *c, int opt, const char *arg) {
  bool ok;
  switch (opt) {
  case 'm': ok = cli_override(c, "model", "path", arg, "--model"); break;
  case 'c': ok = cli_override(c, "model", "n_ctx", arg, "--ctx-size"); break;
  case 'b': ok = cli_override(c, "backend", "batch", arg, "--batch-size"); break;
  case 't': ok = cli_override(c, "cpu", "threads", arg, "--threads"); break;
  case 'B': ok = cli_override(c, "backend", "name", arg, "--backend"); break;
  case CLI_OPT_CONFIG: ok = cli_set_config(c, arg); break;
  case CLI_OPT_FALLBACK: ok = cli_override(c, "backend", "fallback", arg, "--fallback"); break;
  case 'v': c->verbose = true; ok = true; break;
  default: return 0;
  }
  return ok ? 1 : -1;
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

/* NULL when a plugin of that name is there or loads; else the registry's
 * message (not there, or not a name), which says where it looked. */
static kiln_status plugin_missing(kiln_runtime *rt, const char *name) {
  kiln_plugin_registry *r = kiln_runtime_plugins(rt);
  if (kiln_plugin_registry_has(r, name)) return NULL;
  kiln_plugin *p = NULL;
  return kiln_plugin_registry_get(r, name, &p);
}

kiln_status cli_backend_check(cli_common *c, kiln_runtime *rt, const char *flag, const char *name) {
  kiln_status st = plugin_missing(rt, name);
  if (!st) return NULL;
  c->flags_at_fault = true;
  return kiln_status_annotate(st, "%s %s", flag, name);
}

/* The -B/--backend value, when the command line gave one (the last wins). */
static const char *backend_flag(const cli_common *c) {
  const char *name = NULL;
  for (size_t i = 0; i < c->n_overrides; i++)
    if (!strcmp(c->overrides[i].section, "backend") && !strcmp(c->overrides[i].key, "name"))
      name = c->overrides[i].value;
  return name;
}

kiln_status cli_runtime_open(cli_common *c, kiln_runtime **out_runtime) {
  *out_runtime = NULL;
  if (c->config_path && !*c->config_path) {
    c->flags_at_fault = true;
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "--config \"\": the configuration file path is empty");
  }
  kiln_runtime_options opt = {c->config_path, true, c->overrides, c->n_overrides, build_plugins()};
  kiln_status st = kiln_runtime_open(&opt, out_runtime);
  const char *backend = backend_flag(c);
  if (!st && backend && (st = cli_backend_check(c, *out_runtime, "--backend", backend))) {
    kiln_runtime_free(*out_runtime);
    *out_runtime = NULL;
    return st;
  }
  if (st && c->n_overrides) {
    /* the same without the command line's values: if that opens, the
       flags were at fault (a malformed or out-of-range value: exit 2) */
    kiln_runtime *probe = NULL;
    kiln_runtime_options bare = opt;
    bare.overrides = NULL;
    bare.n_overrides = 0;
    kiln_status st2 = kiln_runtime_open(&bare, &probe);
    c->flags_at_fault = st2 == NULL;
    kiln_status_free(st2);
    kiln_runtime_free(probe);
  }
  return st;
}

kiln_status cli_model_path(cli_common *c, kiln_runtime *rt, const char **out_path) {
  *out_path = kiln_config_get_str(kiln_config_section_get(kiln_runtime_config(rt), "model"), "path");
  if (*out_path && **out_path) return NULL;
  c->flags_at_fault = true; /* a missing -m, as tokenize says of its own */
  return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                         "no model: give -m MODEL, or set [model] path in the configuration");
}

kiln_status cli_model_open(kiln_runtime *rt, const char *path, kiln_model **out_model) {
  kiln_status st = kiln_model_open(path, out_model);
  if (!st) return NULL;
  /* a path from a file or the environment: say where, as -m needs not */
  const char *origin = kiln_config_origin(kiln_config_section_get(kiln_runtime_config(rt), "model"), "path");
  if (origin && strcmp(origin, "--model") != 0) st = kiln_status_annotate(st, "%s: [model] path", origin);
  return st;
}

kiln_status cli_session_open(kiln_runtime *rt, const kiln_model *m, const kiln_session_options *opt,
                             kiln_session **out_session) {
  const kiln_config_section *bs = kiln_config_section_get(kiln_runtime_config(rt), "backend");
  const char *backend = opt && opt->backend ? opt->backend : kiln_config_get_str(bs, "name");
  if (!(opt && opt->backend)) {
    /* named by KILN_BACKEND or a configuration line (-B was checked when
       the runtime opened): the message says which */
    kiln_status st = plugin_missing(rt, backend);
    if (st) return kiln_status_annotate(st, "%s: backend %s", kiln_config_origin(bs, "name"), backend);
  }
  cli_progress("kiln: loading on %s (plan, kernels, weights) ...", backend);
  kiln_status st = kiln_session_open(rt, m, opt, out_session);
  cli_progress_clear();
  return st;
}

int cli_exit(const cli_common *c, kiln_status st) {
  const bool usage = c->flags_at_fault;
  cli_fail(c->cmd, st); /* escaped, as every error message */
  return usage ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
}

void cli_plan_modes(kiln_plan *plan, const char *backend, char *line, size_t cap) {
  kiln_status st = kiln_plan_describe_modes(plan, backend, line, cap);
  if (!st) {
    const size_t n = strlen(line);
    if (cap >= 4 && n == cap - 1) memcpy(line + n - 3, "...", 3);
    return;
  }
  /* the summary goes on without it, said */
  const char *msg = kiln_status_message(st);
  fputs("kiln: warning: ", stderr);
  kiln_fput_escaped(stderr, msg, strlen(msg), 0);
  fputc('\n', stderr);
  kiln_status_free(st);
}

/* The item of line after `from` (items separated by "; "): its start and
 * *out_len; NULL past the last. */
static const char *next_item(const char *from, size_t *out_len) {
  if (!from || !*from) return NULL;
  const char *end = strstr(from, "; ");
  *out_len = end ? (size_t)(end - from) : strlen(from);
  return from;
}

/* Whether item (len bytes) begins with key and a space. */
static bool item_of(const char *item, size_t len, const char *key) {
  const size_t kl = strlen(key);
  return len > kl && strncmp(item, key, kl) == 0 && item[kl] == ' ';
}

const char *cli_modes_item(const char *line, const char *key, size_t *out_len) {
  size_t len = 0;
  for (const char *it = next_item(line, &len); it; it = next_item(it[len] ? it + len + 2 : NULL, &len))
    if (item_of(it, len, key)) {
      *out_len = len;
      return it;
    }
  return NULL;
}

void cli_modes_append_rest(char *buf, size_t size, const char *line, const char *const *placed, size_t n_placed) {
  size_t used = strlen(buf), len = 0;
  for (const char *it = next_item(line, &len); it; it = next_item(it[len] ? it + len + 2 : NULL, &len)) {
    bool done = false;
    for (size_t i = 0; i < n_placed && !done; i++) done = placed[i] && item_of(it, len, placed[i]);
    if (done || used + 1 >= size) continue;
    int w = snprintf(buf + used, size - used, "%s%.*s", used ? ", " : "", (int)len, it);
    if (w > 0) used = (size_t)w < size - used ? used + (size_t)w : size - 1;
  }
}

const char *cli_numerics(const kiln_runtime *rt, const char *backend, kiln_plan *plan, char *buf,
                         size_t size) {
  static const char *const modes[] = {"activations", "matvec", "recurrent_guard", "gemm", "precision"};
  enum { N_MODES = sizeof modes / sizeof modes[0] };
  buf[0] = '\0';
  kiln_plugin *p = NULL;
  kiln_status st = kiln_plugin_registry_get(kiln_runtime_plugins((kiln_runtime *)rt), backend, &p);
  if (st) {
    kiln_status_free(st);
    return buf;
  }
  /* The plan's matvecs, and those a recurrent state reads (kiln/graph.h). */
  uint32_t n_mm = 0, n_feed = 0;
  char line[CLI_MODES_MAX] = "";
  if (plan) {
    const kiln_graph *g = kiln_plan_graph(plan);
    for (uint32_t i = 0; i < kiln_graph_n_nodes(g); i++) {
      const kiln_node *nd = kiln_graph_node(g, i);
      if (nd->op != KILN_OP_MUL_MAT) continue;
      n_mm++;
      n_feed += nd->p.mul_mat.feeds_recurrent;
    }
    cli_plan_modes(plan, backend, line, sizeof line);
  }
  const kiln_backend_ops *e = kiln_plugin_entry(p);
  const kiln_config_section *sec = kiln_config_section_get(kiln_runtime_config(rt), backend);
  const char *placed[N_MODES] = {0};
  size_t used = 0;
  for (size_t m = 0; m < N_MODES; m++)
    for (uint32_t k = 0; k < e->n_config_keys; k++) {
      const kiln_config_key *key = &e->config_keys[k];
      if (strcmp(key->name, modes[m]) != 0) continue;
      const bool guard = strcmp(key->name, "recurrent_guard") == 0;
      if (guard && plan && n_feed == 0) continue; /* no recurrent state: it changes nothing */
      const char *v = sec ? kiln_config_get_str(sec, key->name) : key->default_value;
      char extra[64] = "";
      if (guard && plan)
        snprintf(extra, sizeof extra, " (%u of %u matvecs feed a recurrent state)", n_feed, n_mm);
      /* what ran, where the plugin says it (describe_modes), in place of
       * what was asked */
      size_t il = 0;
      const char *item = cli_modes_item(line, key->name, &il);
      int w = item ? snprintf(buf + used, size - used, "%s%.*s", used ? ", " : "", (int)il, item)
                   : snprintf(buf + used, size - used, "%s%s %s%s", used ? ", " : "", key->name,
                              v ? v : "?", extra);
      if (w > 0 && (size_t)w < size - used) used += (size_t)w;
      placed[m] = modes[m];
    }
  cli_modes_append_rest(buf, size, line, placed, N_MODES);
  return buf;
}

int cli_fail(const char *cmd, kiln_status st) {
  /* Messages quote file content (a value, a name): no control byte of it
   * reaches the terminal. */
  const char *msg = kiln_status_message(st);
  fprintf(stderr, "kiln %s: error: ", cmd);
  kiln_fput_escaped(stderr, msg, strlen(msg), KILN_ESCAPE_KEEP_NEWLINE | KILN_ESCAPE_KEEP_BACKSLASH);
  fputc('\n', stderr);
  kiln_status_free(st);
  return CLI_EXIT_FAIL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "kiln %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return CLI_EXIT_USAGE;
}

void cli_rewrite_aliases(int argc, char **argv, const cli_alias *aliases) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--")) return;
    for (const cli_alias *a = aliases; a->from; a++)
      if (!strcmp(argv[i], a->from)) argv[i] = (char *)a->to;
  }
}
