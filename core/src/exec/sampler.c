/* Greedy, temperature, top-k and top-p sampling with a seeded stream. */
#include "config.h"

#include "kiln/sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

struct kiln_sampler {
  kiln_sampler_options opt;
  uint64_t state;
  /* scratch sized to the vocabulary on first use */
  struct cand {
    float logit;
    int32_t id;
  } *c;
  double *p;
  int32_t cap;
};

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

kiln_status kiln_sampler_new(const kiln_sampler_options *opt, kiln_sampler **out_sampler) {
  *out_sampler = NULL;
  if (!(opt->temperature >= 0.0f) || isinf(opt->temperature))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "sampler: temperature %g must be finite and >= 0",
                           (double)opt->temperature);
  if (opt->top_k < 0)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "sampler: top_k %d must be >= 0", opt->top_k);
  if (!(opt->top_p >= 0.0f && opt->top_p <= 1.0f))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "sampler: top_p %g must be in [0, 1]",
                           (double)opt->top_p);
  kiln_sampler *s = calloc(1, sizeof *s);
  if (!s) return kiln_status_new(KILN_STATUS_NO_MEMORY, "sampler");
  s->opt = *opt;
  s->state = opt->seed;
  *out_sampler = s;
  return NULL;
}

void kiln_sampler_free(kiln_sampler *s) {
  if (!s) return;
  free(s->c);
  free(s->p);
  free(s);
}

int32_t kiln_argmax(const float *logits, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (logits[i] > logits[best]) best = i;
  return best;
}

/* By logit, descending, ids ascending on ties (deterministic). */
static int by_logit_desc(const void *a, const void *b) {
  const struct cand *x = a, *y = b;
  if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

kiln_status kiln_sampler_sample(kiln_sampler *s, const float *logits, int32_t n_vocab, int32_t *out_token) {
  bool any_finite = false;
  for (int32_t i = 0; i < n_vocab; i++) {
    if (isnan(logits[i]))
      return kiln_status_new(KILN_STATUS_CHECK_FAILED, "sampler: logit %d is NaN", i);
    any_finite |= isfinite(logits[i]) != 0;
  }
  if (!any_finite)
    return kiln_status_new(KILN_STATUS_CHECK_FAILED, "sampler: no finite logit among %d", n_vocab);
  if (s->opt.temperature == 0.0f) {
    *out_token = kiln_argmax(logits, n_vocab);
    return NULL;
  }
  if (s->cap < n_vocab) {
    free(s->c);
    free(s->p);
    s->c = malloc((size_t)n_vocab * sizeof *s->c);
    s->p = malloc((size_t)n_vocab * sizeof *s->p);
    if (!s->c || !s->p) {
      s->cap = 0;
      return kiln_status_new(KILN_STATUS_NO_MEMORY, "sampler scratch");
    }
    s->cap = n_vocab;
  }
  for (int32_t i = 0; i < n_vocab; i++) s->c[i] = (struct cand){logits[i], i};
  qsort(s->c, (size_t)n_vocab, sizeof *s->c, by_logit_desc);
  int32_t k = s->opt.top_k > 0 && s->opt.top_k < n_vocab ? s->opt.top_k : n_vocab;
  double t = s->opt.temperature, top = s->c[0].logit, sum = 0.0;
  for (int32_t i = 0; i < k; i++) sum += s->p[i] = exp(((double)s->c[i].logit - top) / t);
  /* nucleus: smallest prefix reaching top_p of the (top-k) mass */
  double acc = 0.0;
  int32_t keep = k;
  for (int32_t i = 0; i < k; i++) {
    acc += s->p[i] / sum;
    if (acc >= s->opt.top_p) {
      keep = i + 1;
      break;
    }
  }
  double mass = 0.0;
  for (int32_t i = 0; i < keep; i++) mass += s->p[i];
  double r = (double)(splitmix64(&s->state) >> 11) * 0x1.0p-53 * mass;
  for (int32_t i = 0; i < keep; i++) {
    r -= s->p[i];
    if (r < 0.0) {
      *out_token = s->c[i].id;
      return NULL;
    }
  }
  *out_token = s->c[keep - 1].id;
  return NULL;
}
