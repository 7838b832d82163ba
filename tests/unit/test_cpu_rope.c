/* cpu backend, ROPE: the NORM and NEOX pairings on a unit vector with known
 * answers, partial rotation (n_rot < head_dim), θ reaching the result, and
 * every shape against the float64 reference. */
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

#include "testutil.h"

#include "test_cpu_common.h"

typedef struct rope_case {
  kiln_tensor x, y;
  kiln_node node;
} rope_case;

static void rope_case_init(rope_case *c, kiln_rope_mode mode, int32_t head_dim, int32_t n_head,
                           int32_t n_rot, float theta, int64_t cap) {
  c->x = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, (int64_t)head_dim * n_head, cap, "q");
  c->y = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, (int64_t)head_dim * n_head, cap,
                    "q_rope");
  c->node = kct_node(KILN_OP_ROPE, "blk.0.rope_q", &c->x, NULL, NULL, &c->y);
  c->node.p.rope.mode = mode;
  c->node.p.rope.head_dim = head_dim;
  c->node.p.rope.n_head = n_head;
  c->node.p.rope.n_rot = n_rot;
  c->node.p.rope.theta = theta;
}

/* Position 3, x = e0: pair 0 turns by 3 rad (θ^0 = 1), so the pair becomes
 * (cos 3, sin 3) = (-0.98999, 0.14112). NORM's partner of dim 0 is dim 1,
 * NEOX's is dim n_rot/2 = 4. */
static void test_unit_vector(void **state) {
  for (int p = 0; p < 2; p++) {
    cpu_ctx ctx;
    kct_ctx_open(&ctx, 1, (cpu_precision)p);
    for (int m = 0; m < 2; m++) {
      kiln_rope_mode mode = m ? KILN_ROPE_NEOX : KILN_ROPE_NORM;
      rope_case c;
      rope_case_init(&c, mode, 8, 1, 8, 1e4f, 1);
      float x[8] = {1, 0, 0, 0, 0, 0, 0, 0}, y[8];
      kct_run_ok(&ctx, &c.node, x, NULL, NULL, y, 1, 3);
      int partner = mode == KILN_ROPE_NEOX ? 4 : 1;
      assert_float_equal(y[0], -0.98999, 1e-5);
      assert_float_equal(y[partner], 0.14112, 1e-5);
      for (int d = 0; d < 8; d++) {
        if (d != 0 && d != partner) assert_float_equal(y[d], 0.0, 0.0);
      }
    }
    kct_ctx_close(&ctx);
  }
}

/* n_rot = head_dim / 2: dims n_rot .. head_dim-1 of every head pass through
 * bit for bit, in both modes; the rotated dims match the reference. */
static void test_partial_rotation(void **state) {
  const int32_t hd = 16, nh = 3, n_rot = 8, T = 4;
  kct_rng rng = kct_rng_new(21);
  float x[16 * 3 * 4], y[16 * 3 * 4];
  double ref[16 * 3 * 4];
  kct_fill(&rng, x, hd * nh * T, -1, 1);
  for (int p = 0; p < 2; p++) {
    cpu_ctx ctx;
    kct_ctx_open(&ctx, 2, (cpu_precision)p);
    for (int m = 0; m < 2; m++) {
      rope_case c;
      rope_case_init(&c, m ? KILN_ROPE_NEOX : KILN_ROPE_NORM, hd, nh, n_rot, 1e4f, T);
      kct_run_ok(&ctx, &c.node, x, NULL, NULL, y, T, 7);
      for (int t = 0; t < T; t++)
        for (int h = 0; h < nh; h++)
          assert_memory_equal(y + t * hd * nh + h * hd + n_rot, x + t * hd * nh + h * hd + n_rot,
                              (size_t)(hd - n_rot) * sizeof(float));
      kct_ref_rope(x, T, 7, &c.node.p.rope, ref);
      kct_assert_close("partial rope", y, ref, hd * nh, T, 1e-5);
      /* and the rotated dims did move */
      assert_true(fabsf(y[1] - x[1]) > 1e-3f || fabsf(y[0] - x[0]) > 1e-3f);
    }
    kct_ctx_close(&ctx);
  }
}

/* θ reaches the result: at position 1000, θ = 1e6 (qwen2) and θ = 1e4
 * (llama) each match the reference to 1e-4 and differ from each other by
 * more than 0.1 somewhere. */
