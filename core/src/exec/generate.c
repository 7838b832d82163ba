/* Prefill, then sample and decode one token at a time, until n_predict,
 * end of text, a stop string or a full KV cache. */
#include "config.h"

#include "kiln/kiln.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The prompt in micro-batches of the session's batch, so a progress display
 * can follow; the last batch's logits land in `logits`. */
static kiln_status prefill(kiln_session *s, const int32_t *prompt, int32_t n, const kiln_generate_options *opt,
                           float *logits) {
  if (!opt->on_prefill) return kiln_session_eval(s, prompt, n, logits, NULL);
  int32_t batch = kiln_graph_batch(kiln_plan_graph(kiln_session_plan(s)));
  for (int32_t done = 0; done < n;) {
    int32_t m = n - done < batch ? n - done : batch;
    KILN_RETURN_IF_ERROR(kiln_session_eval(s, prompt + done, m, done + m == n ? logits : NULL, NULL));
    done += m;
    opt->on_prefill(done, n, opt->prefill_user);
  }
  return NULL;
}

/* The generated text so far, for stop strings. */
typedef struct text_buf {
  char *b;
  size_t len, cap;
} text_buf;

static kiln_status text_append(text_buf *t, const char *piece, size_t len) {
  if (t->len + len > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->len + len) cap *= 2;
    char *b = realloc(t->b, cap);
    if (!b) return kiln_status_new(KILN_STATUS_NO_MEMORY, "generated text: %zu bytes", cap);
    t->b = b;
    t->cap = cap;
  }
  memcpy(t->b + t->len, piece, len);
  t->len += len;
  return NULL;
}

/* The first stop string that ends within the last `added` bytes of t (it
 * may begin in earlier text), else -1. */
static int32_t stop_hit(const text_buf *t, size_t added, const kiln_generate_options *opt) {
  for (size_t k = 0; k < opt->n_stop; k++) {
    size_t sl = opt->stop[k] ? strlen(opt->stop[k]) : 0;
    if (sl == 0 || sl > t->len) continue;
    /* candidate ends: t->len - added + 1 .. t->len */
    size_t first_end = t->len - added + 1 > sl ? t->len - added + 1 : sl;
    for (size_t end = first_end; end <= t->len; end++)
      if (memcmp(t->b + end - sl, opt->stop[k], sl) == 0) return (int32_t)k;
  }
  return -1;
}

kiln_status kiln_generate_with(kiln_session *s, const int32_t *prompt, int32_t n_prompt,
                               const kiln_generate_options *opt, kiln_sampler *sampler, kiln_token_callback cb,
                               void *user, int32_t *out_ids, kiln_generate_stats *out_stats) {
  const kiln_model *m = kiln_session_model(s);
  const kiln_vocab *v = kiln_model_vocab(m);
  uint32_t n_vocab = kiln_model_hparams(m)->n_vocab;
  kiln_generate_stats st0 = {n_prompt, 0, 0, 0.0, 0.0, false, false, -1};
  if (out_stats) *out_stats = st0;
  if (!opt) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "generate: no options");
  if (n_prompt < 1)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "generate: the prompt has no tokens");
  float *logits = malloc((size_t)n_vocab * sizeof *logits);
  if (!logits) return kiln_status_new(KILN_STATUS_NO_MEMORY, "logits");

  double t0 = now_seconds();
  kiln_status st = prefill(s, prompt, n_prompt, opt, logits);
  double t1 = now_seconds();
  st0.prefill_seconds = t1 - t0;
  int32_t eos = v ? kiln_vocab_eos(v) : -1, eot = v ? kiln_vocab_eot(v) : -1;
  text_buf text = {0};
  char piece[256];
  for (int32_t i = 0; !st && (opt->n_predict < 0 || i < opt->n_predict); i++) {
    if (opt->ignore_eos) {
      if (eos >= 0 && (uint32_t)eos < n_vocab) logits[eos] = -INFINITY;
      if (eot >= 0 && (uint32_t)eot < n_vocab) logits[eot] = -INFINITY;
    }
    int32_t tok;
    st = kiln_sampler_sample(sampler, logits, (int32_t)n_vocab, &tok);
    if (st) break;
    if (out_ids) out_ids[i] = tok;
    st0.n_generated++;
    bool end = tok == eos || tok == eot;
    size_t len = 0;
    if (v && !end) st = kiln_token_to_piece(v, tok, false, piece, sizeof piece, &len);
    if (!st && opt->n_stop && len) st = text_append(&text, piece, len);
    if (st) break;
    if (cb && !cb(tok, piece, len, user)) break;
    if (end) {
      st0.stopped_at_eos = true;
      break;
    }
    if (opt->n_stop && len && (st0.stop_index = stop_hit(&text, len, opt)) >= 0) break;
    if (i + 1 == opt->n_predict) break; /* no need to evaluate a token nobody reads */
    if (kiln_session_pos(s) >= kiln_session_n_ctx(s)) {
      st0.stopped_at_ctx = true;
      break;
    }
    st = kiln_session_eval(s, &tok, 1, logits, NULL);
    if (!st) st0.n_decoded++;
  }
  st0.decode_seconds = now_seconds() - t1;
  free(text.b);
  free(logits);
  if (out_stats) *out_stats = st0;
  return st;
}

kiln_status kiln_generate(kiln_session *s, const int32_t *prompt, int32_t n_prompt, int32_t n_predict,
                          kiln_sampler *sampler, kiln_token_callback cb, void *user, int32_t *out_ids,
                          kiln_generate_stats *out_stats) {
  kiln_generate_options opt = {.n_predict = n_predict};
  return kiln_generate_with(s, prompt, n_prompt, &opt, sampler, cb, user, out_ids, out_stats);
}
