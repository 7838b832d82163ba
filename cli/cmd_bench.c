/* kiln bench: prefill and decode throughput of a backend on a model. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static void usage(FILE *out) {
  fputs("usage: kiln bench -m MODEL [-b BACKEND] [-p N] [-n N] [-r REPS] [-c CONFIG]\n"
        "\n"
        "Times a prefill of N prompt tokens (-p, default 128) and N decode steps\n"
        "(-n, default 64) on the backend, REPS times (-r, default 5), after one\n"
        "warm-up run, and prints the median and min/max tokens per second. The\n"
        "tokens are fixed ids spread over the vocabulary, so runs are comparable.\n"
        "Compare with a peer side by side (bench/), never as a pass/fail test.\n"
        "\n"
        "  --batch N    prefill micro-batch ([backend] batch)\n"
        "  --csv        one CSV line per repetition instead of the summary\n",
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

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One repetition: prefill n_prompt tokens, then n_gen single-token steps. */
static kiln_status one_run(kiln_session *s, const int32_t *ids, int32_t n_prompt, int32_t n_gen, int32_t n_vocab,
                           float *logits, double *out_prefill_s, double *out_decode_s) {
  kiln_session_reset(s);
  double t0 = now();
  KILN_RETURN_IF_ERROR(kiln_session_eval(s, ids, n_prompt, logits, NULL));
  double t1 = now();
  for (int32_t i = 0; i < n_gen; i++) {
    int32_t tok = kiln_argmax(logits, n_vocab);
    KILN_RETURN_IF_ERROR(kiln_session_eval(s, &tok, 1, logits, NULL));
  }
  *out_prefill_s = t1 - t0;
  *out_decode_s = now() - t1;
  return NULL;
}

int cmd_bench(int argc, char **argv) {
  static const struct option longopts[] = {
      {"model", required_argument, 0, 'm'},  {"backend", required_argument, 0, 'b'},
      {"prompt", required_argument, 0, 'p'}, {"gen", required_argument, 0, 'n'},
      {"reps", required_argument, 0, 'r'},   {"config", required_argument, 0, 'c'},
      {"batch", required_argument, 0, 'B'},  {"csv", no_argument, 0, 'C'},
      {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
  cli_common cc = {0};
  int32_t n_prompt = 128, n_gen = 64, reps = 5;
  bool csv = false, ok = true;
  int opt;
  optind = 1;
  while (ok && (opt = getopt_long(argc, argv, "m:b:p:n:r:c:h", longopts, NULL)) != -1) {
    switch (opt) {
    case 'm': cli_override(&cc, "model", "path", optarg, "--model"); break;
    case 'b': cli_override(&cc, "backend", "name", optarg, "--backend"); break;
    case 'B': cli_override(&cc, "backend", "batch", optarg, "--batch"); break;
    case 'p': ok = int_arg("-p", optarg, 1, 1 << 20, &n_prompt); break;
    case 'n': ok = int_arg("-n", optarg, 0, 1 << 20, &n_gen); break;
    case 'r': ok = int_arg("-r", optarg, 1, 1000, &reps); break;
    case 'c': cc.config_path = optarg; break;
    case 'C': csv = true; break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (!ok) return 2;
  if (optind != argc) {
    fprintf(stderr, "kiln bench: unexpected argument \"%s\"\n", argv[optind]);
    return 2;
  }
  kiln_runtime *rt = NULL;
  kiln_model *m = NULL;
  kiln_session *s = NULL;
  int32_t *ids = NULL;
  float *logits = NULL;
  double *pre = calloc((size_t)reps, sizeof *pre), *dec = calloc((size_t)reps, sizeof *dec);
  kiln_status st = cli_runtime_open(&cc, &rt);
  const char *model_path =
      rt ? kiln_config_get_str(kiln_config_section_get(kiln_runtime_config(rt), "model"), "path") : NULL;
  if (!st && !model_path) st = kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "no model: give -m MODEL");
  if (!st) st = kiln_model_open(model_path, &m);
  int32_t n_vocab = m ? (int32_t)kiln_model_hparams(m)->n_vocab : 0;
  if (!st && (int64_t)n_prompt + n_gen > (int64_t)kiln_model_hparams(m)->n_ctx_train)
    st = kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "-p %d + -n %d exceed the %u positions %s was trained for", n_prompt,
                         n_gen, kiln_model_hparams(m)->n_ctx_train, model_path);
  kiln_session_options so = {.n_ctx = n_prompt + n_gen, .fallback_cpu = -1};
  if (!st) st = kiln_session_open(rt, m, &so, &s);
  if (!st) {
    ids = malloc((size_t)n_prompt * sizeof *ids);
    logits = malloc((size_t)n_vocab * sizeof *logits);
    if (!ids || !logits || !pre || !dec) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "bench");
  }
  for (int32_t i = 0; !st && i < n_prompt; i++) ids[i] = (int32_t)((1 + (int64_t)i * 7919) % n_vocab);
  /* (the same ids bench/kiln_vs_llamacpp.py gives llama.cpp) */
  double w0, w1;
  if (!st) st = one_run(s, ids, n_prompt, n_gen, n_vocab, logits, &w0, &w1); /* warm-up */
  for (int32_t r = 0; !st && r < reps; r++) st = one_run(s, ids, n_prompt, n_gen, n_vocab, logits, &pre[r], &dec[r]);
  int rc = 0;
  if (st) {
    rc = cli_fail("bench", st);
  } else {
    const char *backend = kiln_plan_backend_name(kiln_session_plan(s));
    if (csv) {
      printf("backend,model,n_prompt,n_gen,prefill_s,decode_s,prefill_tok_s,decode_tok_s\n");
      for (int32_t r = 0; r < reps; r++)
        printf("%s,%s,%d,%d,%.6f,%.6f,%.2f,%.2f\n", backend, model_path, n_prompt, n_gen, pre[r], dec[r],
               n_prompt / pre[r], n_gen ? n_gen / dec[r] : 0.0);
    } else {
      qsort(pre, (size_t)reps, sizeof *pre, by_value);
      qsort(dec, (size_t)reps, sizeof *dec, by_value);
      double pm = pre[reps / 2], dm = dec[reps / 2];
      printf("model    %s\nbackend  %s (%u nodes, %u on cpu by fallback)\n", model_path, backend,
             kiln_graph_n_nodes(kiln_plan_graph(kiln_session_plan(s))), kiln_plan_n_fallbacks(kiln_session_plan(s)));
      printf("prefill  %d tokens: %10.1f tok/s median (%.1f..%.1f), %.3f ms\n", n_prompt, n_prompt / pm,
             n_prompt / pre[reps - 1], n_prompt / pre[0], pm * 1e3);
      if (n_gen)
        printf("decode   %d tokens: %10.1f tok/s median (%.1f..%.1f), %.3f ms/token\n", n_gen, n_gen / dm,
               n_gen / dec[reps - 1], n_gen / dec[0], dm * 1e3 / n_gen);
      printf("(%d repetitions after one warm-up)\n", reps);
    }
  }
  free(pre);
  free(dec);
  free(ids);
  free(logits);
  kiln_session_free(s);
  kiln_model_free(m);
  kiln_runtime_free(rt);
  return rc;
}
