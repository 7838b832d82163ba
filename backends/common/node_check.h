/*
 * node_check.h — the structural checks of a kiln_node, shared by the
 * backend plugins (libkilnnodecheck.la, a libtool convenience library).
 *
 * What a node must be is kiln/graph.h's contract, not a backend's: which
 * sources each op reads, how their shapes relate (ne0 first), that every
 * tensor's nbytes covers its shape, and the ranges of the op parameters.
 * Every backend checks it the same way with kiln_node_check() at plan time;
 * what a backend itself cannot run (a weight type it lacks, a RoPE mode it
 * does not implement, a kernel's size limit) is the backend's supports()
 * answer (KILN_STATUS_UNSUPPORTED), which it gives before this check.
 *
 * Like every plugin part, this links nothing of libkiln: statuses are made
 * with host->status_new, the only member of the host table used here (a
 * caller without a full table, such as the cpu ops library under its unit
 * tests, may pass one where only status_new is set).
 */
#ifndef KILN_NODE_CHECK_H
#define KILN_NODE_CHECK_H

#include <stdarg.h>

#include "kiln/graph.h"
#include "kiln/plugin.h"
#include "kiln/status.h"

/* The largest dimension a tensor may have here: far above any model's, and
 * small enough that a 2-D tensor's element and byte counts are checked
 * without overflow (ne0 * ne1 * 8 is tested against INT64_MAX). */
#define KILN_NODE_MAX_NE ((int64_t)1 << 40)

/* NULL when `node` is well formed per kiln/graph.h; otherwise
 * KILN_STATUS_INVALID_ARGUMENT with "<op> node '<name>': <problem>", the
 * problem naming the operand (src0 / weight / K cache ...), its tensor and
 * the values that disagree. Checks, for every op:
 *   - the op id is one of kiln/graph.h's; exactly the sources the op reads
 *     are set (MUL_MAT's bias src2 optional), and dst is set;
 *   - every operand is 2-D ([ne0, ne1], ne2 = ne3 = 1), n_dims in 1..4,
 *     each ne in 1 .. KILN_NODE_MAX_NE; activations and KV caches F32;
 *     weights a known type with rows of whole blocks (kiln/types.h); each
 *     nbytes covers the shape;
 *   - GET_ROWS: ids I32 [capacity]; dst width = table width; the table has
 *     at most INT32_MAX rows (what an I32 id can address);
 *   - RMS_NORM: dst width = src0 width; the weight a vector whose length
 *     divides the src0 width; eps finite and > 0;
 *   - MUL_MAT: src1 width = the weight's K (ne0); dst width = its N (ne1);
 *     a bias is [N];
 *   - ROPE: mode NORM or NEOX; dst width = src0 width; head_dim, n_head
 *     >= 1; n_rot even, >= 2 and <= head_dim; head_dim * n_head = the src0
 *     width; theta finite and > 0;
 *   - STORE_KV: the cache width = src0 width;
 *   - ATTENTION: head_dim, n_head, n_head_kv >= 1; n_head a multiple of
 *     n_head_kv (GQA); head_dim * n_head = Q width = dst width; head_dim *
 *     n_head_kv = K cache width = V cache width; K and V caches hold as
 *     many positions; scale finite;
 *   - SWIGLU, ADD, SIGMOID_MUL: src0, src1 and dst of one width;
 *   - ROPE IMROPE: sections each >= 0, summing to 1 .. head_dim (other
 *     modes: all 0);
 *   - SLICE: offset >= 0, length >= 1, offset + length <= stride, stride
 *     divides the src0 width, dst width = groups x length;
 *   - SSM_CONV: the kernel [K >= 2, C] with C the src0 width = dst width;
 *     the state RECURRENT [(K-1) * C, 1];
 *   - GDN_GATE: alpha and beta of one width H, A and the bias [H]
 *     weights, dst [2H];
 *   - GATED_DELTA_NET: head counts and dims >= 1, n_v_heads a multiple of
 *     n_k_heads, qkv width 2*Hk*Dk + Hv*Dv, gates 2*Hv, dst Hv*Dv, the state
 *     RECURRENT [Dk*Dv*Hv, 1], chunk >= 1, l2_eps and q_scale finite > 0.
 * Step-dependent checks (n_tokens within capacity, positions within the KV
 * cache, buffers present) are the backend's run(). */
kiln_status kiln_node_check(const kiln_host_api *host, const kiln_node *node);

/* A status with `code` and "<op> node '<name>': <fmt ...>", made with
 * host->status_new (messages are cut at 512 bytes). */
kiln_status kiln_node_error(const kiln_host_api *host, kiln_status_code code,
                            const kiln_node *node, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
kiln_status kiln_node_verror(const kiln_host_api *host, kiln_status_code code,
                             const kiln_node *node, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

#endif /* KILN_NODE_CHECK_H */
