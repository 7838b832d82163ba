/* kiln-cpu.so: the entry table of the reference backend (kiln/plugin.h).
 *
 * Everything the ops need from the host is taken from the kiln_host_api
 * table at init() and handed to them in a cpu_ctx; this file is the only one
 * that knows about the plugin ABI. The plugin links nothing of libkiln. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/plugin.h"

#include "config_origin.h"
#include "cpu_ops.h"

#define CPU_MAX_THREADS 1024

typedef struct cpu_plugin {
  const kiln_host_api *host;
} cpu_plugin;

typedef struct cpu_backend {
  const kiln_host_api *host;
  cpu_ctx ctx;
  /* A copy of every node prepare() accepted, by node id: a node of a step
   * that still equals its copy skips the static checks (hundreds of nodes
   * a token make them a measurable cost on small models). */
  kiln_node *prepared;
  uint32_t n_prepared;
} cpu_backend;

static const kiln_config_key cpu_config_keys[] = {
    {.name = "threads",
     .type = KILN_CONFIG_INT,
     .default_value = "0",
     .min = 0,
     .max = CPU_MAX_THREADS,
     .help = "worker threads of the cpu backend; 0 = one per online CPU"},
    {.name = "spin_us",
     .type = KILN_CONFIG_INT,
     .default_value = "200",
     .min = 0,
     .max = 100000,
     .help = "microseconds an idle worker thread polls for the next op before it sleeps (a "
             "step's ops follow each other within microseconds); 0 = sleep at once"},
    {.name = "simd",
     .type = KILN_CONFIG_ENUM,
     .default_value = "auto",
     .choices = "auto|avx2|portable",
     .help = "vector code of the f32 matrix multiplies: auto = the best this CPU runs (avx2 needs "
             "AVX2, FMA and F16C), avx2 = fail at open without them, portable = plain C"},
    {.name = "matvec",
     .type = KILN_CONFIG_ENUM,
     .default_value = "int16",
     .choices = "int16|f32",
     .help = "decode (steps of up to 3 tokens) with block-quantized weights, at precision = f32 on "
             "AVX2: int16 = activations rounded to int16 per block of 32 for integer dot products "
             "(llama.cpp rounds to int8), f32 = exact f32 activations (slower, the prefill's bits)"},
    {.name = "recurrent_guard",
     .type = KILN_CONFIG_ENUM,
     .default_value = "f32",
     .choices = "f32|off",
     .help = "decode matvecs whose output a recurrent state reads (every matvec before a "
             "model's last Gated DeltaNet: qwen35), where the int16 columns' rounding reaches "
             "the delta rule and comes out amplified past parity's 1e-3: f32 = exact f32 "
             "columns for them, off = they follow matvec like the rest; no effect on models "
             "without recurrent layers"},
    {.name = "precision",
     .type = KILN_CONFIG_ENUM,
     .default_value = "f32",
     .choices = "f32|f64",
     .help = "accumulation of every reduction (dot products, sums of squares, attention scores "
             "and sums): f32, or f64 for ground truth; storage stays f32"},
};

static int online_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) return 1;
  return n > CPU_MAX_THREADS ? CPU_MAX_THREADS : (int)n;
}

static kiln_status cpu_init(const kiln_host_api *host, void **out_plugin) {
  *out_plugin = NULL;
  /* The loader has matched our major to the host's; a host table shorter
   * than 2.3's would lack functions we call (cfg_origin, 2.4's, is read
   * only where the table has it: config_origin.h). */
  if (host->abi_major != KILN_PLUGIN_ABI_MAJOR || host->struct_size < KILN_HOST_API_SIZE_2_3)
    return host->status_new(KILN_STATUS_ABI,
                            "cpu: host table is ABI %u.%u with %u bytes; this plugin needs "
                            "%d.x with at least %zu bytes",
                            host->abi_major, host->abi_minor, host->struct_size,
                            KILN_PLUGIN_ABI_MAJOR, KILN_HOST_API_SIZE_2_3);
  cpu_plugin *pl = calloc(1, sizeof *pl);
  if (!pl) return host->status_new(KILN_STATUS_NO_MEMORY, "cpu: no memory for the plugin");
  pl->host = host;
  *out_plugin = pl;
  return NULL;
}

static void cpu_fini(void *plugin) { free(plugin); }

