/* kiln perplexity: llama-perplexity's number over a text file
 * (kiln/perplexity.h), its per-chunk output and its uncertainty. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "kiln/perplexity.h"

static void usage(FILE *out) {
  fputs("usage: kiln perplexity -m MODEL -f FILE [-c N] [--chunks N] [options]\n"
        "\n"
        "The perplexity of the model over the text, as llama-perplexity computes it: the\n"
        "tokens (BOS first when the vocabulary adds it) cut into chunks of N tokens (-c;\n"
        "[model] n_ctx, by default the model's context_length at most 4096), each\n"
        "evaluated from an empty KV cache with its first token\n"
        "replaced by BOS, the second half of each chunk scored. Prints the running\n"
        "perplexity after each chunk, \"[1]x,[2]y,...\", then\n"
        "\"Final estimate: PPL = P +/- E\" (E: its standard error) on stdout.\n"
        "\n"
        "  -f, --file FILE        the text (its bytes as they are); -f - reads standard input\n"
        "      --chunks N         score at most N chunks (default: all)\n"
        "      --json             one JSON object instead (ppl, ppl_err, chunks, counts)\n"
        CLI_MODEL_HELP
        "  -h, --help             this text\n",
        out);
}

typedef struct progress {
  bool json;
  double first_seconds;
} progress;

static void on_chunk(int32_t chunk, int32_t n_chunk, double ppl, double seconds, void *user) {
  progress *p = user;
  if (chunk == 0) {
    fprintf(stderr, "kiln perplexity: %.2f seconds per pass - ETA %.2f minutes\n", seconds,
            seconds * n_chunk / 60.0);
    p->first_seconds = seconds;
  }
  if (!p->json) {
    printf("[%d]%.4f,", chunk + 1, ppl);
    fflush(stdout);
  }
  /* The values are the progress on a terminal, as llama-perplexity's are:
   * a progress line there would be drawn over them (the same line, no
   * newline yet) and erase them. */
  if (!p->json && isatty(STDOUT_FILENO)) return;
  if (chunk + 1 < n_chunk) cli_progress("kiln: perplexity chunk %d/%d", chunk + 2, n_chunk);
  else cli_progress_clear();
}

/* [model] n_ctx is the chunk size here, and a chunk needs at least 3
 * tokens (kiln/perplexity.h): refused before the model is read, naming
 * where the value came from; exit 2 when that is -c. 0 and -1 (the
 * model's context, whole or at most 4096) are checked with the session. */
static kiln_status check_chunk_size(cli_common *cc, kiln_runtime *rt) {
  const kiln_config_section *ms = kiln_config_section_get(kiln_runtime_config(rt), "model");
  int64_t n_ctx = kiln_config_get_int(ms, "n_ctx");
  if (n_ctx <= 0 || n_ctx >= 3) return NULL;
  const char *origin = kiln_config_origin(ms, "n_ctx");
  cc->flags_at_fault = !strcmp(origin, "--ctx-size");
  return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                         "%s: [model] n_ctx = %lld: a perplexity chunk needs at least 3 tokens (fewer leave no "
                         "token to score)",
                         origin, (long long)n_ctx);
}

