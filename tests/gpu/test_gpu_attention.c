/* Decode attention (a step of one token: the split-KV pair attention_split
 * + attention_merge) on every CUDA backend through the plugin's ops table,
 * against the cpu backend at precision = f64:
 *   - head_dim 128 with 28/4 heads (Qwen2.5-7B) at n_kv = 1, 2, 4095,
 *     4096, 4097 and 32000 with the automatic split count, and head_dim 80
 *     with 6/3 heads (not a multiple of 32) up to 4097;
 *   - attention_splits = 16 at n_kv = 63, 64, 65, 127, 128, 129: a split
 *     takes whole tiles of 32 keys, so these are one key either side of
 *     the lengths where the 2nd and the 4th split are full and the next
 *     one begins, the later splits empty; attention_splits = 1 (no split)
 *     and 256 (most of them empty);
 *   - raw q.k of 115200 (scaled 14400, exact in f32) over 6 and 300 keys;
 *   - a query column of capacity 4, so cuda-batched and cuda-cc120 also
 *     prepare their prefill kernel and must still take the split pair for
 *     one token.
 * Each must be finite with relative L2 and |norm ratio - 1| <= 1e-6; the
 * largest error relative to the largest reference value is printed too.
 * Cache positions past n_kv hold NaN (a read of one shows). And the split
 * count must matter: n_kv = 4097 with 1 and 16 splits must differ in some
 * bit (else decode is not running the split kernel); the merge in the
 * split kernel (attention_merge = fused) and in its own (kernel) both
 * within the tolerance, the fused one the same bits over three runs on
 * one backend (its tickets reset); the tensor-core split kernel
 * (decode_attention = mma) on F16 and BF16 caches up to 32000 keys, within
 * TOL_MMA and not bit for bit the CUDA-core kernel's. Every case is
 * printed; each test asserts at its end, so one device run reports all. */
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

#include "gpu_common.h"
#include "kiln/kv_cache.h"
#include "testutil.h"

#define TOL 1e-6
/* The tensor-core kernel (attention_mma) on F16 and BF16 caches: on the
 * H100 (2026-12-07) 1.1e-6 at 4097 keys and 1.4e-6 at 32000 against f64,
 * with every tile's P V summed onto O inside the tensor cores, whose f32
 * accumulation does not round to nearest; each tile's sums now start from
 * zero and join O in f32 (under 2e-7 in the host emulation), not yet run
 * on a device. */
#define TOL_MMA 2e-6

/* One decode attention node: q [hd * nh, cap], caches [hd * nkv, n_kv + 3]
 * (the last 3 positions NaN), the pass's token at position n_kv - 1. */
typedef struct att_case {
  kg_op op;
  float *q, *k, *v;
  unsigned char *kt, *vt; /* the caches in another KV type (case_retype), or NULL */
  int n_kv;
} att_case;

static void case_make(att_case *c, int hd, int nh, int nkv, int n_kv, int cap, bool huge) {
  memset(c, 0, sizeof *c);
  const int n_ctx = n_kv + 3;
  kg_op *op = &c->op;
  kg_attention_op(op, hd, nh, nkv, cap, n_ctx, huge ? 0.125f : (float)(1.0 / sqrt((double)hd)));
  c->q = kg_alloc(op->t[0].nbytes);
  c->k = kg_alloc(op->t[1].nbytes);
  c->v = kg_alloc(op->t[2].nbytes);
  kg_rng r = kg_rng_new((uint64_t)n_kv * 1000 + (uint64_t)hd + (huge ? 7 : 0));
  const int64_t w = (int64_t)hd * nkv;
  if (huge) { /* test_gpu_ops's attention_huge: raw q.k 115200 - 2.5 j */
    for (int t = 0; t < cap; t++)
      for (int h = 0; h < nh; h++)
        for (int d = 0; d < hd; d++) c->q[(t * nh + h) * hd + d] = (h + t) % 2 ? -40.0f : 40.0f;
    for (int j = 0; j < n_ctx; j++)
      for (int g = 0; g < nkv; g++)
        for (int d = 0; d < hd; d++) {
          const int jj = g ? n_ctx - 1 - j : j; /* KV head 1 reverses the scores' order */
          c->k[j * w + g * hd + d] = 45.0f - (d < 32 ? (float)jj / 512.0f : 0.0f);
        }
  } else {
    kg_fill(&r, c->q, (int64_t)hd * nh * cap, -2, 2);
    kg_fill(&r, c->k, w * n_ctx, -2, 2);
  }
  kg_fill(&r, c->v, w * n_ctx, -1, 1);
  for (int64_t i = w * n_kv; i < w * n_ctx; i++) c->k[i] = c->v[i] = NAN;
  op->data[0] = c->q;
  op->data[1] = c->k;
  op->data[2] = c->v;
  c->n_kv = n_kv;
}

