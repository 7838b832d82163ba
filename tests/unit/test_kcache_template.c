/* Kernel-cache service: template registration (placeholders against the
 * schema), descriptor setters, compiler registration. No compiler runs. */
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

#include "kcache/kcache_internal.h"
#include "kcache_testhost.h"
#include "testutil.h"

static const kiln_kparam_decl toy_params[] = {
    {"scale", KILN_KPARAM_F32, KILN_KPARAM_BAKED, "a float"},
    {"bias", KILN_KPARAM_F64, KILN_KPARAM_BAKED, "a double"},
    {"count", KILN_KPARAM_I64, KILN_KPARAM_BAKED, "an integer"},
    {"tag", KILN_KPARAM_STR, KILN_KPARAM_BAKED, "a token"},
    {"ty", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED, "a type"},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, "output"},
    {"n", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, "count"},
};

static const char toy_source[] =
    "#define TY_{{ty}} 1\n"
    "extern \"C\" __global__ void toy_x(float *y, int n) { /* {{tag}} */\n"
    "  if ((int)threadIdx.x < n) y[threadIdx.x] = {{scale}} * (float){{bias}} + {{count}};\n"
    "}\n";

static kiln_ktemplate toy_ok(void) {
  kiln_ktemplate t = {.name = "toy",
                      .version = 1,
                      .entry = "toy_x",
                      .source = toy_source,
                      .params = toy_params,
                      .n_params = sizeof toy_params / sizeof toy_params[0],
                      .help = "a toy"};
  return t;
}

static kiln_status never_compile(void *user, const char *program, const char *source,
                                 const char *const *options, uint32_t n_options,
                                 void **out_image, size_t *out_size) {
  return kiln_status_new(KILN_STATUS_UNSUPPORTED, "this suite compiles nothing");
}
static void no_free(void *user, void *image) {}

static kiln_kcompiler *compiler_for(kiln_kcache *kc, const char *arch) {
  static const char *const opts[] = {"-O3"};
  kiln_kcompiler_desc d = {.name = "testcc",
                           .version = "1.0",
                           .arch = arch,
                           .options = opts,
                           .n_options = 1,
                           .image_kind = KILN_KIMAGE_PTX,
                           .compile = never_compile,
                           .free_image = no_free};
  kiln_kcompiler *c = NULL;
  KT_ASSERT_OK(kiln_kcache_register_compiler(kc, &d, &c));
  return c;
}

static void test_register_and_reregister(void **state) {
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  kiln_ktemplate t = toy_ok();
  KT_ASSERT_OK(kiln_kcache_register_template(kc, &t));
  KT_ASSERT_OK(kiln_kcache_register_template(kc, &t)); /* identical: no-op */
  assert_int_equal(kiln_kcache_template_count(kc), 1);
  const kiln_ktemplate *c = kiln_kcache_template_at(kc, 0);
  assert_string_equal(c->name, "toy");
  assert_int_equal(c->n_params, 7);
  assert_null(kiln_kcache_template_at(kc, 1));

  kiln_ktemplate t2 = t;
  t2.version = 2;
  KT_ASSERT_ERR(kiln_kcache_register_template(kc, &t2), KILN_STATUS_INVALID_ARGUMENT,
                "template toy: already registered");
  kiln_kcache_close(kc);
}

/* A source placeholder the schema does not declare: names both. */
static void test_undeclared_placeholder(void **state) {
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  static const kiln_kparam_decl p[] = {{"eps", KILN_KPARAM_F32, KILN_KPARAM_BAKED, NULL}};
  kiln_ktemplate t = {.name = "norm_bad", .version = 1, .entry = "k",
                      .source = "extern \"C\" __global__ void k() {\n float e = {{eps}};\n"
                                " float f = {{epsilon}};\n}\n",
                      .params = p, .n_params = 1};
  KT_ASSERT_ERR(kiln_kcache_register_template(kc, &t), KILN_STATUS_INVALID_ARGUMENT,
                "template norm_bad: source line 3 uses placeholder {{epsilon}}, but parameter "
                "epsilon is not declared in the schema (declared baked parameters: eps)");
  assert_int_equal(kiln_kcache_template_count(kc), 0);
  kiln_kcache_close(kc);
}

