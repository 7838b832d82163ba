/* The kernel-cache service: open/close, compiler registrations, and the
 * get path (memory tier -> disk tier -> render + compile + store). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcache_internal.h"

kiln_status kiln_kcache_open(const kiln_kcache_options *opts, kiln_kcache **out_kc) {
  if (!opts || !out_kc)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kcache_open: NULL argument");
  *out_kc = NULL;
  kiln_kcache *kc = calloc(1, sizeof *kc);
  if (!kc) return kiln_status_new(KILN_STATUS_NO_MEMORY, "kernel cache: out of memory");
  kc->dirfd = -1;
  kc->log = opts->log;
  kc->log_user = opts->log_user;
  if (pthread_mutex_init(&kc->mu, NULL) != 0) {
    free(kc);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "kernel cache: cannot create a mutex");
  }
  /* The folder is resolved and opened on first use (kcache_folder.c). */
  if (opts->disk_enabled) {
    kc->folder = KCACHE_FOLDER_UNTRIED;
    if (opts->dir && opts->dir[0] && !(kc->dir = strdup(opts->dir))) {
      kiln_kcache_close(kc);
      return kiln_status_new(KILN_STATUS_NO_MEMORY, "kernel cache: out of memory");
    }
  }
  *out_kc = kc;
  return NULL;
}

void kiln_kcache_close(kiln_kcache *kc) {
  if (!kc) return;
  while (kc->compilers) kiln_kcache_unregister_compiler(kc->compilers);
  for (uint32_t i = 0; i < kc->n_tmpls; i++) kiln__kcache_template_free(kc->tmpls[i]);
  free(kc->tmpls);
  if (kc->dirfd >= 0) close(kc->dirfd);
  kiln_status_free(kc->folder_error);
  free(kc->dir);
  pthread_mutex_destroy(&kc->mu);
  free(kc);
}

const char *kiln_kcache_dir(const kiln_kcache *kc) {
  if (!kc) return NULL;
  kiln_kcache *m = (kiln_kcache *)kc; /* the mutex is not part of the logical state */
  pthread_mutex_lock(&m->mu);
  const char *dir = kc->folder == KCACHE_FOLDER_OPEN ? kc->dir : NULL;
  pthread_mutex_unlock(&m->mu);
  return dir;
}

static bool field_text_ok(const char *s) {
  if (!s || !*s) return false;
  for (const char *p = s; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) return false;
  return true;
}

/* "sm_" digits, then optionally one of 'a' (arch-specific) or 'f'
 * (family-specific), as NVRTC spells them. */
static bool arch_ok(const char *s) {
  if (!s || strncmp(s, "sm_", 3) != 0) return false;
  const char *p = s + 3;
  size_t digits = strspn(p, "0123456789");
  if (digits < 2 || digits > 4) return false;
  p += digits;
  if (*p == 'a' || *p == 'f') p++;
  return *p == '\0';
}

kiln_status kiln_kcache_register_compiler(kiln_kcache *kc, const kiln_kcompiler_desc *d,
                                          kiln_kcompiler **out_compiler) {
  if (!kc || !d || !out_compiler)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "register_compiler: NULL argument");
  *out_compiler = NULL;
  if (!kiln__kcache_name_ok(d->name))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "kernel compiler: name \"%s\" is not [a-z_][a-z0-9_]*",
                           d->name ? d->name : "(null)");
  if (!field_text_ok(d->version))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "kernel compiler %s: version is empty or has control characters",
                           d->name);
  if (!arch_ok(d->arch))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "kernel compiler %s: arch \"%s\" is not an exact sm_XY[a|f]", d->name,
                           d->arch ? d->arch : "(null)");
  if (d->n_options && !d->options)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kernel compiler %s: options is NULL",
                           d->name);
  for (uint32_t i = 0; i < d->n_options; i++)
    if (!field_text_ok(d->options[i]))
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "kernel compiler %s: option %u is empty or has control characters",
                             d->name, i);
  if (d->image_kind != KILN_KIMAGE_PTX && d->image_kind != KILN_KIMAGE_CUBIN)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kernel compiler %s: bad image kind %d",
                           d->name, (int)d->image_kind);
  if (!d->compile || !d->free_image)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "kernel compiler %s: compile and free_image are required", d->name);

  kiln_kcompiler *c = calloc(1, sizeof *c);
  if (!c) return kiln_status_new(KILN_STATUS_NO_MEMORY, "kernel compiler: out of memory");
  c->kc = kc;
  c->name = strdup(d->name);
  c->version = strdup(d->version);
  c->arch = strdup(d->arch);
  c->options = calloc(d->n_options ? d->n_options : 1, sizeof *c->options);
  bool oom = !c->name || !c->version || !c->arch || !c->options;
  for (uint32_t i = 0; !oom && i < d->n_options; i++) {
    c->options[i] = strdup(d->options[i]);
    c->n_options = i + 1;
    oom = !c->options[i];
  }
  if (oom) {
    kiln_kcache_unregister_compiler(c); /* not linked yet: just frees */
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "kernel compiler: out of memory");
  }
  c->image_kind = d->image_kind;
  c->compile = d->compile;
  c->free_image = d->free_image;
  c->release_slot = d->release_slot;
  c->user = d->user;
  pthread_mutex_lock(&kc->mu);
  c->next = kc->compilers;
  kc->compilers = c;
  pthread_mutex_unlock(&kc->mu);
  *out_compiler = c;
  return NULL;
}

