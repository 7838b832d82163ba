/* Every CUDA kernel template compiles with NVRTC (no GPU needed) for
 * sm_90, sm_120 and sm_121, through the same node -> descriptor functions
 * the backends' prepare() uses, for representative nodes: stories260K's
 * shapes (llama, head_dim 8, GQA 8/4), Qwen2.5-7B's (3584 wide, head_dim
 * 128, NEOX, θ = 1e6, biases) and every weight type; each with the launch
 * shapes of all three CUDA flavors. Each kernel's PTX must name its entry
 * and target the descriptor's exact arch. The describe step refuses what
 * the kernels cannot run, naming the node. The split decode attention's
 * descriptors that differ only in n_split, or in the GQA ratio, give
 * different keys and different PTX; its automatic split count follows its
 * rule. The flash prefill attention compiles in both batched flavors'
 * tiles; descriptors differing only in head_dim, the scale, the GQA
 * ratio, bq or bk differ in key and PTX, and describe refuses what it
 * cannot hold. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcache_testhost.h"
#include "cuda_step.h"
#include "kernel_templates.h"
#include "nvrtc_compile.h"
#include "op_describe.h"
#include "rmsnorm_describe.h"
#include "testutil.h"

static const char *const archs[] = {"sm_90", "sm_120", "sm_121"};

/* KT_PART (tests/gpu/local.mk) splits the suite into programs that `make
 * check -j` runs side by side, so that NVRTC's compiles of one program do
 * not take a whole device call's time: 0, 1, 2 compile every template for
 * archs[KT_PART] alone; 3 runs the other tests; undefined, all of it. */
#if defined(KT_PART) && (KT_PART < 0 || KT_PART > 3)
#error "KT_PART must be 0..3"
#endif

static const kiln_type all_types[] = {KILN_TYPE_F32,  KILN_TYPE_F16,  KILN_TYPE_BF16,
                                      KILN_TYPE_Q4_0, KILN_TYPE_Q5_0, KILN_TYPE_Q8_0,
                                      KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K};

typedef struct shape {
  const char *name;
  int64_t n_embd, n_ff, head_dim, n_head, n_head_kv, n_rot, n_vocab;
  kiln_rope_mode mode;
  float theta, eps;
} shape;

static const shape shapes[] = {
    {"stories260K", 64, 172, 8, 8, 4, 8, 512, KILN_ROPE_NORM, 10000.0f, 1e-5f},
    {"qwen2.5-7b", 3584, 18944, 128, 28, 4, 128, 152064, KILN_ROPE_NEOX, 1000000.0f, 1e-6f},
};

/* The batched flavors' flash tiles (batched_entry.c, cc120_entry.c). */
static const kiln_cuda_flash_shape flash_tiles[] = {{64, 64, 8}, {32, 32, 4}};

/* Tensors for one shape: activations of capacity 8, a KV cache of 64. */
typedef struct nodes {
  kiln_tensor tok, emb, x, norm_w, h, wq, bq, q, qr, kc, vc, att, ff_w, ff, ff2, k;
  kiln_node get_rows, rms_norm, mm_q, rope, attn, swiglu, add, mm_ff, store_k;
} nodes;

static kiln_tensor tensor(int32_t id, kiln_type type, kiln_tensor_role role, int64_t ne0,
                          int64_t ne1, const char *name) {
  kiln_tensor t;
  memset(&t, 0, sizeof t);
  t.id = id;
  t.type = type;
  t.role = role;
  t.n_dims = 2;
  t.ne[0] = ne0;
  t.ne[1] = ne1;
  t.ne[2] = t.ne[3] = 1;
  int64_t rb = kiln_type_row_bytes(type, ne0);
  t.nbytes = rb > 0 ? (uint64_t)rb * (uint64_t)ne1 : 0;
  snprintf(t.name, sizeof t.name, "%s", name);
  return t;
}

static void node(kiln_node *n, int32_t id, kiln_op op, const char *name, kiln_tensor *s0,
                 kiln_tensor *s1, kiln_tensor *s2, kiln_tensor *dst) {
  memset(n, 0, sizeof *n);
  n->id = id;
  n->op = op;
  n->src[0] = s0;
  n->src[1] = s1;
  n->src[2] = s2;
  n->dst = dst;
  snprintf(n->name, sizeof n->name, "%s", name);
}

static void build(nodes *g, const shape *s, kiln_type wt) {
  const int64_t qw = s->head_dim * s->n_head, kvw = s->head_dim * s->n_head_kv;
  memset(g, 0, sizeof *g);
  g->tok = tensor(0, KILN_TYPE_I32, KILN_ROLE_INPUT, 8, 1, "tokens");
  g->emb = tensor(1, wt, KILN_ROLE_WEIGHT, s->n_embd, s->n_vocab, "token_embd.weight");
  g->x = tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, s->n_embd, 8, "inp_embd");
  g->norm_w = tensor(3, KILN_TYPE_F32, KILN_ROLE_WEIGHT, s->n_embd, 1, "blk.0.attn_norm.weight");
  g->h = tensor(4, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, s->n_embd, 8, "blk.0.attn_norm");
  g->wq = tensor(5, wt, KILN_ROLE_WEIGHT, s->n_embd, qw, "blk.0.attn_q.weight");
  g->bq = tensor(6, KILN_TYPE_F32, KILN_ROLE_WEIGHT, qw, 1, "blk.0.attn_q.bias");
  g->q = tensor(7, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, qw, 8, "blk.0.attn_q");
  g->qr = tensor(8, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, qw, 8, "blk.0.rope_q");
  g->kc = tensor(9, KILN_TYPE_F32, KILN_ROLE_STATE, kvw, 64, "blk.0.cache_k");
  g->vc = tensor(10, KILN_TYPE_F32, KILN_ROLE_STATE, kvw, 64, "blk.0.cache_v");
  g->att = tensor(11, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, qw, 8, "blk.0.attn");
  g->ff_w = tensor(12, wt, KILN_ROLE_WEIGHT, s->n_ff, s->n_embd, "blk.0.ffn_down.weight");
  g->ff = tensor(13, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, s->n_ff, 8, "blk.0.ffn_swiglu");
  g->ff2 = tensor(14, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, s->n_ff, 8, "blk.0.ffn_up");
  g->k = tensor(15, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, kvw, 8, "blk.0.rope_k");
  node(&g->get_rows, 0, KILN_OP_GET_ROWS, "inp_embd", &g->emb, &g->tok, NULL, &g->x);
  node(&g->rms_norm, 1, KILN_OP_RMS_NORM, "blk.0.attn_norm", &g->x, &g->norm_w, NULL, &g->h);
  g->rms_norm.p.rms_norm.eps = s->eps;
  node(&g->mm_q, 2, KILN_OP_MUL_MAT, "blk.0.attn_q", &g->wq, &g->h, &g->bq, &g->q);
  node(&g->rope, 3, KILN_OP_ROPE, "blk.0.rope_q", &g->q, NULL, NULL, &g->qr);
  g->rope.p.rope = (kiln_rope_params){s->mode, (int32_t)s->n_rot, (int32_t)s->head_dim,
                                      (int32_t)s->n_head, s->theta, {0, 0, 0, 0}};
  node(&g->attn, 4, KILN_OP_ATTENTION, "blk.0.attn", &g->qr, &g->kc, &g->vc, &g->att);
  g->attn.p.attention =
      (kiln_attention_params){(int32_t)s->n_head, (int32_t)s->n_head_kv, (int32_t)s->head_dim,
                              (float)(1.0 / __builtin_sqrt((double)s->head_dim))};
  node(&g->swiglu, 5, KILN_OP_SWIGLU, "blk.0.ffn_swiglu", &g->ff2, &g->ff2, NULL, &g->ff);
  node(&g->add, 6, KILN_OP_ADD, "blk.0.attn_residual", &g->x, &g->h, NULL, &g->x);
  node(&g->mm_ff, 7, KILN_OP_MUL_MAT, "blk.0.ffn_down", &g->ff_w, &g->ff, NULL, &g->x);
  node(&g->store_k, 8, KILN_OP_STORE_KV, "blk.0.store_k", &g->k, NULL, NULL, &g->kc);
}

/* Gives g's K and V caches type t (their bytes follow). */
static void set_kv(nodes *g, kiln_type t) {
  g->kc = tensor(g->kc.id, t, KILN_ROLE_STATE, g->kc.ne[0], g->kc.ne[1], g->kc.name);
  g->vc = tensor(g->vc.id, t, KILN_ROLE_STATE, g->vc.ne[0], g->vc.ne[1], g->vc.name);
}

static const kiln_type kv_types[] = {KILN_TYPE_F16, KILN_TYPE_BF16, KILN_TYPE_Q8_0};

/* The prefill GEMM's operand forms (gemm_operand.cuh), f32 first. */
static const char *const operands[] = {"f32", "bf16", "bf16x3", "tf32x3"};
#define N_OPERANDS (sizeof operands / sizeof operands[0])

static unsigned n_checked;

/* Resolves d and checks its PTX: entry, exact target, the arch line. */
static void check_kernel(kiln_kdesc *d, const kiln_node *nd, const char *arch) {
  kiln_kernel *k = NULL;
  KT_ASSERT_OK(kiln_cuda_kernel_get(kt_kcache_host(), d, nd, &k));
  const char *ptx = k->image;
  char want[96];
  snprintf(want, sizeof want, ".entry %s(", k->entry);
  if (k->image_kind != KILN_KIMAGE_PTX || k->image_size < 100 || !strstr(ptx, want))
    fail_msg("%s for node %s (%s): no PTX entry %s", k->template_name, nd->name, arch, k->entry);
  snprintf(want, sizeof want, ".target %s", arch);
  if (!strstr(ptx, want)) fail_msg("%s (%s): PTX lacks \"%s\"", k->template_name, arch, want);
  snprintf(want, sizeof want, "\narch %s\n", arch);
  if (!strstr(k->canonical, want))
    fail_msg("%s (%s): descriptor lacks \"arch %s\"", k->template_name, arch, arch);
  /* every kernel waits on its grid dependency first (grid_dep.cuh), so the
   * backends may launch it programmatically (cuda_kernel.c) */
  if (!strstr(ptx, "griddepcontrol.wait;") || !strstr(ptx, "griddepcontrol.launch_dependents;"))
    fail_msg("%s (%s): PTX lacks griddepcontrol.wait / launch_dependents (KILN_GRID_DEPS)",
             k->template_name, arch);
  n_checked++;
}