/* A declared parameter the source never uses: names both. */
static void test_unused_declared(void **state) {
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  static const kiln_kparam_decl p[] = {{"eps", KILN_KPARAM_F32, KILN_KPARAM_BAKED, NULL},
                                       {"theta", KILN_KPARAM_F32, KILN_KPARAM_BAKED, NULL}};
  kiln_ktemplate t = {.name = "rope_bad", .version = 1, .entry = "k",
                      .source = "extern \"C\" __global__ void k() { float e = {{eps}}; }\n",
                      .params = p, .n_params = 2};
  KT_ASSERT_ERR(kiln_kcache_register_template(kc, &t), KILN_STATUS_INVALID_ARGUMENT,
                "template rope_bad: declares baked parameter theta, which the source never uses");

  static const kiln_kparam_decl r[] = {{"eps", KILN_KPARAM_F32, KILN_KPARAM_BAKED, NULL},
                                       {"n_rows", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, NULL}};
  t.name = "rt_bad";
  t.params = r;
  KT_ASSERT_ERR(kiln_kcache_register_template(kc, &t), KILN_STATUS_INVALID_ARGUMENT,
                "template rt_bad: declares runtime parameter n_rows");
  /* A runtime parameter is a kernel argument, never a placeholder. */
  t.name = "rt_placeholder";
  t.source = "extern \"C\" __global__ void k(int n_rows) { float e = {{eps}} * {{n_rows}}; }\n";
  KT_ASSERT_ERR(kiln_kcache_register_template(kc, &t), KILN_STATUS_INVALID_ARGUMENT,
                "parameter n_rows is declared runtime");
  kiln_kcache_close(kc);
}

static void test_bad_templates(void **state) {
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  static const kiln_kparam_decl p[] = {{"eps", KILN_KPARAM_F32, KILN_KPARAM_BAKED, NULL}};
  kiln_ktemplate t = {.name = "b", .version = 1, .entry = "k",
                      .source = "extern \"C\" __global__ void k() {\n float e = {{ eps }};\n}\n",
                      .params = p, .n_params = 1};
  KT_ASSERT_ERR(kiln_kcache_register_template(kc, &t), KILN_STATUS_INVALID_ARGUMENT,
                "template b: source line 2: \"{{\" does not open a placeholder");
  t.source = "extern \"C\" __global__ void k() { int a[1][1] = {{0}}; float e = {{eps}}; }\n";
  KT_ASSERT_ERR(kiln_kcache_register_template(kc, &t), KILN_STATUS_INVALID_ARGUMENT,
                "does not open a placeholder");
  t.source = "extern \"C\" __global__ void other() { float e = {{eps}}; }\n";
  KT_ASSERT_ERR(kiln_kcache_register_template(kc, &t), KILN_STATUS_INVALID_ARGUMENT,
                "never names its entry k");
  t.source = "extern \"C\" __global__ void k() { float e = {{eps}}; }\n";
  t.name = "Bad-Name";
  KT_ASSERT_ERR(kiln_kcache_register_template(kc, &t), KILN_STATUS_INVALID_ARGUMENT,
                "template name \"Bad-Name\"");
  t.name = "b";
  t.version = 0;
  KT_ASSERT_ERR(kiln_kcache_register_template(kc, &t), KILN_STATUS_INVALID_ARGUMENT,
                "version must be >= 1");
  t.version = 1;
  static const kiln_kparam_decl dup[] = {{"eps", KILN_KPARAM_F32, KILN_KPARAM_BAKED, NULL},
                                         {"eps", KILN_KPARAM_F32, KILN_KPARAM_BAKED, NULL}};
  t.params = dup;
  t.n_params = 2;
  KT_ASSERT_ERR(kiln_kcache_register_template(kc, &t), KILN_STATUS_INVALID_ARGUMENT,
                "parameter eps declared twice");
  static const kiln_kparam_decl ptr[] = {{"eps", KILN_KPARAM_PTR, KILN_KPARAM_BAKED, NULL}};
  t.params = ptr;
  t.n_params = 1;
  KT_ASSERT_ERR(kiln_kcache_register_template(kc, &t), KILN_STATUS_INVALID_ARGUMENT,
                "parameter eps: type ptr cannot be baked");
  static const kiln_kparam_decl upper[] = {{"Eps", KILN_KPARAM_F32, KILN_KPARAM_BAKED, NULL}};
  t.params = upper;
  KT_ASSERT_ERR(kiln_kcache_register_template(kc, &t), KILN_STATUS_INVALID_ARGUMENT,
                "name \"Eps\"");
  assert_int_equal(kiln_kcache_template_count(kc), 0);
  kiln_kcache_close(kc);
}

