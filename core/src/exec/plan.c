/* The executor: node -> backend assignment, buffers, and steps. */
#include "config.h"

#include "kiln/kv_cache.h"

#include "kiln/plan.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/log.h"
#include "graph/graph_internal.h"
#include "plan_internal.h"

#define MAX_BACKENDS 2 /* the configured one, and cpu for fallback */

typedef struct segment {
  uint32_t backend; /* index into plan->backends */
  uint32_t first, count;
} segment;

struct kiln_plan {
  const kiln_graph *g;
  kiln_backend *backends[MAX_BACKENDS];
  uint32_t n_backends;
  uint8_t *node_backend;     /* per node */
  void **bufs[MAX_BACKENDS]; /* per backend, per tensor id */
  uint32_t *valid;           /* per tensor: bit b = backend b holds the current contents */
  uint64_t *live;            /* per tensor: bytes its last writer wrote (what a copy moves) */
  segment *segments;
  uint32_t n_segments;
  uint32_t head_segment; /* segments [head_segment, n_segments) are the output head */
  kiln_fallback *fallbacks;
  uint32_t n_fallbacks;
  bool prepared;
  kiln_node_observer observer;
  void *observer_user;
  float *observer_buf;
  const kiln_node **node_ptrs; /* graph nodes in order, for kiln_step */
  /* With recurrent layers: the position the recurrent states have reached
   * (the next step must start there, or at 0); -1 when a failed step left
   * them unknown; -2 without recurrent layers. */
  int32_t rec_pos;
  /* The step begun by kiln_plan_step_begin: its tokens and first position;
   * in_step until kiln_plan_step_end. */
  bool in_step;
  int32_t step_n, step_pos0;
};

static kiln_status open_backend(kiln_plan *p, kiln_plugin_registry *r, const kiln_config *c,
                                const char *name, uint32_t *out_index) {
  for (uint32_t i = 0; i < p->n_backends; i++)
    if (strcmp(p->backends[i]->name, name) == 0) {
      *out_index = i;
      return NULL;
    }
  kiln_plugin *plugin;
  KILN_RETURN_IF_ERROR(kiln_plugin_registry_get(r, name, &plugin));
  if (!kiln_config_section_get(c, name))
    return kiln_status_new(KILN_STATUS_INTERNAL,
                           "backend %s: its config section was not declared before planning", name);
  kiln_probe_info info;
  KILN_RETURN_IF_ERROR(kiln_plugin_probe(plugin, &info));
  if (!info.available)
    return kiln_status_new(KILN_STATUS_UNAVAILABLE, "backend %s is unavailable: %s", name, info.reason);
  kiln_backend *b;
  KILN_RETURN_IF_ERROR(kiln_backend_open(plugin, c, &b));
  p->backends[p->n_backends] = b;
  *out_index = p->n_backends++;
  return NULL;
}

/* Whether node i reads tensor t (sources, and STORE_KV's cache). */
static bool node_reads_dst(const kiln_node *n) { return n->op == KILN_OP_STORE_KV; }

static kiln_status assign(kiln_plan *p, kiln_plugin_registry *r, const kiln_config *c, bool fallback_cpu) {
  const kiln_graph *g = p->g;
  kiln_backend *primary = p->backends[0];
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const kiln_node *n = g->nodes[i];
    kiln_status why = primary->ops->supports(primary->ctx, n);
    if (!why) continue;
    if (!fallback_cpu || strcmp(primary->name, "cpu") == 0) {
      kiln_status st = kiln_status_new(
          KILN_STATUS_UNSUPPORTED,
          "node %s (%s) cannot run on backend %s: %s%s", n->name, kiln_op_name(n->op), primary->name,
          kiln_status_message(why),
          fallback_cpu ? "" : " (set [backend] fallback = cpu to run such nodes on cpu)");
      kiln_status_free(why);
      return st;
    }
    uint32_t cpu;
    kiln_status st = open_backend(p, r, c, "cpu", &cpu);
    if (!st) st = p->backends[cpu]->ops->supports(p->backends[cpu]->ctx, n);
    if (st) {
      kiln_status_free(why);
      return kiln_status_annotate(st, "falling back to cpu for node %s", n->name);
    }
    kiln_fallback *f = &p->fallbacks[p->n_fallbacks++];
    f->node = n;
    f->backend = p->backends[cpu]->name;
    f->cause = strdup(kiln_status_message(why));
    kiln_status_free(why);
    p->node_backend[i] = (uint8_t)cpu;
  }
  return NULL;
}

