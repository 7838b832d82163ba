/* KV cache types ([kv_cache] type, issue 17) on the cpu backend:
 *  - the Q8_0 quantizer of kiln/kv_cache.h against llama.cpp's
 *    quantize_row_q8_0_ref transcribed here (block_q8_0: f16 d, int8
 *    qs[32]), byte for byte, and the block layout (d little-endian first);
 *  - F16 and BF16 rows round-trip every finite value of their type exactly;
 *  - a session's first-layer caches (whose K and V do not depend on any
 *    attention) equal the f32-KV session's converted with kiln_kv_store_row,
 *    bit for bit, read back through kiln_plan_read;
 *  - logits of a synthetic llama (head_dim 32: Q8_0 blocks are whole heads)
 *    and of stories260K (head_dim 8: F16, BF16) with each KV type, at f32
 *    and f64 accumulation, against the f32-KV f64 reference, per position:
 *    relative L2 and |norm ratio - 1| within the per-type thresholds below
 *    (measured on this tree, see the README's table); cosine alone never;
 *  - state bytes and the q8_0 refusal of a head_dim of 8, naming the layer.
 */
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

#include "kiln/half.h"
#include "kiln/kiln.h"
#include "kiln/kv_cache.h"
#include "kiln/synth.h"
#include "testutil.h"

KT_TMPDIR_FIXTURE("kvcache")

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static float rng_uniform(float lo, float hi) {
  return lo + (hi - lo) * (float)((double)(rng_next() >> 11) / 9007199254740992.0);
}

/* ---- the Q8_0 quantizer ------------------------------------------------ */

/* llama.cpp's ggml/src/ggml-quants.c, quantize_row_q8_0_ref, transcribed
 * (GGML_FP32_TO_FP16 is round-to-nearest-even; the int8 store of
 * roundf(x0) is defined for every input this test gives it). */
#define QK8_0 32
typedef struct {
  uint16_t d;
  int8_t qs[QK8_0];
} block_q8_0;
#define MAX(a, b) ((a) > (b) ? (a) : (b))
static void quantize_row_q8_0_ref(const float *x, block_q8_0 *y, int64_t k) {
  const int nb = (int)(k / QK8_0);
  for (int i = 0; i < nb; i++) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; j++) {
      const float v = x[i * QK8_0 + j];
      amax = MAX(amax, fabsf(v));
    }
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = kiln_f32_to_f16(d);
    for (int j = 0; j < QK8_0; ++j) {
      const float x0 = x[i * QK8_0 + j] * id;
      y[i].qs[j] = (int8_t)roundf(x0);
    }
  }
}

static void check_q8_0_blocks(const float *x, int nb, const char *what) {
  uint8_t got[34 * 8];
  block_q8_0 want[8];
  assert_true(nb <= 8);
  kiln_kv_store_row(KILN_TYPE_Q8_0, x, got, (int64_t)nb * 32);
  quantize_row_q8_0_ref(x, want, (int64_t)nb * 32);
  for (int b = 0; b < nb; b++) {
    const uint8_t *g = got + 34 * b;
    if ((uint16_t)(g[0] | g[1] << 8) != want[b].d)
      fail_msg("%s block %d: d 0x%04x, reference 0x%04x", what, b, g[0] | g[1] << 8, want[b].d);
    for (int j = 0; j < 32; j++)
      if ((int8_t)g[2 + j] != want[b].qs[j])
        fail_msg("%s block %d: q[%d] %d, reference %d", what, b, j, (int8_t)g[2 + j], want[b].qs[j]);
    /* and back: x' = q * d within d/2 of x */
    float back[32];
    kiln_kv_load_row(KILN_TYPE_Q8_0, g, back, 32);
    const float d = kiln_f16_to_f32(want[b].d);
    for (int j = 0; j < 32; j++) {
      assert_true(back[j] == (float)want[b].qs[j] * d);
      /* half a step of the f32 d the quants were made with, plus the f16
       * rounding of d (2^-11 relative, 2^-25 absolute at most) times |q| */
      const double bound = 0.5 * (double)d * 1.0001 + 127.0 * fmax((double)d / 2048.0, 0x1p-25);
      if (fabs((double)back[j] - (double)x[32 * b + j]) > bound)
        fail_msg("%s block %d: x[%d] %.9g came back %.9g (d %.9g)", what, b, j, (double)x[32 * b + j],
                 (double)back[j], (double)d);
    }
  }
}