/* The quantized-activation kernels: add_rmsnorm in every (add, quant),
 * swiglu_q, and quantize in both widths. */
static void compile_fused(kiln_kcompiler *c, nodes *g, const char *arch) {
  const kiln_host_api *h = kt_kcache_host();
  static const kiln_cuda_quant qs[] = {KILN_CUDA_QUANT_Q16, KILN_CUDA_QUANT_Q8};
  kiln_kdesc *d;
  /* rope_store: the shape's Q RoPE with a K RoPE of the KV heads */
  kiln_node rk = g->rope;
  rk.id = 9;
  rk.src[0] = rk.dst = &g->k;
  rk.p.rope.n_head = (int32_t)(g->k.ne[0] / rk.p.rope.head_dim);
  snprintf(rk.name, sizeof rk.name, "blk.0.rope_k");
  static const kiln_type rs_kv[] = {KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16};
  for (size_t t = 0; t < sizeof rs_kv / sizeof rs_kv[0]; t++) {
    KT_ASSERT_OK(kiln_cuda_rope_store_describe(h, c, &g->rope.p.rope, &rk, rs_kv[t], 128, &d));
    check_kernel(d, &rk, arch);
  }
  KT_ASSERT_ERR(kiln_cuda_rope_store_describe(h, c, &g->rope.p.rope, &rk, KILN_TYPE_Q8_0, 128, &d),
                KILN_STATUS_UNSUPPORTED, "rope_store writes F32, F16 or BF16 caches, not Q8_0");
  for (int add = 0; add < 2; add++) {
    KT_ASSERT_OK(kiln_cuda_add_rmsnorm_describe(h, c, &g->rms_norm, add, KILN_CUDA_QUANT_NONE,
                                                g->rms_norm.src[1]->ne[0] > 2048 ? 1024 : 128, &d));
    check_kernel(d, &g->rms_norm, arch);
  }
  for (size_t i = 0; i < 2; i++) {
    if (g->rms_norm.src[1]->ne[0] % 32 == 0)
      for (int add = 0; add < 2; add++) {
        KT_ASSERT_OK(kiln_cuda_add_rmsnorm_describe(h, c, &g->rms_norm, add, qs[i], 1024, &d));
        check_kernel(d, &g->rms_norm, arch);
      }
    if (g->swiglu.dst->ne[0] % 32 == 0) {
      KT_ASSERT_OK(kiln_cuda_swiglu_q_describe(h, c, &g->swiglu, qs[i], 256, &d));
      check_kernel(d, &g->swiglu, arch);
    }
  }
}

/* matvec_q for a block type: alone (with and without a bias), in both
 * widths and the flavors' shapes, and as the middle of a group whose
 * other matrices have other block types. */
static void compile_matvec_q(kiln_kcompiler *c, nodes *g, const char *arch) {
  const kiln_host_api *h = kt_kcache_host();
  if (!kiln_cuda_matvec_q_ok(&g->mm_q)) return;
  static const kiln_cuda_matvec_shape mv[] = {{8, 4, 2, 1}, {4, 2, 2, 4}, {4, 1, 1, 1}, {8, 4, 4, 2}};
  static const kiln_cuda_quant qs[] = {KILN_CUDA_QUANT_Q16, KILN_CUDA_QUANT_Q8};
  kiln_kdesc *d;
  for (size_t qi = 0; qi < 2; qi++) {
    KT_ASSERT_OK(kiln_cuda_quantize_describe(h, c, &g->mm_q, qs[qi], 256, &d));
    check_kernel(d, &g->mm_q, arch);
    for (size_t f = 0; f < sizeof mv / sizeof mv[0]; f++) {
      kiln_cuda_mvq_member m[3] = {kiln_cuda_mvq_member_of(&g->mm_q)};
      m[0].staged = f % 2 == 1; /* both ways of reading the weight */
      KT_ASSERT_OK(kiln_cuda_matvec_q_describe(h, c, &g->mm_q, m, 1, &mv[f], qs[qi], &d));
      check_kernel(d, &g->mm_q, arch);
      m[0].bias = -1;
      m[0].staged = !m[0].staged;
      KT_ASSERT_OK(kiln_cuda_matvec_q_describe(h, c, &g->mm_q, m, 1, &mv[f], qs[qi], &d));
      check_kernel(d, &g->mm_q, arch);
    }
    /* Q8_0 and Q6_K neighbours (rows not a multiple of the block's rows) */
    kiln_cuda_mvq_member m[3] = {kiln_cuda_mvq_member_of(&g->mm_q),
                                 kiln_cuda_mvq_member_of(&g->mm_q),
                                 kiln_cuda_mvq_member_of(&g->mm_q)};
    m[0].w_type = KILN_TYPE_Q8_0;
    m[0].rows = 37;
    m[2].w_type = m[0].k % 256 == 0 ? KILN_TYPE_Q6_K : KILN_TYPE_Q5_0;
    m[2].rows = 19;
    m[2].bias = KILN_TYPE_F16;
    KT_ASSERT_OK(kiln_cuda_matvec_q_describe(h, c, &g->mm_q, m, 3, &mv[0], qs[qi], &d));
    check_kernel(d, &g->mm_q, arch);
    m[0].staged = m[2].staged = true; /* the unaligned ones staged, the middle one direct */
    KT_ASSERT_OK(kiln_cuda_matvec_q_describe(h, c, &g->mm_q, m, 3, &mv[3], qs[qi], &d));
    check_kernel(d, &g->mm_q, arch);
    /* the persistent bulk-copy grid (every arch here is 9.0 or later):
     * the three-type group, then the matrix alone with 4 stages, then
     * the last alone in 16 warps */
    static const kiln_cuda_matvec_shape bulk[] = {
        {8, 4, 8, 1, 2}, {4, 4, 4, 1, 4}, {16, 8, 2, 1, 2}};
    m[0].staged = m[2].staged = false;
    KT_ASSERT_OK(kiln_cuda_matvec_q_describe(h, c, &g->mm_q, m, 3, &bulk[0], qs[qi], &d));
    check_kernel(d, &g->mm_q, arch);
    KT_ASSERT_OK(kiln_cuda_matvec_q_describe(h, c, &g->mm_q, &m[1], 1, &bulk[1], qs[qi], &d));
    check_kernel(d, &g->mm_q, arch);
    KT_ASSERT_OK(kiln_cuda_matvec_q_describe(h, c, &g->mm_q, &m[2], 1, &bulk[2], qs[qi], &d));
    check_kernel(d, &g->mm_q, arch);
    /* stages with a staged matrix, or several sets of rows a block: refused */
    m[0].staged = true;
    kiln_status st = kiln_cuda_matvec_q_describe(h, c, &g->mm_q, m, 3, &bulk[0], qs[qi], &d);
    assert_non_null(st);
    kiln_status_free(st);
    m[0].staged = false;
    const kiln_cuda_matvec_shape bad = {8, 4, 4, 2, 2};
    st = kiln_cuda_matvec_q_describe(h, c, &g->mm_q, m, 3, &bad, qs[qi], &d);
    assert_non_null(st);
    kiln_status_free(st);
  }
}

