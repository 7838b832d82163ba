/* Tensor parallelism emulated on the cpu backend (kiln/tp.h): a model's
 * graph split Megatron-style into N shards, each shard computing its slice,
 * the partial sums of attn_output and ffn_down added at the all-reduce
 * points and the vocabulary slices of the logits gathered, compared with
 * the unsharded run per op and per token position: relative L2 error
 * <= 1e-6 and norm ratio within 1e-6 of 1 (never cosine alone), at every
 * node of the graph and on the logits.
 *
 * Models: synthesized llama (GQA 2:1, Q8_0 matrices, N = 2 and 4), qwen2
 * (Q/K/V biases, tied output, F16 matrices, N = 2), qwen3 (per-head q/k
 * norms, Q4_0 matrices, N = 2 and 4), and stories260K from
 * $KILN_MODELS_DIR at each N its shapes divide. Both sides accumulate in
 * f64 (precision = f64), so what is compared is the decomposition, not f32
 * rounding. Controls show the comparison fails: a shard's halves swapped,
 * and a 1+4e-6 scale that cosine cannot see. Refusals: heads, vocabulary
 * and quant blocks that do not divide, each error naming the tensor and the
 * numbers. */
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

#include "kiln/synth.h"
#include "kiln/tp.h"
#include "runtime_fixture.h"
#include "testutil.h"

#define MAX_REL_L2 1e-6
#define MAX_NORM_DEV 1e-6
#define N_TOKENS 11
#define BATCH 4 /* prefill micro-batches of 4, 4 and 3 tokens: KV reads across steps */

static char *dir;
static kiln_runtime *rt;
static kiln_config_override f64 = {"cpu", "precision", "f64", "test"};

static int setup(void **state) {
  (void)state;
  return kt_runtime_setup("tp", &dir, &rt);
}

static int teardown(void **state) {
  (void)state;
  return kt_runtime_teardown(dir, rt);
}

/* Every node's output over all positions, [width, N_TOKENS] per node. */
typedef struct capture {
  uint32_t n_nodes;
  int64_t *width;
  float **out;
  char (*name)[KILN_NAME_MAX];
} capture;

static kiln_status on_node(const kiln_node *nd, const float *data, int32_t n, int32_t pos0, void *user) {
  capture *c = user;
  uint32_t i = (uint32_t)nd->id;
  if (i >= c->n_nodes || pos0 + n > N_TOKENS) return kiln_status_new(KILN_STATUS_INTERNAL, "capture %u", i);
  if (!c->out[i]) {
    c->width[i] = nd->dst->ne[0];
    c->out[i] = calloc((size_t)c->width[i] * N_TOKENS, sizeof(float));
    snprintf(c->name[i], KILN_NAME_MAX, "%s", nd->name);
    if (!c->out[i]) return kiln_status_new(KILN_STATUS_NO_MEMORY, "capture");
  }
  memcpy(c->out[i] + (size_t)pos0 * (size_t)c->width[i], data, (size_t)n * (size_t)c->width[i] * sizeof(float));
  return NULL;
}

static void capture_init(capture *c, uint32_t n_nodes) {
  c->n_nodes = n_nodes;
  c->width = calloc(n_nodes, sizeof *c->width);
  c->out = calloc(n_nodes, sizeof *c->out);
  c->name = calloc(n_nodes, sizeof *c->name);
  assert_true(c->width && c->out && c->name);
}

static void capture_free(capture *c) {
  for (uint32_t i = 0; i < c->n_nodes; i++) free(c->out[i]);
  free(c->out);
  free(c->width);
  free(c->name);
}

/* Worst relative L2 error and norm deviation over the positions of one
 * [w, N_TOKENS] output; *ok false when a position breaks either bound. */
typedef struct worst {
  double rel, dev;
  bool ok;
} worst;

static worst compare(const float *test, const float *ref, int64_t w) {
  worst r = {0.0, 0.0, true};
  for (int t = 0; t < N_TOKENS; t++) {
    double d2 = 0, a2 = 0, b2 = 0;
    for (int64_t k = 0; k < w; k++) {
      double a = test[(size_t)t * (size_t)w + (size_t)k], b = ref[(size_t)t * (size_t)w + (size_t)k];
      if (!isfinite(a)) r.ok = false;
      d2 += (a - b) * (a - b);
      a2 += a * a;
      b2 += b * b;
    }
    double rel = b2 > 0 ? sqrt(d2 / b2) : sqrt(d2), dev = b2 > 0 ? fabs(sqrt(a2 / b2) - 1.0) : sqrt(a2);
    if (!(rel <= MAX_REL_L2) || !(dev <= MAX_NORM_DEV)) r.ok = false;
    if (rel > r.rel) r.rel = rel;
    if (dev > r.dev) r.dev = dev;
  }
  return r;
}

