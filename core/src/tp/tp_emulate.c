/* N shards of a tensor-parallel plan on one backend, in lockstep
 * (kiln/tp.h): each shard's plan runs up to the next collective, then the
 * partial sums are added (the all-reduce) and written back to every shard,
 * and the vocabulary slices of the logits are gathered — what NCCL does
 * between N devices, done here through host memory so the plan can be
 * checked against the unsharded run on a machine without them. */
#include "config.h"

#include "kiln/tp.h"

#include <stdlib.h>
#include <string.h>

#include "exec/runtime_internal.h"
#include "graph/graph_internal.h"
#include "tp_internal.h"

struct kiln_tp_emulator {
  const kiln_model *m;
  kiln_config *config; /* a copy with the overrides, or NULL */
  kiln_graph *g;       /* the unsharded graph the plan was made from */
  kiln_tp_plan *plan;
  int32_t n;
  kiln_tp_shard *shard[KILN_TP_MAX_SHARDS];
  kiln_plan *sp[KILN_TP_MAX_SHARDS];
  kiln_node_observer observer;
  void *observer_user;
  int32_t pos;
  float *part, *full; /* one shard's output, the whole value: [widest, batch] */
};

static kiln_status emulator_config(kiln_runtime *rt, const kiln_tp_emulator_options *o, kiln_config **out) {
  *out = NULL;
  if (!o->n_overrides) return NULL;
  kiln_config *c;
  KILN_RETURN_IF_ERROR(kiln_config_copy(kiln_runtime_config(rt), &c));
  kiln_status st = NULL;
  for (size_t i = 0; !st && i < o->n_overrides; i++)
    st = kiln_config_set(c, o->overrides[i].section, o->overrides[i].key, o->overrides[i].value,
                         o->overrides[i].origin);
  if (!st) st = kiln_config_validate(c, false);
  if (st) {
    kiln_config_free(c);
    return kiln_status_annotate(st, "tensor-parallel emulator settings");
  }
  *out = c;
  return NULL;
}

kiln_status kiln_tp_emulator_open(kiln_runtime *rt, const kiln_model *m, const kiln_tp_emulator_options *opt,
                                  kiln_tp_emulator **out_emulator) {
  *out_emulator = NULL;
  const char *backend = opt->backend ? opt->backend : "cpu";
  KILN_RETURN_IF_ERROR(kiln__runtime_declare_backend(rt, backend));
  kiln_tp_emulator *e = calloc(1, sizeof *e);
  if (!e) return kiln_status_new(KILN_STATUS_NO_MEMORY, "tensor-parallel emulator");
  e->m = m;
  e->n = opt->n_shards;
  /* f32 KV caches: the shards split cache rows by width ([kv_cache] type is not applied here) */
  kiln_graph_options go = {opt->batch, opt->n_ctx, 0.0f, KILN_TYPE_F32};
  kiln_status st = emulator_config(rt, opt, &e->config);
  if (!st) st = kiln_graph_build(m, &go, &e->g);
  if (!st) st = kiln_tp_plan_create(e->g, kiln_model_hparams(m), opt->n_shards, &e->plan);
  const kiln_config *c = e->config ? e->config : kiln_runtime_config(rt);
  for (int32_t s = 0; !st && s < e->n; s++) {
    st = kiln_tp_shard_build(e->plan, s, &e->shard[s]);
    if (!st)
      st = kiln_plan_create(kiln_tp_shard_graph(e->shard[s]), kiln_runtime_plugins(rt), c, backend, false,
                            &e->sp[s]);
    if (!st) st = kiln_plan_preload(e->sp[s]);
    if (st) st = kiln_status_annotate(st, "shard %d of %d", s, e->n);
  }
  int64_t widest = 1;
  for (uint32_t i = 0; !st && i < e->g->n_nodes; i++)
    if (e->g->nodes[i]->dst->ne[0] > widest) widest = e->g->nodes[i]->dst->ne[0];
  if (!st) {
    e->part = malloc((size_t)widest * (size_t)opt->batch * sizeof(float));
    e->full = malloc((size_t)widest * (size_t)opt->batch * sizeof(float));
    if (!e->part || !e->full) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "tensor-parallel emulator buffers");
  }
  if (st) {
    kiln_tp_emulator_free(e);
    return kiln_status_annotate(st, "emulating %d tensor-parallel shards on %s", opt->n_shards, backend);
  }
  *out_emulator = e;
  return NULL;
}

void kiln_tp_emulator_free(kiln_tp_emulator *e) {
  if (!e) return;
  for (int32_t s = 0; s < e->n && s < KILN_TP_MAX_SHARDS; s++) {
    kiln_plan_free(e->sp[s]);
    kiln_tp_shard_free(e->shard[s]);
  }
  kiln_tp_plan_free(e->plan);
  kiln_graph_free(e->g);
  kiln_config_free(e->config);
  free(e->part);
  free(e->full);
  free(e);
}

const kiln_tp_plan *kiln_tp_emulator_plan(const kiln_tp_emulator *e) { return e->plan; }

