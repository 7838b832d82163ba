/* The kernel-cache service's entries in the host table plugins receive
 * (kiln/plugin.h). Plugins never link libkiln; these pointers are the only
 * way they reach the service. */
#include "config.h"

#include "kcache_internal.h"

/* Set by the executor (kiln__kcache_host_set_service) around the lifetime
 * of the service it opened from [kernel_cache]; read by plugins through
 * the table's kcache(). */
static kiln_kcache *host_service;

void kiln__kcache_host_set_service(kiln_kcache *kc) { host_service = kc; }

static kiln_kcache *host_kcache(void) { return host_service; }

void kiln__kcache_host_fill(kiln_host_api *api) {
  api->kcache = host_kcache;
  api->kcache_register_template = kiln_kcache_register_template;
  api->kcache_register_compiler = kiln_kcache_register_compiler;
  api->kcache_unregister_compiler = kiln_kcache_unregister_compiler;
  api->kdesc_new = kiln_kdesc_new;
  api->kdesc_set_f32 = kiln_kdesc_set_f32;
  api->kdesc_set_f64 = kiln_kdesc_set_f64;
  api->kdesc_set_i64 = kiln_kdesc_set_i64;
  api->kdesc_set_str = kiln_kdesc_set_str;
  api->kdesc_set_dtype = kiln_kdesc_set_dtype;
  api->kdesc_free = kiln_kdesc_free;
  api->kcache_get = kiln_kcache_get;
}
