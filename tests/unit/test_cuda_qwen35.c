/* Every qwen35 kernel template compiles with NVRTC (no GPU needed) for
 * sm_90, sm_120 and sm_121 through the describe functions prepare() uses,
 * for a tiny model's shapes and Qwen3.5-9B's (hidden 4096, 16 q/k and 32
 * value heads of 128, conv 4, full attention head_dim 256 rotating 64 in
 * sections [11, 11, 10, 0], θ = 1e7), the conv kernel in F32, F16 and
 * BF16; each PTX names its entry and targets the exact arch. The
 * descriptors carry the node's values bit-exactly, and the describe step
 * refuses what the kernels cannot run, naming the node. */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcache_testhost.h"
#include "kernel_templates.h"
#include "nvrtc_compile.h"
#include "op_describe.h"
#include "qwen35_describe.h"
#include "testutil.h"

static const char *const archs[] = {"sm_90", "sm_120", "sm_121"};

typedef struct q35_shape {
  const char *name;
  int64_t E, hd, nh, nkv, n_rot, Hk, Hv, Dk, Dv, K;
  int32_t sections[4];
  float theta, eps;
} q35_shape;

static const q35_shape shapes[] = {
    {"tiny", 64, 32, 4, 2, 8, 2, 4, 16, 16, 4, {2, 1, 1, 0}, 1e7f, 1e-6f},
    {"qwen3.5-9b", 4096, 256, 16, 4, 64, 16, 32, 128, 128, 4, {11, 11, 10, 0}, 1e7f, 1e-6f},
};

static kiln_tensor tensor(int32_t id, kiln_type type, kiln_tensor_role role, int64_t ne0, int64_t ne1,
                          const char *name) {
  kiln_tensor t;
  memset(&t, 0, sizeof t);
  t.id = id;
  t.type = type;
  t.role = role;
  t.n_dims = ne1 > 1 ? 2 : 1;
  t.ne[0] = ne0;
  t.ne[1] = ne1;
  t.ne[2] = t.ne[3] = 1;
  t.nbytes = (uint64_t)kiln_type_row_bytes(type, ne0) * (uint64_t)ne1;
  snprintf(t.name, sizeof t.name, "%s", name);
  return t;
}

static void node(kiln_node *n, int32_t id, kiln_op op, const char *name, const kiln_tensor *s0,
                 const kiln_tensor *s1, const kiln_tensor *s2, const kiln_tensor *s3, const kiln_tensor *dst) {
  memset(n, 0, sizeof *n);
  n->id = id;
  n->op = op;
  n->src[0] = s0;
  n->src[1] = s1;
  n->src[2] = s2;
  n->src[3] = s3;
  n->dst = dst;
  snprintf(n->name, sizeof n->name, "%s", name);
}

/* The nodes of one recurrent and one full-attention block, capacity 8. */
typedef struct q35_nodes {
  kiln_tensor qg, qh, gate, att, qkv, conv_w, conv_s, conv, al, be, A, dt, gates, state, o, kr;
  kiln_node slice, sigmoid_mul, ssm_conv, gdn_gate, gdn, rope;
} q35_nodes;

static void build(q35_nodes *g, const q35_shape *s, kiln_type conv_type) {
  const int64_t qw = s->hd * s->nh, kd = s->Hk * s->Dk, vd = s->Hv * s->Dv, C = 2 * kd + vd;
  memset(g, 0, sizeof *g);
  g->qg = tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 2 * qw, 8, "blk.3.attn_q");
  g->qh = tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, qw, 8, "blk.3.attn_q_heads");
  g->gate = tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, qw, 8, "blk.3.attn_gate_heads");
  g->att = tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, qw, 8, "blk.3.attn");
  g->qkv = tensor(4, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, C, 8, "blk.0.attn_qkv");
  g->conv_w = tensor(5, conv_type, KILN_ROLE_WEIGHT, s->K, C, "blk.0.ssm_conv1d.weight");
  g->conv_s = tensor(6, KILN_TYPE_F32, KILN_ROLE_RECURRENT, (s->K - 1) * C, 1, "blk.0.conv_state");
  g->conv = tensor(7, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, C, 8, "blk.0.ssm_conv");
  g->al = tensor(8, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, s->Hv, 8, "blk.0.ssm_alpha");
  g->be = tensor(9, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, s->Hv, 8, "blk.0.ssm_beta");
  g->A = tensor(10, KILN_TYPE_F32, KILN_ROLE_WEIGHT, s->Hv, 1, "blk.0.ssm_a");
  g->dt = tensor(11, KILN_TYPE_F32, KILN_ROLE_WEIGHT, s->Hv, 1, "blk.0.ssm_dt.bias");
  g->gates = tensor(12, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, 2 * s->Hv, 8, "blk.0.ssm_gates");
  g->state = tensor(13, KILN_TYPE_F32, KILN_ROLE_RECURRENT, s->Dk * s->Dv * s->Hv, 1, "blk.0.ssm_state");
  g->o = tensor(14, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, vd, 8, "blk.0.gated_delta_net");
  g->kr = tensor(15, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, qw, 8, "blk.3.rope_q");
  node(&g->slice, 0, KILN_OP_SLICE, "blk.3.attn_gate_heads", &g->qg, NULL, NULL, NULL, &g->gate);
  g->slice.p.slice = (kiln_slice_params){(int32_t)s->hd, (int32_t)s->hd, (int32_t)(2 * s->hd)};
  node(&g->sigmoid_mul, 1, KILN_OP_SIGMOID_MUL, "blk.3.attn_gated", &g->gate, &g->att, NULL, NULL, &g->att);
  node(&g->ssm_conv, 2, KILN_OP_SSM_CONV, "blk.0.ssm_conv", &g->qkv, &g->conv_w, &g->conv_s, NULL, &g->conv);
  node(&g->gdn_gate, 3, KILN_OP_GDN_GATE, "blk.0.ssm_gates", &g->al, &g->be, &g->A, &g->dt, &g->gates);
  node(&g->gdn, 4, KILN_OP_GATED_DELTA_NET, "blk.0.gated_delta_net", &g->conv, &g->gates, &g->state, NULL, &g->o);
  g->gdn.p.gdn = (kiln_gdn_params){(int32_t)s->Hk, (int32_t)s->Hv, (int32_t)s->Dk, (int32_t)s->Dv, 64, s->eps,
                                   (float)(1.0 / sqrt((double)s->Dk))};
  node(&g->rope, 5, KILN_OP_ROPE, "blk.3.rope_q", &g->qh, NULL, NULL, NULL, &g->kr);
  g->rope.p.rope = (kiln_rope_params){KILN_ROPE_IMROPE, (int32_t)s->n_rot, (int32_t)s->hd, (int32_t)s->nh, s->theta,
                                      {s->sections[0], s->sections[1], s->sections[2], s->sections[3]}};
}