static void make_ids(const kiln_model *m, int32_t *ids) {
  uint32_t v = kiln_model_hparams(m)->n_vocab;
  for (int i = 0; i < N_TOKENS; i++) ids[i] = (int32_t)((1u + 37u * (uint32_t)i * (uint32_t)i + 11u * (uint32_t)i) % v);
}

/* The unsharded reference: every node and the logits. */
static void run_reference(kiln_model *m, const int32_t *ids, capture *c, float *logits) {
  kiln_session *s;
  kiln_session_options so = {"cpu", N_TOKENS + 1, BATCH, 0, 0.0f, &f64, 1};
  KT_ASSERT_OK(kiln_session_open(rt, m, &so, &s));
  capture_init(c, kiln_graph_n_nodes(kiln_plan_graph(kiln_session_plan(s))));
  kiln_plan_set_observer(kiln_session_plan(s), on_node, c);
  KT_ASSERT_OK(kiln_session_eval(s, ids, N_TOKENS, NULL, logits));
  kiln_session_free(s);
}

static kiln_tp_emulator_options emu_options(int32_t n) {
  return (kiln_tp_emulator_options){n, "cpu", N_TOKENS + 1, BATCH, &f64, 1};
}

/* The model sharded n ways against the unsharded run, every node and the
 * logits; returns the capture of the sharded run for the controls. */
static void check_sharded(kiln_model *m, int32_t n, capture *ref, const float *ref_logits, capture *out_emu) {
  const kiln_hparams *hp = kiln_model_hparams(m);
  int32_t ids[N_TOKENS];
  make_ids(m, ids);
  kiln_tp_emulator *e;
  kiln_tp_emulator_options o = emu_options(n);
  KT_ASSERT_OK(kiln_tp_emulator_open(rt, m, &o, &e));
  const kiln_tp_plan *p = kiln_tp_emulator_plan(e);
  assert_int_equal(kiln_tp_plan_shards(p), n);
  assert_int_equal(kiln_tp_plan_n_all_reduce(p), n > 1 ? 2 * hp->n_layer : 0);
  if (n == 2) kiln_tp_plan_print(p, stdout);
  capture c;
  capture_init(&c, ref->n_nodes);
  kiln_tp_emulator_set_observer(e, on_node, &c);
  float *logits = calloc((size_t)hp->n_vocab * N_TOKENS, sizeof(float));
  assert_non_null(logits);
  KT_ASSERT_OK(kiln_tp_emulator_eval(e, ids, N_TOKENS, logits));

  /* the same run without the observer: collectives only, ranges of nodes */
  kiln_tp_emulator *e2;
  KT_ASSERT_OK(kiln_tp_emulator_open(rt, m, &o, &e2));
  float *logits2 = calloc((size_t)hp->n_vocab * N_TOKENS, sizeof(float));
  assert_non_null(logits2);
  KT_ASSERT_OK(kiln_tp_emulator_eval(e2, ids, 5, logits2));
  KT_ASSERT_OK(kiln_tp_emulator_eval(e2, ids + 5, N_TOKENS - 5, logits2 + (size_t)5 * hp->n_vocab));
  kiln_tp_emulator_free(e2);

  worst all = {0.0, 0.0, true};
  uint32_t compared = 0, n_partial = 0, n_sharded = 0;
  for (uint32_t i = 0; i < ref->n_nodes; i++) {
    assert_non_null(ref->out[i]);
    assert_non_null(c.out[i]);
    assert_string_equal(c.name[i], ref->name[i]);
    assert_int_equal(c.width[i], ref->width[i]);
    worst w = compare(c.out[i], ref->out[i], ref->width[i]);
    if (!w.ok)
      fail_msg("%s sharded %d ways: node %s: relative L2 %.3g, norm deviation %.3g (limits %g, %g)", hp->arch_name,
               n, ref->name[i], w.rel, w.dev, MAX_REL_L2, MAX_NORM_DEV);
    if (w.rel > all.rel) all.rel = w.rel;
    if (w.dev > all.dev) all.dev = w.dev;
    compared++;
    n_partial += kiln_tp_plan_node_layout(p, i) == KILN_TP_PARTIAL;
    n_sharded += kiln_tp_plan_node_layout(p, i) == KILN_TP_SHARDED;
  }
  worst wl = compare(logits, ref_logits, hp->n_vocab);
  worst wl2 = compare(logits2, ref_logits, hp->n_vocab);
  printf("%s, %d shards: %u nodes x %d positions (%u sharded, %u partial sums) and the gathered logits: worst "
         "relative L2 %.3g / %.3g (logits, %.3g without the observer), norm deviation %.3g / %.3g\n",
         hp->arch_name, n, compared, N_TOKENS, n_sharded, n_partial, all.rel, wl.rel, wl2.rel, all.dev, wl.dev);
  if (!wl.ok || !wl2.ok)
    fail_msg("%s sharded %d ways: logits relative L2 %.3g / %.3g, norm deviation %.3g / %.3g", hp->arch_name, n,
             wl.rel, wl2.rel, wl.dev, wl2.dev);
  if (n > 1) assert_true(n_partial == 2 * hp->n_layer && n_sharded > 0);
  free(logits);
  free(logits2);
  kiln_tp_emulator_free(e);
  if (out_emu) *out_emu = c;
  else capture_free(&c);
}

