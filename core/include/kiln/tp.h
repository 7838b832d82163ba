/*
 * kiln/tp.h — tensor parallelism: a model's graph split across N shards,
 * Megatron-style (Shoeybi et al. 2019, "Megatron-LM"), and an emulation of
 * the N shards on one backend.
 *
 * The plan (kiln_tp_plan_create) walks an unsharded graph and decides, per
 * weight, how it is split, and per node, what each shard's output holds:
 *   - column-parallel projections (attn_q by query heads, attn_k and attn_v
 *     by KV heads so every shard keeps the model's GQA ratio, ffn_gate and
 *     ffn_up by FFN columns, their biases alike): weight rows (ne1) split
 *     in N contiguous blocks; the output is SHARDED, shard s holding block s
 *     of every token's vector. RoPE, per-head q/k norms, the KV caches
 *     (sharded by KV heads), attention and SwiGLU then run on the shard's
 *     heads or columns alone;
 *   - row-parallel projections (attn_output, ffn_down): every weight row
 *     (ne0, the input dimension) split in N blocks; the output is a PARTIAL
 *     sum, and an all-reduce (sum over shards) follows the node, after which
 *     every shard holds the full value;
 *   - the output projection (output.weight, or token_embd.weight when tied)
 *     by vocabulary rows: SHARDED logits, gathered before sampling;
 *   - everything else (the embedding lookup, the RMSNorms of the residual
 *     stream, the residual adds) REPLICATED: every shard computes it whole.
 * Splits must be even: a head count, KV head count, FFN width or vocabulary
 * that N does not divide, or a row-parallel slice that is not a whole
 * number of its type's quant blocks, is refused naming the tensor and the
 * numbers. Recurrent (qwen35) layers have no split yet and are refused.
 *
 * A shard graph (kiln_tp_shard_build) is the graph one device runs: the same
 * nodes, in the same order and with the same names and ids, on the shard's
 * slices. Row-split weights point into the model's mapping; row-parallel
 * weights (their rows cut) are copies the shard owns.
 *
 * The emulator (kiln_tp_emulator_*) plans the N shard graphs on one backend
 * (cpu) and runs them in lockstep, adding the partial sums at every
 * all-reduce point and gathering the vocabulary slices, as NCCL's
 * ncclAllReduce and ncclAllGather would on N devices. It exists to test the
 * plan against the unsharded run; it is not a way to go faster.
 *
 * Ownership: a plan borrows the graph it was made from; a shard owns its
 * graph and copies and borrows the model; an emulator borrows the runtime
 * and model.
 */
#ifndef KILN_TP_H
#define KILN_TP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most shards a plan may have. */
#define KILN_TP_MAX_SHARDS 64

/* How a tensor is divided among the shards. */
typedef enum kiln_tp_split {
  KILN_TP_SPLIT_NONE = 0, /* every shard holds all of it (weights) or computes all of it */
  KILN_TP_SPLIT_ROWS = 1, /* weights: ne1 in N contiguous blocks (column-parallel, vocabulary) */
  KILN_TP_SPLIT_K = 2,    /* weights: every row's ne0 in N contiguous blocks (row-parallel) */
  KILN_TP_SPLIT_COLUMN = 3 /* activations, KV caches: block s of every column (ne0 / N values) */
} kiln_tp_split;

/* What each shard's copy of a node's output holds. */
typedef enum kiln_tp_layout {
  KILN_TP_REPLICATED = 0, /* the whole value, the same in every shard */
  KILN_TP_SHARDED = 1,    /* block s of every token's vector; the value is their concatenation */
  KILN_TP_PARTIAL = 2     /* a partial sum; the value is the sum over shards */
} kiln_tp_layout;

/* The collective that follows a node. */
typedef enum kiln_tp_collective {
  KILN_TP_COLLECTIVE_NONE = 0,
  KILN_TP_ALL_REDUCE = 1, /* sum of the PARTIAL outputs, written back to every shard */
  KILN_TP_GATHER = 2      /* concatenation of the SHARDED outputs (the logits) */
} kiln_tp_collective;

typedef struct kiln_tp_plan kiln_tp_plan;

