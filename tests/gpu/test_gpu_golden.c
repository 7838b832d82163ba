/* stories260K.gguf on every CUDA backend with fallback = error, against
 * the cpu backend with f64 accumulation:
 *   - the golden prompts' greedy token ids equal the cpu backend's (and
 *     llama.cpp's, from tests/golden/stories260K.golden);
 *   - per-position logits of prompt + continuation: relative L2 <= 1e-4
 *     and norm ratio within 1e-4 of 1 (cosine reported);
 *   - prefill in micro-batches of every size 1..37 gives the logits of one
 *     batch, within the same tolerance;
 *   - after prefill the K and V caches of cuda-serial, cuda-batched,
 *     cuda-cc120 and cpu agree at every position, position 0 included.
 * Every case is measured and printed before the suite asserts, so one run
 * on the device reports everything. */
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
#include "kiln/golden.h"
#include "testutil.h"

#define TOL 1e-4
#define N_CTX 160
#define BATCH 64
#define MB_TOKENS 60 /* micro-batch and KV tests: one batch of <= BATCH */

typedef struct fixture {
  kiln_runtime *rt;
  kiln_model *m;
  kiln_golden *g;
  uint32_t n_vocab;
} fixture;

static int teardown(void **state);

static int setup(void **state) {
  *state = NULL;
  const char *srcdir = getenv("KILN_SRCDIR");
  if (!srcdir || !*srcdir) {
    fprintf(stderr, "setup: KILN_SRCDIR is not set (run the suite through `make check`, or set "
                    "it to the source tree)\n");
    return -1;
  }
  fixture *f = calloc(1, sizeof *f);
  if (!f) return -1;
  char *path = kt_model_path("stories260K.gguf");
  char golden[4096];
  snprintf(golden, sizeof golden, "%s/tests/golden/stories260K.golden", srcdir);
  kiln_config_override fb[] = {{"backend", "fallback", "error", "test"}};
  f->rt = kg_runtime(fb, 1);
  kiln_status st = kiln_model_open(path, &f->m);
  if (!st) st = kiln_golden_load(golden, &f->g);
  free(path);
  if (st) {
    fprintf(stderr, "setup: %s\n", kiln_status_message(st));
    kiln_status_free(st);
    *state = f;
    teardown(state);
    return -1;
  }
  f->n_vocab = kiln_model_hparams(f->m)->n_vocab;
  *state = f;
  return 0;
}

/* Also after a failed setup (cmocka runs it either way): frees what there is. */
static int teardown(void **state) {
  fixture *f = *state;
  *state = NULL;
  if (!f) return 0;
  kiln_golden_free(f->g);
  kiln_model_free(f->m);
  kiln_runtime_free(f->rt);
  free(f);
  return 0;
}

static kiln_session *open_session(fixture *f, const char *backend, int32_t batch) {
  kiln_session *s = NULL;
  kiln_session_options so = {
      .backend = backend, .n_ctx = N_CTX, .batch = batch, .fallback_cpu = 0 /* error */};
  KT_ASSERT_OK(kiln_session_open(f->rt, f->m, &so, &s));
  assert_int_equal(kiln_plan_n_fallbacks(kiln_session_plan(s)), 0);
  return s;
}

/* prompt_ids + the golden continuation: the sequence every test feeds. */
static int32_t *case_sequence(const kiln_golden_case *c, int32_t *out_n) {
  int32_t n = (int32_t)(c->n_prompt_ids + c->n_ids);
  int32_t *ids = kg_alloc((size_t)n * sizeof *ids);
  memcpy(ids, c->prompt_ids, c->n_prompt_ids * sizeof *ids);
  memcpy(ids + c->n_prompt_ids, c->ids, c->n_ids * sizeof *ids);
  *out_n = n;
  return ids;
}

