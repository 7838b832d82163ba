/*
 * kiln/kcache.h — the kernel-cache service: templates, descriptors, keys,
 * and the memory and disk tiers behind them (DESIGN.md, "The kernel-cache
 * service"; the defect it exists to prevent is at the top of DESIGN.md).
 *
 * The model: a *template* (CUDA C source with {{placeholders}} and a schema
 * that declares every parameter) is registered once. A backend registers a
 * *compiler* (its compile hook and the target it compiles for: exact sm_XY,
 * compiler version, options). To obtain a kernel the backend creates a
 * *descriptor* for (compiler, template), sets every baked parameter through
 * the typed setters, and calls kiln_kcache_get(). Only the service renders
 * the source (from the descriptor alone), only the service forms the
 * canonical text and the key, and only the service calls the compile hook,
 * so no kernel can carry a parameter other than the one its descriptor
 * holds, and no key can leave a parameter out. There is no function that
 * compiles source text, and no function that takes a key.
 *
 * Parameters. A `baked` parameter is substituted into the source where the
 * template writes {{name}}, so it becomes an immediate of the machine code
 * (ε, RoPE θ, head_dim, hidden size, softmax scale, block size, dtype); it
 * must be set in every descriptor. A `runtime` parameter is a kernel
 * argument (pointers, row counts): the schema documents it for
 * `kiln kernels --schema`, the source must name it, and a descriptor never
 * holds it.
 *
 * Placeholder syntax: "{{" name "}}" with name [a-z_][a-z0-9_]*, no spaces.
 * Every "{{" in a template's source must open such a placeholder (write
 * "{ {" for nested braces); every placeholder must name a declared baked
 * parameter; every declared baked parameter must appear as a placeholder;
 * every declared runtime parameter must appear in the source as an
 * identifier. Registration fails otherwise, naming the template and the
 * parameter.
 *
 * How a baked value is rendered into the source:
 *   f32    C99 hex float with an f suffix: 1e-6f  -> 0x1.0c6f7ap-20f
 *          (exact: the immediate in the PTX is the same 32 bits,
 *          e.g. 0f358637BD); negative values in parentheses.
 *   f64    C99 hex float: 0x1.0c6f7a0b5ed8dp-20; negative in parentheses.
 *   i64    decimal, "LL" appended outside the int32 range; negative in
 *          parentheses.
 *   str    verbatim; only [A-Za-z0-9_] allowed (1..63 chars), so a string
 *          is one preprocessor token and cannot inject code.
 *   dtype  the ggml type name, "F32", "F16", "BF16", "Q4_K", ... (use it in
 *          a macro name: #define KILN_W_{{w_type}} 1).
 *
 * Canonical form (version 1). The key of a descriptor is XXH3-128 of this
 * text; disk entries carry it in full and are used only when it matches
 * byte for byte. Lines end in "\n"; fields are separated by one space;
 * parameters appear sorted by name (strcmp); floats appear as their exact
 * IEEE bit patterns, lower-case hex (f32: 8 digits, f64: 16); options appear
 * in the order the compiler gave them; hashes are XXH3-128 written as 32
 * lower-case hex digits (the canonical big-endian byte order of
 * XXH128_canonicalFromHash). Example (ε = 1e-6 for a 3584-wide model,
 * compiled by NVRTC 13.0 for sm_90; hashes shortened here):
 *
 *   kiln-kdesc 1
 *   template rmsnorm_row_vec
 *   template-version 1
 *   template-source xxh3-128:5c1f...e2
 *   entry kiln_rmsnorm_row_vec
 *   param block_size i64 896
 *   param eps f32 0x358637bd
 *   param hidden i64 3584
 *   param w_type dtype F32
 *   compiler nvrtc
 *   compiler-version 13.0 V13.0.88 CL-36424714
 *   arch sm_90
 *   option --gpu-architecture=sm_90
 *   option --std=c++17
 *   kernel-abi 1
 *   source xxh3-128:a90b...41
 *
 * "template-source" hashes the template text as registered; "source"
 * hashes the source rendered from this descriptor, so even a parameter a
 * schema forgot to declare changes the key through the source it changes.
 * The lines from "compiler" to "kernel-abi" are the target fingerprint.
 * tests/unit/test_kcache_canon.c pins this form with fixed vectors.
 *
 * Disk entries. One file per key, "<32 hex digits of the key>.kk", directly
 * in the cache folder:
 *
 *   kiln-kcache-entry 1\n
 *   canonical <N>\n   <N bytes: the canonical text>
 *   image <ptx|cubin> <M>\n   <M bytes: the compiled image>
 *   checksum xxh3-128:<32 hex>\n   (over every byte before this line)
 *
 * An entry is used only if it parses exactly, its checksum matches, and its
 * canonical text equals the one the service renders for the request;
 * otherwise it is discarded (logged with the file name and the reason: the
 * first differing line names the fingerprint field or parameter) and the
 * kernel is rebuilt and written again. An entry with an empty image is
 * malformed (no compiler makes one). Writes go to a temporary file
 * "<key>.kk.tmp.<pid>.<n>" in the same folder, locked with flock(2) from
 * its creation until it has been renamed into place, then rename(2), so
 * readers in other processes see an old entry, a new entry, or none, never
 * a partial one; a temporary file whose lock is free has lost its writer
 * (killed), and the service removes such files older than a minute when
 * it first uses the folder. The service opens only names it forms from
 * keys, with O_NOFOLLOW, relative to the folder it opened at its first
 * use; it never follows a path read from a file, and it removes (--clear)
 * only regular files named like entries whose content begins with the
 * entry's first line, and its own unlocked temporary files whose content
 * is empty or begins like an entry.
 *
 * Ownership: the service owns registered copies of templates, compilers,
 * kernels and their images. A kiln_kdesc is the caller's until
 * kiln_kdesc_free(). A kiln_kernel stays valid until its compiler is
 * unregistered or the service is closed. Strings returned through out_*
 * char ** parameters are malloc'd and the caller's to free().
 *
 * Threading: every function may be called from several threads; the
 * service serializes its tables with a mutex and compiles outside it.
 */