static void test_setters(void **state) {
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  kiln_ktemplate t = toy_ok();
  KT_ASSERT_OK(kiln_kcache_register_template(kc, &t));
  kiln_kcompiler *c = compiler_for(kc, "sm_90");
  kiln_kdesc *d = NULL;
  KT_ASSERT_ERR(kiln_kdesc_new(c, "nope", &d), KILN_STATUS_NOT_FOUND, "nope is not registered");
  KT_ASSERT_OK(kiln_kdesc_new(c, "toy", &d));

  KT_ASSERT_ERR(kiln_kdesc_set_f32(d, "epsilon", 1e-6f), KILN_STATUS_NOT_FOUND,
                "template toy: no parameter epsilon in its schema");
  KT_ASSERT_ERR(kiln_kdesc_set_i64(d, "scale", 3), KILN_STATUS_INVALID_ARGUMENT,
                "template toy: parameter scale is declared f32, set as i64");
  KT_ASSERT_ERR(kiln_kdesc_set_f64(d, "scale", 3), KILN_STATUS_INVALID_ARGUMENT,
                "declared f32, set as f64");
  KT_ASSERT_ERR(kiln_kdesc_set_f32(d, "scale", NAN), KILN_STATUS_INVALID_ARGUMENT,
                "not finite");
  KT_ASSERT_ERR(kiln_kdesc_set_f64(d, "bias", INFINITY), KILN_STATUS_INVALID_ARGUMENT,
                "not finite");
  KT_ASSERT_ERR(kiln_kdesc_set_i64(d, "n", 4), KILN_STATUS_INVALID_ARGUMENT,
                "parameter n is a runtime kernel argument");
  KT_ASSERT_ERR(kiln_kdesc_set_str(d, "tag", "a b"), KILN_STATUS_INVALID_ARGUMENT,
                "is not [A-Za-z0-9_]");
  KT_ASSERT_ERR(kiln_kdesc_set_str(d, "tag", "x;system()"), KILN_STATUS_INVALID_ARGUMENT,
                "is not [A-Za-z0-9_]");
  KT_ASSERT_ERR(kiln_kdesc_set_str(d, "tag", ""), KILN_STATUS_INVALID_ARGUMENT,
                "is not [A-Za-z0-9_]");
  KT_ASSERT_ERR(kiln_kdesc_set_dtype(d, "ty", (kiln_type)5), KILN_STATUS_INVALID_ARGUMENT,
                "type id 5");

  /* Missing parameters: named in name order. */
  KT_ASSERT_OK(kiln_kdesc_set_f32(d, "scale", 2.0f));
  KT_ASSERT_OK(kiln_kdesc_set_str(d, "tag", "x"));
  kiln_kkey k;
  KT_ASSERT_ERR(kiln_kdesc_key(d, &k), KILN_STATUS_INVALID_ARGUMENT,
                "template toy: baked parameter bias was never set");
  KT_ASSERT_OK(kiln_kdesc_set_f64(d, "bias", 0.5));
  KT_ASSERT_OK(kiln_kdesc_set_i64(d, "count", 7));
  kiln_kernel *kern = NULL;
  KT_ASSERT_ERR(kiln_kcache_get(d, &kern), KILN_STATUS_INVALID_ARGUMENT,
                "baked parameter ty was never set");
  KT_ASSERT_OK(kiln_kdesc_set_dtype(d, "ty", KILN_TYPE_BF16));
  KT_ASSERT_OK(kiln_kdesc_key(d, &k));
  /* Complete, so get reaches the compiler, whose error comes back annotated. */
  KT_ASSERT_ERR(kiln_kcache_get(d, &kern), KILN_STATUS_UNSUPPORTED,
                "compiling kernel toy for sm_90");
  assert_null(kern);
  kiln_kdesc_free(d);
  kiln_kcache_close(kc);
}

