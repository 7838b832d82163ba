/* The guard against the defect at the top of DESIGN.md: for every
 * registered template and every baked parameter, two descriptors that
 * differ only in that parameter must give different keys AND different PTX
 * (compiled with NVRTC, each in a service of its own so no tier can answer
 * for another); and over sampled pairs, equal keys must mean byte-identical
 * PTX. Built against libkiln, where it must pass, and (tests/unit/kcache.mk)
 * against services whose key leaves out one kind of baked value — an
 * RMSNorm's ε, the q/k L2 norms' ε, RoPE θ, a rotary section, a delta-rule
 * head dim, the conv width, the chunk size, a matvec_q matrix's way of reading
 * its weight (load0), its sets of rows per block, its bulk-copy stages, the
 * prefill GEMM's operand form (operand), the FP8 GEMM's baked scale
 * (fp8_max) in each of fp8_rows and fp8_input, the tensor-core decode
 * attention's cache type (mma_type), the split decode attention's
 * split count (n_split), its GQA ratio (n_head_kv) and whether it merges
 * itself (merge), every baked parameter
 * of the flash prefill attention (head_dim, n_head, n_head_kv, scale, bq, bk,
 * warps, kv_type), the KV cache's type (kv_type) in each of store_kv, attention,
 * attention_split and rope_store, every baked parameter of the integer
 * tensor-core prefill GEMM (mmq: mmq_type, quant, k, tile_m, tile_n, warps,
 * prefetch)
 * in mmq alone — where it must fail (XFAIL), proving the guard goes red
 * for each. */
#include "config.h"

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
#include "testutil.h"

/* Two values for every baked parameter any template declares. A template
 * with a parameter missing here fails the suite: add its values. */
typedef struct sample {
  const char *name;
  kiln_kparam_type type;
  double v[2];
  const char *s[2]; /* str parameters */
} sample;

/* Values shared by every template that declares the name, so each pair
 * must be valid for all of them (n_rot <= head_dim, n_head a multiple of
 * n_head_kv in every combination). */
