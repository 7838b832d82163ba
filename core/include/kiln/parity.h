/*
 * kiln/parity.h — comparing a backend with a reference, op by op and token
 * position by token position (`kiln parity`).
 *
 * Both sessions run the same model on the same tokens. For every compared
 * node (the logits alone, or with per_op every node of the graph) and every
 * position p, with r the reference's output column and t the test's:
 *
 *   cosine      r.t / (|r| |t|)
 *   norm ratio  |t| / |r|            (scale: what cosine cannot see)
 *   rel L2      |t - r| / |r|
 *   max abs     max |t_i - r_i|
 *
 * A row passes when t is finite, |norm ratio - 1| <= max_norm_dev,
 * rel L2 <= max_rel_l2 and cosine >= min_cos: all three, since cosine alone
 * is blind to scale (DESIGN.md: the ε defect read cosine 1.000 at a norm
 * ratio of 0.431). A zero reference column (|r| = 0) passes only if t is
 * zero too. This follows llama.cpp's test-backend-ops, per position.
 */
#ifndef KILN_PARITY_H
#define KILN_PARITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_parity_side {
  const char *backend;                 /* plugin name */
  const kiln_config_override *overrides; /* e.g. {"cpu","precision","f64"}, {"kv_cache","type","f16"} */
  size_t n_overrides;
  float eps_override;                  /* plan RMSNorm with this ε (0 = the model's) */
} kiln_parity_side;

typedef struct kiln_parity_options {
  kiln_parity_side ref, test;
  bool per_op;          /* every node, else the logits only */
  int32_t batch;        /* prefill micro-batch for both (0 = configured) */
  double max_rel_l2;    /* defaults (0 here): 1e-3 */
  double max_norm_dev;  /* 1e-3 */
  double min_cos;       /* 0.9999 */
} kiln_parity_options;

typedef struct kiln_parity_row {
  uint32_t node;        /* graph node index */
  const char *name;     /* "blk.0.attn_norm", valid while the report lives */
  const char *op;       /* the op's name, "rms_norm" (static storage) */
  int32_t pos;          /* token position */
  int32_t token;        /* the token id at pos */
  double cos, norm_ratio, rel_l2, max_abs;
  bool finite;          /* the test output is all finite */
  bool pass;
} kiln_parity_row;

typedef struct kiln_parity_report {
  kiln_parity_row *rows; /* node-major, then position */
  size_t n_rows;
  size_t n_fail;
  long first_fail;       /* row index, -1 when all pass */
  char ref_name[64], test_name[64];
  /* The modes in effect on each side's backend, its plugin's words
   * (kiln_plan_describe_modes): "gemm q16mma: 198 batched GEMMs: 196
   * q16mma (Q4_K 196), 2 bf16x3 fallback (F16 2: no mmq decoder)"; ""
   * when it has nothing to say (cut to 255 bytes). */
  char ref_modes[256], test_modes[256];
  kiln_parity_options opt; /* with defaults filled in */
  char **node_names;     /* owned */
  uint32_t n_nodes;
} kiln_parity_report;

/* Runs ids[0..n) through both sides and compares. A failed comparison is
 * not an error: it is in the report (n_fail, first_fail). Errors are those
 * of opening and running the sessions, and KILN_STATUS_INTERNAL if the two
 * graphs differ in shape. */
kiln_status kiln_parity_run(kiln_runtime *rt, const kiln_model *m, const int32_t *ids, size_t n,
                            const kiln_parity_options *opt, kiln_parity_report **out_report);
void kiln_parity_report_free(kiln_parity_report *r);

/* The terminal table: per node, its worst position (all positions with
 * `all_positions`), token texts from v (may be NULL), and the verdict;
 * after its header, a line per side whose modes in effect say more than
 * its configuration ("parity: test cuda-batched[gemm=q16mma] ran gemm
 * q16mma: ..."). */
void kiln_parity_print(const kiln_parity_report *r, const kiln_vocab *v, bool all_positions, FILE *out);

/* One line per (node, position): node,op,pos,token,cos,norm_ratio,rel_l2,max_abs,finite,pass. */
kiln_status kiln_parity_write_csv(const kiln_parity_report *r, const char *path);

/* An SVG drawn by gnuplot: the norm ratio by position, one line per
 * compared node (the failing ones named in the key). KILN_STATUS_UNAVAILABLE
 * when gnuplot cannot be run. */
kiln_status kiln_parity_plot_svg(const kiln_parity_report *r, const char *path);

#ifdef __cplusplus
}
#endif
#endif