static void test_theta(void **state) {
  const int32_t hd = 128, nh = 2;
  kct_rng rng = kct_rng_new(31);
  float x[256], y4[256], y6[256];
  double ref[256];
  kct_fill(&rng, x, 256, -1, 1);
  for (int p = 0; p < 2; p++) {
    cpu_ctx ctx;
    kct_ctx_open(&ctx, 1, (cpu_precision)p);
    rope_case c4, c6;
    rope_case_init(&c4, KILN_ROPE_NEOX, hd, nh, hd, 1e4f, 1);
    rope_case_init(&c6, KILN_ROPE_NEOX, hd, nh, hd, 1e6f, 1);
    kct_run_ok(&ctx, &c4.node, x, NULL, NULL, y4, 1, 1000);
    kct_run_ok(&ctx, &c6.node, x, NULL, NULL, y6, 1, 1000);
    kct_ref_rope(x, 1, 1000, &c4.node.p.rope, ref);
    for (int i = 0; i < 256; i++) assert_float_equal(y4[i], ref[i], 1e-4);
    kct_ref_rope(x, 1, 1000, &c6.node.p.rope, ref);
    for (int i = 0; i < 256; i++) assert_float_equal(y6[i], ref[i], 1e-4);
    double maxdiff = 0;
    for (int i = 0; i < 256; i++) maxdiff = fmax(maxdiff, fabs((double)y4[i] - y6[i]));
    if (!(maxdiff > 0.1)) fail_msg("theta 1e4 and 1e6 differ by only %g", maxdiff);
    kct_ctx_close(&ctx);
  }
}

static void check_shape(cpu_precision prec, kiln_rope_mode mode, int32_t hd, int32_t nh,
                        int32_t n_rot, float theta, int32_t T, int32_t pos0, uint64_t seed) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 3, prec);
  const int64_t W = (int64_t)hd * nh, cap = T + 1;
  kct_rng rng = kct_rng_new(seed);
  float *x = kct_alloc((size_t)(W * cap) * sizeof(float));
  float *y = kct_alloc((size_t)(W * cap) * sizeof(float));
  double *ref = kct_alloc((size_t)(W * T) * sizeof(double));
  kct_fill(&rng, x, W * cap, -3, 3);
  rope_case c;
  rope_case_init(&c, mode, hd, nh, n_rot, theta, cap);
  kct_run_ok(&ctx, &c.node, x, NULL, NULL, y, T, pos0);
  kct_ref_rope(x, T, pos0, &c.node.p.rope, ref);
  char what[128];
  snprintf(what, sizeof what, "rope %s hd=%d nh=%d n_rot=%d T=%d pos0=%d, %s",
           mode == KILN_ROPE_NEOX ? "neox" : "norm", hd, nh, n_rot, T, pos0,
           prec ? "f64" : "f32");
  if (prec == CPU_PRECISION_F64) kct_assert_rounded(what, y, ref, W, T, 1e-9);
  else kct_assert_close(what, y, ref, W, T, 1e-5);
  /* in place */
  KT_ASSERT_OK(kct_run(&ctx, &c.node, x, NULL, NULL, x, T, pos0));
  assert_memory_equal(x, y, (size_t)(W * T) * sizeof(float));
  free(ref);
  free(y);
  free(x);
  kct_ctx_close(&ctx);
}

static void test_shapes(void **state) {
  for (int p = 0; p < 2; p++) {
    for (int m = 0; m < 2; m++) {
      cpu_precision prec = (cpu_precision)p;
      kiln_rope_mode mode = m ? KILN_ROPE_NEOX : KILN_ROPE_NORM;
      check_shape(prec, mode, 128, 4, 128, 1e6f, 7, 10, 41);
      check_shape(prec, mode, 64, 3, 32, 1e4f, 1, 0, 42);
      check_shape(prec, mode, 6, 5, 6, 1e4f, 7, 3, 43);          /* odd head count, tiny heads */
      check_shape(prec, mode, 128, 2, 128, 1e6f, 1, 30000, 44); /* far position */
      check_shape(prec, mode, 80, 2, 64, 5e5f, 7, 123, 45);
    }
  }
}

static void test_bad_nodes(void **state) {
  cpu_ctx ctx;
  kct_ctx_open(&ctx, 1, CPU_PRECISION_F32);
  rope_case c;
  rope_case_init(&c, KILN_ROPE_NEOX, 64, 4, 64, 1e4f, 8);
  KT_ASSERT_OK(cpu_node_validate(&ctx, &c.node));
  c.node.p.rope.n_rot = 63;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &c.node), KILN_STATUS_INVALID_ARGUMENT, "n_rot 63");
  c.node.p.rope.n_rot = 66;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &c.node), KILN_STATUS_INVALID_ARGUMENT, "blk.0.rope_q");
  c.node.p.rope.n_rot = 64;
  c.node.p.rope.n_head = 3;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &c.node), KILN_STATUS_INVALID_ARGUMENT, "n_head 3");
  c.node.p.rope.n_head = 4;
  c.node.p.rope.theta = 0.0f;
  KT_ASSERT_ERR(cpu_node_validate(&ctx, &c.node), KILN_STATUS_INVALID_ARGUMENT, "theta");
  c.node.p.rope.theta = 1e4f;
  c.node.p.rope.mode = (kiln_rope_mode)1;
  KT_ASSERT_ERR(cpu_node_supports(&ctx, &c.node), KILN_STATUS_UNSUPPORTED, "rope mode 1");
  kct_ctx_close(&ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unit_vector),
      cmocka_unit_test(test_partial_rotation),
      cmocka_unit_test(test_theta),
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_bad_nodes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
