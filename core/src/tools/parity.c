/* Per-op, per-position comparison of two backends (kiln/parity.h). */
#include "config.h"

#include "kiln/parity.h"
#include "kiln/escape.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Every compared node's output, [width, n_tokens] per node. */
typedef struct capture {
  uint32_t n_nodes;
  int32_t n_tokens;
  int64_t *width;
  float **out;
} capture;

static kiln_status on_node(const kiln_node *node, const float *data, int32_t n_tokens, int32_t pos0, void *user) {
  capture *c = user;
  uint32_t i = (uint32_t)node->id;
  if (i >= c->n_nodes) return kiln_status_new(KILN_STATUS_INTERNAL, "parity: node %u out of range", i);
  if (!c->out[i]) {
    c->width[i] = node->dst->ne[0];
    c->out[i] = calloc((size_t)c->width[i] * (size_t)c->n_tokens, sizeof(float));
    if (!c->out[i]) return kiln_status_new(KILN_STATUS_NO_MEMORY, "parity: outputs of %s", node->name);
  }
  if (pos0 + n_tokens > c->n_tokens) return kiln_status_new(KILN_STATUS_INTERNAL, "parity: position out of range");
  memcpy(c->out[i] + (size_t)pos0 * (size_t)c->width[i], data,
         (size_t)n_tokens * (size_t)c->width[i] * sizeof(float));
  return NULL;
}

static void capture_free(capture *c) {
  for (uint32_t i = 0; i < c->n_nodes; i++) free(c->out[i]);
  free(c->out);
  free(c->width);
}

/* Runs one side over ids and fills cap (per_op: every node; else the
 * logits node alone), the side's name and the modes in effect on its
 * backend (kiln_plan_describe_modes). */
static kiln_status run_side(kiln_runtime *rt, const kiln_model *m, const int32_t *ids, size_t n,
                            const kiln_parity_side *side, const kiln_parity_options *o, capture *cap,
                            char names_out[][KILN_NAME_MAX], const char **ops_out, char *backend_name,
                            size_t name_cap, char *modes, size_t modes_cap) {
  kiln_session *s;
  kiln_session_options so = {side->backend, 0, o->batch, -1, side->eps_override, side->overrides, side->n_overrides};
  KILN_RETURN_IF_ERROR(kiln_session_open(rt, m, &so, &s));
  kiln_plan *p = kiln_session_plan(s);
  const kiln_graph *g = kiln_plan_graph(p);
  kiln_status st = NULL;
  if (kiln_session_n_ctx(s) < (int32_t)n)
    st = kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "parity: %zu tokens exceed the KV cache of %d", n,
                         kiln_session_n_ctx(s));
  if (!st && cap->n_nodes == 0) {
    cap->n_nodes = kiln_graph_n_nodes(g);
    cap->n_tokens = (int32_t)n;
    cap->width = calloc(cap->n_nodes, sizeof *cap->width);
    cap->out = calloc(cap->n_nodes, sizeof *cap->out);
    if (!cap->width || !cap->out) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "parity capture");
  } else if (!st && cap->n_nodes != kiln_graph_n_nodes(g)) {
    st = kiln_status_new(KILN_STATUS_INTERNAL, "parity: the two graphs have %u and %u nodes", cap->n_nodes,
                         kiln_graph_n_nodes(g));
  }
  for (uint32_t i = 0; !st && names_out && i < cap->n_nodes; i++) {
    snprintf(names_out[i], KILN_NAME_MAX, "%s", kiln_graph_node(g, i)->name);
    ops_out[i] = kiln_op_name(kiln_graph_node(g, i)->op); /* static strings */
  }
  /* "cpu[precision=f64]", "cpu[eps=1e-05]": the side as configured */
  int w = snprintf(backend_name, name_cap, "%s", kiln_plan_backend_name(p));
  /* a setting of another section than the side's backend's is named with
   * it: "cpu[precision=f64]", "cpu[kv_cache.type=f16]" */
  for (size_t i = 0; i < side->n_overrides && w > 0 && (size_t)w < name_cap; i++) {
    const kiln_config_override *ov = &side->overrides[i];
    const bool own = strcmp(ov->section, side->backend) == 0;
    w += snprintf(backend_name + w, name_cap - (size_t)w, "%s%s%s%s=%s", i ? "," : "[", own ? "" : ov->section,
                  own ? "" : ".", ov->key, ov->value);
  }
  if (side->eps_override > 0.0f && w > 0 && (size_t)w < name_cap)
    w += snprintf(backend_name + w, name_cap - (size_t)w, "%seps=%g", side->n_overrides ? "," : "[",
                  (double)side->eps_override);
  if ((side->n_overrides || side->eps_override > 0.0f) && w > 0 && (size_t)w < name_cap)
    snprintf(backend_name + w, name_cap - (size_t)w, "]");
  if (!st && o->per_op) {
    kiln_plan_set_observer(p, on_node, cap);
    /* Asking for every token's logits runs the output head on every
     * position, so its nodes have a row per position like the rest. */
    float *all = malloc((size_t)kiln_graph_logits(g)->ne[0] * n * sizeof(float));
    st = all ? kiln_session_eval(s, ids, (int32_t)n, NULL, all)
             : kiln_status_new(KILN_STATUS_NO_MEMORY, "parity logits");
    free(all);
  } else if (!st) {
    const kiln_tensor *logits = kiln_graph_logits(g);
    uint32_t li = kiln_graph_n_nodes(g) - 1; /* the logits are the last node's output */
    cap->width[li] = logits->ne[0];
    cap->out[li] = malloc((size_t)logits->ne[0] * n * sizeof(float));
    if (!cap->out[li]) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "parity logits");
    if (!st) st = kiln_session_eval(s, ids, (int32_t)n, NULL, cap->out[li]);
  }
  if (!st) st = kiln_plan_describe_modes(p, NULL, modes, modes_cap);
  kiln_session_free(s);
  return st;
}