void kiln_tp_emulator_set_observer(kiln_tp_emulator *e, kiln_node_observer fn, void *user) {
  e->observer = fn;
  e->observer_user = user;
}

/* Node i's whole value, [ne0, n] in e->full, from the shards' outputs: the
 * all-reduce's sum (in shard order, in f32, as a ring all-reduce adds), the
 * gather's concatenation, or shard 0's copy. */
static kiln_status whole_value(kiln_tp_emulator *e, uint32_t i, int32_t n, int32_t pos0) {
  const kiln_node *nd = e->g->nodes[i];
  int64_t W = nd->dst->ne[0];
  int32_t col0 = nd->op == KILN_OP_STORE_KV ? pos0 : 0; /* a KV cache: the columns this step wrote */
  kiln_tp_layout l = kiln_tp_plan_node_layout(e->plan, i);
  for (int32_t s = 0; s < (l == KILN_TP_REPLICATED ? 1 : e->n); s++) {
    const kiln_tensor *t = kiln_graph_node(kiln_tp_shard_graph(e->shard[s]), i)->dst;
    int64_t w = t->ne[0];
    float *dst = l == KILN_TP_SHARDED ? e->part : s == 0 ? e->full : e->part;
    KILN_RETURN_IF_ERROR(kiln_plan_read(e->sp[s], t, col0, n, dst));
    if (l == KILN_TP_SHARDED) {
      for (int32_t c = 0; c < n; c++)
        memcpy(e->full + (size_t)c * (size_t)W + (size_t)s * (size_t)w, e->part + (size_t)c * (size_t)w,
               (size_t)w * sizeof(float));
    } else if (s > 0) {
      for (size_t k = 0; k < (size_t)W * (size_t)n; k++) e->full[k] += e->part[k];
    }
  }
  return NULL;
}

static kiln_status eval_step(kiln_tp_emulator *e, const int32_t *ids, int32_t n, float *out_logits) {
  const kiln_graph *g = e->g;
  for (int32_t s = 0; s < e->n; s++) KILN_RETURN_IF_ERROR(kiln_plan_step_begin(e->sp[s], ids, n, e->pos));
  uint32_t first = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    kiln_tp_collective c = kiln_tp_plan_node_collective(e->plan, i);
    bool all_reduce = c == KILN_TP_ALL_REDUCE && e->n > 1;
    if (!e->observer && !all_reduce && i + 1 < g->n_nodes) continue;
    for (int32_t s = 0; s < e->n; s++) KILN_RETURN_IF_ERROR(kiln_plan_step_nodes(e->sp[s], first, i + 1 - first));
    first = i + 1;
    if (!all_reduce && !e->observer) continue;
    KILN_RETURN_IF_ERROR(whole_value(e, i, n, e->pos));
    for (int32_t s = 0; all_reduce && s < e->n; s++)
      KILN_RETURN_IF_ERROR(
          kiln_plan_write(e->sp[s], kiln_graph_node(kiln_tp_shard_graph(e->shard[s]), i)->dst, 0, n, e->full));
    if (e->observer) KILN_RETURN_IF_ERROR(e->observer(g->nodes[i], e->full, n, e->pos, e->observer_user));
  }
  for (int32_t s = 0; s < e->n; s++) KILN_RETURN_IF_ERROR(kiln_plan_step_end(e->sp[s]));
  if (!out_logits) return NULL;
  /* the gather: shard s's vocabulary rows are block s of every token's logits */
  int64_t V = g->logits->ne[0];
  for (int32_t s = 0; s < e->n; s++) {
    const kiln_tensor *t = kiln_graph_logits(kiln_tp_shard_graph(e->shard[s]));
    int64_t v = t->ne[0];
    KILN_RETURN_IF_ERROR(kiln_plan_read(e->sp[s], t, 0, n, e->part));
    for (int32_t c = 0; c < n; c++)
      memcpy(out_logits + (size_t)c * (size_t)V + (size_t)s * (size_t)v, e->part + (size_t)c * (size_t)v,
             (size_t)v * sizeof(float));
  }
  return NULL;
}

kiln_status kiln_tp_emulator_eval(kiln_tp_emulator *e, const int32_t *ids, int32_t n, float *out_all_logits) {
  int32_t n_ctx = e->g->n_ctx, batch = e->g->batch;
  uint32_t n_vocab = kiln_model_hparams(e->m)->n_vocab;
  if (n < 1) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "eval of %d tokens", n);
  if (n > n_ctx - e->pos)
    return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "%d more tokens do not fit: %d of %d positions are used", n,
                           e->pos, n_ctx);
  for (int32_t i = 0; i < n; i++)
    if (ids[i] < 0 || (uint32_t)ids[i] >= n_vocab)
      return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "token %d (at %d) is outside the vocabulary of %u", ids[i],
                             i, n_vocab);
  for (int32_t done = 0; done < n;) {
    int32_t m = n - done < batch ? n - done : batch;
    KILN_RETURN_IF_ERROR(
        eval_step(e, ids + done, m, out_all_logits ? out_all_logits + (size_t)done * n_vocab : NULL));
    e->pos += m;
    done += m;
  }
  return NULL;
}
