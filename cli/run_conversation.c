/* kiln run -i: a conversation whose history stays in the KV cache. Each
 * turn feeds only what is new — the end of the previous reply and the
 * user's message in the template (kiln_chat_next_turn) — after what the
 * cache already holds, as llama-cli's conversation mode does. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

/* One user message from `in`: a line without its newline; a line ending in
 * "\" goes on with the next (llama-cli's multi-line input). Empty lines are
 * skipped. NULL at the end of input; *out_err on a NUL byte or no memory. */
static char *read_message(FILE *in, kiln_status *out_err) {
  char *msg = NULL, *line = NULL;
  size_t len = 0, cap = 0;
  *out_err = NULL;
  for (;;) {
    ssize_t n = getline(&line, &cap, in);
    if (n < 0) break;
    if (memchr(line, 0, (size_t)n)) {
      *out_err = kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "a message on standard input holds a NUL byte");
      break;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    bool more = n > 0 && line[n - 1] == '\\';
    if (more) line[n - 1] = '\n'; /* the backslash becomes the newline it escaped */
    char *m = realloc(msg, len + (size_t)n + 1);
    if (!m) {
      *out_err = kiln_status_new(KILN_STATUS_NO_MEMORY, "message");
      break;
    }
    msg = m;
    memcpy(msg + len, line, (size_t)n);
    len += (size_t)n;
    msg[len] = 0;
    if (more) continue;
    if (len > 0) break;
  }
  free(line);
  if (*out_err || len == 0) {
    free(msg);
    return NULL;
  }
  return msg;
}

/* How the last reply ended, for the next turn: the token still to feed (the
 * last sampled one is never fed by kiln_generate_with), and whether it is
 * the template's own end of turn. */
typedef struct reply_end {
  int32_t pending; /* -1: none */
  bool closed;
} reply_end;

static reply_end end_of_reply(const run_output *o, const kiln_generate_stats *st, int32_t turn_end) {
  reply_end e = {-1, false};
  if (o->n_ids == 0) return e;
  int32_t last = o->ids[o->n_ids - 1];
  if (st->stopped_at_eos) {
    /* the template's end of turn goes into the cache; another EOS (e.g.
       <|endoftext|>) does not, and the template closes the turn itself */
    if (last == turn_end) e = (reply_end){last, true};
    return e;
  }
  e.pending = last;
  return e;
}

/* The tokens of turn `turn` (1-based): the whole first prompt, or what
 * follows the previous reply. */
static kiln_status turn_ids(const run_conversation_args *a, const kiln_vocab *v, int turn, const char *msg,
                            reply_end prev, int32_t **out_ids, size_t *out_n) {
  if (turn == 1) {
    kiln_chat_message msgs[2] = {{"system", a->system}, {"user", msg}};
    return kiln_chat_tokenize(v, a->kind, a->system ? msgs : msgs + 1, a->system ? 2 : 1, true, out_ids, out_n,
                              NULL);
  }
  int32_t *next;
  size_t n_next;
  KILN_RETURN_IF_ERROR(kiln_chat_next_turn(v, a->kind, prev.closed, msg, &next, &n_next, NULL));
  size_t lead = prev.pending >= 0 ? 1 : 0;
  int32_t *ids = malloc((n_next + lead) * sizeof *ids);
  if (!ids) {
    free(next);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "turn");
  }
  if (lead) ids[0] = prev.pending;
  memcpy(ids + lead, next, n_next * sizeof *ids);
  free(next);
  *out_ids = ids;
  *out_n = n_next + lead;
  return NULL;
}

static void print_ids(const char *what, int turn, const int32_t *ids, size_t n) {
  fprintf(stderr, "turn %d %s:", turn, what);
  for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
  fputc('\n', stderr);
}