/* Which vector code the ops carry, and what this CPU offers. */
static void simd_summary(char *buf, size_t n) {
  const char *baseline = "scalar";
#if defined(__AVX512F__)
  baseline = "AVX-512F";
#elif defined(__AVX2__)
  baseline = "AVX2";
#elif defined(__AVX__)
  baseline = "AVX";
#elif defined(__SSE2__)
  baseline = "SSE2";
#elif defined(__ARM_NEON)
  baseline = "NEON";
#endif
  cpu_simd s = cpu_simd_detect();
  snprintf(buf, n, "f32 matrix kernels %s (built for %s%s)", cpu_simd_name(s), baseline,
           CPU_HAVE_AVX2_KERNELS ? ", with AVX2+FMA+F16C kernels chosen at run time" : "");
}

static kiln_status cpu_probe(void *plugin, kiln_probe_info *out_info) {
  memset(out_info, 0, sizeof *out_info);
  out_info->available = true;
  snprintf(out_info->device, sizeof out_info->device, "CPU");
  char simd[160];
  simd_summary(simd, sizeof simd);
  snprintf(out_info->detail, sizeof out_info->detail,
           "%d online CPUs (threads = 0 uses them all); f32 storage, f32|f64 accumulation; %s",
           online_cpus(), simd);
  return NULL;
}

static kiln_status cpu_open(void *plugin, const kiln_config_section *cfg, void **out_backend) {
  const cpu_plugin *pl = plugin;
  const kiln_host_api *host = pl->host;
  *out_backend = NULL;

  /* No section at all means every key at its declared default. */
  int64_t threads = cfg ? host->cfg_int(cfg, "threads") : 0;
  int64_t spin_us = cfg ? host->cfg_int(cfg, "spin_us") : CPU_POOL_DEFAULT_SPIN_US;
  const char *precision = cfg ? host->cfg_str(cfg, "precision") : "f32";
  const char *simd_key = cfg ? host->cfg_str(cfg, "simd") : "auto";
  const char *matvec_key = cfg ? host->cfg_str(cfg, "matvec") : "int16";
  const char *guard_key = cfg ? host->cfg_str(cfg, "recurrent_guard") : "f32";
  if (threads < 0 || threads > CPU_MAX_THREADS)
    return kiln_config_origin_annotate(
        host, cfg, "threads",
        host->status_new(KILN_STATUS_OUT_OF_RANGE, "[cpu] threads = %lld is outside 0..%d",
                         (long long)threads, CPU_MAX_THREADS));
  cpu_precision prec;
  if (precision && strcmp(precision, "f32") == 0) prec = CPU_PRECISION_F32;
  else if (precision && strcmp(precision, "f64") == 0) prec = CPU_PRECISION_F64;
  else
    return kiln_config_origin_annotate(
        host, cfg, "precision",
        host->status_new(KILN_STATUS_INVALID_ARGUMENT, "[cpu] precision = '%s' is not one of f32|f64",
                         precision ? precision : "(unset)"));
  if (spin_us < 0 || spin_us > 100000)
    return kiln_config_origin_annotate(
        host, cfg, "spin_us",
        host->status_new(KILN_STATUS_OUT_OF_RANGE, "[cpu] spin_us = %lld is outside 0..100000",
                         (long long)spin_us));
  cpu_simd simd = cpu_simd_detect();
  if (simd_key && strcmp(simd_key, "portable") == 0) simd = CPU_SIMD_PORTABLE;
  else if (simd_key && strcmp(simd_key, "avx2") == 0 && simd != CPU_SIMD_AVX2)
    return kiln_config_origin_annotate(
        host, cfg, "simd",
        host->status_new(KILN_STATUS_UNAVAILABLE,
                         "[cpu] simd = avx2, but this CPU (or build) lacks AVX2, FMA or F16C"));
  else if (!simd_key || (strcmp(simd_key, "auto") != 0 && strcmp(simd_key, "avx2") != 0))
    return kiln_config_origin_annotate(
        host, cfg, "simd",
        host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                         "[cpu] simd = '%s' is not one of auto|avx2|portable",
                         simd_key ? simd_key : "(unset)"));
  cpu_matvec matvec;
  if (matvec_key && strcmp(matvec_key, "int16") == 0) matvec = CPU_MATVEC_INT16;
  else if (matvec_key && strcmp(matvec_key, "f32") == 0) matvec = CPU_MATVEC_F32;
  else
    return kiln_config_origin_annotate(
        host, cfg, "matvec",
        host->status_new(KILN_STATUS_INVALID_ARGUMENT, "[cpu] matvec = '%s' is not one of int16|f32",
                         matvec_key ? matvec_key : "(unset)"));
  bool guard;
  if (guard_key && strcmp(guard_key, "f32") == 0) guard = true;
  else if (guard_key && strcmp(guard_key, "off") == 0) guard = false;
  else
    return kiln_config_origin_annotate(
        host, cfg, "recurrent_guard",
        host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                         "[cpu] recurrent_guard = '%s' is not one of f32|off",
                         guard_key ? guard_key : "(unset)"));
  if (threads == 0) threads = online_cpus();

  cpu_backend *be = calloc(1, sizeof *be);
  if (!be) return host->status_new(KILN_STATUS_NO_MEMORY, "cpu: no memory for a backend");
  int rc = cpu_pool_create((int)threads, &be->ctx.pool);
  if (rc != 0) {
    free(be);
    kiln_status_code code =
        rc == ENOMEM || rc == EAGAIN ? KILN_STATUS_NO_MEMORY : KILN_STATUS_INTERNAL;
    return host->status_new(code, "cpu: cannot start %lld worker threads: %s",
                            (long long)threads, strerror(rc));
  }
  cpu_pool_set_spin(be->ctx.pool, (int)spin_us);
  be->host = host;
  be->ctx.precision = prec;
  be->ctx.simd = simd;
  be->ctx.matvec = matvec;
  be->ctx.recurrent_guard = guard;
  be->ctx.dequantize = host->dequantize;
  be->ctx.status_new = host->status_new;
  be->ctx.status_annotate = host->status_annotate;
  be->ctx.status_free = host->status_free;
  const bool fast = prec == CPU_PRECISION_F32 && simd == CPU_SIMD_AVX2;
  host->log(KILN_LOG_INFO, "cpu", "%lld threads, %s accumulation, %s kernels%s%s", (long long)threads,
            prec == CPU_PRECISION_F64 ? "f64" : "f32",
            prec == CPU_PRECISION_F64 ? "reference" : cpu_simd_name(simd),
            fast ? (matvec == CPU_MATVEC_INT16 ? ", int16 decode columns" : ", f32 decode columns") : "",
            fast && matvec == CPU_MATVEC_INT16
                ? (guard ? " (f32 for the matvecs that feed a recurrent state)"
                         : " (recurrent_guard off: int16 for those that feed a recurrent state too)")
                : "");
  *out_backend = be;
  return NULL;
}

