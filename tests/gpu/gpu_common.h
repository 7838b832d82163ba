/* Shared pieces of the GPU suites (tests/gpu/): the skip rule, a runtime
 * with every CUDA plugin's section declared, per-position comparisons, and
 * a harness that runs one hand-built node on any backend through its ops
 * table (kiln/plugin.h), as the executor would.
 *
 * The suites link libkiln only: they reach the GPU through the plugin
 * loader. Without a usable device (a plugin missing, or its probe says
 * unavailable) each program prints why and exits 77 (SKIP), or fails with
 * KILN_REQUIRE_GPU=1. Include after <cmocka.h> and its prerequisites. */
#ifndef KILN_TEST_GPU_COMMON_H
#define KILN_TEST_GPU_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/kiln.h"

/* The CUDA backends every GPU test covers, in this order. */
#define KG_N_BACKENDS 3
extern const char *const kg_backends[KG_N_BACKENDS];

/* 0 when every CUDA plugin loads and its probe says available (each
 * device line printed); otherwise prints "SKIP <test>: <plugin>: <why>"
 * and returns 77, or 1 when KILN_REQUIRE_GPU=1. For main(). */
int kg_gate(const char *test);

/* Whether the suite covers kg_backends[b]: all of them, unless
 * KILN_TEST_BACKENDS names a comma-separated subset (e.g. "cuda-serial"),
 * so that tools/device/sanitize.sh can run the slow suites (test_gpu_golden,
 * test_gpu_qwen35: the only ones that read it) once per backend, in
 * parallel. kg_gate fails a suite whose KILN_TEST_BACKENDS names anything
 * else. */
bool kg_backend_on(int b);

/* A runtime with [cpu] precision = f64, [cuda-cc120] allow_lower_cc = true
 * (an H200 runs the 12.x variants for its own sm_90), the batched flavors'
 * gemm = f32 (their default is bf16x3: test_gpu_ops checks it), every CUDA
 * section declared, and `extra` overrides after those (the later wins).
 * Fails the test on error, or with more than 34 extras. */
kiln_runtime *kg_runtime(const kiln_config_override *extra, size_t n_extra);

/* kg_runtime with every CUDA section's activations mode ("f32", "q16",
 * "q8") and fuse flag set, and `extra` after those. */
kiln_runtime *kg_runtime_mode(const char *activations, bool fuse,
                              const kiln_config_override *extra, size_t n_extra);

/* The three activation modes and the relative L2 error each must keep a
 * matvec within, against f64 (q16: x rounded to 16 bits per 32 values,
 * about 1.5e-5 for uniform x; q8: 8 bits, about 4e-3). */
#define KG_N_MODES 3
extern const char *const kg_modes[KG_N_MODES];
extern const double kg_mode_tol[KG_N_MODES];

/* Per-position metrics of test against ref (n values). */
typedef struct kg_metrics {
  double rel_l2;     /* ||test - ref|| / ||ref|| */
  double norm_ratio; /* ||test|| / ||ref|| */
  double cosine;
  double max_abs;
  bool finite;       /* every test value finite */
} kg_metrics;

kg_metrics kg_compare(const float *test, const float *ref, int64_t n);
kg_metrics kg_compare_f64(const float *test, const double *ref, int64_t n);

/* Passes when finite, rel_l2 <= tol and |norm_ratio - 1| <= tol. */
bool kg_close(const kg_metrics *m, double tol);

/* Worst metrics over columns, for reports. */
typedef struct kg_worst {
  double rel_l2, ratio_dev, min_cosine;
  int64_t at_rel, at_ratio; /* column of the worst rel_l2 / ratio deviation */
  int64_t n_bad;            /* columns failing kg_close */
  bool all_finite;
} kg_worst;

/* Compares n_cols columns of width w; tol for kg_close. */
kg_worst kg_compare_cols(const float *test, const float *ref, int64_t w, int64_t n_cols,
                         double tol);

/* ---- one node on a backend ---- */

#define KG_MAX_TENSORS 6

/* A node with its tensors (ids 0 .. n_tensors-1) and their host data: data
 * of nbytes bytes for every tensor (weights, inputs, initial activations
 * and caches; dst too, so its prior contents are the caller's choice). */
typedef struct kg_op {
  kiln_tensor t[KG_MAX_TENSORS];
  const void *data[KG_MAX_TENSORS];
  int n_tensors;
  kiln_node node;
} kg_op;

