/* kiln-cpu.so through the plugin ABI, as the executor sees it: loaded by
 * core's loader from $KILN_PLUGIN_PATH, configured from a [cpu] section,
 * buffers allocated, mapped, uploaded and downloaded with bounds checks,
 * and a small graph (embedding -> norm -> projection) run and checked
 * against the float64 reference. */
#include "config.h"

#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln/backend.h"
#include "kiln/config.h"
#include "kiln/dequant.h"
#include "kiln/plugin.h"
#include "testutil.h"

#include "test_cpu_common.h"

static char *plugin_file(void) {
  const char *dir = getenv("KILN_PLUGIN_PATH");
  if (!dir || !*dir) return NULL;
  size_t n = strlen(dir) + 32;
  char *p = malloc(n);
  snprintf(p, n, "%s/kiln-cpu.so", dir);
  return p;
}

#define NEED_PLUGIN(var)                                                      \
  char *var = plugin_file();                                                  \
  if (!var) {                                                                 \
    fprintf(stderr, "skip: KILN_PLUGIN_PATH is not set (run through make check)\n"); \
    skip();                                                                   \
  }

/* The shared object exports the entry table and nothing else of ours. */
static void test_exports(void **state) {
  NEED_PLUGIN(path);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) fail_msg("dlopen %s: %s", path, dlerror());
  const kiln_backend_ops *e = dlsym(h, KILN_PLUGIN_ENTRY_SYMBOL);
  assert_non_null(e);
  assert_int_equal(e->abi_major, KILN_PLUGIN_ABI_MAJOR);
  assert_int_equal(e->abi_minor, KILN_PLUGIN_ABI_MINOR);
  assert_int_equal(e->struct_size, sizeof(kiln_backend_ops));
  assert_string_equal(e->name, "cpu");
  static const char *const internal[] = {"cpu_node_run", "cpu_node_validate", "cpu_pool_create",
                                         "cpu_op_mul_mat", "cpu_backend_entry"};
  for (size_t i = 0; i < sizeof internal / sizeof internal[0]; i++)
    if (dlsym(h, internal[i])) fail_msg("%s exports %s", path, internal[i]);
  dlclose(h);
  free(path);
}

static void test_entry_and_config_keys(void **state) {
  NEED_PLUGIN(path);
  kiln_plugin *p;
  KT_ASSERT_OK(kiln_plugin_load(path, &p));
  const kiln_backend_ops *e = kiln_plugin_entry(p);
  assert_int_equal(e->n_config_keys, 6);
  const kiln_config_key *threads = NULL, *precision = NULL, *spin = NULL, *simd = NULL,
                        *matvec = NULL, *guard = NULL;
  for (uint32_t i = 0; i < e->n_config_keys; i++) {
    if (!strcmp(e->config_keys[i].name, "threads")) threads = &e->config_keys[i];
    if (!strcmp(e->config_keys[i].name, "precision")) precision = &e->config_keys[i];
    if (!strcmp(e->config_keys[i].name, "spin_us")) spin = &e->config_keys[i];
    if (!strcmp(e->config_keys[i].name, "simd")) simd = &e->config_keys[i];
    if (!strcmp(e->config_keys[i].name, "matvec")) matvec = &e->config_keys[i];
    if (!strcmp(e->config_keys[i].name, "recurrent_guard")) guard = &e->config_keys[i];
  }
  assert_non_null(guard);
  assert_int_equal(guard->type, KILN_CONFIG_ENUM);
  assert_string_equal(guard->choices, "f32|off");
  assert_string_equal(guard->default_value, "f32");
  assert_non_null(matvec);
  assert_string_equal(matvec->choices, "int16|f32");
  assert_string_equal(matvec->default_value, "int16");
  assert_non_null(simd);
  assert_int_equal(simd->type, KILN_CONFIG_ENUM);
  assert_string_equal(simd->choices, "auto|avx2|portable");
  assert_string_equal(simd->default_value, "auto");
  assert_non_null(threads);
  assert_non_null(precision);
  assert_non_null(spin);
  assert_int_equal(spin->type, KILN_CONFIG_INT);
  assert_string_equal(spin->default_value, "200");
  assert_true(spin->min == 0 && spin->max == 100000);
  assert_int_equal(threads->type, KILN_CONFIG_INT);
  assert_string_equal(threads->default_value, "0");
  assert_true(threads->min == 0 && threads->max == 1024);
  assert_int_equal(precision->type, KILN_CONFIG_ENUM);
  assert_string_equal(precision->choices, "f32|f64");
  assert_string_equal(precision->default_value, "f32");
  assert_non_null(threads->help);
  assert_non_null(precision->help);

  kiln_probe_info info;
  KT_ASSERT_OK(kiln_plugin_probe(p, &info));
  assert_true(info.available);
  assert_non_null(strstr(info.device, "CPU"));

  /* Values outside the declared table are refused by the config layer. */
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_backend_declare_config(p, c));
  kiln_status st = kiln_config_set(c, "cpu", "precision", "f16", "test");
  if (!st) st = kiln_config_validate(c, false);
  assert_non_null(st);
  kiln_status_free(st);
  kiln_config_free(c);
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_backend_declare_config(p, c));
  st = kiln_config_set(c, "cpu", "threads", "1025", "test");
  if (!st) st = kiln_config_validate(c, false);
  assert_non_null(st);
  kiln_status_free(st);
  kiln_config_free(c);
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_backend_declare_config(p, c));
  st = kiln_config_set(c, "cpu", "spin_us", "-1", "test");
  if (!st) st = kiln_config_validate(c, false);
  assert_non_null(st);
  kiln_status_free(st);
  kiln_config_free(c);

  kiln_plugin_unload(p);
  free(path);
}

