/* kiln bench: prompt processing and generation throughput of a backend on
 * a model, with llama-bench's flags, tests and output formats. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static void usage(FILE *out) {
  fputs("usage: kiln bench -m MODEL [-p N] [-n N] [-d N] [-r N] [-b N] [-t N] [-B BACKEND] [-o FORMAT]\n"
        "\n"
        "llama-bench's two tests, each after one warm-up run: ppN, the time to prefill N\n"
        "prompt tokens (-p, default 512) in micro-batches of -b, and tgN, the time to\n"
        "generate N tokens one decode step at a time (-n, default 128); both start after a\n"
        "prompt of -d tokens (default 0) that is not timed. Each runs -r times (default 5);\n"
        "the table gives tokens/s (mean +/- standard deviation), ms per token and the total\n"
        "ms of one run (means). The tokens are fixed ids spread over the vocabulary,\n"
        "(1 + 7919 i) mod n_vocab, so runs are comparable. Compare with a peer side by side\n"
        "(bench/, tools/device/peer/), never as a pass/fail test.\n"
        "\n"
        "  -p, --n-prompt N       prompt tokens of the pp test (0: no pp test)\n"
        "  -n, --n-gen N          tokens of the tg test (0: no tg test)\n"
        "  -d, --n-depth N        tokens in the KV cache before each test\n"
        "  -r, --repetitions N\n"
        "  -o, --output FORMAT    md (default), csv, json (one array), jsonl (one object a line)\n"
        "      --json             -o json\n"
        "  -m, --model FILE       GGUF model ([model] path)\n"
        "  -b, --batch-size N     prefill micro-batch ([backend] batch)\n"
        "  -t, --threads N        cpu backend threads ([cpu] threads; 0 = one per online CPU)\n"
        "  -B, --backend NAME     backend plugin ([backend] name)\n"
        "      --config FILE      configuration file (else $KILN_CONFIG)\n"
        "      --fallback MODE    error | cpu ([backend] fallback)\n"
        "  -h, --help             this text\n",
        out);
}

/* A whole number in [lo, hi] or a message and false. */
static bool int_arg(const char *flag, const char *a, long lo, long hi, int32_t *out) {
  char *end;
  errno = 0;
  long v = strtol(a, &end, 10);
  if (errno || end == a || *end || v < lo || v > hi) {
    fprintf(stderr, "kiln bench: %s %s: expected a whole number in [%ld, %ld]\n", flag, a, lo, hi);
    return false;
  }
  *out = (int32_t)v;
  return true;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The token at position i of every run: the same ids bench/kiln_vs_llamacpp.py
 * gives llama.cpp. */
static int32_t bench_id(int64_t i, int32_t n_vocab) { return (int32_t)((1 + i * 7919) % n_vocab); }

typedef struct bench_test {
  char name[48];     /* "pp512", "tg128 @ d1024" */
  int32_t n_prompt, n_gen; /* one of them is 0 */
  double *seconds;   /* [reps] */
} bench_test;

/* Puts the untimed depth in the KV cache: the first time by prefilling it,
 * then by rewinding to it, since every run's first `depth` ids are the same
 * (llama-bench, too, prefills a depth once and restores it for each run).
 * A model with recurrent state cannot rewind: it prefills every time.
 * *have_depth says whether the cache already holds it. */
static kiln_status put_depth(kiln_session *s, int32_t depth, const int32_t *ids, bool *have_depth) {
  if (*have_depth) {
    kiln_status st = kiln_session_rewind(s, depth);
    if (!st) return NULL;
    if (kiln_status_code_of(st) != KILN_STATUS_UNSUPPORTED) return st;
    kiln_status_free(st);
  }
  kiln_session_reset(s);
  if (!depth) return NULL;
  KILN_RETURN_IF_ERROR(kiln_session_eval(s, ids, depth, NULL, NULL));
  *have_depth = true;
  /* An eval without logits returns with its work still queued on a GPU:
   * unsynchronized, the depth's last micro-batch ran inside the timed
   * decode (on the H200's 7B, tg64 at d1024 read 174 tok/s for ~340). */
  return kiln_plan_sync(kiln_session_plan(s));
}

/* One run of a test: the untimed depth, then the timed tokens. Each timed
 * eval computes the logits of its last token into `logits` ([n_vocab]), as
 * every llama_decode of llama-bench does (a batch without a logits array
 * outputs its last token's); kiln computes the output head only for the
 * logits asked for. */
static kiln_status run_test(kiln_session *s, const bench_test *t, int32_t depth, int32_t n_vocab, int32_t *ids,
                            float *logits, bool *have_depth, double *out_seconds) {
  int32_t n = t->n_prompt ? t->n_prompt : t->n_gen;
  for (int32_t i = 0; i < depth + n; i++) ids[i] = bench_id(i, n_vocab);
  KILN_RETURN_IF_ERROR(put_depth(s, depth, ids, have_depth));
  double t0 = now();
  if (t->n_prompt) {
    KILN_RETURN_IF_ERROR(kiln_session_eval(s, ids + depth, t->n_prompt, logits, NULL));
  } else {
    for (int32_t i = 0; i < t->n_gen; i++)
      KILN_RETURN_IF_ERROR(kiln_session_eval(s, ids + depth + i, 1, logits, NULL));
  }
  *out_seconds = now() - t0;
  return NULL;
}

typedef struct bench_stats {
  double avg_ts, sd_ts, avg_s, sd_s;
} bench_stats;

static bench_stats stats_of(const bench_test *t, int32_t reps) {
  int32_t n = t->n_prompt ? t->n_prompt : t->n_gen;
  bench_stats b = {0, 0, 0, 0};
  for (int32_t r = 0; r < reps; r++) {
    b.avg_ts += n / t->seconds[r];
    b.avg_s += t->seconds[r];
  }
  b.avg_ts /= reps;
  b.avg_s /= reps;
  for (int32_t r = 0; r < reps && reps > 1; r++) {
    double d = n / t->seconds[r] - b.avg_ts, e = t->seconds[r] - b.avg_s;
    b.sd_ts += d * d / (reps - 1);
    b.sd_s += e * e / (reps - 1);
  }
  b.sd_ts = sqrt(b.sd_ts);
  b.sd_s = sqrt(b.sd_s);
  return b;
}

/* What the run's arithmetic is: the backend's own setting ([cpu]
 * precision; a CUDA backend's activations and gemm), or "-" when it has
 * none (guard_of adds recurrent_guard where it applies). `line` is what
 * the plan's backend says ran (describe_modes): its item for gemm stands
 * in for the configured value ("gemm q16mma: 198 batched GEMMs: 196
 * q16mma (Q4_K 196), 2 bf16x3 fallback (F16 2: no mmq decoder)", "gemm fp8
 * -> bf16x3 (compute capability 8.6 < 9.0): ..."), its other items
 * follow. */
static void precision_of(const kiln_config *cfg, const char *backend, const char *line, char *buf, size_t cap) {
  const kiln_config_section *s = kiln_config_section_get(cfg, backend);
  const char *p = kiln_config_has_key(s, "precision") ? kiln_config_get_str(s, "precision") : NULL;
  const char *a = kiln_config_has_key(s, "activations") ? kiln_config_get_str(s, "activations") : NULL;
  const char *g = kiln_config_has_key(s, "gemm") ? kiln_config_get_str(s, "gemm") : NULL;
  size_t gl = 0;
  const char *gi = g ? cli_modes_item(line, "gemm", &gl) : NULL;
  char gemm[256];
  if (gi) snprintf(gemm, sizeof gemm, "%.*s", (int)gl, gi);
  else snprintf(gemm, sizeof gemm, "gemm %s", g ? g : "");
  if (p) snprintf(buf, cap, "%s", p);
  else if (a || g)
    snprintf(buf, cap, "%s%s%s%s", a ? "activations " : "", a ? a : "", a && g ? ", " : "", g ? gemm : "");
  else buf[0] = '\0';
  /* the key the value above names is placed; any other item follows */
  const char *const placed[] = {p ? "precision" : NULL, g ? "gemm" : NULL};
  cli_modes_append_rest(buf, cap, line, placed, sizeof placed / sizeof placed[0]);
  if (!buf[0]) snprintf(buf, cap, "-");
}

/* Appends ", recurrent_guard f32" (or off) to buf when some matvec of g
 * feeds a recurrent state (kiln/graph.h) and the backend has the key with
 * quantized decode activations: then that policy, not activations alone,
 * says how the decode matvecs ran. */
static void guard_of(const kiln_config *cfg, const char *backend, const kiln_graph *g, char *buf, size_t cap) {
  const kiln_config_section *s = kiln_config_section_get(cfg, backend);
  if (!kiln_config_has_key(s, "recurrent_guard")) return;
  /* with exact activations everywhere the guard has nothing to do */
  if ((kiln_config_has_key(s, "matvec") && strcmp(kiln_config_get_str(s, "matvec"), "f32") == 0) ||
      (kiln_config_has_key(s, "activations") && strcmp(kiln_config_get_str(s, "activations"), "f32") == 0))
    return;
  bool feeds = false;
  for (uint32_t i = 0; i < kiln_graph_n_nodes(g) && !feeds; i++) {
    const kiln_node *nd = kiln_graph_node(g, i);
    feeds = nd->op == KILN_OP_MUL_MAT && nd->p.mul_mat.feeds_recurrent;
  }
  if (!feeds) return;
  const bool none = strcmp(buf, "-") == 0;
  const size_t used = none ? 0 : strlen(buf);
  snprintf(buf + used, cap - used, "%srecurrent_guard %s", none ? "" : ", ",
           kiln_config_get_str(s, "recurrent_guard"));
}

/* The cpu backend's threads (0 = one per online CPU), or -1 when another
 * backend runs the graph. */
static int32_t threads_of(const kiln_config *cfg, const char *backend) {
  if (strcmp(backend, "cpu") != 0) return -1;
  int64_t t = kiln_config_get_int(kiln_config_section_get(cfg, "cpu"), "threads");
  if (t > 0) return (int32_t)t;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int32_t)n : 1;
}

