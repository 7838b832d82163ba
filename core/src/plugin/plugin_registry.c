/* The plugin search path and the plugins loaded from it, by name. */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/backend.h"

typedef struct slot {
  char *name;
  kiln_plugin *plugin; /* NULL when loading failed */
  kiln_status error;   /* why, kept so asking again says the same */
} slot;

struct kiln_plugin_registry {
  char **dirs;
  size_t n_dirs;
  slot *slots;
  size_t n_slots;
};

static kiln_status add_dir(kiln_plugin_registry *r, const char *dir, size_t len) {
  if (len == 0) return NULL;
  char **d = realloc(r->dirs, (r->n_dirs + 1) * sizeof *d);
  if (!d) return kiln_status_new(KILN_STATUS_NO_MEMORY, "plugin search path");
  r->dirs = d;
  r->dirs[r->n_dirs++] = strndup(dir, len);
  return NULL;
}

kiln_status kiln_plugin_registry_new(const char *search_path, kiln_plugin_registry **out_registry) {
  *out_registry = NULL;
  kiln_plugin_registry *r = calloc(1, sizeof *r);
  if (!r) return kiln_status_new(KILN_STATUS_NO_MEMORY, "plugin registry");
  kiln_status st = NULL;
  for (const char *p = search_path; p && *p && !st;) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    st = add_dir(r, p, len);
    p = colon ? colon + 1 : NULL;
  }
  if (!st) st = add_dir(r, KILN_PLUGIN_DIR, strlen(KILN_PLUGIN_DIR));
  if (st) {
    kiln_plugin_registry_free(r);
    return st;
  }
  *out_registry = r;
  return NULL;
}

void kiln_plugin_registry_free(kiln_plugin_registry *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_slots; i++) {
    kiln_plugin_unload(r->slots[i].plugin);
    kiln_status_free(r->slots[i].error);
    free(r->slots[i].name);
  }
  for (size_t i = 0; i < r->n_dirs; i++) free(r->dirs[i]);
  free(r->slots);
  free(r->dirs);
  free(r);
}

/* Backend names are [a-z0-9][a-z0-9_-]*: a name is never a path. */
static bool valid_name(const char *name) {
  if (!*name || !((*name >= 'a' && *name <= 'z') || (*name >= '0' && *name <= '9'))) return false;
  for (const char *p = name; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-')) return false;
  return strlen(name) < 64;
}

/* Path of the first kiln-<name>.so on the search path, malloc'd, or NULL. */
static char *find_file(const kiln_plugin_registry *r, const char *name) {
  for (size_t i = 0; i < r->n_dirs; i++) {
    size_t n = strlen(r->dirs[i]) + strlen(name) + 16;
    char *path = malloc(n);
    if (!path) return NULL;
    snprintf(path, n, "%s/kiln-%s.so", r->dirs[i], name);
    if (access(path, F_OK) == 0) return path;
    free(path);
  }
  return NULL;
}

bool kiln_plugin_registry_has(const kiln_plugin_registry *r, const char *name) {
  if (!valid_name(name)) return false;
  char *p = find_file(r, name);
  free(p);
  return p != NULL;
}

static kiln_status not_found(const kiln_plugin_registry *r, const char *name) {
  char dirs[2048] = "";
  size_t used = 0;
  for (size_t i = 0; i < r->n_dirs && used < sizeof dirs; i++)
    used += (size_t)snprintf(dirs + used, sizeof dirs - used, "%s%s", i ? ", " : "", r->dirs[i]);
  return kiln_status_new(KILN_STATUS_NOT_FOUND,
                         "no backend plugin \"%s\": kiln-%s.so is in none of %s (`kiln backends` "
                         "lists the plugins found; KILN_PLUGIN_PATH adds folders)",
                         name, name, dirs);
}

kiln_status kiln_plugin_registry_get(kiln_plugin_registry *r, const char *name,
                                     kiln_plugin **out_plugin) {
  *out_plugin = NULL;
  if (!valid_name(name))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "\"%s\" is not a backend name (lower-case letters, digits, '-' and '_')", name);
  for (size_t i = 0; i < r->n_slots; i++) {
    if (strcmp(r->slots[i].name, name) != 0) continue;
    if (r->slots[i].plugin) {
      *out_plugin = r->slots[i].plugin;
      return NULL;
    }
    return kiln_status_new(kiln_status_code_of(r->slots[i].error), "%s",
                           kiln_status_message(r->slots[i].error));
  }
  char *path = find_file(r, name);
  if (!path) return not_found(r, name);
  slot *s = realloc(r->slots, (r->n_slots + 1) * sizeof *s);
  if (!s) {
    free(path);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "plugin registry");
  }
  r->slots = s;
  slot *sl = &r->slots[r->n_slots++];
  sl->name = strdup(name);
  sl->error = kiln_plugin_load(path, &sl->plugin);
  free(path);
  if (sl->error)
    return kiln_status_new(kiln_status_code_of(sl->error), "%s", kiln_status_message(sl->error));
  *out_plugin = sl->plugin;
  return NULL;
}

void kiln_plugin_registry_scan(const kiln_plugin_registry *r,
                               void (*fn)(const char *name, const char *path, void *user),
                               void *user) {
  char **seen = NULL;
  size_t n_seen = 0;
  for (size_t i = 0; i < r->n_dirs; i++) {
    /* Sorted within a folder, so the listing is stable. */
    struct dirent **list;
    int n = scandir(r->dirs[i], &list, NULL, alphasort);
    for (int j = 0; j < n; j++) {
      const char *f = list[j]->d_name;
      size_t len = strlen(f);
      if (len > 8 && strncmp(f, "kiln-", 5) == 0 && strcmp(f + len - 3, ".so") == 0) {
        char *name = strndup(f + 5, len - 8);
        bool dup = false;
        for (size_t k = 0; k < n_seen && !dup; k++) dup = strcmp(seen[k], name) == 0;
        if (!dup) {
          char **grown = realloc(seen, (n_seen + 1) * sizeof *seen);
          if (grown) {
            seen = grown;
            seen[n_seen++] = name;
            size_t pn = strlen(r->dirs[i]) + len + 2;
            char *path = malloc(pn);
            if (path) {
              snprintf(path, pn, "%s/%s", r->dirs[i], f);
              fn(name, path, user);
              free(path);
            }
            name = NULL;
          }
        }
        free(name);
      }
      free(list[j]);
    }
    if (n >= 0) free(list);
  }
  for (size_t k = 0; k < n_seen; k++) free(seen[k]);
  free(seen);
}

typedef struct declare_ctx {
  kiln_plugin_registry *r;
  kiln_config *c;
  kiln_status st;
} declare_ctx;

static void declare_one(const char *section, void *user) {
  declare_ctx *d = user;
  if (d->st || !kiln_plugin_registry_has(d->r, section)) return;
  kiln_plugin *p;
  kiln_status st = kiln_plugin_registry_get(d->r, section, &p);
  if (!st) st = kiln_backend_declare_config(p, d->c);
  if (st) d->st = kiln_status_annotate(st, "configuration section [%s]", section);
}

kiln_status kiln_plugin_registry_declare_sections(kiln_plugin_registry *r, kiln_config *c) {
  declare_ctx d = {r, c, NULL};
  kiln_config_each_undeclared(c, declare_one, &d);
  return d.st;
}
