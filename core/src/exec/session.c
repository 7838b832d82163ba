/* A session: a model's graph planned on a backend, and the KV cache's
 * position. Prefill goes in micro-batches of the session's batch. */
#include "config.h"

#include "kiln/kiln.h"

#include <stdlib.h>
#include <string.h>

#include "kiln/gguf.h"
#include "kiln/kv_cache.h"
#include "kiln/log.h"
#include "nonfinite.h"
#include "runtime_internal.h"

struct kiln_session {
  const kiln_model *model;
  kiln_config *config; /* a copy with the session's overrides, or NULL */
  kiln_graph *graph;
  kiln_plan *plan;
  int32_t pos;
  uint64_t steps; /* plan steps run since open or reset, for error messages */
  char n_ctx_hint[160]; /* what to raise when tokens do not fit (n_ctx_hint) */
};

/* "1 position", "4 positions". */
static const char *positions(int32_t n) { return n == 1 ? "position" : "positions"; }

/* What sets the KV length, for "does not fit" errors: the setting the user
 * gave it with (a flag, a file line), as "[model] n_ctx" alone is not what
 * `kiln run -c 4` typed. */
static void n_ctx_hint(const kiln_config *c, int32_t asked, char *out, size_t size) {
  const char *origin = kiln_config_origin(kiln_config_section_get(c, "model"), "n_ctx");
  if (asked > 0) snprintf(out, size, "the session's n_ctx");
  else if (!origin || !strcmp(origin, "default")) snprintf(out, size, "[model] n_ctx");
  else if (origin[0] == '-') snprintf(out, size, "%s", origin); /* a flag: "--ctx-size" */
  else snprintf(out, size, "[model] n_ctx at %s", origin);      /* "conf/my.ini:3", a variable */
}

/* The KV length: an explicit one, else [model] n_ctx: N, or 0 for the
 * model's whole trained context (llama.cpp's -c 0), or -1 (the default)
 * for that context capped at 4096 (memory for a long-context model's full
 * cache is rarely what a user wants unasked). */
static int32_t choose_n_ctx(const kiln_config *c, const kiln_hparams *hp, int32_t asked) {
  if (asked > 0) return asked;
  int64_t cfg = kiln_config_get_int(kiln_config_section_get(c, "model"), "n_ctx");
  if (cfg > 0) return (int32_t)cfg;
  const uint32_t cap = cfg == 0 ? 1048576u : 4096u; /* the key's own maximum */
  return (int32_t)(hp->n_ctx_train < cap ? hp->n_ctx_train : cap);
}

/* Bytes of the per-sequence state the graph holds: the KV caches (STATE)
 * and the recurrent layers' state (RECURRENT), as the backend stores them. */
static uint64_t state_bytes(const kiln_graph *g) {
  uint64_t b = 0;
  for (uint32_t i = 0; i < kiln_graph_n_tensors(g); i++) {
    const kiln_tensor *t = kiln_graph_tensor(g, i);
    if (t && (t->role == KILN_ROLE_STATE || t->role == KILN_ROLE_RECURRENT)) b += t->nbytes;
  }
  return b;
}

/* The runtime's configuration, or a copy of it with the session's own
 * overrides (validated), in *out_own when a copy was made. */
static kiln_status session_config(kiln_runtime *rt, const kiln_session_options *opt, kiln_config **out_own) {
  *out_own = NULL;
  if (!opt->n_overrides) return NULL;
  kiln_config *own;
  KILN_RETURN_IF_ERROR(kiln_config_copy(kiln_runtime_config(rt), &own));
  kiln_status st = NULL;
  for (size_t i = 0; !st && i < opt->n_overrides; i++) {
    const kiln_config_override *o = &opt->overrides[i];
    st = kiln_config_set(own, o->section, o->key, o->value, o->origin);
  }
  if (!st) st = kiln_config_validate(own, false);
  if (st) {
    kiln_config_free(own);
    return kiln_status_annotate(st, "session settings");
  }
  *out_own = own;
  return NULL;
}

/* [kv_cache] type against the model: a block-quantized cache (q8_0) needs
 * head_dim to be a multiple of its block, which runs along head_dim. The
 * graph refuses it too, per layer, but only here is it known that the type
 * is a configuration value: the error names the key, its value and where
 * it was set ("conf/my.ini:3", "--test-kv"), as the schema's errors do. */
static kiln_status check_kv_type(const kiln_config *c, const kiln_model *m, const char *kv_name, kiln_type kv) {
  const int64_t bs = kiln_type_block_size(kv);
  const uint32_t hd = kiln_model_hparams(m)->head_dim;
  if (bs <= 1 || hd % bs == 0) return NULL;
  kiln_status st = kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                                   "[kv_cache] type = %s needs head_dim to be a multiple of %lld (its blocks "
                                   "run along head_dim); %s has head_dim %u: use f32, f16 or bf16",
                                   kv_name, (long long)bs, kiln_gguf_path(kiln_model_gguf(m)), hd);
  const char *origin = kiln_config_origin(kiln_config_section_get(c, "kv_cache"), "type");
  if (origin && strcmp(origin, "default") != 0) st = kiln_status_annotate(st, "%s", origin);
  return st;
}