void kiln_kcache_unregister_compiler(kiln_kcompiler *c) {
  if (!c) return;
  kiln_kcache *kc = c->kc;
  pthread_mutex_lock(&kc->mu);
  for (kiln_kcompiler **pp = &kc->compilers; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  pthread_mutex_unlock(&kc->mu);
  kiln__kcache_mem_clear(&c->mem, c->release_slot, c->user);
  free(c->name);
  free(c->version);
  free(c->arch);
  for (uint32_t i = 0; i < c->n_options; i++) free(c->options[i]);
  free(c->options);
  free(c);
}

/* Renders d's source and runs the compiler's hook; the image comes back in
 * a malloc'd copy with a NUL after it. */
static kiln_status compile_desc(const kiln_kdesc *d, void **out_image, size_t *out_size) {
  kiln_kcompiler *c = d->compiler;
  char *src = NULL;
  KILN_RETURN_IF_ERROR(kiln__kdesc_render(d, &src));
  char program[KILN_KCACHE_NAME_MAX + 8];
  snprintf(program, sizeof program, "%s.cu", d->tmpl->pub.name);
  void *img = NULL;
  size_t size = 0;
  kiln_status st = c->compile(c->user, program, src, (const char *const *)c->options,
                              c->n_options, &img, &size);
  free(src);
  if (st) return st;
  if (!img || !size) {
    if (img) c->free_image(c->user, img);
    return kiln_status_new(KILN_STATUS_INTERNAL, "compiler %s returned an empty image",
                           c->name);
  }
  char *copy = malloc(size + 1);
  if (copy) {
    memcpy(copy, img, size);
    copy[size] = '\0';
  }
  c->free_image(c->user, img);
  if (!copy) return kiln_status_new(KILN_STATUS_NO_MEMORY, "out of memory");
  *out_image = copy;
  *out_size = size;
  return NULL;
}

kiln_status kiln_kcache_get(const kiln_kdesc *d, kiln_kernel **out_kernel) {
  if (!d || !out_kernel)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kcache_get: NULL argument");
  *out_kernel = NULL;
  kiln_kcompiler *c = d->compiler;
  kiln_kcache *kc = c->kc;
  char *canonical = NULL;
  KILN_RETURN_IF_ERROR(kiln_kdesc_canonical(d, &canonical));
  kiln_kkey key;
  kiln__kcache_hash_key(canonical, strlen(canonical), &key);
  char hex[KILN_KKEY_HEX_SIZE];
  kiln_kkey_format(&key, hex);

  pthread_mutex_lock(&kc->mu);
  kiln_kernel *k = kiln__kcache_mem_find(&c->mem, &key);
  if (k) kc->stats.memory_hits++;
  pthread_mutex_unlock(&kc->mu);
  if (k) {
    free(canonical);
    *out_kernel = k;
    return NULL;
  }

  void *image = NULL;
  size_t size = 0;
  if (kiln__kcache_disk_load(kc, hex, canonical, c->image_kind, &image, &size)) {
    pthread_mutex_lock(&kc->mu);
    kc->stats.disk_hits++;
    pthread_mutex_unlock(&kc->mu);
  } else {
    kiln_status st = compile_desc(d, &image, &size);
    if (st) {
      free(canonical);
      return kiln_status_annotate(st, "compiling kernel %s for %s (key %s)", d->tmpl->pub.name,
                                  c->arch, hex);
    }
    pthread_mutex_lock(&kc->mu);
    kc->stats.compiles++;
    pthread_mutex_unlock(&kc->mu);
    kiln__kcache_disk_store(kc, hex, canonical, c->image_kind, image, size);
  }

  kiln_kernel nk = {0};
  nk.key = key;
  nk.template_name = strdup(d->tmpl->pub.name);
  nk.entry = strdup(d->tmpl->pub.entry);
  nk.canonical = canonical;
  nk.image_kind = c->image_kind;
  nk.image = image;
  nk.image_size = size;
  if (!nk.template_name || !nk.entry) {
    free((char *)nk.template_name);
    free((char *)nk.entry);
    free(canonical);
    free(image);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "kernel cache: out of memory");
  }
  pthread_mutex_lock(&kc->mu);
  k = kiln__kcache_mem_find(&c->mem, &key); /* another thread may have been first */
  bool ours = !k;
  if (ours) k = kiln__kcache_mem_insert(&c->mem, &nk);
  pthread_mutex_unlock(&kc->mu);
  if (!ours || !k) {
    free((char *)nk.template_name);
    free((char *)nk.entry);
    free(canonical);
    free(image);
    if (!k) return kiln_status_new(KILN_STATUS_NO_MEMORY, "kernel cache: out of memory");
  }
  *out_kernel = k;
  return NULL;
}

void kiln_kcache_get_stats(const kiln_kcache *kc, kiln_kcache_stats *out_stats) {
  kiln_kcache *m = (kiln_kcache *)kc; /* the mutex is not part of the logical state */
  pthread_mutex_lock(&m->mu);
  *out_stats = kc->stats;
  pthread_mutex_unlock(&m->mu);
}

kiln_status kiln_kcache_arch_from_cc(int major, int minor, char out[16]) {
  if (major < 1 || major > 99 || minor < 0 || minor > 9)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "compute capability %d.%d is not one kiln can name", major, minor);
  snprintf(out, 16, "sm_%d%d", major, minor);
  return NULL;
}