static unsigned n_checked;

static void check_kernel(kiln_kdesc *d, const kiln_node *nd, const char *arch) {
  kiln_kernel *k = NULL;
  KT_ASSERT_OK(kiln_cuda_kernel_get(kt_kcache_host(), d, nd, &k));
  char want[96];
  snprintf(want, sizeof want, ".entry %s(", k->entry);
  if (k->image_kind != KILN_KIMAGE_PTX || !strstr(k->image, want))
    fail_msg("%s for node %s (%s): no PTX entry %s", k->template_name, nd->name, arch, k->entry);
  snprintf(want, sizeof want, ".target %s", arch);
  if (!strstr(k->image, want)) fail_msg("%s (%s): PTX lacks \"%s\"", k->template_name, arch, want);
  /* the grid dependency first (grid_dep.cuh): launched programmatically */
  if (!strstr(k->image, "griddepcontrol.wait;"))
    fail_msg("%s (%s): PTX lacks griddepcontrol.wait (KILN_GRID_DEPS)", k->template_name, arch);
  n_checked++;
}

static void test_every_qwen35_template(void **state) {
  const kiln_host_api *h = kt_kcache_host();
  static const kiln_type conv_types[] = {KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16};
  for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
    kiln_kcache *kc = kt_kcache_open(NULL, NULL);
    kiln_nvrtc nv;
    kiln_kcompiler *c = NULL;
    KT_ASSERT_OK(kiln_cuda_templates_register(h, kc));
    KT_ASSERT_OK(kiln_nvrtc_register(&nv, h, kc, archs[a], &c));
    unsigned before = n_checked;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
      q35_nodes *g = malloc(sizeof *g);
      kiln_kdesc *d;
      for (size_t ti = 0; ti < 3; ti++) {
        build(g, &shapes[si], conv_types[ti]);
        KT_ASSERT_OK(kiln_cuda_ssm_conv_describe(h, c, &g->ssm_conv, 256, &d));
        check_kernel(d, &g->ssm_conv, archs[a]);
      }
      KT_ASSERT_OK(kiln_cuda_slice_describe(h, c, &g->slice, 256, &d));
      check_kernel(d, &g->slice, archs[a]);
      KT_ASSERT_OK(kiln_cuda_sigmoid_mul_describe(h, c, &g->sigmoid_mul, 256, &d));
      check_kernel(d, &g->sigmoid_mul, archs[a]);
      KT_ASSERT_OK(kiln_cuda_gdn_gate_describe(h, c, &g->gdn_gate, 256, &d));
      check_kernel(d, &g->gdn_gate, archs[a]);
      KT_ASSERT_OK(kiln_cuda_gdn_recurrent_describe(h, c, &g->gdn, 4, &d));
      check_kernel(d, &g->gdn, archs[a]);
      uint32_t cols = 0;
      KT_ASSERT_OK(kiln_cuda_gdn_chunked_describe(h, c, &g->gdn, 256, &d, &cols));
      assert_int_equal(cols, shapes[si].Dk <= 128 ? (shapes[si].Dv < 32 ? shapes[si].Dv : 32) : 4096 / shapes[si].Dk);
      check_kernel(d, &g->gdn, archs[a]);
      KT_ASSERT_OK(kiln_cuda_rope_imrope_describe(h, c, &g->rope, 128, &d));
      check_kernel(d, &g->rope, archs[a]);
      free(g);
    }
    printf("%s: %u qwen35 kernels checked (NVRTC %s)\n", archs[a], n_checked - before, nv.version);
    kiln_kcache_close(kc);
  }
}

