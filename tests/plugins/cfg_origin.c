/* A test plugin whose open() refuses a value of its own section the way
 * the backends refuse theirs, through backends/common/config_origin.h:
 * [cfg-origin] widgets must be even. A backend's own checks cannot be
 * reached without its hardware (the CUDA plugins probe a device first) or
 * behind the host's schema (the cpu plugin's repeat it), so this one
 * carries the path from the host's cfg_origin to the message a user reads,
 * on any machine. It runs nothing. */
#include <stdlib.h>

#include "config_origin.h"
#include "kiln/plugin.h"

typedef struct co_plugin {
  const kiln_host_api *host;
} co_plugin;

static const kiln_config_key co_keys[] = {
    {.name = "widgets",
     .type = KILN_CONFIG_INT,
     .default_value = "2",
     .min = 0,
     .max = 64,
     .help = "widgets, in pairs: open() refuses an odd number"},
};

static kiln_status co_init(const kiln_host_api *h, void **out) {
  *out = NULL;
  /* as the backends check it: a table of 2.3 will do */
  if (h->abi_major != KILN_PLUGIN_ABI_MAJOR || h->struct_size < KILN_HOST_API_SIZE_2_3)
    return h->status_new(KILN_STATUS_ABI, "cfg-origin: host table of %u bytes", h->struct_size);
  co_plugin *pl = calloc(1, sizeof *pl);
  if (!pl) return h->status_new(KILN_STATUS_NO_MEMORY, "cfg-origin: init");
  pl->host = h;
  *out = pl;
  return NULL;
}
static void co_fini(void *p) { free(p); }
static kiln_status co_probe(void *p, kiln_probe_info *i) {
  (void)p;
  i->available = true;
  return NULL;
}
static kiln_status co_open(void *p, const kiln_config_section *cfg, void **out) {
  const co_plugin *pl = p;
  const kiln_host_api *host = pl->host;
  *out = NULL;
  const long long widgets = cfg ? (long long)host->cfg_int(cfg, "widgets") : 2;
  if (widgets % 2 != 0)
    return kiln_config_origin_annotate(
        host, cfg, "widgets",
        host->status_new(KILN_STATUS_INVALID_ARGUMENT, "[cfg-origin] widgets = %lld is odd", widgets));
  *out = p;
  return NULL;
}
static void co_close(void *b) { (void)b; }
static kiln_status co_supports(void *b, const kiln_node *n) {
  return ((const co_plugin *)b)->host->status_new(KILN_STATUS_UNSUPPORTED, "cfg-origin runs nothing, not %s",
                                                  kiln_op_name(n->op));
}
static kiln_status co_alloc(void *b, const kiln_tensor *t, void **o) { (void)b; (void)t; *o = NULL; return NULL; }
static void co_free(void *b, void *buf) { (void)b; (void)buf; }
static kiln_status co_copy_in(void *b, void *buf, uint64_t o, const void *s, uint64_t n) { (void)b; (void)buf; (void)o; (void)s; (void)n; return NULL; }
static kiln_status co_copy_out(void *b, void *buf, uint64_t o, void *d, uint64_t n) { (void)b; (void)buf; (void)o; (void)d; (void)n; return NULL; }
static kiln_status co_prepare(void *b, const kiln_node *n) { (void)b; (void)n; return NULL; }
static kiln_status co_run(void *b, const kiln_step *s) { (void)b; (void)s; return NULL; }
static kiln_status co_sync(void *b) { (void)b; return NULL; }

const kiln_backend_ops kiln_backend_entry = {
    .abi_major = KILN_PLUGIN_ABI_MAJOR,
    .abi_minor = KILN_PLUGIN_ABI_MINOR,
    .struct_size = sizeof(kiln_backend_ops),
    .name = "cfg-origin",
    .description = "config_origin.h test plugin",
    .config_keys = co_keys,
    .n_config_keys = sizeof co_keys / sizeof co_keys[0],
    .init = co_init, .fini = co_fini, .probe = co_probe, .open = co_open, .close = co_close,
    .supports = co_supports, .buffer_alloc = co_alloc, .buffer_free = co_free,
    .buffer_upload = co_copy_in, .buffer_download = co_copy_out,
    .prepare = co_prepare, .run = co_run, .sync = co_sync,
};
