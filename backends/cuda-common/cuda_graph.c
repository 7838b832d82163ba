/* The decode step captured as a CUDA graph and replayed (cuda_backend.h,
 * kiln_cuda_graphs): run() launches ~300 kernels for a step of one token,
 * and the host's time doing so (about 2.5 ms a token on the 7B file)
 * exceeds the GPU's; a replay is one cuGraphLaunch.
 *
 * The first time a one-token step's node list comes it runs as usual; the
 * second time its launches are captured from the stream (thread-local
 * capture mode: a call that could synchronize is an error while
 * capturing) and the graph launched; every later step with the same node
 * list, the same buffers and nothing prepared, allocated or freed since
 * replays it. A replay makes the checks a pass would (every node prepared
 * and unchanged, the cache positions, the token ids), then writes the step
 * block and launches the graph. The step block is written outside the
 * graph, in stream order before it, so every replay's kernels read that
 * step's positions: no position is in a captured kernel's arguments
 * (test_cuda_templates checks that no template takes one).
 *
 * Built with KILN_CUDA_TEST_STALE_STEP (tests/plugins/kiln-cuda-stale.so
 * only) the step block is written inside the capture instead, so the
 * graph carries the capture's positions and replays them: the stale-n_kv
 * defect of ik_llama.cpp #2096, which tests/gpu/test_gpu_replay_stale
 * must catch (an expected failure in `make check`). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "node_check.h"

#define PTRS_PER_NODE (KILN_MAX_SRC + 1)

static void entry_free(kiln_cuda_backend *be, kiln_cuda_graph_entry *e) {
  if (e->exec) be->cu->GraphExecDestroy(e->exec);
  if (e->graph) be->cu->GraphDestroy(e->graph);
  free(e->nodes);
  free(e->ptrs);
  memset(e, 0, sizeof *e);
}

void kiln_cuda_graph_drop_all(kiln_cuda_backend *be) {
  be->graph.gen++;
  be->graph.seen_nodes = NULL;
  for (int i = 0; i < KILN_CUDA_MAX_GRAPHS; i++)
    if (be->graph.e[i].graph || be->graph.e[i].exec) entry_free(be, &be->graph.e[i]);
}

/* Every node's sources' and dst's buffer addresses (0: none), in order. */
static void node_ptrs(const kiln_step *step, CUdeviceptr *out) {
  for (uint32_t i = 0; i < step->n_nodes; i++) {
    const kiln_node *nd = step->nodes[i];
    for (int s = 0; s < PTRS_PER_NODE; s++) {
      const kiln_tensor *t = s < KILN_MAX_SRC ? nd->src[s] : nd->dst;
      const kiln_cuda_buffer *b = t && t->id >= 0 ? step->bufs[t->id] : NULL;
      out[i * PTRS_PER_NODE + s] = b ? b->ptr : 0;
    }
  }
}

/* The last position every cache the step's nodes touch holds. */
static int64_t max_pos(const kiln_step *step) {
  int64_t m = INT64_MAX;
  for (uint32_t i = 0; i < step->n_nodes; i++) {
    const kiln_node *nd = step->nodes[i];
    for (int s = 0; s < PTRS_PER_NODE; s++) {
      const kiln_tensor *t = s < KILN_MAX_SRC ? nd->src[s] : nd->dst;
      if (t && t->role == KILN_ROLE_STATE && t->ne[1] - 1 < m) m = t->ne[1] - 1;
    }
  }
  return m;
}

/* Whether entry e was captured from this step's nodes and buffers. */
static bool matches(const kiln_cuda_backend *be, const kiln_cuda_graph_entry *e,
                    const kiln_step *step, CUdeviceptr *scratch) {
  if (!e->exec || e->n_nodes != step->n_nodes ||
      memcmp(e->nodes, step->nodes, step->n_nodes * sizeof *step->nodes) != 0)
    return false;
  node_ptrs(step, scratch);
  (void)be;
  return memcmp(e->ptrs, scratch, (size_t)step->n_nodes * PTRS_PER_NODE * sizeof *scratch) == 0;
}

/* What a pass would check before its launches, for a replayed one: every
 * node prepared and unchanged since, the position inside every cache, the
 * token ids rows of their tables (on the host copy of the ids). */
static kiln_status replay_checks(const kiln_cuda_backend *be, const kiln_cuda_graph_entry *e,
                                 const kiln_step *step) {
  for (uint32_t i = 0; i < step->n_nodes; i++) {
    const kiln_node *nd = step->nodes[i];
    const kiln_cuda_node_state *ns = NULL;
    KILN_RETURN_IF_ERROR(kiln_cuda_node_state_of(be, nd, &ns));
    if (nd->op == KILN_OP_GET_ROWS) {
      const kiln_cuda_buffer *ids = nd->src[1]->id >= 0 ? step->bufs[nd->src[1]->id] : NULL;
      const int32_t id = ids && ids->host_ids ? ids->host_ids[0] : -1;
      if (id < 0 || id >= nd->src[0]->ne[1])
        return kiln_node_error(be->host, KILN_STATUS_OUT_OF_RANGE, nd,
                               "token id %d (batch index 0, position %d) is outside [0, %lld), "
                               "the rows of '%.*s'",
                               (int)id, (int)step->pos0, (long long)nd->src[0]->ne[1],
                               KILN_NAME_MAX, nd->src[0]->name);
    }
  }
  if (step->pos0 > e->max_pos)
    return be->host->status_new(KILN_STATUS_OUT_OF_RANGE,
                                "%s: position %d is past the caches' last position %lld",
                                be->fl->name, (int)step->pos0, (long long)e->max_pos);
  return NULL;
}