static void case_free(att_case *c) {
  free(c->q);
  free(c->k);
  free(c->v);
  free(c->kt);
  free(c->vt);
}

/* The case's caches in KV type `type`, as store_kv writes them
 * (kiln/kv_cache.h), the positions past n_kv all-ones bytes (NaN in
 * every type): the cpu reference reads the same stored values. */
static void case_retype(att_case *c, kiln_type type) {
  kg_op *op = &c->op;
  const int64_t w = op->t[1].ne[0], n_ctx = op->t[1].ne[1], rb = kiln_type_row_bytes(type, w);
  unsigned char **dst[2] = {&c->kt, &c->vt};
  const float *src[2] = {c->k, c->v};
  for (int i = 0; i < 2; i++) {
    *dst[i] = kg_alloc((size_t)(rb * n_ctx));
    memset(*dst[i], 0xff, (size_t)(rb * n_ctx));
    for (int j = 0; j < c->n_kv; j++) kiln_kv_store_row(type, src[i] + j * w, *dst[i] + j * rb, w);
    op->t[1 + i] = kg_tensor(1 + i, type, KILN_ROLE_STATE, w, n_ctx, 0, i ? "cache_v" : "cache_k");
    op->data[1 + i] = *dst[i];
  }
}

/* Runs c on cpu (f64) and on every CUDA backend, each column within tol;
 * out[b] (when not NULL) receives backend b's column. Returns the
 * failures. */
static int run_case_tol(kiln_runtime *rt, att_case *c, const char *mode, float *const *out,
                        double tol) {
  kg_op *op = &c->op;
  const int64_t w = op->node.dst->ne[0];
  float *ref = kg_alloc(op->node.dst->nbytes), *got = kg_alloc(op->node.dst->nbytes);
  kiln_backend *cpu = kg_backend_open(rt, "cpu");
  KT_ASSERT_OK(kg_run_op(cpu, op, 1, c->n_kv - 1, ref));
  kiln_backend_close(cpu);
  const kiln_attention_params *p = &op->node.p.attention;
  int bad = 0;
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    kiln_backend *be = kg_backend_open(rt, kg_backends[b]);
    kiln_status st = kg_run_op(be, op, 1, c->n_kv - 1, got);
    kiln_backend_close(be);
    if (st) {
      printf("  FAIL %-12s hd %d %d/%d n_kv %d (%s): %s\n", kg_backends[b], (int)p->head_dim,
             (int)p->n_head, (int)p->n_head_kv, c->n_kv, mode, kiln_status_message(st));
      kiln_status_free(st);
      bad++;
      continue;
    }
    const kg_metrics m = kg_compare(got, ref, w);
    const bool ok = kg_close(&m, tol);
    printf("  %-12s hd %-3d %2d/%-2d n_kv %-5d %-10s rel L2 %.3e, |ratio-1| %.3e, max rel %.3e%s%s\n",
           kg_backends[b], (int)p->head_dim, (int)p->n_head, (int)p->n_head_kv, c->n_kv, mode,
           m.rel_l2, fabs(m.norm_ratio - 1.0), kg_max_rel(got, ref, w), m.finite ? "" : ", NOT FINITE",
           ok ? "" : "  FAIL");
    if (!ok) bad++;
    if (out && out[b]) memcpy(out[b], got, (size_t)w * sizeof(float));
  }
  free(ref);
  free(got);
  return bad;
}