int cmd_perplexity(int argc, char **argv) {
  enum { O_CHUNKS = CLI_OPT_FIRST_FREE, O_JSON };
  static const struct option longopts[] = {
      CLI_MODEL_LONGOPTS,
      {"file", required_argument, 0, 'f'}, {"chunks", required_argument, 0, O_CHUNKS},
      {"json", no_argument, 0, O_JSON},    {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  cli_common cc = {.cmd = "perplexity"};
  const char *file = NULL;
  int32_t n_chunks = -1;
  bool json = false, ok = true;
  int opt;
  optind = 1;
  while (ok && (opt = getopt_long(argc, argv, CLI_MODEL_SHORTOPTS "f:h", longopts, NULL)) != -1) {
    int common = cli_model_flag(&cc, opt, optarg);
    if (common) {
      ok = common > 0;
      continue;
    }
    switch (opt) {
    case 'f': file = optarg; break;
    case O_CHUNKS: {
      char *end;
      long v = strtol(optarg, &end, 10);
      if (end == optarg || *end || v < 1 || v > 1 << 30)
        return cli_usage_error("perplexity", "--chunks %s: expected a whole number >= 1", optarg);
      n_chunks = (int32_t)v;
      break;
    }
    case O_JSON: json = true; break;
    case 'h': usage(stdout); return CLI_EXIT_OK;
    default: usage(stderr); return CLI_EXIT_USAGE;
    }
  }
  if (!ok) return CLI_EXIT_USAGE;
  if (optind < argc) return cli_usage_error("perplexity", "unexpected argument \"%s\"", argv[optind]);
  if (!file) {
    usage(stderr);
    return cli_usage_error("perplexity", "-f FILE is required");
  }
  kiln_runtime *rt = NULL;
  kiln_model *m = NULL;
  kiln_session *s = NULL;
  const char *model_path = NULL;
  char *text = NULL;
  size_t len = 0, n_ids = 0;
  int32_t *ids = NULL;
  kiln_perplexity_result r = {0};
  kiln_status st = cli_runtime_open(&cc, &rt);
  if (!st) st = check_chunk_size(&cc, rt);
  if (!st) st = cli_model_path(&cc, rt, &model_path);
  if (!st) st = cli_model_open(rt, model_path, &m);
  const kiln_vocab *v = m ? kiln_model_vocab(m) : NULL;
  if (!st && !v)
    st = kiln_status_new(KILN_STATUS_UNSUPPORTED, "%s has no vocabulary: cannot tokenize a text", model_path);
  if (!st) st = cli_read_file(file, &text, &len);
  /* as llama-perplexity: BOS per the vocabulary, special-token texts stay text */
  if (!st) st = kiln_tokenize(v, text, len, kiln_vocab_add_bos(v) ? KILN_TOKENIZE_ADD_BOS : 0, &ids, &n_ids);
  if (!st) st = cli_session_open(rt, m, NULL, &s);
  progress p = {json, 0.0};
  kiln_perplexity_options po = {s ? kiln_session_n_ctx(s) : 0, n_chunks};
  if (!st) st = kiln_perplexity_check(s, n_ids, &po); /* before the summary: nothing printed for a refusal */
  if (!st) {
    int32_t batch = kiln_graph_batch(kiln_plan_graph(kiln_session_plan(s)));
    fprintf(stderr, "kiln perplexity: %zu tokens; %lld chunks of n_ctx=%d, batch_size=%d, backend %s\n", n_ids,
            (long long)(n_ids / (size_t)po.n_ctx), po.n_ctx, batch, kiln_plan_backend_name(kiln_session_plan(s)));
    st = kiln_perplexity(s, ids, n_ids, &po, on_chunk, &p, &r);
    if (!json) {
      fputc('\n', stdout);
      fflush(stdout);
    }
  }
  int rc = CLI_EXIT_OK;
  if (st) {
    rc = cli_exit(&cc, st);
  } else if (json) {
    json_t *chunks = json_array();
    for (int32_t i = 0; chunks && i < r.n_chunk; i++) json_array_append_new(chunks, json_real(r.chunk_ppl[i]));
    json_t *j = json_pack("{s:s, s:s, s:f, s:f, s:f, s:i, s:i, s:I, s:I, s:o, s:f}", "model", model_path, "backend",
                          kiln_plan_backend_name(kiln_session_plan(s)), "ppl", r.ppl, "ppl_err", r.ppl_err,
                          "nll_mean", r.nll_mean, "n_ctx", r.n_ctx, "n_chunk", r.n_chunk, "n_tokens",
                          (json_int_t)r.n_tokens, "n_scored", (json_int_t)r.n_scored, "chunks", chunks, "seconds",
                          r.seconds);
    if (!cli_json_print(j)) rc = CLI_EXIT_FAIL;
  } else {
    printf("Final estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_err);
    kiln_plan_print_fallbacks(kiln_session_plan(s), stderr);
    fprintf(stderr, "kiln perplexity: %lld tokens scored in %d chunks, %.2f s\n", (long long)r.n_scored, r.n_chunk,
            r.seconds);
  }
  kiln_perplexity_result_clear(&r);
  free(ids);
  free(text);
  kiln_session_free(s);
  kiln_model_free(m);
  kiln_runtime_free(rt);
  return rc;
}