static void compile_all(kiln_kcompiler *c, const char *arch) {
  const kiln_host_api *h = kt_kcache_host();
  static const kiln_cuda_rmsnorm_variant variants[] = {
      KILN_CUDA_RMSNORM_ROW_VEC, KILN_CUDA_RMSNORM_ROWS, KILN_CUDA_RMSNORM_ROW_CC12};
  static const uint32_t warps[] = {4, 2}; /* cuda-serial/batched, cuda-cc120 */
  /* each warp its own rows, and the block's warps sharing them */
  static const kiln_cuda_matvec_shape mv[] = {{4, 1, 2, 1}, {4, 4, 2, 1}, {2, 2, 2, 1}, {2, 1, 1, 1}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (size_t ti = 0; ti < sizeof all_types / sizeof all_types[0]; ti++) {
      /* stories260K's rows (64, 172) are too short for the K-quants */
      int64_t bs = kiln_type_block_size(all_types[ti]);
      if (shapes[si].n_embd % bs || shapes[si].n_ff % bs) continue;
      nodes *g = malloc(sizeof *g);
      build(g, &shapes[si], all_types[ti]);
      kiln_kdesc *d;
      KT_ASSERT_OK(kiln_cuda_get_rows_describe(h, c, &g->get_rows, 256, &d));
      check_kernel(d, &g->get_rows, arch);
      for (size_t f = 0; f < sizeof mv / sizeof mv[0]; f++) {
        KT_ASSERT_OK(kiln_cuda_matvec_describe(h, c, &g->mm_q, &mv[f], &d)); /* with a bias */
        check_kernel(d, &g->mm_q, arch);
        KT_ASSERT_OK(kiln_cuda_matvec_describe(h, c, &g->mm_ff, &mv[f], &d));
        check_kernel(d, &g->mm_ff, arch);
      }
      /* the prefill tile in every gemm mode's operand form (an F32 weight
       * is read where it lies in the f32 modes) */
      for (size_t o = all_types[ti] == KILN_TYPE_F32 ? 1 : 0; o < N_OPERANDS; o++) {
        KT_ASSERT_OK(kiln_cuda_dequant_describe(h, c, &g->mm_q, operands[o], 256, &d));
        check_kernel(d, &g->mm_q, arch);
      }
      /* gemm = fp8's tile (a block a row: K need not be whole 16s) */
      KT_ASSERT_OK(kiln_cuda_fp8_rows_describe(h, c, &g->mm_q, 448.0f, 256, &d));
      check_kernel(d, &g->mm_q, arch);
      compile_matvec_q(c, g, arch);
      if (kiln_cuda_mmq_ok(&g->mm_ff)) { /* gemm = q16mma's prefill GEMM, the backends' tile */
        const kiln_cuda_mmq_shape ms = {128, 64, 4, 0};
        KT_ASSERT_OK(kiln_cuda_mmq_describe(h, c, &g->mm_ff, KILN_CUDA_QUANT_Q16, &ms, &d));
        check_kernel(d, &g->mm_ff, arch);
      }
      if (ti == 0) { /* the type-independent kernels once per shape */
        KT_ASSERT_OK(kiln_cuda_fp8_input_describe(h, c, &g->mm_ff, 448.0f, 256, &d));
        check_kernel(d, &g->mm_ff, arch);
        KT_ASSERT_OK(kiln_cuda_bias_describe(h, c, &g->mm_q, 256, &d));
        check_kernel(d, &g->mm_q, arch);
        for (size_t o = 1; o < N_OPERANDS; o++) {
          KT_ASSERT_OK(kiln_cuda_gemm_input_describe(h, c, &g->mm_ff, operands[o], 256, &d));
          check_kernel(d, &g->mm_ff, arch);
        }
        for (size_t v = 0; v < 3; v++) {
          KT_ASSERT_OK(kiln_cuda_rmsnorm_describe(h, c, variants[v], &g->rms_norm, &d, NULL));
          check_kernel(d, &g->rms_norm, arch);
        }
        KT_ASSERT_OK(kiln_cuda_rope_describe(h, c, &g->rope, 128, &d));
        check_kernel(d, &g->rope, arch);
        for (int f = 0; f < 2; f++) {
          KT_ASSERT_OK(kiln_cuda_attention_describe(h, c, &g->attn, warps[f], &d));
          check_kernel(d, &g->attn, arch);
        }
        /* the split decode attention in the flavors' warps (8: cuda-serial
         * and cuda-batched, 4: cuda-cc120), no split, a 7B's on an H200,
         * the most */
        /* the flash prefill attention in the batched flavors' tiles
         * (cuda-batched 64/64 with 8 warps, cuda-cc120 32/32 with 4) */
        for (int f = 0; f < 2; f++) {
          KT_ASSERT_OK(kiln_cuda_flash_attention_describe(h, c, &g->attn, &flash_tiles[f], &d));
          check_kernel(d, &g->attn, arch);
        }
        static const uint32_t split_warps[] = {8, 4}, splits[] = {1, 66, 256};
        static const kiln_cuda_quant mq[] = {KILN_CUDA_QUANT_NONE, KILN_CUDA_QUANT_Q16,
                                             KILN_CUDA_QUANT_Q8};
        for (int f = 0; f < 2; f++)
          for (int sp = 0; sp < 3; sp++) {
            KT_ASSERT_OK(kiln_cuda_attention_split_describe(h, c, &g->attn, split_warps[f],
                                                            splits[sp], false,
                                                            KILN_CUDA_QUANT_NONE, &d));
            check_kernel(d, &g->attn, arch);
            for (int q = 0; q < 3; q++) {
              if (mq[q] != KILN_CUDA_QUANT_NONE && !kiln_cuda_merge_quant_fits(&g->attn)) continue;
              KT_ASSERT_OK(kiln_cuda_attention_merge_describe(h, c, &g->attn, split_warps[f],
                                                              splits[sp], mq[q], &d));
              check_kernel(d, &g->attn, arch);
            }
          }
        /* the split kernel merging itself at a 7B's tg128 count (20: a
         * KV cache of 640 positions), where the geometry lets it */
        for (int f = 0; f < 2; f++)
          for (int q = 0; q < 3; q++) {
            if (!kiln_cuda_attention_fused_merge_fits(&g->attn, 20)) break;
            KT_ASSERT_OK(kiln_cuda_attention_split_describe(h, c, &g->attn, split_warps[f], 20,
                                                            true, mq[q], &d));
            check_kernel(d, &g->attn, arch);
          }
        KT_ASSERT_OK(kiln_cuda_eltwise_describe(h, c, &g->swiglu, 256, &d));
        check_kernel(d, &g->swiglu, arch);
        KT_ASSERT_OK(kiln_cuda_eltwise_describe(h, c, &g->add, 256, &d));
        check_kernel(d, &g->add, arch);
        KT_ASSERT_OK(kiln_cuda_store_kv_describe(h, c, &g->store_k, 256, &d));
        check_kernel(d, &g->store_k, arch);
        compile_fused(c, g, arch);
        /* the KV cache's other types: the kernels that read or write it
         * (Q8_0 only where head_dim is whole blocks of 32) */
        for (size_t kv = 0; kv < sizeof kv_types / sizeof kv_types[0]; kv++) {
          if (kv_types[kv] == KILN_TYPE_Q8_0 && g->attn.p.attention.head_dim % 32 != 0) continue;
          set_kv(g, kv_types[kv]);
          KT_ASSERT_OK(kiln_cuda_attention_describe(h, c, &g->attn, warps[0], &d));
          check_kernel(d, &g->attn, arch);
          KT_ASSERT_OK(kiln_cuda_attention_split_describe(h, c, &g->attn, 8, 66, false,
                                                          KILN_CUDA_QUANT_NONE, &d));
          check_kernel(d, &g->attn, arch);
          KT_ASSERT_OK(kiln_cuda_store_kv_describe(h, c, &g->store_k, 256, &d));
          check_kernel(d, &g->store_k, arch);
        }
        set_kv(g, KILN_TYPE_F32);
      }
      free(g);
    }
}

static void test_every_template_every_arch(void **state) {
#if defined(KT_PART)
  const size_t lo = KT_PART, hi = KT_PART + 1;
#else
  const size_t lo = 0, hi = sizeof archs / sizeof archs[0];
#endif
  for (size_t a = lo; a < hi; a++) {
    kiln_kcache *kc = kt_kcache_open(NULL, NULL);
    kiln_nvrtc nv;
    kiln_kcompiler *c = NULL;
    KT_ASSERT_OK(kiln_cuda_templates_register(kt_kcache_host(), kc));
    KT_ASSERT_OK(kiln_nvrtc_register(&nv, kt_kcache_host(), kc, archs[a], &c));
    unsigned before = n_checked;
    compile_all(c, archs[a]);
    kiln_kcache_stats st;
    kiln_kcache_get_stats(kc, &st);
    printf("%s: %u kernels checked, %llu compiled (NVRTC %s)\n", archs[a], n_checked - before,
           (unsigned long long)st.compiles, nv.version);
    /* every registered template was compiled at least once */
    assert_true(st.compiles >= kiln_cuda_n_templates);
    kiln_kcache_close(kc);
  }
}

/* The describe step refuses what the kernels cannot run, naming the node. */
static void test_describe_refuses(void **state) {
  const kiln_host_api *h = kt_kcache_host();
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  kiln_nvrtc nv;
  kiln_kcompiler *c = NULL;
  KT_ASSERT_OK(kiln_cuda_templates_register(h, kc));
  KT_ASSERT_OK(kiln_nvrtc_register(&nv, h, kc, "sm_90", &c));
  nodes *g = malloc(sizeof *g);
  kiln_kdesc *d = NULL;
  /* K = 2176 is not a whole number of Q4_K blocks */
  shape s = shapes[1];
  s.n_ff = 2176;
  build(g, &s, KILN_TYPE_Q4_K);
  g->ff_w.nbytes = 1u << 30;
  const kiln_cuda_matvec_shape mv_shape = {4, 1, 2, 1, 0};
  KT_ASSERT_ERR(kiln_cuda_matvec_describe(h, c, &g->mm_ff, &mv_shape, &d),
                KILN_STATUS_INVALID_ARGUMENT,
                "mul_mat node 'blk.0.ffn_down': weight src0 'blk.0.ffn_down.weight': row length "
                "2176 is not a whole number of Q4_K blocks");
  build(g, &s, KILN_TYPE_Q5_K); /* Q5_K's the same, on both decode paths */
  g->ff_w.nbytes = 1u << 30;
  KT_ASSERT_ERR(kiln_cuda_matvec_describe(h, c, &g->mm_ff, &mv_shape, &d),
                KILN_STATUS_INVALID_ARGUMENT,
                "mul_mat node 'blk.0.ffn_down': weight src0 'blk.0.ffn_down.weight': row length "
                "2176 is not a whole number of Q5_K blocks");
  kiln_cuda_mvq_member mq = kiln_cuda_mvq_member_of(&g->mm_ff);
  KT_ASSERT_ERR(kiln_cuda_matvec_q_describe(h, c, &g->mm_ff, &mq, 1, &mv_shape,
                                            KILN_CUDA_QUANT_Q16, &d),
                KILN_STATUS_INVALID_ARGUMENT,
                "weight src0 'blk.0.ffn_down.weight': row length 2176 is not a whole number of "
                "Q5_K blocks");
  build(g, &shapes[1], KILN_TYPE_Q8_0);
  g->attn.p.attention.head_dim = 512;
  KT_ASSERT_ERR(kiln_cuda_attention_describe(h, c, &g->attn, 4, &d), KILN_STATUS_UNSUPPORTED,
                "head_dim 512");
  build(g, &shapes[1], KILN_TYPE_Q8_0);
  g->rope.p.rope.mode = (kiln_rope_mode)1;
  KT_ASSERT_ERR(kiln_cuda_rope_describe(h, c, &g->rope, 128, &d), KILN_STATUS_UNSUPPORTED,
                "rope node 'blk.0.rope_q': rope mode 1");
  build(g, &shapes[1], KILN_TYPE_Q8_0);
  g->rope.p.rope.n_rot = 130;
  KT_ASSERT_ERR(kiln_cuda_rope_describe(h, c, &g->rope, 128, &d), KILN_STATUS_INVALID_ARGUMENT,
                "n_rot 130");
  build(g, &shapes[1], KILN_TYPE_Q8_0);
  g->attn.p.attention.n_head_kv = 5;
  KT_ASSERT_ERR(kiln_cuda_attention_describe(h, c, &g->attn, 4, &d), KILN_STATUS_INVALID_ARGUMENT,
                "n_head 28 is not a multiple of n_head_kv 5");
  build(g, &shapes[1], KILN_TYPE_Q8_0);
  g->emb.type = (kiln_type)3; /* ggml's Q4_1: not read by kiln */
  KT_ASSERT_ERR(kiln_cuda_get_rows_describe(h, c, &g->get_rows, 256, &d), KILN_STATUS_UNSUPPORTED,
                "id 3");
  build(g, &shapes[1], KILN_TYPE_Q8_0);
  KT_ASSERT_ERR(kiln_cuda_bias_describe(h, c, &g->mm_ff, 256, &d), KILN_STATUS_INVALID_ARGUMENT,
                "has no bias");
  static const kiln_cuda_matvec_shape bad_shapes[] = {{33, 1, 2, 1}, {4, 3, 2, 1}, {4, 8, 2, 1}, {4, 1, 9, 1}};
  static const char *const bad_why[] = {"warps 33", "k_split 3 does not divide warps 4",
                                        "k_split 8", "rows_per_group 9"};
  for (size_t i = 0; i < sizeof bad_shapes / sizeof bad_shapes[0]; i++)
    KT_ASSERT_ERR(kiln_cuda_matvec_describe(h, c, &g->mm_q, &bad_shapes[i], &d),
                  KILN_STATUS_INVALID_ARGUMENT, bad_why[i]);
  /* The descriptor carries the node's θ and scale bit-exactly. */
  KT_ASSERT_OK(kiln_cuda_rope_describe(h, c, &g->rope, 128, &d));
  char *canon = NULL;
  KT_ASSERT_OK(kiln_kdesc_canonical(d, &canon));
  assert_non_null(strstr(canon, "param theta f32 0x49742400\n")); /* 1e6 */
  assert_non_null(strstr(canon, "param mode str NEOX\n"));
  free(canon);
  h->kdesc_free(d);
  KT_ASSERT_OK(kiln_cuda_attention_describe(h, c, &g->attn, 4, &d));
  KT_ASSERT_OK(kiln_kdesc_canonical(d, &canon));
  assert_non_null(strstr(canon, "param scale f32 0x3db504f3\n")); /* 1/sqrt(128) */
  free(canon);
  h->kdesc_free(d);
  free(g);
  kiln_kcache_close(kc);
}

/* One kernel's key and a copy of its PTX. */
typedef struct compiled {
  kiln_kkey key;
  char *ptx;
  size_t size;
} compiled;

static compiled compile_desc(kiln_kdesc *d, const kiln_node *nd) {
  kiln_kernel *k = NULL;
  KT_ASSERT_OK(kiln_cuda_kernel_get(kt_kcache_host(), d, nd, &k));
  compiled r = {.key = k->key, .size = k->image_size};
  r.ptx = malloc(k->image_size);
  memcpy(r.ptx, k->image, k->image_size);
  return r;
}

/* d's canonical form holds `line` (a whole "param ...\n" line), or fails
 * showing the form. */
static void assert_canon_has(kiln_kdesc *d, const char *line) {
  char *canon = NULL;
  KT_ASSERT_OK(kiln_kdesc_canonical(d, &canon));
  const bool has = strstr(canon, line) != NULL;
  if (!has) printf("canonical form lacks \"%s\":\n%s\n", line, canon);
  free(canon);
  assert_true(has);
}

/* Different keys and different PTX, or fails naming `what`. */
static void assert_differ(const compiled *a, const compiled *b, const char *what) {
  if (kiln_kkey_equal(&a->key, &b->key)) fail_msg("%s: the same key", what);
  if (a->size == b->size && memcmp(a->ptx, b->ptx, a->size) == 0)
    fail_msg("%s: the same PTX", what);
  printf("%s: different keys, PTX %zu / %zu bytes\n", what, a->size, b->size);
}

/* The split decode attention: descriptors differing only in n_split (both
 * halves) or in the GQA ratio (n_head_kv 4 and 2 under 28 query heads)
 * differ in key and PTX; the canonical form carries n_split, the head
 * counts and the scale's bits; describe refuses warps, n_split and groups
 * out of range, naming the node; the automatic split count and the
 * partials' size follow their rules. */
static void test_attention_split(void **state) {
  const kiln_host_api *h = kt_kcache_host();
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  kiln_nvrtc nv;
  kiln_kcompiler *c = NULL;
  KT_ASSERT_OK(kiln_cuda_templates_register(h, kc));
  KT_ASSERT_OK(kiln_nvrtc_register(&nv, h, kc, "sm_90", &c));
  nodes *g = malloc(sizeof *g), *g2 = malloc(sizeof *g2);
  build(g, &shapes[1], KILN_TYPE_Q8_0);
  shape gqa = shapes[1];
  gqa.n_head_kv = 2;
  build(g2, &gqa, KILN_TYPE_Q8_0);
  assert_true(kiln_cuda_attention_split_fits(&g->attn));
  kiln_kdesc *d = NULL;
  KT_ASSERT_OK(kiln_cuda_attention_split_describe(h, c, &g->attn, 8, 66, false, KILN_CUDA_QUANT_NONE, &d));
  char *canon = NULL;
  KT_ASSERT_OK(kiln_kdesc_canonical(d, &canon));
  assert_non_null(strstr(canon, "param n_split i64 66\n"));
  assert_non_null(strstr(canon, "param n_head i64 28\n"));
  assert_non_null(strstr(canon, "param n_head_kv i64 4\n"));
  assert_non_null(strstr(canon, "param scale f32 0x3db504f3\n")); /* 1/sqrt(128) */
  free(canon);
  compiled base = compile_desc(d, &g->attn);
  KT_ASSERT_OK(kiln_cuda_attention_split_describe(h, c, &g->attn, 8, 65, false, KILN_CUDA_QUANT_NONE, &d));
  compiled other = compile_desc(d, &g->attn);
  assert_differ(&base, &other, "attention_split n_split 66 / 65");
  free(other.ptx);
  KT_ASSERT_OK(kiln_cuda_attention_split_describe(h, c, &g2->attn, 8, 66, false, KILN_CUDA_QUANT_NONE, &d));
  other = compile_desc(d, &g2->attn);
  assert_differ(&base, &other, "attention_split GQA 28/4 / 28/2");
  free(other.ptx);
  free(base.ptx);
  /* the merge fused into the split kernel: merge, quant and k baked; the
   * 7B's 7 heads a KV head at 20 splits fit, at 66 (462 records) not */
  assert_true(kiln_cuda_attention_fused_merge_fits(&g->attn, 20));
  assert_true(kiln_cuda_attention_fused_merge_fits(&g->attn, 36));
  assert_false(kiln_cuda_attention_fused_merge_fits(&g->attn, 37));
  KT_ASSERT_OK(kiln_cuda_attention_split_describe(h, c, &g->attn, 8, 20, false,
                                                  KILN_CUDA_QUANT_NONE, &d));
  assert_canon_has(d, "param merge i64 0\n");
  base = compile_desc(d, &g->attn);
  KT_ASSERT_OK(kiln_cuda_attention_split_describe(h, c, &g->attn, 8, 20, true,
                                                  KILN_CUDA_QUANT_NONE, &d));
  assert_canon_has(d, "param merge i64 1\n");
  other = compile_desc(d, &g->attn);
  assert_differ(&base, &other, "attention_split merge 0 / 1");
  free(base.ptx);
  base = other;
  KT_ASSERT_OK(kiln_cuda_attention_split_describe(h, c, &g->attn, 8, 20, true,
                                                  KILN_CUDA_QUANT_Q16, &d));
  assert_canon_has(d, "param quant str q16\n");
  assert_canon_has(d, "param k i64 3584\n");
  other = compile_desc(d, &g->attn);
  assert_differ(&base, &other, "attention_split merged, quant none / q16");
  free(base.ptx);
  base = other;
  KT_ASSERT_OK(kiln_cuda_attention_split_describe(h, c, &g->attn, 8, 20, true,
                                                  KILN_CUDA_QUANT_Q8, &d));
  other = compile_desc(d, &g->attn);
  assert_differ(&base, &other, "attention_split merged, quant q16 / q8");
  free(other.ptx);
  free(base.ptx);
  KT_ASSERT_ERR(kiln_cuda_attention_split_describe(h, c, &g->attn, 8, 66, true,
                                                   KILN_CUDA_QUANT_NONE, &d),
                KILN_STATUS_UNSUPPORTED, "7 heads a KV head, 66 splits");
  KT_ASSERT_ERR(kiln_cuda_attention_split_describe(h, c, &g->attn, 8, 20, false,
                                                   KILN_CUDA_QUANT_Q16, &d),
                KILN_STATUS_INVALID_ARGUMENT, "only with merge");
  KT_ASSERT_OK(kiln_cuda_attention_merge_describe(h, c, &g->attn, 8, 66, KILN_CUDA_QUANT_NONE, &d));
  assert_canon_has(d, "param n_split i64 66\n");
  assert_canon_has(d, "param quant str none\n");
  base = compile_desc(d, &g->attn);
  KT_ASSERT_OK(kiln_cuda_attention_merge_describe(h, c, &g->attn, 8, 65, KILN_CUDA_QUANT_NONE, &d));
  other = compile_desc(d, &g->attn);
  assert_differ(&base, &other, "attention_merge n_split 66 / 65");
  free(other.ptx);
  /* quantizing for the output projection: the mode and the column's
   * length are baked (act_quant.cuh's layout depends on k) */
  KT_ASSERT_OK(kiln_cuda_attention_merge_describe(h, c, &g->attn, 8, 66, KILN_CUDA_QUANT_Q16, &d));
  assert_canon_has(d, "param quant str q16\n");
  assert_canon_has(d, "param k i64 3584\n");
  other = compile_desc(d, &g->attn);
  assert_differ(&base, &other, "attention_merge quant none / q16");
  free(base.ptx);
  base = other;
  KT_ASSERT_OK(kiln_cuda_attention_merge_describe(h, c, &g->attn, 8, 66, KILN_CUDA_QUANT_Q8, &d));
  other = compile_desc(d, &g->attn);
  assert_differ(&base, &other, "attention_merge quant q16 / q8");
  free(other.ptx);
  free(base.ptx);

  /* refusals, naming the node */
  KT_ASSERT_ERR(kiln_cuda_attention_split_describe(h, c, &g->attn, 33, 66, false, KILN_CUDA_QUANT_NONE, &d),
                KILN_STATUS_INVALID_ARGUMENT, "attention node 'blk.0.attn': warps 33 is outside 1..32");
  KT_ASSERT_ERR(kiln_cuda_attention_merge_describe(h, c, &g->attn, 0, 66, KILN_CUDA_QUANT_NONE, &d),
                KILN_STATUS_INVALID_ARGUMENT, "warps 0 is outside 1..32");
  KT_ASSERT_ERR(kiln_cuda_attention_split_describe(h, c, &g->attn, 8, 0, false, KILN_CUDA_QUANT_NONE, &d),
                KILN_STATUS_INVALID_ARGUMENT, "n_split 0 is outside 1..256");
  KT_ASSERT_ERR(kiln_cuda_attention_merge_describe(h, c, &g->attn, 8, 257, KILN_CUDA_QUANT_NONE, &d),
                KILN_STATUS_INVALID_ARGUMENT, "n_split 257 is outside 1..256");
  build(g2, &shapes[0], KILN_TYPE_Q8_0); /* head_dim 8: no whole blocks of 32 to quantize */
  assert_false(kiln_cuda_merge_quant_fits(&g2->attn));
  KT_ASSERT_ERR(kiln_cuda_attention_merge_describe(h, c, &g2->attn, 8, 66, KILN_CUDA_QUANT_Q16, &d),
                KILN_STATUS_INVALID_ARGUMENT, "head_dim 8 is not a multiple of 32");
  shape mqa = shapes[1]; /* 32 query heads on one KV head */
  mqa.n_head = 32;
  mqa.n_head_kv = 1;
  build(g2, &mqa, KILN_TYPE_Q8_0);
  assert_false(kiln_cuda_attention_split_fits(&g2->attn));
  KT_ASSERT_ERR(kiln_cuda_attention_split_describe(h, c, &g2->attn, 8, 66, false, KILN_CUDA_QUANT_NONE, &d),
                KILN_STATUS_UNSUPPORTED,
                "attention node 'blk.0.attn': split decode attention holds at most 16 query "
                "heads per KV head and 64 of their values per lane; n_head 32 / n_head_kv 1 "
                "with head_dim 128 needs 32 heads and 128 values");
  shape wide = shapes[1]; /* 16 heads a group at head_dim 256: 128 values a lane */
  wide.head_dim = 256;
  wide.n_rot = 256;
  wide.n_head = 32;
  wide.n_head_kv = 2;
  build(g2, &wide, KILN_TYPE_Q8_0);
  assert_false(kiln_cuda_attention_split_fits(&g2->attn));
  KT_ASSERT_ERR(kiln_cuda_attention_merge_describe(h, c, &g2->attn, 8, 66, KILN_CUDA_QUANT_NONE, &d),
                KILN_STATUS_UNSUPPORTED, "needs 16 heads and 128 values");
  wide.n_head_kv = 4; /* 8 heads a group at 256: 64 values, the most */
  build(g2, &wide, KILN_TYPE_Q8_0);
  assert_true(kiln_cuda_attention_split_fits(&g2->attn));

  /* the automatic split count: ~2 blocks per SM, at most one split per
   * 32-key tile of the cache, 1..256 */
  assert_int_equal(kiln_cuda_attention_splits_auto(132, 32768, 4, 8), 66);
  assert_int_equal(kiln_cuda_attention_splits_auto(132, 4096, 28, 8), 10);
  assert_int_equal(kiln_cuda_attention_splits_auto(132, 64, 4, 8), 2);
  assert_int_equal(kiln_cuda_attention_splits_auto(132, 1056, 4, 8), 33);
  assert_int_equal(kiln_cuda_attention_splits_auto(132, 1, 4, 8), 1);
  assert_int_equal(kiln_cuda_attention_splits_auto(132, 100000, 1, 8), 256);
  assert_int_equal(kiln_cuda_attention_splits_auto(48, 4096, 8, 4), 12);
  assert_int_equal(kiln_cuda_attention_splits_auto(0, 4096, 4, 8), 1);
  assert_int_equal(kiln_cuda_attention_part_bytes(&g->attn, 66), 28u * 66u * 130u * 4u);
  free(g);
  free(g2);
  kiln_kcache_close(kc);
}

/* The flash prefill attention: the canonical form carries every baked
 * parameter (head_dim, both head counts, the scale's bits, bq, bk,
 * warps); descriptors differing only in head_dim, the scale, the GQA
 * ratio, bq or bk differ in key and PTX; describe refuses, naming the
 * node, what the kernel cannot hold (and kiln_cuda_flash_fits agrees, so
 * the runner keeps the rows kernel for it); the flavors' tiles at
 * head_dim 256 fit sm_90's and sm_120's shared memory a block. */
static void test_flash_attention(void **state) {
  const kiln_host_api *h = kt_kcache_host();
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  kiln_nvrtc nv;
  kiln_kcompiler *c = NULL;
  KT_ASSERT_OK(kiln_cuda_templates_register(h, kc));
  KT_ASSERT_OK(kiln_nvrtc_register(&nv, h, kc, "sm_90", &c));
  nodes *g = malloc(sizeof *g), *g2 = malloc(sizeof *g2);
  build(g, &shapes[1], KILN_TYPE_Q8_0);
  const kiln_cuda_flash_shape *fb = &flash_tiles[0];
  assert_true(kiln_cuda_flash_fits(&g->attn, fb));
  kiln_kdesc *d = NULL;
  KT_ASSERT_OK(kiln_cuda_flash_attention_describe(h, c, &g->attn, fb, &d));
  char *canon = NULL;
  KT_ASSERT_OK(kiln_kdesc_canonical(d, &canon));
  static const char *const want[] = {"param head_dim i64 128\n", "param n_head i64 28\n",
                                     "param n_head_kv i64 4\n",
                                     "param scale f32 0x3db504f3\n", /* 1/sqrt(128) */
                                     "param bq i64 64\n", "param bk i64 64\n",
                                     "param warps i64 8\n"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(canon, want[i])) fail_msg("flash_attention's canonical form lacks %s", want[i]);
  free(canon);
  compiled base = compile_desc(d, &g->attn), other;

  shape s64 = shapes[1]; /* head_dim 64 */
  s64.head_dim = 64;
  s64.n_rot = 64;
  build(g2, &s64, KILN_TYPE_Q8_0);
  KT_ASSERT_OK(kiln_cuda_flash_attention_describe(h, c, &g2->attn, fb, &d));
  other = compile_desc(d, &g2->attn);
  assert_differ(&base, &other, "flash_attention head_dim 128 / 64");
  free(other.ptx);
  build(g2, &shapes[1], KILN_TYPE_Q8_0); /* the scale alone */
  g2->attn.p.attention.scale = 0.125f;
  KT_ASSERT_OK(kiln_cuda_flash_attention_describe(h, c, &g2->attn, fb, &d));
  other = compile_desc(d, &g2->attn);
  assert_differ(&base, &other, "flash_attention scale 1/sqrt(128) / 0.125");
  free(other.ptx);
  shape gqa = shapes[1]; /* GQA 7 -> 14 */
  gqa.n_head_kv = 2;
  build(g2, &gqa, KILN_TYPE_Q8_0);
  KT_ASSERT_OK(kiln_cuda_flash_attention_describe(h, c, &g2->attn, fb, &d));
  other = compile_desc(d, &g2->attn);
  assert_differ(&base, &other, "flash_attention GQA 28/4 / 28/2");
  free(other.ptx);
  const kiln_cuda_flash_shape bq32 = {32, 64, 8}, bk32 = {64, 32, 8};
  KT_ASSERT_OK(kiln_cuda_flash_attention_describe(h, c, &g->attn, &bq32, &d));
  other = compile_desc(d, &g->attn);
  assert_differ(&base, &other, "flash_attention bq 64 / 32");
  free(other.ptx);
  KT_ASSERT_OK(kiln_cuda_flash_attention_describe(h, c, &g->attn, &bk32, &d));
  other = compile_desc(d, &g->attn);
  assert_differ(&base, &other, "flash_attention bk 64 / 32");
  free(other.ptx);
  free(base.ptx);

  /* refusals, naming the node; fits() says the same */
  const kiln_cuda_flash_shape bad_tiles[] = {{64, 48, 8}, {64, 64, 2}, {64, 64, 0}, {64, 256, 8}};
  static const char *const bad_why[] = {"bk must be 32, 64, 96 or 128",
                                        "bq must be 1..16 rows for each of 1..32 warps",
                                        "bq must be 1..16 rows for each of 1..32 warps",
                                        "bk must be 32, 64, 96 or 128"};
  for (size_t i = 0; i < sizeof bad_tiles / sizeof bad_tiles[0]; i++) {
    assert_false(kiln_cuda_flash_fits(&g->attn, &bad_tiles[i]));
    KT_ASSERT_ERR(kiln_cuda_flash_attention_describe(h, c, &g->attn, &bad_tiles[i], &d),
                  KILN_STATUS_UNSUPPORTED, bad_why[i]);
  }
  shape odd = shapes[1]; /* head_dim 126: rows are not whole float4s */
  odd.head_dim = 126;
  odd.n_rot = 126;
  build(g2, &odd, KILN_TYPE_Q8_0);
  assert_false(kiln_cuda_flash_fits(&g2->attn, fb));
  KT_ASSERT_ERR(kiln_cuda_flash_attention_describe(h, c, &g2->attn, fb, &d),
                KILN_STATUS_UNSUPPORTED,
                "attention node 'blk.0.attn': flash attention cannot take head_dim 126, 28/4 "
                "heads with bq 64, bk 64, 8 warps: head_dim must be a multiple of 4 in 4..256");
  shape wide = shapes[1]; /* head_dim 256 with 16 rows a warp: 128 values a lane */
  wide.head_dim = 256;
  wide.n_rot = 256;
  build(g2, &wide, KILN_TYPE_Q8_0);
  const kiln_cuda_flash_shape tall = {64, 64, 4};
  assert_false(kiln_cuda_flash_fits(&g2->attn, &tall));
  KT_ASSERT_ERR(kiln_cuda_flash_attention_describe(h, c, &g2->attn, &tall, &d),
                KILN_STATUS_UNSUPPORTED, "more than 64 values a lane");
  for (int f = 0; f < 2; f++) assert_true(kiln_cuda_flash_fits(&g2->attn, &flash_tiles[f]));
  /* A typed KV cache: flash reads it, its kv_type baked: each type fits on
   * both flavors' tiles, and its key and PTX differ from the f32 cache's. */
  build(g2, &shapes[1], KILN_TYPE_Q8_0);
  KT_ASSERT_OK(kiln_cuda_flash_attention_describe(h, c, &g2->attn, fb, &d));
  compiled f32kv = compile_desc(d, &g2->attn);
  for (size_t kv = 0; kv < sizeof kv_types / sizeof kv_types[0]; kv++) {
    set_kv(g2, kv_types[kv]);
    for (int f = 0; f < 2; f++) assert_true(kiln_cuda_flash_fits(&g2->attn, &flash_tiles[f]));
    KT_ASSERT_OK(kiln_cuda_flash_attention_describe(h, c, &g2->attn, fb, &d));
    other = compile_desc(d, &g2->attn);
    char what[64];
    snprintf(what, sizeof what, "flash_attention kv_type F32 / %s", kiln_type_name(kv_types[kv]));
    assert_differ(&f32kv, &other, what);
    free(other.ptx);
  }
  free(f32kv.ptx);
  /* q8_0 blocks run along head_dim: 32 must divide it (fits() says so;
   * describe's node check refuses the node first) */
  shape hd48 = shapes[1]; /* 4 KV heads: 192 values, whole blocks that straddle heads */
  hd48.head_dim = 48;
  hd48.n_rot = 48;
  build(g2, &hd48, KILN_TYPE_Q8_0);
  set_kv(g2, KILN_TYPE_Q8_0);
  assert_false(kiln_cuda_flash_fits(&g2->attn, fb));
  KT_ASSERT_ERR(kiln_cuda_flash_attention_describe(h, c, &g2->attn, fb, &d), KILN_STATUS_INVALID_ARGUMENT,
                "head_dim 48 is not a multiple of the Q8_0 KV cache's block of 32 values");
  KT_ASSERT_ERR(kiln_cuda_flash_attention_describe(h, c, &g->rope, fb, &d),
                KILN_STATUS_INVALID_ARGUMENT, "is not attention");

  /* shared memory: Q, the K/V tile (row stride head_dim + 4 here) and P */
  assert_int_equal(kiln_cuda_flash_smem_bytes(128, 64, 64), 4 * (64 * 128 + 64 * 132 + 64 * 64));
  assert_int_equal(kiln_cuda_flash_smem_bytes(80, 64, 64), 4 * (64 * 80 + 64 * 84 + 64 * 64));
  assert_int_equal(kiln_cuda_flash_smem_bytes(72, 32, 32), 4 * (32 * 72 + 32 * 76 + 32 * 32));
  assert_int_equal(kiln_cuda_flash_smem_bytes(68, 32, 32), 4 * (32 * 68 + 32 * 68 + 32 * 32));
  assert_true(kiln_cuda_flash_smem_bytes(256, flash_tiles[0].bq, flash_tiles[0].bk) <=
              227u * 1024u); /* sm_90's opt-in limit a block */
  assert_true(kiln_cuda_flash_smem_bytes(256, flash_tiles[1].bq, flash_tiles[1].bk) <=
              99u * 1024u); /* sm_120's */
  free(g);
  free(g2);
  kiln_kcache_close(kc);
}

/* The kernels' step-block indices are cuda_step.h's; every template that
 * reads the block declares it as its runtime `step` pointer, and none
 * takes a position (pos0, n_kv) as a parameter of its own, baked or not:
 * positions change every decode step while the launch does not. (A token
 * count may be a launch argument: grids are sized by it, so a captured
 * step is only ever replayed for the token count it was captured with.) */
static void test_step_block_layout(void **state) {
  static const struct {
    const char *name;
    int index;
  } fields[] = {{"KILN_STEP_POS0", KILN_CUDA_STEP_POS0},
                {"KILN_STEP_N_TOKENS", KILN_CUDA_STEP_N_TOKENS},
                {"KILN_STEP_N_KV", KILN_CUDA_STEP_N_KV}};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    char want[64];
    snprintf(want, sizeof want, "#define %s %d\n", fields[i].name, fields[i].index);
    if (!strstr(kiln_cuda_step_block_source, want))
      fail_msg("kernels/step_block.cuh.tmpl lacks \"%s\" (cuda_step.h's index)", want);
  }
  assert_true(KILN_CUDA_STEP_N_KV < KILN_CUDA_STEP_FIELDS);
  static const char *const per_step[] = {"pos0", "n_kv", "pos", "position", "n_past"};
  unsigned readers = 0;
  for (unsigned ti = 0; ti < kiln_cuda_n_templates; ti++) {
    const kiln_ktemplate *t = kiln_cuda_templates[ti];
    const bool reads = strstr(t->source, "step[KILN_STEP_") != NULL;
    bool has_step = false;
    for (uint32_t i = 0; i < t->n_params; i++) {
      const kiln_kparam_decl *p = &t->params[i];
      for (size_t j = 0; j < sizeof per_step / sizeof per_step[0]; j++)
        if (strcmp(p->name, per_step[j]) == 0)
          fail_msg("template %s declares per-step value %s as a parameter; it belongs in the "
                   "step block",
                   t->name, p->name);
      if (strcmp(p->name, "step") == 0) {
        if (p->kind != KILN_KPARAM_RUNTIME || p->type != KILN_KPARAM_PTR)
          fail_msg("template %s: step must be a runtime pointer", t->name);
        has_step = true;
      }
    }
    if (reads != has_step)
      fail_msg("template %s %s the step block but %s a step parameter", t->name,
               reads ? "reads" : "does not read", has_step ? "declares" : "does not declare");
    readers += reads;
  }
  printf("%u templates read the step block\n", readers);
  assert_true(readers >= 3); /* rope, attention, store_kv */
}