/* Buffers on every backend for the tensors its nodes touch; weights
 * uploaded or mapped; STATE marked valid everywhere (unwritten columns are
 * never read). */
static kiln_status allocate(kiln_plan *p) {
  const kiln_graph *g = p->g;
  for (uint32_t b = 0; b < p->n_backends; b++) {
    p->bufs[b] = calloc(g->n_tensors, sizeof(void *));
    if (!p->bufs[b]) return kiln_status_new(KILN_STATUS_NO_MEMORY, "plan buffers");
  }
  /* Which backends touch which tensors. */
  uint32_t *used = calloc(g->n_tensors, sizeof *used);
  if (!used) return kiln_status_new(KILN_STATUS_NO_MEMORY, "plan buffers");
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const kiln_node *n = g->nodes[i];
    uint32_t bit = 1u << p->node_backend[i];
    for (int s = 0; s < KILN_MAX_SRC && n->src[s]; s++) used[n->src[s]->id] |= bit;
    used[n->dst->id] |= bit;
  }
  /* The executor reads logits back from wherever they are valid; nothing
   * else is needed. */
  kiln_status st = NULL;
  for (uint32_t t = 0; t < g->n_tensors && !st; t++) {
    const kiln_tensor *ten = g->tensors[t];
    for (uint32_t b = 0; b < p->n_backends && !st; b++) {
      if (!(used[t] & (1u << b))) continue;
      kiln_backend *be = p->backends[b];
      if (ten->role == KILN_ROLE_WEIGHT && be->ops->buffer_map_weight) {
        st = be->ops->buffer_map_weight(be->ctx, ten, &p->bufs[b][t]);
      } else {
        st = be->ops->buffer_alloc(be->ctx, ten, &p->bufs[b][t]);
        if (!st && ten->role == KILN_ROLE_WEIGHT)
          st = be->ops->buffer_upload(be->ctx, p->bufs[b][t], 0, ten->data, ten->nbytes);
      }
      if (st)
        st = kiln_status_annotate(st, "backend %s: tensor %s (%" PRIu64 " bytes)", be->name, ten->name,
                                  ten->nbytes);
    }
    if (ten->role == KILN_ROLE_WEIGHT || ten->role == KILN_ROLE_STATE || ten->role == KILN_ROLE_RECURRENT)
      p->valid[t] = used[t];
    if (ten->role == KILN_ROLE_RECURRENT) p->rec_pos = 0;
  }
  free(used);
  return st;
}

/* Runs of consecutive nodes on one backend; the output head starts a
 * segment of its own, since it runs as a step of its own. */
static kiln_status make_segments(kiln_plan *p) {
  const kiln_graph *g = p->g;
  const uint32_t head = g->out_ids ? g->head_first : g->n_nodes;
  p->segments = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *p->segments);
  if (!p->segments) return kiln_status_new(KILN_STATUS_NO_MEMORY, "plan segments");
  p->head_segment = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (i == head) p->head_segment = p->n_segments;
    segment *last = p->n_segments ? &p->segments[p->n_segments - 1] : NULL;
    if (last && i != head && last->backend == p->node_backend[i]) last->count++;
    else p->segments[p->n_segments++] = (segment){p->node_backend[i], i, 1};
  }
  if (head == g->n_nodes) p->head_segment = p->n_segments;
  return NULL;
}

