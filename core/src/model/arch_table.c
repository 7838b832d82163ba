/* The architectures kiln runs, keyed by general.architecture, and the
 * graph builder's entry point that dispatches on them. */
#include "config.h"

#include "kiln/kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "model_internal.h"

extern const kiln__arch kiln__arch_llama, kiln__arch_qwen2, kiln__arch_qwen3, kiln__arch_qwen35;

static const kiln__arch *const archs[] = {&kiln__arch_llama, &kiln__arch_qwen2, &kiln__arch_qwen3,
                                          &kiln__arch_qwen35};

const kiln__arch *kiln__arch_find(const char *name) {
  for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
    if (!strcmp(archs[i]->name, name)) return archs[i];
  return NULL;
}

size_t kiln__arch_count(void) { return sizeof archs / sizeof archs[0]; }
const kiln__arch *kiln__arch_at(size_t i) { return i < kiln__arch_count() ? archs[i] : NULL; }

kiln_status kiln_graph_build(const kiln_model *m, const kiln_graph_options *opt, kiln_graph **out_graph) {
  *out_graph = NULL;
  if (opt->batch < 1 || opt->n_ctx < 1 || opt->batch > opt->n_ctx)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "graph: batch %d and n_ctx %d must be >= 1 with batch <= n_ctx", opt->batch,
                           opt->n_ctx);
  if (!kiln_kv_type_ok(opt->kv_type))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "graph: KV cache type %s (id %d) is not one of F32, F16, BF16, Q8_0",
                           kiln_type_name(opt->kv_type), (int)opt->kv_type);
  kiln_graph *g = calloc(1, sizeof *g);
  if (!g) return kiln_status_new(KILN_STATUS_NO_MEMORY, "graph");
  g->batch = opt->batch;
  g->kv_type = opt->kv_type;
  g->n_ctx = opt->n_ctx;
  float eps = opt->eps_override > 0.0f ? opt->eps_override : m->hp.eps;
  kiln_status st = m->arch->build(g, m, eps);
  if (!st) st = kiln__graph_mark_feeds_recurrent(g);
  if (st) {
    kiln_graph_free(g);
    return kiln_status_annotate(st, "building the %s graph", m->hp.arch_name);
  }
  *out_graph = g;
  return NULL;
}