typedef struct bench_info {
  const char *model, *backend;
  const char *kv; /* [kv_cache] type: llama-bench's type_k and type_v */
  char precision[640];
  int32_t threads, batch, depth, reps;
} bench_info;

static json_t *test_json(const bench_info *in, const bench_test *t) {
  bench_stats b = stats_of(t, in->reps);
  int32_t n = t->n_prompt ? t->n_prompt : t->n_gen;
  json_t *ns = json_array(), *ts = json_array();
  for (int32_t r = 0; r < in->reps; r++) {
    json_array_append_new(ns, json_integer((json_int_t)llround(t->seconds[r] * 1e9)));
    json_array_append_new(ts, json_real(n / t->seconds[r]));
  }
  return json_pack("{s:s, s:s, s:o, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:o, s:o}",
                   "model_filename", in->model, "backend", in->backend,
                   "n_threads", in->threads >= 0 ? json_integer(in->threads) : json_null(), "precision",
                   in->precision, "type_k", in->kv, "type_v", in->kv, "n_batch", in->batch, "n_prompt", t->n_prompt, "n_gen", t->n_gen, "n_depth",
                   in->depth, "test", t->name, "avg_ns", (json_int_t)llround(b.avg_s * 1e9), "stddev_ns",
                   (json_int_t)llround(b.sd_s * 1e9), "avg_ts", b.avg_ts, "stddev_ts", b.sd_ts, "ms_per_token",
                   b.avg_s * 1e3 / n, "total_ms", b.avg_s * 1e3, "samples_ns", ns, "samples_ts", ts);
}

