/*
 * kiln/plugin.h — the backend plugin ABI (installed; see plugins/README.md).
 *
 * A backend is a shared object `kiln-<name>.so` that exports exactly one
 * symbol, `kiln_backend_entry`, a const kiln_backend_ops. The loader checks
 * abi_major, abi_minor and struct_size before it calls any of the plugin's
 * code, then calls init() with the host table. Plugins never link against
 * libkiln: everything they need from the host (logging, statuses, config
 * values, dequantization) comes through kiln_host_api, as Redis modules get
 * theirs through RedisModuleCtx.
 *
 * Versioning: a new field appended to either table bumps the minor; anything
 * else (a changed field, a changed struct in kiln/graph.h) bumps the major.
 * The host refuses a plugin with another major, a newer minor, or a
 * struct_size smaller than the host's table for that minor.
 *
 * Ownership: a non-NULL kiln_status a plugin returns becomes the host's. The
 * plugin owns its buffers and contexts until close()/fini().
 *
 * Threading: the host calls a backend from one thread at a time.
 */
#ifndef KILN_PLUGIN_H
#define KILN_PLUGIN_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/config_schema.h"
#include "kiln/graph.h"
#include "kiln/kcache.h"
#include "kiln/status.h"
#include "kiln/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_PLUGIN_ABI_MAJOR 2
/* 2.1: probe_parallel. 2.2: MUL_MAT nodes carry p.mul_mat (kiln/graph.h),
 * a member of the node's parameter union that adds no bytes: a host of 2.1
 * leaves it zero, and a plugin of 2.1 does not read it. 2.3:
 * describe_modes. 2.4: the host table's cfg_origin (the ops table is
 * 2.3's). */
#define KILN_PLUGIN_ABI_MINOR 4
#define KILN_PLUGIN_ENTRY_SYMBOL "kiln_backend_entry"

typedef enum kiln_log_level {
  KILN_LOG_ERROR = 0,
  KILN_LOG_WARN = 1,
  KILN_LOG_INFO = 2,
  KILN_LOG_DEBUG = 3
} kiln_log_level;

