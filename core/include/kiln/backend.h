/*
 * kiln/backend.h — finding, loading and opening backend plugins.
 *
 * A plugin is `kiln-<name>.so` (kiln/plugin.h). The loader dlopens it with
 * RTLD_NOW | RTLD_LOCAL, looks up `kiln_backend_entry`, and refuses it,
 * before calling any of its functions, when the symbol is missing, its ABI
 * major differs from the host's, its minor is newer, its table is smaller
 * than the host's table for that minor, a required function is NULL, or its
 * name does not match its file. Each refusal is KILN_STATUS_ABI (or
 * NOT_FOUND / IO) with a message naming the file and both versions, and a
 * hint of what to run next (`ldd FILE` for a library that will not load).
 *
 * The search path: [general] plugin_path (KILN_PLUGIN_PATH), ':'-separated,
 * then the installed plugin folder ($libdir/kiln). The first file with the
 * name wins.
 *
 * Ownership: a kiln_plugin_registry owns the plugins it loads; plugins are
 * unloaded (fini, dlclose) when the registry is freed, after every backend
 * opened from them has been closed.
 */
#ifndef KILN_BACKEND_H
#define KILN_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "kiln/config.h"
#include "kiln/plugin.h"
#include "kiln/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_plugin kiln_plugin;
typedef struct kiln_plugin_registry kiln_plugin_registry;

/* Loads one plugin file and runs its init() with the host table. Errors as
 * described above. */
kiln_status kiln_plugin_load(const char *path, kiln_plugin **out_plugin);
/* fini() and dlclose(); NULL is fine. */
void kiln_plugin_unload(kiln_plugin *p);

const char *kiln_plugin_name(const kiln_plugin *p);
const char *kiln_plugin_path(const kiln_plugin *p);
const kiln_backend_ops *kiln_plugin_entry(const kiln_plugin *p);
/* The plugin's probe(); hardware absence is info->available = false. */
kiln_status kiln_plugin_probe(kiln_plugin *p, kiln_probe_info *out_info);
/* The plugin's line on tensor parallelism with its section of c (c may be
 * NULL: the defaults); "" when the plugin has none (no probe_parallel, or
 * built for ABI 2.0). */
kiln_status kiln_plugin_probe_parallel(kiln_plugin *p, const kiln_config *c, char *out_line, size_t cap);

/* A registry over `search_path` (':'-separated folders; NULL or "" means
 * only the installed folder). Loads nothing yet. */
kiln_status kiln_plugin_registry_new(const char *search_path, kiln_plugin_registry **out_registry);
void kiln_plugin_registry_free(kiln_plugin_registry *r);

/* The plugin `name`, loaded on first request. KILN_STATUS_NOT_FOUND lists
 * the folders searched; a load failure is returned as is (and remembered:
 * asking again returns the same error). */
kiln_status kiln_plugin_registry_get(kiln_plugin_registry *r, const char *name,
                                     kiln_plugin **out_plugin);

/* Whether a file kiln-<name>.so exists on the search path (nothing loaded). */
bool kiln_plugin_registry_has(const kiln_plugin_registry *r, const char *name);

/* Every kiln-*.so on the search path, by name, first occurrence wins:
 * calls fn(name, path, user) for each. For `kiln backends`. */
void kiln_plugin_registry_scan(const kiln_plugin_registry *r,
                               void (*fn)(const char *name, const char *path, void *user),
                               void *user);

/* Loads the plugins that own sections of `c` not yet declared, and declares
 * their config keys, so that kiln_config_validate(c, false) can check them.
 * A section with no plugin of that name is left undeclared (validation then
 * reports it as unknown, naming file and line). */
kiln_status kiln_plugin_registry_declare_sections(kiln_plugin_registry *r, kiln_config *c);

/* An opened backend instance: the plugin's open() with its config section. */
typedef struct kiln_backend {
  kiln_plugin *plugin;
  const kiln_backend_ops *ops;
  void *ctx;
  const char *name;
} kiln_backend;

/* Opens plugin p with its section of c (declared by
 * kiln_plugin_registry_declare_sections or kiln_backend_declare_config). */
kiln_status kiln_backend_open(kiln_plugin *p, const kiln_config *c, kiln_backend **out_backend);
void kiln_backend_close(kiln_backend *b);

/* The backend's describe_modes line (kiln/plugin.h): the numeric modes in
 * effect for the nodes prepared on it, into out_line (cap bytes, NUL
 * included; cap 0 writes nothing). "" when its plugin has no
 * describe_modes (or was built for ABI 2.2 or older) or nothing to say.
 * Errors are the plugin's, annotated with the backend's name; out_line is
 * "" then. */
kiln_status kiln_backend_describe_modes(kiln_backend *b, char *out_line, size_t cap);

/* Declares p's config section in c if it is not declared yet. */
kiln_status kiln_backend_declare_config(kiln_plugin *p, kiln_config *c);

#ifdef __cplusplus
}
#endif
#endif /* KILN_BACKEND_H */