#ifndef KILN_KCACHE_H
#define KILN_KCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/config_schema.h"
#include "kiln/status.h"
#include "kiln/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* kiln's kernel ABI: how the host and every template agree on argument
 * layouts and conventions. Part of every fingerprint; bump it when a change
 * to kiln makes previously compiled kernels wrong to launch. */
#define KILN_KERNEL_ABI 1

/* Version of the canonical form above (its first line). */
#define KILN_KCACHE_CANON_VERSION 1

/* Longest name (template, parameter, compiler) and str value, with NUL. */
#define KILN_KCACHE_NAME_MAX 64

typedef struct kiln_kcache kiln_kcache;       /* the service */
typedef struct kiln_kcompiler kiln_kcompiler; /* one backend's registered compiler */
typedef struct kiln_kdesc kiln_kdesc;         /* a descriptor being filled */

/* A key: XXH3-128 of a canonical text. Opaque: compare with
 * kiln_kkey_equal(), print with kiln_kkey_format(); no API accepts one. */
typedef struct kiln_kkey {
  uint8_t opaque[16];
} kiln_kkey;

/* Hex digits of a formatted key plus the NUL. */
#define KILN_KKEY_HEX_SIZE 33

/* Types of template parameters. Baked parameters take F32, F64, I64, STR
 * or DTYPE (one setter each); I32 and PTR describe runtime kernel
 * arguments only. */
typedef enum kiln_kparam_type {
  KILN_KPARAM_F32 = 0,
  KILN_KPARAM_F64 = 1,
  KILN_KPARAM_I64 = 2,
  KILN_KPARAM_STR = 3,
  KILN_KPARAM_DTYPE = 4,
  KILN_KPARAM_I32 = 5,
  KILN_KPARAM_PTR = 6
} kiln_kparam_type;

typedef enum kiln_kparam_kind {
  KILN_KPARAM_BAKED = 0,  /* substituted into the source: in the descriptor and the key */
  KILN_KPARAM_RUNTIME = 1 /* a kernel argument: documented, never in a descriptor */
} kiln_kparam_kind;

/* One parameter of a template's schema. */
typedef struct kiln_kparam_decl {
  const char *name; /* [a-z_][a-z0-9_]*, < KILN_KCACHE_NAME_MAX */
  kiln_kparam_type type;
  kiln_kparam_kind kind;
  const char *help; /* one line for `kiln kernels --schema`; may be NULL */
} kiln_kparam_decl;

/* A kernel template, as a backend declares it. The service copies it at
 * registration; the caller's storage may go away afterwards. */
typedef struct kiln_ktemplate {
  const char *name;     /* [a-z0-9_]+, unique in the service: "rmsnorm_row_vec" */
  uint32_t version;     /* >= 1; bump when the source's meaning changes */
  const char *entry;    /* the extern "C" __global__ function the source defines */
  const char *source;   /* CUDA C with {{placeholders}} (see the top of this file) */
  const kiln_kparam_decl *params;
  uint32_t n_params;    /* at most KILN_KTEMPLATE_MAX_PARAMS */
  const char *help;     /* one line: what the kernel does; may be NULL */
} kiln_ktemplate;