static void cpu_close(void *backend) {
  cpu_backend *be = backend;
  if (!be) return;
  cpu_pool_destroy(be->ctx.pool);
  free(be->prepared);
  free(be);
}

static kiln_status cpu_supports(void *backend, const kiln_node *node) {
  const cpu_backend *be = backend;
  return cpu_node_supports(&be->ctx, node);
}

static kiln_status cpu_buffer_alloc_entry(void *backend, const kiln_tensor *t, void **out_buf) {
  const cpu_backend *be = backend;
  cpu_buffer *b;
  kiln_status st = cpu_buffer_alloc(&be->ctx, t, &b);
  *out_buf = b;
  return st;
}

static kiln_status cpu_buffer_map_weight_entry(void *backend, const kiln_tensor *t,
                                               void **out_buf) {
  const cpu_backend *be = backend;
  cpu_buffer *b;
  kiln_status st = cpu_buffer_map_weight(&be->ctx, t, &b);
  *out_buf = b;
  return st;
}

static void cpu_buffer_free_entry(void *backend, void *buf) { cpu_buffer_free(buf); }

static kiln_status cpu_buffer_upload_entry(void *backend, void *buf, uint64_t offset,
                                           const void *src, uint64_t nbytes) {
  const cpu_backend *be = backend;
  return cpu_buffer_upload(&be->ctx, buf, offset, src, nbytes);
}

static kiln_status cpu_buffer_download_entry(void *backend, void *buf, uint64_t offset,
                                             void *dst, uint64_t nbytes) {
  const cpu_backend *be = backend;
  return cpu_buffer_download(&be->ctx, buf, offset, dst, nbytes);
}

static kiln_status cpu_prepare(void *backend, const kiln_node *node) {
  cpu_backend *be = backend;
  KILN_RETURN_IF_ERROR(cpu_node_validate(&be->ctx, node));
  if (node->id < 0 || node->id >= INT32_MAX) return NULL; /* valid, but not remembered */
  uint32_t id = (uint32_t)node->id;
  if (id >= be->n_prepared) {
    uint32_t n = id + 1 > 2 * be->n_prepared ? id + 1 : 2 * be->n_prepared;
    kiln_node *p = realloc(be->prepared, (size_t)n * sizeof *p);
    if (!p) return NULL; /* run() then checks this node in full */
    memset(p + be->n_prepared, 0, (size_t)(n - be->n_prepared) * sizeof *p);
    be->prepared = p;
    be->n_prepared = n;
  }
  /* padding too, so run() can compare bytes */
  memcpy(&be->prepared[id], node, sizeof *node);
  return NULL;
}

