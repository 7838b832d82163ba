/* Streaming and keeping what kiln run generates, and its summary. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "run.h"

bool run_on_token(int32_t token, const char *piece, size_t len, void *user) {
  run_output *o = user;
  if (o->n_ids == o->cap_ids) {
    size_t cap = o->cap_ids ? 2 * o->cap_ids : 64;
    int32_t *ids = realloc(o->ids, cap * sizeof *ids);
    if (!ids) {
      o->out_of_memory = true;
      return false;
    }
    o->ids = ids;
    o->cap_ids = cap;
  }
  o->ids[o->n_ids++] = token;
  if (o->len + len + 1 > o->cap) {
    size_t cap = o->cap ? o->cap : 256;
    while (cap < o->len + len + 1) cap *= 2;
    char *t = realloc(o->text, cap);
    if (!t) {
      o->out_of_memory = true;
      return false;
    }
    o->text = t;
    o->cap = cap;
  }
  memcpy(o->text + o->len, piece, len);
  o->len += len;
  o->text[o->len] = 0;
  if (!o->json && len) {
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
  }
  return true;
}

void run_output_reset(run_output *o) {
  o->n_ids = 0;
  o->len = 0;
  if (o->text) o->text[0] = 0;
}

void run_output_free(run_output *o) {
  free(o->ids);
  free(o->text);
  memset(o, 0, sizeof *o);
}

const char *run_stop_reason(const kiln_generate_stats *st) {
  if (st->stopped_at_eos) return "eos";
  if (st->stop_index >= 0) return "stop";
  if (st->stopped_at_ctx) return "ctx";
  return "n_predict";
}

void run_print_speed(FILE *out, const kiln_generate_stats *st) {
  fprintf(out, "prefill %.1f tok/s", st->prefill_seconds > 0 ? st->n_prompt / st->prefill_seconds : 0.0);
  if (st->n_decoded > 0 && st->decode_seconds > 0)
    fprintf(out, ", decode %.1f tok/s", st->n_decoded / st->decode_seconds);
  else
    fputs(", no decode step", out);
}

json_t *run_ids_json(const int32_t *ids, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++) json_array_append_new(a, json_integer(ids[i]));
  return a;
}

void run_prefill_progress(int32_t done, int32_t total, void *user) {
  (void)user;
  if (done < total) cli_progress("kiln: prefill %d/%d tokens", done, total);
  else cli_progress_clear();
}
