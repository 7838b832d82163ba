/* Kernel-cache service: the canonical form and the key, pinned by fixed
 * test vectors (the format is documented in kiln/kcache.h), the rendering
 * of baked values, and the entry encoding. No compiler runs. */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include <cmocka.h>

#include "kcache/kcache_internal.h"
#include "kcache_testhost.h"
#include "testutil.h"

static const kiln_kparam_decl toy_params[] = {
    {"scale", KILN_KPARAM_F32, KILN_KPARAM_BAKED, NULL},
    {"bias", KILN_KPARAM_F64, KILN_KPARAM_BAKED, NULL},
    {"count", KILN_KPARAM_I64, KILN_KPARAM_BAKED, NULL},
    {"tag", KILN_KPARAM_STR, KILN_KPARAM_BAKED, NULL},
    {"ty", KILN_KPARAM_DTYPE, KILN_KPARAM_BAKED, NULL},
    {"y", KILN_KPARAM_PTR, KILN_KPARAM_RUNTIME, NULL},
    {"n", KILN_KPARAM_I32, KILN_KPARAM_RUNTIME, NULL},
};

static const char toy_source[] =
    "#define TY_{{ty}} 1\n"
    "extern \"C\" __global__ void toy_x(float *y, int n) { /* {{tag}} */\n"
    "  if ((int)threadIdx.x < n) y[threadIdx.x] = {{scale}} * (float){{bias}} + {{count}};\n"
    "}\n";

static const kiln_ktemplate toy = {.name = "toy", .version = 1, .entry = "toy_x",
                                   .source = toy_source, .params = toy_params,
                                   .n_params = sizeof toy_params / sizeof toy_params[0]};

static const kiln_kparam_decl eps_params[] = {{"eps", KILN_KPARAM_F32, KILN_KPARAM_BAKED, NULL}};
static const kiln_ktemplate epsk = {
    .name = "eps_only", .version = 3, .entry = "k",
    .source = "extern \"C\" __global__ void k(float *y) { y[0] = {{eps}}; }\n",
    .params = eps_params, .n_params = 1};

static kiln_status never_compile(void *user, const char *program, const char *source,
                                 const char *const *options, uint32_t n_options,
                                 void **out_image, size_t *out_size) {
  return kiln_status_new(KILN_STATUS_UNSUPPORTED, "this suite compiles nothing");
}
static void no_free(void *user, void *image) {}

static kiln_kcompiler *compiler(kiln_kcache *kc, const char *version, const char *arch,
                                const char *const *opts, uint32_t n_opts) {
  kiln_kcompiler_desc d = {.name = "testcc", .version = version, .arch = arch,
                           .options = opts, .n_options = n_opts,
                           .image_kind = KILN_KIMAGE_PTX, .compile = never_compile,
                           .free_image = no_free};
  kiln_kcompiler *c = NULL;
  KT_ASSERT_OK(kiln_kcache_register_compiler(kc, &d, &c));
  return c;
}

static const char *const vec_opts[] = {"-O3", "--std=c++17"};

static kiln_kdesc *toy_desc(kiln_kcompiler *c) {
  kiln_kdesc *d;
  KT_ASSERT_OK(kiln_kdesc_new(c, "toy", &d));
  KT_ASSERT_OK(kiln_kdesc_set_f32(d, "scale", 1e-6f));
  KT_ASSERT_OK(kiln_kdesc_set_f64(d, "bias", -0.25));
  KT_ASSERT_OK(kiln_kdesc_set_i64(d, "count", 5000000000LL));
  KT_ASSERT_OK(kiln_kdesc_set_str(d, "tag", "v2"));
  KT_ASSERT_OK(kiln_kdesc_set_dtype(d, "ty", KILN_TYPE_Q4_K));
  return d;
}

static void hex128(const void *data, size_t n, char out[33]) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(data, n));
  for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", c.digest[i]);
}

/* Fixed vectors. If one of these changes, every cache entry written before
 * is orphaned (a miss, never a wrong hit): change them only with the
 * format's version (KILN_KCACHE_CANON_VERSION) or KILN_KERNEL_ABI. */
#define TOY_TEMPLATE_HASH "a780b1bddf0b3e2a99397801b7695af6"
#define TOY_SOURCE_HASH "a2d0df4e4f3f8cec2cc61fad98482163"
#define TOY_KEY "670fec96eed782dbd148bba453c046b3"
#define EPS_1E5_KEY "989ab346a36faab14f505c926c824b3a"
#define EPS_1E6_KEY "936b7de9aadd4016e46bf8c698f3e62b"