static void test_q8_0_matches_reference(void **state) {
  (void)state;
  float x[256];
  for (int round = 0; round < 200; round++) {
    const float scale = powf(10.0f, rng_uniform(-6.0f, 4.0f));
    for (int i = 0; i < 256; i++) x[i] = rng_uniform(-scale, scale);
    check_q8_0_blocks(x, 8, "random");
  }
  memset(x, 0, sizeof x); /* d = 0, id = 0: all zero */
  check_q8_0_blocks(x, 1, "zeros");
  for (int i = 0; i < 32; i++) x[i] = (float)(i - 16) * 0.5f; /* ties at x * id = k + 0.5 */
  x[31] = 127.0f * 0.5f;
  check_q8_0_blocks(x, 1, "ties");
  for (int i = 0; i < 32; i++) x[i] = i == 5 ? -3.0e4f : 1.0f; /* one large negative */
  check_q8_0_blocks(x, 1, "amax negative");
  /* layout: 34 bytes a block, d little-endian then the quants */
  for (int i = 0; i < 32; i++) x[i] = (float)i;
  uint8_t blk[34];
  kiln_kv_store_row(KILN_TYPE_Q8_0, x, blk, 32);
  assert_int_equal(kiln_type_row_bytes(KILN_TYPE_Q8_0, 32), 34);
  assert_int_equal(blk[0] | blk[1] << 8, kiln_f32_to_f16(31.0f / 127.0f));
  assert_int_equal((int8_t)blk[2 + 31], 127);
  assert_int_equal((int8_t)blk[2 + 0], 0);
}

/* Every finite f16 (and bf16) value survives f32 -> cache -> f32. */
static void test_half_rows_round_trip(void **state) {
  (void)state;
  float *x = malloc(65536 * sizeof(float)), *y = malloc(65536 * sizeof(float));
  uint8_t *raw = malloc(2 * 65536);
  for (int t = 0; t < 2; t++) {
    const kiln_type type = t ? KILN_TYPE_BF16 : KILN_TYPE_F16;
    int64_t n = 0;
    for (uint32_t h = 0; h < 65536; h++) {
      const float f = t ? kiln_bf16_to_f32((uint16_t)h) : kiln_f16_to_f32((uint16_t)h);
      if (isfinite(f)) x[n++] = f;
    }
    kiln_kv_store_row(type, x, raw, n);
    kiln_kv_load_row(type, raw, y, n);
    for (int64_t i = 0; i < n; i++)
      if (kiln_f32_to_bits(x[i]) != kiln_f32_to_bits(y[i]))
        fail_msg("%s: %.9g (0x%08x) came back %.9g", kiln_type_name(type), (double)x[i],
                 kiln_f32_to_bits(x[i]), (double)y[i]);
    printf("%s: %lld finite values round-trip exactly\n", kiln_type_name(type), (long long)n);
  }
  /* round to nearest even at the halfway point between two f16 values */
  const float mid = kiln_f16_to_f32(0x3c00) + 0.5f * (kiln_f16_to_f32(0x3c01) - kiln_f16_to_f32(0x3c00));
  kiln_kv_store_row(KILN_TYPE_F16, &mid, raw, 1);
  assert_int_equal(raw[0] | raw[1] << 8, 0x3c00);
  free(x);
  free(y);
  free(raw);
}

/* ---- sessions ------------------------------------------------------------ */

static const char *const type_names[] = {"f32", "f16", "bf16", "q8_0"};
static const kiln_type types[] = {KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16, KILN_TYPE_Q8_0};

/* Worst rel L2 and |norm ratio - 1| of a position's logits allowed, per KV
 * type, at f64 and at f32 accumulation (index 0, 1). Measured on this
 * tree (the README's table has the numbers) and set about 4x above them;
 * f32 KV at f64 is the reference itself: 0. */
static const double max_rel[4][2] = {{0, 2e-6}, {2e-3, 2e-3}, {1.5e-2, 1.5e-2}, {5e-2, 5e-2}};
static const double max_ratio[4][2] = {{0, 1e-6}, {1.5e-3, 1.5e-3}, {1e-2, 1e-2}, {6e-3, 6e-3}};

