/*
 * kiln/sampler.h — choosing the next token from logits.
 *
 * Greedy (temperature 0: the argmax, lowest id on ties) or stochastic:
 * logits / temperature, keep the top_k largest (0 = all), softmax in
 * double, keep the smallest prefix whose probability reaches top_p
 * (Holtzman et al. 2019, "nucleus sampling"), renormalise, draw with a
 * seeded SplitMix64 stream (Steele et al. 2014), so a seed reproduces a
 * run exactly on any machine.
 */
#ifndef KILN_SAMPLER_H
#define KILN_SAMPLER_H

#include <stdint.h>

#include "kiln/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_sampler_options {
  float temperature; /* 0 = greedy; > 0 */
  int32_t top_k;     /* 0 = no limit */
  float top_p;       /* [0, 1]; 1 = no limit, 0 = only the most likely token */
  uint64_t seed;
} kiln_sampler_options;

typedef struct kiln_sampler kiln_sampler;

/* KILN_STATUS_INVALID_ARGUMENT for a negative or non-finite temperature,
 * negative top_k, or top_p outside [0, 1]. */
kiln_status kiln_sampler_new(const kiln_sampler_options *opt, kiln_sampler **out_sampler);
void kiln_sampler_free(kiln_sampler *s);

/* The next token from logits[0..n_vocab). KILN_STATUS_CHECK_FAILED if a
 * logit is NaN or every logit is -inf (a broken model or backend, which must
 * not be hidden by picking token 0). */
kiln_status kiln_sampler_sample(kiln_sampler *s, const float *logits, int32_t n_vocab,
                                int32_t *out_token);

/* The argmax alone (lowest id on ties), for greedy decoding and tests. */
int32_t kiln_argmax(const float *logits, int32_t n);

#ifdef __cplusplus
}
#endif
#endif
