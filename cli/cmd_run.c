/* kiln run: tokenize a prompt, prefill, sample and stream the text; or,
 * with -i, a conversation (run_conversation.c). */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

static void usage(FILE *out) {
  fputs("usage: kiln run [-m MODEL] (-p PROMPT | -f FILE) [options]\n"
        "       kiln run [-m MODEL] -i [-p FIRST-MESSAGE] [options]   (conversation)\n"
        "\n"
        "Generates text from PROMPT with the model and backend of the configuration,\n"
        "streaming it to stdout, then prints a summary line to stderr.\n"
        "\n"
        "  -p, --prompt TEXT      the prompt (escapes \\n \\t \\\\ ... processed unless --no-escape)\n"
        "  -f, --file FILE        read the prompt from FILE; -f - reads standard input\n"
        "  -e, --escape           process escapes in -p (the default);  --no-escape: do not\n"
        "  -n, --n-predict N      tokens to generate, -1 = until end of text or the KV cache\n"
        "                         is full ([sampling] n_predict)\n"
        "      --no-special       special-token texts in the prompt (<|im_start|>, <s>) stay\n"
        "                         text; by default they are those tokens, as in llama.cpp\n"
        "      --chat             render the model's chat template around PROMPT (once: a\n"
        "                         prompt that already holds the template's markers is kept);\n"
        "                         text inside the message never becomes a special token\n"
        "  -sys, --system-prompt TEXT  a system message (with --chat or -i; also --system)\n"
        "      --raw              the prompt as is, no template (the default)\n"
        "  -i, -cnv, --interactive, --conversation\n"
        "                         a conversation with the chat template: each line of standard\n"
        "                         input is a user message (a \"\\\" at its end continues it), each\n"
        "                         reply and message go into the KV cache after the last; -p is\n"
        "                         the first message\n"
        "  -r, --reverse-prompt TEXT, --stop TEXT\n"
        "                         stop after the generated text contains TEXT (repeatable)\n"
        "      --ignore-eos       never sample end of text / end of turn\n"
        "      --temp T           temperature, 0 = greedy ([sampling] temperature)\n"
        "      --top-k K          ([sampling] top_k)\n"
        "      --top-p P          ([sampling] top_p)\n"
        "  -s, --seed S           sampler seed, -1 = random ([sampling] seed)\n"
        "      --ids              also print the prompt and generated token ids (stderr)\n"
        "      --json             print one JSON object (per turn with -i) on stdout instead\n"
        "                         of the text and the summary\n"
        CLI_MODEL_HELP
        "  -h, --help             this text\n",
        out);
}

/* [sampling] seed = -1 (or -s -1): a seed from the system's entropy, below
 * 2^53 like every configured one, printed so the run can be repeated. */
static kiln_status random_seed(uint64_t *out) {
  uint64_t v = 0;
  int fd = open("/dev/urandom", O_RDONLY);
  bool ok = fd >= 0 && read(fd, &v, sizeof v) == (ssize_t)sizeof v;
  if (fd >= 0) close(fd);
  if (!ok) return kiln_status_new(KILN_STATUS_IO, "[sampling] seed = -1: cannot read /dev/urandom");
  *out = v & ((1ull << 53) - 1);
  return NULL;
}

static void print_ids(const char *what, const int32_t *ids, size_t n) {
  fprintf(stderr, "%s:", what);
  for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
  fputc('\n', stderr);
}

typedef struct run_args {
  const char *prompt, *file, *system;
  const char *stop[16];
  size_t n_stop;
  bool escape, parse_special, chat, conversation, ignore_eos, show_ids, json;
  uint64_t seed; /* [sampling] seed, -1 resolved */
} run_args;

static kiln_status open_sampler(const kiln_config *cfg, uint64_t seed, kiln_sampler **out) {
  const kiln_config_section *ss = kiln_config_section_get(cfg, "sampling");
  kiln_sampler_options so = {(float)kiln_config_get_float(ss, "temperature"), (int32_t)kiln_config_get_int(ss, "top_k"),
                             (float)kiln_config_get_float(ss, "top_p"), seed};
  return kiln_sampler_new(&so, out);
}