static void test_golden_ids_and_logits(void **state) {
  fixture *f = *state;
  int failures = 0;
  kiln_session *cpu = open_session(f, "cpu", BATCH);
  for (size_t ci = 0; ci < f->g->n_cases; ci++) {
    const kiln_golden_case *c = &f->g->cases[ci];
    int32_t n;
    int32_t *seq = case_sequence(c, &n);
    float *ref = kg_alloc((size_t)n * f->n_vocab * sizeof(float));
    float *got = kg_alloc((size_t)n * f->n_vocab * sizeof(float));
    kiln_session_reset(cpu);
    KT_ASSERT_OK(kiln_session_eval(cpu, seq, n, NULL, ref));
    kiln_golden_result cres;
    KT_ASSERT_OK(kiln_golden_run(cpu, c, &cres));
    for (int b = 0; b < KG_N_BACKENDS; b++) {
      if (!kg_backend_on(b)) continue;
      kiln_session *s = open_session(f, kg_backends[b], BATCH);
      KT_ASSERT_OK(kiln_session_eval(s, seq, n, NULL, got));
      kg_worst w = kg_compare_cols(got, ref, f->n_vocab, n, TOL);
      kiln_golden_result res;
      KT_ASSERT_OK(kiln_golden_run(s, c, &res));
      bool ids_equal = res.n_ids == cres.n_ids &&
                       memcmp(res.ids, cres.ids, res.n_ids * sizeof *res.ids) == 0;
      printf("[%s] %-12s %d positions: max rel L2 %.3e (pos %lld), max |ratio-1| %.3e (pos %lld), "
             "min cosine %.9f; greedy ids %s cpu's (%zu ids, golden %s, first mismatch %ld)\n",
             c->name, kg_backends[b], n, w.rel_l2, (long long)w.at_rel, w.ratio_dev,
             (long long)w.at_ratio, w.min_cosine, ids_equal ? "equal" : "DIFFER from",
             res.n_ids, res.pass ? "pass" : "FAIL", res.first_mismatch);
      if (w.n_bad || !w.all_finite) {
        printf("  FAIL: %lld positions outside rel L2 / ratio %.0e\n", (long long)w.n_bad, TOL);
        failures++;
      }
      if (!ids_equal || !res.pass) failures++;
      kiln_golden_result_clear(&res);
      kiln_session_free(s);
    }
    kiln_golden_result_clear(&cres);
    free(got);
    free(ref);
    free(seq);
  }
  kiln_session_free(cpu);
  assert_int_equal(failures, 0);
}

/* Feeds seq[0..n) in chunks of `mb` and returns all logits. */
static void eval_chunks(kiln_session *s, const int32_t *seq, int32_t n, int32_t mb,
                        uint32_t n_vocab, float *out) {
  kiln_session_reset(s);
  for (int32_t done = 0; done < n;) {
    int32_t m = n - done < mb ? n - done : mb;
    KT_ASSERT_OK(kiln_session_eval(s, seq + done, m, NULL, out + (size_t)done * n_vocab));
    done += m;
  }
}

static void test_micro_batches(void **state) {
  fixture *f = *state;
  int failures = 0;
  int32_t n_all;
  int32_t *seq = case_sequence(&f->g->cases[0], &n_all);
  const int32_t n = MB_TOKENS < n_all ? MB_TOKENS : n_all;
  float *one = kg_alloc((size_t)n * f->n_vocab * sizeof(float));
  float *got = kg_alloc((size_t)n * f->n_vocab * sizeof(float));
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    if (!kg_backend_on(b)) continue;
    kiln_session *s = open_session(f, kg_backends[b], BATCH);
    eval_chunks(s, seq, n, n, f->n_vocab, one); /* one batch of n tokens */
    double worst_rel = 0, worst_dev = 0;
    int worst_mb = 0, bad_sizes = 0;
    for (int32_t mb = 1; mb <= 37; mb++) {
      eval_chunks(s, seq, n, mb, f->n_vocab, got);
      kg_worst w = kg_compare_cols(got, one, f->n_vocab, n, TOL);
      if (w.rel_l2 > worst_rel) {
        worst_rel = w.rel_l2;
        worst_mb = mb;
      }
      if (w.ratio_dev > worst_dev) worst_dev = w.ratio_dev;
      if (w.n_bad || !w.all_finite) {
        printf("  FAIL %s micro-batch %d: %lld positions off (worst rel L2 %.3e at %lld)\n",
               kg_backends[b], mb, (long long)w.n_bad, w.rel_l2, (long long)w.at_rel);
        bad_sizes++;
      }
    }
    printf("%-12s micro-batches 1..37 of %d tokens vs one batch: max rel L2 %.3e (size %d), max "
           "|ratio-1| %.3e, %d sizes failing\n",
           kg_backends[b], n, worst_rel, worst_mb, worst_dev, bad_sizes);
    failures += bad_sizes;
    kiln_session_free(s);
  }
  free(got);
  free(one);
  free(seq);
  assert_int_equal(failures, 0);
}