kiln_status kiln_plan_create(const kiln_graph *g, kiln_plugin_registry *r, const kiln_config *c,
                             const char *backend, bool fallback_cpu, kiln_plan **out_plan) {
  *out_plan = NULL;
  kiln_plan *p = calloc(1, sizeof *p);
  if (!p) return kiln_status_new(KILN_STATUS_NO_MEMORY, "plan");
  p->g = g;
  p->rec_pos = -2;
  p->node_backend = calloc(g->n_nodes ? g->n_nodes : 1, 1);
  p->valid = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *p->valid);
  p->live = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *p->live);
  p->fallbacks = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *p->fallbacks);
  p->node_ptrs = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *p->node_ptrs);
  kiln_status st = NULL;
  if (!p->node_backend || !p->valid || !p->live || !p->fallbacks || !p->node_ptrs)
    st = kiln_status_new(KILN_STATUS_NO_MEMORY, "plan");
  for (uint32_t i = 0; !st && i < g->n_nodes; i++) p->node_ptrs[i] = g->nodes[i];
  uint32_t primary;
  if (!st) st = open_backend(p, r, c, backend, &primary);
  if (!st) st = assign(p, r, c, fallback_cpu);
  if (!st) st = allocate(p);
  if (!st) st = make_segments(p);
  if (st) {
    kiln_plan_free(p);
    return kiln_status_annotate(st, "planning on backend %s", backend);
  }
  if (p->n_fallbacks)
    kiln_log(KILN_LOG_WARN, NULL, "%u of %u nodes fall back to cpu (the run's summary lists them)",
             p->n_fallbacks, g->n_nodes);
  *out_plan = p;
  return NULL;
}

void kiln_plan_free(kiln_plan *p) {
  if (!p) return;
  for (uint32_t b = 0; b < p->n_backends; b++) {
    kiln_backend *be = p->backends[b];
    if (p->bufs[b]) {
      be->ops->sync(be->ctx); /* nothing may still be writing a buffer we free */
      for (uint32_t t = 0; t < p->g->n_tensors; t++)
        if (p->bufs[b][t]) be->ops->buffer_free(be->ctx, p->bufs[b][t]);
      free(p->bufs[b]);
    }
    kiln_backend_close(be);
  }
  for (uint32_t i = 0; i < p->n_fallbacks; i++) free((char *)p->fallbacks[i].cause);
  free(p->fallbacks);
  free(p->node_backend);
  free(p->valid);
  free(p->live);
  free(p->segments);
  free(p->node_ptrs);
  free(p->observer_buf);
  free(p);
}

kiln_status kiln_plan_preload(kiln_plan *p) {
  if (p->prepared) return NULL;
  for (uint32_t i = 0; i < p->g->n_nodes; i++) {
    kiln_backend *be = p->backends[p->node_backend[i]];
    const kiln_node *n = p->g->nodes[i];
    kiln_status st = be->ops->prepare(be->ctx, n);
    if (st) return kiln_status_annotate(st, "backend %s: preparing node %s (%s)", be->name, n->name,
                                        kiln_op_name(n->op));
  }
  p->prepared = true;
  return NULL;
}

/* Bytes of t that a step of n tokens at pos0 must hold: the first n columns
 * of an activation or input, columns 0..pos0+n-1 of the KV cache, all of a
 * recurrent state. */
static uint64_t live_bytes(const kiln_tensor *t, int32_t n, int32_t pos0) {
  uint64_t col = t->nbytes / (uint64_t)(t->role == KILN_ROLE_INPUT ? t->ne[0] : t->ne[1]);
  switch (t->role) {
  case KILN_ROLE_ACTIVATION: return col * (uint64_t)n;
  case KILN_ROLE_INPUT: return col * (uint64_t)n;
  case KILN_ROLE_STATE: return col * (uint64_t)(pos0 + n);
  case KILN_ROLE_WEIGHT: return t->nbytes;
  case KILN_ROLE_RECURRENT: return t->nbytes; /* always whole */
  }
  return t->nbytes;
}

/* Makes backend b's copy of t current, copying from a backend that has it
 * the bytes its last writer wrote: the output head reads columns a body
 * step of more tokens wrote. */
