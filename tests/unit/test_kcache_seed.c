/* The seed sequence: the defect at the top of DESIGN.md, replayed through
 * the path the CUDA backends' prepare() takes (RMS_NORM node ->
 * kiln_cuda_rmsnorm_describe -> kcache_get), targeting sm_90 with NVRTC
 * (no GPU needed). A model with ε = 1e-5 is planned and preloaded first;
 * a model with ε = 1e-6 planned afterwards in the same process must
 * resolve a different kernel whose PTX carries 1e-6 (0f358637BD), not the
 * first model's 1e-5 (0f3727C5AC). */
#include "config.h"

#include <dirent.h>
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
#include "rmsnorm_describe.h"
#include "testutil.h"

#define IMM_1E5 "0f3727C5AC"
#define IMM_1E6 "0f358637BD"

/* The RMS_NORM part of a planned graph: per layer attn_norm and ffn_norm,
 * then output_norm, over [hidden, n_ctx] activations. */
enum { N_LAYERS = 2, N_NORMS = 2 * N_LAYERS + 1, N_CTX = 16 };
typedef struct toy_model {
  kiln_tensor x, y, w[N_NORMS];
  kiln_node nodes[N_NORMS];
} toy_model;

static void build_model(toy_model *m, int64_t hidden, float eps) {
  memset(m, 0, sizeof *m);
  kiln_tensor act = {.type = KILN_TYPE_F32, .role = KILN_ROLE_ACTIVATION, .n_dims = 2,
                     .ne = {hidden, N_CTX, 1, 1}, .nbytes = (uint64_t)hidden * N_CTX * 4};
  m->x = act;
  m->x.id = 0;
  snprintf(m->x.name, sizeof m->x.name, "inp");
  m->y = act;
  m->y.id = 1;
  snprintf(m->y.name, sizeof m->y.name, "norm_out");
  for (int i = 0; i < N_NORMS; i++) {
    kiln_tensor *w = &m->w[i];
    *w = (kiln_tensor){.id = 2 + i, .type = KILN_TYPE_F32, .role = KILN_ROLE_WEIGHT,
                       .n_dims = 1, .ne = {hidden, 1, 1, 1}, .nbytes = (uint64_t)hidden * 4};
    kiln_node *n = &m->nodes[i];
    n->id = i;
    n->op = KILN_OP_RMS_NORM;
    n->layer = i < 2 * N_LAYERS ? i / 2 : -1;
    n->src[0] = &m->x;
    n->src[1] = w;
    n->dst = &m->y;
    n->p.rms_norm.eps = eps;
    char name[KILN_NAME_MAX - 8];
    if (i < 2 * N_LAYERS) {
      snprintf(name, sizeof name, "blk.%d.%s", i / 2, i % 2 ? "ffn_norm" : "attn_norm");
    } else {
      snprintf(name, sizeof name, "output_norm");
    }
    snprintf(n->name, sizeof n->name, "%s", name);
    snprintf(w->name, sizeof w->name, "%s.weight", name);
  }
}

/* What kiln_plan_preload does through each backend's prepare(): walk the
 * plan, resolve every node's kernel. Returns the kernel all the model's
 * norms share (they must share one: same params). */
static kiln_kernel *preload(kiln_kcompiler *c, kiln_cuda_rmsnorm_variant v, const toy_model *m) {
  kiln_kernel *first = NULL;
  for (int i = 0; i < N_NORMS; i++) {
    kiln_kernel *k = NULL;
    kiln_cuda_rmsnorm_launch l;
    KT_ASSERT_OK(kiln_cuda_rmsnorm_prepare(kt_kcache_host(), c, v, &m->nodes[i], &k, &l));
    assert_int_equal(l.hidden, m->w[0].ne[0]);
    assert_int_equal(l.rows_per_token, 1);
    if (!first) first = k;
    assert_ptr_equal(k, first);
  }
  return first;
}

static bool has(const kiln_kernel *k, const char *imm) {
  return strstr((const char *)k->image, imm) != NULL;
}