/* The check fails when it should: block order swapped in one sharded
 * output, and a scale of 1+4e-6 (cosine 1.000000) on one replicated one. */
static void check_controls(capture *ref, capture *emu) {
  uint32_t q = UINT32_MAX, norm = UINT32_MAX;
  for (uint32_t i = 0; i < ref->n_nodes; i++) {
    if (!strcmp(ref->name[i], "blk.0.attn_q")) q = i;
    if (!strcmp(ref->name[i], "blk.1.attn_norm")) norm = i;
  }
  assert_true(q != UINT32_MAX && norm != UINT32_MAX);
  int64_t w = emu->width[q], h = w / 2;
  float *sw = malloc((size_t)w * N_TOKENS * sizeof(float));
  assert_non_null(sw);
  for (int t = 0; t < N_TOKENS; t++)
    for (int64_t k = 0; k < w; k++) sw[(size_t)t * (size_t)w + (size_t)k] = emu->out[q][(size_t)t * (size_t)w + (size_t)((k + h) % w)];
  worst a = compare(sw, ref->out[q], w);
  assert_false(a.ok);
  assert_true(a.rel > 0.1);
  free(sw);

  w = emu->width[norm];
  float *sc = malloc((size_t)w * N_TOKENS * sizeof(float));
  assert_non_null(sc);
  double dot = 0, a2 = 0, b2 = 0;
  for (size_t k = 0; k < (size_t)w * N_TOKENS; k++) {
    sc[k] = (float)(emu->out[norm][k] * (1.0 + 4e-6));
    dot += (double)sc[k] * ref->out[norm][k];
    a2 += (double)sc[k] * sc[k];
    b2 += (double)ref->out[norm][k] * ref->out[norm][k];
  }
  worst b = compare(sc, ref->out[norm], w);
  printf("controls: swapped shard blocks relative L2 %.3g; scaled 1+4e-6: norm deviation %.3g, cosine %.9f\n", a.rel,
         b.dev, dot / sqrt(a2 * b2));
  assert_false(b.ok);
  assert_true(dot / sqrt(a2 * b2) > 0.9999999);
  free(sc);
}

static kiln_model *synth(kiln_synth_options *o, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
  KT_ASSERT_OK(kiln_synth_write(o, path));
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  return m;
}

static void run_model(kiln_model *m, const int32_t *shards, size_t n_shards, bool controls) {
  int32_t ids[N_TOKENS];
  make_ids(m, ids);
  capture ref;
  float *ref_logits = calloc((size_t)kiln_model_hparams(m)->n_vocab * N_TOKENS, sizeof(float));
  assert_non_null(ref_logits);
  run_reference(m, ids, &ref, ref_logits);
  for (size_t i = 0; i < n_shards; i++) {
    capture emu;
    check_sharded(m, shards[i], &ref, ref_logits, controls && i == 0 ? &emu : NULL);
    if (controls && i == 0) {
      check_controls(&ref, &emu);
      capture_free(&emu);
    }
  }
  free(ref_logits);
  capture_free(&ref);
}

/* llama: 8 query heads on 4 KV heads, FFN 256, Q8_0 matrices (a shard's
 * row-parallel slice at N = 4: 32 and 64 values, whole Q8_0 blocks). */
static void test_llama_sharded(void **state) {
  (void)state;
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_LLAMA);
  o.n_embd = 128;
  o.n_head = 8;
  o.n_head_kv = 4;
  o.n_ff = 256;
  o.matrix_type = KILN_TYPE_Q8_0;
  o.seed = 3;
  kiln_model *m = synth(&o, "llama");
  int32_t shards[] = {1, 2, 4};
  run_model(m, shards, 3, true);
  kiln_model_free(m);
}

/* qwen2: Q/K/V biases split with their rows; the tied output splits
 * token_embd by vocabulary rows while the lookup reads it whole. */
static void test_qwen2_sharded(void **state) {
  (void)state;
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_QWEN2);
  o.n_embd = 128;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.n_ff = 192;
  o.matrix_type = KILN_TYPE_F16;
  o.tied_output = true;
  o.seed = 5;
  kiln_model *m = synth(&o, "qwen2");
  assert_true(kiln_model_hparams(m)->tied_output && kiln_model_hparams(m)->qkv_bias);
  int32_t shards[] = {2};
  run_model(m, shards, 1, false);
  kiln_model_free(m);
}

