/*
 * kiln/plan.h — the executor: a graph assigned to backends, with buffers,
 * run one step (a batch of tokens) at a time.
 *
 * Planning assigns every node to the configured backend. A node that backend
 * cannot run (its supports() says why) fails the plan, naming the node and
 * the reason, unless fallback to cpu is allowed; then the node runs on the
 * cpu backend and the fallback is recorded as (node, backend, cause),
 * counted and printable. There is no other fallback: a backend whose
 * hardware is absent fails the plan with the probe's reason.
 *
 * Buffers are allocated and weights uploaded (or mapped, on host-memory
 * backends) when the plan is made; kiln_plan_preload() then calls every
 * backend's prepare() on every node, so every kernel the plan needs is
 * resolved — through the kernel cache, with the model's own parameters —
 * before the first step. When consecutive nodes run on different backends,
 * the executor copies the tensors between them through host memory.
 *
 * Ownership: the plan borrows the graph, registry and config (they must
 * outlive it) and owns the backend instances it opens.
 */
#ifndef KILN_PLAN_H
#define KILN_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/backend.h"
#include "kiln/config.h"
#include "kiln/model.h"
#include "kiln/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_plan kiln_plan;

/* One node that ran elsewhere than the configured backend. */
typedef struct kiln_fallback {
  const kiln_node *node;
  const char *backend; /* where it ran: "cpu" */
  const char *cause;   /* the configured backend's supports() message */
} kiln_fallback;

/* Plans g on `backend` (a plugin name found through r), with its section of
 * c. fallback_cpu: nodes `backend` cannot run go to cpu (recorded) instead
 * of failing. Errors: KILN_STATUS_NOT_FOUND (no such plugin),
 * KILN_STATUS_UNAVAILABLE (probe says the hardware is absent, with why),
 * KILN_STATUS_UNSUPPORTED (a node without fallback; names node and cause),
 * NO_MEMORY / DEVICE from buffer allocation or weight upload. */
kiln_status kiln_plan_create(const kiln_graph *g, kiln_plugin_registry *r, const kiln_config *c,
                             const char *backend, bool fallback_cpu, kiln_plan **out_plan);
void kiln_plan_free(kiln_plan *p);

/* Calls prepare() for every node on its backend (kernel resolution). Done
 * once; kiln_plan_step() calls it if it has not run. Errors name the node. */
kiln_status kiln_plan_preload(kiln_plan *p);

/* Runs the graph's body for tokens[0..n) at positions pos0..pos0+n-1,
 * then its output head (output norm and logits) for the n_out step columns
 * out_cols[0..n_out), each in [0, n): column i of kiln_graph_logits() then
 * holds the logits of token out_cols[i]. n_out = 0 skips the head (a
 * prompt's earlier micro-batches), n_out = 1 with {n-1} computes the last
 * token's only (`kiln run`, decode), all n columns are for parity and
 * perplexity. The head runs as a step of n_out tokens at position pos0 +
 * out_cols[0]: an observer sees its nodes with that count and position.
 * n <= the graph's batch and pos0 + n <= n_ctx, and a column outside [0,
 * n) is KILN_STATUS_OUT_OF_RANGE; n_out outside [0, n] is
 * KILN_STATUS_INVALID_ARGUMENT. Positions before pos0 must have been run
 * already: their K and V are read from the cache. A graph with recurrent
 * layers (RECURRENT tensors) holds the memory of every position before the
 * next one, so a step there must start at 0 (a new sequence) or exactly
 * where the last step's body ended; anything else is
 * KILN_STATUS_INVALID_ARGUMENT. A graph without a head
 * (kiln_plan_has_head() false) computes its logits in the body, for every
 * column, whatever out_cols says. */
kiln_status kiln_plan_step_outputs(kiln_plan *p, const int32_t *tokens, int32_t n, int32_t pos0,
                                   const int32_t *out_cols, int32_t n_out);

/* kiln_plan_step_outputs() with the logits of every token (out_cols = 0..n-1). */
kiln_status kiln_plan_step(kiln_plan *p, const int32_t *tokens, int32_t n, int32_t pos0);