/* Plans g (built from a model with hyperparameters hp) for n_shards shards.
 * n_shards = 1 is a valid plan (nothing split). Errors:
 * KILN_STATUS_INVALID_ARGUMENT for n_shards outside 1..KILN_TP_MAX_SHARDS;
 * KILN_STATUS_UNSUPPORTED for a split that does not divide, naming the
 * tensor and the numbers ("blk.0.attn_k.weight: 2 KV heads
 * (attention.head_count_kv) do not divide among 4 shards"), or a node the
 * plan has no split for (naming it). */
kiln_status kiln_tp_plan_create(const kiln_graph *g, const kiln_hparams *hp, int32_t n_shards,
                                kiln_tp_plan **out_plan);
void kiln_tp_plan_free(kiln_tp_plan *p);

int32_t kiln_tp_plan_shards(const kiln_tp_plan *p);
const kiln_graph *kiln_tp_plan_graph(const kiln_tp_plan *p);
/* How node i's source `src` and its output are divided. A split is per use:
 * a tied model's token_embd.weight is whole for the lookup and split by
 * vocabulary rows for the logits. */
kiln_tp_split kiln_tp_plan_src_split(const kiln_tp_plan *p, uint32_t node, int src);
kiln_tp_split kiln_tp_plan_dst_split(const kiln_tp_plan *p, uint32_t node);
/* Node i's output layout and the collective after it. */
kiln_tp_layout kiln_tp_plan_node_layout(const kiln_tp_plan *p, uint32_t node);
kiln_tp_collective kiln_tp_plan_node_collective(const kiln_tp_plan *p, uint32_t node);
/* How many all-reduce points the plan has (2 per decoder block). */
uint32_t kiln_tp_plan_n_all_reduce(const kiln_tp_plan *p);
/* One line per split weight ("blk.0.attn_q.weight  rows  [64 x 32] of [64 x 64]"), the
 * all-reduce and gather points, and a summary line. */
void kiln_tp_plan_print(const kiln_tp_plan *p, FILE *out);

/* One shard's graph. */
typedef struct kiln_tp_shard kiln_tp_shard;

/* Builds shard `shard` (0..n_shards-1) of plan p. KILN_STATUS_NO_MEMORY. */
kiln_status kiln_tp_shard_build(const kiln_tp_plan *p, int32_t shard, kiln_tp_shard **out_shard);
void kiln_tp_shard_free(kiln_tp_shard *s);
/* The shard's graph: node i is node i of the plan's graph, on the shard's slices. */
const kiln_graph *kiln_tp_shard_graph(const kiln_tp_shard *s);

/* ---- the emulator --------------------------------------------------------- */

typedef struct kiln_tp_emulator_options {
  int32_t n_shards;   /* >= 1 */
  const char *backend; /* NULL: "cpu"; every shard is planned on it */
  int32_t n_ctx;      /* KV positions, >= 1 */
  int32_t batch;      /* tokens per step, 1..n_ctx */
  /* Settings for these plans only ({"cpu", "precision", "f64"}). */
  const kiln_config_override *overrides;
  size_t n_overrides;
} kiln_tp_emulator_options;

typedef struct kiln_tp_emulator kiln_tp_emulator;

/* Builds the model's graph, the plan (its errors) and the N shard graphs,
 * and plans each shard on the backend (kiln/plan.h errors). */
kiln_status kiln_tp_emulator_open(kiln_runtime *rt, const kiln_model *m, const kiln_tp_emulator_options *opt,
                                  kiln_tp_emulator **out_emulator);
void kiln_tp_emulator_free(kiln_tp_emulator *e);

const kiln_tp_plan *kiln_tp_emulator_plan(const kiln_tp_emulator *e);

/* When set, called after every node with the node of the unsharded graph
 * and the value the shards hold together, [dst->ne0, n_tokens]: a
 * REPLICATED output as shard 0 holds it, SHARDED outputs concatenated,
 * PARTIAL outputs summed — what the unsharded run's observer
 * (kiln_plan_set_observer) sees for the same node. Runs node by node. */
void kiln_tp_emulator_set_observer(kiln_tp_emulator *e, kiln_node_observer fn, void *user);

/* Feeds ids[0..n) at the current position (micro-batches of the batch) and
 * advances it; out_all_logits, if not NULL, receives the gathered
 * [n_vocab, n] logits (ne0 first). KILN_STATUS_OUT_OF_RANGE when the KV
 * cache would overflow. */
kiln_status kiln_tp_emulator_eval(kiln_tp_emulator *e, const int32_t *ids, int32_t n, float *out_all_logits);

#ifdef __cplusplus
}
#endif
#endif /* KILN_TP_H */
