/*
 * kiln/kiln.h — the embedding API: what the `kiln` command itself uses.
 *
 *   kiln_runtime_open()   configuration (file, environment, overrides) and
 *                         the plugin registry
 *   kiln_model_open()     a GGUF model (kiln/model.h)
 *   kiln_session_open()   the model's graph planned on a backend, with a KV
 *                         cache; kiln_session_eval() feeds tokens (prefill in
 *                         micro-batches, then decode one at a time)
 *   kiln_generate()       prompt -> sampled tokens, streamed to a callback
 *
 * A minimal program (tests/embed/embed_example.c is a complete one):
 *
 *   kiln_runtime *rt; kiln_model *m; kiln_session *s;
 *   kiln_runtime_open(&(kiln_runtime_options){0}, &rt);
 *   kiln_model_open("stories260K.gguf", &m);
 *   kiln_session_open(rt, m, NULL, &s);
 *   ... kiln_tokenize(kiln_model_vocab(m), ...), kiln_generate(s, ...) ...
 *
 * Every function that can fail returns a kiln_status (kiln/status.h).
 * Ownership: a session borrows its runtime and model (free the session
 * first); everything else is owned by whoever opened it.
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/backend.h"
#include "kiln/config.h"
#include "kiln/model.h"
#include "kiln/plan.h"
#include "kiln/sampler.h"
#include "kiln/status.h"
#include "kiln/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* kiln's version, "0.1.0". */
const char *kiln_version(void);

/* One `section.key = value` override (a command-line flag). */
typedef struct kiln_config_override {
  const char *section, *key, *value;
  const char *origin; /* e.g. "--backend", named in errors */
} kiln_config_override;

typedef struct kiln_runtime_options {
  /* The INI file; NULL means $KILN_CONFIG when set, else no file (the
   * declared defaults). */
  const char *config_path;
  /* Whether the KILN_* environment variables apply (kiln/config.h). */
  bool use_environment;
  const kiln_config_override *overrides;
  size_t n_overrides;
  /* Folders (':'-separated) searched for plugins after [general]
   * plugin_path and before the installed folder; NULL for none. The kiln
   * command passes its build tree's plugin folder here when it runs
   * uninstalled. */
  const char *extra_plugin_path;
} kiln_runtime_options;

typedef struct kiln_runtime kiln_runtime;

/* Loads and validates the configuration — plugins that own sections of it
 * are loaded so their keys can be checked; an unknown section or key is an
 * error naming file and line — and sets the log level. */
kiln_status kiln_runtime_open(const kiln_runtime_options *opt, kiln_runtime **out_runtime);
void kiln_runtime_free(kiln_runtime *rt);
const kiln_config *kiln_runtime_config(const kiln_runtime *rt);
/* The kernel-cache service ([kernel_cache]) the runtime hands to plugins. */
struct kiln_kcache *kiln_runtime_kcache(kiln_runtime *rt);
kiln_plugin_registry *kiln_runtime_plugins(kiln_runtime *rt);

typedef struct kiln_session_options {
  const char *backend;  /* NULL: [backend] name */
  int32_t n_ctx;        /* 0: [model] n_ctx, else the model's context, at most 4096 */
  int32_t batch;        /* 0: [backend] batch */
  int fallback_cpu;     /* -1: [backend] fallback; 0: error; 1: cpu */
  float eps_override;   /* 0, or plan every RMSNorm with this ε (parity self-test) */
  /* Settings for this session only, over the runtime's configuration (e.g.
   * {"cpu", "precision", "f64"} for an f64 reference beside an f32 run). */
  const kiln_config_override *overrides;
  size_t n_overrides;
} kiln_session_options;

typedef struct kiln_session kiln_session;

/* Builds the graph and plans it (kiln/plan.h errors), then preloads every
 * kernel. opt may be NULL (all defaults). A KV length past the model's
 * context_length is allowed, as llama.cpp allows it, and logged as a
 * warning naming both lengths and the file. */
kiln_status kiln_session_open(kiln_runtime *rt, const kiln_model *m, const kiln_session_options *opt,
                              kiln_session **out_session);
void kiln_session_free(kiln_session *s);

kiln_plan *kiln_session_plan(kiln_session *s);
const kiln_model *kiln_session_model(const kiln_session *s);
/* Tokens in the KV cache so far (the next token's position). */
int32_t kiln_session_pos(const kiln_session *s);
/* The KV length in positions: the session option, else [model] n_ctx (N;
 * 0: the model's context_length; -1: that, at most 4096). */
int32_t kiln_session_n_ctx(const kiln_session *s);
/* Bytes of per-sequence state the session's graph holds (the KV caches,
 * f32 [width, n_ctx] per layer and K/V, and Qwen3.5's recurrent state). */