/* What the host offers a plugin. Valid from init() until fini(). */
typedef struct kiln_host_api {
  uint32_t abi_major;
  uint32_t abi_minor;
  uint32_t struct_size; /* sizeof(kiln_host_api) of the host */

  /* Logs one line, prefixed with the plugin's name. */
  void (*log)(kiln_log_level level, const char *plugin, const char *fmt, ...)
      __attribute__((format(printf, 3, 4)));

  /* kiln/status.h, for plugins. */
  kiln_status (*status_new)(kiln_status_code code, const char *fmt, ...)
      __attribute__((format(printf, 2, 3)));
  kiln_status (*status_annotate)(kiln_status st, const char *fmt, ...)
      __attribute__((format(printf, 2, 3)));
  void (*status_free)(kiln_status st);

  /* Values of the plugin's own config section, validated against the keys it
   * declared (defaults applied). Asking for an undeclared key, or with the
   * wrong type, is the plugin's bug: the host logs it and returns 0/NULL. */
  const char *(*cfg_str)(const kiln_config_section *sec, const char *key);
  int64_t (*cfg_int)(const kiln_config_section *sec, const char *key);
  double (*cfg_float)(const kiln_config_section *sec, const char *key);
  bool (*cfg_bool)(const kiln_config_section *sec, const char *key);

  /* Dequantizes n values (a multiple of the type's block size) of `type`
   * from src to f32, bit-exactly to ggml's definitions (core/dequant.c).
   * Returns KILN_STATUS_INVALID_ARGUMENT for an unknown type or a partial
   * block. */
  kiln_status (*dequantize)(kiln_type type, const void *src, float *dst, int64_t n);

  /* The kernel-cache service (kiln/kcache.h; each pointer below behaves as
   * the kiln_kcache_* / kiln_kdesc_* function of the same name). kcache()
   * is the host's service, opened from [kernel_cache] before any backend
   * is opened; NULL when the host runs without one. A GPU backend, in
   * open(): registers its templates and its compiler; in prepare(node):
   * kdesc_new, the setters with the node's own parameters, kcache_get,
   * kdesc_free; keeps the kernel for run(); in close(): unregisters its
   * compiler. There is deliberately no way to compile source text or to
   * name a key. */
  kiln_kcache *(*kcache)(void);
  kiln_status (*kcache_register_template)(kiln_kcache *kc, const kiln_ktemplate *t);
  kiln_status (*kcache_register_compiler)(kiln_kcache *kc, const kiln_kcompiler_desc *d,
                                          kiln_kcompiler **out_compiler);
  void (*kcache_unregister_compiler)(kiln_kcompiler *c);
  kiln_status (*kdesc_new)(kiln_kcompiler *c, const char *template_name, kiln_kdesc **out_desc);
  kiln_status (*kdesc_set_f32)(kiln_kdesc *d, const char *name, float v);
  kiln_status (*kdesc_set_f64)(kiln_kdesc *d, const char *name, double v);
  kiln_status (*kdesc_set_i64)(kiln_kdesc *d, const char *name, int64_t v);
  kiln_status (*kdesc_set_str)(kiln_kdesc *d, const char *name, const char *v);
  kiln_status (*kdesc_set_dtype)(kiln_kdesc *d, const char *name, kiln_type v);
  void (*kdesc_free)(kiln_kdesc *d);
  kiln_status (*kcache_get)(const kiln_kdesc *d, kiln_kernel **out_kernel);

  /* ABI 2.4. Where the value of `key` in sec came from, as the host's own
   * config errors name it: "conf/kiln.ini:7" (the file and line),
   * "KILN_BACKEND" (an environment variable), "--backend" (a command-line
   * flag), "default" (the declared default), "unset" (a key without a
   * default that nothing set); NULL for a NULL sec or a key sec does not
   * declare. The string lives as long as sec. For open() to say where a
   * value it refuses was written ("conf/my.ini:12: [cuda-batched]
   * mmq_shape = 128,128,4 is not auto or ..."). A table of 2.3 or older
   * has no such member: read it only when abi_minor >= 4 and struct_size
   * covers it, and otherwise refuse the value without the place. */
  const char *(*cfg_origin)(const kiln_config_section *sec, const char *key);
} kiln_host_api;

/* The host table as ABI 2.3 ended it: the smallest a plugin of 2.4 that
 * reads cfg_origin only where it is there can work with. */
#define KILN_HOST_API_SIZE_2_3 offsetof(kiln_host_api, cfg_origin)

/* What probe() reports, for `kiln backends` and for the planner. */
typedef struct kiln_probe_info {
  bool available;     /* false: open() will fail; `reason` says why */
  char device[128];   /* "CPU (8 threads)", "NVIDIA H200" */
  char detail[256];   /* e.g. "compute capability 9.0, 139.8 GiB, driver 13.0" */
  char reason[256];   /* why not available: "no libcuda.so.1 (no NVIDIA driver)" */
} kiln_probe_info;

/* The ops table. Its type is kiln_backend_ops (a vtable, ggml's *_ops
 * habit); the one object a plugin exports is named kiln_backend_entry:
 *
 *   const kiln_backend_ops kiln_backend_entry = { .abi_major = ..., ... };
 */