/* cache_k / cache_v of every layer, positions 0..n-1, after one prefill. */
static float *read_caches(kiln_session *s, const kiln_hparams *hp, int32_t n, int64_t *out_w) {
  const int64_t w = (int64_t)hp->head_dim * hp->n_head_kv;
  float *all = kg_alloc((size_t)hp->n_layer * 2 * (size_t)n * (size_t)w * sizeof(float));
  for (uint32_t l = 0; l < hp->n_layer; l++)
    for (int kv = 0; kv < 2; kv++) {
      char name[64];
      snprintf(name, sizeof name, "blk.%u.cache_%c", l, kv ? 'v' : 'k');
      KT_ASSERT_OK(kiln_plan_read(kiln_session_plan(s), kg_graph_tensor(s, name), 0, n,
                                  all + ((size_t)l * 2 + (size_t)kv) * (size_t)n * (size_t)w));
    }
  *out_w = w;
  return all;
}

static void test_kv_caches(void **state) {
  fixture *f = *state;
  const kiln_hparams *hp = kiln_model_hparams(f->m);
  int failures = 0;
  int32_t n_all;
  int32_t *seq = case_sequence(&f->g->cases[1], &n_all);
  const int32_t n = MB_TOKENS < n_all ? MB_TOKENS : n_all;
  const char *names[1 + KG_N_BACKENDS] = {"cpu", kg_backends[0], kg_backends[1], kg_backends[2]};
  float *caches[1 + KG_N_BACKENDS];
  int64_t w = 0;
  for (int b = 0; b < 1 + KG_N_BACKENDS; b++) {
    caches[b] = NULL;
    if (b > 0 && !kg_backend_on(b - 1)) continue;
    kiln_session *s = open_session(f, names[b], BATCH);
    KT_ASSERT_OK(kiln_session_eval(s, seq, n, NULL, NULL)); /* one prefill step */
    caches[b] = read_caches(s, hp, n, &w);
    kiln_session_free(s);
  }
  /* Each GPU backend against cpu, and cuda-serial against cuda-batched. */
  const int pairs[][2] = {{1, 0}, {2, 0}, {3, 0}, {1, 2}};
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    const float *a = caches[pairs[p][0]], *r = caches[pairs[p][1]];
    if (!a || !r) continue; /* a backend KILN_TEST_BACKENDS left out */
    double worst = 0, worst_dev = 0, pos0_rel = 0;
    int64_t bad = 0, worst_at = -1;
    for (uint32_t l = 0; l < hp->n_layer; l++)
      for (int kv = 0; kv < 2; kv++)
        for (int32_t pos = 0; pos < n; pos++) {
          size_t off = (((size_t)l * 2 + (size_t)kv) * (size_t)n + (size_t)pos) * (size_t)w;
          kg_metrics m = kg_compare(a + off, r + off, w);
          /* an all-zero column (a position never written) must fail */
          double norm = 0;
          for (int64_t i = 0; i < w; i++) norm += (double)r[off + i] * r[off + i];
          if (!kg_close(&m, TOL) || norm == 0) bad++;
          if (pos == 0 && m.rel_l2 > pos0_rel) pos0_rel = m.rel_l2;
          if (m.rel_l2 > worst) {
            worst = m.rel_l2;
            worst_at = pos;
          }
          if (fabs(m.norm_ratio - 1) > worst_dev) worst_dev = fabs(m.norm_ratio - 1);
        }
    printf("K/V caches %-12s vs %-12s: %u layers x 2 x %d positions, max rel L2 %.3e (pos "
           "%lld), max |ratio-1| %.3e, position 0 max rel L2 %.3e, %lld columns off\n",
           names[pairs[p][0]], names[pairs[p][1]], hp->n_layer, n, worst, (long long)worst_at,
           worst_dev, pos0_rel, (long long)bad);
    if (bad) failures++;
  }
  for (int b = 0; b < 1 + KG_N_BACKENDS; b++) free(caches[b]);
  free(seq);
  assert_int_equal(failures, 0);
}

int main(void) {
  int gate = kg_gate("test_gpu_golden");
  if (gate) return gate;
  if (!kt_have_model("stories260K.gguf")) return kt_require_gpu() ? 1 : 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_ids_and_logits),
      cmocka_unit_test(test_micro_batches),
      cmocka_unit_test(test_kv_caches),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