/* One prompt, one generation. */
static int run_once(cli_common *cc, const run_args *a, kiln_runtime *rt, kiln_model *model, const char *model_path) {
  const kiln_config *cfg = kiln_runtime_config(rt);
  const kiln_config_section *ss = kiln_config_section_get(cfg, "sampling");
  const kiln_vocab *v = kiln_model_vocab(model);
  kiln_session *session = NULL;
  kiln_sampler *sampler = NULL;
  char *text = NULL;
  int32_t *ids = NULL;
  size_t n_ids = 0, len = 0;
  run_output out = {.json = a->json};
  kiln_status st = NULL;
  if (!cli_prompt("run", a->prompt, a->file, a->escape, &text, &len, &st)) return CLI_EXIT_USAGE;
  if (!st && len == 0) /* an empty -f: bad input (cmd_run refuses an empty -p) */
    st = kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: the prompt is empty",
                         !a->file ? "-p" : strcmp(a->file, "-") ? a->file : "standard input");
  if (!st) {
    char *rendered = NULL;
    st = kiln_prompt_tokenize(v, kiln_model_chat_template(model), text, len, a->chat, a->parse_special, a->system,
                              &ids, &n_ids, cc->verbose && a->chat ? &rendered : NULL);
    if (!st && rendered) fprintf(stderr, "prompt as templated:\n%s\n", rendered);
    free(rendered);
  }
  if (!st && n_ids == 0) st = kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "the prompt is empty");
  if (!st) st = cli_session_open(rt, model, NULL, &session);
  if (!st) st = open_sampler(cfg, a->seed, &sampler);
  if (!st && cc->verbose) {
    kiln_plan *plan = kiln_session_plan(session);
    fprintf(stderr, "plan: %u nodes on %s, n_ctx %d\n", kiln_graph_n_nodes(kiln_plan_graph(plan)),
            kiln_plan_backend_name(plan), kiln_session_n_ctx(session));
    /* what the backend made of its configuration, node by node */
    char line[CLI_MODES_MAX];
    cli_plan_modes(plan, NULL, line, sizeof line);
    if (line[0]) fprintf(stderr, "plan: %s: %s\n", kiln_plan_backend_name(plan), line);
  }
  int32_t n_predict = (int32_t)kiln_config_get_int(ss, "n_predict");
  kiln_generate_stats stats = {0};
  if (!st) {
    kiln_generate_options go = {n_predict, a->ignore_eos, a->stop, a->n_stop,
                                cli_progress_on() ? run_prefill_progress : NULL, NULL};
    st = kiln_generate_with(session, ids, (int32_t)n_ids, &go, sampler, run_on_token, &out, NULL, &stats);
    if (!st && out.out_of_memory) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "generated text");
    if (!a->json) {
      fputc('\n', stdout);
      fflush(stdout);
    }
  }
  int rc = CLI_EXIT_OK;
  if (st) {
    rc = cli_exit(cc, st);
  } else if (a->json) {
    kiln_plan *plan = kiln_session_plan(session);
    json_t *j = json_pack("{s:s, s:s, s:o, s:o, s:o, s:s, s:i, s:i, s:i, s:f, s:f, s:I, s:i}", "model", model_path,
                          "backend", kiln_plan_backend_name(plan), "prompt_ids", run_ids_json(ids, n_ids),
                          "generated_ids", run_ids_json(out.ids, out.n_ids), "text",
                          cli_json_text(out.text ? out.text : "", out.len), "stop", run_stop_reason(&stats),
                          "n_prompt", stats.n_prompt, "n_generated", stats.n_generated, "n_decoded",
                          stats.n_decoded, "prefill_seconds", stats.prefill_seconds, "decode_seconds",
                          stats.decode_seconds, "seed", (json_int_t)a->seed, "n_ctx",
                          kiln_session_n_ctx(session));
    if (!cli_json_print(j)) rc = CLI_EXIT_FAIL;
  } else {
    kiln_plan *plan = kiln_session_plan(session);
    if (a->show_ids) {
      print_ids("prompt ids", ids, n_ids);
      print_ids("generated ids", out.ids, out.n_ids);
    }
    kiln_plan_print_fallbacks(plan, stderr);
    char modes[512];
    cli_numerics(rt, kiln_plan_backend_name(plan), plan, modes, sizeof modes);
    fprintf(stderr, "kiln: backend %s%s%s%s | prompt %d tokens, generated %d | ", kiln_plan_backend_name(plan),
            modes[0] ? " (" : "", modes, modes[0] ? ")" : "", stats.n_prompt, stats.n_generated);
    run_print_speed(stderr, &stats);
    if (stats.stopped_at_eos) fputs(" | stopped at end of text", stderr);
    if (stats.stop_index >= 0) fprintf(stderr, " | stopped at \"%s\"", a->stop[stats.stop_index]);
    if (kiln_config_get_float(ss, "temperature") > 0)
      fprintf(stderr, " | seed %llu", (unsigned long long)a->seed);
    fputc('\n', stderr);
    if (stats.stopped_at_ctx)
      fprintf(stderr,
              "kiln run: warning: stopped after %d %s: the KV cache of %d %s is full "
              "(raise -c / [model] n_ctx)\n",
              stats.n_generated, stats.n_generated == 1 ? "token" : "tokens", kiln_session_n_ctx(session),
              kiln_session_n_ctx(session) == 1 ? "position" : "positions");
  }
  run_output_free(&out);
  free(ids);
  free(text);
  kiln_sampler_free(sampler);
  kiln_session_free(session);
  return rc;
}

