/* Node checks of the cpu backend: what it supports (supports()), whether a
 * node's shapes and params make sense (prepare(); the checks every backend
 * shares, backends/common/node_check.h), and whether a step fits the
 * node's tensors (run()). The ops themselves trust these checks, so every
 * index an op computes is proven in range here or there. */
#include "config.h"

#include <string.h>

#include "kiln/kv_cache.h"
#include "kiln/plugin.h"

#include "cpu_ops.h"
#include "node_check.h"

/* ---- supports ----------------------------------------------------------- */

static kiln_status type_unsupported(const cpu_ctx *ctx, const kiln_node *node, const char *what,
                                    const kiln_tensor *t, const char *expected) {
  return cpu_node_error(ctx, KILN_STATUS_UNSUPPORTED, node,
                        "%s '%.*s' has type %s (id %d); the cpu backend takes %s there", what,
                        KILN_NAME_MAX, t->name, kiln_type_name(t->type), (int)t->type, expected);
}

static const char weight_types[] = "F32, F16, BF16, Q4_0, Q5_0, Q8_0, Q4_K, Q5_K or Q6_K";

/* A present tensor must be F32 (activation, KV cache). */
static kiln_status want_f32(const cpu_ctx *ctx, const kiln_node *node, const char *what,
                            const kiln_tensor *t) {
  if (t && t->type != KILN_TYPE_F32) return type_unsupported(ctx, node, what, t, "F32");
  return NULL;
}

/* A present KV cache must be of a KV type (kiln/kv_cache.h). */
static kiln_status want_kv(const cpu_ctx *ctx, const kiln_node *node, const char *what,
                           const kiln_tensor *t) {
  if (t && !kiln_kv_type_ok(t->type)) return type_unsupported(ctx, node, what, t, "F32, F16, BF16 or Q8_0");
  return NULL;
}

static kiln_status want_weight(const cpu_ctx *ctx, const kiln_node *node, const char *what,
                               const kiln_tensor *t) {
  if (t && !cpu_weight_type_ok(t->type)) return type_unsupported(ctx, node, what, t, weight_types);
  return NULL;
}

kiln_status cpu_node_supports(const cpu_ctx *ctx, const kiln_node *node) {
  const kiln_tensor *const *s = node->src;
  switch (node->op) {
  case KILN_OP_GET_ROWS:
    KILN_RETURN_IF_ERROR(want_weight(ctx, node, "embedding table src0", s[0]));
    if (s[1] && s[1]->type != KILN_TYPE_I32)
      return type_unsupported(ctx, node, "token ids src1", s[1], "I32");
    return want_f32(ctx, node, "dst", node->dst);
  case KILN_OP_RMS_NORM:
    KILN_RETURN_IF_ERROR(want_f32(ctx, node, "src0", s[0]));
    KILN_RETURN_IF_ERROR(want_weight(ctx, node, "norm weight src1", s[1]));
    return want_f32(ctx, node, "dst", node->dst);
  case KILN_OP_MUL_MAT:
    KILN_RETURN_IF_ERROR(want_weight(ctx, node, "weight src0", s[0]));
    KILN_RETURN_IF_ERROR(want_f32(ctx, node, "src1", s[1]));
    KILN_RETURN_IF_ERROR(want_weight(ctx, node, "bias src2", s[2]));
    return want_f32(ctx, node, "dst", node->dst);
  case KILN_OP_ROPE:
    if (node->p.rope.mode != KILN_ROPE_NORM && node->p.rope.mode != KILN_ROPE_NEOX &&
        node->p.rope.mode != KILN_ROPE_IMROPE)
      return cpu_node_error(ctx, KILN_STATUS_UNSUPPORTED, node,
                            "rope mode %d is not implemented (the cpu backend has NORM = 0, "
                            "NEOX = 2 and IMROPE = 40)",
                            (int)node->p.rope.mode);
    KILN_RETURN_IF_ERROR(want_f32(ctx, node, "src0", s[0]));
    return want_f32(ctx, node, "dst", node->dst);
  case KILN_OP_SSM_CONV:
    KILN_RETURN_IF_ERROR(want_f32(ctx, node, "src0", s[0]));
    KILN_RETURN_IF_ERROR(want_weight(ctx, node, "conv kernel src1", s[1]));
    KILN_RETURN_IF_ERROR(want_f32(ctx, node, "conv state src2", s[2]));
    return want_f32(ctx, node, "dst", node->dst);
  case KILN_OP_GDN_GATE:
    KILN_RETURN_IF_ERROR(want_f32(ctx, node, "alpha src0", s[0]));
    KILN_RETURN_IF_ERROR(want_f32(ctx, node, "beta src1", s[1]));
    KILN_RETURN_IF_ERROR(want_weight(ctx, node, "A src2", s[2]));
    KILN_RETURN_IF_ERROR(want_weight(ctx, node, "time-step bias src3", s[3]));
    return want_f32(ctx, node, "dst", node->dst);
  case KILN_OP_GET_COLUMNS:
    KILN_RETURN_IF_ERROR(want_f32(ctx, node, "src0", s[0]));
    if (s[1] && s[1]->type != KILN_TYPE_I32)
      return type_unsupported(ctx, node, "column ids src1", s[1], "I32");
    return want_f32(ctx, node, "dst", node->dst);
  case KILN_OP_STORE_KV:
    KILN_RETURN_IF_ERROR(want_f32(ctx, node, "src0", s[0]));
    return want_kv(ctx, node, "KV cache dst", node->dst);
  case KILN_OP_ATTENTION:
    KILN_RETURN_IF_ERROR(want_f32(ctx, node, "Q src0", s[0]));
    KILN_RETURN_IF_ERROR(want_kv(ctx, node, "K cache src1", s[1]));
    KILN_RETURN_IF_ERROR(want_kv(ctx, node, "V cache src2", s[2]));
    return want_f32(ctx, node, "dst", node->dst);
  case KILN_OP_SWIGLU:
  case KILN_OP_ADD:
  case KILN_OP_SLICE:
  case KILN_OP_SIGMOID_MUL:
  case KILN_OP_GATED_DELTA_NET:
    for (int i = 0; i < KILN_MAX_SRC; i++) {
      static const char *const names[KILN_MAX_SRC] = {"src0", "src1", "src2", "src3"};
      KILN_RETURN_IF_ERROR(want_f32(ctx, node, names[i], s[i]));
    }
    return want_f32(ctx, node, "dst", node->dst);
  default:
    return cpu_node_error(ctx, KILN_STATUS_UNSUPPORTED, node,
                          "op id %d is not implemented by the cpu backend", (int)node->op);
  }
}

