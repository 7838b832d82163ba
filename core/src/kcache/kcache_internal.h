/* The kernel-cache service's internals, shared by core/src/kcache_*.c and
 * by the service's own tests. Not installed; not part of any ABI. */
#ifndef KILN_KCACHE_INTERNAL_H
#define KILN_KCACHE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "kiln/kcache.h"
#include "kiln/plugin.h"

/* A piece of a parsed template source: literal text, then (param >= 0) the
 * value of schema parameter `param`. */
typedef struct kcache_seg {
  size_t off, len; /* literal source[off, off+len) */
  int32_t param;   /* index into params, or -1 after the last literal */
} kcache_seg;

/* A registered template: a deep copy, its parsed source and its hashes. */
typedef struct kcache_tmpl {
  kiln_ktemplate pub;       /* points into the copies below */
  kiln_kparam_decl *params; /* owned copy (names and help strdup'd) */
  uint32_t *by_name;        /* parameter indices sorted by name */
  kcache_seg *segs;
  uint32_t n_segs;
  char source_hash[KILN_KKEY_HEX_SIZE]; /* XXH3-128 of the source as registered */
} kcache_tmpl;

/* A value in a descriptor. */
typedef struct kcache_value {
  bool set;
  union {
    uint32_t f32_bits;
    uint64_t f64_bits;
    int64_t i64;
    int32_t dtype;
  } u;
  char str[KILN_KCACHE_NAME_MAX];
} kcache_value;

/* The memory tier of one compiler: a chained hash table by key. */
typedef struct kcache_mem_node {
  kiln_kernel kernel;
  struct kcache_mem_node *next;
} kcache_mem_node;

typedef struct kcache_mem {
  kcache_mem_node **buckets;
  uint32_t n_buckets, n_items;
} kcache_mem;

struct kiln_kcompiler {
  kiln_kcache *kc;
  char *name, *version, *arch;
  char **options;
  uint32_t n_options;
  kiln_kimage_kind image_kind;
  kiln_kcompile_fn compile;
  void (*free_image)(void *user, void *image);
  void (*release_slot)(void *user, void *slot);
  void *user;
  kcache_mem mem;
  struct kiln_kcompiler *next;
};

struct kiln_kdesc {
  kiln_kcompiler *compiler;
  const kcache_tmpl *tmpl;
  kcache_value values[KILN_KTEMPLATE_MAX_PARAMS]; /* by schema index */
};

/* The first line of every entry file (format in kiln/kcache.h). */
#define KCACHE_ENTRY_MAGIC "kiln-kcache-entry 1\n"

/* The disk tier's folder: opened on first use (kcache_folder.c), so a
 * process whose backends compile nothing never needs or creates one. */
typedef enum kcache_folder_state {
  KCACHE_FOLDER_OFF = 0,    /* disk tier disabled by the options */
  KCACHE_FOLDER_UNTRIED,    /* enabled, not used yet */
  KCACHE_FOLDER_OPEN,       /* dirfd is the folder */
  KCACHE_FOLDER_UNUSABLE    /* tried and failed: memory tier only */
} kcache_folder_state;

struct kiln_kcache {
  pthread_mutex_t mu;
  kcache_folder_state folder;
  char *dir;   /* the folder (configured, or resolved at first use); NULL until known */
  int dirfd;   /* the folder, opened once at first use; -1 until then or when off */
  kiln_status folder_error; /* why the folder is unusable (UNUSABLE only) */
  bool folder_warned;       /* the memory-only line has been logged */
  kiln_kcache_log_fn log;
  void *log_user;
  kcache_tmpl **tmpls;
  uint32_t n_tmpls, cap_tmpls;
  kiln_kcompiler *compilers;
  kiln_kcache_stats stats;
  uint64_t tmp_counter;
};