static kiln_status ensure_valid(kiln_plan *p, const kiln_tensor *t, uint32_t b) {
  uint32_t v = p->valid[t->id];
  if (v & (1u << b)) return NULL;
  if (!v)
    return kiln_status_new(KILN_STATUS_INTERNAL, "tensor %s is read before any node wrote it", t->name);
  uint32_t from = (uint32_t)__builtin_ctz(v);
  kiln_backend *src = p->backends[from], *dst = p->backends[b];
  uint64_t bytes = p->live[t->id];
  void *tmp = malloc(bytes ? bytes : 1);
  if (!tmp) return kiln_status_new(KILN_STATUS_NO_MEMORY, "copying %s between backends", t->name);
  kiln_status st = src->ops->sync(src->ctx);
  if (!st) st = src->ops->buffer_download(src->ctx, p->bufs[from][t->id], 0, tmp, bytes);
  if (!st) st = dst->ops->buffer_upload(dst->ctx, p->bufs[b][t->id], 0, tmp, bytes);
  free(tmp);
  if (st) return kiln_status_annotate(st, "copying %s from %s to %s", t->name, src->name, dst->name);
  p->valid[t->id] |= 1u << b;
  return NULL;
}

/* Columns col0 .. col0+n-1 of t from backend b's buffer to out as f32:
 * F32 directly, a typed KV cache (kiln/kv_cache.h) through its raw rows. */
static kiln_status download_cols(kiln_plan *p, uint32_t b, const kiln_tensor *t, int64_t col0, int64_t n,
                                 float *out) {
  kiln_backend *be = p->backends[b];
  const uint64_t rb = (uint64_t)kiln_type_row_bytes(t->type, t->ne[0]);
  KILN_RETURN_IF_ERROR(be->ops->sync(be->ctx));
  if (t->type == KILN_TYPE_F32)
    return be->ops->buffer_download(be->ctx, p->bufs[b][t->id], rb * (uint64_t)col0, out, rb * (uint64_t)n);
  const uint64_t nb = rb * (uint64_t)n;
  uint8_t *raw = malloc(nb ? nb : 1);
  if (!raw) return kiln_status_new(KILN_STATUS_NO_MEMORY, "reading %s", t->name);
  kiln_status st = be->ops->buffer_download(be->ctx, p->bufs[b][t->id], rb * (uint64_t)col0, raw, nb);
  for (int64_t c = 0; !st && c < n; c++) kiln_kv_load_row(t->type, raw + rb * (uint64_t)c, out + c * t->ne[0], t->ne[0]);
  free(raw);
  return st;
}

static kiln_status observe(kiln_plan *p, const kiln_node *n, uint32_t b, int32_t count, int32_t pos0) {
  const kiln_tensor *t = n->dst;
  free(p->observer_buf);
  p->observer_buf = malloc((uint64_t)t->ne[0] * sizeof(float) * (uint64_t)count);
  if (!p->observer_buf) return kiln_status_new(KILN_STATUS_NO_MEMORY, "observer buffer");
  /* a STORE_KV's output: the columns it wrote, as f32 */
  KILN_RETURN_IF_ERROR(download_cols(p, b, t, n->op == KILN_OP_STORE_KV ? pos0 : 0, count, p->observer_buf));
  return p->observer(n, p->observer_buf, count, pos0, p->observer_user);
}

static kiln_status run_nodes(kiln_plan *p, uint32_t b, uint32_t first, uint32_t count, int32_t n,
                             int32_t pos0) {
  kiln_backend *be = p->backends[b];
  /* Inputs from other backends come over first. Outputs are marked as
   * this backend's as we go, since later nodes of the segment read them
   * (and the run below writes them). */
  for (uint32_t i = first; i < first + count; i++) {
    const kiln_node *nd = p->g->nodes[i];
    for (int s = 0; s < KILN_MAX_SRC && nd->src[s]; s++)
      KILN_RETURN_IF_ERROR(ensure_valid(p, nd->src[s], b));
    if (node_reads_dst(nd)) KILN_RETURN_IF_ERROR(ensure_valid(p, nd->dst, b));
    p->valid[nd->dst->id] = 1u << b;
    p->live[nd->dst->id] = live_bytes(nd->dst, n, pos0);
    /* A recurrent state the node updates in place is now this backend's. */
    int state = kiln_op_state_src(nd->op);
    if (state >= 0 && nd->src[state]) {
      p->valid[nd->src[state]->id] = 1u << b;
      p->live[nd->src[state]->id] = live_bytes(nd->src[state], n, pos0);
    }
  }
  kiln_step step = {&p->node_ptrs[first], count, n, pos0, p->bufs[b]};
  kiln_status st = be->ops->run(be->ctx, &step);
  if (st) return kiln_status_annotate(st, "backend %s", be->name);
  return NULL;
}