#define KILN_KTEMPLATE_MAX_PARAMS 32

/* What a compile hook returns. */
typedef enum kiln_kimage_kind {
  KILN_KIMAGE_PTX = 0,  /* PTX text (the service keeps a NUL after it) */
  KILN_KIMAGE_CUBIN = 1 /* an ELF cubin for exactly the compiler's arch */
} kiln_kimage_kind;

/* A compile hook: compiles `source` (rendered by the service from a
 * descriptor, NUL-terminated) with exactly `options`, for the arch the
 * compiler was registered with. On success stores a buffer of *out_size
 * bytes in *out_image, allocated by the hook and released by the service
 * with free_image(). On failure returns a status (KILN_STATUS_COMPILE with
 * the compiler's log) and stores nothing. `program` is a name for messages
 * ("rmsnorm_row_vec.cu"). */
typedef kiln_status (*kiln_kcompile_fn)(void *user, const char *program, const char *source,
                                        const char *const *options, uint32_t n_options,
                                        void **out_image, size_t *out_size);

/* A backend's compiler and target, for kiln_kcache_register_compiler().
 * Every string field goes into the fingerprint, so two compilers whose
 * output could differ must differ in at least one of them. Strings may not
 * contain control characters; the service copies them. */
typedef struct kiln_kcompiler_desc {
  const char *name;    /* "nvrtc": [a-z0-9_]+ */
  const char *version; /* exact build: "13.0 V13.0.88 CL-36424714" */
  const char *arch;    /* exact target: "sm_90", "sm_120", "sm_121", "sm_90a" */
  const char *const *options; /* passed to compile() in this order */
  uint32_t n_options;
  kiln_kimage_kind image_kind;
  kiln_kcompile_fn compile;                /* required */
  void (*free_image)(void *user, void *image); /* required */
  /* Optional: called once for each kernel whose slot is not NULL when the
   * compiler is unregistered (unload the CUmodule kept there). */
  void (*release_slot)(void *user, void *slot);
  void *user; /* handed to the three callbacks */
} kiln_kcompiler_desc;

/* A resolved kernel. Owned by the service; valid until its compiler is
 * unregistered or the service closed. Backends read it at plan time and
 * keep `slot` for launches, which then never hash or look anything up. */
typedef struct kiln_kernel {
  kiln_kkey key;
  const char *template_name;
  const char *entry;          /* function to look up in the loaded image */
  const char *canonical;      /* the full canonical text of its descriptor */
  kiln_kimage_kind image_kind;
  const void *image;          /* image_size bytes, followed by a NUL */
  size_t image_size;
  /* The backend's own: e.g. its loaded CUmodule/CUfunction. Starts NULL;
   * the service never reads it except to pass it to release_slot(). One
   * compiler registration per backend instance, so backends never share a
   * slot. */
  void *slot;
} kiln_kernel;

/* Log callback: one line (no newline) at a kiln_log_level (kiln/plugin.h:
 * 0 error, 1 warn, 2 info, 3 debug). Discarded disk entries log at warn. */
typedef void (*kiln_kcache_log_fn)(void *user, int level, const char *line);

typedef struct kiln_kcache_options {
  /* The disk tier's folder, created (with parents, mode 0700) if missing
   * when the disk tier is first used, not at open: a process that never
   * compiles a kernel never touches it. NULL or "": kiln_kcache_default_dir()
   * at that first use. Ignored when disk_enabled is false. */
  const char *dir;
  bool disk_enabled; /* false: memory tier only, nothing read or written */
  kiln_kcache_log_fn log; /* NULL: discard log lines */
  void *log_user;
} kiln_kcache_options;

/* Counters since open, for tests and `kiln kernels`. */
typedef struct kiln_kcache_stats {
  uint64_t memory_hits;  /* kiln_kcache_get answered from the memory tier */
  uint64_t disk_hits;    /* ... from a valid disk entry */
  uint64_t compiles;     /* compile hooks called successfully */
  uint64_t discarded;    /* disk entries found and refused */
  uint64_t disk_writes;  /* entries written */
  uint64_t write_failures; /* entries that could not be written (logged) */
} kiln_kcache_stats;

/* The [kernel_cache] section's keys (dir, enabled), for the config module. */
extern const kiln_config_key kiln_kcache_config_keys[];
extern const unsigned kiln_kcache_n_config_keys;

