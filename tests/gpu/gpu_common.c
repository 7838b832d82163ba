/* Shared pieces of the GPU suites (gpu_common.h). */
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
#include "kiln/dequant.h"
#include "kiln/half.h"
#include "testutil.h"

const char *const kg_backends[KG_N_BACKENDS] = {"cuda-serial", "cuda-batched", "cuda-cc120"};

/* Whether `name` is one of the comma-separated names in list. */
static bool listed(const char *list, const char *name) {
  const size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ',');
    const size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0) return true;
    if (!e) break;
    p = e + 1;
  }
  return false;
}

bool kg_backend_on(int b) {
  const char *only = getenv("KILN_TEST_BACKENDS");
  return !only || !*only || listed(only, kg_backends[b]);
}

/* Every name in KILN_TEST_BACKENDS is a CUDA backend: a misspelt one
 * would silently test nothing. */
static bool test_backends_valid(const char *test) {
  const char *only = getenv("KILN_TEST_BACKENDS");
  if (!only || !*only) return true;
  for (const char *p = only; *p;) {
    const char *e = strchr(p, ',');
    const size_t len = e ? (size_t)(e - p) : strlen(p);
    bool known = false;
    for (int i = 0; i < KG_N_BACKENDS; i++)
      known |= strlen(kg_backends[i]) == len && strncmp(p, kg_backends[i], len) == 0;
    if (!known) {
      fprintf(stderr, "%s: KILN_TEST_BACKENDS=\"%s\": \"%.*s\" is not one of cuda-serial, cuda-batched, "
                      "cuda-cc120\n", test, only, (int)len, p);
      return false;
    }
    if (!e) break;
    p = e + 1;
  }
  printf("%s: only %s (KILN_TEST_BACKENDS)\n", test, only);
  return true;
}

int kg_gate(const char *test) {
  /* Line-buffered, so the report interleaves sensibly with the plugins'
   * log lines on stderr in the test's .log file. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!test_backends_valid(test)) return 1;
  const char *path = getenv("KILN_PLUGIN_PATH");
  kiln_plugin_registry *r = NULL;
  kiln_status st = kiln_plugin_registry_new(path, &r);
  const char *bad = NULL;
  char why[512] = "";
  for (int i = 0; !st && i < KG_N_BACKENDS && !bad; i++) {
    if (!kiln_plugin_registry_has(r, kg_backends[i])) {
      bad = kg_backends[i];
      snprintf(why, sizeof why, "kiln-%s.so is not on the plugin path %s (built without CUDA?)",
               kg_backends[i], path ? path : "(unset)");
      break;
    }
    kiln_plugin *p;
    kiln_status e = kiln_plugin_registry_get(r, kg_backends[i], &p);
    kiln_probe_info info;
    if (!e) e = kiln_plugin_probe(p, &info);
    if (e) {
      bad = kg_backends[i];
      snprintf(why, sizeof why, "%s", kiln_status_message(e));
      kiln_status_free(e);
    } else if (!info.available) {
      bad = kg_backends[i];
      snprintf(why, sizeof why, "unavailable: %s", info.reason);
    } else {
      printf("%s: %s, %s\n", kg_backends[i], info.device, info.detail);
    }
  }
  if (st) {
    snprintf(why, sizeof why, "%s", kiln_status_message(st));
    bad = "registry";
    kiln_status_free(st);
  }
  kiln_plugin_registry_free(r);
  if (!bad) return 0;
  bool require = kt_require_gpu();
  fprintf(stdout, "%s %s: %s: %s\n", require ? "FAIL (KILN_REQUIRE_GPU=1)" : "SKIP", test, bad,
          why);
  return require ? 1 : 77;
}

kiln_runtime *kg_runtime(const kiln_config_override *extra, size_t n_extra) {
  /* gemm = f32 (IEEE, pedantic) where a test does not choose: the suites
   * hold the batched prefill to f32's accuracy; test_gpu_ops checks the
   * other modes against their own bounds. */
  kiln_config_override ov[40] = {
      {"cpu", "precision", "f64", "test"},
      {"cuda-cc120", "allow_lower_cc", "true", "test"},
      {"cuda-serial", "device", "0", "test"},
      {"cuda-batched", "device", "0", "test"},
      {"cuda-batched", "gemm", "f32", "test"},
      {"cuda-cc120", "gemm", "f32", "test"},
  };
  size_t n = 6;
  if (n_extra > sizeof ov / sizeof ov[0] - n) fail_msg("kg_runtime: %zu overrides are too many", n_extra);
  for (size_t i = 0; i < n_extra; i++) ov[n++] = extra[i];
  kiln_runtime *rt = NULL;
  KT_ASSERT_OK(kiln_runtime_open(&(kiln_runtime_options){.config_path = NULL, .use_environment = true, .overrides = ov, .n_overrides = n}, &rt));
  return rt;
}

