/* cpu backend, threads: the pool really runs work on several threads, its
 * idle workers block instead of spinning, it loses no job, and
 * every threaded op gives bit-identical results with 1 and 4 threads, in
 * both precisions (threads split outputs, never a reduction). */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kiln/kv_cache.h"
#include "testutil.h"

#include "test_cpu_common.h"

typedef struct seen {
  pthread_t who[8];
  int calls[8];
  int nth[8];
  int arrived; /* tasks started (atomic) */
  bool wait;   /* each task waits (up to 5 s) until every task has started */
} seen;

static void record(void *arg, int ith, int nth) {
  seen *s = arg;
  s->who[ith] = pthread_self();
  s->calls[ith]++;
  s->nth[ith] = nth;
  __atomic_fetch_add(&s->arrived, 1, __ATOMIC_SEQ_CST);
  if (!s->wait) return;
  for (int i = 0; i < 5000000 && __atomic_load_n(&s->arrived, __ATOMIC_SEQ_CST) < nth; i++) {
    struct timespec ts = {0, 1000};
    nanosleep(&ts, NULL);
  }
}

/* Every task runs once with the right count; tasks that must overlap in
 * time (each waits for all to start) run on that many distinct threads, so
 * the pool really is parallel; fewer tasks than threads run only those. */
static void test_pool(void **state) {
  cpu_pool *pool;
  assert_int_equal(cpu_pool_create(4, &pool), 0);
  assert_int_equal(cpu_pool_size(pool), 4);
  for (int round = 0; round < 50; round++) {
    seen s;
    memset(&s, 0, sizeof s);
    s.wait = round % 10 == 0;
    cpu_pool_run(pool, 100, record, &s);
    for (int i = 0; i < 4; i++) {
      assert_int_equal(s.calls[i], 1);
      assert_int_equal(s.nth[i], 4);
    }
    if (s.wait) {
      assert_int_equal(s.arrived, 4);
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < i; j++) assert_false(pthread_equal(s.who[i], s.who[j]));
    }
    /* fewer tasks than workers: only those run */
    memset(&s, 0, sizeof s);
    cpu_pool_run(pool, 2, record, &s);
    assert_int_equal(s.calls[0] + s.calls[1] + s.calls[2] + s.calls[3], 2);
    assert_int_equal(s.calls[0], 1);
    assert_int_equal(s.calls[1], 1);
    assert_int_equal(s.nth[1], 2);
  }
  assert_int_equal(cpu_pool_reserve(pool, 1000), 0);
  for (int i = 0; i < 4; i++) {
    assert_non_null(cpu_pool_scratch(pool, i));
    assert_int_equal((uintptr_t)cpu_pool_scratch(pool, i) % 64, 0);
    memset(cpu_pool_scratch(pool, i), 0xab, 1000);
  }
  cpu_pool_destroy(pool);
  assert_int_not_equal(cpu_pool_create(0, &pool), 0);
  assert_null(pool);
}

static void count_calls(void *arg, int ith, int nth) {
  (void)nth;
  __atomic_fetch_add((int *)arg + ith, 1, __ATOMIC_RELAXED);
}