/* kcache_log.c: formats and hands a line to kc->log. */
void kiln__kcache_logf(const kiln_kcache *kc, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* kcache_template.c */
const kcache_tmpl *kiln__kcache_find_template(const kiln_kcache *kc, const char *name);
void kiln__kcache_template_free(kcache_tmpl *t);
bool kiln__kcache_name_ok(const char *s);  /* [a-z_][a-z0-9_]*, < NAME_MAX */
bool kiln__kcache_ident_ok(const char *s); /* a C identifier, < NAME_MAX */

/* kcache_canon.c */
/* XXH3-128 of data as 32 lower-case hex digits (canonical byte order). */
void kiln__kcache_hash_hex(const void *data, size_t size, char out[KILN_KKEY_HEX_SIZE]);
void kiln__kcache_hash_key(const void *data, size_t size, kiln_kkey *out);
/* The source rendered from d (every baked parameter set), malloc'd. */
kiln_status kiln__kdesc_render(const kiln_kdesc *d, char **out_source);
/* Renders a value as it appears in a source; out has room for 64 chars. */
void kiln__kcache_render_value(kiln_kparam_type type, const kcache_value *v, char out[64]);

/* kcache_mem.c */
kiln_kernel *kiln__kcache_mem_find(kcache_mem *m, const kiln_kkey *key);
/* Takes ownership of the kernel's strings and image; returns the stored
 * kernel, or NULL (nothing taken) when out of memory. */
kiln_kernel *kiln__kcache_mem_insert(kcache_mem *m, const kiln_kernel *k);
/* Frees every kernel, calling release(user, slot) for non-NULL slots. */
void kiln__kcache_mem_clear(kcache_mem *m, void (*release)(void *, void *), void *user);

/* kcache_folder.c */
/* The folder's descriptor, opening it on the first call (creating it,
 * mode 0700, and sweeping stale temporary files); -1 with the disk tier
 * off or the folder unusable, in which case the first failing call logs
 * once, at warn, that kernels stay in memory. Thread-safe. */
int kiln__kcache_folder_fd(kiln_kcache *kc);
/* The same for maintenance (`kiln kernels`), which must report rather
 * than log: NULL with *out_fd set, or a status (a copy; the caller frees
 * it): KILN_STATUS_UNSUPPORTED with the disk tier off, else why the
 * folder is unusable. */
kiln_status kiln__kcache_folder_open(kiln_kcache *kc, int *out_fd);

/* kcache_tmp.c: the disk tier's temporary files. A writer creates
 * "<32 hex>.kk.tmp.<pid>.<n>" exclusively, holds an flock(2) on it until
 * it has renamed it into place, and only then closes it; a file of that
 * name whose lock is free has no live writer (the kernel drops a killed
 * process's locks), so it is stale. */
/* Is `name` shaped like a temporary file's name? */
bool kiln__kcache_is_tmp_name(const char *name);
/* Creates and locks a temporary file for entry `hex` in the folder; its
 * name goes to out_name. Returns the descriptor (write-only), or -1 with
 * errno set. */
int kiln__kcache_tmp_create(kiln_kcache *kc, int dirfd, const char *hex, char out_name[96]);
/* Why the temporary file `name`, opened as fd (a regular file), is not a
 * stale one of the service's (a reason for the listing), or NULL when it
 * is: its content is empty or begins like an entry, and no writer holds
 * its lock. On NULL the caller holds the lock (through fd) until it closes
 * fd, so no writer can take the file meanwhile. */
const char *kiln__kcache_tmp_not_stale(int fd, const struct stat *sb);
/* Removes the folder's stale temporary files older than `min_age_s`
 * seconds (never those a live writer holds); returns how many. */
unsigned kiln__kcache_tmp_sweep(int dirfd, double min_age_s);

/* kcache_disk.c */
/* Encodes an entry (format at the top of kiln/kcache.h) into a malloc'd
 * buffer. */
kiln_status kiln__kcache_entry_encode(const char *canonical, kiln_kimage_kind kind,
                                      const void *image, size_t image_size, char **out_buf,
                                      size_t *out_size);
/* Decodes and checks an entry's format and checksum. On success
 * *out_canonical and *out_image (NUL-terminated) are malloc'd; on failure
 * returns KILN_STATUS_MALFORMED saying what is wrong. */
kiln_status kiln__kcache_entry_decode(const char *buf, size_t size, char **out_canonical,
                                      kiln_kimage_kind *out_kind, void **out_image,
                                      size_t *out_image_size);
/* Looks for `hex`.kk in the folder. Returns true with a malloc'd image when
 * a valid entry for exactly `canonical` and `kind` is there; otherwise false
 * (a bad entry is logged and counted as discarded). */
bool kiln__kcache_disk_load(kiln_kcache *kc, const char *hex, const char *canonical,
                            kiln_kimage_kind kind, void **out_image, size_t *out_size);
/* Writes the entry atomically; failures are logged and counted. */
void kiln__kcache_disk_store(kiln_kcache *kc, const char *hex, const char *canonical,
                             kiln_kimage_kind kind, const void *image, size_t size);
/* Is `name` an entry file name ("<32 lower-case hex>.kk")? */
bool kiln__kcache_is_entry_name(const char *name);
/* Does the open file fd begin with an entry's first line ("kiln-kcache-
 * entry 1\n")? Every entry the service writes does; a file without it is
 * not an entry of the service's, whatever its name. Reads with pread (the
 * offset is kept). */
bool kiln__kcache_has_entry_magic(int fd);

/* kcache_host.c: the service's entries in the host table (kiln/plugin.h),
 * and the service instance the host table's kcache() returns. The
 * executor installs the service it opened from [kernel_cache] before
 * opening backends, and NULL before closing it. */
void kiln__kcache_host_fill(kiln_host_api *api);
void kiln__kcache_host_set_service(kiln_kcache *kc);

#endif