const char *const kg_modes[KG_N_MODES] = {"f32", "q16", "q8"};
const double kg_mode_tol[KG_N_MODES] = {2e-5, 6e-5, 1.2e-2};

kiln_runtime *kg_runtime_mode(const char *activations, bool fuse,
                              const kiln_config_override *extra, size_t n_extra) {
  kiln_config_override ov[34];
  size_t n = 0;
  for (int b = 0; b < KG_N_BACKENDS; b++) {
    ov[n++] = (kiln_config_override){kg_backends[b], "activations", activations, "test"};
    ov[n++] = (kiln_config_override){kg_backends[b], "fuse", fuse ? "true" : "false", "test"};
  }
  if (n_extra > sizeof ov / sizeof ov[0] - n) fail_msg("kg_runtime_mode: %zu overrides are too many", n_extra);
  for (size_t i = 0; i < n_extra; i++) ov[n++] = extra[i];
  return kg_runtime(ov, n);
}

static kg_metrics finish(double ss_t, double ss_r, double ss_d, double dot, double max_abs,
                         bool finite) {
  kg_metrics m;
  double nr = sqrt(ss_r), nt = sqrt(ss_t);
  m.rel_l2 = nr > 0 ? sqrt(ss_d) / nr : sqrt(ss_d);
  m.norm_ratio = nr > 0 ? nt / nr : (nt == 0 ? 1.0 : INFINITY);
  m.cosine = nr > 0 && nt > 0 ? dot / (nr * nt) : (nr == nt ? 1.0 : 0.0);
  m.max_abs = max_abs;
  m.finite = finite;
  return m;
}

kg_metrics kg_compare(const float *test, const float *ref, int64_t n) {
  double ss_t = 0, ss_r = 0, ss_d = 0, dot = 0, mx = 0;
  bool finite = true;
  for (int64_t i = 0; i < n; i++) {
    double t = test[i], r = ref[i], d = t - r;
    if (!isfinite(t)) finite = false;
    ss_t += t * t;
    ss_r += r * r;
    ss_d += d * d;
    dot += t * r;
    if (fabs(d) > mx) mx = fabs(d);
  }
  return finish(ss_t, ss_r, ss_d, dot, mx, finite);
}

kg_metrics kg_compare_f64(const float *test, const double *ref, int64_t n) {
  double ss_t = 0, ss_r = 0, ss_d = 0, dot = 0, mx = 0;
  bool finite = true;
  for (int64_t i = 0; i < n; i++) {
    double t = test[i], r = ref[i], d = t - r;
    if (!isfinite(t)) finite = false;
    ss_t += t * t;
    ss_r += r * r;
    ss_d += d * d;
    dot += t * r;
    if (fabs(d) > mx) mx = fabs(d);
  }
  return finish(ss_t, ss_r, ss_d, dot, mx, finite);
}

bool kg_close(const kg_metrics *m, double tol) {
  return m->finite && m->rel_l2 <= tol && fabs(m->norm_ratio - 1.0) <= tol;
}