/* ---- validate ----------------------------------------------------------- */

kiln_status cpu_node_validate(const cpu_ctx *ctx, const kiln_node *node) {
  /* What the cpu backend runs first (UNSUPPORTED), then what any node
   * must be (INVALID_ARGUMENT). supports() tolerates missing operands. */
  KILN_RETURN_IF_ERROR(cpu_node_supports(ctx, node));
  kiln_host_api host;
  cpu_status_host(ctx, &host);
  return kiln_node_check(&host, node);
}

/* ---- run-time checks ---------------------------------------------------- */

/* t holds at least n_tokens token columns (ne[0] for the I32 ids). */
static kiln_status check_columns(const cpu_ctx *ctx, const kiln_node *node, const char *what,
                                 const kiln_tensor *t, int32_t n_tokens) {
  int64_t cap = t->type == KILN_TYPE_I32 ? t->ne[0] : t->ne[1];
  if (n_tokens > cap)
    return cpu_node_error(ctx, KILN_STATUS_OUT_OF_RANGE, node,
                          "step has %d tokens but %s '%.*s' holds %lld columns", (int)n_tokens,
                          what, KILN_NAME_MAX, t->name, (long long)cap);
  return NULL;
}

/* Positions pos0 .. pos0+n_tokens-1 are columns of the cache t. */
static kiln_status check_positions(const cpu_ctx *ctx, const kiln_node *node, const char *what,
                                   const kiln_tensor *t, const cpu_io *io) {
  int64_t last = (int64_t)io->pos0 + io->n_tokens - 1;
  if (last >= t->ne[1])
    return cpu_node_error(ctx, KILN_STATUS_OUT_OF_RANGE, node,
                          "position %lld is past the end of %s '%.*s' (n_ctx %lld; step at "
                          "pos0 %d with %d tokens)",
                          (long long)last, what, KILN_NAME_MAX, t->name, (long long)t->ne[1],
                          (int)io->pos0, (int)io->n_tokens);
  return NULL;
}

static bool overlaps(const void *a, uint64_t na, const void *b, uint64_t nb) {
  const char *pa = a, *pb = b;
  return pa < pb + nb && pb < pa + na;
}

/* dst and the first n_src sources are pairwise disjoint (every output reads
 * sources other workers may still need, and a state is updated in place). */
static kiln_status check_no_overlap(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io,
                                    int n_src) {
  for (int i = 0; i < n_src; i++) {
    const kiln_tensor *si = node->src[i];
    if (overlaps(io->dst, node->dst->nbytes, io->src[i], si->nbytes))
      return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                            "dst '%.*s' overlaps src%d '%.*s'", KILN_NAME_MAX, node->dst->name, i,
                            KILN_NAME_MAX, si->name);
    for (int j = 0; j < i; j++)
      if (overlaps(io->src[j], node->src[j]->nbytes, io->src[i], si->nbytes) &&
          (i == kiln_op_state_src(node->op) || j == kiln_op_state_src(node->op)))
        return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                              "state src%d overlaps src%d", kiln_op_state_src(node->op),
                              i == kiln_op_state_src(node->op) ? j : i);
  }
  return NULL;
}