/* The host sizes the quantized-activation scratch (kiln_cuda_xq_col_bytes)
 * by the column layout act_quant.cuh writes: H[K], L[K] at 16 bits, K/32
 * float2 {s, S}, K/8 int32 sums, the column padded to 16 bytes. A host size
 * that drops a region lets quantize write past the scratch (it did: the
 * K/8 sums were missing). The template must still name every region. */
static void test_xq_scratch_layout(void **state) {
  (void)state;
  static const int64_t ks[] = {32, 768, 2816, 3584, 18944};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
    for (int bits = 8; bits <= 16; bits += 8) {
      const int64_t k = ks[i];
      const uint64_t want = ((uint64_t)(k * (bits / 8) + k / 32 * 8 + k / 8 * 4) + 15) & ~15ull;
      const uint64_t got =
          kiln_cuda_xq_col_bytes(k, bits == 16 ? KILN_CUDA_QUANT_Q16 : KILN_CUDA_QUANT_Q8);
      if (got != want)
        fail_msg("K=%lld, %d bits: host scratch %llu bytes a column, act_quant.cuh writes %llu",
                 (long long)k, bits, (unsigned long long)got, (unsigned long long)want);
    }
  assert_int_equal(kiln_cuda_xq_col_bytes(768, KILN_CUDA_QUANT_NONE), 0);
  for (unsigned ti = 0; ti < kiln_cuda_n_templates; ti++) {
    const kiln_ktemplate *t = kiln_cuda_templates[ti];
    if (strcmp(t->name, "quantize") != 0) continue;
    assert_non_null(strstr(t->source, "#define KILN_XQ_I_OFF(k) "
                                      "(KILN_XQ_S_OFF(k) + (long long)(k) / 32 * 8)"));
    assert_non_null(strstr(t->source, "#define KILN_XQ_COL_BYTES(k) "
                                      "(KILN_XQ_I_OFF(k) + (long long)(k) / 8 * 4)"));
    return;
  }
  fail_msg("no quantize template");
}

