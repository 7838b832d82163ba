/* The three CUDA plugins as built, through the plugin loader (libkiln
 * only): they load on any machine (the driver API is resolved at run time),
 * declare their config keys, and probe() says either what the device is
 * (name, compute capability, memory) or precisely why there is none; on a
 * machine without the NVIDIA driver that is "no NVIDIA driver
 * (libcuda.so.1: ...)" and planning on them fails with that reason.
 * `kiln backends` lists them the same way, and the example configs
 * conf/cuda-*.ini validate. A value open() refuses before it looks for a
 * device names the file and line it came from. */
#include "config.h"

#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln/host.h"
#include "kiln/kiln.h"
#include "testutil.h"

static const char *const names[] = {"cuda-serial", "cuda-batched", "cuda-cc120"};

/* Whether this process could load the driver library at all. */
static bool have_driver(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != NULL;
}

/* Whether this process could load NCCL. */
static bool have_nccl(void) {
  void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != NULL;
}

static bool has_key(const kiln_backend_ops *e, const char *key) {
  for (uint32_t i = 0; i < e->n_config_keys; i++)
    if (strcmp(e->config_keys[i].name, key) == 0) return true;
  return false;
}

static void test_load_and_probe(void **state) {
  kiln_plugin_registry *r;
  KT_ASSERT_OK(kiln_plugin_registry_new(getenv("KILN_PLUGIN_PATH"), &r));
  for (size_t i = 0; i < 3; i++) {
    kiln_plugin *p;
    KT_ASSERT_OK(kiln_plugin_registry_get(r, names[i], &p));
    const kiln_backend_ops *e = kiln_plugin_entry(p);
    assert_string_equal(e->name, names[i]);
    assert_true(has_key(e, "device"));
    assert_true(has_key(e, "poison"));
    assert_int_equal(has_key(e, "gemm"), i > 0);
    assert_int_equal(has_key(e, "gemm_scratch_mib"), i > 0);
    assert_int_equal(has_key(e, "allow_lower_cc"), i == 2);
    assert_true(has_key(e, "devices") && has_key(e, "tensor_parallel"));
    assert_true(has_key(e, "activations") && has_key(e, "recurrent_guard"));
    /* the line `kiln backends` prints on tensor parallelism */
    char tp[320];
    KT_ASSERT_OK(kiln_plugin_probe_parallel(p, NULL, tp, sizeof tp));
    printf("%-12s parallel: %s\n", names[i], tp);
    assert_true(strstr(tp, "NCCL ") != NULL || strstr(tp, "no libnccl.so.2") != NULL);
    if (!have_nccl() || !have_driver()) assert_true(strncmp(tp, "unavailable: ", 13) == 0);
    kiln_probe_info info;
    KT_ASSERT_OK(kiln_plugin_probe(p, &info));
    printf("%-12s %s: %s%s%s\n", names[i], info.available ? "available" : "unavailable",
           info.available ? info.device : info.reason, info.available ? ", " : "",
           info.available ? info.detail : "");
    if (info.available) {
      assert_true(info.device[0] != '\0');
      assert_non_null(strstr(info.detail, "compute capability "));
      assert_non_null(strstr(info.detail, "GiB"));
    } else {
      assert_true(info.reason[0] != '\0');
      if (!have_driver()) assert_non_null(strstr(info.reason, "no NVIDIA driver (libcuda.so.1"));
    }
  }
  kiln_plugin_registry_free(r);
}

/* cuda-common reads every key of cuda-serial's list (KILN_CUDA_SERIAL_KEYS,
 * which the test-only kiln-cuda-stale shares) at open(): the other CUDA
 * plugins declare each of them too, or their opens log an internal error
 * for it and take no value. */
static void test_common_keys(void **state) {
  kiln_plugin_registry *r;
  KT_ASSERT_OK(kiln_plugin_registry_new(getenv("KILN_PLUGIN_PATH"), &r));
  kiln_plugin *p;
  KT_ASSERT_OK(kiln_plugin_registry_get(r, "cuda-serial", &p));
  const kiln_backend_ops *serial = kiln_plugin_entry(p);
  for (size_t i = 1; i < 3; i++) {
    KT_ASSERT_OK(kiln_plugin_registry_get(r, names[i], &p));
    const kiln_backend_ops *e = kiln_plugin_entry(p);
    for (uint32_t k = 0; k < serial->n_config_keys; k++)
      if (!has_key(e, serial->config_keys[k].name))
        fail_msg("%s does not declare [%s] %s, which cuda-common reads", names[i], names[i],
                 serial->config_keys[k].name);
  }
  kiln_plugin_registry_free(r);
}

