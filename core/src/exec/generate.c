/* Prefill, then sample and decode one token at a time. */
#include "config.h"

#include "kiln/kiln.h"

#include <stdlib.h>
#include <time.h>

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

kiln_status kiln_generate(kiln_session *s, const int32_t *prompt, int32_t n_prompt, int32_t n_predict,
                          kiln_sampler *sampler, kiln_token_callback cb, void *user, int32_t *out_ids,
                          kiln_generate_stats *out_stats) {
  const kiln_model *m = kiln_session_model(s);
  const kiln_vocab *v = kiln_model_vocab(m);
  uint32_t n_vocab = kiln_model_hparams(m)->n_vocab;
  kiln_generate_stats st0 = {n_prompt, 0, 0, 0.0, 0.0, false, false};
  if (out_stats) *out_stats = st0;
  if (n_prompt < 1)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "generate: the prompt has no tokens");
  float *logits = malloc((size_t)n_vocab * sizeof *logits);
  if (!logits) return kiln_status_new(KILN_STATUS_NO_MEMORY, "logits");

  double t0 = now_seconds();
  kiln_status st = kiln_session_eval(s, prompt, n_prompt, logits, NULL);
  double t1 = now_seconds();
  st0.prefill_seconds = t1 - t0;
  int32_t eos = v ? kiln_vocab_eos(v) : -1, eot = v ? kiln_vocab_eot(v) : -1;
  char piece[256];
  for (int32_t i = 0; !st && i < n_predict; i++) {
    int32_t tok;
    st = kiln_sampler_sample(sampler, logits, (int32_t)n_vocab, &tok);
    if (st) break;
    if (out_ids) out_ids[i] = tok;
    st0.n_generated++;
    bool end = tok == eos || tok == eot;
    size_t len = 0;
    if (v && !end) st = kiln_token_to_piece(v, tok, false, piece, sizeof piece, &len);
    if (st) break;
    if (cb && !cb(tok, piece, len, user)) break;
    if (end) {
      st0.stopped_at_eos = true;
      break;
    }
    if (i + 1 == n_predict) break; /* no need to evaluate a token nobody reads */
    if (kiln_session_pos(s) >= kiln_session_n_ctx(s)) {
      st0.stopped_at_ctx = true;
      break;
    }
    st = kiln_session_eval(s, &tok, 1, logits, NULL);
    if (!st) st0.n_decoded++;
  }
  st0.decode_seconds = now_seconds() - t1;
  free(logits);
  if (out_stats) *out_stats = st0;
  return st;
}