/* qwen3: the per-head q_norm and k_norm run inside each shard's heads. */
static void test_qwen3_sharded(void **state) {
  (void)state;
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_QWEN3);
  o.n_embd = 256;
  o.n_head = 8;
  o.n_head_kv = 4;
  o.head_dim = 32;
  o.n_ff = 512;
  o.matrix_type = KILN_TYPE_Q4_0;
  o.tied_output = false;
  o.seed = 9;
  kiln_model *m = synth(&o, "qwen3");
  assert_true(kiln_model_hparams(m)->qk_norm);
  int32_t shards[] = {2, 4};
  run_model(m, shards, 2, false);
  kiln_model_free(m);
}

/* stories260K, a real trained model, at each N its shapes divide. */
static void test_stories_sharded(void **state) {
  (void)state;
  char *path = kt_model_path("stories260K.gguf");
  if (!path) skip();
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  free(path);
  const kiln_hparams *hp = kiln_model_hparams(m);
  int32_t shards[2];
  size_t n = 0;
  for (int32_t k = 2; k <= 4; k *= 2) {
    if (hp->n_head % k || hp->n_head_kv % k || hp->n_ff % k || hp->n_vocab % k) {
      printf("stories260K: %u heads, %u KV heads, FFN %u, vocabulary %u do not divide by %d\n", hp->n_head,
             hp->n_head_kv, hp->n_ff, hp->n_vocab, k);
      continue;
    }
    shards[n++] = k;
  }
  assert_true(n > 0); /* 8 heads on 4 KV heads, FFN 172, vocabulary 512: N = 2 and 4 */
  run_model(m, shards, n, false);
  kiln_model_free(m);
}

static void expect_refused(kiln_synth_options *o, const char *name, int32_t n, const char *needle) {
  kiln_model *m = synth(o, name);
  kiln_tp_emulator *e = NULL;
  kiln_tp_emulator_options eo = emu_options(n);
  kiln_status st = kiln_tp_emulator_open(rt, m, &eo, &e);
  assert_non_null(st);
  printf("refused: %s\n", kiln_status_message(st));
  assert_int_equal(kiln_status_code_of(st), KILN_STATUS_UNSUPPORTED);
  if (!strstr(kiln_status_message(st), needle)) fail_msg("\"%s\" lacks \"%s\"", kiln_status_message(st), needle);
  kiln_status_free(st);
  assert_null(e);
  kiln_model_free(m);
}

/* Splits that do not divide are refused, naming the tensor and the numbers. */
static void test_non_dividing_refused(void **state) {
  (void)state;
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_QWEN2); /* 4 heads on 2 KV heads */
  expect_refused(&o, "kv", 4, "blk.0.attn_k.weight: 2 KV heads (attention.head_count_kv) do not divide among 4 shards");
  kiln_synth_defaults(&o, KILN_ARCH_LLAMA);
  o.n_head = 6;
  o.n_head_kv = 6;
  o.n_embd = 96;
  expect_refused(&o, "heads", 4, "blk.0.attn_q.weight: 6 query heads (attention.head_count) do not divide among 4 shards");
  kiln_synth_defaults(&o, KILN_ARCH_LLAMA);
  o.n_head_kv = 4;
  o.n_ff = 130;
  expect_refused(&o, "ffn", 4, "blk.0.ffn_gate.weight: 130 FFN columns (feed_forward_length) do not divide among 4 shards");
  kiln_synth_defaults(&o, KILN_ARCH_LLAMA);
  o.n_head_kv = 4;
  o.n_vocab = 250;
  expect_refused(&o, "vocab", 4, "output.weight: 250 vocabulary rows do not divide among 4 shards");
  kiln_synth_defaults(&o, KILN_ARCH_LLAMA);
  o.matrix_type = KILN_TYPE_Q8_0;
  o.n_head_kv = 4;
  o.n_embd = 128;
  o.n_ff = 192;
  expect_refused(&o, "block", 4,
                 "blk.0.ffn_down.weight: a shard's 48 of 192 values per row are not a whole number of Q8_0 blocks (32)");
  /* qwen35's recurrent layers have no split */
  kiln_synth_defaults(&o, KILN_ARCH_QWEN35);
  expect_refused(&o, "qwen35", 2, "recurrent (Gated DeltaNet) layers have no split");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_sharded),  cmocka_unit_test(test_qwen2_sharded),
      cmocka_unit_test(test_qwen3_sharded),  cmocka_unit_test(test_stories_sharded),
      cmocka_unit_test(test_non_dividing_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