static const sample samples[] = {
    {"eps", KILN_KPARAM_F32, {1e-5, 1e-6}, {NULL, NULL}},
    {"hidden", KILN_KPARAM_I64, {3584, 896}, {NULL, NULL}},
    {"w_type", KILN_KPARAM_DTYPE, {KILN_TYPE_F32, KILN_TYPE_F16}, {NULL, NULL}},
    {"block_size", KILN_KPARAM_I64, {256, 128}, {NULL, NULL}},
    {"rows_per_block", KILN_KPARAM_I64, {4, 8}, {NULL, NULL}},
    /* matvec */
    {"k_split", KILN_KPARAM_I64, {1, 2}, {NULL, NULL}},
    {"rows_per_group", KILN_KPARAM_I64, {2, 1}, {NULL, NULL}},
    {"bias", KILN_KPARAM_STR, {0, 0}, {"F32", "none"}},
    /* matvec, dequant_rows */
    {"k", KILN_KPARAM_I64, {4096, 768}, {NULL, NULL}},
    /* dequant_rows, gemm_input: the prefill GEMM's operand form (f32 is
     * dequant_rows' alone: gemm_input refuses it) */
    {"operand", KILN_KPARAM_STR, {0, 0}, {"bf16x3", "bf16"}},
    /* fp8_rows, fp8_input: the e4m3 value a row's amax maps to (448, or
     * headroom: the FP8 sibling of the seed's defect baked a scale) */
    {"fp8_max", KILN_KPARAM_F32, {448, 240}, {NULL, NULL}},
    /* bias_add */
    {"n", KILN_KPARAM_I64, {3584, 512}, {NULL, NULL}},
    /* store_kv */
    {"width", KILN_KPARAM_I64, {512, 1024}, {NULL, NULL}},
    /* store_kv, attention, attention_split, rope_store: the KV cache's
     * type (F16: rope_store writes no Q8_0; test_cuda_templates compiles
     * every type in each) */
    {"kv_type", KILN_KPARAM_DTYPE, {KILN_TYPE_F32, KILN_TYPE_F16}, {NULL, NULL}},
    /* quantize, matvec_q, add_rmsnorm, swiglu_q */
    {"quant", KILN_KPARAM_STR, {0, 0}, {"q16", "q8"}},
    {"add", KILN_KPARAM_I64, {1, 0}, {NULL, NULL}},
    {"type0", KILN_KPARAM_STR, {0, 0}, {"Q4_K", "Q6_K"}},
    {"type1", KILN_KPARAM_STR, {0, 0}, {"Q6_K", "Q8_0"}},
    {"type2", KILN_KPARAM_STR, {0, 0}, {"Q5_K", "Q5_0"}},
    {"rows0", KILN_KPARAM_I64, {3584, 512}, {NULL, NULL}},
    {"rows1", KILN_KPARAM_I64, {512, 3584}, {NULL, NULL}},
    {"rows2", KILN_KPARAM_I64, {512, 18944}, {NULL, NULL}},
    {"groups_per_block", KILN_KPARAM_I64, {1, 2}, {NULL, NULL}},
    /* direct first: stages (the bulk-copy grid) needs every load direct */
    {"load0", KILN_KPARAM_STR, {0, 0}, {"direct", "staged"}},
    {"load1", KILN_KPARAM_STR, {0, 0}, {"direct", "staged"}},
    {"load2", KILN_KPARAM_STR, {0, 0}, {"direct", "staged"}},
    {"stages", KILN_KPARAM_I64, {0, 2}, {NULL, NULL}},
    {"bias0", KILN_KPARAM_STR, {0, 0}, {"F32", "none"}},
    {"bias1", KILN_KPARAM_STR, {0, 0}, {"F16", "none"}},
    {"bias2", KILN_KPARAM_STR, {0, 0}, {"BF16", "none"}},
    /* rope, attention */
    {"mode", KILN_KPARAM_STR, {0, 0}, {"NEOX", "NORM"}},
    {"n_rot", KILN_KPARAM_I64, {64, 32}, {NULL, NULL}},
    {"head_dim", KILN_KPARAM_I64, {128, 64}, {NULL, NULL}},
    {"n_head", KILN_KPARAM_I64, {28, 14}, {NULL, NULL}},
    {"n_head_kv", KILN_KPARAM_I64, {2, 7}, {NULL, NULL}},
    {"theta", KILN_KPARAM_F32, {1e6, 1e4}, {NULL, NULL}},
    {"scale", KILN_KPARAM_F32, {0.08838834764831845, 0.125}, {NULL, NULL}},
    {"warps", KILN_KPARAM_I64, {4, 8}, {NULL, NULL}},
    /* attention_split, attention_merge: 28/2 and 14/7 heads give groups of
     * 14, 7, 4 and 2, each within the split kernel's registers at head_dim 128 */
    {"n_split", KILN_KPARAM_I64, {16, 5}, {NULL, NULL}},
    /* attention_split: the merge fused in first (quant and k matter only
     * there); 14 heads a KV head at 16 splits fit it */
    {"merge", KILN_KPARAM_I64, {1, 0}, {NULL, NULL}},
    /* mmq: the weight's block type, its tile (every combination divides
     * evenly among 4 or 8 warps and fits 48 KiB) */
    {"mmq_type", KILN_KPARAM_DTYPE, {KILN_TYPE_Q4_K, KILN_TYPE_Q6_K}, {NULL, NULL}},
    {"tile_m", KILN_KPARAM_I64, {128, 64}, {NULL, NULL}},
    {"tile_n", KILN_KPARAM_I64, {64, 32}, {NULL, NULL}},
    {"prefetch", KILN_KPARAM_I64, {0, 1}, {NULL, NULL}},
    /* attention_mma: the KV cache's 16-bit type, the tensor cores' input */
    {"mma_type", KILN_KPARAM_STR, {0, 0}, {"f16", "bf16"}},
    /* flash_attention: tiles of 32 or 64 query rows and keys; with warps
     * 4 or 8 that is 4..16 rows a warp, within its registers at head_dim
     * 128 and 64 */
    {"bq", KILN_KPARAM_I64, {64, 32}, {NULL, NULL}},
    {"bk", KILN_KPARAM_I64, {64, 32}, {NULL, NULL}},
    /* slice */
    {"width", KILN_KPARAM_I64, {4096, 2048}, {NULL, NULL}},
    {"offset", KILN_KPARAM_I64, {0, 64}, {NULL, NULL}},
    {"length", KILN_KPARAM_I64, {64, 32}, {NULL, NULL}},
    {"stride", KILN_KPARAM_I64, {256, 128}, {NULL, NULL}},
    /* ssm_conv, gdn_gate */
    {"channels", KILN_KPARAM_I64, {8192, 96}, {NULL, NULL}},
    {"d_conv", KILN_KPARAM_I64, {4, 3}, {NULL, NULL}},
    {"n_heads", KILN_KPARAM_I64, {32, 4}, {NULL, NULL}},
    /* gdn_recurrent, gdn_chunked */
    {"n_k_heads", KILN_KPARAM_I64, {2, 1}, {NULL, NULL}},
    {"n_v_heads", KILN_KPARAM_I64, {32, 4}, {NULL, NULL}},
    {"head_k_dim", KILN_KPARAM_I64, {128, 64}, {NULL, NULL}},
    {"head_v_dim", KILN_KPARAM_I64, {128, 96}, {NULL, NULL}},
    {"l2_eps", KILN_KPARAM_F32, {1e-6, 1e-5}, {NULL, NULL}},
    {"q_scale", KILN_KPARAM_F32, {0.08838834764831845, 0.125}, {NULL, NULL}},
    {"chunk", KILN_KPARAM_I64, {64, 16}, {NULL, NULL}},
    {"cols", KILN_KPARAM_I64, {32, 16}, {NULL, NULL}},
    /* rope_imrope */
    {"sect_t", KILN_KPARAM_I64, {2, 11}, {NULL, NULL}}, /* base sum 23 < n_rot/2: sect_e matters */
    {"sect_h", KILN_KPARAM_I64, {11, 1}, {NULL, NULL}},
    {"sect_w", KILN_KPARAM_I64, {10, 1}, {NULL, NULL}},
    {"sect_e", KILN_KPARAM_I64, {0, 1}, {NULL, NULL}},
};

