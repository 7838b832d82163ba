/* kiln parity: a backend against a reference, per op and per position. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "kiln/chat.h"
#include "kiln/parity.h"

/* Whether a report path names the model being read (a link or another
 * name for it included): writing the report there would destroy it. */
static bool same_file(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* A report's folder must take a new file, checked before the run (which
 * can take minutes) rather than after it. */
static kiln_status report_folder_ok(const char *flag, const char *path) {
  char dir[4096];
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == path) snprintf(dir, sizeof dir, "/");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  struct stat st;
  if (stat(dir, &st) != 0)
    return kiln_status_new(KILN_STATUS_IO, "%s %s: folder %s: %s", flag, path, dir, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return kiln_status_new(KILN_STATUS_IO, "%s %s: %s is not a folder", flag, path, dir);
  if (access(dir, W_OK | X_OK) != 0)
    return kiln_status_new(KILN_STATUS_IO, "%s %s: folder %s: %s", flag, path, dir, strerror(errno));
  return NULL;
}

static void usage(FILE *out) {
  fputs("usage: kiln parity -m MODEL -p PROMPT --ref BACKEND[:f64] --test BACKEND[:f64] [options]\n"
        "\n"
        "Runs the prompt through both backends and compares, per token position, the\n"
        "logits (or with --per-op every node's output): cosine, norm ratio |test|/|ref|,\n"
        "relative L2 error, max abs error. A row passes only when the output is finite\n"
        "and all three checks hold (cosine alone is blind to scale). Exit status 1 on a\n"
        "failure, naming the first failing op and position.\n"
        "\n"
        "  --ref B[:f64]         reference backend; :f64 sets [cpu] precision = f64 for it\n"
        "  --test B[:f64]        backend under test\n"
        "  -p, --prompt TEXT     the prompt (escapes processed unless --no-escape)\n"
        "  -f, --file FILE       read the prompt from FILE; -f - reads standard input\n"
        "      --no-special      special-token texts in a raw prompt stay text\n"
        "      --chat            the prompt through the model's chat template, as kiln run --chat:\n"
        "                        rendered around it, or taken as is when it already starts with\n"
        "                        the template's markers (which are then special tokens)\n"
        "      --per-op          compare every node, not just the logits\n"
        "      --all             print every position, not just each node's worst\n"
        "      --csv FILE        every (node, position) row as CSV\n"
        "      --plot FILE.svg   the norm ratio by position per node (gnuplot)\n"
        "      --max-rel-l2 X    (default 1e-3)\n"
        "      --max-norm-dev X  |norm ratio - 1| limit (default 1e-3)\n"
        "      --min-cos X       (default 0.9999)\n"
        "      --test-eps X      plan the test side's RMSNorm with this ε instead of the model's:\n"
        "                        shows the check sees a wrong ε (the seed defect)\n"
        "      --test-kv TYPE    the test side's KV cache type (f32, f16, bf16, q8_0; [kv_cache] type);\n"
        "                        the reference keeps the configured one: what a cache type costs\n"
        "      --json            the report as one JSON object (every row) on stdout\n"
        CLI_MODEL_HELP,
        out);
}

/* "cuda-batched:f64" -> backend "cuda-batched" + override [cpu] precision. */
static bool parse_side(const char *arg, char *name, size_t cap, kiln_parity_side *side, kiln_config_override *ov) {
  const char *colon = strchr(arg, ':');
  size_t len = colon ? (size_t)(colon - arg) : strlen(arg);
  if (len == 0 || len >= cap) return false;
  memcpy(name, arg, len);
  name[len] = 0;
  side->backend = name;
  if (colon) {
    if (strcmp(colon + 1, "f64") != 0 && strcmp(colon + 1, "f32") != 0) return false;
    if (strcmp(name, "cpu") != 0) return false; /* precision is the cpu backend's setting */
    *ov = (kiln_config_override){"cpu", "precision", colon + 1, "--ref/--test"};
    side->overrides = ov;
    side->n_overrides = 1;
  }
  return true;
}

/* A number in (0, hi]; whole numbers only when `whole`. */
static bool num(const char *flag, const char *a, double hi, bool whole, double *out) {
  char *end;
  errno = 0;
  *out = strtod(a, &end);
  if (errno || end == a || *end || !(*out > 0) || *out > hi || (whole && *out != (double)(long)*out)) {
    fprintf(stderr, "kiln parity: %s %s: expected a %s in (0, %g]\n", flag, a, whole ? "whole number" : "number", hi);
    return false;
  }
  return true;
}