/* The KV type is baked into every kernel that reads or writes the cache:
 * attention, attention_split and store_kv descriptors that differ only in
 * kv_type carry it in their canonical form and differ in key and PTX, for
 * each pair of F32, F16, BF16 and Q8_0; a Q8_0 cache with head_dim 80 is
 * refused, naming the node and head_dim. */
static void test_kv_type_baked(void **state) {
  (void)state;
  const kiln_host_api *h = kt_kcache_host();
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  kiln_nvrtc nv;
  kiln_kcompiler *c = NULL;
  KT_ASSERT_OK(kiln_cuda_templates_register(h, kc));
  KT_ASSERT_OK(kiln_nvrtc_register(&nv, h, kc, "sm_90", &c));
  nodes *g = malloc(sizeof *g);
  build(g, &shapes[1], KILN_TYPE_Q8_0);
  static const kiln_type types[] = {KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16, KILN_TYPE_Q8_0};
  enum { N_T = 4 };
  static const char *const kernels[] = {"attention", "attention_split", "store_kv"};
  compiled out[3][N_T];
  for (int t = 0; t < N_T; t++) {
    set_kv(g, types[t]);
    char want[64];
    snprintf(want, sizeof want, "param kv_type dtype %s\n", kiln_type_name(types[t]));
    for (int k = 0; k < 3; k++) {
      kiln_kdesc *d = NULL;
      const kiln_node *nd = k == 2 ? &g->store_k : &g->attn;
      if (k == 0) KT_ASSERT_OK(kiln_cuda_attention_describe(h, c, &g->attn, 4, &d));
      if (k == 1) KT_ASSERT_OK(kiln_cuda_attention_split_describe(h, c, &g->attn, 8, 66, false, KILN_CUDA_QUANT_NONE, &d));
      if (k == 2) KT_ASSERT_OK(kiln_cuda_store_kv_describe(h, c, &g->store_k, 256, &d));
      char *canon = NULL;
      KT_ASSERT_OK(kiln_kdesc_canonical(d, &canon));
      if (!strstr(canon, want)) fail_msg("%s: no '%s' in its canonical form", kernels[k], want);
      free(canon);
      out[k][t] = compile_desc(d, nd);
    }
  }
  for (int k = 0; k < 3; k++)
    for (int a = 0; a < N_T; a++) {
      for (int b = a + 1; b < N_T; b++) {
        char what[96];
        snprintf(what, sizeof what, "%s kv_type %s / %s", kernels[k], kiln_type_name(types[a]),
                 kiln_type_name(types[b]));
        assert_differ(&out[k][a], &out[k][b], what);
      }
    }
  for (int k = 0; k < 3; k++)
    for (int t = 0; t < N_T; t++) free(out[k][t].ptx);
  /* Q8_0 blocks would straddle heads of 80 values */
  shape odd = shapes[1];
  odd.head_dim = 80;
  odd.n_rot = 80;
  build(g, &odd, KILN_TYPE_Q8_0);
  set_kv(g, KILN_TYPE_Q8_0);
  kiln_kdesc *d = NULL;
  KT_ASSERT_ERR(kiln_cuda_attention_describe(h, c, &g->attn, 4, &d), KILN_STATUS_INVALID_ARGUMENT,
                "head_dim 80 is not a multiple of the Q8_0 KV cache's block of 32");
  free(g);
  kiln_kcache_close(kc);
}

