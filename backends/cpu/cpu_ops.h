/*
 * cpu_ops.h — the cpu backend's ops, buffers and node checks (internal).
 *
 * These live in a convenience library (libkilncpuops.la) that links nothing
 * of libkiln: everything from the host arrives explicitly in a cpu_ctx (the
 * dequantizer, status constructors, the worker pool, the precision). The
 * plugin (cpu_entry.c) fills the ctx from the kiln_host_api table; the unit
 * tests fill it with libkiln's own kiln_status_new / kiln_dequantize and
 * call these functions directly.
 *
 * Shapes follow kiln/graph.h (ne0 first). Activations and KV caches are F32
 * and contiguous; an activation [W, capacity] holds token t in column t.
 *
 * Precision: CPU_PRECISION_F32 accumulates in float; CPU_PRECISION_F64
 * accumulates every reduction (MUL_MAT dot products, the RMS_NORM sum of
 * squares, attention scores, softmax sums and the weighted V sum, the
 * convolution and the whole delta rule) in double and rounds once on the
 * store. Storage is always f32, recurrent states included. At f32, MUL_MAT
 * runs the AVX2 kernels where the CPU has them (cpu_mm.h); at f64 it
 * always runs the reference code.
 *
 * Determinism: each output element is computed by the same operations in the
 * same order whatever the thread count (threads split outputs, never a
 * reduction), so results are bit-identical for any `threads`.
 */
#ifndef KILN_CPU_OPS_H
#define KILN_CPU_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/graph.h"
#include "kiln/status.h"
#include "kiln/types.h"

#include "cpu_simd.h"
#include "cpu_threads.h"

typedef enum cpu_precision {
  CPU_PRECISION_F32 = 0, /* float accumulators */
  CPU_PRECISION_F64 = 1  /* double accumulators: the ground truth */
} cpu_precision;

/* How the f32 dot kernels take block-quantized weights (cpu_mm.h). */
typedef enum cpu_matvec {
  CPU_MATVEC_INT16 = 0, /* columns rounded to int16 per block of 32, integer products */
  CPU_MATVEC_F32 = 1    /* exact f32 columns: the GEMM's bits */
} cpu_matvec;

/* Everything an op needs from outside, passed explicitly. */
typedef struct cpu_ctx {
  cpu_pool *pool; /* workers; never NULL */
  cpu_precision precision;
  /* Vector code the f32 ops may use (cpu_simd.h): at most what
   * cpu_simd_detect() reports. f64 always takes the reference code. */
  cpu_simd simd;
  cpu_matvec matvec;
  /* [cpu] recurrent_guard = f32: a MUL_MAT whose output feeds a recurrent
   * state (node->p.mul_mat.feeds_recurrent) takes exact f32 columns
   * whatever `matvec` says; false (off): it follows `matvec`. */
  bool recurrent_guard;
  /* kiln_dequantize's contract (kiln/dequant.h): must be safe to call from
   * several threads at once (it is a pure function in core). */
  kiln_status (*dequantize)(kiln_type type, const void *src, float *dst, int64_t n);
  kiln_status (*status_new)(kiln_status_code code, const char *fmt, ...)
      __attribute__((format(printf, 2, 3)));
  kiln_status (*status_annotate)(kiln_status st, const char *fmt, ...)
      __attribute__((format(printf, 2, 3)));
  void (*status_free)(kiln_status st);
} cpu_ctx;

/* The data of one node for one step: src[i] is the bytes of node->src[i]
 * (NULL past the last source), dst those of node->dst. */
typedef struct cpu_io {
  const void *src[KILN_MAX_SRC];
  void *dst;
  int32_t n_tokens; /* columns of every activation, >= 1 */
  int32_t pos0;     /* position (KV cache column) of the first token, >= 0 */
} cpu_io;

/* --- node checks (cpu_check.c) ------------------------------------------ */

/* NULL when the cpu backend implements node's op with its operand types;
 * otherwise KILN_STATUS_UNSUPPORTED naming the node, the op and the type.
 * Missing or malformed operands are left to cpu_node_validate(). */
kiln_status cpu_node_supports(const cpu_ctx *ctx, const kiln_node *node);

/* Static checks of a node (plan time): cpu_node_supports(), then the
 * checks every backend shares (backends/common/node_check.h: operands
 * present, shapes consistent with each other and with each tensor's
 * nbytes, params valid: eps finite and > 0, n_rot even and <= head_dim,
 * n_head % n_head_kv == 0, ...). KILN_STATUS_UNSUPPORTED for a type or
 * mode the backend lacks, KILN_STATUS_INVALID_ARGUMENT for a malformed
 * node; either names the node. */
