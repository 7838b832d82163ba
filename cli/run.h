/* kiln run's parts: collecting and streaming the generated text, the
 * summary, and conversation mode (run_conversation.c). */
#ifndef KILN_CLI_RUN_H
#define KILN_CLI_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "kiln/chat.h"

/* What a generation produced: its ids and text, kept for --json and the
 * next turn, and streamed to stdout unless json. */
typedef struct run_output {
  bool json;
  int32_t *ids;
  size_t n_ids, cap_ids;
  char *text;
  size_t len, cap;
  bool out_of_memory;
} run_output;

/* The kiln_token_callback of every generation in kiln run. */
bool run_on_token(int32_t token, const char *piece, size_t len, void *user);
/* Empties o for the next generation (keeps its buffers). */
void run_output_reset(run_output *o);
void run_output_free(run_output *o);

/* "eos", "stop", "ctx" or "n_predict": why the generation ended. */
const char *run_stop_reason(const kiln_generate_stats *st);
/* "prefill X tok/s, decode Y tok/s" (no decode speed when nothing was
 * decoded: with -n 1 the only token comes from the prefill). */
void run_print_speed(FILE *out, const kiln_generate_stats *st);
/* An array of ids. */
json_t *run_ids_json(const int32_t *ids, size_t n);
/* The progress display of a long prefill (kiln_prefill_callback). */
void run_prefill_progress(int32_t done, int32_t total, void *user);

typedef struct run_conversation_args {
  kiln_session *session;
  kiln_sampler *sampler;
  kiln_chat_kind kind;
  const char *system;      /* or NULL */
  const char *first;       /* the first user message (-p / -f), or NULL: read it */
  kiln_generate_options gen;
  bool json, show_ids;
  FILE *in;                /* the user's messages, one per line ("\" at the end continues it) */
} run_conversation_args;

/* A multi-turn conversation: each user message goes into the KV cache after
 * the reply before it (kiln_chat_next_turn), never the history again; one
 * summary per turn (JSON lines with json). Ends at end of input, or when
 * the KV cache is full. Returns the exit status. */
int run_conversation(const run_conversation_args *a);

#endif