static bool print_results(const char *format, const bench_info *in, const bench_test *tests, int n_tests) {
  const char *model = strrchr(in->model, '/') ? strrchr(in->model, '/') + 1 : in->model;
  char threads[16];
  snprintf(threads, sizeof threads, in->threads >= 0 ? "%d" : "-", in->threads);
  if (!strcmp(format, "md")) {
    printf("| model | backend | threads | precision | n_batch | test | t/s | ms/token | total ms |\n"
           "| --- | --- | ---: | --- | ---: | --- | ---: | ---: | ---: |\n");
    for (int i = 0; i < n_tests; i++) {
      bench_stats b = stats_of(&tests[i], in->reps);
      int32_t n = tests[i].n_prompt ? tests[i].n_prompt : tests[i].n_gen;
      printf("| %s | %s | %s | %s | %d | %s | %.2f ± %.2f | %.3f | %.3f |\n", model, in->backend, threads,
             in->precision, in->batch, tests[i].name, b.avg_ts, b.sd_ts, b.avg_s * 1e3 / n, b.avg_s * 1e3);
    }
    printf("\n(%d repetitions after one warm-up each; t/s: mean ± standard deviation; ms/token and total ms "
           "of one run: means)\n",
           in->reps);
    return true;
  }
  if (!strcmp(format, "csv")) {
    printf("model,backend,threads,precision,n_batch,n_depth,test,n_prompt,n_gen,avg_ts,stddev_ts,ms_per_token,"
           "total_ms,type_k,type_v\n");
    for (int i = 0; i < n_tests; i++) {
      bench_stats b = stats_of(&tests[i], in->reps);
      int32_t n = tests[i].n_prompt ? tests[i].n_prompt : tests[i].n_gen;
      printf("%s,%s,%s,\"%s\",%d,%d,%s,%d,%d,%.4f,%.4f,%.6f,%.6f,%s,%s\n", in->model, in->backend, threads,
             in->precision, in->batch, in->depth, tests[i].name, tests[i].n_prompt, tests[i].n_gen, b.avg_ts,
             b.sd_ts, b.avg_s * 1e3 / n, b.avg_s * 1e3, in->kv, in->kv);
    }
    return true;
  }
  if (!strcmp(format, "jsonl")) {
    for (int i = 0; i < n_tests; i++)
      if (!cli_json_print(test_json(in, &tests[i]))) return false;
    return true;
  }
  json_t *a = json_array();
  for (int i = 0; a && i < n_tests; i++) json_array_append_new(a, test_json(in, &tests[i]));
  return cli_json_print(a);
}