typedef struct kiln_backend_ops {
  uint32_t abi_major;   /* KILN_PLUGIN_ABI_MAJOR the plugin was built with */
  uint32_t abi_minor;   /* KILN_PLUGIN_ABI_MINOR the plugin was built with */
  uint32_t struct_size; /* sizeof(kiln_backend_ops) the plugin was built with */
  const char *name;     /* "cpu": the `kiln-<name>.so` it lives in and its config section */
  const char *description;

  /* Keys of the plugin's config section [<name>]. */
  const kiln_config_key *config_keys;
  uint32_t n_config_keys;

  /* Once per process, after the ABI checks. *out_plugin is handed to probe,
   * open and fini. */
  kiln_status (*init)(const kiln_host_api *host, void **out_plugin);
  void (*fini)(void *plugin);

  /* Is the hardware there, and what is it. Fails only on the plugin's own
   * errors; missing hardware is available = false with a reason. */
  kiln_status (*probe)(void *plugin, kiln_probe_info *out_info);

  /* A backend instance with its config section; *out_backend is handed to
   * every call below. */
  kiln_status (*open)(void *plugin, const kiln_config_section *cfg, void **out_backend);
  void (*close)(void *backend);

  /* NULL when the backend can run `node`; otherwise a status whose message
   * says why (KILN_STATUS_UNSUPPORTED), which the planner reports. */
  kiln_status (*supports)(void *backend, const kiln_node *node);

  /* Device memory for tensor t (t->nbytes bytes), contents undefined. */
  kiln_status (*buffer_alloc)(void *backend, const kiln_tensor *t, void **out_buf);
  /* Optional (may be NULL): a buffer for WEIGHT t that aliases t->data, the
   * host mapping of the file, instead of a copy. Host-memory backends use it. */
  kiln_status (*buffer_map_weight)(void *backend, const kiln_tensor *t, void **out_buf);
  void (*buffer_free)(void *backend, void *buf);
  /* Synchronous copies: when they return, src may be reused / dst is filled. */
  kiln_status (*buffer_upload)(void *backend, void *buf, uint64_t offset, const void *src,
                               uint64_t nbytes);
  kiln_status (*buffer_download)(void *backend, void *buf, uint64_t offset, void *dst,
                                 uint64_t nbytes);

  /* Plan time, once per node, before any run(): choose and obtain kernels
   * (through the kernel cache for GPU backends). */
  kiln_status (*prepare)(void *backend, const kiln_node *node);

  /* Runs step->nodes in order. May return before the device is done. */
  kiln_status (*run)(void *backend, const kiln_step *step);

  /* Waits until every run() and copy issued so far is complete. */
  kiln_status (*sync)(void *backend);

  /* ABI 2.1. Optional (NULL: the backend has no tensor parallelism). One
   * line for `kiln backends` on tensor parallelism over several devices
   * with section cfg (NULL: the defaults): available (the collective
   * library's version, the devices) or why not ("no libnccl.so.2", "1 CUDA
   * device"). Fails only on the plugin's own errors. */
  kiln_status (*probe_parallel)(void *plugin, const kiln_config_section *cfg, char *out_line, size_t cap);

  /* ABI 2.3. Optional (NULL: nothing to say beyond the configuration).
   * After prepare() has run on the plan's nodes: one line, at most cap
   * bytes with its NUL (cap >= 1; a longer line is cut), on the numeric
   * modes that actually run, counted over the prepared nodes, saying where
   * a node or the device made them differ from the configured ones. It is
   * made of items separated by "; ", each beginning with the name of the
   * config key it stands for (or, for a mode without one, of what it
   * describes: hello's "rms_norm f64 sums: 11 nodes") and a space, so that
   * a caller printing the configured modes can show an item in place of
   * its key's value:
   *
   *   "gemm q16mma: 198 batched GEMMs: 196 q16mma (Q4_K 168, Q6_K 28), 2 bf16x3 fallback (F16 2: no mmq decoder)"
   *   "gemm fp8 -> bf16x3 (compute capability 8.6 < 9.0): 198 batched GEMMs: 198 bf16x3 (Q4_K 170, Q6_K 28)"
   *
   * "" when there is nothing to say. Counts cover the nodes prepared on
   * this backend instance since open(). Fails only on the plugin's own
   * errors. Reached through kiln_plan_describe_modes (kiln/plan.h). */
  kiln_status (*describe_modes)(void *backend, char *out_line, size_t cap);
} kiln_backend_ops;

#ifdef __cplusplus
}
#endif
#endif /* KILN_PLUGIN_H */