/* Whether node is one prepare() accepted, unchanged since. */
static bool was_prepared(const cpu_backend *be, const kiln_node *node) {
  return node->id >= 0 && (uint32_t)node->id < be->n_prepared &&
         memcmp(&be->prepared[node->id], node, sizeof *node) == 0;
}

/* The buffer of tensor t in this step: present, and as large as t says. */
static kiln_status step_buffer(const cpu_backend *be, const kiln_step *step,
                               const kiln_node *node, const kiln_tensor *t, const void **out) {
  if (t->id < 0)
    return cpu_node_error(&be->ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "tensor '%.*s' has id %d", KILN_NAME_MAX, t->name, (int)t->id);
  const cpu_buffer *b = step->bufs[t->id];
  if (!b)
    return cpu_node_error(&be->ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "tensor '%.*s' (id %d) has no cpu buffer", KILN_NAME_MAX, t->name,
                          (int)t->id);
  if (b->nbytes < t->nbytes)
    return cpu_node_error(&be->ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                          "buffer of '%.*s' holds %llu bytes, the tensor %llu", KILN_NAME_MAX,
                          t->name, (unsigned long long)b->nbytes,
                          (unsigned long long)t->nbytes);
  *out = b->data;
  return NULL;
}

static kiln_status cpu_run(void *backend, const kiln_step *step) {
  const cpu_backend *be = backend;
  for (uint32_t i = 0; i < step->n_nodes; i++) {
    const kiln_node *node = step->nodes[i];
    cpu_io io = {.n_tokens = step->n_tokens, .pos0 = step->pos0};
    for (int s = 0; s < KILN_MAX_SRC; s++) {
      if (node->src[s]) KILN_RETURN_IF_ERROR(step_buffer(be, step, node, node->src[s], &io.src[s]));
    }
    if (!node->dst)
      return cpu_node_error(&be->ctx, KILN_STATUS_INVALID_ARGUMENT, node, "dst is missing");
    const void *dst;
    KILN_RETURN_IF_ERROR(step_buffer(be, step, node, node->dst, &dst));
    const cpu_buffer *db = step->bufs[node->dst->id];
    if (!db->owned)
      return cpu_node_error(&be->ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                            "dst '%.*s' is a mapped weight (read-only)", KILN_NAME_MAX,
                            node->dst->name);
    io.dst = db->data;
    int state = kiln_op_state_src(node->op);
    if (state >= 0 && node->src[state] && !((const cpu_buffer *)step->bufs[node->src[state]->id])->owned)
      return cpu_node_error(&be->ctx, KILN_STATUS_INVALID_ARGUMENT, node,
                            "state src%d '%.*s' is a mapped weight (read-only)", state,
                            KILN_NAME_MAX, node->src[state]->name);
    if (was_prepared(be, node)) KILN_RETURN_IF_ERROR(cpu_node_run_validated(&be->ctx, node, &io));
    else KILN_RETURN_IF_ERROR(cpu_node_run(&be->ctx, node, &io));
  }
  return NULL;
}

/* run() finishes its work before returning: nothing is ever in flight. */
static kiln_status cpu_sync(void *backend) { return NULL; }

const kiln_backend_ops kiln_backend_entry = {
    .abi_major = KILN_PLUGIN_ABI_MAJOR,
    .abi_minor = KILN_PLUGIN_ABI_MINOR,
    .struct_size = sizeof(kiln_backend_ops),
    .name = "cpu",
    .description = "reference backend: host memory, f32 storage, f32 or f64 accumulation",
    .config_keys = cpu_config_keys,
    .n_config_keys = sizeof cpu_config_keys / sizeof cpu_config_keys[0],
    .init = cpu_init,
    .fini = cpu_fini,
    .probe = cpu_probe,
    .open = cpu_open,
    .close = cpu_close,
    .supports = cpu_supports,
    .buffer_alloc = cpu_buffer_alloc_entry,
    .buffer_map_weight = cpu_buffer_map_weight_entry,
    .buffer_free = cpu_buffer_free_entry,
    .buffer_upload = cpu_buffer_upload_entry,
    .buffer_download = cpu_buffer_download_entry,
    .prepare = cpu_prepare,
    .run = cpu_run,
    .sync = cpu_sync,
};
