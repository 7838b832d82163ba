/*
 * Embedding kiln: the whole program a user needs to generate text from C.
 * Built by `make check` through `pkg-config --cflags --libs kiln`, exactly
 * as an embedder outside this tree would build it:
 *
 *   cc embed_example.c $(pkg-config --cflags --libs kiln) -o embed_example
 *   ./embed_example MODEL.gguf "Once upon a time" 32
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln.h>

static bool print_piece(int32_t token, const char *piece, size_t len, void *user) {
  (void)token;
  (void)user;
  fwrite(piece, 1, len, stdout);
  return true;
}

static int fail(kiln_status st) {
  fprintf(stderr, "embed_example: %s\n", kiln_status_message(st));
  kiln_status_free(st);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MODEL.gguf PROMPT N\n", argv[0]);
    return 2;
  }
  kiln_runtime *rt;
  kiln_model *model;
  kiln_session *session;
  kiln_sampler *sampler;
  kiln_status st = kiln_runtime_open(&(kiln_runtime_options){.use_environment = true}, &rt);
  if (st) return fail(st);
  if ((st = kiln_model_open(argv[1], &model))) return fail(st);
  if ((st = kiln_session_open(rt, model, NULL, &session))) return fail(st);

  const kiln_vocab *vocab = kiln_model_vocab(model);
  int32_t *ids;
  size_t n_ids;
  int flags = kiln_vocab_add_bos(vocab) ? KILN_TOKENIZE_ADD_BOS : 0;
  if ((st = kiln_tokenize(vocab, argv[2], strlen(argv[2]), flags, &ids, &n_ids))) return fail(st);

  kiln_sampler_options greedy = {.temperature = 0.0f, .top_p = 1.0f};
  if ((st = kiln_sampler_new(&greedy, &sampler))) return fail(st);
  kiln_generate_stats stats;
  st = kiln_generate(session, ids, (int32_t)n_ids, atoi(argv[3]), sampler, print_piece, NULL, NULL, &stats);
  if (st) return fail(st);
  printf("\n");
  fprintf(stderr, "embed_example: %d prompt tokens, %d generated\n", stats.n_prompt, stats.n_generated);

  free(ids);
  kiln_sampler_free(sampler);
  kiln_session_free(session);
  kiln_model_free(model);
  kiln_runtime_free(rt);
  return 0;
}
