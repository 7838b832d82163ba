/* Perplexity over fixed-length chunks, as llama-perplexity computes it
 * (kiln/perplexity.h). */
#include "config.h"

#include "kiln/perplexity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* -log softmax(logits)[tok], in double. */
static double token_nll(const float *logits, int32_t n_vocab, int32_t tok) {
  double max = logits[0];
  for (int32_t i = 1; i < n_vocab; i++)
    if (logits[i] > max) max = logits[i];
  double sum = 0.0;
  for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - max);
  return max + log(sum) - (double)logits[tok];
}

typedef struct sums {
  double nll, nll2;
  int64_t count;
} sums;

/* One chunk: tokens[0..n_ctx) from an empty cache, in micro-batches; each
 * position j in [first, n_ctx - 1) scores tokens[j + 1]. */
static kiln_status score_chunk(kiln_session *s, const int32_t *tokens, int32_t n_ctx, int32_t bos, int32_t batch,
                               int32_t n_vocab, float *logits, int32_t *ids, sums *acc) {
  int32_t first = n_ctx / 2;
  kiln_session_reset(s);
  for (int32_t at = 0; at < n_ctx; at += batch) {
    int32_t m = n_ctx - at < batch ? n_ctx - at : batch;
    memcpy(ids, tokens + at, (size_t)m * sizeof *ids);
    if (at == 0 && bos >= 0) ids[0] = bos;
    /* positions before `first` are not scored, but their logits come with
       the micro-batch: reading a row is cheap next to computing it */
    KILN_RETURN_IF_ERROR(kiln_session_eval(s, ids, m, NULL, logits));
    for (int32_t k = 0; k < m; k++) {
      int32_t j = at + k;
      if (j < first || j >= n_ctx - 1) continue;
      double v = token_nll(logits + (size_t)k * (size_t)n_vocab, n_vocab, tokens[j + 1]);
      acc->nll += v;
      acc->nll2 += v * v;
      acc->count++;
    }
  }
  return NULL;
}

kiln_status kiln_perplexity_check(const kiln_session *s, size_t n_tokens, const kiln_perplexity_options *opt) {
  int32_t n_ctx = opt->n_ctx, session_ctx = kiln_session_n_ctx(s);
  if (n_ctx < 3 || n_ctx > session_ctx)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "perplexity: a context of %d tokens; it must be at least 3 and at most the session's %d",
                           n_ctx, session_ctx);
  if (n_tokens < 2 * (size_t)n_ctx)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "perplexity: you need at least %lld tokens to evaluate perplexity with a context of %d; "
                           "the text tokenizes to only %zu",
                           2LL * n_ctx, n_ctx, n_tokens);
  return NULL;
}

kiln_status kiln_perplexity(kiln_session *s, const int32_t *tokens, size_t n_tokens,
                            const kiln_perplexity_options *opt, kiln_perplexity_callback cb, void *user,
                            kiln_perplexity_result *out) {
  memset(out, 0, sizeof *out);
  KILN_RETURN_IF_ERROR(kiln_perplexity_check(s, n_tokens, opt));
  int32_t n_ctx = opt->n_ctx;
  const kiln_model *m = kiln_session_model(s);
  const kiln_vocab *v = kiln_model_vocab(m);
  int32_t n_vocab = (int32_t)kiln_model_hparams(m)->n_vocab;
  int32_t bos = v && kiln_vocab_add_bos(v) ? kiln_vocab_bos(v) : -1;
  int32_t batch = kiln_graph_batch(kiln_plan_graph(kiln_session_plan(s)));
  int64_t n_chunk_max = (int64_t)(n_tokens / (size_t)n_ctx);
  int32_t n_chunk = (int32_t)(opt->n_chunks > 0 && opt->n_chunks < n_chunk_max ? opt->n_chunks : n_chunk_max);
  float *logits = malloc((size_t)n_vocab * (size_t)batch * sizeof *logits);
  int32_t *ids = malloc((size_t)batch * sizeof *ids);
  double *chunk_ppl = calloc((size_t)n_chunk, sizeof *chunk_ppl);
  kiln_status st = NULL;
  if (!logits || !ids || !chunk_ppl)
    st = kiln_status_new(KILN_STATUS_NO_MEMORY, "perplexity: logits of %d x %d", n_vocab, batch);
  sums acc = {0.0, 0.0, 0};
  double t_all = 0.0;
  for (int32_t c = 0; !st && c < n_chunk; c++) {
    double t0 = now_seconds();
    st = score_chunk(s, tokens + (size_t)c * (size_t)n_ctx, n_ctx, bos, batch, n_vocab, logits, ids, &acc);
    if (st) {
      st = kiln_status_annotate(st, "perplexity: chunk %d of %d", c + 1, n_chunk);
      break;
    }
    double dt = now_seconds() - t0;
    t_all += dt;
    chunk_ppl[c] = exp(acc.nll / (double)acc.count);
    if (cb) cb(c, n_chunk, chunk_ppl[c], dt, user);
  }
  free(logits);
  free(ids);
  if (st) {
    free(chunk_ppl);
    return st;
  }
  double mean = acc.nll / (double)acc.count, mean2 = acc.nll2 / (double)acc.count;
  double var = mean2 - mean * mean;
  out->n_ctx = n_ctx;
  out->n_chunk = n_chunk;
  out->n_tokens = (int64_t)n_tokens;
  out->n_scored = acc.count;
  out->nll_mean = mean;
  out->ppl = exp(mean);
  out->ppl_err = var > 0 && acc.count > 1 ? out->ppl * sqrt(var / (double)(acc.count - 1)) : 0.0;
  out->chunk_ppl = chunk_ppl;
  out->seconds = t_all;
  return NULL;
}

void kiln_perplexity_result_clear(kiln_perplexity_result *r) {
  free(r->chunk_ppl);
  memset(r, 0, sizeof *r);
}
