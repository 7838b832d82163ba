/*
 * kiln-hello: the smallest useful backend. It runs RMSNorm and add on host
 * memory and refuses every other node, so a plan on it shows the planner's
 * two answers: with `fallback = error` it fails naming the first node it
 * cannot run; with `fallback = cpu` those nodes run on cpu and the run's
 * summary lists them.
 *
 * Built in-tree, and under `make distcheck` once more out of tree against
 * the installed headers through `pkg-config kiln-plugin` alone (see
 * plugins/README.md). It links nothing of kiln's: the host table is all it
 * gets.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/plugin.h>

typedef struct hello {
  const kiln_host_api *host;
} hello;

/* One backend instance (open .. close): the host, and what describe_modes
 * reports. */
typedef struct hello_backend {
  const kiln_host_api *host;
  uint32_t n_rms_norm; /* RMS_NORM nodes prepared */
} hello_backend;

typedef struct hello_buffer {
  uint64_t size;
  unsigned char data[]; /* the tensor's bytes */
} hello_buffer;

static kiln_status hello_init(const kiln_host_api *host, void **out_plugin) {
  hello *h = calloc(1, sizeof *h);
  if (!h) return host->status_new(KILN_STATUS_NO_MEMORY, "hello: init");
  h->host = host;
  *out_plugin = h;
  return NULL;
}

static void hello_fini(void *plugin) { free(plugin); }

static kiln_status hello_probe(void *plugin, kiln_probe_info *out_info) {
  (void)plugin;
  out_info->available = true;
  strcpy(out_info->device, "host memory");
  strcpy(out_info->detail, "RMSNorm and add only (an example backend)");
  return NULL;
}

static kiln_status hello_open(void *plugin, const kiln_config_section *cfg, void **out_backend) {
  (void)cfg;
  const hello *h = plugin;
  hello_backend *b = calloc(1, sizeof *b);
  if (!b) return h->host->status_new(KILN_STATUS_NO_MEMORY, "hello: open");
  b->host = h->host;
  *out_backend = b;
  return NULL;
}

static void hello_close(void *backend) { free(backend); }

static kiln_status hello_supports(void *backend, const kiln_node *node) {
  hello_backend *h = backend;
  if (node->op != KILN_OP_RMS_NORM && node->op != KILN_OP_ADD)
    return h->host->status_new(KILN_STATUS_UNSUPPORTED, "hello runs only rms_norm and add, not %s",
                               kiln_op_name(node->op));
  for (int i = 0; i < KILN_MAX_SRC && node->src[i]; i++)
    if (node->src[i]->type != KILN_TYPE_F32)
      return h->host->status_new(KILN_STATUS_UNSUPPORTED, "hello needs F32 sources, %s is %s",
                                 node->src[i]->name, kiln_type_name(node->src[i]->type));
  return NULL;
}

static kiln_status hello_buffer_alloc(void *backend, const kiln_tensor *t, void **out_buf) {
  hello_backend *h = backend;
  hello_buffer *b = malloc(sizeof *b + t->nbytes);
  if (!b) return h->host->status_new(KILN_STATUS_NO_MEMORY, "hello: %llu bytes for %s",
                                     (unsigned long long)t->nbytes, t->name);
  b->size = t->nbytes;
  *out_buf = b;
  return NULL;
}

static void hello_buffer_free(void *backend, void *buf) {
  (void)backend;
  free(buf);
}

static kiln_status check_range(hello_backend *h, hello_buffer *b, uint64_t offset, uint64_t n) {
  if (offset > b->size || n > b->size - offset)
    return h->host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                               "hello: copy of %llu bytes at %llu outside a %llu-byte buffer",
                               (unsigned long long)n, (unsigned long long)offset,
                               (unsigned long long)b->size);
  return NULL;
}

static kiln_status hello_upload(void *backend, void *buf, uint64_t offset, const void *src, uint64_t n) {
  hello_buffer *b = buf;
  kiln_status st = check_range(backend, b, offset, n);
  if (!st) memcpy(b->data + offset, src, n);
  return st;
}