/* The GEMM operand form is baked: in the canonical form, and each form
 * its own key and PTX, in dequant_rows (Q4_K and F32 weights) and
 * gemm_input; forms a template cannot take are refused. */
static void test_gemm_operand_baked(void **state) {
  (void)state;
  const kiln_host_api *h = kt_kcache_host();
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  kiln_nvrtc nv;
  kiln_kcompiler *c = NULL;
  KT_ASSERT_OK(kiln_cuda_templates_register(h, kc));
  KT_ASSERT_OK(kiln_nvrtc_register(&nv, h, kc, "sm_90", &c));
  nodes *g = malloc(sizeof *g);
  static const kiln_type wtypes[] = {KILN_TYPE_Q4_K, KILN_TYPE_F32};
  compiled out[N_OPERANDS];
  char want[64], what[96];
  for (size_t t = 0; t < 2; t++) {
    build(g, &shapes[1], wtypes[t]);
    for (size_t o = 0; o < N_OPERANDS; o++) {
      kiln_kdesc *d = NULL;
      KT_ASSERT_OK(kiln_cuda_dequant_describe(h, c, &g->mm_q, operands[o], 256, &d));
      snprintf(want, sizeof want, "param operand str %s\n", operands[o]);
      assert_canon_has(d, want);
      out[o] = compile_desc(d, &g->mm_q);
    }
    for (size_t a = 0; a < N_OPERANDS; a++)
      for (size_t b = a + 1; b < N_OPERANDS; b++) {
        snprintf(what, sizeof what, "dequant_rows %s operand %s / %s", kiln_type_name(wtypes[t]),
                 operands[a], operands[b]);
        assert_differ(&out[a], &out[b], what);
      }
    for (size_t o = 0; o < N_OPERANDS; o++) free(out[o].ptx);
  }
  for (size_t o = 1; o < N_OPERANDS; o++) {
    kiln_kdesc *d = NULL;
    KT_ASSERT_OK(kiln_cuda_gemm_input_describe(h, c, &g->mm_ff, operands[o], 256, &d));
    snprintf(want, sizeof want, "param operand str %s\n", operands[o]);
    assert_canon_has(d, want);
    assert_canon_has(d, "param k i64 18944\n"); /* ffn_down's K */
    out[o] = compile_desc(d, &g->mm_ff);
  }
  for (size_t a = 1; a < N_OPERANDS; a++)
    for (size_t b = a + 1; b < N_OPERANDS; b++) {
      snprintf(what, sizeof what, "gemm_input operand %s / %s", operands[a], operands[b]);
      assert_differ(&out[a], &out[b], what);
    }
  for (size_t o = 1; o < N_OPERANDS; o++) free(out[o].ptx);
  kiln_kdesc *d = NULL;
  KT_ASSERT_ERR(kiln_cuda_dequant_describe(h, c, &g->mm_q, "f16", 256, &d),
                KILN_STATUS_INVALID_ARGUMENT, "GEMM operand f16 is not f32, bf16, bf16x3 or tf32x3");
  KT_ASSERT_ERR(kiln_cuda_gemm_input_describe(h, c, &g->mm_q, "f32", 256, &d),
                KILN_STATUS_INVALID_ARGUMENT, "GEMM operand f32 is not bf16, bf16x3 or tf32x3");
  free(g);
  kiln_kcache_close(kc);
}