kiln_status cpu_node_validate(const cpu_ctx *ctx, const kiln_node *node);

/* Runs one node: validates it (as above), checks the step (n_tokens within
 * every activation's capacity, positions within the KV cache, data present),
 * then dispatches to the op. Errors name the node. */
kiln_status cpu_node_run(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);
/* The same without the static checks, for a node cpu_node_validate()
 * accepted and that has not changed since (the plugin keeps a copy of each
 * prepared node to know). */
kiln_status cpu_node_run_validated(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);

/* The host's status functions as a host table holding just those, for the
 * shared checks of backends/common/node_check.h (they use nothing else). */
struct kiln_host_api;
void cpu_status_host(const cpu_ctx *ctx, struct kiln_host_api *out);

/* A status with `code` and "<op> node '<name>': <message>". */
kiln_status cpu_node_error(const cpu_ctx *ctx, kiln_status_code code, const kiln_node *node,
                           const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* How many tasks to split `units` independent pieces of work into, when the
 * whole job costs about `work` (elements touched or multiply-adds): one task
 * per CPU_MIN_TASK_WORK of work at most, so a small op stays on the caller's
 * thread instead of paying for a wake-up. */
#define CPU_MIN_TASK_WORK 32768
int cpu_task_count(const cpu_ctx *ctx, int64_t units, double work);

/* --- ops (op_*.c): node already validated, io already checked ------------ */

kiln_status cpu_op_get_rows(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);
kiln_status cpu_op_rms_norm(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);
kiln_status cpu_op_mul_mat(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);
kiln_status cpu_op_rope(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);
kiln_status cpu_op_store_kv(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);
kiln_status cpu_op_attention(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);
kiln_status cpu_op_swiglu(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);
kiln_status cpu_op_add(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);
/* qwen35's ops; SSM_CONV and GATED_DELTA_NET update their RECURRENT src2
 * in place (its buffer is the node's own, never a mapped weight). */
kiln_status cpu_op_slice(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);
kiln_status cpu_op_sigmoid_mul(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);
kiln_status cpu_op_ssm_conv(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);
kiln_status cpu_op_gdn_gate(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);
kiln_status cpu_op_gated_delta_net(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);
kiln_status cpu_op_get_columns(const cpu_ctx *ctx, const kiln_node *node, const cpu_io *io);

/* --- weights (cpu_weights.c) --------------------------------------------- */

/* Is `type` a weight type the cpu backend reads (F32, F16, BF16, Q4_0, Q5_0,
 * Q8_0, Q4_K, Q5_K, Q6_K)? */
bool cpu_weight_type_ok(kiln_type type);

/* Row `row` of a weight of `type` with rows of n values (row_bytes bytes) as
 * f32: F32 rows are returned in place when aligned, every other row is
 * dequantized into scratch (n floats). *out_row points at the values. */
kiln_status cpu_weight_row(const cpu_ctx *ctx, kiln_type type, const void *base,
                           int64_t row_bytes, int64_t row, int64_t n, float *scratch,
                           const float **out_row);

/* --- buffers (cpu_buffers.c) --------------------------------------------- */

/* Host memory for one tensor. owned = false when it aliases a weight's
 * mapping (buffer_map_weight), which must never be written or freed. */
typedef struct cpu_buffer {
  void *data;
  uint64_t nbytes;
  bool owned;
} cpu_buffer;

/* t->nbytes of 64-byte aligned host memory, contents undefined.
 * KILN_STATUS_NO_MEMORY when allocation fails. */
kiln_status cpu_buffer_alloc(const cpu_ctx *ctx, const kiln_tensor *t, cpu_buffer **out_buf);
/* A buffer aliasing t->data (no copy); INVALID_ARGUMENT when t->data is NULL. */
kiln_status cpu_buffer_map_weight(const cpu_ctx *ctx, const kiln_tensor *t, cpu_buffer **out_buf);
void cpu_buffer_free(cpu_buffer *buf);
/* memcpy at offset; OUT_OF_RANGE when [offset, offset+nbytes) leaves the
 * buffer, INVALID_ARGUMENT for an upload into a mapped weight. */
kiln_status cpu_buffer_upload(const cpu_ctx *ctx, cpu_buffer *buf, uint64_t offset,
                              const void *src, uint64_t nbytes);
kiln_status cpu_buffer_download(const cpu_ctx *ctx, const cpu_buffer *buf, uint64_t offset,
                                void *dst, uint64_t nbytes);

#endif /* KILN_CPU_OPS_H */