/* Waits up to 10 s for every worker of the pool to block; how many did. */
static int wait_for_sleepers(cpu_pool *pool) {
  for (int i = 0; i < 10000 && cpu_pool_sleepers(pool) < cpu_pool_size(pool) - 1; i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return cpu_pool_sleepers(pool);
}

/* Idle workers stop polling and block once the spin time has passed, and
 * wake for the next job; with spin 0 they block at once; thousands of
 * back-to-back jobs (what a decode step is) lose none. */
static void test_pool_sleeps_when_idle(void **state) {
  for (int spin = 0; spin < 2; spin++) {
    cpu_pool *pool;
    assert_int_equal(cpu_pool_create(3, &pool), 0);
    cpu_pool_set_spin(pool, spin ? 2000 : 0);
    int calls[3] = {0};
    cpu_pool_run(pool, 3, count_calls, calls);
    assert_int_equal(wait_for_sleepers(pool), 2);
    /* asleep: the next job still runs on every worker */
    cpu_pool_run(pool, 3, count_calls, calls);
    for (int i = 0; i < 3; i++) assert_int_equal(calls[i], 2);
    for (int r = 0; r < 20000; r++) cpu_pool_run(pool, r % 3 + 1, count_calls, calls);
    int total = calls[0] + calls[1] + calls[2];
    assert_int_equal(total, 6 + 20000 / 3 * (1 + 2 + 3) + 1 + 2 /* r = 19998, 19999 */);
    assert_int_equal(wait_for_sleepers(pool), 2);
    cpu_pool_destroy(pool);
  }
}

/* The ops below are sized well past CPU_MIN_TASK_WORK * 4 so that 4 threads
 * really split them; that is checked, or the comparison would prove
 * nothing. */
static void check_split(const cpu_ctx *ctx4, int64_t units, double work) {
  assert_int_equal(cpu_task_count(ctx4, units, work), 4);
}

typedef struct op_case {
  kiln_node node;
  const void *src[3];
  size_t dst_bytes;
  int32_t T, pos0;
} op_case;

/* Runs c with 1 and 4 threads in precision prec; the outputs must be equal
 * bit for bit. */
static void compare_threads(const op_case *c, cpu_precision prec, const char *what) {
  cpu_ctx c1, c4;
  kct_ctx_open(&c1, 1, prec);
  kct_ctx_open(&c4, 4, prec);
  void *y1 = kct_alloc(c->dst_bytes), *y4 = kct_alloc(c->dst_bytes);
  kct_run_ok(&c1, &c->node, c->src[0], c->src[1], c->src[2], y1, c->T, c->pos0);
  kct_run_ok(&c4, &c->node, c->src[0], c->src[1], c->src[2], y4, c->T, c->pos0);
  if (memcmp(y1, y4, c->dst_bytes) != 0)
    fail_msg("%s (%s): 1 and 4 threads differ", what, prec ? "f64" : "f32");
  /* and it was not all zeros */
  const float *f = y1;
  double norm = 0;
  for (size_t i = 0; i < c->dst_bytes / 4; i++) norm += fabs((double)f[i]);
  assert_true(norm > 0);
  free(y1);
  free(y4);
  kct_ctx_close(&c4);
  kct_ctx_close(&c1);
}

static void test_ops_bitwise(void **state) {
  cpu_ctx probe;
  kct_ctx_open(&probe, 4, CPU_PRECISION_F32);
  kct_rng rng = kct_rng_new(1200);

  /* MUL_MAT: plain and quantized weights, on the dot kernels (f32 and
   * int16 columns) and the GEMM */
  static const struct {
    kiln_type type;
    int64_t T;
  } mm_cases[] = {{KILN_TYPE_F32, 1},  {KILN_TYPE_Q4_K, 7}, {KILN_TYPE_Q5_0, 1},
                  {KILN_TYPE_Q6_K, 3}, {KILN_TYPE_Q5_K, 2}, {KILN_TYPE_Q5_K, 5}};
  for (size_t q = 0; q < sizeof mm_cases / sizeof mm_cases[0]; q++) {
    kiln_type wt = mm_cases[q].type;
    const int64_t K = 1024, N = 300, T = mm_cases[q].T;
    float *w = kct_alloc((size_t)(K * N) * 4), *x = kct_alloc((size_t)(K * T) * 4);
    float *b = kct_alloc((size_t)N * 4);
    kct_fill(&rng, w, K * N, -1, 1);
    kct_fill(&rng, x, K * T, -1, 1);
    kct_fill(&rng, b, N, -1, 1);
    uint64_t nb;
    void *wq = kct_make_weight(wt, w, K, N, &nb);
    kiln_tensor tw = kct_tensor(0, wt, KILN_ROLE_WEIGHT, K, N, "w");
    kiln_tensor tx = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, K, T, "x");
    kiln_tensor tb = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_WEIGHT, N, 1, "b");
    kiln_tensor ty = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, N, T, "y");
    op_case c = {.node = kct_node(KILN_OP_MUL_MAT, "mm", &tw, &tx, &tb, &ty),
                 .src = {wq, x, b},
                 .dst_bytes = (size_t)(N * T) * 4,
                 .T = (int32_t)T};
    check_split(&probe, N, (double)N * K * T);
    for (int p = 0; p < 2; p++) compare_threads(&c, (cpu_precision)p, "mul_mat");
    free(wq);
    free(b);
    free(x);
    free(w);
  }

  /* RMS_NORM, whole rows and per head */
  for (int per_head = 0; per_head < 2; per_head++) {
    const int64_t W = 4096, L = per_head ? 128 : 4096, T = 64;
    float *x = kct_alloc((size_t)(W * T) * 4), *w = kct_alloc((size_t)L * 4);
    kct_fill(&rng, x, W * T, -1, 1);
    kct_fill(&rng, w, L, 0.5, 1.5);
    kiln_tensor tx = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "x");
    kiln_tensor tw = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_WEIGHT, L, 1, "w");
    kiln_tensor ty = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "y");
    op_case c = {.node = kct_node(KILN_OP_RMS_NORM, "norm", &tx, &tw, NULL, &ty),
                 .src = {x, w, NULL},
                 .dst_bytes = (size_t)(W * T) * 4,
                 .T = (int32_t)T};
    c.node.p.rms_norm.eps = 1e-6f;
    check_split(&probe, T * (W / L), (double)W * T);
    for (int p = 0; p < 2; p++) compare_threads(&c, (cpu_precision)p, "rms_norm");
    free(w);
    free(x);
  }

  /* ROPE */
  {
    const int64_t hd = 128, nh = 32, T = 64, W = hd * nh;
    float *x = kct_alloc((size_t)(W * T) * 4);
    kct_fill(&rng, x, W * T, -1, 1);
    kiln_tensor tx = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "q");
    kiln_tensor ty = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "q_rope");
    op_case c = {.node = kct_node(KILN_OP_ROPE, "rope", &tx, NULL, NULL, &ty),
                 .src = {x, NULL, NULL},
                 .dst_bytes = (size_t)(W * T) * 4,
                 .T = (int32_t)T,
                 .pos0 = 1000};
    c.node.p.rope = (kiln_rope_params){KILN_ROPE_NEOX, 96, (int32_t)hd, (int32_t)nh, 1e6f, {0, 0, 0, 0}};
    check_split(&probe, T, (double)W * T);
    for (int p = 0; p < 2; p++) compare_threads(&c, (cpu_precision)p, "rope");
    free(x);
  }

  /* ATTENTION with GQA */
  {
    const int64_t hd = 128, nh = 16, nkv = 4, T = 16, pos0 = 100, n_ctx = 128;
    float *q = kct_alloc((size_t)(hd * nh * T) * 4);
    float *k = kct_alloc((size_t)(hd * nkv * n_ctx) * 4);
    float *v = kct_alloc((size_t)(hd * nkv * n_ctx) * 4);
    kct_fill(&rng, q, hd * nh * T, -1, 1);
    kct_fill(&rng, k, hd * nkv * n_ctx, -1, 1);
    kct_fill(&rng, v, hd * nkv * n_ctx, -1, 1);
    kiln_tensor tq = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, hd * nh, T, "q");
    kiln_tensor tk = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_STATE, hd * nkv, n_ctx, "k");
    kiln_tensor tv = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_STATE, hd * nkv, n_ctx, "v");
    kiln_tensor ty = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, hd * nh, T, "y");
    op_case c = {.node = kct_node(KILN_OP_ATTENTION, "attn", &tq, &tk, &tv, &ty),
                 .src = {q, k, v},
                 .dst_bytes = (size_t)(hd * nh * T) * 4,
                 .T = (int32_t)T,
                 .pos0 = (int32_t)pos0};
    c.node.p.attention = (kiln_attention_params){(int32_t)nh, (int32_t)nkv, (int32_t)hd,
                                                 1.0f / sqrtf((float)hd)};
    check_split(&probe, T * nh, (double)T * nh * (pos0 + T) * 2 * hd);
    for (int p = 0; p < 2; p++) compare_threads(&c, (cpu_precision)p, "attention");
    free(v);
    free(k);
    free(q);
  }

  /* ATTENTION over an F16 cache: the same bits with 1 and 4 threads (each
   * unit converts a run of tokens' rows once, and the runs follow the
   * thread count), and the same bits as over an f32 cache holding the
   * converted values (the same kernels on the converted rows) */
  {
    const int64_t hd = 128, nh = 16, nkv = 4, T = 16, pos0 = 100, n_ctx = 128, w = hd * nkv;
    const int64_t rb = kiln_type_row_bytes(KILN_TYPE_F16, w);
    float *q = kct_alloc((size_t)(hd * nh * T) * 4);
    float *k = kct_alloc((size_t)(w * n_ctx) * 4), *v = kct_alloc((size_t)(w * n_ctx) * 4);
    uint8_t *k16 = kct_alloc((size_t)(rb * n_ctx)), *v16 = kct_alloc((size_t)(rb * n_ctx));
    kct_fill(&rng, q, hd * nh * T, -1, 1);
    kct_fill(&rng, k, w * n_ctx, -1, 1);
    kct_fill(&rng, v, w * n_ctx, -1, 1);
    for (int64_t j = 0; j < n_ctx; j++) {
      kiln_kv_store_row(KILN_TYPE_F16, k + j * w, k16 + j * rb, w);
      kiln_kv_store_row(KILN_TYPE_F16, v + j * w, v16 + j * rb, w);
      kiln_kv_load_row(KILN_TYPE_F16, k16 + j * rb, k + j * w, w);
      kiln_kv_load_row(KILN_TYPE_F16, v16 + j * rb, v + j * w, w);
    }
    kiln_tensor tq = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, hd * nh, T, "q");
    kiln_tensor tk = kct_tensor(1, KILN_TYPE_F16, KILN_ROLE_STATE, w, n_ctx, "k");
    kiln_tensor tv = kct_tensor(2, KILN_TYPE_F16, KILN_ROLE_STATE, w, n_ctx, "v");
    kiln_tensor tk32 = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_STATE, w, n_ctx, "k");
    kiln_tensor tv32 = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_STATE, w, n_ctx, "v");
    kiln_tensor ty = kct_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, hd * nh, T, "y");
    const kiln_attention_params ap = {(int32_t)nh, (int32_t)nkv, (int32_t)hd, 1.0f / sqrtf((float)hd)};
    op_case c = {.node = kct_node(KILN_OP_ATTENTION, "attn", &tq, &tk, &tv, &ty),
                 .src = {q, k16, v16},
                 .dst_bytes = (size_t)(hd * nh * T) * 4,
                 .T = (int32_t)T,
                 .pos0 = (int32_t)pos0};
    op_case c32 = {.node = kct_node(KILN_OP_ATTENTION, "attn", &tq, &tk32, &tv32, &ty),
                   .src = {q, k, v},
                   .dst_bytes = c.dst_bytes,
                   .T = (int32_t)T,
                   .pos0 = (int32_t)pos0};
    c.node.p.attention = ap;
    c32.node.p.attention = ap;
    for (int p = 0; p < 2; p++) {
      compare_threads(&c, (cpu_precision)p, "attention, f16 cache");
      cpu_ctx cx;
      kct_ctx_open(&cx, 4, (cpu_precision)p);
      float *y16 = kct_alloc(c.dst_bytes), *y32 = kct_alloc(c.dst_bytes);
      kct_run_ok(&cx, &c.node, q, k16, v16, y16, c.T, c.pos0);
      kct_run_ok(&cx, &c32.node, q, k, v, y32, c.T, c.pos0);
      if (memcmp(y16, y32, c.dst_bytes) != 0)
        fail_msg("attention (%s): an f16 cache and an f32 cache of its values differ", p ? "f64" : "f32");
      free(y16);
      free(y32);
      kct_ctx_close(&cx);
    }
    free(v16);
    free(k16);
    free(v);
    free(k);
    free(q);
  }

  /* SWIGLU and ADD */
  for (int op = 0; op < 2; op++) {
    const int64_t W = 18944, T = 8;
    float *a = kct_alloc((size_t)(W * T) * 4), *b = kct_alloc((size_t)(W * T) * 4);
    kct_fill(&rng, a, W * T, -8, 8);
    kct_fill(&rng, b, W * T, -2, 2);
    kiln_tensor ta = kct_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "a");
    kiln_tensor tb = kct_tensor(1, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "b");
    kiln_tensor ty = kct_tensor(2, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, W, T, "y");
    op_case c = {.node = kct_node(op ? KILN_OP_ADD : KILN_OP_SWIGLU, "ew", &ta, &tb, NULL, &ty),
                 .src = {a, b, NULL},
                 .dst_bytes = (size_t)(W * T) * 4,
                 .T = (int32_t)T};
    check_split(&probe, W * T, (double)W * T);
    for (int p = 0; p < 2; p++) compare_threads(&c, (cpu_precision)p, op ? "add" : "swiglu");
    free(b);
    free(a);
  }
  kct_ctx_close(&probe);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool),
      cmocka_unit_test(test_pool_sleeps_when_idle),
      cmocka_unit_test(test_ops_bitwise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