/* JSON has no NaN or infinity: a non-finite statistic is null. */
static json_t *finite_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *row_json(const kiln_parity_row *w) {
  return json_pack("{s:s, s:s, s:i, s:i, s:o, s:o, s:o, s:o, s:b, s:b}", "node", w->name, "op", w->op, "pos",
                   w->pos, "token", w->token, "cosine", finite_or_null(w->cos), "norm_ratio",
                   finite_or_null(w->norm_ratio), "rel_l2", finite_or_null(w->rel_l2), "max_abs",
                   finite_or_null(w->max_abs), "finite", w->finite, "pass", w->pass);
}

static json_t *parity_json(const kiln_parity_report *r) {
  json_t *rows = json_array();
  for (size_t i = 0; rows && i < r->n_rows; i++) json_array_append_new(rows, row_json(&r->rows[i]));
  json_t *first = r->first_fail >= 0 ? json_incref(json_array_get(rows, (size_t)r->first_fail)) : json_null();
  return json_pack("{s:s, s:s, s:b, s:I, s:I, s:o, s:{s:f, s:f, s:f}, s:o}", "ref", r->ref_name, "test",
                   r->test_name, "pass", r->n_fail == 0, "n_rows", (json_int_t)r->n_rows, "n_fail",
                   (json_int_t)r->n_fail, "first_fail", first, "thresholds", "max_rel_l2", r->opt.max_rel_l2,
                   "max_norm_dev", r->opt.max_norm_dev, "min_cos", r->opt.min_cos, "rows", rows);
}