/* The FP8 GEMM's baked scale (issue 9: the seed's sibling defect was an
 * FP8 activation cache whose key left out the scale): in fp8_rows (Q4_K
 * and F16 weights) and fp8_input, descriptors that differ only in fp8_max
 * have different keys AND different PTX, and the canonical form carries
 * its exact bits; an fp8_max past e4m3's range, zero or NaN is refused,
 * naming the node. */
static void test_fp8_scale_baked(void **state) {
  (void)state;
  const kiln_host_api *h = kt_kcache_host();
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  kiln_nvrtc nv;
  kiln_kcompiler *c = NULL;
  KT_ASSERT_OK(kiln_cuda_templates_register(h, kc));
  KT_ASSERT_OK(kiln_nvrtc_register(&nv, h, kc, "sm_90", &c));
  nodes *g = malloc(sizeof *g);
  static const kiln_type wtypes[] = {KILN_TYPE_Q4_K, KILN_TYPE_F16};
  static const float maxes[] = {448.0f, 240.0f};
  static const char *const bits[] = {"param fp8_max f32 0x43e00000\n", "param fp8_max f32 0x43700000\n"};
  compiled out[2];
  char what[96];
  for (size_t t = 0; t < 2; t++) {
    build(g, &shapes[1], wtypes[t]);
    for (size_t m = 0; m < 2; m++) {
      kiln_kdesc *d = NULL;
      KT_ASSERT_OK(kiln_cuda_fp8_rows_describe(h, c, &g->mm_q, maxes[m], 256, &d));
      assert_canon_has(d, bits[m]);
      out[m] = compile_desc(d, &g->mm_q);
    }
    snprintf(what, sizeof what, "fp8_rows %s fp8_max 448 / 240", kiln_type_name(wtypes[t]));
    assert_differ(&out[0], &out[1], what);
    for (size_t m = 0; m < 2; m++) free(out[m].ptx);
  }
  for (size_t m = 0; m < 2; m++) {
    kiln_kdesc *d = NULL;
    KT_ASSERT_OK(kiln_cuda_fp8_input_describe(h, c, &g->mm_ff, maxes[m], 256, &d));
    assert_canon_has(d, bits[m]);
    assert_canon_has(d, "param k i64 18944\n"); /* ffn_down's K */
    out[m] = compile_desc(d, &g->mm_ff);
  }
  assert_differ(&out[0], &out[1], "fp8_input fp8_max 448 / 240");
  for (size_t m = 0; m < 2; m++) free(out[m].ptx);
  kiln_kdesc *d = NULL;
  KT_ASSERT_ERR(kiln_cuda_fp8_rows_describe(h, c, &g->mm_q, 449.0f, 256, &d),
                KILN_STATUS_INVALID_ARGUMENT, "fp8_max 449 is not in (0, 448]");
  KT_ASSERT_ERR(kiln_cuda_fp8_input_describe(h, c, &g->mm_q, 0.0f, 256, &d),
                KILN_STATUS_INVALID_ARGUMENT, "fp8_max 0 is not in (0, 448]");
  KT_ASSERT_ERR(kiln_cuda_fp8_input_describe(h, c, &g->mm_q, __builtin_nanf(""), 256, &d),
                KILN_STATUS_INVALID_ARGUMENT, "is not in (0, 448]");
  free(g);
  kiln_kcache_close(kc);
}

/* The tensor-core split decode attention: compiled for every target arch
 * on F16 and BF16 caches (Qwen2.5-7B's heads, and a group of 16 at
 * head_dim 64), its cache type baked (mma_type: its own key and PTX), and
 * the nodes it cannot take refused. */
static void test_attention_mma(void **state) {
  (void)state;
  const kiln_host_api *h = kt_kcache_host();
  static const char *const archs[] = {"sm_90", "sm_120", "sm_121"};
  nodes *g = malloc(sizeof *g);
  for (size_t a = 0; a < 3; a++) {
    kiln_kcache *kc = kt_kcache_open(NULL, NULL);
    kiln_nvrtc nv;
    kiln_kcompiler *c = NULL;
    KT_ASSERT_OK(kiln_cuda_templates_register(h, kc));
    KT_ASSERT_OK(kiln_nvrtc_register(&nv, h, kc, archs[a], &c));
    compiled out[2];
    for (int t = 0; t < 2; t++) {
      build(g, &shapes[1], KILN_TYPE_Q4_K);
      set_kv(g, t ? KILN_TYPE_BF16 : KILN_TYPE_F16);
      assert_true(kiln_cuda_attention_mma_fits(&g->attn));
      kiln_kdesc *d = NULL;
      KT_ASSERT_OK(kiln_cuda_attention_mma_describe(h, c, &g->attn, 4, 20, &d));
      assert_canon_has(d, t ? "param mma_type str bf16\n" : "param mma_type str f16\n");
      out[t] = compile_desc(d, &g->attn);
      /* a full group of 16 query heads at head_dim 64, one warp */
      shape s16 = shapes[1];
      s16.head_dim = 64, s16.n_rot = 64, s16.n_head = 16, s16.n_head_kv = 1;
      build(g, &s16, KILN_TYPE_Q4_K);
      set_kv(g, t ? KILN_TYPE_BF16 : KILN_TYPE_F16);
      KT_ASSERT_OK(kiln_cuda_attention_mma_describe(h, c, &g->attn, 1, 3, &d));
      check_kernel(d, &g->attn, archs[a]);
    }
    assert_differ(&out[0], &out[1], "attention_mma mma_type f16 / bf16");
    free(out[0].ptx);
    free(out[1].ptx);
    kiln_kdesc *d = NULL;
    build(g, &shapes[1], KILN_TYPE_Q4_K); /* an F32 cache */
    assert_false(kiln_cuda_attention_mma_fits(&g->attn));
    KT_ASSERT_ERR(kiln_cuda_attention_mma_describe(h, c, &g->attn, 4, 20, &d), KILN_STATUS_UNSUPPORTED,
                  "F32 cache, head_dim 128");
    set_kv(g, KILN_TYPE_F16);
    KT_ASSERT_ERR(kiln_cuda_attention_mma_describe(h, c, &g->attn, 17, 20, &d),
                  KILN_STATUS_INVALID_ARGUMENT, "warps");
    shape odd = shapes[1];
    odd.head_dim = 72, odd.n_rot = 72; /* not a multiple of 16 */
    build(g, &odd, KILN_TYPE_Q4_K);
    set_kv(g, KILN_TYPE_F16);
    KT_ASSERT_ERR(kiln_cuda_attention_mma_describe(h, c, &g->attn, 4, 20, &d), KILN_STATUS_UNSUPPORTED,
                  "head_dim 72");
    kiln_kcache_close(kc);
  }
  free(g);
}