/* The default disk folder: $XDG_CACHE_HOME/kiln when XDG_CACHE_HOME is an
 * absolute path (the XDG spec ignores relative ones), else $HOME/.cache/kiln.
 * Stores a malloc'd path in *out_dir. Errors: KILN_STATUS_NOT_FOUND when
 * neither variable gives an absolute path. */
kiln_status kiln_kcache_default_dir(char **out_dir);

/* Opens a service; touches no file. With the disk tier on, the folder is
 * resolved, created if needed and opened at the first disk lookup, store,
 * list or clear, and kept open (later renames of the path do not redirect
 * the service). When that fails, kiln_kcache_get() goes on with the memory
 * tier alone and logs why once, at warn; kiln_kcache_list() and
 * kiln_kcache_clear_report() return the reason. Errors:
 * KILN_STATUS_INVALID_ARGUMENT (NULL opts/out), KILN_STATUS_NO_MEMORY. */
kiln_status kiln_kcache_open(const kiln_kcache_options *opts, kiln_kcache **out_kc);

/* Unregisters every compiler (calling release_slot), frees every template
 * and kernel. NULL is fine. No kiln_kernel of this service may be used
 * afterwards. */
void kiln_kcache_close(kiln_kcache *kc);

/* The disk folder in use, or NULL with the disk tier off, not used yet, or
 * unusable. Valid until close. */
const char *kiln_kcache_dir(const kiln_kcache *kc);

/* Registers a template after validating it (top of this file). Registering
 * an identical template again (same name, version, entry, source and
 * schema) is a no-op, so backends sharing templates may each register
 * them. Errors: KILN_STATUS_INVALID_ARGUMENT naming the template and the
 * offending parameter or placeholder (with its source line) for a bad name,
 * schema or source, or for a different template under a taken name. */
kiln_status kiln_kcache_register_template(kiln_kcache *kc, const kiln_ktemplate *t);

/* Templates registered so far, in registration order; the pointers are
 * the service's copies, valid until close. Index past the end: NULL. */
uint32_t kiln_kcache_template_count(const kiln_kcache *kc);
const kiln_ktemplate *kiln_kcache_template_at(const kiln_kcache *kc, uint32_t i);

/* Registers a backend's compiler and target (validated: names, an exact
 * arch "sm_<digits>[a|f]", no control characters anywhere). Each backend
 * instance registers its own, so kernel slots are never shared; two
 * registrations with equal fingerprints share disk entries. Errors:
 * KILN_STATUS_INVALID_ARGUMENT naming the field. */
kiln_status kiln_kcache_register_compiler(kiln_kcache *kc, const kiln_kcompiler_desc *d,
                                          kiln_kcompiler **out_compiler);

/* Calls release_slot for its kernels' non-NULL slots, frees them and the
 * registration. NULL is fine. */
void kiln_kcache_unregister_compiler(kiln_kcompiler *c);

/* A new descriptor for `template_name` compiled by `c`; the target
 * fingerprint is c's. Every baked parameter starts unset. Errors:
 * KILN_STATUS_NOT_FOUND for an unregistered template,
 * KILN_STATUS_INVALID_ARGUMENT for NULL arguments. */
kiln_status kiln_kdesc_new(kiln_kcompiler *c, const char *template_name, kiln_kdesc **out_desc);

/* Set the baked parameter `name` of d (setting it again replaces the
 * value). Errors, each naming the template and the parameter:
 * KILN_STATUS_NOT_FOUND when the schema does not declare `name`;
 * KILN_STATUS_INVALID_ARGUMENT when it is declared with another type, or as
 * a runtime parameter, or the value is not allowed: a non-finite float, a
 * str outside [A-Za-z0-9_]{1,63}, a dtype kiln does not know. */
kiln_status kiln_kdesc_set_f32(kiln_kdesc *d, const char *name, float v);
kiln_status kiln_kdesc_set_f64(kiln_kdesc *d, const char *name, double v);
kiln_status kiln_kdesc_set_i64(kiln_kdesc *d, const char *name, int64_t v);
kiln_status kiln_kdesc_set_str(kiln_kdesc *d, const char *name, const char *v);
kiln_status kiln_kdesc_set_dtype(kiln_kdesc *d, const char *name, kiln_type v);

void kiln_kdesc_free(kiln_kdesc *d);

/* The canonical text of d (top of this file), malloc'd into *out_text.
 * Errors: KILN_STATUS_INVALID_ARGUMENT naming the first unset baked
 * parameter (in name order). */
kiln_status kiln_kdesc_canonical(const kiln_kdesc *d, char **out_text);

/* The key of d: XXH3-128 of its canonical text. Errors as
 * kiln_kdesc_canonical. */
