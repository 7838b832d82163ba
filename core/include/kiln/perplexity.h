/*
 * kiln/perplexity.h — perplexity of a model over a token sequence, as
 * llama.cpp's llama-perplexity computes it (tools/perplexity/perplexity.cpp,
 * perplexity() without --ppl-stride; the method of Hugging Face's
 * "Perplexity of fixed-length models" guide):
 *
 *   - the tokens are cut into n_chunk = n_tokens / n_ctx chunks of n_ctx
 *     tokens (a shorter tail is dropped), each evaluated from an empty KV
 *     cache;
 *   - when the vocabulary adds BOS (tokenizer.ggml.add_bos_token), each
 *     chunk's first token is replaced by BOS for the evaluation;
 *   - in each chunk, the tokens after position first = n_ctx / 2 are
 *     scored: for j in [first, n_ctx - 1), nll_j = -log softmax(logits_j)
 *     [token_{j+1}], so every scored token has at least n_ctx / 2 tokens of
 *     context; that is n_ctx - 1 - first tokens per chunk;
 *   - PPL = exp(mean nll) over all scored tokens, and its uncertainty, as
 *     llama.cpp prints it ("PPL = x +/- e"): e = PPL * sqrt(var / (count - 1))
 *     with var = mean(nll^2) - mean(nll)^2, the standard error of the mean
 *     nll carried through exp to first order.
 *
 * kiln computes the log-softmax in double (llama.cpp: float max, float exp
 * summed in double), from logits read at every position
 * (kiln_session_eval's out_all_logits), one micro-batch at a time, so
 * memory is n_vocab x batch floats whatever n_ctx is.
 */
#ifndef KILN_PERPLEXITY_H
#define KILN_PERPLEXITY_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_perplexity_options {
  int32_t n_ctx;    /* tokens per chunk (llama-perplexity -c); >= 3, at most the session's n_ctx */
  int32_t n_chunks; /* use at most this many chunks (--chunks); <= 0: all */
} kiln_perplexity_options;

/* Called after each chunk (0-based `chunk` of n_chunk) with the running
 * perplexity over the chunks so far, which llama-perplexity prints as
 * "[chunk+1]ppl," and the chunk's evaluation time in seconds. */
typedef void (*kiln_perplexity_callback)(int32_t chunk, int32_t n_chunk, double running_ppl, double seconds,
                                         void *user);

typedef struct kiln_perplexity_result {
  int32_t n_ctx, n_chunk;
  int64_t n_tokens; /* of the input */
  int64_t n_scored; /* tokens scored: n_chunk * (n_ctx - 1 - n_ctx / 2) */
  double nll_mean;  /* mean negative log-likelihood, nats per token */
  double ppl;       /* exp(nll_mean) */
  double ppl_err;   /* llama.cpp's "+/-" (see above); 0 when it cannot be formed */
  double *chunk_ppl; /* [n_chunk]: the running perplexity after each chunk; malloc'd */
  double seconds;   /* evaluation time, all chunks */
} kiln_perplexity_result;

/* Scores tokens[0..n_tokens) on session s (reset before every chunk, and
 * left holding the last chunk). BOS handling follows s's model vocabulary.
 * cb may be NULL. Errors: KILN_STATUS_INVALID_ARGUMENT for n_ctx < 3 or
 * beyond the session's n_ctx, and for fewer than 2 * n_ctx tokens (as
 * llama-perplexity: "you need at least 2*n_ctx tokens", naming both
 * counts); KILN_STATUS_NO_MEMORY; errors of evaluation pass through. On
 * success out->chunk_ppl is the caller's (kiln_perplexity_result_clear). */
kiln_status kiln_perplexity(kiln_session *s, const int32_t *tokens, size_t n_tokens,
                            const kiln_perplexity_options *opt, kiln_perplexity_callback cb, void *user,
                            kiln_perplexity_result *out);

/* kiln_perplexity's checks of its arguments alone, the same errors: for a
 * caller that prints what it is about to do only once it can be done. */
kiln_status kiln_perplexity_check(const kiln_session *s, size_t n_tokens, const kiln_perplexity_options *opt);

/* Frees out->chunk_ppl and zeroes the result. */
void kiln_perplexity_result_clear(kiln_perplexity_result *r);

#ifdef __cplusplus
}
#endif
#endif /* KILN_PERPLEXITY_H */
