/* The table of host services every plugin receives at init(). */
#include "config.h"

#include "kiln/host.h"

#include "kiln/config.h"
#include "kiln/dequant.h"
#include "kiln/log.h"
#include "kcache/kcache_internal.h"

static kiln_status host_status_new(kiln_status_code code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln_status st = kiln_status_newv(code, fmt, ap);
  va_end(ap);
  return st;
}

static kiln_status host_status_annotate(kiln_status st, const char *fmt, ...) {
  if (!st) return NULL;
  va_list ap;
  va_start(ap, fmt);
  st = kiln_status_annotatev(st, fmt, ap);
  va_end(ap);
  return st;
}

static void host_log(kiln_log_level level, const char *plugin, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln_logv(level, plugin, fmt, ap);
  va_end(ap);
}

static kiln_host_api host_api;
static int host_api_ready;

const kiln_host_api *kiln_host_api_get(void) {
  /* Filled on first use; plugins are loaded from one thread (the loader's
   * contract), and filling twice writes the same values. */
  if (!host_api_ready) {
    host_api.abi_major = KILN_PLUGIN_ABI_MAJOR;
    host_api.abi_minor = KILN_PLUGIN_ABI_MINOR;
    host_api.struct_size = sizeof(kiln_host_api);
    host_api.log = host_log;
    host_api.status_new = host_status_new;
    host_api.status_annotate = host_status_annotate;
    host_api.status_free = kiln_status_free;
    host_api.cfg_str = kiln_config_get_str;
    host_api.cfg_int = kiln_config_get_int;
    host_api.cfg_float = kiln_config_get_float;
    host_api.cfg_bool = kiln_config_get_bool;
    host_api.cfg_origin = kiln_config_origin;
    host_api.dequantize = kiln_dequantize;
    kiln__kcache_host_fill(&host_api);
    host_api_ready = 1;
  }
  return &host_api;
}