/* A build that drops a parameter from the key (tests/unit/kcache.mk)
 * checks that parameter alone, in every template that declares it (or in
 * KILN_KCACHE_TEST_DROP_TEMPLATE alone, when the build names one: the
 * first template to go red ends the suite, so a parameter several
 * templates share names the one it is meant to prove): the guard must go
 * red there, and the rest cannot tell (nor need the compile time: there
 * is one such build per kind of baked value). */
#ifdef KILN_KCACHE_TEST_DROP_PARAM
static bool in_scope(const char *param) { return strcmp(param, KILN_KCACHE_TEST_DROP_PARAM) == 0; }
#else
static bool in_scope(const char *param) {
  (void)param;
  return true;
}
#endif
#ifdef KILN_KCACHE_TEST_DROP_TEMPLATE
static bool template_in_scope(const char *name) {
  return strcmp(name, KILN_KCACHE_TEST_DROP_TEMPLATE) == 0;
}
#else
static bool template_in_scope(const char *name) {
  (void)name;
  return true;
}
#endif

static const sample *sample_for(const char *tmpl, const kiln_kparam_decl *p) {
  for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
    if (strcmp(samples[i].name, p->name) == 0) {
      if (samples[i].type != p->type)
        fail_msg("template %s: parameter %s is %s here, the suite samples it as %s", tmpl,
                 p->name, kiln_kparam_type_name(p->type), kiln_kparam_type_name(samples[i].type));
      return &samples[i];
    }
  fail_msg("template %s: no sample values for baked parameter %s: add two to samples[]", tmpl,
           p->name);
  return NULL;
}