/* Planning on an unavailable CUDA backend fails with the probe's reason. */
static void test_plan_unavailable(void **state) {
  if (have_driver()) {
    printf("a driver is present here: nothing to refuse\n");
    skip();
  }
  char *path = kt_model_path("stories260K.gguf");
  if (!path) skip();
  kiln_runtime *rt;
  KT_ASSERT_OK(kiln_runtime_open(&(kiln_runtime_options){.config_path = NULL, .use_environment = true, .overrides = NULL, .n_overrides = 0}, &rt));
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  for (size_t i = 0; i < 3; i++) {
    kiln_session *s = NULL;
    kiln_session_options so = {.backend = names[i], .n_ctx = 64, .batch = 8, .fallback_cpu = 0};
    kiln_status st = kiln_session_open(rt, m, &so, &s);
    printf("%s: %s\n", names[i], kiln_status_message(st));
    char want[64];
    snprintf(want, sizeof want, "backend %s is unavailable: no NVIDIA driver", names[i]);
    KT_ASSERT_ERR(st, KILN_STATUS_UNAVAILABLE, want);
  }
  kiln_model_free(m);
  kiln_runtime_free(rt);
  free(path);
}

/* On a device below compute capability 12.0, cuda-cc120's probe reports it
 * (with the note) and open() refuses unless allow_lower_cc = true. */
static void test_cc120_lower_cc(void **state) {
  kiln_plugin_registry *r;
  KT_ASSERT_OK(kiln_plugin_registry_new(getenv("KILN_PLUGIN_PATH"), &r));
  kiln_plugin *p;
  KT_ASSERT_OK(kiln_plugin_registry_get(r, "cuda-cc120", &p));
  kiln_probe_info info;
  KT_ASSERT_OK(kiln_plugin_probe(p, &info));
  kiln_plugin_registry_free(r);
  if (!info.available || !strstr(info.detail, "is below 12.0")) {
    printf("no device below compute capability 12.0 here: %s\n",
           info.available ? info.detail : info.reason);
    skip();
  }
  assert_non_null(strstr(info.detail, "open() refuses unless [cuda-cc120] allow_lower_cc = true"));
  char *path = kt_model_path("stories260K.gguf");
  if (!path) skip();
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  for (int allow = 0; allow < 2; allow++) {
    kiln_config_override ov[] = {{"cuda-cc120", "allow_lower_cc", allow ? "true" : "false", "t"}};
    kiln_runtime *rt;
    KT_ASSERT_OK(kiln_runtime_open(&(kiln_runtime_options){.config_path = NULL, .use_environment = true, .overrides = ov, .n_overrides = 1}, &rt));
    kiln_session *s = NULL;
    kiln_session_options so = {.backend = "cuda-cc120", .n_ctx = 64, .batch = 8};
    kiln_status st = kiln_session_open(rt, m, &so, &s);
    printf("cuda-cc120 with allow_lower_cc = %s: %s\n", allow ? "true" : "false",
           st ? kiln_status_message(st) : "opened");
    if (allow) {
      KT_ASSERT_OK(st);
      kiln_session_free(s);
    } else {
      KT_ASSERT_ERR(st, KILN_STATUS_UNAVAILABLE,
                    "is below 12.0 (set [cuda-cc120] allow_lower_cc = true to test it anyway)");
    }
    kiln_runtime_free(rt);
  }
  kiln_model_free(m);
  free(path);
}

