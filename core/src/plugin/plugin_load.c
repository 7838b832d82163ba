/* Loading one plugin: dlopen, the entry symbol, the ABI checks, init(). */
#define _GNU_SOURCE 1 /* dladdr1, dlinfo: the entry symbol's ELF type and size */
#include "config.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/backend.h"
#include "kiln/host.h"
#include "kiln/log.h"

struct kiln_plugin {
  void *dl;
  const kiln_backend_ops *entry;
  void *state; /* from init() */
  char *path;
};

/* The smallest entry table the host accepts for each ABI minor: the table
 * as it ended in that minor (2.4 grew the host table only). */
static size_t required_size(uint32_t minor) {
  if (minor == 0) return offsetof(kiln_backend_ops, sync) + sizeof(((kiln_backend_ops *)0)->sync);
  if (minor < 3) /* 2.2 added no bytes */
    return offsetof(kiln_backend_ops, probe_parallel) + sizeof(((kiln_backend_ops *)0)->probe_parallel);
  return offsetof(kiln_backend_ops, describe_modes) + sizeof(((kiln_backend_ops *)0)->describe_modes);
}

/* "kiln-cuda-serial.so" -> "cuda-serial"; NULL when the name has another shape. */
static char *name_from_path(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t n = strlen(base);
  if (n <= 8 || strncmp(base, "kiln-", 5) != 0 || strcmp(base + n - 3, ".so") != 0) return NULL;
  return strndup(base + 5, n - 8);
}

static const char *elf_type_name(unsigned type) {
  switch (type) {
  case STT_NOTYPE: return "symbol without a type";
  case STT_FUNC: return "function";
  case STT_SECTION: return "section";
  case STT_FILE: return "file symbol";
  case STT_COMMON: return "common block";
  case STT_TLS: return "thread-local variable";
  case STT_GNU_IFUNC: return "indirect function";
  }
  return "symbol of an unknown type";
}

/* What the dynamic linker knows of the entry symbol, checked before a byte
 * of it is read: a data object defined by this plugin (not by a library
 * it pulls in), aligned for a kiln_backend_ops and large enough for the
 * three version fields. *out_size: the object's size in bytes. */