static void compare_column(const float *r, const float *t, int64_t w, kiln_parity_row *row) {
  double rr = 0, tt = 0, rt = 0, dd = 0, mx = 0;
  bool finite = true;
  for (int64_t i = 0; i < w; i++) {
    double a = r[i], b = t[i];
    if (!isfinite(b)) finite = false;
    rr += a * a;
    tt += b * b;
    rt += a * b;
    double d = b - a;
    dd += d * d;
    if (fabs(d) > mx) mx = fabs(d);
  }
  row->finite = finite;
  row->max_abs = mx;
  if (rr == 0.0) {
    row->cos = tt == 0.0 ? 1.0 : 0.0;
    row->norm_ratio = tt == 0.0 ? 1.0 : INFINITY;
    row->rel_l2 = tt == 0.0 ? 0.0 : INFINITY;
  } else {
    row->cos = tt == 0.0 ? 0.0 : rt / sqrt(rr * tt);
    row->norm_ratio = sqrt(tt / rr);
    row->rel_l2 = sqrt(dd / rr);
  }
}

kiln_status kiln_parity_run(kiln_runtime *rt, const kiln_model *m, const int32_t *ids, size_t n,
                            const kiln_parity_options *opt, kiln_parity_report **out_report) {
  *out_report = NULL;
  if (n == 0) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "parity: no tokens");
  kiln_parity_report *r = calloc(1, sizeof *r);
  if (!r) return kiln_status_new(KILN_STATUS_NO_MEMORY, "parity report");
  r->opt = *opt;
  if (r->opt.max_rel_l2 <= 0) r->opt.max_rel_l2 = 1e-3;
  if (r->opt.max_norm_dev <= 0) r->opt.max_norm_dev = 1e-3;
  if (r->opt.min_cos <= 0) r->opt.min_cos = 0.9999;
  r->first_fail = -1;
  capture ref = {0}, test = {0};
  char(*names)[KILN_NAME_MAX] = NULL;
  const char **ops = NULL;
  kiln_status st = run_side(rt, m, ids, n, &opt->ref, opt, &ref, NULL, NULL, r->ref_name, sizeof r->ref_name,
                            r->ref_modes, sizeof r->ref_modes);
  if (!st) {
    names = calloc(ref.n_nodes, sizeof *names);
    ops = calloc(ref.n_nodes, sizeof *ops);
    if (!names || !ops) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "parity names");
  }
  if (!st)
    st = run_side(rt, m, ids, n, &opt->test, opt, &test, names, ops, r->test_name, sizeof r->test_name,
                  r->test_modes, sizeof r->test_modes);
  if (!st) {
    r->n_nodes = ref.n_nodes;
    r->node_names = calloc(ref.n_nodes, sizeof *r->node_names);
    r->rows = calloc((size_t)ref.n_nodes * n, sizeof *r->rows);
    if (!r->node_names || !r->rows) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "parity rows");
  }
  for (uint32_t i = 0; !st && i < ref.n_nodes; i++) {
    r->node_names[i] = strdup(names[i]);
    if (!r->node_names[i]) {
      st = kiln_status_new(KILN_STATUS_NO_MEMORY, "parity names");
      break;
    }
    if (!ref.out[i] && !test.out[i]) continue;
    if (!ref.out[i] || !test.out[i] || ref.width[i] != test.width[i]) {
      st = kiln_status_new(KILN_STATUS_INTERNAL, "parity: node %s was observed on one side only", names[i]);
      break;
    }
    for (size_t p = 0; p < n; p++) {
      kiln_parity_row *row = &r->rows[r->n_rows++];
      row->node = i;
      row->name = r->node_names[i];
      row->op = ops[i];
      row->pos = (int32_t)p;
      row->token = ids[p];
      compare_column(ref.out[i] + p * (size_t)ref.width[i], test.out[i] + p * (size_t)ref.width[i], ref.width[i],
                     row);
      row->pass = row->finite && fabs(row->norm_ratio - 1.0) <= r->opt.max_norm_dev &&
                  row->rel_l2 <= r->opt.max_rel_l2 && row->cos >= r->opt.min_cos;
      if (!row->pass) {
        r->n_fail++;
        if (r->first_fail < 0) r->first_fail = (long)(r->n_rows - 1);
      }
    }
  }
  free(names);
  free(ops);
  capture_free(&ref);
  capture_free(&test);
  if (st) {
    kiln_parity_report_free(r);
    return st;
  }
  *out_report = r;
  return NULL;
}