enum { T_EMBD_W, T_IDS, T_EMBD, T_NORM_W, T_NORM, T_OUT_W, T_OUT, N_TENSORS };

typedef struct graph {
  kiln_tensor t[N_TENSORS];
  kiln_node n[3];
  const kiln_node *order[3];
  void *bufs[N_TENSORS];
} graph;

/* ids -> get_rows(token_embd F16) -> rms_norm -> mul_mat(Q8_0) -> logits */
static void run_graph(const char *path, const char *threads, const char *precision) {
  const int64_t H = 64, V = 40, N = 32, cap = 8;
  const int32_t T = 5, pos0 = 3;
  kiln_plugin *p;
  KT_ASSERT_OK(kiln_plugin_load(path, &p));
  const kiln_backend_ops *e = kiln_plugin_entry(p);
  kiln_config *c;
  KT_ASSERT_OK(kiln_config_new(&c));
  KT_ASSERT_OK(kiln_backend_declare_config(p, c));
  KT_ASSERT_OK(kiln_config_set(c, "cpu", "threads", threads, "test"));
  KT_ASSERT_OK(kiln_config_set(c, "cpu", "precision", precision, "test"));
  KT_ASSERT_OK(kiln_config_validate(c, false));
  kiln_backend *b;
  KT_ASSERT_OK(kiln_backend_open(p, c, &b));
  void *be = b->ctx;

  kct_rng rng = kct_rng_new(1300);
  float *embd = kct_alloc((size_t)(H * V) * 4), *normw = kct_alloc((size_t)H * 4);
  float *outw = kct_alloc((size_t)(H * N) * 4);
  kct_fill(&rng, embd, H * V, -0.05, 0.05);
  kct_fill(&rng, normw, H, 0.5, 1.5);
  kct_fill(&rng, outw, H * N, -1, 1);
  uint64_t nb;
  void *embd_q = kct_make_weight(KILN_TYPE_F16, embd, H, V, &nb);
  void *outw_q = kct_make_weight(KILN_TYPE_Q8_0, outw, H, N, &nb);

  graph g;
  memset(&g, 0, sizeof g);
  g.t[T_EMBD_W] = kct_tensor(T_EMBD_W, KILN_TYPE_F16, KILN_ROLE_WEIGHT, H, V, "token_embd.weight");
  g.t[T_EMBD_W].data = embd_q;
  g.t[T_IDS] = kct_tensor(T_IDS, KILN_TYPE_I32, KILN_ROLE_INPUT, cap, 1, "tokens");
  g.t[T_EMBD] = kct_tensor(T_EMBD, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, H, cap, "embd");
  g.t[T_NORM_W] =
      kct_tensor(T_NORM_W, KILN_TYPE_F32, KILN_ROLE_WEIGHT, H, 1, "output_norm.weight");
  g.t[T_NORM_W].data = normw;
  g.t[T_NORM] = kct_tensor(T_NORM, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, H, cap, "norm");
  g.t[T_OUT_W] = kct_tensor(T_OUT_W, KILN_TYPE_Q8_0, KILN_ROLE_WEIGHT, H, N, "output.weight");
  g.t[T_OUT_W].data = outw_q;
  g.t[T_OUT] = kct_tensor(T_OUT, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, N, cap, "logits");
  g.n[0] = kct_node(KILN_OP_GET_ROWS, "token_embd", &g.t[T_EMBD_W], &g.t[T_IDS], NULL,
                    &g.t[T_EMBD]);
  g.n[1] = kct_node(KILN_OP_RMS_NORM, "output_norm", &g.t[T_EMBD], &g.t[T_NORM_W], NULL,
                    &g.t[T_NORM]);
  g.n[1].p.rms_norm.eps = 1e-5f;
  g.n[2] = kct_node(KILN_OP_MUL_MAT, "output", &g.t[T_OUT_W], &g.t[T_NORM], NULL, &g.t[T_OUT]);
  for (int i = 0; i < 3; i++) {
    g.order[i] = &g.n[i];
    KT_ASSERT_OK(e->supports(be, &g.n[i]));
    KT_ASSERT_OK(e->prepare(be, &g.n[i]));
  }
  for (int i = 0; i < N_TENSORS; i++) {
    if (g.t[i].role == KILN_ROLE_WEIGHT)
      KT_ASSERT_OK(e->buffer_map_weight(be, &g.t[i], &g.bufs[i]));
    else
      KT_ASSERT_OK(e->buffer_alloc(be, &g.t[i], &g.bufs[i]));
  }
  int32_t ids[8] = {3, 39, 0, 17, 3, 0, 0, 0};
  KT_ASSERT_OK(e->buffer_upload(be, g.bufs[T_IDS], 0, ids, sizeof ids));
  kiln_step step = {.nodes = g.order, .n_nodes = 3, .n_tokens = T, .pos0 = pos0,
                    .bufs = g.bufs};
  KT_ASSERT_OK(e->run(be, &step));
  KT_ASSERT_OK(e->sync(be));
  float y[32 * 5];
  KT_ASSERT_OK(e->buffer_download(be, g.bufs[T_OUT], 0, y, sizeof y));

  /* reference: dequantize, norm, project, in double */
  float *ev = kct_dequant_weight(KILN_TYPE_F16, embd_q, H, V);
  float *wv = kct_dequant_weight(KILN_TYPE_Q8_0, outw_q, H, N);
  float x[64 * 5];
  for (int t = 0; t < T; t++) memcpy(x + t * H, ev + ids[t] * H, (size_t)H * 4);
  double nd[64 * 5], ref[32 * 5];
  kct_ref_rms_norm(x, normw, H, T, 1e-5f, nd);
  float nf[64 * 5];
  for (int i = 0; i < H * T; i++) nf[i] = (float)nd[i];
  kct_ref_mul_mat(wv, nf, NULL, H, N, T, ref);
  kct_assert_close(precision, y, ref, N, T, 1e-5);

  /* errors through the ABI: a token id past the vocabulary names the node */
  ids[1] = 40;
  KT_ASSERT_OK(e->buffer_upload(be, g.bufs[T_IDS], 0, ids, sizeof ids));
  KT_ASSERT_ERR(e->run(be, &step), KILN_STATUS_OUT_OF_RANGE, "token_embd");
  ids[1] = 39;
  KT_ASSERT_OK(e->buffer_upload(be, g.bufs[T_IDS], 0, ids, sizeof ids));
  /* uploads and downloads outside a buffer, and into a mapped weight */
  KT_ASSERT_ERR(e->buffer_upload(be, g.bufs[T_IDS], 4, ids, sizeof ids), KILN_STATUS_OUT_OF_RANGE,
                "offset 4");
  KT_ASSERT_ERR(e->buffer_download(be, g.bufs[T_NORM], UINT64_MAX, y, 1), KILN_STATUS_OUT_OF_RANGE,
                NULL);
  KT_ASSERT_ERR(e->buffer_upload(be, g.bufs[T_NORM_W], 0, ids, 4), KILN_STATUS_INVALID_ARGUMENT,
                "mapped");
  KT_ASSERT_OK(e->buffer_download(be, g.bufs[T_NORM_W], 0, y, 4));
  assert_memory_equal(y, normw, 4);
  /* a missing buffer */
  void *saved = g.bufs[T_NORM];
  g.bufs[T_NORM] = NULL;
  KT_ASSERT_ERR(e->run(be, &step), KILN_STATUS_INVALID_ARGUMENT, "norm");
  g.bufs[T_NORM] = saved;
  /* a weight with no host data cannot be mapped */
  kiln_tensor nodata = g.t[T_OUT_W];
  nodata.data = NULL;
  void *nb2 = NULL;
  KT_ASSERT_ERR(e->buffer_map_weight(be, &nodata, &nb2), KILN_STATUS_INVALID_ARGUMENT,
                "output.weight");

  for (int i = 0; i < N_TENSORS; i++) e->buffer_free(be, g.bufs[i]);
  free(wv);
  free(ev);
  free(outw_q);
  free(embd_q);
  free(outw);
  free(normw);
  free(embd);
  kiln_backend_close(b);
  kiln_config_free(c);
  kiln_plugin_unload(p);
}

static void test_graph_through_abi(void **state) {
  NEED_PLUGIN(path);
  run_graph(path, "1", "f32");
  run_graph(path, "4", "f32");
  run_graph(path, "0", "f64");
  free(path);
}

int main(void) {
  /* Outside `make check` every case skips (no plugin to load); cmocka
   * counts skips as passes, so the program answers 77 (automake's SKIP). */
  char *plugin = plugin_file();
  bool missing = !plugin;
  if (missing) fprintf(stderr, "skip: KILN_PLUGIN_PATH is not set (run through make check)\n");
  free(plugin);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exports),
      cmocka_unit_test(test_entry_and_config_keys),
      cmocka_unit_test(test_graph_through_abi),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  return failed ? 1 : missing ? 77 : 0;
}
