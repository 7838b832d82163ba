/* prepare() and run() of qwen35's ops on the CUDA backends (called from
 * cuda_prepare.c and cuda_run.c): the kernels resolved through the kernel
 * cache with the node's own values, then launched with the pass's token
 * count as an argument; the position (0: a new sequence) comes from the
 * step block (cuda_step.h), so a captured step replays the current one.
 *
 * GATED_DELTA_NET has two kernels: gdn_recurrent for a step of one token
 * (decode, and every token of cuda-serial's prefill) and, on the batched
 * flavors, gdn_chunked for a step of several (the chunked form). Its state
 * and SSM_CONV's are the nodes' RECURRENT src2 buffers, read and written in
 * place by the kernel; a step at pos0 = 0 reads them as zeros. */
#include "config.h"

#include "cuda_backend.h"
#include "node_check.h"
#include "op_describe.h"
#include "qwen35_cuda.h"
#include "qwen35_describe.h"

/* Launch shapes, fixed so a node always resolves the same kernels. */
#define Q35_BLOCK 256
#define Q35_ROPE_BLOCK 128
#define Q35_GDN_WARPS 4
#define Q35_GDN_CHUNK_BLOCK 256

static kiln_status fn_of(kiln_cuda_backend *be, kiln_kdesc *d, const kiln_node *node, kiln_cuda_fn *out,
                         uint32_t block, uint32_t per_block) {
  kiln_kernel *k = NULL;
  KILN_RETURN_IF_ERROR(kiln_cuda_kernel_get(be->host, d, node, &k));
  KILN_RETURN_IF_ERROR(kiln_cuda_kernel_fn(be, k, node, &out->fn));
  out->block = block;
  out->per_block = per_block;
  return NULL;
}

kiln_status kiln_cuda_qwen35_prepare(kiln_cuda_backend *be, const kiln_node *node, bool batched,
                                     kiln_cuda_node_state *ns) {
  const kiln_host_api *host = be->host;
  kiln_kdesc *d = NULL;
  switch (node->op) {
  case KILN_OP_SLICE:
    KILN_RETURN_IF_ERROR(kiln_cuda_slice_describe(host, be->compiler, node, Q35_BLOCK, &d));
    return fn_of(be, d, node, &ns->decode, Q35_BLOCK, 0);
  case KILN_OP_SIGMOID_MUL:
    KILN_RETURN_IF_ERROR(kiln_cuda_sigmoid_mul_describe(host, be->compiler, node, Q35_BLOCK, &d));
    return fn_of(be, d, node, &ns->decode, Q35_BLOCK, 0);
  case KILN_OP_SSM_CONV:
    KILN_RETURN_IF_ERROR(kiln_cuda_ssm_conv_describe(host, be->compiler, node, Q35_BLOCK, &d));
    return fn_of(be, d, node, &ns->decode, Q35_BLOCK, 0);
  case KILN_OP_GDN_GATE:
    KILN_RETURN_IF_ERROR(kiln_cuda_gdn_gate_describe(host, be->compiler, node, Q35_BLOCK, &d));
    return fn_of(be, d, node, &ns->decode, Q35_BLOCK, 0);
  case KILN_OP_GATED_DELTA_NET: {
    KILN_RETURN_IF_ERROR(kiln_cuda_gdn_recurrent_describe(host, be->compiler, node, Q35_GDN_WARPS, &d));
    KILN_RETURN_IF_ERROR(fn_of(be, d, node, &ns->decode, 32 * Q35_GDN_WARPS, Q35_GDN_WARPS));
    if (!batched) return NULL;
    uint32_t cols = 0;
    KILN_RETURN_IF_ERROR(kiln_cuda_gdn_chunked_describe(host, be->compiler, node, Q35_GDN_CHUNK_BLOCK, &d, &cols));
    return fn_of(be, d, node, &ns->prefill, Q35_GDN_CHUNK_BLOCK, cols);
  }
  case KILN_OP_ROPE:
    KILN_RETURN_IF_ERROR(kiln_cuda_rope_imrope_describe(host, be->compiler, node, Q35_ROPE_BLOCK, &d));
    return fn_of(be, d, node, &ns->decode, Q35_ROPE_BLOCK, 0);
  default:
    return kiln_node_error(host, KILN_STATUS_UNSUPPORTED, node, "op %s is not one of qwen35's",
                           kiln_op_name(node->op));
  }
}

