/* The opt-in profile of the CUDA backends ([<plugin>] profile = true): how
 * long each kind of node takes on the GPU, and how a step's GPU time
 * compares with the host's time launching it (cuda_backend.h,
 * kiln_cuda_prof).
 *
 * Every node run gets an event before and after its launches on the
 * backend's stream; the pairs wait in a pending list until the stream is
 * synchronized anyway (sync(), which the executor calls before it reads
 * logits back, and close), then their elapsed times are added to the
 * node's kind. So the profile never makes the host wait, and what it adds
 * to a step is two cuEventRecord calls per node. A kind is a label (op,
 * weight type and shape, path, one token or several) so that, for
 * example, every layer's ffn_up matvec counts as one line, with the weight
 * bytes it streams for a GB/s column. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_backend.h"

/* Pending records before run() synchronizes and reads them back: bounds the
 * events a long prefill on cuda-serial (a node run per token) would hold. */
#define MAX_PENDING 8192

static void node_label(const kiln_cuda_backend *be, const kiln_node *node,
                       const kiln_cuda_node_state *ns, int multi, char *buf, size_t size) {
  const char *tag = multi ? " [T>1]" : " [T=1]";
  const kiln_tensor *w = node->src[0];
  switch (node->op) {
  case KILN_OP_MUL_MAT:
    snprintf(buf, size, "mul_mat %s %lldx%lld%s %s%s", kiln_type_name(w->type),
             (long long)w->ne[0], (long long)w->ne[1], node->src[2] ? " +bias" : "",
             !multi || be->fl->prefill != KILN_CUDA_PREFILL_BATCHED ? "matvec"
             : ns->gemm == KILN_CUDA_GEMM_Q16MMA                     ? "mmq"
                                                                   : "gemm",
             tag);
    break;
  case KILN_OP_RMS_NORM:
    snprintf(buf, size, "rms_norm %lld%s", (long long)node->src[1]->ne[0], tag);
    break;
  case KILN_OP_GET_ROWS:
    snprintf(buf, size, "get_rows %s%s", kiln_type_name(w->type), tag);
    break;
  default: snprintf(buf, size, "%s%s", kiln_op_name(node->op), tag);
  }
}

static kiln_status kind_of(kiln_cuda_backend *be, const char *label, uint64_t bytes, int multi,
                           uint32_t *out) {
  kiln_cuda_prof *p = &be->prof;
  for (uint32_t i = 0; i < p->n_kinds; i++)
    if (strcmp(p->kinds[i].label, label) == 0) {
      *out = i;
      return NULL;
    }
  if (p->n_kinds == p->cap_kinds) {
    uint32_t cap = p->cap_kinds ? 2 * p->cap_kinds : 32;
    kiln_cuda_prof_kind *k = realloc(p->kinds, cap * sizeof *k);
    if (!k) return be->host->status_new(KILN_STATUS_NO_MEMORY, "%s: profile", be->fl->name);
    p->kinds = k;
    p->cap_kinds = cap;
  }
  kiln_cuda_prof_kind *k = &p->kinds[p->n_kinds];
  memset(k, 0, sizeof *k);
  snprintf(k->label, sizeof k->label, "%s", label);
  k->bytes = bytes;
  k->multi = multi;
  *out = p->n_kinds++;
  return NULL;
}

kiln_status kiln_cuda_prof_kind_of(kiln_cuda_backend *be, const char *label, uint64_t bytes,
                                int multi, uint32_t *out_kind) {
  *out_kind = UINT32_MAX;
  if (!be->prof.on) return NULL;
  return kind_of(be, label, bytes, multi, out_kind);
}

kiln_status kiln_cuda_prof_prepare(kiln_cuda_backend *be, const kiln_node *node,
                                   kiln_cuda_node_state *ns) {
  if (!be->prof.on) return NULL;
  const uint64_t bytes = node->op == KILN_OP_MUL_MAT ? node->src[0]->nbytes : 0;
  for (int multi = 0; multi < 2; multi++) {
    char label[sizeof be->prof.kinds[0].label];
    node_label(be, node, ns, multi, label, sizeof label);
    KILN_RETURN_IF_ERROR(kind_of(be, label, bytes, multi, &ns->prof_kind[multi]));
  }
  return NULL;
}

double kiln_cuda_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Adds the last ended step's GPU span, if it is still pending (its events
 * are complete: the caller synchronized). A step still in run() is left
 * alone: its end event is not recorded yet. */
static kiln_status collect_step(kiln_cuda_backend *be) {
  kiln_cuda_prof *p = &be->prof;
  if (p->step_done < 0) return NULL;
  float ms = 0.0f;
  KILN_CU_CHECK(be->host, be->cu, NULL, EventElapsedTime(&ms, p->step_ev[0], p->step_ev[1]));
  p->step[p->step_done].gpu_ms += ms;
  p->step_done = -1;
  return NULL;
}