static unsigned count_entries(const char *dir) {
  unsigned n = 0;
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strlen(e->d_name) == 35 && strcmp(e->d_name + 32, ".kk") == 0) n++;
  if (d) closedir(d);
  return n;
}

static const kiln_cuda_rmsnorm_variant variants[] = {
    KILN_CUDA_RMSNORM_ROW_VEC, KILN_CUDA_RMSNORM_ROWS, KILN_CUDA_RMSNORM_ROW_CC12};

static kiln_kcompiler *open_backend(kiln_kcache *kc, kiln_nvrtc *nv) {
  const kiln_host_api *h = kt_kcache_host();
  kiln_kcompiler *c = NULL;
  KT_ASSERT_OK(kiln_cuda_templates_register(h, kc));
  KT_ASSERT_OK(kiln_nvrtc_register(nv, h, kc, "sm_90", &c));
  return c;
}

static void test_seed_eps_after_preload(void **state) {
  for (size_t vi = 0; vi < 3; vi++) {
    char *dir = kt_mkdtemp("kcache-seed");
    kiln_kcache *kc = kt_kcache_open(dir, NULL);
    kiln_nvrtc nv;
    kiln_kcompiler *c = open_backend(kc, &nv);
    toy_model *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    build_model(a, 3584, 1e-5f);
    kiln_kernel *ka = preload(c, variants[vi], a);
    build_model(b, 3584, 1e-6f);
    kiln_kernel *kb = preload(c, variants[vi], b);
    printf("%s: eps 1e-5 -> %s %s; eps 1e-6 -> %s %s\n", ka->template_name,
           has(ka, IMM_1E5) ? IMM_1E5 : "-", has(ka, IMM_1E6) ? IMM_1E6 : "-",
           has(kb, IMM_1E5) ? IMM_1E5 : "-", has(kb, IMM_1E6) ? IMM_1E6 : "-");
    assert_ptr_not_equal(ka, kb);
    assert_false(kiln_kkey_equal(&ka->key, &kb->key));
    assert_true(has(ka, IMM_1E5));
    assert_false(has(ka, IMM_1E6));
    assert_true(has(kb, IMM_1E6));
    assert_false(has(kb, IMM_1E5));
    assert_non_null(strstr(kb->canonical, "param eps f32 0x358637bd\n"));
    kiln_kcache_stats st;
    kiln_kcache_get_stats(kc, &st);
    assert_int_equal(st.compiles, 2);
    assert_int_equal(st.memory_hits, 2 * (N_NORMS - 1));
    assert_int_equal(count_entries(dir), 2);
    free(a);
    free(b);
    kiln_kcache_close(kc);
    kt_rm_rf(dir);
    free(dir);
  }
}

/* ε 1e-5 -> 1e-6 and hidden 896 -> 1536 in one process: four distinct
 * kernels and four distinct cache entries, each with its own immediates. */
static void test_seed_four_entries(void **state) {
  for (size_t vi = 0; vi < 3; vi++) {
    char *dir = kt_mkdtemp("kcache-seed4");
    kiln_kcache *kc = kt_kcache_open(dir, NULL);
    kiln_nvrtc nv;
    kiln_kcompiler *c = open_backend(kc, &nv);
    static const int64_t hiddens[2] = {896, 1536};
    static const float epss[2] = {1e-5f, 1e-6f};
    static const char *const imms[2] = {IMM_1E5, IMM_1E6};
    kiln_kernel *k[4];
    toy_model *m = malloc(sizeof *m);
    for (int i = 0; i < 4; i++) {
      build_model(m, hiddens[i / 2], epss[i % 2]);
      k[i] = preload(c, variants[vi], m);
      assert_true(has(k[i], imms[i % 2]));
      assert_false(has(k[i], imms[1 - i % 2]));
      char hline[32];
      snprintf(hline, sizeof hline, "param hidden i64 %lld\n", (long long)hiddens[i / 2]);
      assert_non_null(strstr(k[i]->canonical, hline));
      for (int j = 0; j < i; j++) {
        assert_false(kiln_kkey_equal(&k[i]->key, &k[j]->key));
        assert_true(k[i]->image_size != k[j]->image_size ||
                    memcmp(k[i]->image, k[j]->image, k[i]->image_size) != 0);
      }
    }
    /* Planning the first model again resolves the first kernel again. */
    build_model(m, 896, 1e-5f);
    assert_ptr_equal(preload(c, variants[vi], m), k[0]);
    printf("%s: 4 kernels, %u cache entries\n", k[0]->template_name, count_entries(dir));
    assert_int_equal(count_entries(dir), 4);
    free(m);
    kiln_kcache_close(kc);
    kt_rm_rf(dir);
    free(dir);
  }
}

