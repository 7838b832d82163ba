/* Internal to libkiln: the graph as the model builders write it and the
 * planner reads it (kiln/graph.h has the node and tensor types). */
#ifndef KILN_GRAPH_INTERNAL_H
#define KILN_GRAPH_INTERNAL_H

#include "kiln/model.h"

struct kiln_graph {
  kiln_tensor **tensors;
  uint32_t n_tensors, cap_tensors;
  kiln_node **nodes;
  uint32_t n_nodes, cap_nodes;
  const kiln_tensor *tokens, *logits;
  int32_t batch, n_ctx;
  kiln_type kv_type; /* of every KV cache (kiln_graph_options.kv_type) */
  /* The output head (kiln__graph_add_head): nodes [head_first, n_nodes)
   * run only for the columns named in out_ids (I32 INPUT [batch]). NULL
   * out_ids: a builder without a head, whose logits cover every column. */
  const kiln_tensor *out_ids;
  uint32_t head_first;
};

/* A new tensor [ne0, ne1] owned by the graph; `data` is borrowed (a GGUF
 * weight's bytes) or NULL for activations and state. KILN_STATUS_NO_MEMORY. */
kiln_status kiln__graph_add_tensor(kiln_graph *g, const char *name, kiln_type type, kiln_tensor_role role,
                                   int64_t ne0, int64_t ne1, const void *data, kiln_tensor **out);

/* A layer's K and V caches, "blk.<layer>.cache_k" and ".cache_v": STATE
 * [kv_width, n_ctx] of the graph's kv_type. KILN_STATUS_INVALID_ARGUMENT
 * naming the layer and head_dim when the type is block-quantized (Q8_0:
 * blocks of 32 along ne0) and head_dim is not a multiple of its block, so
 * that no block straddles two heads; KILN_STATUS_NO_MEMORY. */
kiln_status kiln__graph_add_kv_caches(kiln_graph *g, int32_t layer, int64_t head_dim, int64_t kv_width,
                                      kiln_tensor **out_k, kiln_tensor **out_v);

/* A node `op` reading the n_src tensors that follow and writing `dst`, or,
 * when dst_or_null is NULL, a fresh F32 activation [width, batch] named like
 * the node. out_node and out_dst may be NULL. KILN_STATUS_NO_MEMORY. */
kiln_status kiln__graph_add_node(kiln_graph *g, kiln_op op, int32_t layer, const char *name, int64_t width,
                                 const kiln_tensor *dst_or_null, kiln_node **out_node, kiln_tensor **out_dst,
                                 int n_src, ...);

/* The output head after the decoder body, whose last hidden state is x
 * [H, batch]: GET_COLUMNS of the columns in a new INPUT "out_ids", the
 * output RMSNorm (weight norm_w [H], ε eps), and the logits MUL_MAT by
 * out_w [H, n_vocab]. Sets g->out_ids, g->head_first and g->logits, so the
 * executor can skip the head, or run it for the last column only, when
 * other logits are not read. KILN_STATUS_NO_MEMORY. */
kiln_status kiln__graph_add_head(kiln_graph *g, kiln_tensor *x, const kiln_tensor *norm_w,
                                 const kiln_tensor *out_w, float eps);

/* Sets p.mul_mat.feeds_recurrent of every MUL_MAT node (kiln/graph.h):
 * whether a node that updates a RECURRENT state reads its output, directly
 * or through later nodes. kiln_graph_build calls it once the builder is
 * done. KILN_STATUS_NO_MEMORY. */
kiln_status kiln__graph_mark_feeds_recurrent(kiln_graph *g);

#endif