void kiln_parity_report_free(kiln_parity_report *r) {
  if (!r) return;
  for (uint32_t i = 0; i < r->n_nodes && r->node_names; i++) free(r->node_names[i]);
  free(r->node_names);
  free(r->rows);
  free(r);
}

/* The token's text from the vocabulary, escaped for the terminal
 * (kiln/escape.h), for the table. */
static const char *token_label(const kiln_vocab *v, int32_t id, char *buf, size_t cap) {
  char piece[64];
  size_t len = 0;
  if (!v || kiln_token_to_piece(v, id, true, piece, sizeof piece, &len)) len = 0;
  kiln_escape(buf, cap, piece, len, 0);
  return buf;
}

static void print_row(const kiln_parity_row *w, const kiln_vocab *v, FILE *out) {
  char tok[48];
  fprintf(out, "%-22s %5d %-14.14s %10.6f %12.8f %10.3e %10.3e  %s\n", w->name, w->pos,
          token_label(v, w->token, tok, sizeof tok), w->cos, w->norm_ratio, w->rel_l2, w->max_abs,
          !w->finite ? "FAIL (non-finite)" : w->pass ? "ok" : "FAIL");
}

void kiln_parity_print(const kiln_parity_report *r, const kiln_vocab *v, bool all_positions, FILE *out) {
  fprintf(out, "parity: test %s against reference %s; pass = finite, |norm ratio - 1| <= %g, rel L2 <= %g, "
               "cosine >= %g\n",
          r->test_name, r->ref_name, r->opt.max_norm_dev, r->opt.max_rel_l2, r->opt.min_cos);
  /* what ran where it differs from the configuration (describe_modes) */
  if (r->test_modes[0]) fprintf(out, "parity: test %s ran %s\n", r->test_name, r->test_modes);
  if (r->ref_modes[0]) fprintf(out, "parity: reference %s ran %s\n", r->ref_name, r->ref_modes);
  fprintf(out, "%-22s %5s %-14s %10s %12s %10s %10s  %s\n", "node", "pos", "token", "cosine", "norm ratio",
          "rel L2", "max abs", all_positions ? "" : "(worst position)");
  for (size_t i = 0; i < r->n_rows;) {
    size_t j = i, worst = i;
    while (j < r->n_rows && r->rows[j].node == r->rows[i].node) {
      const kiln_parity_row *a = &r->rows[j], *b = &r->rows[worst];
      if ((!a->pass && b->pass) || (a->pass == b->pass && a->rel_l2 > b->rel_l2)) worst = j;
      if (all_positions) print_row(a, v, out);
      j++;
    }
    if (!all_positions) print_row(&r->rows[worst], v, out);
    i = j;
  }
  if (r->first_fail >= 0) {
    const kiln_parity_row *f = &r->rows[r->first_fail];
    char tok[48];
    fprintf(out, "FAIL: %zu of %zu rows; first: %s at position %d (token %d \"%s\"): norm ratio %.6f, rel L2 %.3e, "
                 "cosine %.6f\n",
            r->n_fail, r->n_rows, f->name, f->pos, f->token, token_label(v, f->token, tok, sizeof tok),
            f->norm_ratio, f->rel_l2, f->cos);
  } else {
    size_t n_pos = 0;
    while (n_pos < r->n_rows && r->rows[n_pos].node == r->rows[0].node) n_pos++;
    fprintf(out, "PASS: %zu rows (%zu node%s x %zu positions)\n", r->n_rows, n_pos ? r->n_rows / n_pos : 0,
            n_pos && r->n_rows / n_pos == 1 ? "" : "s", n_pos);
  }
}