kiln_status kiln_session_open(kiln_runtime *rt, const kiln_model *m, const kiln_session_options *opt,
                              kiln_session **out_session) {
  *out_session = NULL;
  kiln_session_options none = {NULL, 0, 0, -1, 0.0f, NULL, 0};
  if (!opt) opt = &none;
  /* The backends' sections must be declared (their plugins loaded) before
   * the session's overrides of them are checked. */
  const kiln_config_section *rbs = kiln_config_section_get(kiln_runtime_config(rt), "backend");
  const char *backend = opt->backend ? opt->backend : kiln_config_get_str(rbs, "name");
  KILN_RETURN_IF_ERROR(kiln__runtime_declare_backend(rt, backend));
  if (kiln_plugin_registry_has(kiln_runtime_plugins(rt), "cpu")) /* the fallback, and overrides of it */
    KILN_RETURN_IF_ERROR(kiln__runtime_declare_backend(rt, "cpu"));

  kiln_config *own;
  KILN_RETURN_IF_ERROR(session_config(rt, opt, &own));
  const kiln_config *c = own ? own : kiln_runtime_config(rt);
  const kiln_config_section *bs = kiln_config_section_get(c, "backend");
  if (!opt->backend) backend = kiln_config_get_str(bs, "name");
  bool fallback = opt->fallback_cpu >= 0 ? opt->fallback_cpu == 1
                                          : strcmp(kiln_config_get_str(bs, "fallback"), "cpu") == 0;
  int32_t n_ctx = choose_n_ctx(c, kiln_model_hparams(m), opt->n_ctx);
  /* Positions past the trained context are positions RoPE was never
   * trained on: output degenerates there. Allowed (llama.cpp allows it
   * too), never silently. */
  uint32_t n_train = kiln_model_hparams(m)->n_ctx_train;
  if ((uint32_t)n_ctx > n_train)
    kiln_log(KILN_LOG_WARN, NULL,
             "n_ctx %d is past the model's training context (%s: context_length %u): output "
             "degenerates beyond position %u",
             n_ctx, kiln_gguf_path(kiln_model_gguf(m)), n_train, n_train);
  int32_t batch = opt->batch > 0 ? opt->batch : (int32_t)kiln_config_get_int(bs, "batch");
  if (batch > n_ctx) batch = n_ctx;

  kiln_session *s = calloc(1, sizeof *s);
  if (!s) {
    kiln_config_free(own);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "session");
  }
  s->model = m;
  s->config = own;
  n_ctx_hint(c, opt->n_ctx, s->n_ctx_hint, sizeof s->n_ctx_hint);
  kiln_graph_options go = {batch, n_ctx, opt->eps_override, KILN_TYPE_F32};
  /* the schema allows only the names kiln_kv_type_parse knows */
  const char *kv_name = kiln_config_get_str(kiln_config_section_get(c, "kv_cache"), "type");
  kiln_status st = NULL;
  if (kiln_kv_type_parse(kv_name, &go.kv_type) != 0)
    st = kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "[kv_cache] type '%s' is not f32, f16, bf16 or q8_0",
                         kv_name ? kv_name : "(unset)");
  if (!st) st = check_kv_type(c, m, kv_name, go.kv_type);
  if (!st) st = kiln_graph_build(m, &go, &s->graph);
  if (!st)
    kiln_log(KILN_LOG_INFO, NULL,
             "KV cache: %d positions of %s (%s: context_length %u), %.1f MiB of state on %s", n_ctx,
             kiln_kv_type_config_name(go.kv_type), kiln_gguf_path(kiln_model_gguf(m)), n_train,
             (double)state_bytes(s->graph) / (1024.0 * 1024.0), backend);
  if (!st) st = kiln_plan_create(s->graph, kiln_runtime_plugins(rt), c, backend, fallback, &s->plan);
  if (!st) st = kiln_plan_preload(s->plan);
  /* Out of memory with a long cache: say how much the cache was. */
  if (st && s->graph && kiln_status_code_of(st) == KILN_STATUS_NO_MEMORY)
    st = kiln_status_annotate(st, "with a KV cache of %d %s (%.1f MiB; lower %s)", n_ctx, positions(n_ctx),
                              (double)state_bytes(s->graph) / (1024.0 * 1024.0), s->n_ctx_hint);
  if (st) {
    kiln_session_free(s);
    return st;
  }
  *out_session = s;
  return NULL;
}

void kiln_session_free(kiln_session *s) {
  if (!s) return;
  kiln_plan_free(s->plan);
  kiln_graph_free(s->graph);
  kiln_config_free(s->config);
  free(s);
}