/* An ATTENTION node "blk.0.attn" on op's tensors 0..3: q [hd * nh, cols]
 * (ACTIVATION), the K and V caches [hd * nkv, n_ctx] (STATE, f32), y
 * [hd * nh, cols]; the softmax scale as given. op->data[] is the caller's
 * to fill (q, the caches). */
void kg_attention_op(kg_op *op, int hd, int nh, int nkv, int cols, int n_ctx, float scale);

/* The largest |test - ref| over the largest |ref| (a NaN in test counts as
 * the largest difference), for reports beside kg_compare's. */
double kg_max_rel(const float *test, const float *ref, int64_t n);

/* A tensor [ne0, ne1] of type/role with nbytes from the type's row size
 * plus pad bytes. */
kiln_tensor kg_tensor(int32_t id, kiln_type type, kiln_tensor_role role, int64_t ne0, int64_t ne1,
                      uint64_t pad, const char *name);

/* Opens backend `name` from rt (its section must be declared). */
kiln_backend *kg_backend_open(kiln_runtime *rt, const char *name);

/* The bytes of op's dst a step of n_tokens at pos0 writes: all of them
 * when the caller gave dst's initial contents (data[dst]), so a test can
 * check what the step left alone; otherwise only the step's columns
 * (pos0 .. pos0+n_tokens-1 of a STORE_KV cache, 0 .. n_tokens-1 of
 * anything else), since the rest of the buffer was never written. */
void kg_written_bytes(const kg_op *op, int32_t n_tokens, int32_t pos0, uint64_t *out_offset,
                      uint64_t *out_bytes);

/* Allocates buffers for every tensor (each exactly its nbytes), uploads
 * every data[], prepares the node, runs one step of n_tokens at pos0,
 * syncs, and downloads into out_dst (nbytes of dst) the bytes
 * kg_written_bytes names, filling the rest with 0xEE; frees the buffers.
 * Returns the first error (prepare's or run's), annotated with the
 * backend. */
kiln_status kg_run_op(kiln_backend *b, kg_op *op, int32_t n_tokens, int32_t pos0, void *out_dst);

/* Several nodes as one step (as the executor runs a layer): tensors with
 * ids 0 .. n_tensors-1 and their host data (NULL: not uploaded), nodes
 * with ids 0 .. n_nodes-1 in step order. */
#define KG_GRAPH_TENSORS 24
#define KG_GRAPH_NODES 12
typedef struct kg_graph {
  kiln_tensor t[KG_GRAPH_TENSORS];
  const void *data[KG_GRAPH_TENSORS];
  int n_tensors;
  kiln_node nodes[KG_GRAPH_NODES];
  int n_nodes;
} kg_graph;

/* Adds node op(name, srcs..., dst) with the next id; returns it. */
kiln_node *kg_graph_node(kg_graph *g, kiln_op op, const char *name, int s0, int s1, int s2,
                         int dst);

/* Allocates every tensor's buffer, uploads data[], prepares every node
 * in order, runs them as one step of n_tokens at pos0, syncs, and
 * downloads each tensor named in outs[] into out[i] (its nbytes): all of
 * it when the caller gave its contents (data[]), else its first n_tokens
 * columns, the rest 0xEE; frees the buffers. */
kiln_status kg_run_graph(kiln_backend *b, kg_graph *g, int32_t n_tokens, int32_t pos0,
                         const int *outs, int n_outs, void *const *out);

/* ---- data ---- */

typedef struct kg_rng {
  uint64_t s;
} kg_rng;
kg_rng kg_rng_new(uint64_t seed);
uint32_t kg_u32(kg_rng *r);
double kg_uniform(kg_rng *r, double lo, double hi);
void kg_fill(kg_rng *r, float *x, int64_t n, double lo, double hi);

/* malloc or fail the test. */
void *kg_alloc(size_t n);

/* rows x K values of `type` (K a whole number of its blocks), packed field
 * by field from the layouts in kiln/types.h: every scale a finite f16 of a
 * sane size, every quant random (all bit patterns of the quant fields are
 * valid), followed by `pad` bytes of pad_byte. The caller frees it. */
uint8_t *kg_pack_weight(kiln_type type, int64_t K, int64_t rows, uint64_t pad, int pad_byte,
                        kg_rng *r);

/* K * rows values of w as f32 (kiln_dequantize); the caller frees them. */
float *kg_dequant(kiln_type type, const uint8_t *w, int64_t K, int64_t rows);

/* Finds tensor `name` in a session's graph, or fails the test. */
const kiln_tensor *kg_graph_tensor(kiln_session *s, const char *name);

#endif