static int run_chat(cli_common *cc, const run_args *a, kiln_runtime *rt, kiln_model *model) {
  const kiln_config *cfg = kiln_runtime_config(rt);
  const kiln_config_section *ss = kiln_config_section_get(cfg, "sampling");
  kiln_session *session = NULL;
  kiln_sampler *sampler = NULL;
  char *first = NULL;
  size_t first_len = 0;
  kiln_chat_kind kind = KILN_CHAT_NONE;
  kiln_status st = kiln_chat_detect(kiln_model_chat_template(model), &kind);
  if (!st && kind == KILN_CHAT_NONE)
    st = kiln_status_new(KILN_STATUS_UNSUPPORTED,
                         "conversation mode needs a chat template, and the model has none (tokenizer.chat_template)");
  if (!st && (a->prompt || a->file) && cli_prompt("run", a->prompt, a->file, a->escape, &first, &first_len, &st) &&
      !st && memchr(first, 0, first_len))
    st = kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "the first message holds a NUL byte");
  if (!st && first && first_len == 0) /* -f (cmd_run refuses an empty -p) */
    st = kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: the first message is empty", a->file ? a->file : "-p");
  if (!st) st = cli_session_open(rt, model, NULL, &session);
  if (!st) st = open_sampler(cfg, a->seed, &sampler);
  int rc;
  if (st) {
    rc = cli_exit(cc, st);
  } else {
    run_conversation_args ca = {session, sampler, kind, a->system, first,
                                {(int32_t)kiln_config_get_int(ss, "n_predict"), a->ignore_eos, a->stop, a->n_stop,
                                 cli_progress_on() ? run_prefill_progress : NULL, NULL},
                                a->json, a->show_ids, stdin};
    rc = run_conversation(&ca);
  }
  free(first);
  kiln_sampler_free(sampler);
  kiln_session_free(session);
  return rc;
}