static kiln_status hello_download(void *backend, void *buf, uint64_t offset, void *dst, uint64_t n) {
  hello_buffer *b = buf;
  kiln_status st = check_range(backend, b, offset, n);
  if (!st) memcpy(dst, b->data + offset, n);
  return st;
}

static kiln_status hello_prepare(void *backend, const kiln_node *node) {
  hello_backend *h = backend;
  if (node->op == KILN_OP_RMS_NORM && node->src[0]->ne[0] % node->src[1]->ne[0] != 0)
    return h->host->status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: width %lld is not a multiple of %lld",
                               node->name, (long long)node->src[0]->ne[0], (long long)node->src[1]->ne[0]);
  h->n_rms_norm += node->op == KILN_OP_RMS_NORM;
  return NULL;
}

/* Optional (ABI 2.3): what the configuration does not say. hello has no
 * keys, but its RMSNorm sums in double where cpu's default sums in f32. */
static kiln_status hello_describe_modes(void *backend, char *out_line, size_t cap) {
  const hello_backend *h = backend;
  if (h->n_rms_norm)
    snprintf(out_line, cap, "rms_norm f64 sums: %u node%s", h->n_rms_norm, h->n_rms_norm == 1 ? "" : "s");
  return NULL;
}

#define DATA(step, t) ((float *)((hello_buffer *)(step)->bufs[(t)->id])->data)

/* y = x / sqrt(mean(x^2) + eps) * w, accumulating in double. */
static void rms_norm(const kiln_node *n, const kiln_step *step) {
  const float *x = DATA(step, n->src[0]), *w = DATA(step, n->src[1]);
  float *y = DATA(step, n->dst);
  int64_t len = n->src[1]->ne[0];
  int64_t rows = n->src[0]->ne[0] / len * step->n_tokens;
  for (int64_t r = 0; r < rows; r++) {
    double ss = 0.0;
    for (int64_t i = 0; i < len; i++) ss += (double)x[r * len + i] * x[r * len + i];
    float scale = (float)(1.0 / sqrt(ss / (double)len + (double)n->p.rms_norm.eps));
    for (int64_t i = 0; i < len; i++) y[r * len + i] = x[r * len + i] * scale * w[i];
  }
}

static void add(const kiln_node *n, const kiln_step *step) {
  const float *a = DATA(step, n->src[0]), *b = DATA(step, n->src[1]);
  float *y = DATA(step, n->dst);
  int64_t count = n->dst->ne[0] * step->n_tokens;
  for (int64_t i = 0; i < count; i++) y[i] = a[i] + b[i];
}

static kiln_status hello_run(void *backend, const kiln_step *step) {
  (void)backend;
  for (uint32_t i = 0; i < step->n_nodes; i++) {
    const kiln_node *n = step->nodes[i];
    if (n->op == KILN_OP_RMS_NORM) rms_norm(n, step);
    else add(n, step);
  }
  return NULL;
}

static kiln_status hello_sync(void *backend) {
  (void)backend;
  return NULL;
}

const kiln_backend_ops kiln_backend_entry = {
    .abi_major = KILN_PLUGIN_ABI_MAJOR,
    .abi_minor = KILN_PLUGIN_ABI_MINOR,
    .struct_size = sizeof(kiln_backend_ops),
    .name = "hello",
    .description = "example plugin: RMSNorm and add on host memory",
    .config_keys = NULL,
    .n_config_keys = 0,
    .init = hello_init,
    .fini = hello_fini,
    .probe = hello_probe,
    .open = hello_open,
    .close = hello_close,
    .supports = hello_supports,
    .buffer_alloc = hello_buffer_alloc,
    .buffer_map_weight = NULL,
    .buffer_free = hello_buffer_free,
    .buffer_upload = hello_upload,
    .buffer_download = hello_download,
    .prepare = hello_prepare,
    .run = hello_run,
    .sync = hello_sync,
    .probe_parallel = NULL,
    .describe_modes = hello_describe_modes,
};