static const char toy_rendered[] =
    "#define TY_Q4_K 1\n"
    "extern \"C\" __global__ void toy_x(float *y, int n) { /* v2 */\n"
    "  if ((int)threadIdx.x < n) y[threadIdx.x] = 0x1.0c6f7ap-20f * (float)(-0x1p-2) + "
    "5000000000LL;\n"
    "}\n";

static const char toy_canonical[] =
    "kiln-kdesc 1\n"
    "template toy\n"
    "template-version 1\n"
    "template-source xxh3-128:" TOY_TEMPLATE_HASH "\n"
    "entry toy_x\n"
    "param bias f64 0xbfd0000000000000\n"
    "param count i64 5000000000\n"
    "param scale f32 0x358637bd\n"
    "param tag str v2\n"
    "param ty dtype Q4_K\n"
    "compiler testcc\n"
    "compiler-version 1.2.3 build 45\n"
    "arch sm_90\n"
    "option -O3\n"
    "option --std=c++17\n"
    "kernel-abi 1\n"
    "source xxh3-128:" TOY_SOURCE_HASH "\n";

static void test_vector_toy(void **state) {
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  KT_ASSERT_OK(kiln_kcache_register_template(kc, &toy));
  kiln_kcompiler *c = compiler(kc, "1.2.3 build 45", "sm_90", vec_opts, 2);
  kiln_kdesc *d = toy_desc(c);

  char h[33];
  hex128(toy_source, strlen(toy_source), h);
  printf("template hash %s\n", h);
  assert_string_equal(h, TOY_TEMPLATE_HASH);
  hex128(toy_rendered, strlen(toy_rendered), h);
  printf("source hash %s\n", h);
  assert_string_equal(h, TOY_SOURCE_HASH);

  char *src;
  KT_ASSERT_OK(kiln__kdesc_render(d, &src));
  assert_string_equal(src, toy_rendered);
  free(src);
  char *canon;
  KT_ASSERT_OK(kiln_kdesc_canonical(d, &canon));
  printf("%s", canon);
  assert_string_equal(canon, toy_canonical);
  free(canon);

  kiln_kkey k;
  char kh[KILN_KKEY_HEX_SIZE];
  KT_ASSERT_OK(kiln_kdesc_key(d, &k));
  kiln_kkey_format(&k, kh);
  hex128(toy_canonical, strlen(toy_canonical), h);
  printf("key %s (xxh3 of the expected text %s)\n", kh, h);
  assert_string_equal(kh, h);
  assert_string_equal(kh, TOY_KEY);
  kiln_kdesc_free(d);
  kiln_kcache_close(kc);
}

static void eps_key(kiln_kcompiler *c, float eps, char out[KILN_KKEY_HEX_SIZE]) {
  kiln_kdesc *d;
  KT_ASSERT_OK(kiln_kdesc_new(c, "eps_only", &d));
  KT_ASSERT_OK(kiln_kdesc_set_f32(d, "eps", eps));
  kiln_kkey k;
  KT_ASSERT_OK(kiln_kdesc_key(d, &k));
  kiln_kkey_format(&k, out);
  kiln_kdesc_free(d);
}

static void test_vector_eps(void **state) {
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  KT_ASSERT_OK(kiln_kcache_register_template(kc, &epsk));
  static const char *const o[] = {"--gpu-architecture=sm_90"};
  kiln_kcompiler *c = compiler(kc, "13.0", "sm_90", o, 1);
  char a[KILN_KKEY_HEX_SIZE], b[KILN_KKEY_HEX_SIZE];
  eps_key(c, 1e-5f, a);
  eps_key(c, 1e-6f, b);
  printf("eps 1e-5 key %s\neps 1e-6 key %s\n", a, b);
  assert_string_equal(a, EPS_1E5_KEY);
  assert_string_equal(b, EPS_1E6_KEY);
  kiln_kcache_close(kc);
}

static void key_of(kiln_kdesc *d, kiln_kkey *k) { KT_ASSERT_OK(kiln_kdesc_key(d, k)); }

/* The order of setter calls and replaced values do not matter; only the
 * final values do. */