static void test_config_keys(void **state) {
  kiln_runtime *rt = NULL;
  /* valid values of every key */
  kiln_config_override ok[] = {{"cuda-serial", "device", "0", "test"},
                               {"cuda-serial", "poison", "255", "test"},
                               {"cuda-batched", "gemm", "tf32", "test"},
                               {"cuda-batched", "gemm_scratch_mib", "64", "test"},
                               {"cuda-cc120", "allow_lower_cc", "true", "test"},
                               {"cuda-cc120", "gemm", "bf16", "test"},
                               {"cuda-serial", "attention_splits", "256", "test"},
                               {"cuda-batched", "attention_splits", "0", "test"},
                               {"cuda-cc120", "attention_splits", "1", "test"},
                               {"cuda-batched", "prefill_attention", "rows", "test"},
                               {"cuda-cc120", "prefill_attention", "flash", "test"}};
  KT_ASSERT_OK(kiln_runtime_open(&(kiln_runtime_options){.config_path = NULL, .use_environment = true, .overrides = ok, .n_overrides = 11}, &rt));
  kiln_runtime_free(rt);
  /* gemm = fp8 on both batched flavors; cuda-serial has no GEMM key */
  kiln_config_override fp8[] = {{"cuda-batched", "gemm", "fp8", "test"},
                                {"cuda-cc120", "gemm", "fp8", "test"}};
  KT_ASSERT_OK(kiln_runtime_open(&(kiln_runtime_options){.config_path = NULL, .use_environment = true, .overrides = fp8, .n_overrides = 2}, &rt));
  assert_string_equal(kiln_config_get_str(kiln_config_section_get(kiln_runtime_config(rt), "cuda-cc120"), "gemm"), "fp8");
  kiln_runtime_free(rt);
  kiln_config_override serial_fp8[] = {{"cuda-serial", "gemm", "fp8", "--x"}};
  KT_ASSERT_ERR(kiln_runtime_open(&(kiln_runtime_options){.config_path = NULL, .use_environment = true, .overrides = serial_fp8, .n_overrides = 1}, &rt),
                KILN_STATUS_INVALID_ARGUMENT, "gemm");
  kiln_config_override bad_gemm[] = {{"cuda-batched", "gemm", "f16", "--gemm"}};
  KT_ASSERT_ERR(kiln_runtime_open(&(kiln_runtime_options){.config_path = NULL, .use_environment = true, .overrides = bad_gemm, .n_overrides = 1}, &rt),
                KILN_STATUS_INVALID_ARGUMENT, "f16");
  kiln_config_override bad_key[] = {{"cuda-serial", "allow_lower_cc", "true", "--x"}};
  kiln_status st = kiln_runtime_open(&(kiln_runtime_options){.config_path = NULL, .use_environment = true, .overrides = bad_key, .n_overrides = 1}, &rt);
  assert_non_null(st);
  assert_non_null(strstr(kiln_status_message(st), "allow_lower_cc"));
  kiln_status_free(st);
  kiln_config_override bad_splits[] = {{"cuda-batched", "attention_splits", "257", "--x"}};
  st = kiln_runtime_open(&(kiln_runtime_options){.config_path = NULL, .use_environment = true, .overrides = bad_splits, .n_overrides = 1}, &rt);
  assert_non_null(st);
  assert_non_null(strstr(kiln_status_message(st), "attention_splits"));
  kiln_status_free(st);
  /* prefill_attention: flash|rows on the batched plugins; cuda-serial has
   * no prefill kernel and no such key */
  kiln_config_override bad_prefill[] = {{"cuda-batched", "prefill_attention", "fast", "--x"}};
  st = kiln_runtime_open(&(kiln_runtime_options){.config_path = NULL, .use_environment = true, .overrides = bad_prefill, .n_overrides = 1}, &rt);
  assert_non_null(st);
  assert_non_null(strstr(kiln_status_message(st), "prefill_attention"));
  kiln_status_free(st);
  kiln_config_override serial_prefill[] = {{"cuda-serial", "prefill_attention", "flash", "--x"}};
  st = kiln_runtime_open(&(kiln_runtime_options){.config_path = NULL, .use_environment = true, .overrides = serial_prefill, .n_overrides = 1}, &rt);
  assert_non_null(st);
  assert_non_null(strstr(kiln_status_message(st), "prefill_attention"));
  kiln_status_free(st);
  kiln_config_override bad_poison[] = {{"cuda-cc120", "poison", "256", "--x"}};
  st = kiln_runtime_open(&(kiln_runtime_options){.config_path = NULL, .use_environment = true, .overrides = bad_poison, .n_overrides = 1}, &rt);
  assert_non_null(st);
  kiln_status_free(st);
}