static kiln_runtime *runtime(void) {
  kiln_runtime *rt;
  KT_ASSERT_OK(kiln_runtime_open(&(kiln_runtime_options){.use_environment = true}, &rt));
  return rt;
}

static kiln_status open_session(kiln_runtime *rt, kiln_model *m, const char *kv, const char *precision,
                                int32_t batch, kiln_session **out) {
  kiln_config_override ov[] = {{"cpu", "precision", precision, "test"},
                               {"kv_cache", "type", kv, "test"}};
  kiln_session_options so = {.backend = "cpu", .n_ctx = 96, .batch = batch, .fallback_cpu = 0,
                             .overrides = ov, .n_overrides = 2};
  return kiln_session_open(rt, m, &so, out);
}

/* All n positions' logits: a prefill of n - 8 tokens in micro-batches of
 * `batch`, then 8 single-token decode steps. */
static float *run_logits(kiln_runtime *rt, kiln_model *m, const char *kv, const char *precision,
                         const int32_t *ids, int32_t n) {
  const uint32_t V = kiln_model_hparams(m)->n_vocab;
  kiln_session *s;
  KT_ASSERT_OK(open_session(rt, m, kv, precision, 16, &s));
  float *all = malloc((size_t)n * V * sizeof(float));
  KT_ASSERT_OK(kiln_session_eval(s, ids, n - 8, NULL, all));
  for (int32_t i = n - 8; i < n; i++) KT_ASSERT_OK(kiln_session_eval(s, ids + i, 1, all + (size_t)i * V, NULL));
  kiln_session_free(s);
  return all;
}

static void logits_against_reference(const char *model, kiln_model *m, int n_types) {
  kiln_runtime *rt = runtime();
  const uint32_t V = kiln_model_hparams(m)->n_vocab;
  enum { N = 40 };
  int32_t ids[N];
  for (int i = 0; i < N; i++) ids[i] = (int32_t)(1 + (rng_next() % (V - 1)));
  float *ref = run_logits(rt, m, "f32", "f64", ids, N);
  int bad = 0;
  for (int t = 0; t < n_types; t++)
    for (int p = 0; p < 2; p++) {
      if (t == 0 && p == 0) continue;
      float *got = run_logits(rt, m, type_names[t], p ? "f32" : "f64", ids, N);
      double worst_rel = 0, worst_ratio = 0;
      int at = -1;
      for (int i = 0; i < N; i++) {
        double num = 0, den = 0, nt = 0;
        for (uint32_t v = 0; v < V; v++) {
          const double a = got[(size_t)i * V + v], r = ref[(size_t)i * V + v];
          num += (a - r) * (a - r);
          den += r * r;
          nt += a * a;
        }
        const double rel = sqrt(num / den), ratio = fabs(sqrt(nt / den) - 1.0);
        if (!(rel <= max_rel[t][p]) || !(ratio <= max_ratio[t][p])) bad++;
        if (!(rel <= worst_rel)) {
          worst_rel = rel;
          at = i;
        }
        if (!(ratio <= worst_ratio)) worst_ratio = ratio;
      }
      printf("%-12s kv %-4s acc %s: worst rel L2 %.3e (position %d), worst |ratio-1| %.3e  "
             "(limits %.0e, %.0e)%s\n",
             model, type_names[t], p ? "f32" : "f64", worst_rel, at, worst_ratio, max_rel[t][p],
             max_ratio[t][p], worst_rel <= max_rel[t][p] && worst_ratio <= max_ratio[t][p] ? "" : "  FAIL");
      /* a KV type below f32 must leave a trace: the comparison can fail */
      if (t > 0 && worst_rel == 0) {
        printf("  %s KV gave logits identical to f32 KV: the cache type did not reach attention\n",
               type_names[t]);
        bad++;
      }
      free(got);
    }
  free(ref);
  kiln_runtime_free(rt);
  assert_int_equal(bad, 0);
}

/* A llama whose heads are whole Q8_0 blocks: head_dim 32. */
static kiln_model *synth_model(void) {
  char path[4200];
  snprintf(path, sizeof path, "%s/kv32.gguf", dir);
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_LLAMA);
  o.n_layer = 3;
  o.n_embd = 128;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.head_dim = 32;
  o.n_ff = 256;
  o.n_ctx = 256;
  o.n_vocab = 300;
  o.tied_output = false;
  o.embd_ms = 0.5; /* activations of order 1, as real K and V are */
  o.seed = 17;
  KT_ASSERT_OK(kiln_synth_write(&o, path));
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  return m;
}