uint64_t kiln_session_state_bytes(const kiln_session *s);
/* Forgets the sequence: the next eval starts at position 0, where the KV
 * caches are overwritten and every recurrent layer's state (conv and
 * delta-rule, kiln/graph.h's RECURRENT tensors) starts again from zeros. */
void kiln_session_reset(kiln_session *s);
/* Forgets the tokens at positions >= pos: the next eval starts at pos and
 * overwrites their KV cache rows, which no step reads before it writes
 * them (llama.cpp's llama_memory_seq_rm from pos to the end). pos 0 is
 * kiln_session_reset. KILN_STATUS_OUT_OF_RANGE when pos is negative or past
 * kiln_session_pos; KILN_STATUS_UNSUPPORTED, naming the tensor, when
 * pos > 0 and the graph holds recurrent state (Qwen3.5's conv and
 * delta-rule state folds every position in). */
kiln_status kiln_session_rewind(kiln_session *s, int32_t pos);

/* Feeds ids[0..n) at the current position, in micro-batches of the
 * session's batch, and advances it. out_logits, if not NULL, receives
 * [n_vocab] logits of the last token; out_all_logits, if not NULL,
 * [n_vocab, n] logits of every token (ne0 first). KILN_STATUS_OUT_OF_RANGE
 * when the cache would overflow (naming both lengths) or an id is not in
 * the vocabulary. KILN_STATUS_CHECK_FAILED when logits it reads hold a NaN
 * or an infinity: the message names the step (counted from open or reset),
 * its positions, the logit, and the first node whose output was not finite
 * (found by running the step again with an observer; one set by the caller
 * is put back). */
kiln_status kiln_session_eval(kiln_session *s, const int32_t *ids, int32_t n, float *out_logits,
                              float *out_all_logits);

/* Called with each generated token and its text (raw bytes: a UTF-8
 * character may be split across tokens). Return false to stop. */
typedef bool (*kiln_token_callback)(int32_t token, const char *piece, size_t len, void *user);

typedef struct kiln_generate_stats {
  int32_t n_prompt, n_generated;
  int32_t n_decoded; /* decode steps run (generated tokens fed back) */
  double prefill_seconds, decode_seconds;
  bool stopped_at_eos; /* ended on EOS / end-of-turn rather than n_predict */
  bool stopped_at_ctx; /* ended because the KV cache was full */
  int32_t stop_index;  /* the stop string that ended it (kiln_generate_options.stop), else -1 */
} kiln_generate_stats;

/* Called during the prefill, after every micro-batch: `done` of `total`
 * prompt tokens are in the KV cache. For progress displays. */
typedef void (*kiln_prefill_callback)(int32_t done, int32_t total, void *user);

typedef struct kiln_generate_options {
  /* Tokens to sample; a negative value samples until EOS / end-of-turn or
   * until the KV cache is full (llama.cpp's -n -1). */
  int32_t n_predict;
  /* EOS and end-of-turn are never sampled (their logits are set to -inf
   * first), as llama.cpp's --ignore-eos. */
  bool ignore_eos;
  /* Generation ends after the token whose text completes one of these byte
   * strings (searched in the text generated by this call; the token and its
   * text are reported to the callback first, as llama-cli shows its reverse
   * prompt). Empty strings are ignored. */
  const char *const *stop;
  size_t n_stop;
  kiln_prefill_callback on_prefill; /* may be NULL */
  void *prefill_user;
} kiln_generate_options;

/* Prefills prompt[0..n_prompt) (after whatever the session already holds)
 * in micro-batches of the session's batch, then samples up to
 * opt->n_predict tokens, stopping after EOS or end-of-turn (which are
 * reported to cb but not rendered), after a stop string, or when the KV
 * cache is full (stats.stopped_at_ctx). out_ids, if not NULL, has room for
 * n_predict ids (pass NULL with a negative n_predict and collect the ids in
 * cb). The last sampled token is not fed back (nobody reads its logits): to
 * continue, pass it to kiln_session_eval() or the next call first.
 * KILN_STATUS_INVALID_ARGUMENT for an empty prompt or a NULL opt; errors of
 * eval and sampling pass through. */
kiln_status kiln_generate_with(kiln_session *s, const int32_t *prompt, int32_t n_prompt,
                               const kiln_generate_options *opt, kiln_sampler *sampler, kiln_token_callback cb,
                               void *user, int32_t *out_ids, kiln_generate_stats *out_stats);

/* kiln_generate_with() with only n_predict set. */
kiln_status kiln_generate(kiln_session *s, const int32_t *prompt, int32_t n_prompt, int32_t n_predict,
                          kiln_sampler *sampler, kiln_token_callback cb, void *user, int32_t *out_ids,
                          kiln_generate_stats *out_stats);

#ifdef __cplusplus
}
#endif
#endif /* KILN_KILN_H */