int cmd_bench(int argc, char **argv) {
  enum { O_JSON = CLI_OPT_FIRST_FREE };
  static const struct option longopts[] = {
      CLI_MODEL_LONGOPTS,
      {"n-prompt", required_argument, 0, 'p'}, {"n-gen", required_argument, 0, 'n'},
      {"n-depth", required_argument, 0, 'd'},  {"repetitions", required_argument, 0, 'r'},
      {"output", required_argument, 0, 'o'},   {"json", no_argument, 0, O_JSON},
      {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
  cli_common cc = {.cmd = "bench"};
  int32_t n_prompt = 512, n_gen = 128, depth = 0, reps = 5;
  const char *format = "md";
  bool ok = true;
  int opt;
  optind = 1;
  while (ok && (opt = getopt_long(argc, argv, CLI_MODEL_SHORTOPTS "p:n:d:r:o:h", longopts, NULL)) != -1) {
    if (opt == 'c')
      return cli_usage_error("bench", "-c: bench sizes the KV cache itself (-d plus -p or -n tokens)");
    int common = cli_model_flag(&cc, opt, optarg);
    if (common) {
      ok = common > 0;
      continue;
    }
    switch (opt) {
    case 'p': ok = int_arg("-p", optarg, 0, 1 << 20, &n_prompt); break;
    case 'n': ok = int_arg("-n", optarg, 0, 1 << 20, &n_gen); break;
    case 'd': ok = int_arg("-d", optarg, 0, 1 << 20, &depth); break;
    case 'r': ok = int_arg("-r", optarg, 1, 1000, &reps); break;
    case 'o':
      format = optarg;
      if (strcmp(format, "md") && strcmp(format, "csv") && strcmp(format, "json") && strcmp(format, "jsonl"))
        return cli_usage_error("bench", "-o %s: expected md, csv, json or jsonl", format);
      break;
    case O_JSON: format = "json"; break;
    case 'h': usage(stdout); return CLI_EXIT_OK;
    default: usage(stderr); return CLI_EXIT_USAGE;
    }
  }
  if (!ok) return CLI_EXIT_USAGE;
  if (optind != argc) return cli_usage_error("bench", "unexpected argument \"%s\"", argv[optind]);
  if (!n_prompt && !n_gen) return cli_usage_error("bench", "-p 0 and -n 0: no test to run");

  bench_test tests[2];
  int n_tests = 0;
  if (n_prompt) tests[n_tests++] = (bench_test){"", n_prompt, 0, NULL};
  if (n_gen) tests[n_tests++] = (bench_test){"", 0, n_gen, NULL};
  for (int i = 0; i < n_tests; i++) {
    int k = snprintf(tests[i].name, sizeof tests[i].name, tests[i].n_prompt ? "pp%d" : "tg%d",
                     tests[i].n_prompt ? tests[i].n_prompt : tests[i].n_gen);
    if (depth) snprintf(tests[i].name + k, sizeof tests[i].name - (size_t)k, " @ d%d", depth);
  }
  int32_t longest = (n_prompt > n_gen ? n_prompt : n_gen) + depth;
  kiln_runtime *rt = NULL;
  kiln_model *m = NULL;
  kiln_session *s = NULL;
  int32_t *ids = NULL;
  float *logits = NULL;
  const char *model_path = NULL;
  kiln_status st = cli_runtime_open(&cc, &rt);
  if (!st) st = cli_model_path(&cc, rt, &model_path);
  if (!st) st = cli_model_open(rt, model_path, &m);
  int32_t n_vocab = m ? (int32_t)kiln_model_hparams(m)->n_vocab : 0;
  /* The cache holds the longest test. Past the training context it is
   * allowed with the session's warning, as kiln run -c allows it: the
   * work a position costs does not depend on whether the model was
   * trained there, so the speed is the one such a run gets. */
  kiln_session_options so = {.n_ctx = longest, .fallback_cpu = -1};
  if (!st) st = cli_session_open(rt, m, &so, &s);
  if (!st && !(ids = malloc((size_t)longest * sizeof *ids))) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "bench");
  if (!st && !(logits = malloc((size_t)n_vocab * sizeof *logits))) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "bench");
  for (int i = 0; !st && i < n_tests; i++)
    if (!(tests[i].seconds = calloc((size_t)reps, sizeof(double))))
      st = kiln_status_new(KILN_STATUS_NO_MEMORY, "bench");
  bool have_depth = false;
  for (int i = 0; !st && i < n_tests; i++) {
    double warm;
    cli_progress("kiln: bench %s warm-up", tests[i].name);
    st = run_test(s, &tests[i], depth, n_vocab, ids, logits, &have_depth, &warm);
    for (int32_t r = 0; !st && r < reps; r++) {
      cli_progress("kiln: bench %s %d/%d", tests[i].name, r + 1, reps);
      st = run_test(s, &tests[i], depth, n_vocab, ids, logits, &have_depth, &tests[i].seconds[r]);
    }
  }
  cli_progress_clear();
  int rc = CLI_EXIT_OK;
  if (st) {
    rc = cli_exit(&cc, st);
  } else {
    kiln_plan *plan = kiln_session_plan(s);
    const kiln_config *cfg = kiln_runtime_config(rt);
    bench_info in = {model_path, kiln_plan_backend_name(plan),
                     kiln_config_get_str(kiln_config_section_get(cfg, "kv_cache"), "type"), "",
                     threads_of(cfg, kiln_plan_backend_name(plan)), kiln_graph_batch(kiln_plan_graph(plan)), depth,
                     reps};
    char line[CLI_MODES_MAX];
    cli_plan_modes(plan, NULL, line, sizeof line);
    precision_of(cfg, in.backend, line, in.precision, sizeof in.precision);
    guard_of(cfg, in.backend, kiln_plan_graph(plan), in.precision, sizeof in.precision);
    /* A KV cache in another type than f32 shows in the table's precision. */
    if (strcmp(in.kv, "f32") != 0) {
      const bool none = strcmp(in.precision, "-") == 0;
      const size_t used = none ? 0 : strlen(in.precision);
      snprintf(in.precision + used, sizeof in.precision - used, "%sKV %s", none ? "" : ", ", in.kv);
    }
    if (kiln_plan_n_fallbacks(plan)) kiln_plan_print_fallbacks(plan, stderr);
    if (!print_results(format, &in, tests, n_tests)) rc = CLI_EXIT_FAIL;
  }
  for (int i = 0; i < n_tests; i++) free(tests[i].seconds);
  free(ids);
  free(logits);
  kiln_session_free(s);
  kiln_model_free(m);
  kiln_runtime_free(rt);
  return rc;
}
