/* kiln qa: replay a golden set (prompt -> reference token ids). */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kiln/escape.h"
#include "kiln/golden.h"

static void usage(FILE *out) {
  fputs("usage: kiln qa -m MODEL --golden FILE [-B BACKEND] [--config FILE]\n"
        "\n"
        "Replays every case of a golden file (see kiln/golden.h; tests/golden/ has\n"
        "sets made with llama.cpp) greedily on the backend, prints each case's\n"
        "result and `golden N/M`, and exits 1 if any case differs.\n"
        "\n"
        "  -g, --golden FILE      the golden set\n"
        CLI_MODEL_HELP,
        out);
}

int cmd_qa(int argc, char **argv) {
  static const struct option longopts[] = {
      CLI_MODEL_LONGOPTS, {"golden", required_argument, 0, 'g'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  cli_common cc = {.cmd = "qa"};
  const char *golden_path = NULL;
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, CLI_MODEL_SHORTOPTS "g:h", longopts, NULL)) != -1) {
    int common = cli_model_flag(&cc, opt, optarg);
    if (common < 0) return CLI_EXIT_USAGE;
    if (common) continue;
    switch (opt) {
    case 'g': golden_path = optarg; break;
    case 'h': usage(stdout); return CLI_EXIT_OK;
    default: usage(stderr); return CLI_EXIT_USAGE;
    }
  }
  if (optind != argc) return cli_usage_error("qa", "unexpected argument \"%s\"", argv[optind]);
  if (!golden_path) {
    usage(stderr);
    return cli_usage_error("qa", "--golden FILE is required");
  }
  kiln_runtime *rt = NULL;
  kiln_model *m = NULL;
  kiln_session *s = NULL;
  kiln_golden *g = NULL;
  kiln_status st = kiln_golden_load(golden_path, &g);
  const char *model_path = NULL;
  if (!st) st = cli_runtime_open(&cc, &rt);
  if (!st) st = cli_model_path(&cc, rt, &model_path);
  if (!st) st = cli_model_open(rt, model_path, &m);
  if (!st) st = cli_session_open(rt, m, NULL, &s);
  size_t passed = 0;
  for (size_t i = 0; !st && i < g->n_cases; i++) {
    const kiln_golden_case *c = &g->cases[i];
    char name[256]; /* the case's [section] name, from the file: escaped */
    kiln_escape(name, sizeof name, c->name, strlen(c->name), 0);
    kiln_golden_result r;
    st = kiln_golden_run(s, c, &r);
    if (st) break;
    passed += r.pass;
    if (r.pass) {
      printf("PASS [%s] %zu tokens%s\n", name, r.n_ids, c->n_top ? "" : " (no logits in the case)");
    } else if (!r.prompt_ids_match) {
      printf("FAIL [%s] the prompt tokenizes differently from the reference's prompt_ids\n", name);
    } else if (r.first_mismatch >= 0) {
      size_t k = (size_t)r.first_mismatch;
      if (k >= r.n_ids)
        printf("FAIL [%s] kiln stopped after %zu tokens (end of text), the reference went on to %zu\n", name,
               r.n_ids, c->n_ids);
      else if (k >= c->n_ids)
        printf("FAIL [%s] the reference stopped after %zu tokens (end of text), kiln went on (token %d)\n", name,
               c->n_ids, r.ids[k]);
      else
        printf("FAIL [%s] token %zu: got %d, reference %d\n", name, k, r.ids[k], c->ids[k]);
    } else if (!r.text_match) {
      printf("FAIL [%s] same ids, but the text differs from the reference's\n", name);
    } else {
      printf("FAIL [%s] logits after the prompt differ from the reference's by %.2e (relative; limit %g)\n",
             name, r.top_max_rel, KILN_GOLDEN_TOP_TOLERANCE);
    }
    kiln_golden_result_clear(&r);
  }
  int rc;
  if (st) {
    rc = cli_exit(&cc, st);
  } else {
    printf("golden %zu/%zu (%s, backend %s)\n", passed, g->n_cases, golden_path,
           kiln_plan_backend_name(kiln_session_plan(s)));
    kiln_plan_print_fallbacks(kiln_session_plan(s), stdout);
    rc = passed == g->n_cases ? 0 : 1;
  }
  kiln_session_free(s);
  kiln_model_free(m);
  kiln_runtime_free(rt);
  kiln_golden_free(g);
  return rc;
}