static kiln_nvrtc nv; /* one NVRTC set-up (probe) for the whole suite */

/* One compiled kernel: its key and a copy of its PTX. */
typedef struct result {
  kiln_kkey key;
  char *ptx;
  size_t size;
} result;

/* Compiles template `t` with parameter i set to samples[...].v[choice[i]],
 * in a fresh memory-only service, so the PTX is the compile of exactly this
 * descriptor whatever its key. */
static result compile_choice(const kiln_ktemplate *t, const int *choice) {
  const kiln_host_api *h = kt_kcache_host();
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  KT_ASSERT_OK(kiln_cuda_templates_register(h, kc));
  kiln_kcompiler_desc cd;
  kiln_nvrtc_compiler_desc(&nv, &cd);
  kiln_kcompiler *c;
  KT_ASSERT_OK(h->kcache_register_compiler(kc, &cd, &c));
  kiln_kdesc *d;
  KT_ASSERT_OK(h->kdesc_new(c, t->name, &d));
  for (uint32_t i = 0; i < t->n_params; i++) {
    const kiln_kparam_decl *p = &t->params[i];
    if (p->kind != KILN_KPARAM_BAKED) continue;
    const sample *s = sample_for(t->name, p);
    double v = s->v[choice[i]];
    switch (p->type) {
    case KILN_KPARAM_F32: KT_ASSERT_OK(h->kdesc_set_f32(d, p->name, (float)v)); break;
    case KILN_KPARAM_F64: KT_ASSERT_OK(h->kdesc_set_f64(d, p->name, v)); break;
    case KILN_KPARAM_I64: KT_ASSERT_OK(h->kdesc_set_i64(d, p->name, (int64_t)v)); break;
    case KILN_KPARAM_DTYPE: KT_ASSERT_OK(h->kdesc_set_dtype(d, p->name, (kiln_type)v)); break;
    case KILN_KPARAM_STR: KT_ASSERT_OK(h->kdesc_set_str(d, p->name, s->s[choice[i]])); break;
    default: fail_msg("template %s: parameter %s: type not sampled", t->name, p->name);
    }
  }
  kiln_kernel *k;
  KT_ASSERT_OK(h->kcache_get(d, &k));
  h->kdesc_free(d);
  result r = {.key = k->key, .size = k->image_size};
  r.ptx = malloc(k->image_size);
  memcpy(r.ptx, k->image, k->image_size);
  kiln_kcache_close(kc);
  return r;
}

static bool same_ptx(const result *a, const result *b) {
  return a->size == b->size && memcmp(a->ptx, b->ptx, a->size) == 0;
}

static int setup(void **state) {
  kiln_status st = kiln_nvrtc_init(&nv, kt_kcache_host(), "sm_90");
  if (st) {
    fprintf(stderr, "NVRTC set-up failed: %s\n", kiln_status_message(st));
    kiln_status_free(st);
    return -1;
  }
  return 0;
}

/* Every template, every baked parameter: different keys and different PTX. */
static void test_each_baked_parameter(void **state) {
  unsigned checked = 0;
  for (unsigned ti = 0; ti < kiln_cuda_n_templates; ti++) {
    const kiln_ktemplate *t = kiln_cuda_templates[ti];
    bool any = false;
    for (uint32_t i = 0; i < t->n_params; i++) any = any || in_scope(t->params[i].name);
    any = any && template_in_scope(t->name);
    if (!any) continue;
    int choice[KILN_KTEMPLATE_MAX_PARAMS] = {0};
    result base = compile_choice(t, choice);
    for (uint32_t i = 0; i < t->n_params; i++) {
      if (t->params[i].kind != KILN_KPARAM_BAKED || !in_scope(t->params[i].name)) continue;
      choice[i] = 1;
      result other = compile_choice(t, choice);
      choice[i] = 0;
      char ka[KILN_KKEY_HEX_SIZE], kb[KILN_KKEY_HEX_SIZE];
      kiln_kkey_format(&base.key, ka);
      kiln_kkey_format(&other.key, kb);
      printf("%-18s %-15s keys %s / %s, PTX %zu / %zu bytes%s\n", t->name, t->params[i].name,
             ka, kb, base.size, other.size, same_ptx(&base, &other) ? " IDENTICAL" : "");
      if (same_ptx(&base, &other))
        fail_msg("template %s: changing %s does not change the PTX: is it really baked?",
                 t->name, t->params[i].name);
      if (kiln_kkey_equal(&base.key, &other.key))
        fail_msg("template %s: descriptors differing only in %s have the same key %s but "
                 "different PTX: the key does not cover %s",
                 t->name, t->params[i].name, ka, t->params[i].name);
      free(other.ptx);
      checked++;
    }
    free(base.ptx);
  }
#ifdef KILN_KCACHE_TEST_DROP_PARAM
  assert_true(checked >= 1);
#else
  assert_true(checked >= 3 * 4);
#endif
}