/* The describe step refuses what it cannot run, naming the node. */
static void test_describe_rejects(void **state) {
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  kiln_nvrtc nv;
  kiln_kcompiler *c = open_backend(kc, &nv);
  const kiln_host_api *h = kt_kcache_host();
  toy_model *m = malloc(sizeof *m);
  kiln_kdesc *d = NULL;
  build_model(m, 3586, 1e-6f);
  KT_ASSERT_ERR(kiln_cuda_rmsnorm_describe(h, c, KILN_CUDA_RMSNORM_ROW_VEC, &m->nodes[0], &d, NULL),
                KILN_STATUS_UNSUPPORTED, "node blk.0.attn_norm: rmsnorm_row_vec needs hidden % 4");
  KT_ASSERT_OK(kiln_cuda_rmsnorm_describe(h, c, KILN_CUDA_RMSNORM_ROW_CC12, &m->nodes[0], &d, NULL));
  h->kdesc_free(d);
  build_model(m, 3584, 0.0f);
  KT_ASSERT_ERR(kiln_cuda_rmsnorm_describe(h, c, KILN_CUDA_RMSNORM_ROWS, &m->nodes[1], &d, NULL),
                KILN_STATUS_INVALID_ARGUMENT, "node blk.0.ffn_norm: rms_norm epsilon 0");
  build_model(m, 3584, 1e-6f);
  m->w[0].type = KILN_TYPE_Q4_K;
  KT_ASSERT_ERR(kiln_cuda_rmsnorm_describe(h, c, KILN_CUDA_RMSNORM_ROWS, &m->nodes[0], &d, NULL),
                KILN_STATUS_UNSUPPORTED, "weight blk.0.attn_norm.weight is Q4_K");
  m->w[0].type = KILN_TYPE_F32;
  m->w[0].ne[0] = 1000;
  KT_ASSERT_ERR(kiln_cuda_rmsnorm_describe(h, c, KILN_CUDA_RMSNORM_ROWS, &m->nodes[0], &d, NULL),
                KILN_STATUS_INVALID_ARGUMENT, "not a whole number of weight rows");
  /* Per-head norms (qwen3's q_norm): rows of head_dim inside wider rows. */
  m->w[0].ne[0] = 128;
  kiln_cuda_rmsnorm_launch l;
  KT_ASSERT_OK(kiln_cuda_rmsnorm_describe(h, c, KILN_CUDA_RMSNORM_ROWS, &m->nodes[0], &d, &l));
  assert_int_equal(l.hidden, 128);
  assert_int_equal(l.rows_per_token, 28);
  h->kdesc_free(d);
  m->nodes[0].op = KILN_OP_ADD;
  KT_ASSERT_ERR(kiln_cuda_rmsnorm_describe(h, c, KILN_CUDA_RMSNORM_ROWS, &m->nodes[0], &d, NULL),
                KILN_STATUS_INVALID_ARGUMENT, "op add is not rms_norm");
  free(m);
  kiln_kcache_close(kc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seed_eps_after_preload),
      cmocka_unit_test(test_seed_four_entries),
      cmocka_unit_test(test_describe_rejects),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
