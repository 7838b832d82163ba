/* The output head every decoder graph ends with: the columns whose logits
 * are read, the output norm, and the projection to the vocabulary. Kept
 * apart from the body so the executor can run it for fewer columns than
 * the step has: a prompt of 128 tokens needs the logits of one, and on a
 * vocabulary of 151936 the head costs as much as several layers per column
 * (llama.cpp's inp_out_ids does the same). */
#include "config.h"

#include "graph_internal.h"

kiln_status kiln__graph_add_head(kiln_graph *g, kiln_tensor *x, const kiln_tensor *norm_w,
                                 const kiln_tensor *out_w, float eps) {
  kiln_tensor *ids, *h, *logits;
  kiln_node *nd;
  const int64_t width = x->ne[0], n_vocab = out_w->ne[1];
  KILN_RETURN_IF_ERROR(kiln__graph_add_tensor(g, "out_ids", KILN_TYPE_I32, KILN_ROLE_INPUT, g->batch, 1, NULL, &ids));
  ids->n_dims = 1;
  g->head_first = g->n_nodes;
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_GET_COLUMNS, -1, "out_columns", width, NULL, NULL, &h, 2, x, ids));
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_RMS_NORM, -1, "output_norm", width, NULL, &nd, &h, 2, h, norm_w));
  nd->p.rms_norm.eps = eps;
  KILN_RETURN_IF_ERROR(kiln__graph_add_node(g, KILN_OP_MUL_MAT, -1, "logits", n_vocab, NULL, NULL, &logits, 2, out_w, h));
  g->out_ids = ids;
  g->logits = logits;
  return NULL;
}