int cmd_run(int argc, char **argv) {
  enum { O_CHAT = CLI_OPT_FIRST_FREE, O_RAW, O_SYSTEM, O_TEMP, O_TOPK, O_TOPP, O_IDS, O_JSON, O_NO_ESCAPE,
         O_NO_SPECIAL, O_STOP, O_IGNORE_EOS };
  static const struct option longopts[] = {
      CLI_MODEL_LONGOPTS,
      {"prompt", required_argument, 0, 'p'},      {"file", required_argument, 0, 'f'},
      {"escape", no_argument, 0, 'e'},            {"no-escape", no_argument, 0, O_NO_ESCAPE},
      {"n-predict", required_argument, 0, 'n'},   {"seed", required_argument, 0, 's'},
      {"temp", required_argument, 0, O_TEMP},     {"top-k", required_argument, 0, O_TOPK},
      {"top-p", required_argument, 0, O_TOPP},    {"ids", no_argument, 0, O_IDS},
      {"json", no_argument, 0, O_JSON},           {"chat", no_argument, 0, O_CHAT},
      {"raw", no_argument, 0, O_RAW},             {"system", required_argument, 0, O_SYSTEM},
      {"system-prompt", required_argument, 0, O_SYSTEM}, {"no-special", no_argument, 0, O_NO_SPECIAL},
      {"interactive", no_argument, 0, 'i'},       {"conversation", no_argument, 0, 'i'},
      {"reverse-prompt", required_argument, 0, 'r'}, {"stop", required_argument, 0, O_STOP},
      {"ignore-eos", no_argument, 0, O_IGNORE_EOS}, {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  static const cli_alias aliases[] = {{"-cnv", "--conversation"}, {"-sys", "--system-prompt"}, {NULL, NULL}};
  cli_rewrite_aliases(argc, argv, aliases);
  cli_common cc = {.cmd = "run"};
  run_args a = {.escape = true, .parse_special = true};
  bool ok = true;
  int opt;
  optind = 1;
  while (ok && (opt = getopt_long(argc, argv, CLI_MODEL_SHORTOPTS "p:f:en:s:ir:h", longopts, NULL)) != -1) {
    int common = cli_model_flag(&cc, opt, optarg);
    if (common) {
      ok = common > 0;
      continue;
    }
    switch (opt) {
    case 'p': a.prompt = optarg; break;
    case 'f': a.file = optarg; break;
    case 'e': a.escape = true; break;
    case O_NO_ESCAPE: a.escape = false; break;
    case 'n': ok = cli_override(&cc, "sampling", "n_predict", optarg, "--n-predict"); break;
    case 's': ok = cli_override(&cc, "sampling", "seed", optarg, "--seed"); break;
    case O_TEMP: ok = cli_override(&cc, "sampling", "temperature", optarg, "--temp"); break;
    case O_TOPK: ok = cli_override(&cc, "sampling", "top_k", optarg, "--top-k"); break;
    case O_TOPP: ok = cli_override(&cc, "sampling", "top_p", optarg, "--top-p"); break;
    case O_IDS: a.show_ids = true; break;
    case O_JSON: a.json = true; break;
    case O_CHAT: a.chat = true; break;
    case O_RAW: a.chat = false; break;
    case O_SYSTEM: a.system = optarg; break;
    case O_NO_SPECIAL: a.parse_special = false; break;
    case 'i': a.conversation = true; break;
    case 'r':
    case O_STOP:
      if (a.n_stop == sizeof a.stop / sizeof a.stop[0]) return cli_usage_error("run", "at most 16 stop strings");
      if (!*optarg) return cli_usage_error("run", "%s: an empty stop string", opt == 'r' ? "-r" : "--stop");
      a.stop[a.n_stop++] = optarg;
      break;
    case O_IGNORE_EOS: a.ignore_eos = true; break;
    case 'h': usage(stdout); return CLI_EXIT_OK;
    default: usage(stderr); return CLI_EXIT_USAGE;
    }
  }
  if (!ok) return CLI_EXIT_USAGE;
  if (optind < argc) return cli_usage_error("run", "unexpected argument \"%s\"", argv[optind]);
  if (a.conversation && a.file && !strcmp(a.file, "-"))
    return cli_usage_error("run", "-i reads the messages from standard input: give the first with -p or a file");
  if (!a.conversation && !a.prompt == !a.file) {
    usage(stderr);
    return cli_usage_error("run", "give exactly one of -p PROMPT and -f FILE");
  }
  /* with BOS added it would tokenize to BOS alone and generate from that
   * (and a conversation skips empty lines: no empty first message either) */
  if (a.prompt && !*a.prompt) return cli_usage_error("run", "-p \"\": the prompt is empty");
  if (a.conversation && a.prompt && a.file) return cli_usage_error("run", "give at most one of -p and -f with -i");
  if (a.system && !a.chat && !a.conversation)
    return cli_usage_error("run", "a system message needs the chat template (--chat or -i)");

  kiln_runtime *rt = NULL;
  kiln_model *model = NULL;
  const char *model_path = NULL;
  kiln_status st = cli_runtime_open(&cc, &rt);
  if (!st) {
    const int64_t seed = kiln_config_get_int(kiln_config_section_get(kiln_runtime_config(rt), "sampling"), "seed");
    if (seed == -1) st = random_seed(&a.seed);
    else a.seed = (uint64_t)seed;
    /* a conversation has no summary line to carry a drawn seed: said now */
    if (!st && seed == -1 && a.conversation) fprintf(stderr, "kiln run: seed %llu\n", (unsigned long long)a.seed);
  }
  if (!st) st = cli_model_path(&cc, rt, &model_path);
  if (!st) st = cli_model_open(rt, model_path, &model);
  if (!st && !kiln_model_vocab(model))
    st = kiln_status_new(KILN_STATUS_UNSUPPORTED, "%s has no vocabulary (tokenizer.ggml.*): cannot tokenize a prompt",
                         model_path);
  if (!st && cc.verbose) {
    fprintf(stderr, "model %s\n", model_path);
    kiln_hparams_print(kiln_model_hparams(model), stderr);
  }
  int rc;
  if (st) rc = cli_exit(&cc, st);
  else if (a.conversation) rc = run_chat(&cc, &a, rt, model);
  else rc = run_once(&cc, &a, rt, model, model_path);
  kiln_model_free(model);
  kiln_runtime_free(rt);
  return rc;
}