/* The same within TOL. */
static int run_case(kiln_runtime *rt, att_case *c, const char *mode, float *const *out) {
  return run_case_tol(rt, c, mode, out, TOL);
}

/* A runtime whose CUDA backends use `splits` (NULL: auto) and merge their
 * splits as `merge` says (fused: in the split kernel where it fits). */
static kiln_runtime *runtime_splits_merge(const char *splits, const char *merge) {
  kiln_config_override ov[2 * KG_N_BACKENDS];
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    ov[2 * b] = (kiln_config_override){kg_backends[b], "attention_splits", splits ? splits : "0", "test"};
    ov[2 * b + 1] = (kiln_config_override){kg_backends[b], "attention_merge", merge, "test"};
  }
  return kg_runtime_mode("f32", true, ov, 2 * KG_N_BACKENDS);
}

static kiln_runtime *runtime_splits(const char *splits) { return runtime_splits_merge(splits, "kernel"); }

static int shape_cases(kiln_runtime *rt, int hd, int nh, int nkv, const int *ns, size_t n_ns,
                       const char *mode) {
  int bad = 0;
  for (size_t i = 0; i < n_ns; i++) {
    att_case c;
    case_make(&c, hd, nh, nkv, ns[i], 1, false);
    bad += run_case(rt, &c, mode, NULL);
    case_free(&c);
  }
  return bad;
}

/* The automatic split count, Qwen2.5-7B's heads and an odd shape. */
static void test_decode_attention_auto(void **state) {
  kiln_runtime *rt = runtime_splits(NULL);
  static const int big[] = {1, 2, 4095, 4096, 4097, 32000};
  static const int odd[] = {1, 2, 4095, 4096, 4097};
  int bad = shape_cases(rt, 128, 28, 4, big, sizeof big / sizeof big[0], "auto");
  bad += shape_cases(rt, 80, 6, 3, odd, sizeof odd / sizeof odd[0], "auto");
  /* capacity 4: the batched backends prepare their prefill kernel too */
  att_case c;
  case_make(&c, 128, 28, 4, 777, 4, false);
  bad += run_case(rt, &c, "auto cap 4", NULL);
  case_free(&c);
  kiln_runtime_free(rt);
  assert_int_equal(bad, 0);
}

/* Forced split counts: the boundaries of a chunk, no split, the most. */
static void test_decode_attention_splits(void **state) {
  static const int edges[] = {63, 64, 65, 127, 128, 129};
  static const int few[] = {1, 129, 4097};
  int bad = 0;
  kiln_runtime *rt = runtime_splits("16");
  bad += shape_cases(rt, 128, 28, 4, edges, sizeof edges / sizeof edges[0], "splits 16");
  bad += shape_cases(rt, 80, 6, 3, edges, sizeof edges / sizeof edges[0], "splits 16");
  kiln_runtime_free(rt);
  rt = runtime_splits("1");
  bad += shape_cases(rt, 128, 28, 4, few, sizeof few / sizeof few[0], "splits 1");
  kiln_runtime_free(rt);
  rt = runtime_splits("256");
  bad += shape_cases(rt, 128, 28, 4, few, sizeof few / sizeof few[0], "splits 256");
  bad += shape_cases(rt, 80, 6, 3, few, sizeof few / sizeof few[0], "splits 256");
  kiln_runtime_free(rt);
  assert_int_equal(bad, 0);
}