/* The integer tensor-core prefill GEMM (gemm = q16mma): every block type
 * compiles in q16 and q8 with the backends' tile (128 x 64, 4 warps) and
 * another (64 x 32, 8 warps), its PTX runs the int8 mma.sync of the type's
 * sub-block (m16n8k32; Q6_K's scales per 16: m16n8k16), and u8 operands
 * at q16 only (the lo bytes); every baked value is in the canonical form
 * and the descriptors that differ in one differ in key and PTX; describe
 * refuses what mmq cannot take (F16 weights, K not a multiple of 128,
 * tiles past 48 KiB or not divisible among the warps). */
static void test_mmq(void **state) {
  (void)state;
  const kiln_host_api *h = kt_kcache_host();
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  kiln_nvrtc nv;
  kiln_kcompiler *c = NULL;
  KT_ASSERT_OK(kiln_cuda_templates_register(h, kc));
  KT_ASSERT_OK(kiln_nvrtc_register(&nv, h, kc, "sm_90", &c));
  nodes *g = malloc(sizeof *g);
  static const kiln_type types[] = {KILN_TYPE_Q4_0, KILN_TYPE_Q5_0, KILN_TYPE_Q8_0,
                                    KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K};
  static const kiln_cuda_mmq_shape tiles[] = {{128, 64, 4, 0}, {64, 32, 8, 0}};
  static const kiln_cuda_quant qs[] = {KILN_CUDA_QUANT_Q16, KILN_CUDA_QUANT_Q8};
  char want[96], what[128];
  compiled base[2]; /* Q4_K at q16 in the two tiles */
  memset(base, 0, sizeof base);
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
    build(g, &shapes[1], types[t]);
    assert_true(kiln_cuda_mmq_ok(&g->mm_ff) && kiln_cuda_mmq_ok(&g->mm_q));
    for (size_t q = 0; q < 2; q++)
      for (size_t f = 0; f < 2; f++) {
        kiln_kdesc *d = NULL;
        KT_ASSERT_OK(kiln_cuda_mmq_describe(h, c, &g->mm_ff, qs[q], &tiles[f], &d));
        snprintf(want, sizeof want, "param mmq_type dtype %s\n", kiln_type_name(types[t]));
        assert_canon_has(d, want);
        assert_canon_has(d, q ? "param quant str q8\n" : "param quant str q16\n");
        assert_canon_has(d, "param k i64 18944\n");
        snprintf(want, sizeof want, "param tile_m i64 %u\n", tiles[f].tile_m);
        assert_canon_has(d, want);
        snprintf(want, sizeof want, "param tile_n i64 %u\n", tiles[f].tile_n);
        assert_canon_has(d, want);
        snprintf(want, sizeof want, "param warps i64 %u\n", tiles[f].warps);
        assert_canon_has(d, want);
        compiled out = compile_desc(d, &g->mm_ff);
        const char *mma = types[t] == KILN_TYPE_Q6_K ? "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32"
                                                     : "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32";
        const char *lo = types[t] == KILN_TYPE_Q6_K ? "mma.sync.aligned.m16n8k16.row.col.s32.s8.u8.s32"
                                                    : "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32";
        if (!strstr(out.ptx, mma)) fail_msg("mmq %s: PTX lacks %s", kiln_type_name(types[t]), mma);
        if ((strstr(out.ptx, lo) != NULL) != (q == 0))
          fail_msg("mmq %s %s: the u8 (lo bytes) pass is %s", kiln_type_name(types[t]),
                   q ? "q8" : "q16", q ? "there" : "missing");
        if (types[t] == KILN_TYPE_Q4_K && q == 0) {
          base[f] = out;
        } else {
          if (base[f].ptx) {
            snprintf(what, sizeof what, "mmq tile %ux%u: Q4_K q16 / %s %s", tiles[f].tile_m,
                     tiles[f].tile_n, kiln_type_name(types[t]), q ? "q8" : "q16");
            assert_differ(&base[f], &out, what);
          }
          free(out.ptx);
        }
      }
  }
  assert_differ(&base[0], &base[1], "mmq Q4_K q16 tile 128x64x4 / 64x32x8");
  /* each of K, tile_m, tile_n, warps and prefetch alone */
  build(g, &shapes[1], KILN_TYPE_Q4_K);
  static const kiln_cuda_mmq_shape one[] = {
      {64, 64, 4, 0}, {128, 32, 4, 0}, {128, 64, 8, 0}, {128, 64, 4, 1}};
  for (size_t f = 0; f < sizeof one / sizeof one[0]; f++) {
    kiln_kdesc *d = NULL;
    KT_ASSERT_OK(kiln_cuda_mmq_describe(h, c, &g->mm_ff, KILN_CUDA_QUANT_Q16, &one[f], &d));
    compiled out = compile_desc(d, &g->mm_ff);
    snprintf(what, sizeof what, "mmq tile 128x64x4,0 / %ux%ux%u,%u", one[f].tile_m,
             one[f].tile_n, one[f].warps, one[f].prefetch);
    assert_differ(&base[0], &out, what);
    free(out.ptx);
  }
  {
    kiln_kdesc *d = NULL;
    KT_ASSERT_OK(kiln_cuda_mmq_describe(h, c, &g->mm_q, KILN_CUDA_QUANT_Q16, &tiles[0], &d));
    assert_canon_has(d, "param k i64 3584\n");
    compiled out = compile_desc(d, &g->mm_q);
    assert_differ(&base[0], &out, "mmq k 18944 / 3584");
    free(out.ptx);
  }
  free(base[0].ptx);
  free(base[1].ptx);
  /* refused: an F16 weight, K = 64 (stories260K), a tile past 48 KiB, warps
   * that do not divide the fragments */
  kiln_kdesc *d = NULL;
  build(g, &shapes[1], KILN_TYPE_F16);
  assert_false(kiln_cuda_mmq_ok(&g->mm_ff));
  KT_ASSERT_ERR(kiln_cuda_mmq_describe(h, c, &g->mm_ff, KILN_CUDA_QUANT_Q16, &tiles[0], &d),
                KILN_STATUS_UNSUPPORTED, "not F16 with K 18944");
  build(g, &shapes[0], KILN_TYPE_Q8_0);
  assert_false(kiln_cuda_mmq_ok(&g->mm_q));
  KT_ASSERT_ERR(kiln_cuda_mmq_describe(h, c, &g->mm_q, KILN_CUDA_QUANT_Q16, &tiles[0], &d),
                KILN_STATUS_UNSUPPORTED, "not Q8_0 with K 64");
  build(g, &shapes[1], KILN_TYPE_Q4_K);
  const kiln_cuda_mmq_shape big = {128, 128, 4, 0}, odd = {128, 64, 3, 0};
  KT_ASSERT_ERR(kiln_cuda_mmq_describe(h, c, &g->mm_ff, KILN_CUDA_QUANT_Q16, &big, &d),
                KILN_STATUS_INVALID_ARGUMENT, "past 48 KiB");
  KT_ASSERT_ERR(kiln_cuda_mmq_describe(h, c, &g->mm_ff, KILN_CUDA_QUANT_Q16, &odd, &d),
                KILN_STATUS_INVALID_ARGUMENT, "warps must divide");
  KT_ASSERT_ERR(kiln_cuda_mmq_describe(h, c, &g->mm_ff, KILN_CUDA_QUANT_NONE, &tiles[0], &d),
                KILN_STATUS_INVALID_ARGUMENT, "must be q16 or q8");
  /* [<plugin>] mmq_shape's check at open agrees with describe: each shape
   * it takes describes for Q4_K and Q6_K, each it refuses does not */
  static const kiln_cuda_mmq_shape any[] = {
      {128, 64, 4, 0}, {64, 32, 8, 0},  {64, 64, 4, 0},  {128, 32, 4, 0}, {128, 64, 8, 0},
      {16, 8, 1, 0},   {128, 64, 4, 1}, {64, 32, 8, 1},  {256, 32, 4, 0}, {128, 128, 4, 0},
      {128, 64, 3, 0}, {120, 64, 4, 0}, {128, 60, 4, 0}, {272, 8, 1, 0},  {64, 64, 32, 0},
      {16, 8, 2, 0},   {0, 64, 4, 0},   {128, 64, 0, 0}, {128, 64, 4, 2}};
  static const bool want_ok[] = {true,  true,  true,  true,  true,  true,  true,
                                 true,  false, false, false, false, false, false,
                                 false, false, false, false, false};
  for (size_t i = 0; i < sizeof any / sizeof any[0]; i++) {
    const bool ok = kiln_cuda_mmq_shape_ok(&any[i], KILN_CUDA_QUANT_Q16);
    if (ok != want_ok[i])
      fail_msg("mmq_shape %ux%ux%u: shape_ok %d, want %d", any[i].tile_m, any[i].tile_n,
               any[i].warps, ok, want_ok[i]);
    static const kiln_type tt[] = {KILN_TYPE_Q4_K, KILN_TYPE_Q6_K};
    for (int t = 0; t < 2; t++) {
      build(g, &shapes[1], tt[t]);
      kiln_status st = kiln_cuda_mmq_describe(h, c, &g->mm_ff, KILN_CUDA_QUANT_Q16, &any[i], &d);
      if ((st == NULL) != ok)
        fail_msg("mmq_shape %ux%ux%u %s: describe %s, shape_ok %d", any[i].tile_m,
                 any[i].tile_n, any[i].warps, kiln_type_name(tt[t]),
                 st ? kiln_status_message(st) : "ok", ok);
      kiln_status_free(st);
      if (!st) h->kdesc_free(d);
    }
  }
  free(g);
  kiln_kcache_close(kc);
}

int main(void) {
#if defined(KT_PART) && KT_PART < 3
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_template_every_arch)};
#else
  const struct CMUnitTest tests[] = {
#if !defined(KT_PART)
      cmocka_unit_test(test_every_template_every_arch),
#endif
      cmocka_unit_test(test_describe_refuses),
      cmocka_unit_test(test_attention_split),
      cmocka_unit_test(test_flash_attention),
      cmocka_unit_test(test_kv_type_baked),
      cmocka_unit_test(test_gemm_operand_baked),
      cmocka_unit_test(test_fp8_scale_baked),
      cmocka_unit_test(test_attention_mma),
      cmocka_unit_test(test_mmq),
      cmocka_unit_test(test_step_block_layout),
      cmocka_unit_test(test_xq_scratch_layout),
  };
#endif
  return cmocka_run_group_tests(tests, NULL, NULL);
}
