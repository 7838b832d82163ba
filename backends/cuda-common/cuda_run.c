/* run(step): the step's nodes as launches on the backend's stream, with
 * the kernels prepare() resolved. A step of one token takes the decode
 * path (matvec or matvec_q, the flavor's decode RMSNorm, the fused
 * kernels of cuda_fuse.c). A step of T > 1 tokens on cuda-serial runs the
 * whole node range T times, one token at a time (token t at column t,
 * position pos0 + t), which computes what one pass over all tokens
 * computes: a node reads only columns of its own token and cache
 * positions up to its token's, written earlier. On a batched flavor each
 * node runs once over all T tokens (GEMMs, rmsnorm_rows, ...).
 *
 * Each pass first writes its positions into the step block (cuda_step.h),
 * then binds each node (every check of cuda_node_run.c) before launching
 * anything for it. A step of one token may instead replay its captured
 * graph (cuda_graph.c). */
#include "config.h"

#include <string.h>

#include "cuda_backend.h"

/* One node alone in a pass of n tokens: a matvec_q's input quantized into
 * the scratch first when it is not there yet, then its launches, each
 * timed under its kind when profiling. */
static kiln_status run_alone(kiln_cuda_backend *be, const kiln_step *step, const kiln_node *node,
                             int32_t n, int32_t col, int32_t pos, int multi) {
  kiln_cuda_bound nb;
  KILN_RETURN_IF_ERROR(kiln_cuda_bind(be, step, node, n, col, pos, &nb));
  const kiln_cuda_node_state *ns = nb.ns;
  const bool mvq = n == 1 && ns->mvq.fn;
  kiln_status st;
  if (mvq && !kiln_cuda_xq_holds(be, node->src[1])) {
    KILN_RETURN_IF_ERROR(kiln_cuda_prof_begin(be));
    st = kiln_cuda_quantize_input(be, &nb, col);
    if (st) {
      be->prof.open = false;
      return st;
    }
    KILN_RETURN_IF_ERROR(kiln_cuda_prof_end(be, ns->prof_fused[0]));
  }
  /* A node that overwrites the tensor a scratch holds makes it stale:
   * cleared before the launch, so that a launch which writes its output
   * quantized too (attention_merge) can say so. A matvec_q's own input,
   * just quantized above, is never its output. */
  if (be->xq_of == node->dst) be->xq_of = NULL;
  if (be->x16_of == node->dst) be->x16_of = NULL;
  KILN_RETURN_IF_ERROR(kiln_cuda_prof_begin(be));
  st = kiln_cuda_node_launch(be, &nb, n, col, pos);
  if (st) {
    be->prof.open = false; /* the record is dropped */
    return st;
  }
  return kiln_cuda_prof_end(be, mvq ? ns->prof_fused[1] : ns->prof_kind[multi]);
}

/* One pass's launches: n tokens from column col at position pos, the
 * step block already written. */
static kiln_status pass_launches(kiln_cuda_backend *be, const kiln_step *step, int32_t n,
                                 int32_t col, int32_t pos, int multi) {
  be->pass++;
  for (uint32_t i = 0; i < step->n_nodes;) {
    uint32_t used = 0;
    if (n == 1) KILN_RETURN_IF_ERROR(kiln_cuda_fuse_at(be, step, i, col, pos, &used));
    if (used) {
      i += used;
      continue;
    }
    KILN_RETURN_IF_ERROR(run_alone(be, step, step->nodes[i], n, col, pos, multi));
    i++;
  }
  return NULL;
}

/* One pass: the step block, then its launches. */
static kiln_status run_pass(kiln_cuda_backend *be, const kiln_step *step, int32_t n, int32_t col,
                            int32_t pos, int multi) {
  KILN_RETURN_IF_ERROR(kiln_cuda_step_write(be, pos, n));
  return pass_launches(be, step, n, col, pos, multi);
}

/* What a capture records: the launches of a step of one token. */
static kiln_status capture_pass(kiln_cuda_backend *be, const kiln_step *step) {
  return pass_launches(be, step, 1, 0, step->pos0, 0);
}

/* The step's passes: one token at a time on cuda-serial. */
static kiln_status run_nodes(kiln_cuda_backend *be, const kiln_step *step, int multi) {
  if (be->fl->prefill == KILN_CUDA_PREFILL_SERIAL) {
    for (int32_t t = 0; t < step->n_tokens; t++)
      KILN_RETURN_IF_ERROR(run_pass(be, step, 1, t, step->pos0 + t, multi));
    return NULL;
  }
  return run_pass(be, step, step->n_tokens, 0, step->pos0, multi);
}

kiln_status kiln_cuda_run(void *backend, const kiln_step *step) {
  kiln_cuda_backend *be = backend;
  if (step->n_tokens < 1 || step->pos0 < 0 || step->pos0 > INT32_MAX - step->n_tokens)
    return be->host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                                "%s: step of %d tokens at position %d", be->fl->name,
                                (int)step->n_tokens, (int)step->pos0);
  KILN_RETURN_IF_ERROR(kiln_cuda_enter(be));
  const int multi = step->n_tokens > 1;
  const double t0 = be->prof.on ? kiln_cuda_now_ms() : 0.0;
  KILN_RETURN_IF_ERROR(kiln_cuda_prof_step_begin(be, multi));
  bool done = false;
  kiln_status st = kiln_cuda_graph_run(be, step, capture_pass, &done);
  if (!st && !done) st = run_nodes(be, step, multi);
  if (!be->prof.on) return st;
  if (st) {
    kiln_cuda_prof_step_abort(be); /* a failed step is not timed */
    return st;
  }
  return kiln_cuda_prof_step_end(be, step->n_tokens, kiln_cuda_now_ms() - t0);
}