/* Uploads n ids to INPUT tensor t on every backend that holds it. */
static kiln_status upload_input(kiln_plan *p, const kiln_tensor *t, const int32_t *ids, int32_t n) {
  p->valid[t->id] = 0;
  for (uint32_t b = 0; b < p->n_backends; b++) {
    if (!p->bufs[b][t->id]) continue;
    kiln_backend *be = p->backends[b];
    KILN_RETURN_IF_ERROR(be->ops->buffer_upload(be->ctx, p->bufs[b][t->id], 0, ids, (uint64_t)n * sizeof(int32_t)));
    p->valid[t->id] |= 1u << b;
  }
  p->live[t->id] = (uint64_t)n * sizeof(int32_t);
  return NULL;
}

/* Segments [s0, s1) as a step of n tokens at pos0. */
static kiln_status run_segments(kiln_plan *p, uint32_t s0, uint32_t s1, int32_t n, int32_t pos0) {
  for (uint32_t s = s0; s < s1; s++) {
    const segment *sg = &p->segments[s];
    if (!p->observer) {
      KILN_RETURN_IF_ERROR(run_nodes(p, sg->backend, sg->first, sg->count, n, pos0));
      continue;
    }
    for (uint32_t i = sg->first; i < sg->first + sg->count; i++) {
      KILN_RETURN_IF_ERROR(run_nodes(p, sg->backend, i, 1, n, pos0));
      KILN_RETURN_IF_ERROR(observe(p, p->g->nodes[i], sg->backend, n, pos0));
    }
  }
  return NULL;
}

kiln_status kiln_plan_step_outputs(kiln_plan *p, const int32_t *tokens, int32_t n, int32_t pos0,
                                   const int32_t *out_cols, int32_t n_out) {
  const kiln_graph *g = p->g;
  if (n < 1 || n > g->batch || pos0 < 0 || pos0 > g->n_ctx - n)
    return kiln_status_new(KILN_STATUS_OUT_OF_RANGE,
                           "step of %d tokens at position %d: the plan holds batches of 1..%d tokens "
                           "and %d positions",
                           n, pos0, g->batch, g->n_ctx);
  if (n_out < 0 || n_out > n || (n_out && !out_cols))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "step of %d tokens asks for %d output columns", n, n_out);
  for (int32_t i = 0; i < n_out; i++)
    if (out_cols[i] < 0 || out_cols[i] >= n)
      return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "output column %d (entry %d) is not one of the step's %d",
                             out_cols[i], i, n);
  KILN_RETURN_IF_ERROR(kiln_plan_preload(p));
  /* A recurrent state is the memory of every position before it: a step
   * continues where the last one ended, or starts a sequence at 0. */
  if (p->rec_pos != -2 && pos0 != 0 && pos0 != p->rec_pos)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "step at position %d: the recurrent layers' state %s; a step must "
                           "continue at the next position or restart the sequence at 0",
                           pos0, p->rec_pos < 0 ? "was lost by a failed step" : "is further");
  if (p->rec_pos != -2) p->rec_pos = -1;
  KILN_RETURN_IF_ERROR(upload_input(p, g->tokens, tokens, n));
  KILN_RETURN_IF_ERROR(run_segments(p, 0, p->head_segment, n, pos0));
  /* The body has moved the recurrent state on, whatever the head does. */
  if (p->rec_pos != -2) p->rec_pos = pos0 + n;
  /* A graph without a head computed its logits in the body, for every column. */
  if (!g->out_ids || n_out == 0) return NULL;
  KILN_RETURN_IF_ERROR(upload_input(p, g->out_ids, out_cols, n_out));
  return run_segments(p, p->head_segment, p->n_segments, n_out, pos0 + out_cols[0]);
}