/* Exact arch strings: 12.0 and 12.1 are different targets and keys. */
static void test_compiler_targets(void **state) {
  char a[16];
  KT_ASSERT_OK(kiln_kcache_arch_from_cc(12, 0, a));
  assert_string_equal(a, "sm_120");
  KT_ASSERT_OK(kiln_kcache_arch_from_cc(12, 1, a));
  assert_string_equal(a, "sm_121");
  KT_ASSERT_OK(kiln_kcache_arch_from_cc(9, 0, a));
  assert_string_equal(a, "sm_90");
  KT_ASSERT_ERR(kiln_kcache_arch_from_cc(9, 10, a), KILN_STATUS_INVALID_ARGUMENT, "9.10");

  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  kiln_ktemplate t = toy_ok();
  KT_ASSERT_OK(kiln_kcache_register_template(kc, &t));
  static const char *const bad[] = {"sm_9x", "compute_90", "sm_90 ", "90", "sm_", "sm_90ab", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    kiln_kcompiler_desc d = {.name = "testcc", .version = "1.0", .arch = bad[i],
                             .compile = never_compile, .free_image = no_free};
    kiln_kcompiler *c = NULL;
    KT_ASSERT_ERR(kiln_kcache_register_compiler(kc, &d, &c), KILN_STATUS_INVALID_ARGUMENT,
                  "is not an exact sm_XY");
  }
  kiln_kcompiler_desc nl = {.name = "testcc", .version = "1.0\nkernel-abi 9", .arch = "sm_90",
                            .compile = never_compile, .free_image = no_free};
  kiln_kcompiler *cx = NULL;
  KT_ASSERT_ERR(kiln_kcache_register_compiler(kc, &nl, &cx), KILN_STATUS_INVALID_ARGUMENT,
                "control characters");

  static const char *const archs[] = {"sm_120", "sm_121", "sm_90", "sm_90a"};
  kiln_kkey keys[4];
  for (int i = 0; i < 4; i++) {
    kiln_kcompiler *c = compiler_for(kc, archs[i]);
    kiln_kdesc *d;
    KT_ASSERT_OK(kiln_kdesc_new(c, "toy", &d));
    KT_ASSERT_OK(kiln_kdesc_set_f32(d, "scale", 1.0f));
    KT_ASSERT_OK(kiln_kdesc_set_f64(d, "bias", 1.0));
    KT_ASSERT_OK(kiln_kdesc_set_i64(d, "count", 1));
    KT_ASSERT_OK(kiln_kdesc_set_str(d, "tag", "t"));
    KT_ASSERT_OK(kiln_kdesc_set_dtype(d, "ty", KILN_TYPE_F32));
    KT_ASSERT_OK(kiln_kdesc_key(d, &keys[i]));
    char *canon;
    KT_ASSERT_OK(kiln_kdesc_canonical(d, &canon));
    char line[32];
    snprintf(line, sizeof line, "\narch %s\n", archs[i]);
    assert_non_null(strstr(canon, line));
    free(canon);
    kiln_kdesc_free(d);
    for (int j = 0; j < i; j++) assert_false(kiln_kkey_equal(&keys[i], &keys[j]));
  }
  kiln_kcache_close(kc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_register_and_reregister),
      cmocka_unit_test(test_undeclared_placeholder),
      cmocka_unit_test(test_unused_declared),
      cmocka_unit_test(test_bad_templates),
      cmocka_unit_test(test_setters),
      cmocka_unit_test(test_compiler_targets),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