kg_worst kg_compare_cols(const float *test, const float *ref, int64_t w, int64_t n_cols,
                         double tol) {
  kg_worst k = {0, 0, 1.0, -1, -1, 0, true};
  for (int64_t c = 0; c < n_cols; c++) {
    kg_metrics m = kg_compare(test + c * w, ref + c * w, w);
    if (!m.finite) k.all_finite = false;
    if (!kg_close(&m, tol)) k.n_bad++;
    if (!(m.rel_l2 <= k.rel_l2)) {
      k.rel_l2 = m.rel_l2;
      k.at_rel = c;
    }
    double dev = fabs(m.norm_ratio - 1.0);
    if (!(dev <= k.ratio_dev)) {
      k.ratio_dev = dev;
      k.at_ratio = c;
    }
    if (m.cosine < k.min_cosine) k.min_cosine = m.cosine;
  }
  return k;
}

kiln_tensor kg_tensor(int32_t id, kiln_type type, kiln_tensor_role role, int64_t ne0, int64_t ne1,
                      uint64_t pad, const char *name) {
  kiln_tensor t;
  memset(&t, 0, sizeof t);
  t.id = id;
  t.type = type;
  t.role = role;
  t.n_dims = ne1 > 1 ? 2 : 1;
  t.ne[0] = ne0;
  t.ne[1] = ne1;
  t.ne[2] = t.ne[3] = 1;
  int64_t rb = kiln_type_row_bytes(type, ne0);
  t.nbytes = (uint64_t)(rb > 0 ? rb : 0) * (uint64_t)ne1 + pad;
  snprintf(t.name, sizeof t.name, "%s", name);
  return t;
}

kiln_backend *kg_backend_open(kiln_runtime *rt, const char *name) {
  kiln_plugin *p;
  KT_ASSERT_OK(kiln_plugin_registry_get(kiln_runtime_plugins(rt), name, &p));
  kiln_backend *b = NULL;
  KT_ASSERT_OK(kiln_backend_open(p, kiln_runtime_config(rt), &b));
  return b;
}

void kg_written_bytes(const kg_op *op, int32_t n_tokens, int32_t pos0, uint64_t *out_offset,
                      uint64_t *out_bytes) {
  const kiln_tensor *t = op->node.dst;
  *out_offset = 0;
  *out_bytes = t->nbytes;
  if (op->data[t->id] || t->ne[1] < 1) return; /* all of it: the caller gave its contents */
  const uint64_t col = t->nbytes / (uint64_t)t->ne[1];
  const int64_t col0 = op->node.op == KILN_OP_STORE_KV ? pos0 : 0;
  int64_t cols = n_tokens;
  if (col0 + cols > t->ne[1]) cols = t->ne[1] - col0;
  if (col0 < 0 || cols < 0) return;
  *out_offset = col * (uint64_t)col0;
  *out_bytes = col * (uint64_t)cols;
}

kiln_status kg_run_op(kiln_backend *b, kg_op *op, int32_t n_tokens, int32_t pos0, void *out_dst) {
  const kiln_backend_ops *o = b->ops;
  void *bufs[KG_MAX_TENSORS] = {NULL};
  kiln_status st = o->supports(b->ctx, &op->node);
  for (int i = 0; !st && i < op->n_tensors; i++) {
    st = o->buffer_alloc(b->ctx, &op->t[i], &bufs[i]);
    if (!st && op->data[i]) st = o->buffer_upload(b->ctx, bufs[i], 0, op->data[i], op->t[i].nbytes);
  }
  if (!st) st = o->prepare(b->ctx, &op->node);
  if (!st) {
    const kiln_node *nodes[1] = {&op->node};
    kiln_step step = {nodes, 1, n_tokens, pos0, bufs};
    st = o->run(b->ctx, &step);
  }
  if (!st) st = o->sync(b->ctx);
  if (!st) {
    int d = op->node.dst->id;
    uint64_t off = 0, n = op->t[d].nbytes;
    kg_written_bytes(op, n_tokens, pos0, &off, &n);
    /* Bytes the step does not write are the caller's 0xEE, not device
     * memory nothing wrote (compute-sanitizer's initcheck flags such a
     * download). */
    memset(out_dst, 0xEE, (size_t)op->t[d].nbytes);
    st = o->buffer_download(b->ctx, bufs[d], off, (char *)out_dst + off, n);
  }
  for (int i = 0; i < op->n_tensors; i++)
    if (bufs[i]) o->buffer_free(b->ctx, bufs[i]);
  return st ? kiln_status_annotate(st, "backend %s", b->name) : NULL;
}