kiln_status kiln_cuda_prof_collect(kiln_cuda_backend *be) {
  kiln_cuda_prof *p = &be->prof;
  if (!p->on) return NULL;
  for (uint32_t i = 0; i < p->n_pending; i++) {
    if (p->what[i] >= p->n_kinds) continue; /* a first step's */
    float ms = 0.0f;
    KILN_CU_CHECK(be->host, be->cu, NULL, EventElapsedTime(&ms, p->ev[2 * i], p->ev[2 * i + 1]));
    p->kinds[p->what[i]].ms += ms;
    p->kinds[p->what[i]].runs++;
  }
  p->n_pending = 0;
  return collect_step(be);
}

kiln_status kiln_cuda_prof_step_begin(kiln_cuda_backend *be, int multi) {
  kiln_cuda_prof *p = &be->prof;
  if (!p->on) return NULL;
  if (!p->step_ev[0]) {
    KILN_CU_CHECK(be->host, be->cu, NULL, EventCreate(&p->step_ev[0], CU_EVENT_DEFAULT));
    KILN_CU_CHECK(be->host, be->cu, NULL, EventCreate(&p->step_ev[1], CU_EVENT_DEFAULT));
  }
  if (p->step_done >= 0) {
    KILN_CU_CHECK(be->host, be->cu, NULL, StreamSynchronize(be->stream));
    KILN_RETURN_IF_ERROR(collect_step(be));
  }
  p->skip = !p->seen[multi];
  p->seen[multi] = true;
  if (!p->skip) KILN_CU_CHECK(be->host, be->cu, NULL, EventRecord(p->step_ev[0], be->stream));
  p->step_running = multi;
  return NULL;
}

kiln_status kiln_cuda_prof_step_end(kiln_cuda_backend *be, int32_t tokens, double host_ms) {
  kiln_cuda_prof *p = &be->prof;
  if (!p->on || p->step_running < 0) return NULL;
  const int multi = p->step_running;
  p->step_running = -1;
  if (p->skip) return NULL;
  KILN_CU_CHECK(be->host, be->cu, NULL, EventRecord(p->step_ev[1], be->stream));
  p->step_done = multi;
  p->step[multi].steps++;
  p->step[multi].tokens += (uint64_t)tokens;
  p->step[multi].host_ms += host_ms;
  return NULL;
}

void kiln_cuda_prof_step_abort(kiln_cuda_backend *be) {
  be->prof.step_running = -1;
  be->prof.open = false;
}

void kiln_cuda_prof_xfer(kiln_cuda_backend *be, int download, uint64_t bytes, double ms) {
  kiln_cuda_prof *p = &be->prof;
  if (!p->on || !(p->seen[0] || p->seen[1])) return; /* the plan's weight uploads: not steps' */
  p->xfer[download].n++;
  p->xfer[download].bytes += bytes;
  p->xfer[download].ms += ms;
}

kiln_status kiln_cuda_prof_begin(kiln_cuda_backend *be) {
  kiln_cuda_prof *p = &be->prof;
  if (!p->on || be->graph.capturing) return NULL; /* a captured step's nodes are not timed */
  if (p->open)
    return be->host->status_new(KILN_STATUS_INTERNAL, "%s: profile: nested begin",
                                be->fl->name);
  if (p->n_pending == MAX_PENDING) {
    KILN_CU_CHECK(be->host, be->cu, NULL, StreamSynchronize(be->stream));
    KILN_RETURN_IF_ERROR(kiln_cuda_prof_collect(be));
  }
  if (p->n_pending == p->cap_pending) {
    uint32_t cap = p->cap_pending ? 2 * p->cap_pending : 256;
    if (cap > MAX_PENDING) cap = MAX_PENDING;
    CUevent *ev = realloc(p->ev, 2 * (size_t)cap * sizeof *ev);
    if (!ev) return be->host->status_new(KILN_STATUS_NO_MEMORY, "%s: profile", be->fl->name);
    p->ev = ev;
    uint32_t *what = realloc(p->what, cap * sizeof *what);
    if (!what) return be->host->status_new(KILN_STATUS_NO_MEMORY, "%s: profile", be->fl->name);
    p->what = what;
    p->cap_pending = cap;
  }
  while (p->n_events < 2 * p->cap_pending) {
    KILN_CU_CHECK(be->host, be->cu, NULL, EventCreate(&p->ev[p->n_events], CU_EVENT_DEFAULT));
    p->n_events++;
  }
  if (!p->skip)
    KILN_CU_CHECK(be->host, be->cu, NULL, EventRecord(p->ev[2 * p->n_pending], be->stream));
  p->open = true;
  return NULL;
}