kiln_status kiln_plan_step(kiln_plan *p, const int32_t *tokens, int32_t n, int32_t pos0) {
  if (n < 1 || n > p->g->batch) return kiln_plan_step_outputs(p, tokens, n, pos0, NULL, 0); /* its error */
  int32_t *cols = malloc((size_t)n * sizeof *cols);
  if (!cols) return kiln_status_new(KILN_STATUS_NO_MEMORY, "output columns");
  for (int32_t i = 0; i < n; i++) cols[i] = i;
  kiln_status st = kiln_plan_step_outputs(p, tokens, n, pos0, cols, n);
  free(cols);
  return st;
}

kiln_status kiln_plan_step_begin(kiln_plan *p, const int32_t *tokens, int32_t n, int32_t pos0) {
  const kiln_graph *g = p->g;
  p->in_step = false;
  if (n < 1 || n > g->batch || pos0 < 0 || pos0 > g->n_ctx - n)
    return kiln_status_new(KILN_STATUS_OUT_OF_RANGE,
                           "step of %d tokens at position %d: the plan holds batches of 1..%d tokens "
                           "and %d positions",
                           n, pos0, g->batch, g->n_ctx);
  KILN_RETURN_IF_ERROR(kiln_plan_preload(p));
  if (p->rec_pos != -2 && pos0 != 0 && pos0 != p->rec_pos)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "step at position %d: the recurrent layers' state %s; a step must "
                           "continue at the next position or restart the sequence at 0",
                           pos0, p->rec_pos < 0 ? "was lost by a failed step" : "is further");
  if (p->rec_pos != -2) p->rec_pos = -1;
  KILN_RETURN_IF_ERROR(upload_input(p, g->tokens, tokens, n));
  if (g->out_ids) { /* the head for every column: it runs as the body's step */
    int32_t *cols = malloc((size_t)n * sizeof *cols);
    if (!cols) return kiln_status_new(KILN_STATUS_NO_MEMORY, "output columns");
    for (int32_t i = 0; i < n; i++) cols[i] = i;
    kiln_status st = upload_input(p, g->out_ids, cols, n);
    free(cols);
    KILN_RETURN_IF_ERROR(st);
  }
  p->in_step = true;
  p->step_n = n;
  p->step_pos0 = pos0;
  return NULL;
}

kiln_status kiln_plan_step_nodes(kiln_plan *p, uint32_t first, uint32_t count) {
  const kiln_graph *g = p->g;
  if (!p->in_step || first > g->n_nodes || count > g->n_nodes - first)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "running %u nodes from %u of %u%s", count, first,
                           g->n_nodes, p->in_step ? "" : " outside a step");
  int32_t n = p->step_n, pos0 = p->step_pos0;
  kiln_status st = NULL;
  for (uint32_t s = 0; s < p->n_segments && !st; s++) {
    const segment *sg = &p->segments[s];
    uint32_t lo = sg->first > first ? sg->first : first;
    uint32_t hi = sg->first + sg->count < first + count ? sg->first + sg->count : first + count;
    if (lo >= hi) continue;
    if (!p->observer) {
      st = run_nodes(p, sg->backend, lo, hi - lo, n, pos0);
      continue;
    }
    for (uint32_t i = lo; i < hi && !st; i++) {
      st = run_nodes(p, sg->backend, i, 1, n, pos0);
      if (!st) st = observe(p, g->nodes[i], sg->backend, n, pos0);
    }
  }
  if (st) p->in_step = false; /* a failed step leaves the recurrent states unknown */
  return st;
}

kiln_status kiln_plan_step_end(kiln_plan *p) {
  if (!p->in_step) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "ending a step that was not begun");
  p->in_step = false;
  if (p->rec_pos != -2) p->rec_pos = p->step_pos0 + p->step_n;
  return NULL;
}

kiln_status kiln_plan_write(kiln_plan *p, const kiln_tensor *t, int32_t col0, int32_t n_cols, const float *in) {
  if (t->type != KILN_TYPE_F32 || t->role == KILN_ROLE_WEIGHT || t->role == KILN_ROLE_INPUT || col0 < 0 ||
      n_cols < 0 || col0 + n_cols > t->ne[1])
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "writing columns %d..%d of %s", col0,
                           col0 + n_cols - 1, t->name);
  uint32_t v = p->valid[t->id];
  if (!v) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "tensor %s has not been computed", t->name);
  uint32_t b = (uint32_t)__builtin_ctz(v);
  kiln_backend *be = p->backends[b];
  uint64_t col = (uint64_t)t->ne[0] * sizeof(float);
  KILN_RETURN_IF_ERROR(be->ops->sync(be->ctx));
  KILN_RETURN_IF_ERROR(be->ops->buffer_upload(be->ctx, p->bufs[b][t->id], col * (uint64_t)col0, in,
                                              col * (uint64_t)n_cols));
  p->valid[t->id] = 1u << b; /* the other backends' copies are now stale */
  return NULL;
}