kiln_status cpu_node_run(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  KILN_RETURN_IF_ERROR(cpu_node_validate(ctx, node));
  return cpu_node_run_validated(ctx, node, io);
}

kiln_status cpu_node_run_validated(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io) {
  if (io->n_tokens < 1 || io->pos0 < 0)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "step has n_tokens %d and pos0 %d (want >= 1 and >= 0)",
                          (int)io->n_tokens, (int)io->pos0);
  if ((int64_t)io->pos0 + io->n_tokens > INT32_MAX)
    return cpu_node_error(ctx, KILN_STATUS_OUT_OF_RANGE, node, "positions overflow int32");
  if (!io->dst)
    return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node, "no buffer for dst '%.*s'",
                          KILN_NAME_MAX, node->dst->name);
  for (int i = 0; i < KILN_MAX_SRC; i++) {
    if (node->src[i] && !io->src[i])
      return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                            "no buffer for src%d '%.*s'", i, KILN_NAME_MAX, node->src[i]->name);
  }

  const kiln_tensor *const *s = node->src;
  const kiln_tensor *d = node->dst;
  int32_t T = io->n_tokens;
  switch (node->op) {
  case KILN_OP_GET_ROWS:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "token ids src1", s[1], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    return cpu_op_get_rows(ctx, node, io);
  case KILN_OP_RMS_NORM:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "src0", s[0], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    return cpu_op_rms_norm(ctx, node, io);
  case KILN_OP_MUL_MAT:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "src1", s[1], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    /* Every output reads all of src1 and the weight: no in-place form. */
    for (int i = 0; i < 3; i++) {
      if (s[i] && overlaps(io->dst, d->nbytes, io->src[i], s[i]->nbytes))
        return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                              "dst '%.*s' overlaps src%d '%.*s'", KILN_NAME_MAX, d->name, i,
                              KILN_NAME_MAX, s[i]->name);
    }
    return cpu_op_mul_mat(ctx, node, io);
  case KILN_OP_ROPE:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "src0", s[0], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    return cpu_op_rope(ctx, node, io);
  case KILN_OP_STORE_KV:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "src0", s[0], T));
    KILN_RETURN_IF_ERROR(check_positions(ctx, node, "KV cache dst", d, io));
    return cpu_op_store_kv(ctx, node, io);
  case KILN_OP_ATTENTION:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "Q src0", s[0], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    KILN_RETURN_IF_ERROR(check_positions(ctx, node, "K cache src1", s[1], io));
    for (int i = 0; i < 3; i++) {
      if (overlaps(io->dst, d->nbytes, io->src[i], s[i]->nbytes))
        return cpu_node_error(ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                              "dst '%.*s' overlaps src%d '%.*s'", KILN_NAME_MAX, d->name, i,
                              KILN_NAME_MAX, s[i]->name);
    }
    return cpu_op_attention(ctx, node, io);
  case KILN_OP_SWIGLU:
  case KILN_OP_ADD:
  case KILN_OP_SIGMOID_MUL:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "src0", s[0], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "src1", s[1], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    if (node->op == KILN_OP_SIGMOID_MUL) return cpu_op_sigmoid_mul(ctx, node, io);
    return node->op == KILN_OP_ADD ? cpu_op_add(ctx, node, io) : cpu_op_swiglu(ctx, node, io);
  case KILN_OP_SLICE:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "src0", s[0], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    KILN_RETURN_IF_ERROR(check_no_overlap(ctx, node, io, 1));
    return cpu_op_slice(ctx, node, io);
  case KILN_OP_SSM_CONV:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "src0", s[0], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    KILN_RETURN_IF_ERROR(check_no_overlap(ctx, node, io, 3));
    return cpu_op_ssm_conv(ctx, node, io);
  case KILN_OP_GDN_GATE:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "alpha src0", s[0], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "beta src1", s[1], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    KILN_RETURN_IF_ERROR(check_no_overlap(ctx, node, io, 4));
    return cpu_op_gdn_gate(ctx, node, io);
  case KILN_OP_GATED_DELTA_NET:
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "qkv src0", s[0], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "gates src1", s[1], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    KILN_RETURN_IF_ERROR(check_no_overlap(ctx, node, io, 3));
    return cpu_op_gated_delta_net(ctx, node, io);
  case KILN_OP_GET_COLUMNS:
    /* src0's columns are the ids' (checked by the op), not 0..T-1. */
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "column ids src1", s[1], T));
    KILN_RETURN_IF_ERROR(check_columns(ctx, node, "dst", d, T));
    KILN_RETURN_IF_ERROR(check_no_overlap(ctx, node, io, 1));
    return cpu_op_get_columns(ctx, node, io);
  default:
    return cpu_node_supports(ctx, node);
  }
}