static void test_logits_synth(void **state) {
  (void)state;
  kiln_model *m = synth_model();
  logits_against_reference("synth hd32", m, 4);
  kiln_model_free(m);
}

static void test_logits_stories(void **state) {
  (void)state;
  if (!kt_have_model("stories260K.gguf")) skip();
  char *path = kt_model_path("stories260K.gguf");
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  free(path);
  /* head_dim 8: F32, F16 and BF16 (Q8_0 is refused: test_q8_0_refusal_names_the_key) */
  kiln_runtime *rt = runtime();
  kiln_session *s = NULL;
  KT_ASSERT_ERR(open_session(rt, m, "q8_0", "f32", 16, &s), KILN_STATUS_INVALID_ARGUMENT,
                "test: [kv_cache] type = q8_0 needs head_dim to be a multiple of 32 (its blocks run "
                "along head_dim)");
  kiln_runtime_free(rt);
  logits_against_reference("stories260K", m, 3);
  kiln_model_free(m);
}

/* q8_0 on a model whose head_dim (8) its 32-value blocks do not divide:
 * the session refuses it naming the configuration key, its value and the
 * file and line that set it, and the model with its head_dim; not the
 * graph's "layer 0: ... head_dim is 8", which says nothing of where the
 * type came from. */
static void test_q8_0_refusal_names_the_key(void **state) {
  (void)state;
  char model[4200], ini[4200];
  snprintf(model, sizeof model, "%s/hd8.gguf", dir);
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_LLAMA);
  o.n_embd = 32;
  o.n_head = 4;
  o.n_head_kv = 4;
  o.head_dim = 8;
  KT_ASSERT_OK(kiln_synth_write(&o, model));
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(model, &m));
  snprintf(ini, sizeof ini, "%s/q8.ini", dir);
  static const char text[] = "[kv_cache]\n; a block type on a small head\ntype = q8_0\n";
  assert_true(kt_write_file(ini, text, sizeof text - 1));
  kiln_runtime *rt;
  KT_ASSERT_OK(kiln_runtime_open(&(kiln_runtime_options){.config_path = ini, .use_environment = true}, &rt));
  kiln_session *s = NULL;
  char want[9000];
  snprintf(want, sizeof want,
           "%s:3: [kv_cache] type = q8_0 needs head_dim to be a multiple of 32 (its blocks run along "
           "head_dim); %s has head_dim 8: use f32, f16 or bf16",
           ini, model);
  KT_ASSERT_ERR(kiln_session_open(rt, m, &(kiln_session_options){.backend = "cpu", .n_ctx = 16, .fallback_cpu = -1},
                                  &s),
                KILN_STATUS_INVALID_ARGUMENT, want);
  assert_null(s);
  kiln_runtime_free(rt);
  kiln_model_free(m);
}

/* Layer 0's K and V come from the embeddings alone, so the typed session's
 * first-layer caches must be exactly the f32-KV session's converted by
 * kiln_kv_store_row (and read back through kiln_plan_read's conversion);
 * the state bytes are the caches' real bytes. */