/* kiln_plan_step in three parts, for a caller that acts between nodes (the
 * tensor-parallel emulator, kiln/tp.h, adds partial sums at its all-reduce
 * points): begin checks the step as kiln_plan_step does and uploads the
 * tokens (and, for the output head, every column); step_nodes runs nodes
 * first..first+count-1 (call it over consecutive ranges, in order, until
 * every node has run); end closes the step. A failed step_nodes ends the
 * step. */
kiln_status kiln_plan_step_begin(kiln_plan *p, const int32_t *tokens, int32_t n, int32_t pos0);
kiln_status kiln_plan_step_nodes(kiln_plan *p, uint32_t first, uint32_t count);
kiln_status kiln_plan_step_end(kiln_plan *p);

/* Waits until every backend of the plan has finished the work its steps
 * queued: a step that asks for no logits returns once its launches are
 * queued on an asynchronous backend (CUDA), so a caller that times what
 * comes next (kiln bench after its untimed depth) waits here first, as
 * llama-bench calls llama_synchronize. The first backend's error
 * (KILN_STATUS_DEVICE for a failed kernel), annotated with its name. */
kiln_status kiln_plan_sync(kiln_plan *p);

/* Whether the graph has a separate output head (kiln_plan_step_outputs()):
 * every graph kiln's builders make has one. */
bool kiln_plan_has_head(const kiln_plan *p);

/* Copies columns col0..col0+n_cols-1 of tensor t (an F32 activation of
 * the last step, or a KV cache of any KV type, converted to f32 exactly as
 * the attention kernels read it: kiln_kv_load_row) to out ([ne0, n_cols],
 * ne0 first). KILN_STATUS_INVALID_ARGUMENT naming t for a weight, another
 * type, or columns outside it; KILN_STATUS_NO_MEMORY. */
kiln_status kiln_plan_read(kiln_plan *p, const kiln_tensor *t, int32_t col0, int32_t n_cols, float *out);

/* Overwrites columns col0..col0+n_cols-1 of F32 tensor t (an activation
 * computed in this step, or a KV cache) with in ([ne0, n_cols]), on the
 * backend that holds it; later nodes read the new values. */
kiln_status kiln_plan_write(kiln_plan *p, const kiln_tensor *t, int32_t col0, int32_t n_cols, const float *in);

/* Called after every node when set: data is the node's output for this
 * step, [dst->ne0, n_tokens] (for STORE_KV: the cache columns it wrote).
 * Setting an observer makes the executor run one node per backend call and
 * read every output back: for parity runs, not for speed. A non-NULL
 * status from the observer stops the step and is returned. */
typedef kiln_status (*kiln_node_observer)(const kiln_node *node, const float *data, int32_t n_tokens,
                                          int32_t pos0, void *user);
void kiln_plan_set_observer(kiln_plan *p, kiln_node_observer fn, void *user);

const kiln_graph *kiln_plan_graph(const kiln_plan *p);
/* The backend node i runs on ("cpu", "cuda-batched"). */
const char *kiln_plan_node_backend(const kiln_plan *p, uint32_t i);
const char *kiln_plan_backend_name(const kiln_plan *p);

/* The numeric modes in effect on the plan's backend named `backend` (NULL:
 * the configured one, kiln_plan_backend_name), as its plugin's
 * describe_modes says them after every node is prepared (kiln/plugin.h):
 * one line into out_line, cap bytes with its NUL (cap 0 writes nothing),
 * e.g. "gemm q16mma: 198 batched GEMMs: 196 q16mma (Q4_K 168, Q6_K 28),
 * 2 bf16x3 fallback (F16 2: no mmq decoder)"; "" when the plugin has nothing to say or no describe_modes. Runs
 * kiln_plan_preload() first if it has not run (its errors). Errors:
 * KILN_STATUS_NOT_FOUND when no backend of the plan has that name (the
 * cpu of a fallback is opened only when some node fell back); the
 * plugin's, annotated with its name. out_line is "" on every error. */
kiln_status kiln_plan_describe_modes(kiln_plan *p, const char *backend, char *out_line, size_t cap);

uint32_t kiln_plan_n_fallbacks(const kiln_plan *p);
const kiln_fallback *kiln_plan_fallback(const kiln_plan *p, uint32_t i);
/* "fallback: 12 of 58 nodes ran on cpu" and one line per node with cause. */
void kiln_plan_print_fallbacks(const kiln_plan *p, FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* KILN_PLAN_H */