kiln_status kiln_kdesc_key(const kiln_kdesc *d, kiln_kkey *out_key);

bool kiln_kkey_equal(const kiln_kkey *a, const kiln_kkey *b);

/* 32 lower-case hex digits and a NUL into out (the disk entry's name). */
void kiln_kkey_format(const kiln_kkey *k, char out[KILN_KKEY_HEX_SIZE]);

/* The kernel for d: from the compiler's memory tier, else a valid disk
 * entry, else rendered from d, compiled with the compiler's hook, and
 * written to disk. The memory tier is looked up by key, so call this at
 * plan time and keep the kernel for launches. d may be freed afterwards.
 * A disk write that fails is logged, not returned: the kernel is still
 * good. Errors: those of kiln_kdesc_canonical, the compile hook's status
 * (KILN_STATUS_COMPILE, annotated with the template name),
 * KILN_STATUS_NO_MEMORY. */
kiln_status kiln_kcache_get(const kiln_kdesc *d, kiln_kernel **out_kernel);

/* Counters of the service (all compilers) since open. */
void kiln_kcache_get_stats(const kiln_kcache *kc, kiln_kcache_stats *out_stats);

/* One disk entry, for kiln_kcache_list(). For an invalid entry, `problem`
 * says why and the other fields except `file` are NULL/0. */
typedef struct kiln_kcache_entry_info {
  const char *file;      /* the name inside the folder: "<key>.kk" */
  const char *canonical; /* the full canonical descriptor */
  kiln_kimage_kind image_kind;
  size_t image_size;
  const char *problem;   /* NULL for a valid entry */
} kiln_kcache_entry_info;

typedef void (*kiln_kcache_list_fn)(void *user, const kiln_kcache_entry_info *e);

/* Calls fn for each file of the folder named like an entry, in name order,
 * after checking its format, checksum and that its name is the key of its
 * canonical text. Other files are ignored. Errors: KILN_STATUS_UNSUPPORTED
 * with the disk tier off, KILN_STATUS_NOT_FOUND when no folder is
 * configured and kiln_kcache_default_dir() finds none, KILN_STATUS_IO if
 * the folder cannot be created, opened or read. */
kiln_status kiln_kcache_list(kiln_kcache *kc, kiln_kcache_list_fn fn, void *user);

/* A file kiln_kcache_clear_report() left in the folder: its name inside
 * the folder and why it was left ("not named like a cache entry", "a
 * symbolic link (never followed)", "does not begin with the cache-entry
 * header", ...). */
typedef void (*kiln_kcache_left_fn)(void *user, const char *file, const char *why);

/* Removes the service's files from the folder and touches nothing else. A
 * file is removed only if it is a regular file (a symlink is neither
 * followed nor unlinked) and either is named like an entry ("<32 hex>.kk")
 * and its content begins with the entry's first line ("kiln-kcache-entry
 * 1"): a damaged entry still does and is removed; a file merely named like
 * one (a user's, a copy of something else) does not and stays; or is named
 * like the service's temporary files ("<32 hex>.kk.tmp.<pid>.<n>"), its
 * content is empty or begins like an entry (a writer killed before or
 * while writing) and no live writer holds its lock. Every file left is
 * passed to on_left (may be NULL) with the reason. The counts go to
 * *out_removed and *out_left (each may be NULL). Memory tiers are kept.
 * Errors: those of kiln_kcache_list() for the folder, or KILN_STATUS_IO
 * naming the first file that could not be removed (counted as left; the
 * others are still processed). */
kiln_status kiln_kcache_clear_report(kiln_kcache *kc, kiln_kcache_left_fn on_left, void *user,
                                     uint32_t *out_removed, uint32_t *out_left);

/* kiln_kcache_clear_report() without the report of what was left. */
kiln_status kiln_kcache_clear(kiln_kcache *kc, uint32_t *out_removed);

/* "sm_<major><minor>" for a compute capability, the exact arch string of
 * a fingerprint (12.0 -> "sm_120", 12.1 -> "sm_121"). Errors:
 * KILN_STATUS_INVALID_ARGUMENT for major < 1, minor outside 0..9. */
kiln_status kiln_kcache_arch_from_cc(int major, int minor, char out[16]);

/* Names for printing. */
const char *kiln_kparam_type_name(kiln_kparam_type t); /* "f32", "i64", "ptr", ... */
const char *kiln_kimage_kind_name(kiln_kimage_kind k); /* "ptx", "cubin" */

#ifdef __cplusplus
}
#endif
#endif /* KILN_KCACHE_H */