int cmd_parity(int argc, char **argv) {
  enum { O_REF = CLI_OPT_FIRST_FREE, O_TEST, O_PER_OP, O_ALL, O_CSV, O_PLOT, O_REL, O_NORM, O_COS, O_EPS, O_CHAT,
         O_JSON, O_NO_ESCAPE, O_NO_SPECIAL, O_KV };
  static const struct option longopts[] = {
      CLI_MODEL_LONGOPTS,
      {"prompt", required_argument, 0, 'p'},  {"file", required_argument, 0, 'f'},
      {"no-escape", no_argument, 0, O_NO_ESCAPE}, {"no-special", no_argument, 0, O_NO_SPECIAL},
      {"json", no_argument, 0, O_JSON},
      {"ref", required_argument, 0, O_REF},   {"test", required_argument, 0, O_TEST},
      {"per-op", no_argument, 0, O_PER_OP},   {"all", no_argument, 0, O_ALL},
      {"csv", required_argument, 0, O_CSV},   {"plot", required_argument, 0, O_PLOT},
      {"max-rel-l2", required_argument, 0, O_REL}, {"max-norm-dev", required_argument, 0, O_NORM},
      {"min-cos", required_argument, 0, O_COS}, {"test-eps", required_argument, 0, O_EPS},
      {"test-kv", required_argument, 0, O_KV},
      {"chat", no_argument, 0, O_CHAT},
      {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
  cli_common cc = {.cmd = "parity"};
  kiln_parity_options o = {0};
  /* each side: [cpu] precision from B:f64; the test side also --test-kv */
  kiln_config_override ref_ov[1], test_ov[2];
  char ref_name[64], test_name[64];
  const char *prompt = NULL, *prompt_file = NULL, *csv = NULL, *plot = NULL, *test_kv = NULL;
  bool all = false, chat = false, have_ref = false, have_test = false, ok = true, json = false, escape = true,
       special = true;
  double v;
  int opt;
  optind = 1;
  while (ok && (opt = getopt_long(argc, argv, CLI_MODEL_SHORTOPTS "p:f:h", longopts, NULL)) != -1) {
    int common = cli_model_flag(&cc, opt, optarg);
    if (common) {
      ok = common > 0;
      continue;
    }
    switch (opt) {
    case 'p': prompt = optarg; break;
    case 'f': prompt_file = optarg; break;
    case O_JSON: json = true; break;
    case O_NO_ESCAPE: escape = false; break;
    case O_NO_SPECIAL: special = false; break;
    case O_REF:
    case O_TEST:
      ok = parse_side(optarg, opt == O_REF ? ref_name : test_name, sizeof ref_name, opt == O_REF ? &o.ref : &o.test,
                      opt == O_REF ? ref_ov : test_ov);
      if (!ok) fprintf(stderr, "kiln parity: %s %s: a backend is NAME, or cpu:f64 / cpu:f32\n",
                       opt == O_REF ? "--ref" : "--test", optarg);
      if (opt == O_REF) have_ref = ok;
      else have_test = ok;
      break;
    case O_PER_OP: o.per_op = true; break;
    case O_ALL: all = true; break;
    case O_CSV: csv = optarg; break;
    case O_PLOT: plot = optarg; break;
    case O_REL: ok = num("--max-rel-l2", optarg, 1e300, false, &o.max_rel_l2); break;
    case O_NORM: ok = num("--max-norm-dev", optarg, 1e300, false, &o.max_norm_dev); break;
    case O_COS: ok = num("--min-cos", optarg, 1.0, false, &o.min_cos); break;
    case O_EPS: ok = num("--test-eps", optarg, 1.0, false, &v); o.test.eps_override = (float)v; break;
    case O_KV:
      test_kv = optarg;
      ok = cli_flag_value_ok("parity", "kv_cache", "type", optarg, "--test-kv");
      break;
    case O_CHAT: chat = true; break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (!ok) return CLI_EXIT_USAGE;
  if (optind != argc) return cli_usage_error("parity", "unexpected argument \"%s\"", argv[optind]);
  if (!have_ref || !have_test) {
    usage(stderr);
    return cli_usage_error("parity", "--ref and --test are required");
  }
  if (test_kv) {
    test_ov[o.test.n_overrides] = (kiln_config_override){"kv_cache", "type", test_kv, "--test-kv"};
    o.test.overrides = test_ov;
    o.test.n_overrides++;
  }
  kiln_runtime *rt = NULL;
  kiln_model *m = NULL;
  kiln_parity_report *r = NULL;
  char *text = NULL;
  int32_t *ids = NULL;
  size_t n_ids = 0, len = 0;
  kiln_status st = NULL;
  if (!cli_prompt("parity", prompt, prompt_file, escape, &text, &len, &st)) return CLI_EXIT_USAGE;
  const char *model_path = NULL;
  if (!st) st = cli_runtime_open(&cc, &rt);
  if (!st) st = cli_backend_check(&cc, rt, "--ref", o.ref.backend);
  if (!st) st = cli_backend_check(&cc, rt, "--test", o.test.backend);
  if (!st) st = cli_model_path(&cc, rt, &model_path);
  if (!st && csv && same_file(csv, model_path))
    st = kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "--csv %s is the model file %s", csv, model_path);
  if (!st && plot && same_file(plot, model_path))
    st = kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "--plot %s is the model file %s", plot, model_path);
  if (!st && csv) st = report_folder_ok("--csv", csv);
  if (!st && plot) st = report_folder_ok("--plot", plot);
  if (!st) st = cli_model_open(rt, model_path, &m);
  if (!st && !kiln_model_vocab(m)) st = kiln_status_new(KILN_STATUS_UNSUPPORTED, "%s has no vocabulary", model_path);
  const kiln_vocab *voc = m ? kiln_model_vocab(m) : NULL;
  if (!st)
    st = kiln_prompt_tokenize(voc, kiln_model_chat_template(m), text, len, chat, special, NULL, &ids, &n_ids, NULL);
  if (!st && n_ids == 0) st = kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "the prompt is empty");
  if (!st) st = kiln_parity_run(rt, m, ids, n_ids, &o, &r);
  if (!st && json && !cli_json_print(parity_json(r))) st = kiln_status_new(KILN_STATUS_IO, "writing the report");
  if (!st && !json) kiln_parity_print(r, voc, all, stdout);
  if (!st && csv) st = kiln_parity_write_csv(r, csv);
  if (!st && plot) st = kiln_parity_plot_svg(r, plot);
  int rc;
  if (st) rc = cli_exit(&cc, st);
  else rc = r->n_fail ? 1 : 0;
  if (!st && r->n_fail) {
    const kiln_parity_row *f = &r->rows[r->first_fail];
    fprintf(stderr, "kiln parity: %s differs from %s first at %s, position %d (norm ratio %.4f, rel L2 %.3e)\n",
            r->test_name, r->ref_name, f->name, f->pos, f->norm_ratio, f->rel_l2);
  }
  kiln_parity_report_free(r);
  free(ids);
  free(text);
  kiln_model_free(m);
  kiln_runtime_free(rt);
  return rc;
}