/* tensor_parallel > 1 is refused at open on every CUDA plugin, saying
 * what is missing first: NCCL, then the driver, then devices, else that
 * the multi-GPU path is not built. Bad devices lists are refused naming
 * the key. */
static void test_tensor_parallel_refused(void **state) {
  kiln_plugin_registry *r;
  KT_ASSERT_OK(kiln_plugin_registry_new(getenv("KILN_PLUGIN_PATH"), &r));
  for (size_t i = 0; i < 3; i++) {
    kiln_plugin *p;
    KT_ASSERT_OK(kiln_plugin_registry_get(r, names[i], &p));
    struct {
      const char *tp, *devices;
      kiln_status_code code;
      const char *needle;
    } cases[] = {
        {"2", "", have_nccl() ? (have_driver() ? 0 : KILN_STATUS_UNAVAILABLE) : KILN_STATUS_UNAVAILABLE,
         !have_nccl() ? "tensor_parallel = 2 needs NCCL, and it is unavailable: no libnccl.so.2"
                      : !have_driver() ? "tensor_parallel = 2: no NVIDIA driver" : "tensor_parallel = 2"},
        {"2", "0,x", KILN_STATUS_INVALID_ARGUMENT, "devices = 0,x: not a list of device indices"},
        {"2", "1,1", KILN_STATUS_INVALID_ARGUMENT, "devices = 1,1: device 1 is listed twice"},
        {"2", "0,1,2", KILN_STATUS_INVALID_ARGUMENT, "devices = 0,1,2 lists 3 devices and tensor_parallel = 2"},
        {"2", "0,", KILN_STATUS_INVALID_ARGUMENT, "devices = 0,: not a list"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      kiln_config_override ov[] = {{names[i], "tensor_parallel", cases[c].tp, "t"},
                                   {names[i], "devices", cases[c].devices, "t"}};
      kiln_runtime *rt;
      KT_ASSERT_OK(kiln_runtime_open(&(kiln_runtime_options){.use_environment = true, .overrides = ov, .n_overrides = 2}, &rt));
      kiln_backend *b = NULL;
      kiln_status st = kiln_backend_open(p, kiln_runtime_config(rt), &b);
      printf("%s tensor_parallel = %s, devices = %s: %s\n", names[i], cases[c].tp, cases[c].devices,
             st ? kiln_status_message(st) : "opened");
      if (cases[c].code == 0) { /* NCCL and a driver: refused for devices, or as not built */
        assert_non_null(st);
        assert_true(kiln_status_code_of(st) == KILN_STATUS_UNAVAILABLE || kiln_status_code_of(st) == KILN_STATUS_UNSUPPORTED);
        kiln_status_free(st);
      } else {
        KT_ASSERT_ERR(st, cases[c].code, cases[c].needle);
      }
      assert_null(b);
      kiln_runtime_free(rt);
    }
  }
  kiln_plugin_registry_free(r);
}

static const char *origin_must_not_run(const kiln_config_section *sec, const char *key) {
  (void)sec;
  fail_msg("cfg_origin(%s) was called through a host table of ABI 2.3", key);
  return NULL;
}

/* devices is read before open() looks for the driver, so its refusal is
 * seen on any machine: prefixed by the file and line of the value, and,
 * through a host table of 2.3 (which ends before cfg_origin), as it was
 * before the host could say where. */
static void test_open_refusal_names_origin(void **state) {
  kiln_host_api old = *kiln_host_api_get();
  old.abi_minor = 3;
  old.struct_size = KILN_HOST_API_SIZE_2_3;
  old.cfg_origin = origin_must_not_run;
  char *dir = kt_mkdtemp("cuda-origin");
  char ini[4200], text[256], want[4400];
  snprintf(ini, sizeof ini, "%s/bad.ini", dir);
  kiln_plugin_registry *r;
  KT_ASSERT_OK(kiln_plugin_registry_new(getenv("KILN_PLUGIN_PATH"), &r));
  for (size_t i = 0; i < 3; i++) {
    kiln_plugin *p;
    KT_ASSERT_OK(kiln_plugin_registry_get(r, names[i], &p));
    snprintf(text, sizeof text, "; a device list with a typo\n[%s]\n\ndevices = 0,x\n", names[i]);
    assert_true(kt_write_file(ini, text, strlen(text)));
    kiln_runtime *rt;
    KT_ASSERT_OK(kiln_runtime_open(&(kiln_runtime_options){.config_path = ini, .use_environment = true}, &rt));
    kiln_backend *b = NULL;
    kiln_status st = kiln_backend_open(p, kiln_runtime_config(rt), &b);
    printf("%s: %s\n", names[i], kiln_status_message(st));
    snprintf(want, sizeof want, "backend %s: %s:4: [%s] devices = 0,x: not a list of device indices such as 0,1",
             names[i], ini, names[i]);
    assert_null(b);
    assert_int_equal(kiln_status_code_of(st), KILN_STATUS_INVALID_ARGUMENT);
    assert_string_equal(kiln_status_message(st), want);
    kiln_status_free(st);
    const kiln_backend_ops *e = kiln_plugin_entry(p);
    void *pl = NULL, *be = NULL;
    KT_ASSERT_OK(e->init(&old, &pl));
    st = e->open(pl, kiln_config_section_get(kiln_runtime_config(rt), names[i]), &be);
    snprintf(want, sizeof want, "[%s] devices = 0,x: not a list of device indices such as 0,1", names[i]);
    assert_null(be);
    assert_string_equal(kiln_status_message(st), want);
    kiln_status_free(st);
    e->fini(pl);
    kiln_runtime_free(rt);
  }
  kiln_plugin_registry_free(r);
  kt_rm_rf(dir);
  free(dir);
}

static void test_conf_files(void **state) {
  static const char *const files[] = {"cuda-serial.ini", "cuda-batched.ini", "cuda-cc120.ini"};
  for (size_t i = 0; i < 3; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/conf/%s", getenv("KILN_SRCDIR"), files[i]);
    kiln_config_override ov[] = {
        {"general", "plugin_path", getenv("KILN_PLUGIN_PATH"), "KILN_PLUGIN_PATH"}};
    kiln_runtime *rt = NULL;
    kiln_status st = kiln_runtime_open(&(kiln_runtime_options){.config_path = path, .use_environment = false, .overrides = ov, .n_overrides = 1}, &rt);
    if (st) fail_msg("%s: %s", path, kiln_status_message(st));
    const kiln_config_section *b = kiln_config_section_get(kiln_runtime_config(rt), "backend");
    assert_string_equal(kiln_config_get_str(b, "name"), names[i]);
    kiln_runtime_free(rt);
  }
}

/* `kiln backends` shows each plugin with its device or its reason. */
static void test_kiln_backends(void **state) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "'%s/cli/kiln' backends 2>&1", getenv("KILN_BUILDDIR"));
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  char out[16384];
  size_t n = fread(out, 1, sizeof out - 1, f);
  out[n] = '\0';
  assert_int_equal(pclose(f), 0);
  fputs(out, stdout);
  for (size_t i = 0; i < 3; i++) {
    char *at = strstr(out, names[i]);
    assert_non_null(at);
    /* the block of this plugin: its lines up to the next plugin's name */
    if (have_driver())
      assert_true(strstr(at, "available") != NULL);
    else
      assert_true(strstr(at, "unavailable no NVIDIA driver (libcuda.so.1") != NULL);
    assert_true(strstr(at, "parallel    ") != NULL);
  }
}

int main(void) {
  char probe[4096];
  snprintf(probe, sizeof probe, "%s/kiln-cuda-serial.so",
           getenv("KILN_PLUGIN_PATH") ? getenv("KILN_PLUGIN_PATH") : ".");
  FILE *f = fopen(probe, "rb");
  if (!f) {
    printf("SKIP: %s is not built (configure found no CUDA toolkit)\n", probe);
    return 77;
  }
  fclose(f);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_load_and_probe),
      cmocka_unit_test(test_plan_unavailable),
      cmocka_unit_test(test_cc120_lower_cc),
      cmocka_unit_test(test_config_keys),
      cmocka_unit_test(test_common_keys),
      cmocka_unit_test(test_tensor_parallel_refused),
      cmocka_unit_test(test_open_refusal_names_origin),
      cmocka_unit_test(test_conf_files),
      cmocka_unit_test(test_kiln_backends),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