/* Grid of a grid-stride kernel over n items. */
static uint32_t stride_grid(long long n, uint32_t block) {
  long long g = (n + block - 1) / block;
  return g < 1 ? 1 : g > 4096 ? 4096 : (uint32_t)g;
}

/* Device address of column `col` of an activation; other roles whole. */
static CUdeviceptr at(const kiln_cuda_buffer *b, const kiln_tensor *t, int32_t col) {
  return t->role == KILN_ROLE_ACTIVATION ? b->ptr + (CUdeviceptr)col * (CUdeviceptr)t->ne[0] * 4u : b->ptr;
}

static uint32_t ceil_div(int64_t a, int64_t b) { return (uint32_t)((a + b - 1) / b); }

kiln_status kiln_cuda_qwen35_run(kiln_cuda_backend *be, const kiln_node *node, const kiln_cuda_node_state *ns,
                                 const kiln_cuda_buffer *const *b, int32_t n, int32_t col, int32_t pos) {
  (void)pos; /* positions come from the step block */
  const kiln_tensor *const *s = node->src;
  CUdeviceptr y = at(b[KILN_MAX_SRC], node->dst, col);
  CUdeviceptr x = at(b[0], s[0], col);
  switch (node->op) {
  case KILN_OP_SLICE: {
    void *args[] = {&x, &y, &n};
    const long long count = (long long)n * node->dst->ne[0];
    return kiln_cuda_launch(be, node, "slice", ns->decode.fn, stride_grid(count, ns->decode.block), 1,
                            ns->decode.block, args);
  }
  case KILN_OP_SIGMOID_MUL: {
    CUdeviceptr x1 = at(b[1], s[1], col);
    long long count = (long long)n * node->dst->ne[0];
    void *args[] = {&x, &x1, &y, &count};
    return kiln_cuda_launch(be, node, "sigmoid_mul", ns->decode.fn, stride_grid(count, ns->decode.block), 1,
                            ns->decode.block, args);
  }
  case KILN_OP_SSM_CONV: {
    CUdeviceptr w = b[1]->ptr, state = b[2]->ptr;
    void *args[] = {&x, &w, &state, &y, &n, &be->step_dev};
    return kiln_cuda_launch(be, node, "ssm_conv", ns->decode.fn, ceil_div(s[0]->ne[0], ns->decode.block), 1,
                            ns->decode.block, args);
  }
  case KILN_OP_GDN_GATE: {
    CUdeviceptr beta = at(b[1], s[1], col), A = b[2]->ptr, dt = b[3]->ptr;
    void *args[] = {&x, &beta, &A, &dt, &y, &n};
    return kiln_cuda_launch(be, node, "gdn_gate", ns->decode.fn, stride_grid((long long)n * s[0]->ne[0], ns->decode.block),
                            1, ns->decode.block, args);
  }
  case KILN_OP_GATED_DELTA_NET: {
    CUdeviceptr gates = at(b[1], s[1], col), state = b[2]->ptr;
    void *args[] = {&x, &gates, &state, &y, &n, &be->step_dev};
    const kiln_cuda_fn *f = n > 1 && ns->prefill.fn ? &ns->prefill : &ns->decode;
    return kiln_cuda_launch(be, node, f == &ns->prefill ? "gdn_chunked" : "gdn_recurrent", f->fn,
                            (uint32_t)node->p.gdn.n_v_heads, ceil_div(node->p.gdn.head_v_dim, f->per_block), f->block,
                            args);
  }
  case KILN_OP_ROPE: {
    void *args[] = {&x, &y, &n, &be->step_dev};
    const kiln_rope_params *p = &node->p.rope;
    const int64_t rot = (int64_t)p->n_head * (p->n_rot / 2), pass = (int64_t)p->n_head * (p->head_dim - p->n_rot);
    int64_t gy = ((rot > pass ? rot : pass) + ns->decode.block - 1) / ns->decode.block;
    gy = gy < 1 ? 1 : gy > 65535 ? 65535 : gy;
    return kiln_cuda_launch(be, node, "rope_imrope", ns->decode.fn, (uint32_t)n, (uint32_t)gy, ns->decode.block, args);
  }
  default:
    return kiln_node_error(be->host, KILN_STATUS_UNSUPPORTED, node, "op %s is not one of qwen35's",
                           kiln_op_name(node->op));
  }
}