kiln_node *kg_graph_node(kg_graph *g, kiln_op op, const char *name, int s0, int s1, int s2,
                         int dst) {
  if (g->n_nodes >= KG_GRAPH_NODES) fail_msg("kg_graph: more than %d nodes", KG_GRAPH_NODES);
  kiln_node *n = &g->nodes[g->n_nodes];
  memset(n, 0, sizeof *n);
  n->id = g->n_nodes++;
  n->op = op;
  n->src[0] = s0 >= 0 ? &g->t[s0] : NULL;
  n->src[1] = s1 >= 0 ? &g->t[s1] : NULL;
  n->src[2] = s2 >= 0 ? &g->t[s2] : NULL;
  n->dst = &g->t[dst];
  snprintf(n->name, sizeof n->name, "%s", name);
  return n;
}

kiln_status kg_run_graph(kiln_backend *b, kg_graph *g, int32_t n_tokens, int32_t pos0,
                         const int *outs, int n_outs, void *const *out) {
  const kiln_backend_ops *o = b->ops;
  void *bufs[KG_GRAPH_TENSORS] = {NULL};
  const kiln_node *nodes[KG_GRAPH_NODES];
  kiln_status st = NULL;
  for (int i = 0; !st && i < g->n_nodes; i++) {
    nodes[i] = &g->nodes[i];
    st = o->supports(b->ctx, nodes[i]);
  }
  for (int i = 0; !st && i < g->n_tensors; i++) {
    st = o->buffer_alloc(b->ctx, &g->t[i], &bufs[i]);
    if (!st && g->data[i]) st = o->buffer_upload(b->ctx, bufs[i], 0, g->data[i], g->t[i].nbytes);
  }
  for (int i = 0; !st && i < g->n_nodes; i++) st = o->prepare(b->ctx, nodes[i]);
  if (!st) {
    kiln_step step = {nodes, (uint32_t)g->n_nodes, n_tokens, pos0, bufs};
    st = o->run(b->ctx, &step);
  }
  if (!st) st = o->sync(b->ctx);
  for (int i = 0; !st && i < n_outs; i++) {
    const kiln_tensor *t = &g->t[outs[i]];
    uint64_t col = t->ne[1] > 0 ? t->nbytes / (uint64_t)t->ne[1] : t->nbytes;
    uint64_t n = g->data[outs[i]] ? t->nbytes : col * (uint64_t)n_tokens;
    memset(out[i], 0xEE, (size_t)t->nbytes);
    st = o->buffer_download(b->ctx, bufs[outs[i]], 0, out[i], n);
  }
  for (int i = 0; i < g->n_tensors; i++)
    if (bufs[i]) o->buffer_free(b->ctx, bufs[i]);
  return st ? kiln_status_annotate(st, "backend %s", b->name) : NULL;
}

kg_rng kg_rng_new(uint64_t seed) {
  kg_rng r = {seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull};
  return r;
}

uint32_t kg_u32(kg_rng *r) {
  /* SplitMix64 */
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (uint32_t)((z ^ (z >> 31)) >> 32);
}

double kg_uniform(kg_rng *r, double lo, double hi) {
  return lo + (hi - lo) * ((double)kg_u32(r) / 4294967296.0);
}

void kg_fill(kg_rng *r, float *x, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)kg_uniform(r, lo, hi);
}

void *kg_alloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (!p) fail_msg("out of memory (%zu bytes)", n);
  return p;
}

const kiln_tensor *kg_graph_tensor(kiln_session *s, const char *name) {
  const kiln_graph *g = kiln_plan_graph(kiln_session_plan(s));
  for (uint32_t i = 0; i < kiln_graph_n_tensors(g); i++)
    if (strcmp(kiln_graph_tensor(g, i)->name, name) == 0) return kiln_graph_tensor(g, i);
  fail_msg("no tensor %s in the graph", name);
  return NULL;
}

static void put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)(v & 0xff);
  p[1] = (uint8_t)(v >> 8);
}

static uint16_t f16(double v) { return kiln_f32_to_f16((float)v); }