kiln_plan *kiln_session_plan(kiln_session *s) { return s->plan; }
const kiln_model *kiln_session_model(const kiln_session *s) { return s->model; }
int32_t kiln_session_pos(const kiln_session *s) { return s->pos; }
int32_t kiln_session_n_ctx(const kiln_session *s) { return kiln_graph_n_ctx(s->graph); }
uint64_t kiln_session_state_bytes(const kiln_session *s) { return state_bytes(s->graph); }
void kiln_session_reset(kiln_session *s) {
  s->pos = 0;
  s->steps = 0;
}

kiln_status kiln_session_rewind(kiln_session *s, int32_t pos) {
  if (pos < 0 || pos > s->pos)
    return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "rewind to position %d: the sequence holds positions 0..%d",
                           (int)pos, (int)s->pos - 1);
  if (pos == 0) {
    kiln_session_reset(s);
    return NULL;
  }
  /* A KV cache row belongs to one position: the rows past pos are written
   * again before any step reads them. A recurrent state has folded every
   * position in: it cannot go back. */
  for (uint32_t i = 0; i < kiln_graph_n_tensors(s->graph); i++) {
    const kiln_tensor *t = kiln_graph_tensor(s->graph, i);
    if (t && t->role == KILN_ROLE_RECURRENT)
      return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                             "rewind to position %d: '%.*s' is recurrent state (%s), which holds every "
                             "position at once; only a reset (position 0) forgets it",
                             (int)pos, KILN_NAME_MAX, t->name, kiln_gguf_path(kiln_model_gguf(s->model)));
  }
  s->pos = pos;
  return NULL;
}

/* Logits that are NaN or infinite are an error naming the step and the
 * first node whose output was not (nonfinite.c): never a sampled token. */
static kiln_status check_logits(kiln_session *s, const int32_t *ids, int32_t m, int32_t pos0,
                                const float *logits, int32_t n_cols, int32_t col0) {
  uint32_t n_vocab = kiln_model_hparams(s->model)->n_vocab;
  size_t at;
  if (!kiln__first_nonfinite(logits, (size_t)n_vocab * (size_t)n_cols, &at)) return NULL;
  return kiln__nonfinite_error(s->plan, s->steps, ids, m, pos0, pos0 + col0 + (int32_t)(at / n_vocab),
                               (int32_t)(at % n_vocab), logits[at]);
}

kiln_status kiln_session_eval(kiln_session *s, const int32_t *ids, int32_t n, float *out_logits,
                              float *out_all_logits) {
  int32_t n_ctx = kiln_graph_n_ctx(s->graph), batch = kiln_graph_batch(s->graph);
  uint32_t n_vocab = kiln_model_hparams(s->model)->n_vocab;
  if (n < 1) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "eval of %d tokens", n);
  if (n > n_ctx - s->pos)
    return kiln_status_new(KILN_STATUS_OUT_OF_RANGE,
                           "%d more %s not fit: the KV cache holds %d %s and %d %s used (raise %s)", n,
                           n == 1 ? "token does" : "tokens do", n_ctx, positions(n_ctx), s->pos, s->pos == 1 ? "is" : "are",
                           s->n_ctx_hint);
  for (int32_t i = 0; i < n; i++)
    if (ids[i] < 0 || (uint32_t)ids[i] >= n_vocab)
      return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "token %d (at %d) is outside the vocabulary of %u",
                             ids[i], i, n_vocab);
  const kiln_tensor *logits = kiln_graph_logits(s->graph);
  const bool head = kiln_plan_has_head(s->plan);
  int32_t *cols = out_all_logits ? malloc((size_t)batch * sizeof *cols) : NULL;
  if (out_all_logits && !cols) return kiln_status_new(KILN_STATUS_NO_MEMORY, "output columns");
  for (int32_t i = 0; cols && i < batch; i++) cols[i] = i;
  kiln_status st = NULL;
  for (int32_t done = 0; !st && done < n;) {
    int32_t m = n - done < batch ? n - done : batch, pos0 = s->pos;
    const bool last = done + m == n;
    /* The logits each micro-batch must produce: all of them, the last
     * token's, or none (the output head is skipped). */
    int32_t last_col = m - 1;
    const int32_t *want = out_all_logits ? cols : last && out_logits ? &last_col : NULL;
    int32_t n_want = out_all_logits ? m : want ? 1 : 0;
    st = kiln_plan_step_outputs(s->plan, ids + done, m, pos0, want, n_want);
    if (st) break;
    s->pos += m;
    s->steps++;
    if (out_all_logits) {
      float *all = out_all_logits + (size_t)done * n_vocab;
      st = kiln_plan_read(s->plan, logits, 0, m, all);
      if (!st) st = check_logits(s, ids + done, m, pos0, all, m, 0);
    }
    /* Where the last token's logits are: the head's only column, or column
     * m-1 when every column was computed (or the graph has no head). */
    if (!st && last && out_logits) {
      st = kiln_plan_read(s->plan, logits, head && !out_all_logits ? 0 : m - 1, 1, out_logits);
      if (!st) st = check_logits(s, ids + done, m, pos0, out_logits, 1, m - 1);
    }
    done += m;
  }
  free(cols);
  return st;
}