/* A report goes to a temporary file beside path, renamed over it only when
 * complete, so a failed write leaves what was there. What was there must be
 * a regular file the user may write (as gguf_write.c's check_target):
 * never a link, a device or a read-only file such as a model kept safe. */
static kiln_status report_target(const char *path, char *tmp, size_t n_tmp, int *out_fd) {
  struct stat sb;
  if (lstat(path, &sb) == 0) {
    if (!S_ISREG(sb.st_mode))
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "%s: is not a regular file; kiln writes a report only to one", path);
    if (access(path, W_OK) != 0 || !(sb.st_mode & 0222))
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "%s: is a read-only file (mode %04o); kiln does not replace it", path,
                             (unsigned)(sb.st_mode & 07777));
  } else if (errno != ENOENT) {
    return kiln_status_new(KILN_STATUS_IO, "%s: %s", path, strerror(errno));
  }
  if ((size_t)snprintf(tmp, n_tmp, "%s.tmp-XXXXXX", path) >= n_tmp)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: path too long", path);
  *out_fd = mkstemp(tmp);
  if (*out_fd < 0) return kiln_status_new(KILN_STATUS_IO, "%s: %s", path, strerror(errno));
  const mode_t mask = umask(0); /* mkstemp's 0600 -> what fopen would have made */
  umask(mask);
  if (fchmod(*out_fd, 0666 & ~mask) != 0) { /* not fatal: the report is still the user's */ }
  return NULL;
}

static kiln_status report_commit(const char *tmp, const char *path) {
  if (rename(tmp, path) == 0) return NULL;
  kiln_status st = kiln_status_new(KILN_STATUS_IO, "%s: %s", path, strerror(errno));
  unlink(tmp);
  return st;
}

kiln_status kiln_parity_write_csv(const kiln_parity_report *r, const char *path) {
  char tmp[4096];
  int fd = -1;
  KILN_RETURN_IF_ERROR(report_target(path, tmp, sizeof tmp, &fd));
  FILE *f = fdopen(fd, "w");
  if (!f) {
    close(fd);
    unlink(tmp);
    return kiln_status_new(KILN_STATUS_IO, "%s: %s", path, strerror(errno));
  }
  fprintf(f, "node,op,pos,token,cosine,norm_ratio,rel_l2,max_abs,finite,pass\n");
  for (size_t i = 0; i < r->n_rows; i++) {
    const kiln_parity_row *w = &r->rows[i];
    fprintf(f, "%s,%s,%d,%d,%.9g,%.9g,%.9g,%.9g,%d,%d\n", w->name, w->op, w->pos, w->token, w->cos, w->norm_ratio,
            w->rel_l2, w->max_abs, w->finite, w->pass);
  }
  if (fclose(f) != 0) {
    unlink(tmp);
    return kiln_status_new(KILN_STATUS_IO, "%s: write failed", path);
  }
  return report_commit(tmp, path);
}

/* Whether PROG (a path, or a name looked up in $PATH as the shell would)
 * names an executable file. */
static bool program_found(const char *prog) {
  if (strchr(prog, '/')) return access(prog, X_OK) == 0;
  const char *dirs = getenv("PATH");
  for (const char *d = dirs ? dirs : ""; d && *d;) {
    const char *end = strchr(d, ':');
    const size_t n = end ? (size_t)(end - d) : strlen(d);
    char full[4096];
    if (snprintf(full, sizeof full, "%.*s/%s", (int)n, d, prog) < (int)sizeof full && access(full, X_OK) == 0)
      return true;
    d = end ? end + 1 : NULL;
  }
  return false;
}