kiln_status kiln_cuda_prof_end(kiln_cuda_backend *be, uint32_t kind) {
  kiln_cuda_prof *p = &be->prof;
  if (!p->on || be->graph.capturing) return NULL;
  if (!p->open)
    return be->host->status_new(KILN_STATUS_INTERNAL, "%s: profile: end without begin",
                                be->fl->name);
  p->open = false;
  if (p->skip) return NULL; /* nothing recorded: the first step of its kind */
  KILN_CU_CHECK(be->host, be->cu, NULL, EventRecord(p->ev[2 * p->n_pending + 1], be->stream));
  p->what[p->n_pending++] = kind;
  return NULL;
}

static const kiln_cuda_prof_kind *sort_base;
static int by_ms(const void *a, const void *b) {
  const double x = sort_base[*(const uint32_t *)a].ms, y = sort_base[*(const uint32_t *)b].ms;
  return (x < y) - (x > y);
}

static void report(kiln_cuda_backend *be) {
  const kiln_cuda_prof *p = &be->prof;
  const kiln_host_api *host = be->host;
  const char *who = be->fl->name;
  uint32_t *order = malloc((p->n_kinds ? p->n_kinds : 1) * sizeof *order);
  if (!order) return;
  for (int multi = 0; multi < 2; multi++) {
    const double steps = (double)p->step[multi].steps;
    if (steps == 0) continue;
    double total = 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->n_kinds; i++)
      if (p->kinds[i].multi == multi && p->kinds[i].runs) {
        order[n++] = i;
        total += p->kinds[i].ms;
      }
    sort_base = p->kinds;
    qsort(order, n, sizeof *order, by_ms);
    host->log(KILN_LOG_INFO, who,
              "profile, steps of %s (the first left out): %.0f steps, %.2f tokens each; per "
              "step: GPU %.4f ms from the first launch to the last, nodes %.4f ms, host %.4f ms "
              "in run()",
              multi ? "several tokens" : "one token", steps,
              (double)p->step[multi].tokens / steps, p->step[multi].gpu_ms / steps, total / steps,
              p->step[multi].host_ms / steps);
    host->log(KILN_LOG_INFO, who, "profile: %-46s %8s %10s %10s %7s %8s", "kind", "runs",
              "ms/step", "us/run", "share", "GB/s");
    for (uint32_t j = 0; j < n; j++) {
      const kiln_cuda_prof_kind *k = &p->kinds[order[j]];
      const double us = 1e3 * k->ms / (double)k->runs;
      char gbs[16] = "";
      if (k->bytes && k->ms > 0)
        snprintf(gbs, sizeof gbs, "%8.1f", (double)k->bytes * (double)k->runs / (k->ms * 1e6));
      host->log(KILN_LOG_INFO, who, "profile: %-46s %8llu %10.4f %10.2f %6.1f%% %s", k->label,
                (unsigned long long)k->runs, k->ms / steps, us,
                total > 0 ? 100.0 * k->ms / total : 0.0, gbs);
    }
  }
  free(order);
  for (int d = 0; d < 2; d++)
    if (p->xfer[d].n)
      host->log(KILN_LOG_INFO, who,
                "profile: %s after the first step: %llu, %.4f ms and %.1f KiB each on the host "
                "(synchronization included), %.2f GB/s",
                d ? "downloads" : "uploads", (unsigned long long)p->xfer[d].n,
                p->xfer[d].ms / (double)p->xfer[d].n,
                (double)p->xfer[d].bytes / 1024.0 / (double)p->xfer[d].n,
                p->xfer[d].ms > 0 ? (double)p->xfer[d].bytes / (p->xfer[d].ms * 1e6) : 0.0);
}

void kiln_cuda_prof_finish(kiln_cuda_backend *be) {
  kiln_cuda_prof *p = &be->prof;
  if (!p->on) return;
  if (!p->open && be->cu->StreamSynchronize(be->stream) == CUDA_SUCCESS) {
    kiln_status st = kiln_cuda_prof_collect(be);
    if (st) {
      be->host->log(KILN_LOG_WARN, be->fl->name, "profile: the last events could not be read");
      be->host->status_free(st);
    }
    report(be);
  }
  for (uint32_t i = 0; i < p->n_events; i++) be->cu->EventDestroy(p->ev[i]);
  for (int i = 0; i < 2; i++)
    if (p->step_ev[i]) be->cu->EventDestroy(p->step_ev[i]);
  free(p->ev);
  free(p->what);
  free(p->kinds);
  memset(p, 0, sizeof *p);
}