static bool canon_has(kiln_kdesc *d, const char *line) {
  char *canon = NULL;
  KT_ASSERT_OK(kiln_kdesc_canonical(d, &canon));
  bool has = strstr(canon, line) != NULL;
  if (!has) printf("canonical form lacks \"%s\":\n%s\n", line, canon);
  free(canon);
  kt_kcache_host()->kdesc_free(d);
  return has;
}

static void test_describe(void **state) {
  const kiln_host_api *h = kt_kcache_host();
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  kiln_nvrtc nv;
  kiln_kcompiler *c = NULL;
  KT_ASSERT_OK(kiln_cuda_templates_register(h, kc));
  KT_ASSERT_OK(kiln_nvrtc_register(&nv, h, kc, "sm_90", &c));
  q35_nodes *g = malloc(sizeof *g);
  kiln_kdesc *d = NULL;
  build(g, &shapes[1], KILN_TYPE_F32);
  /* the node's own values, bit-exact */
  KT_ASSERT_OK(kiln_cuda_gdn_chunked_describe(h, c, &g->gdn, 256, &d, NULL));
  assert_true(canon_has(d, "param l2_eps f32 0x358637bd\n")); /* 1e-6 */
  KT_ASSERT_OK(kiln_cuda_gdn_chunked_describe(h, c, &g->gdn, 256, &d, NULL));
  assert_true(canon_has(d, "param q_scale f32 0x3db504f3\n")); /* 1/sqrt(128) */
  KT_ASSERT_OK(kiln_cuda_gdn_chunked_describe(h, c, &g->gdn, 256, &d, NULL));
  assert_true(canon_has(d, "param chunk i64 64\n"));
  KT_ASSERT_OK(kiln_cuda_rope_imrope_describe(h, c, &g->rope, 128, &d));
  assert_true(canon_has(d, "param theta f32 0x4b189680\n")); /* 1e7 */
  KT_ASSERT_OK(kiln_cuda_rope_imrope_describe(h, c, &g->rope, 128, &d));
  assert_true(canon_has(d, "param sect_w i64 10\n"));
  KT_ASSERT_OK(kiln_cuda_ssm_conv_describe(h, c, &g->ssm_conv, 256, &d));
  assert_true(canon_has(d, "param d_conv i64 4\n"));
  /* what the kernels cannot run */
  g->gdn.p.gdn.head_k_dim = 512;
  g->qkv.ne[0] = g->conv.ne[0] = 2 * 16 * 512 + 32 * 128;
  g->qkv.nbytes = g->conv.nbytes = (uint64_t)g->conv.ne[0] * 8 * 4;
  g->state.ne[0] = 512 * 128 * 32;
  g->state.nbytes = (uint64_t)g->state.ne[0] * 4;
  KT_ASSERT_ERR(kiln_cuda_gdn_recurrent_describe(h, c, &g->gdn, 4, &d), KILN_STATUS_UNSUPPORTED,
                "gated_delta_net node 'blk.0.gated_delta_net': head_k_dim 512 or chunk 64 is above");
  build(g, &shapes[1], KILN_TYPE_F32);
  g->conv_w.type = KILN_TYPE_Q8_0;
  KT_ASSERT_ERR(kiln_cuda_ssm_conv_describe(h, c, &g->ssm_conv, 256, &d), KILN_STATUS_UNSUPPORTED,
                "conv kernel src1 'blk.0.ssm_conv1d.weight' has type Q8_0");
  build(g, &shapes[1], KILN_TYPE_F32);
  g->rope.p.rope.mode = KILN_ROPE_NEOX;
  g->rope.p.rope.sections[0] = g->rope.p.rope.sections[1] = g->rope.p.rope.sections[2] = 0;
  KT_ASSERT_ERR(kiln_cuda_rope_imrope_describe(h, c, &g->rope, 128, &d), KILN_STATUS_INVALID_ARGUMENT,
                "rope mode 2 is not IMROPE");
  build(g, &shapes[1], KILN_TYPE_F32);
  g->gdn.p.gdn.n_k_heads = 5;
  KT_ASSERT_ERR(kiln_cuda_gdn_chunked_describe(h, c, &g->gdn, 256, &d, NULL), KILN_STATUS_INVALID_ARGUMENT,
                "n_v_heads 32 is not a multiple of n_k_heads 5");
  build(g, &shapes[1], KILN_TYPE_F32);
  KT_ASSERT_ERR(kiln_cuda_gdn_recurrent_describe(h, c, &g->gdn, 33, &d), KILN_STATUS_INVALID_ARGUMENT, "warps 33");
  free(g);
  kiln_kcache_close(kc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_qwen35_template),
      cmocka_unit_test(test_describe),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