int run_conversation(const run_conversation_args *a) {
  kiln_session *s = a->session;
  const kiln_vocab *v = kiln_model_vocab(kiln_session_model(s));
  int32_t turn_end = kiln_chat_turn_end(a->kind, v);
  bool prompt_user = !a->json && isatty(fileno(a->in));
  run_output out = {.json = a->json};
  reply_end prev = {-1, false};
  kiln_status st = NULL;
  int rc = CLI_EXIT_OK;
  for (int turn = 1;; turn++) {
    char *msg = NULL;
    if (turn == 1 && a->first) {
      msg = strdup(a->first);
      if (!msg) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "message");
    } else {
      if (prompt_user) {
        fputs("> ", stdout);
        fflush(stdout);
      }
      msg = read_message(a->in, &st);
    }
    if (!msg) break; /* end of input, or st */
    int32_t *ids = NULL;
    size_t n_ids = 0;
    st = turn_ids(a, v, turn, msg, prev, &ids, &n_ids);
    free(msg);
    int32_t kv_before = kiln_session_pos(s), n_ctx = kiln_session_n_ctx(s);
    if (!st && (int64_t)kv_before + (int64_t)n_ids >= n_ctx)
      st = kiln_status_new(KILN_STATUS_OUT_OF_RANGE,
                           "turn %d does not fit: the KV cache holds %d %s, %d %s used and the turn needs %zu "
                           "more and room to reply (raise -c / [model] n_ctx)",
                           turn, n_ctx, n_ctx == 1 ? "position" : "positions", kv_before,
                           kv_before == 1 ? "is" : "are", n_ids);
    kiln_generate_stats gs = {0};
    run_output_reset(&out);
    if (!st) st = kiln_generate_with(s, ids, (int32_t)n_ids, &a->gen, a->sampler, run_on_token, &out, NULL, &gs);
    if (!st && out.out_of_memory) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "generated text");
    if (st) {
      free(ids);
      break;
    }
    if (a->json) {
      json_t *j = json_pack("{s:i, s:i, s:i, s:i, s:o, s:o, s:o, s:s, s:f, s:f}", "turn", turn, "prefill_tokens",
                            gs.n_prompt, "kv_before", kv_before, "kv_after", kiln_session_pos(s), "prompt_ids",
                            run_ids_json(ids, n_ids), "generated_ids", run_ids_json(out.ids, out.n_ids), "text",
                            cli_json_text(out.text ? out.text : "", out.len), "stop", run_stop_reason(&gs),
                            "prefill_seconds", gs.prefill_seconds, "decode_seconds", gs.decode_seconds);
      if (!cli_json_print(j)) rc = CLI_EXIT_FAIL;
      fflush(stdout);
    } else {
      fputc('\n', stdout);
      fflush(stdout);
      if (a->show_ids) {
        print_ids("prompt ids", turn, ids, n_ids);
        print_ids("generated ids", turn, out.ids, out.n_ids);
      }
      fprintf(stderr, "kiln: turn %d | prefill %d tokens after %d in the KV cache, generated %d | ", turn,
              gs.n_prompt, kv_before, gs.n_generated);
      run_print_speed(stderr, &gs);
      fputc('\n', stderr);
    }
    free(ids);
    if (rc) break;
    if (gs.stopped_at_ctx) {
      /* The reply filled the cache: a message still to come cannot be
       * answered (an error, as a turn that does not fit is); at the end of
       * input the conversation is simply over, with the reply cut short.
       * On a terminal the next message would be typed now: there is none
       * to wait for. */
      char *next = prompt_user ? NULL : read_message(a->in, &st);
      if (prompt_user || next)
        st = kiln_status_new(KILN_STATUS_OUT_OF_RANGE,
                             "turn %d's reply filled the KV cache of %d %s: no room for turn %d "
                             "(raise -c / [model] n_ctx)",
                             turn, n_ctx, n_ctx == 1 ? "position" : "positions", turn + 1);
      else if (!st)
        fprintf(stderr, "kiln run: warning: turn %d's reply stopped when the KV cache of %d %s was full "
                        "(raise -c)\n",
                turn, n_ctx, n_ctx == 1 ? "position" : "positions");
      free(next);
      break;
    }
    prev = end_of_reply(&out, &gs, turn_end);
  }
  run_output_free(&out);
  if (st) rc = cli_fail("run", st);
  return rc;
}