uint8_t *kg_pack_weight(kiln_type type, int64_t K, int64_t rows, uint64_t pad, int pad_byte,
                        kg_rng *r) {
  const int64_t rb = kiln_type_row_bytes(type, K);
  uint8_t *w = kg_alloc((size_t)(rb * rows) + pad);
  memset(w + rb * rows, pad_byte, pad);
  const int64_t bs = kiln_type_block_size(type), bb = kiln_type_block_bytes(type);
  for (int64_t row = 0; row < rows; row++)
    for (int64_t b = 0; b < K / bs; b++) {
      uint8_t *p = w + row * rb + b * bb;
      for (int64_t i = 0; i < bb; i++) p[i] = (uint8_t)kg_u32(r);
      switch (type) {
      case KILN_TYPE_F32: {
        float v = (float)kg_uniform(r, -1, 1);
        memcpy(p, &v, 4);
        break;
      }
      case KILN_TYPE_F16: put16(p, f16(kg_uniform(r, -1, 1))); break;
      case KILN_TYPE_BF16: put16(p, kiln_f32_to_bf16((float)kg_uniform(r, -1, 1))); break;
      case KILN_TYPE_Q4_0:
      case KILN_TYPE_Q5_0: put16(p, f16(kg_uniform(r, 0.01, 0.2))); break;
      case KILN_TYPE_Q8_0: put16(p, f16(kg_uniform(r, -0.01, 0.01))); break;
      case KILN_TYPE_Q4_K:
      case KILN_TYPE_Q5_K:
        put16(p, f16(kg_uniform(r, 0.001, 0.01)));     /* d */
        put16(p + 2, f16(kg_uniform(r, 0.001, 0.02))); /* dmin */
        break; /* 12 scale bytes, (Q5_K: 32 high-bit bytes,) 128 quant bytes: random */
      case KILN_TYPE_Q6_K:
        for (int i = 0; i < 16; i++) p[192 + i] = (uint8_t)(int8_t)(kg_u32(r) % 127 - 63);
        put16(p + 208, f16(kg_uniform(r, 0.0005, 0.004)));
        break;
      default: fail_msg("no packer for %s", kiln_type_name(type));
      }
    }
  return w;
}

float *kg_dequant(kiln_type type, const uint8_t *w, int64_t K, int64_t rows) {
  float *v = kg_alloc((size_t)(K * rows) * sizeof(float));
  KT_ASSERT_OK(kiln_dequantize(type, w, v, K * rows));
  return v;
}

void kg_attention_op(kg_op *op, int hd, int nh, int nkv, int cols, int n_ctx, float scale) {
  op->n_tensors = 4;
  op->t[0] = kg_tensor(0, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, (int64_t)hd * nh, cols, 0, "q");
  op->t[1] = kg_tensor(1, KILN_TYPE_F32, KILN_ROLE_STATE, (int64_t)hd * nkv, n_ctx, 0, "cache_k");
  op->t[2] = kg_tensor(2, KILN_TYPE_F32, KILN_ROLE_STATE, (int64_t)hd * nkv, n_ctx, 0, "cache_v");
  op->t[3] = kg_tensor(3, KILN_TYPE_F32, KILN_ROLE_ACTIVATION, (int64_t)hd * nh, cols, 0, "attn_out");
  op->node.op = KILN_OP_ATTENTION;
  op->node.src[0] = &op->t[0];
  op->node.src[1] = &op->t[1];
  op->node.src[2] = &op->t[2];
  op->node.dst = &op->t[3];
  op->node.p.attention = (kiln_attention_params){nh, nkv, hd, scale};
  snprintf(op->node.name, sizeof op->node.name, "blk.0.attn");
}

double kg_max_rel(const float *test, const float *ref, int64_t n) {
  double mx = 0, mr = 0;
  for (int64_t i = 0; i < n; i++) {
    const double d = fabs((double)test[i] - ref[i]);
    if (d > mx || d != d) mx = d;
    if (fabs(ref[i]) > mr) mr = fabs(ref[i]);
  }
  return mr > 0 ? mx / mr : mx;
}
