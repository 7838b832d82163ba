/* kiln run: tokenize a prompt, prefill, sample and stream the text. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kiln/chat.h"

static void usage(FILE *out) {
  fputs("usage: kiln run [-m MODEL] (-p PROMPT | -f FILE) [options]\n"
        "\n"
        "Generates text from PROMPT with the model and backend of the configuration,\n"
        "streaming it to stdout, then prints a summary line to stderr.\n"
        "\n"
        "  -m, --model FILE      GGUF model ([model] path)\n"
        "  -p, --prompt TEXT     the prompt\n"
        "  -f, --file FILE       read the prompt from FILE\n"
        "  -n, --n-predict N     tokens to generate ([sampling] n_predict)\n"
        "      --chat            render the model's chat template around PROMPT (once: a\n"
        "                        prompt that already holds the template's markers is kept)\n"
        "      --system TEXT     a system message (with --chat)\n"
        "      --raw             the prompt as is, no template (the default)\n"
        "  -b, --backend NAME    backend plugin ([backend] name): cpu, cuda-serial, ...\n"
        "  -c, --config FILE     configuration file (else $KILN_CONFIG)\n"
        "      --fallback MODE   error | cpu: nodes the backend cannot run ([backend] fallback)\n"
        "      --temp T          temperature, 0 = greedy ([sampling] temperature)\n"
        "      --top-k K         ([sampling] top_k)\n"
        "      --top-p P         ([sampling] top_p)\n"
        "      --seed S          ([sampling] seed)\n"
        "      --ctx N           KV cache positions ([model] n_ctx)\n"
        "      --batch N         prefill micro-batch ([backend] batch)\n"
        "      --ids             also print the prompt and generated token ids (stderr)\n"
        "  -v, --verbose         print the hyperparameters and the plan first (stderr)\n"
        "  -h, --help            this text\n",
        out);
}

typedef struct run_state {
  FILE *out;
} run_state;

static bool on_token(int32_t token, const char *piece, size_t len, void *user) {
  run_state *rs = user;
  (void)token;
  fwrite(piece, 1, len, rs->out);
  fflush(rs->out);
  return true;
}

static void print_ids(const char *what, const int32_t *ids, int32_t n) {
  fprintf(stderr, "%s:", what);
  for (int32_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
  fputc('\n', stderr);
}

int cmd_run(int argc, char **argv) {
  static const struct option longopts[] = {
      {"model", required_argument, 0, 'm'},    {"prompt", required_argument, 0, 'p'},
      {"file", required_argument, 0, 'f'},     {"n-predict", required_argument, 0, 'n'},
      {"backend", required_argument, 0, 'b'},  {"config", required_argument, 0, 'c'},
      {"fallback", required_argument, 0, 'F'}, {"temp", required_argument, 0, 'T'},
      {"top-k", required_argument, 0, 'K'},    {"top-p", required_argument, 0, 'P'},
      {"seed", required_argument, 0, 'S'},     {"ctx", required_argument, 0, 'C'},
      {"batch", required_argument, 0, 'B'},    {"ids", no_argument, 0, 'I'},
      {"verbose", no_argument, 0, 'v'},        {"help", no_argument, 0, 'h'},
      {"chat", no_argument, 0, 'H'},           {"raw", no_argument, 0, 'R'},
      {"system", required_argument, 0, 'Y'},
      {0, 0, 0, 0}};
  cli_common cc = {0};
  const char *prompt = NULL, *prompt_file = NULL, *system = NULL;
  bool show_ids = false, ok = true, chat = false;
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "m:p:f:n:b:c:vh", longopts, NULL)) != -1) {
    switch (opt) {
    case 'm': ok = cli_override(&cc, "model", "path", optarg, "--model"); break;
    case 'p': prompt = optarg; break;
    case 'f': prompt_file = optarg; break;
    case 'n': ok = cli_override(&cc, "sampling", "n_predict", optarg, "--n-predict"); break;
    case 'b': ok = cli_override(&cc, "backend", "name", optarg, "--backend"); break;
    case 'c': cc.config_path = optarg; break;
    case 'F': ok = cli_override(&cc, "backend", "fallback", optarg, "--fallback"); break;
    case 'T': ok = cli_override(&cc, "sampling", "temperature", optarg, "--temp"); break;
    case 'K': ok = cli_override(&cc, "sampling", "top_k", optarg, "--top-k"); break;
    case 'P': ok = cli_override(&cc, "sampling", "top_p", optarg, "--top-p"); break;
    case 'S': ok = cli_override(&cc, "sampling", "seed", optarg, "--seed"); break;
    case 'C': ok = cli_override(&cc, "model", "n_ctx", optarg, "--ctx"); break;
    case 'B': ok = cli_override(&cc, "backend", "batch", optarg, "--batch"); break;
    case 'I': show_ids = true; break;
    case 'H': chat = true; break;
    case 'R': chat = false; break;
    case 'Y': system = optarg; break;
    case 'v': cc.verbose = true; break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
    if (!ok) return 2;
  }
  if (optind < argc) {
    fprintf(stderr, "kiln run: unexpected argument \"%s\"\n", argv[optind]);
    return 2;
  }
  if (!prompt == !prompt_file) {
    fprintf(stderr, "kiln run: give exactly one of -p PROMPT and -f FILE\n");
    usage(stderr);
    return 2;
  }

  kiln_runtime *rt = NULL;
  kiln_model *model = NULL;
  kiln_session *session = NULL;
  kiln_sampler *sampler = NULL;
  char *file_text = NULL;
  int32_t *ids = NULL, *out_ids = NULL;
  size_t n_ids = 0, prompt_len = 0;
  kiln_status st = cli_runtime_open(&cc, &rt);
  const kiln_config *cfg = rt ? kiln_runtime_config(rt) : NULL;
  const kiln_config_section *ms = cfg ? kiln_config_section_get(cfg, "model") : NULL;
  const kiln_config_section *ss = cfg ? kiln_config_section_get(cfg, "sampling") : NULL;
  const char *model_path = ms ? kiln_config_get_str(ms, "path") : NULL;
  if (!st && (!model_path || !*model_path))
    st = kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                         "no model: give -m MODEL, or set [model] path in the configuration");
  if (!st) st = kiln_model_open(model_path, &model);
  if (!st && !kiln_model_vocab(model))
    st = kiln_status_new(KILN_STATUS_UNSUPPORTED, "%s has no vocabulary (tokenizer.ggml.*): cannot tokenize a prompt",
                         model_path);
  if (!st && prompt_file) {
    st = cli_read_file(prompt_file, &file_text, &prompt_len);
    prompt = file_text;
  } else if (!st) {
    prompt_len = strlen(prompt);
  }
  if (!st && cc.verbose) {
    fprintf(stderr, "model %s\n", model_path);
    kiln_hparams_print(kiln_model_hparams(model), stderr);
  }
  const kiln_vocab *v = model ? kiln_model_vocab(model) : NULL;
  if (!st) {
    char *rendered = NULL;
    st = kiln_prompt_tokenize(v, kiln_model_chat_template(model), prompt, prompt_len, chat, system, &ids, &n_ids,
                              cc.verbose && chat ? &rendered : NULL);
    if (!st && rendered) fprintf(stderr, "prompt as templated:\n%s\n", rendered);
    free(rendered);
  }
  if (!st && n_ids == 0) st = kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "the prompt is empty");
  if (!st) st = kiln_session_open(rt, model, NULL, &session);
  int32_t n_predict = ss ? (int32_t)kiln_config_get_int(ss, "n_predict") : 0;
  if (!st) {
    kiln_sampler_options so = {(float)kiln_config_get_float(ss, "temperature"),
                               (int32_t)kiln_config_get_int(ss, "top_k"),
                               (float)kiln_config_get_float(ss, "top_p"),
                               (uint64_t)kiln_config_get_int(ss, "seed")};
    st = kiln_sampler_new(&so, &sampler);
  }
  if (!st && cc.verbose) {
    kiln_plan *plan = kiln_session_plan(session);
    fprintf(stderr, "plan: %u nodes on %s, n_ctx %d\n", kiln_graph_n_nodes(kiln_plan_graph(plan)),
            kiln_plan_backend_name(plan), kiln_session_n_ctx(session));
  }
  kiln_generate_stats stats = {0};
  if (!st) {
    out_ids = calloc((size_t)(n_predict > 0 ? n_predict : 1), sizeof *out_ids);
    if (!out_ids) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "ids");
  }
  if (!st) {
    run_state rs = {stdout};
    st = kiln_generate(session, ids, (int32_t)n_ids, n_predict, sampler, on_token, &rs, out_ids, &stats);
    fputc('\n', stdout);
    fflush(stdout);
  }
  int rc = 0;
  if (st) {
    rc = cli_fail("run", st);
  } else {
    kiln_plan *plan = kiln_session_plan(session);
    if (show_ids) {
      print_ids("prompt ids", ids, (int32_t)n_ids);
      print_ids("generated ids", out_ids, stats.n_generated);
    }
    kiln_plan_print_fallbacks(plan, stderr);
    fprintf(stderr,
            "kiln: backend %s | prompt %d tokens, generated %d | prefill %.1f tok/s, decode %.1f "
            "tok/s%s\n",
            kiln_plan_backend_name(plan), stats.n_prompt, stats.n_generated,
            stats.prefill_seconds > 0 ? stats.n_prompt / stats.prefill_seconds : 0.0,
            stats.decode_seconds > 0 && stats.n_decoded ? stats.n_decoded / stats.decode_seconds : 0.0,
            stats.stopped_at_eos ? " | stopped at end of text" : "");
    if (stats.stopped_at_ctx)
      fprintf(stderr, "kiln run: warning: stopped after %d of %d tokens: the KV cache of %d positions is full "
                      "(raise --ctx or [model] n_ctx)\n",
              stats.n_generated, n_predict, kiln_session_n_ctx(session));
  }
  free(out_ids);
  free(ids);
  free(file_text);
  kiln_sampler_free(sampler);
  kiln_session_free(session);
  kiln_model_free(model);
  kiln_runtime_free(rt);
  return rc;
}