#ifndef KILN_KCACHE_TEST_DROP_PARAM
/* Sampled descriptors (a fixed pseudo-random draw, some drawn twice): for
 * every pair, equal keys <=> byte-identical PTX. */
/* The index of t's parameter `name`, or -1. */
static int param_index(const kiln_ktemplate *t, const char *name) {
  for (uint32_t i = 0; i < t->n_params; i++)
    if (strcmp(t->params[i].name, name) == 0) return (int)i;
  return -1;
}

/* A random combination the template would refuse made one it takes:
 * matvec_q's bulk-copy stages need every load direct and one set of rows
 * a block (samples v[0]), so a combination with a staged load or two sets
 * keeps stages 0. */
static void make_valid(const kiln_ktemplate *t, int *choice) {
  const int st = param_index(t, "stages");
  if (st < 0 || !choice[st]) return;
  static const char *const conflicts[] = {"load0", "load1", "load2", "groups_per_block"};
  for (size_t i = 0; i < sizeof conflicts / sizeof conflicts[0]; i++) {
    const int j = param_index(t, conflicts[i]);
    if (j >= 0 && choice[j]) choice[st] = 0;
  }
}

static void test_sampled_pairs(void **state) {
  enum { N = 8 };
  uint32_t s = 2024;
  for (unsigned ti = 0; ti < kiln_cuda_n_templates; ti++) {
    const kiln_ktemplate *t = kiln_cuda_templates[ti];
    int choices[N][KILN_KTEMPLATE_MAX_PARAMS];
    result r[N];
    for (int n = 0; n < N; n++) {
      for (uint32_t i = 0; i < KILN_KTEMPLATE_MAX_PARAMS; i++) {
        s = s * 1664525u + 1013904223u;
        choices[n][i] = (s >> 16) & 1;
      }
      if (n == N - 1) memcpy(choices[n], choices[0], sizeof choices[n]); /* a repeat */
      /* two that differ only in eps */
      if (n == N - 2) {
        memcpy(choices[n], choices[1], sizeof choices[n]);
        for (uint32_t i = 0; i < t->n_params; i++)
          if (strcmp(t->params[i].name, "eps") == 0) choices[n][i] ^= 1;
      }
      make_valid(t, choices[n]);
      r[n] = compile_choice(t, choices[n]);
    }
    for (int a = 0; a < N; a++)
      for (int b = 0; b < a; b++) {
        bool ke = kiln_kkey_equal(&r[a].key, &r[b].key), pe = same_ptx(&r[a], &r[b]);
        if (ke != pe)
          fail_msg("template %s: descriptors %d and %d have %s keys but %s PTX", t->name, a, b,
                   ke ? "equal" : "different", pe ? "identical" : "different");
      }
    assert_true(kiln_kkey_equal(&r[0].key, &r[N - 1].key));
    for (int n = 0; n < N; n++) free(r[n].ptx);
  }
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_baked_parameter),
#ifndef KILN_KCACHE_TEST_DROP_PARAM
      cmocka_unit_test(test_sampled_pairs),
#endif
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