kiln_status kiln_parity_plot_svg(const kiln_parity_report *r, const char *path) {
  /* Asked first: a shell that finds no gnuplot exits before reading the
   * script, and writing it would then raise SIGPIPE. */
  if (!program_found(KILN_GNUPLOT))
    return kiln_status_new(KILN_STATUS_UNAVAILABLE,
                           "parity plot: %s is not installed (Debian: gnuplot-nox); %s not written", KILN_GNUPLOT,
                           path);
  char data[] = "/tmp/kiln-parity-XXXXXX";
  int fd = mkstemp(data);
  if (fd < 0) return kiln_status_new(KILN_STATUS_IO, "parity plot: temp file: %s", strerror(errno));
  FILE *f = fdopen(fd, "w");
  if (!f) {
    kiln_status st = kiln_status_new(KILN_STATUS_IO, "parity plot: %s: %s", data, strerror(errno));
    close(fd);
    unlink(data);
    return st;
  }
  /* one gnuplot data block per node: "pos ratio" lines, blocks separated by
   * two blank lines (gnuplot's `index`) */
  size_t n_blocks = 0;
  for (size_t i = 0; i < r->n_rows; i++) {
    if (i > 0 && r->rows[i].node != r->rows[i - 1].node) fputs("\n\n", f);
    if (i == 0 || r->rows[i].node != r->rows[i - 1].node) n_blocks++;
    fprintf(f, "%d %.9g\n", r->rows[i].pos, isfinite(r->rows[i].norm_ratio) ? r->rows[i].norm_ratio : 0.0);
  }
  if (fclose(f) != 0) { /* a full /tmp: gnuplot would plot a truncated file */
    unlink(data);
    return kiln_status_new(KILN_STATUS_IO, "parity plot: %s: write failed", data);
  }
  char svg[4096];
  int svg_fd = -1;
  kiln_status st = report_target(path, svg, sizeof svg, &svg_fd);
  if (st || strchr(svg, '\'') || strchr(svg, '\n')) {
    if (!st) {
      close(svg_fd);
      unlink(svg);
    }
    unlink(data);
    return st ? st : kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                                     "%s: a plot path must not hold a quote or a newline", path);
  }
  close(svg_fd);
  /* gnuplot's messages (and, where its output cannot open, the SVG itself)
   * go to stderr: kiln's stdout carries only kiln's report. A gnuplot that
   * exits early (a crash, a bad terminal) must not take kiln with it:
   * SIGPIPE is ignored while the script is written, then restored. */
  struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGPIPE, &ign, &old_pipe);
  FILE *gp = popen(KILN_GNUPLOT " 1>&2", "w");
  if (!gp) {
    sigaction(SIGPIPE, &old_pipe, NULL);
    unlink(data);
    unlink(svg);
    return kiln_status_new(KILN_STATUS_UNAVAILABLE, "parity plot: cannot run %s", KILN_GNUPLOT);
  }
  fprintf(gp, "set terminal svg size 1200,700 dynamic noenhanced\nset output '%s'\n", svg);
  fprintf(gp, "set title 'norm ratio |test|/|ref| by position: %s vs %s'\n", r->test_name, r->ref_name);
  fprintf(gp, "set xlabel 'token position'\nset ylabel 'norm ratio'\nset key outside right font ',8'\n");
  fprintf(gp, "set grid\n");
  fprintf(gp, "plot ");
  size_t b = 0;
  for (size_t i = 0; i < r->n_rows; i++) {
    if (i > 0 && r->rows[i].node == r->rows[i - 1].node) continue;
    /* name the nodes that fail somewhere; keep the key short otherwise */
    bool fails = false;
    for (size_t j = i; j < r->n_rows && r->rows[j].node == r->rows[i].node; j++) fails |= !r->rows[j].pass;
    fprintf(gp, "%s'%s' index %zu using 1:2 with linespoints pt 7 ps 0.4 %s%s%s", b ? ", " : "", data, b,
            fails || n_blocks <= 12 ? "title '" : "notitle", fails || n_blocks <= 12 ? r->rows[i].name : "",
            fails || n_blocks <= 12 ? "'" : "");
    b++;
  }
  fprintf(gp, "\n");
  int rc = pclose(gp);
  sigaction(SIGPIPE, &old_pipe, NULL);
  unlink(data);
  struct stat sb;
  if (rc != 0 || stat(svg, &sb) != 0 || sb.st_size == 0) {
    unlink(svg);
    return kiln_status_new(KILN_STATUS_UNAVAILABLE, "parity plot: %s failed (exit status %d) writing %s",
                           KILN_GNUPLOT, WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, path);
  }
  return report_commit(svg, path);
}