static void test_order_independent(void **state) {
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  KT_ASSERT_OK(kiln_kcache_register_template(kc, &toy));
  kiln_kcompiler *c = compiler(kc, "1", "sm_90", vec_opts, 2);
  kiln_kdesc *a = toy_desc(c), *b;
  KT_ASSERT_OK(kiln_kdesc_new(c, "toy", &b));
  KT_ASSERT_OK(kiln_kdesc_set_dtype(b, "ty", KILN_TYPE_F32));
  KT_ASSERT_OK(kiln_kdesc_set_dtype(b, "ty", KILN_TYPE_Q4_K));
  KT_ASSERT_OK(kiln_kdesc_set_str(b, "tag", "v2"));
  KT_ASSERT_OK(kiln_kdesc_set_i64(b, "count", 5000000000LL));
  KT_ASSERT_OK(kiln_kdesc_set_f32(b, "scale", 1e-5f));
  KT_ASSERT_OK(kiln_kdesc_set_f64(b, "bias", -0.25));
  KT_ASSERT_OK(kiln_kdesc_set_f32(b, "scale", 1e-6f));
  kiln_kkey ka, kb;
  key_of(a, &ka);
  key_of(b, &kb);
  assert_true(kiln_kkey_equal(&ka, &kb));
  kiln_kdesc_free(a);
  kiln_kdesc_free(b);
  kiln_kcache_close(kc);
}

/* Every baked value, down to one ulp and the sign of zero, and every part
 * of the fingerprint changes the key. */
static void test_everything_in_the_key(void **state) {
  kiln_kcache *kc = kt_kcache_open(NULL, NULL);
  KT_ASSERT_OK(kiln_kcache_register_template(kc, &toy));
  kiln_kcompiler *c = compiler(kc, "1.2.3 build 45", "sm_90", vec_opts, 2);
  enum { N = 16 };
  kiln_kkey keys[N];
  int n = 0;
  kiln_kdesc *d = toy_desc(c);
  key_of(d, &keys[n++]);
  KT_ASSERT_OK(kiln_kdesc_set_f32(d, "scale", nextafterf(1e-6f, 1.0f)));
  key_of(d, &keys[n++]);
  KT_ASSERT_OK(kiln_kdesc_set_f32(d, "scale", 0.0f));
  key_of(d, &keys[n++]);
  KT_ASSERT_OK(kiln_kdesc_set_f32(d, "scale", -0.0f));
  key_of(d, &keys[n++]);
  KT_ASSERT_OK(kiln_kdesc_set_f32(d, "scale", 1e-6f));
  KT_ASSERT_OK(kiln_kdesc_set_f64(d, "bias", nextafter(-0.25, 0.0)));
  key_of(d, &keys[n++]);
  KT_ASSERT_OK(kiln_kdesc_set_f64(d, "bias", -0.25));
  KT_ASSERT_OK(kiln_kdesc_set_i64(d, "count", 5000000001LL));
  key_of(d, &keys[n++]);
  KT_ASSERT_OK(kiln_kdesc_set_i64(d, "count", 5000000000LL));
  KT_ASSERT_OK(kiln_kdesc_set_str(d, "tag", "v3"));
  key_of(d, &keys[n++]);
  KT_ASSERT_OK(kiln_kdesc_set_str(d, "tag", "v2"));
  KT_ASSERT_OK(kiln_kdesc_set_dtype(d, "ty", KILN_TYPE_Q6_K));
  key_of(d, &keys[n++]);
  KT_ASSERT_OK(kiln_kdesc_set_dtype(d, "ty", KILN_TYPE_Q5_K)); /* Q4_K's layout, 5-bit levels */
  key_of(d, &keys[n++]);
  kiln_kdesc_free(d);

  static const char *const swapped[] = {"--std=c++17", "-O3"};
  static const char *const fewer[] = {"-O3"};
  kiln_kcompiler *fp[] = {
      compiler(kc, "1.2.3 build 46", "sm_90", vec_opts, 2),
      compiler(kc, "1.2.3 build 45", "sm_90a", vec_opts, 2),
      compiler(kc, "1.2.3 build 45", "sm_90", swapped, 2),
      compiler(kc, "1.2.3 build 45", "sm_90", fewer, 1),
  };
  for (size_t i = 0; i < sizeof fp / sizeof fp[0]; i++) {
    d = toy_desc(fp[i]);
    key_of(d, &keys[n++]);
    kiln_kdesc_free(d);
  }
  /* The same fingerprint registered twice (two backends) shares keys. */
  kiln_kcompiler *twin = compiler(kc, "1.2.3 build 45", "sm_90", vec_opts, 2);
  d = toy_desc(twin);
  kiln_kkey k0;
  key_of(d, &k0);
  kiln_kdesc_free(d);
  assert_true(kiln_kkey_equal(&k0, &keys[0]));

  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++)
      if (kiln_kkey_equal(&keys[i], &keys[j])) fail_msg("keys %d and %d are equal", i, j);
  kiln_kcache_close(kc);
}

static void render(kiln_kparam_type t, kcache_value v, const char *want) {
  char out[64];
  kiln__kcache_render_value(t, &v, out);
  assert_string_equal(out, want);
}