/* Raw q.k of 115200: finite, equal to cpu's. */
static void test_decode_attention_huge(void **state) {
  static const char *const modes[] = {NULL, "16"};
  static const int ns[] = {6, 300};
  int bad = 0;
  for (int mi = 0; mi < 2; mi++) {
    kiln_runtime *rt = runtime_splits(modes[mi]);
    for (int i = 0; i < 2; i++) {
      att_case c;
      case_make(&c, 64, 4, 2, ns[i], 1, true);
      bad += run_case(rt, &c, mi ? "huge, 16" : "huge, auto", NULL);
      case_free(&c);
    }
    kiln_runtime_free(rt);
  }
  assert_int_equal(bad, 0);
}

/* The split count changes the order of the sums, so a result bit for bit
 * the same under 1 and 16 splits means decode did not run the split
 * kernel. */
static void test_split_count_matters(void **state) {
  float *one[KG_N_BACKENDS], *sixteen[KG_N_BACKENDS];
  const int64_t w = 128 * 28;
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    one[b] = kg_alloc((size_t)w * sizeof(float));
    sixteen[b] = kg_alloc((size_t)w * sizeof(float));
  }
  int bad = 0;
  att_case c;
  case_make(&c, 128, 28, 4, 4097, 1, false);
  kiln_runtime *rt = runtime_splits("1");
  bad += run_case(rt, &c, "splits 1", one);
  kiln_runtime_free(rt);
  rt = runtime_splits("16");
  bad += run_case(rt, &c, "splits 16", sixteen);
  kiln_runtime_free(rt);
  case_free(&c);
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    const bool same = memcmp(one[b], sixteen[b], (size_t)w * sizeof(float)) == 0;
    printf("  %-12s n_kv 4097, 1 and 16 splits: %s\n", kg_backends[b],
           same ? "bit for bit the same: NOT THE SPLIT KERNEL  FAIL" : "different roundings, as expected");
    bad += same;
    free(one[b]);
    free(sixteen[b]);
  }
  assert_int_equal(bad, 0);
}

/* The merge in the split kernel (attention_merge = fused: 7 heads a KV
 * head at 16 splits is 112 records, within its 256) against the merge
 * kernel (kernel), each within TOL of cpu; and the fused one run three
 * times on one open backend: its tickets must come back to 0 after every
 * launch, so each run gives the first's column bit for bit (a ticket left
 * counting would leave y unmerged: 0xEE or NaN). */
static void test_fused_merge(void **state) {
  static const int ns[] = {1, 63, 129, 4097};
  int bad = 0;
  kiln_runtime *rt = runtime_splits_merge("16", "kernel");
  bad += shape_cases(rt, 128, 28, 4, ns, sizeof ns / sizeof ns[0], "merge kernel");
  kiln_runtime_free(rt);
  rt = runtime_splits_merge("16", "fused");
  bad += shape_cases(rt, 128, 28, 4, ns, sizeof ns / sizeof ns[0], "merge fused");
  att_case c;
  case_make(&c, 128, 28, 4, 129, 1, false);
  const int64_t w = c.op.node.dst->ne[0];
  float *first = kg_alloc((size_t)c.op.node.dst->nbytes), *again = kg_alloc((size_t)c.op.node.dst->nbytes);
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    kiln_backend *be = kg_backend_open(rt, kg_backends[b]);
    int same = 0;
    kiln_status st = kg_run_op(be, &c.op, 1, c.n_kv - 1, first);
    for (int r = 0; !st && r < 2; r++) {
      st = kg_run_op(be, &c.op, 1, c.n_kv - 1, again);
      if (!st) same += memcmp(first, again, (size_t)w * sizeof(float)) == 0;
    }
    kiln_backend_close(be);
    printf("  %-12s n_kv 129, merge fused, 3 runs on one backend: %s\n", kg_backends[b],
           st ? kiln_status_message(st) : same == 2 ? "the same bits each time" : "DIFFERENT  FAIL");
    bad += st || same != 2;
    kiln_status_free(st);
  }
  free(first);
  free(again);
  case_free(&c);
  kiln_runtime_free(rt);
  assert_int_equal(bad, 0);
}