static kiln_status replay(kiln_cuda_backend *be, kiln_cuda_graph_entry *e, const kiln_step *step) {
  KILN_RETURN_IF_ERROR(replay_checks(be, e, step));
  be->pass++; /* what the scratch held in the last pass is of no use now */
  be->xq_of = NULL;
#ifndef KILN_CUDA_TEST_STALE_STEP
  KILN_RETURN_IF_ERROR(kiln_cuda_step_write(be, step->pos0, 1));
#endif
  KILN_CU_CHECK(be->host, be->cu, NULL, GraphLaunch(e->exec, be->stream));
  e->used = ++be->graph.clock;
  be->graph.replays++;
  return NULL;
}

/* A free entry, or the least recently used one, emptied. */
static kiln_cuda_graph_entry *take_entry(kiln_cuda_backend *be) {
  kiln_cuda_graph_entry *best = &be->graph.e[0];
  for (int i = 0; i < KILN_CUDA_MAX_GRAPHS; i++) {
    kiln_cuda_graph_entry *e = &be->graph.e[i];
    if (!e->exec) {
      best = e;
      break;
    }
    if (e->used < best->used) best = e;
  }
  entry_free(be, best);
  return best;
}

static kiln_status capture(kiln_cuda_backend *be, const kiln_step *step,
                           kiln_cuda_pass_fn run_pass) {
  kiln_cuda_graph_entry *e = take_entry(be);
  e->nodes = malloc(step->n_nodes * sizeof *e->nodes);
  e->ptrs = malloc((size_t)step->n_nodes * PTRS_PER_NODE * sizeof *e->ptrs);
  if (!e->nodes || !e->ptrs) {
    entry_free(be, e);
    return be->host->status_new(KILN_STATUS_NO_MEMORY, "%s: a captured step", be->fl->name);
  }
#ifndef KILN_CUDA_TEST_STALE_STEP
  kiln_status wst = kiln_cuda_step_write(be, step->pos0, 1);
  if (wst) {
    entry_free(be, e);
    return wst;
  }
#endif
  const CUresult rb = be->cu->StreamBeginCapture(be->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (rb != CUDA_SUCCESS) {
    entry_free(be, e);
    return kiln_cu_error(be->host, be->cu, rb, "cuStreamBeginCapture", NULL);
  }
  be->graph.capturing = true;
#ifdef KILN_CUDA_TEST_STALE_STEP
  /* The defect on purpose: this step's positions become memset nodes. */
  kiln_status st = kiln_cuda_step_write(be, step->pos0, 1);
  if (!st) st = run_pass(be, step);
#else
  kiln_status st = run_pass(be, step);
#endif
  CUgraph graph = NULL;
  const CUresult r = be->cu->StreamEndCapture(be->stream, &graph);
  be->graph.capturing = false;
  e->graph = graph;
  if (st) {
    entry_free(be, e);
    return be->host->status_annotate(st, "while capturing the decode step");
  }
  if (r != CUDA_SUCCESS) {
    entry_free(be, e);
    return kiln_cu_error(be->host, be->cu, r, "cuStreamEndCapture", NULL);
  }
  const CUresult ri = be->cu->GraphInstantiateWithFlags(&e->exec, graph, 0);
  if (ri != CUDA_SUCCESS) {
    e->exec = NULL;
    entry_free(be, e);
    return kiln_cu_error(be->host, be->cu, ri, "cuGraphInstantiateWithFlags", NULL);
  }
  memcpy(e->nodes, step->nodes, step->n_nodes * sizeof *e->nodes);
  e->n_nodes = step->n_nodes;
  node_ptrs(step, e->ptrs);
  e->max_pos = max_pos(step);
  e->used = ++be->graph.clock;
  be->graph.captures++;
  const CUresult rl = be->cu->GraphLaunch(e->exec, be->stream);
  if (rl != CUDA_SUCCESS) {
    entry_free(be, e);
    return kiln_cu_error(be->host, be->cu, rl, "cuGraphLaunch", NULL);
  }
  return NULL;
}

kiln_status kiln_cuda_graph_run(kiln_cuda_backend *be, const kiln_step *step,
                                kiln_cuda_pass_fn run_pass, bool *out_done) {
  *out_done = false;
  kiln_cuda_graphs *g = &be->graph;
  /* Only whole decode steps: a parity observer's one-node steps would
   * each make a graph to no benefit. */
  if (!g->on || step->n_tokens != 1 || step->n_nodes < 8) return NULL;
  /* GET_COLUMNS copies from addresses its ids choose on the host: a
   * replay would copy the captured step's columns. */
  for (uint32_t i = 0; i < step->n_nodes; i++)
    if (step->nodes[i]->op == KILN_OP_GET_COLUMNS) return NULL;
  CUdeviceptr *scratch = malloc((size_t)step->n_nodes * PTRS_PER_NODE * sizeof *scratch);
  if (!scratch) return be->host->status_new(KILN_STATUS_NO_MEMORY, "%s: graph check", be->fl->name);
  for (int i = 0; i < KILN_CUDA_MAX_GRAPHS; i++)
    if (matches(be, &g->e[i], step, scratch)) {
      free(scratch);
      *out_done = true;
      return replay(be, &g->e[i], step);
    }
  free(scratch);
  if (g->seen_nodes != step->nodes || g->seen_n != step->n_nodes || g->seen_gen != g->gen) {
    g->seen_nodes = step->nodes; /* run it as usual; capture it when it comes again */
    g->seen_n = step->n_nodes;
    g->seen_gen = g->gen;
    return NULL;
  }
  *out_done = true;
  return capture(be, step, run_pass);
}
