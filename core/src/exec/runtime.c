/* The runtime: configuration and plugins, set up in the order the config
 * needs (core keys first, then the plugins that own the other sections). */
#include "config.h"

#include "kiln/kiln.h"

#include <stdlib.h>
#include <string.h>

#include "kiln/kcache.h"
#include "kiln/log.h"
#include "kcache/kcache_internal.h"
#include "runtime_internal.h"

struct kiln_runtime {
  kiln_config *config;
  kiln_plugin_registry *plugins;
  kiln_kcache *kcache;
};

/* Routes the kernel cache's log lines (discarded entries, ...) to kiln's. */
static void kcache_log(void *user, int level, const char *line) {
  (void)user;
  kiln_log((kiln_log_level)level, "kernel-cache", "%s", line);
}

/* The kernel-cache service from [kernel_cache], handed to plugins through
 * the host table: one per process (a second runtime shares nothing). */
static kiln_status open_kcache(kiln_runtime *rt) {
  const kiln_config_section *s = kiln_config_section_get(rt->config, "kernel_cache");
  kiln_kcache_options o = {kiln_config_get_str(s, "dir"), kiln_config_get_bool(s, "enabled"), kcache_log, NULL};
  KILN_RETURN_IF_ERROR(kiln_kcache_open(&o, &rt->kcache));
  kiln__kcache_host_set_service(rt->kcache);
  return NULL;
}

const char *kiln_version(void) { return KILN_VERSION_STRING; }

static kiln_status setup(kiln_runtime *rt, const kiln_runtime_options *opt) {
  kiln_config *c;
  KILN_RETURN_IF_ERROR(kiln_config_new(&c));
  rt->config = c;
  KILN_RETURN_IF_ERROR(kiln_config_declare(c, "kernel_cache", kiln_kcache_config_keys, kiln_kcache_n_config_keys));
  const char *path = opt->config_path;
  if (!path && opt->use_environment) {
    const char *env = getenv("KILN_CONFIG");
    if (env && *env) path = env;
  }
  if (path) KILN_RETURN_IF_ERROR(kiln_config_load_file(c, path));
  if (opt->use_environment) KILN_RETURN_IF_ERROR(kiln_config_apply_env(c));
  for (size_t i = 0; i < opt->n_overrides; i++) {
    const kiln_config_override *o = &opt->overrides[i];
    KILN_RETURN_IF_ERROR(kiln_config_set(c, o->section, o->key, o->value, o->origin));
  }
  /* Core sections first: they say where the plugins are. */
  KILN_RETURN_IF_ERROR(kiln_config_validate(c, true));
  const kiln_config_section *general = kiln_config_section_get(c, "general");
  int level = kiln_log_level_parse(kiln_config_get_str(general, "log_level"));
  if (level >= 0) kiln_log_set_level((kiln_log_level)level);
  KILN_RETURN_IF_ERROR(open_kcache(rt));
  const char *cfg_path = kiln_config_get_str(general, "plugin_path");
  const char *extra = opt->extra_plugin_path;
  size_t len = (cfg_path ? strlen(cfg_path) : 0) + (extra ? strlen(extra) : 0) + 2;
  char *search = malloc(len);
  if (!search) return kiln_status_new(KILN_STATUS_NO_MEMORY, "plugin search path");
  snprintf(search, len, "%s%s%s", cfg_path ? cfg_path : "", cfg_path && extra ? ":" : "", extra ? extra : "");
  kiln_status st = kiln_plugin_registry_new(search, &rt->plugins);
  free(search);
  KILN_RETURN_IF_ERROR(st);
  /* Plugins named by sections declare their keys; the configured backend
   * and cpu (the fallback) too, so their defaults exist. */
  KILN_RETURN_IF_ERROR(kiln_plugin_registry_declare_sections(rt->plugins, c));
  return kiln_config_validate(c, false);
}

kiln_status kiln_runtime_open(const kiln_runtime_options *opt, kiln_runtime **out_runtime) {
  *out_runtime = NULL;
  kiln_runtime_options none = {0};
  if (!opt) opt = &none;
  kiln_runtime *rt = calloc(1, sizeof *rt);
  if (!rt) return kiln_status_new(KILN_STATUS_NO_MEMORY, "runtime");
  kiln_status st = setup(rt, opt);
  if (st) {
    kiln_runtime_free(rt);
    return st;
  }
  *out_runtime = rt;
  return NULL;
}

void kiln_runtime_free(kiln_runtime *rt) {
  if (!rt) return;
  kiln_plugin_registry_free(rt->plugins); /* plugins unregister their compilers */
  if (rt->kcache) kiln__kcache_host_set_service(NULL);
  kiln_kcache_close(rt->kcache);
  kiln_config_free(rt->config);
  free(rt);
}

const kiln_config *kiln_runtime_config(const kiln_runtime *rt) { return rt->config; }
kiln_kcache *kiln_runtime_kcache(kiln_runtime *rt) { return rt->kcache; }
kiln_plugin_registry *kiln_runtime_plugins(kiln_runtime *rt) { return rt->plugins; }

/* Declares plugin `name`'s config section (defaults) if no entry named it. */
kiln_status kiln__runtime_declare_backend(kiln_runtime *rt, const char *name) {
  kiln_plugin *p;
  KILN_RETURN_IF_ERROR(kiln_plugin_registry_get(rt->plugins, name, &p));
  return kiln_backend_declare_config(p, rt->config);
}