/* The tensor-core split kernel (decode_attention = mma: attention_mma,
 * then attention_merge) on F16 and BF16 caches: Qwen2.5-7B's heads up to
 * 32000 keys, a full group of 16 query heads at head_dim 64, raw q.k of
 * 115200; each within TOL of cpu at f64 over the same stored values. And
 * it must be what runs: at 4097 keys its column differs in some bit from
 * the CUDA-core split kernel's (decode_attention = split). */
static void test_mma_attention(void **state) {
  static const kiln_type types[] = {KILN_TYPE_F16, KILN_TYPE_BF16};
  static const int big[] = {1, 2, 17, 4097, 32000}, g16[] = {1, 300};
  int bad = 0;
  kiln_config_override ov[2 * KG_N_BACKENDS];
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    ov[2 * b] = (kiln_config_override){kg_backends[b], "decode_attention", "mma", "test"};
    ov[2 * b + 1] = (kiln_config_override){kg_backends[b], "attention_merge", "kernel", "test"};
  }
  kiln_runtime *rt = kg_runtime_mode("f32", true, ov, 2 * KG_N_BACKENDS);
  for (size_t ti = 0; ti < 2; ti++) {
    char mode[32];
    snprintf(mode, sizeof mode, "mma %s", kiln_type_name(types[ti]));
    att_case c;
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
      case_make(&c, 128, 28, 4, big[i], 1, false);
      case_retype(&c, types[ti]);
      bad += run_case_tol(rt, &c, mode, NULL, TOL_MMA);
      case_free(&c);
    }
    for (size_t i = 0; i < sizeof g16 / sizeof g16[0]; i++) {
      case_make(&c, 64, 16, 1, g16[i], 1, false);
      case_retype(&c, types[ti]);
      bad += run_case_tol(rt, &c, mode, NULL, TOL_MMA);
      case_free(&c);
    }
    case_make(&c, 64, 4, 2, 300, 1, true);
    case_retype(&c, types[ti]);
    bad += run_case_tol(rt, &c, mode, NULL, TOL_MMA);
    case_free(&c);
  }
  kiln_runtime_free(rt);
  /* mma against split at 4097 keys, F16 */
  float *col[2][KG_N_BACKENDS];
  const int64_t w = 128 * 28;
  for (int how = 0; how < 2; how++) {
    for (int b = 0; b < KG_N_BACKENDS; b++) {
      ov[2 * b] = (kiln_config_override){kg_backends[b], "decode_attention", how ? "split" : "mma", "test"};
      ov[2 * b + 1] = (kiln_config_override){kg_backends[b], "attention_merge", "kernel", "test"};
      col[how][b] = kg_alloc((size_t)w * sizeof(float));
    }
    rt = kg_runtime_mode("f32", true, ov, 2 * KG_N_BACKENDS);
    att_case c;
    case_make(&c, 128, 28, 4, 4097, 1, false);
    case_retype(&c, KILN_TYPE_F16);
    bad += run_case_tol(rt, &c, how ? "split F16" : "mma F16", col[how], how ? TOL : TOL_MMA);
    case_free(&c);
    kiln_runtime_free(rt);
  }
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    const bool same = memcmp(col[0][b], col[1][b], (size_t)w * sizeof(float)) == 0;
    printf("  %-12s n_kv 4097 F16, mma and split: %s\n", kg_backends[b],
           same ? "bit for bit the same: NOT THE MMA KERNEL  FAIL" : "different roundings, as expected");
    bad += same;
    free(col[0][b]);
    free(col[1][b]);
  }
  assert_int_equal(bad, 0);
}

int main(void) {
  int gate = kg_gate("test_gpu_attention");
  if (gate) return gate;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode_attention_auto),
      cmocka_unit_test(test_decode_attention_splits),
      cmocka_unit_test(test_decode_attention_huge),
      cmocka_unit_test(test_split_count_matters),
      cmocka_unit_test(test_fused_merge),
      cmocka_unit_test(test_mma_attention),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