static void test_first_layer_caches(void **state) {
  (void)state;
  kiln_model *m = synth_model();
  kiln_runtime *rt = runtime();
  const kiln_hparams *hp = kiln_model_hparams(m);
  const int64_t W = (int64_t)hp->head_dim * hp->n_head_kv;
  enum { N = 20 };
  int32_t ids[N];
  for (int i = 0; i < N; i++) ids[i] = 1 + i * 7;
  float *base[2] = {malloc(N * W * sizeof(float)), malloc(N * W * sizeof(float))};
  float *got = malloc(N * W * sizeof(float)), *want = malloc(W * sizeof(float));
  uint8_t *raw = malloc((size_t)kiln_type_row_bytes(KILN_TYPE_F32, W));
  uint64_t bytes[4];
  for (int t = 0; t < 4; t++) {
    kiln_session *s;
    KT_ASSERT_OK(open_session(rt, m, type_names[t], "f32", 8, &s));
    KT_ASSERT_OK(kiln_session_eval(s, ids, N, NULL, NULL));
    bytes[t] = kiln_session_state_bytes(s);
    const kiln_graph *g = kiln_plan_graph(kiln_session_plan(s));
    for (int kv = 0; kv < 2; kv++) {
      const char *name = kv ? "blk.0.cache_v" : "blk.0.cache_k";
      const kiln_tensor *c = NULL;
      for (uint32_t i = 0; i < kiln_graph_n_tensors(g); i++)
        if (!strcmp(kiln_graph_tensor(g, i)->name, name)) c = kiln_graph_tensor(g, i);
      assert_non_null(c);
      assert_int_equal(c->type, types[t]);
      KT_ASSERT_OK(kiln_plan_read(kiln_session_plan(s), c, 0, N, t ? got : base[kv]));
      if (!t) continue;
      int64_t diff = 0;
      for (int pos = 0; pos < N; pos++) {
        kiln_kv_store_row(types[t], base[kv] + pos * W, raw, W);
        kiln_kv_load_row(types[t], raw, want, W);
        for (int64_t i = 0; i < W; i++)
          if (kiln_f32_to_bits(got[pos * W + i]) != kiln_f32_to_bits(want[i])) diff++;
      }
      printf("%s %s: %lld of %lld values differ from the f32 cache converted\n", type_names[t], name,
             (long long)diff, (long long)(N * W));
      assert_int_equal(diff, 0);
    }
    kiln_session_free(s);
  }
  /* 3 layers x 2 caches x 96 positions x W values */
  const uint64_t per = 3u * 2u * 96u;
  assert_int_equal(bytes[0], per * (uint64_t)W * 4u);
  assert_int_equal(bytes[1], per * (uint64_t)W * 2u);
  assert_int_equal(bytes[2], per * (uint64_t)W * 2u);
  assert_int_equal(bytes[3], per * (uint64_t)(W / 32) * 34u);
  free(base[0]);
  free(base[1]);
  free(got);
  free(want);
  free(raw);
  kiln_runtime_free(rt);
  kiln_model_free(m);
}

/* [kv_cache] type is declared with its four values; anything else is an
 * error naming the file, the line and the key. */
static void test_config_key(void **state) {
  (void)state;
  char path[4200];
  snprintf(path, sizeof path, "%s/kv.ini", dir);
  static const char bad[] = "[kv_cache]\n; a comment\ntype = q4_0\n";
  assert_true(kt_write_file(path, bad, sizeof bad - 1));
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_config_load_file(c, path));
  kiln_status st = kiln_config_validate(c, false);
  assert_non_null(st);
  const char *msg = kiln_status_message(st);
  printf("%s\n", msg);
  char want[4300];
  snprintf(want, sizeof want, "%s:3: [kv_cache] type", path);
  assert_non_null(strstr(msg, want));
  assert_non_null(strstr(msg, "q4_0"));
  kiln_status_free(st);
  kiln_config_free(c);
  for (int t = 0; t < 4; t++) {
    char good[64];
    const int n = snprintf(good, sizeof good, "[kv_cache]\ntype = %s\n", type_names[t]);
    assert_true(kt_write_file(path, good, (size_t)n));
    KT_ASSERT_OK(kiln_config_new(&c));
    KT_ASSERT_OK(kiln_config_load_file(c, path));
    KT_ASSERT_OK(kiln_config_validate(c, false));
    assert_string_equal(kiln_config_get_str(kiln_config_section_get(c, "kv_cache"), "type"), type_names[t]);
    kiln_type ty;
    assert_int_equal(kiln_kv_type_parse(type_names[t], &ty), 0);
    assert_int_equal(ty, types[t]);
    kiln_config_free(c);
  }
  KT_ASSERT_OK(kiln_config_new(&c)); /* the default */
  assert_string_equal(kiln_config_get_str(kiln_config_section_get(c, "kv_cache"), "type"), "f32");
  kiln_config_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_q8_0_matches_reference),
      cmocka_unit_test(test_half_rows_round_trip),
      cmocka_unit_test(test_config_key),
      cmocka_unit_test(test_first_layer_caches),
      cmocka_unit_test(test_logits_synth),
      cmocka_unit_test(test_logits_stories),
      cmocka_unit_test(test_q8_0_refusal_names_the_key),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