kiln_status kiln_plan_sync(kiln_plan *p) {
  for (uint32_t b = 0; b < p->n_backends; b++) {
    kiln_status st = p->backends[b]->ops->sync(p->backends[b]->ctx);
    if (st) return kiln_status_annotate(st, "backend %s", p->backends[b]->name);
  }
  return NULL;
}

bool kiln_plan_has_head(const kiln_plan *p) { return p->g->out_ids != NULL; }

kiln_status kiln_plan_read(kiln_plan *p, const kiln_tensor *t, int32_t col0, int32_t n_cols, float *out) {
  const bool typed_kv = t->role == KILN_ROLE_STATE && kiln_kv_type_ok(t->type) &&
                        kiln_type_row_bytes(t->type, t->ne[0]) > 0;
  if ((t->type != KILN_TYPE_F32 && !typed_kv) || t->role == KILN_ROLE_WEIGHT || col0 < 0 || n_cols < 0 ||
      col0 + n_cols > t->ne[1])
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "reading columns %d..%d of %s (%s)", col0,
                           col0 + n_cols - 1, t->name, kiln_type_name(t->type));
  uint32_t v = p->valid[t->id];
  if (!v) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "tensor %s has not been computed", t->name);
  return download_cols(p, (uint32_t)__builtin_ctz(v), t, col0, n_cols, out);
}

void kiln_plan_set_observer(kiln_plan *p, kiln_node_observer fn, void *user) {
  p->observer = fn;
  p->observer_user = user;
}

void kiln__plan_get_observer(const kiln_plan *p, kiln_node_observer *out_fn, void **out_user) {
  *out_fn = p->observer;
  *out_user = p->observer_user;
}

const kiln_graph *kiln_plan_graph(const kiln_plan *p) { return p->g; }
const char *kiln_plan_node_backend(const kiln_plan *p, uint32_t i) {
  return p->backends[p->node_backend[i]]->name;
}
const char *kiln_plan_backend_name(const kiln_plan *p) { return p->backends[0]->name; }

kiln_status kiln_plan_describe_modes(kiln_plan *p, const char *backend, char *out_line, size_t cap) {
  if (cap) out_line[0] = '\0';
  KILN_RETURN_IF_ERROR(kiln_plan_preload(p));
  const char *name = backend ? backend : p->backends[0]->name;
  for (uint32_t i = 0; i < p->n_backends; i++)
    if (strcmp(p->backends[i]->name, name) == 0) return kiln_backend_describe_modes(p->backends[i], out_line, cap);
  const bool two = p->n_backends > 1;
  return kiln_status_new(KILN_STATUS_NOT_FOUND, "the plan has no backend %s (it runs on %s%s%s)", name,
                         p->backends[0]->name, two ? " and " : "", two ? p->backends[1]->name : "");
}

uint32_t kiln_plan_n_fallbacks(const kiln_plan *p) { return p->n_fallbacks; }
const kiln_fallback *kiln_plan_fallback(const kiln_plan *p, uint32_t i) { return &p->fallbacks[i]; }

void kiln_plan_print_fallbacks(const kiln_plan *p, FILE *out) {
  if (!p->n_fallbacks) return;
  fprintf(out, "fallback: %u of %u nodes ran on cpu instead of %s\n", p->n_fallbacks, p->g->n_nodes,
          p->backends[0]->name);
  for (uint32_t i = 0; i < p->n_fallbacks; i++)
    fprintf(out, "  %-24s %-10s -> %s: %s\n", p->fallbacks[i].node->name,
            kiln_op_name(p->fallbacks[i].node->op), p->fallbacks[i].backend, p->fallbacks[i].cause);
}