static kiln_status check_symbol(void *dl, const void *sym, const char *path, size_t *out_size) {
  Dl_info info;
  const ElfW(Sym) *es = NULL;
  if (!dladdr1(sym, &info, (void **)&es, RTLD_DL_SYMENT) || !es)
    return kiln_status_new(KILN_STATUS_ABI,
                           "%s: the dynamic linker has no symbol information for %s", path,
                           KILN_PLUGIN_ENTRY_SYMBOL);
  struct link_map *lm = NULL;
  if (dlinfo(dl, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && info.dli_fname &&
      strcmp(lm->l_name, info.dli_fname) != 0)
    return kiln_status_new(KILN_STATUS_ABI,
                           "%s: its %s is defined in %s, a library it loads, not in the plugin",
                           path, KILN_PLUGIN_ENTRY_SYMBOL, info.dli_fname);
  unsigned type = ELF64_ST_TYPE(es->st_info); /* the same low 4 bits in ELF32 */
  if (type != STT_OBJECT)
    return kiln_status_new(KILN_STATUS_ABI,
                           "%s: %s is a %s, not a data object (it must be a const "
                           "kiln_backend_ops): not a kiln backend plugin",
                           path, KILN_PLUGIN_ENTRY_SYMBOL, elf_type_name(type));
  if ((uintptr_t)sym % _Alignof(kiln_backend_ops) != 0)
    return kiln_status_new(KILN_STATUS_ABI,
                           "%s: %s at %p is not aligned to the %zu bytes a kiln_backend_ops "
                           "needs: not a kiln backend plugin",
                           path, KILN_PLUGIN_ENTRY_SYMBOL, sym, _Alignof(kiln_backend_ops));
  size_t header = offsetof(kiln_backend_ops, struct_size) + sizeof(uint32_t);
  if (es->st_size < header)
    return kiln_status_new(KILN_STATUS_ABI,
                           "%s: %s is %zu bytes, too small even for the ABI version fields "
                           "(%zu bytes): not a kiln backend plugin",
                           path, KILN_PLUGIN_ENTRY_SYMBOL, (size_t)es->st_size, header);
  *out_size = (size_t)es->st_size;
  return NULL;
}

static kiln_status check_entry(const kiln_backend_ops *e, size_t sym_size, const char *path) {
  if (e->abi_major != KILN_PLUGIN_ABI_MAJOR)
    return kiln_status_new(KILN_STATUS_ABI,
                           "%s: plugin ABI %u.%u, but this kiln speaks ABI %d.%d (another major): "
                           "rebuild the plugin against this kiln's kiln/plugin.h",
                           path, e->abi_major, e->abi_minor, KILN_PLUGIN_ABI_MAJOR,
                           KILN_PLUGIN_ABI_MINOR);
  if (e->abi_minor > KILN_PLUGIN_ABI_MINOR)
    return kiln_status_new(KILN_STATUS_ABI,
                           "%s: plugin ABI %u.%u is newer than this kiln's %d.%d: upgrade kiln or "
                           "rebuild the plugin against this kiln's kiln/plugin.h",
                           path, e->abi_major, e->abi_minor, KILN_PLUGIN_ABI_MAJOR,
                           KILN_PLUGIN_ABI_MINOR);
  if (e->struct_size > sym_size)
    return kiln_status_new(KILN_STATUS_ABI,
                           "%s: its ops table (kiln_backend_entry) claims %u bytes, but the object "
                           "holds %zu",
                           path, e->struct_size, sym_size);
  size_t need = required_size(e->abi_minor);
  if (e->struct_size < need)
    return kiln_status_new(KILN_STATUS_ABI,
                           "%s: its ops table (kiln_backend_entry) is %u bytes, ABI %u.%u needs at "
                           "least %zu: the plugin was built against a different kiln/plugin.h",
                           path, e->struct_size, e->abi_major, e->abi_minor, need);
  struct {
    const char *what;
    const void *fn;
  } required[] = {
      {"init", (const void *)e->init},       {"fini", (const void *)e->fini},
      {"probe", (const void *)e->probe},     {"open", (const void *)e->open},
      {"close", (const void *)e->close},     {"supports", (const void *)e->supports},
      {"buffer_alloc", (const void *)e->buffer_alloc},
      {"buffer_free", (const void *)e->buffer_free},
      {"buffer_upload", (const void *)e->buffer_upload},
      {"buffer_download", (const void *)e->buffer_download},
      {"prepare", (const void *)e->prepare}, {"run", (const void *)e->run},
      {"sync", (const void *)e->sync},
  };
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
    if (!required[i].fn)
      return kiln_status_new(KILN_STATUS_ABI, "%s: its ops table has no %s function", path,
                             required[i].what);
  if (e->n_config_keys && !e->config_keys)
    return kiln_status_new(KILN_STATUS_ABI, "%s: declares %u config keys but no table", path,
                           e->n_config_keys);
  char *file_name = name_from_path(path);
  kiln_status st = NULL;
  if (!e->name || !file_name || strcmp(e->name, file_name) != 0)
    st = kiln_status_new(KILN_STATUS_ABI,
                         "%s: the plugin calls itself \"%s\", but its file must then be named "
                         "kiln-%s.so",
                         path, e->name ? e->name : "(null)", e->name ? e->name : "<name>");
  free(file_name);
  return st;
}

kiln_status kiln_plugin_load(const char *path, kiln_plugin **out_plugin) {
  *out_plugin = NULL;
  dlerror();
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    /* ldd helps only with a shared object whose dependencies are missing */
    char magic[4] = {0};
    FILE *f = fopen(path, "rb");
    bool elf = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "\177ELF", 4) == 0;
    if (f) fclose(f);
    return kiln_status_new(KILN_STATUS_IO, "%s: cannot load plugin: %s%s%s%s", path, dlerror(),
                           elf ? " (run `ldd " : " (not an ELF shared object)", elf ? path : "", elf ? "` to see what is missing)" : "");
  }
  const kiln_backend_ops *e = dlsym(dl, KILN_PLUGIN_ENTRY_SYMBOL);
  if (!e) {
    dlclose(dl);
    return kiln_status_new(KILN_STATUS_ABI,
                           "%s: no %s symbol: not a kiln backend plugin (`nm -D %s` lists what it "
                           "exports)",
                           path, KILN_PLUGIN_ENTRY_SYMBOL, path);
  }
  size_t sym_size = 0;
  kiln_status st = check_symbol(dl, e, path, &sym_size);
  if (!st) st = check_entry(e, sym_size, path);
  if (st) {
    dlclose(dl);
    return st;
  }
  kiln_plugin *p = calloc(1, sizeof *p);
  if (!p) {
    dlclose(dl);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: loading plugin", path);
  }
  p->dl = dl;
  p->entry = e;
  p->path = strdup(path);
  st = e->init(kiln_host_api_get(), &p->state);
  if (st) {
    dlclose(dl);
    free(p->path);
    free(p);
    return kiln_status_annotate(st, "%s: init", path);
  }
  kiln_log(KILN_LOG_DEBUG, NULL, "loaded plugin %s (ABI %u.%u) from %s", e->name, e->abi_major,
           e->abi_minor, path);
  *out_plugin = p;
  return NULL;
}

