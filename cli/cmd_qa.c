/* kiln qa: replay a golden set (prompt -> reference token ids). */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "kiln/golden.h"

static void usage(FILE *out) {
  fputs("usage: kiln qa -m MODEL --golden FILE [-b BACKEND] [-c CONFIG]\n"
        "\n"
        "Replays every case of a golden file (see kiln/golden.h; tests/golden/ has\n"
        "sets made with llama.cpp) greedily on the backend, prints each case's\n"
        "result and `golden N/M`, and exits 1 if any case differs.\n",
        out);
}

int cmd_qa(int argc, char **argv) {
  static const struct option longopts[] = {
      {"model", required_argument, 0, 'm'},  {"golden", required_argument, 0, 'g'},
      {"backend", required_argument, 0, 'b'}, {"config", required_argument, 0, 'c'},
      {"fallback", required_argument, 0, 'F'}, {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  cli_common cc = {0};
  const char *golden_path = NULL;
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "m:g:b:c:h", longopts, NULL)) != -1) {
    switch (opt) {
    case 'm': cli_override(&cc, "model", "path", optarg, "--model"); break;
    case 'g': golden_path = optarg; break;
    case 'b': cli_override(&cc, "backend", "name", optarg, "--backend"); break;
    case 'c': cc.config_path = optarg; break;
    case 'F': cli_override(&cc, "backend", "fallback", optarg, "--fallback"); break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (!golden_path || optind != argc) {
    usage(stderr);
    return 2;
  }
  kiln_runtime *rt = NULL;
  kiln_model *m = NULL;
  kiln_session *s = NULL;
  kiln_golden *g = NULL;
  kiln_status st = kiln_golden_load(golden_path, &g);
  if (!st) st = cli_runtime_open(&cc, &rt);
  const char *model_path = rt ? kiln_config_get_str(kiln_config_section_get(kiln_runtime_config(rt), "model"), "path") : NULL;
  if (!st && !model_path) st = kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "no model: give -m MODEL");
  if (!st) st = kiln_model_open(model_path, &m);
  if (!st) st = kiln_session_open(rt, m, NULL, &s);
  size_t passed = 0;
  for (size_t i = 0; !st && i < g->n_cases; i++) {
    const kiln_golden_case *c = &g->cases[i];
    kiln_golden_result r;
    st = kiln_golden_run(s, c, &r);
    if (st) break;
    passed += r.pass;
    if (r.pass) {
      printf("PASS [%s] %zu tokens%s\n", c->name, r.n_ids, c->n_top ? "" : " (no logits in the case)");
    } else if (!r.prompt_ids_match) {
      printf("FAIL [%s] the prompt tokenizes differently from the reference's prompt_ids\n", c->name);
    } else if (r.first_mismatch >= 0) {
      size_t k = (size_t)r.first_mismatch;
      if (k >= r.n_ids)
        printf("FAIL [%s] kiln stopped after %zu tokens (end of text), the reference went on to %zu\n", c->name,
               r.n_ids, c->n_ids);
      else if (k >= c->n_ids)
        printf("FAIL [%s] the reference stopped after %zu tokens (end of text), kiln went on (token %d)\n", c->name,
               c->n_ids, r.ids[k]);
      else
        printf("FAIL [%s] token %zu: got %d, reference %d\n", c->name, k, r.ids[k], c->ids[k]);
    } else if (!r.text_match) {
      printf("FAIL [%s] same ids, but the text differs from the reference's\n", c->name);
    } else {
      printf("FAIL [%s] logits after the prompt differ from the reference's by %.2e (relative; limit %g)\n",
             c->name, r.top_max_rel, KILN_GOLDEN_TOP_TOLERANCE);
    }
    kiln_golden_result_clear(&r);
  }
  int rc;
  if (st) {
    rc = cli_fail("qa", st);
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