static kcache_value f32v(float f) {
  kcache_value v = {.set = true};
  memcpy(&v.u.f32_bits, &f, 4);
  return v;
}
static kcache_value f64v(double x) {
  kcache_value v = {.set = true};
  memcpy(&v.u.f64_bits, &x, 8);
  return v;
}
static kcache_value i64v(int64_t i) {
  kcache_value v = {.set = true};
  v.u.i64 = i;
  return v;
}

static void test_render_values(void **state) {
  render(KILN_KPARAM_F32, f32v(1e-6f), "0x1.0c6f7ap-20f");
  render(KILN_KPARAM_F32, f32v(1e-5f), "0x1.4f8b58p-17f");
  render(KILN_KPARAM_F32, f32v(-2.5f), "(-0x1.4p+1f)");
  render(KILN_KPARAM_F32, f32v(0.0f), "0x0p+0f");
  render(KILN_KPARAM_F32, f32v(-0.0f), "(-0x0p+0f)");
  render(KILN_KPARAM_F64, f64v(0.1), "0x1.999999999999ap-4");
  render(KILN_KPARAM_F64, f64v(-1e6), "(-0x1.e848p+19)");
  render(KILN_KPARAM_I64, i64v(3584), "3584");
  render(KILN_KPARAM_I64, i64v(-5), "(-5)");
  render(KILN_KPARAM_I64, i64v(INT64_C(1) << 40), "1099511627776LL");
  render(KILN_KPARAM_I64, i64v(INT64_MIN), "(-9223372036854775807LL - 1)");
  kcache_value dt = {.set = true};
  dt.u.dtype = KILN_TYPE_BF16;
  render(KILN_KPARAM_DTYPE, dt, "BF16");
  dt.u.dtype = KILN_TYPE_Q5_K; /* id 13, between Q4_K and Q6_K */
  render(KILN_KPARAM_DTYPE, dt, "Q5_K");

  /* Exactness: every rendered f32 reads back (strtof) as the same bits,
   * over a spread of random finite bit patterns, subnormals included. */
  uint32_t s = 12345;
  for (int i = 0; i < 20000; i++) {
    s = s * 1664525u + 1013904223u;
    uint32_t bits = s;
    if (((bits >> 23) & 0xff) == 0xff) continue; /* inf/NaN: setters refuse them */
    kcache_value v = {.set = true};
    v.u.f32_bits = bits;
    char out[64];
    kiln__kcache_render_value(KILN_KPARAM_F32, &v, out);
    char *p = out + (out[0] == '(');
    float back = strtof(p, NULL);
    uint32_t bb;
    memcpy(&bb, &back, 4);
    if (bb != bits) fail_msg("%08x rendered as %s reads back as %08x", bits, out, bb);
  }
}

/* Entry encoding round-trips; every truncation and every flipped bit is
 * caught. */
static void test_entry_codec(void **state) {
  const char canon[] = "kiln-kdesc 1\ntemplate t\n";
  const char image[] = "// ptx\n.version 9.0\n";
  char *buf;
  size_t n;
  KT_ASSERT_OK(kiln__kcache_entry_encode(canon, KILN_KIMAGE_PTX, image, strlen(image), &buf, &n));
  char *c;
  void *img;
  size_t isz;
  kiln_kimage_kind kind;
  KT_ASSERT_OK(kiln__kcache_entry_decode(buf, n, &c, &kind, &img, &isz));
  assert_string_equal(c, canon);
  assert_int_equal(kind, KILN_KIMAGE_PTX);
  assert_int_equal(isz, strlen(image));
  assert_memory_equal(img, image, isz);
  free(c);
  free(img);
  for (size_t len = 0; len < n; len++) {
    kiln_status st = kiln__kcache_entry_decode(buf, len, &c, &kind, &img, &isz);
    if (!st) fail_msg("a %zu-byte truncation of a %zu-byte entry was accepted", len, n);
    assert_int_equal(kiln_status_code_of(st), KILN_STATUS_MALFORMED);
    kiln_status_free(st);
  }
  for (size_t i = 0; i < n; i++)
    for (int bit = 0; bit < 8; bit++) {
      buf[i] ^= (char)(1 << bit);
      kiln_status st = kiln__kcache_entry_decode(buf, n, &c, &kind, &img, &isz);
      buf[i] ^= (char)(1 << bit);
      if (!st) fail_msg("byte %zu bit %d flipped was accepted", i, bit);
      kiln_status_free(st);
    }
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vector_toy),
      cmocka_unit_test(test_vector_eps),
      cmocka_unit_test(test_order_independent),
      cmocka_unit_test(test_everything_in_the_key),
      cmocka_unit_test(test_render_values),
      cmocka_unit_test(test_entry_codec),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