void kiln_plugin_unload(kiln_plugin *p) {
  if (!p) return;
  p->entry->fini(p->state);
  dlclose(p->dl);
  free(p->path);
  free(p);
}

const char *kiln_plugin_name(const kiln_plugin *p) { return p->entry->name; }
const char *kiln_plugin_path(const kiln_plugin *p) { return p->path; }
const kiln_backend_ops *kiln_plugin_entry(const kiln_plugin *p) { return p->entry; }

kiln_status kiln_plugin_probe(kiln_plugin *p, kiln_probe_info *out_info) {
  memset(out_info, 0, sizeof *out_info);
  return kiln_status_annotate(p->entry->probe(p->state, out_info), "plugin %s: probe",
                              p->entry->name);
}

kiln_status kiln_plugin_probe_parallel(kiln_plugin *p, const kiln_config *c, char *out_line, size_t cap) {
  if (cap) out_line[0] = '\0';
  const kiln_backend_ops *e = p->entry;
  if (e->abi_minor < 1 || !e->probe_parallel || !cap) return NULL;
  const kiln_config_section *sec = c ? kiln_config_section_get(c, e->name) : NULL;
  return kiln_status_annotate(e->probe_parallel(p->state, sec, out_line, cap), "plugin %s: probe_parallel",
                              e->name);
}

kiln_status kiln_backend_declare_config(kiln_plugin *p, kiln_config *c) {
  if (kiln_config_section_get(c, p->entry->name)) return NULL;
  return kiln_config_declare(c, p->entry->name, p->entry->config_keys, p->entry->n_config_keys);
}

kiln_status kiln_backend_open(kiln_plugin *p, const kiln_config *c, kiln_backend **out_backend) {
  *out_backend = NULL;
  const kiln_config_section *sec = kiln_config_section_get(c, p->entry->name);
  if (!sec)
    return kiln_status_new(KILN_STATUS_INTERNAL, "backend %s: its config section is not declared",
                           p->entry->name);
  kiln_backend *b = calloc(1, sizeof *b);
  if (!b) return kiln_status_new(KILN_STATUS_NO_MEMORY, "opening backend %s", p->entry->name);
  kiln_status st = p->entry->open(p->state, sec, &b->ctx);
  if (st) {
    free(b);
    return kiln_status_annotate(st, "backend %s", p->entry->name);
  }
  b->plugin = p;
  b->ops = p->entry;
  b->name = p->entry->name;
  *out_backend = b;
  return NULL;
}

kiln_status kiln_backend_describe_modes(kiln_backend *b, char *out_line, size_t cap) {
  if (!cap) return NULL;
  out_line[0] = '\0';
  /* a plugin of 2.2 or older has no such field: its table may end before it */
  if (b->ops->abi_minor < 3 || !b->ops->describe_modes) return NULL;
  kiln_status st = b->ops->describe_modes(b->ctx, out_line, cap);
  out_line[cap - 1] = '\0'; /* whatever the plugin wrote, a string */
  if (st) out_line[0] = '\0';
  return kiln_status_annotate(st, "backend %s: describe_modes", b->name);
}

void kiln_backend_close(kiln_backend *b) {
  if (!b) return;
  b->ops->close(b->ctx);
  free(b);
}
