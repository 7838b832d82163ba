/* kiln kernels: what the kernel cache knows (--schema: every template's
 * baked and runtime parameters), what it holds (--list: every disk entry
 * with its full canonical descriptor), and emptying it (--clear). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd_kernels.h"
#include "kiln/escape.h"
#include "kiln/kcache.h"

#if KILN_HAVE_CUDA
#include "../backends/cuda-common/kernel_templates.h"
#endif

static void usage(FILE *out) {
  fputs("usage: kiln kernels [--dir DIR] --schema | --list | --clear\n"
        "\n"
        "The kernel cache: GPU kernels compiled from templates, keyed by their full\n"
        "canonical descriptor (template, every baked parameter, target fingerprint).\n"
        "\n"
        "  --schema   every kernel template with its baked parameters (part of the\n"
        "             key: one compiled kernel per combination) and its runtime\n"
        "             parameters (kernel arguments)\n"
        "  --list     every cached kernel with its full descriptor\n"
        "  --clear    remove every cached kernel (only files the cache wrote: named\n"
        "             like an entry and starting with its header; the rest is\n"
        "             left and listed)\n"
        "  --dir DIR  the cache folder (default: $XDG_CACHE_HOME/kiln, else\n"
        "             ~/.cache/kiln; [kernel_cache] dir in kiln.ini)\n"
        "  -h, --help this text\n",
        out);
}

static void log_stderr(void *user, int level, const char *line) {
  fputs("kiln kernels: ", stderr);
  kiln_fput_escaped(stderr, line, strlen(line), KILN_ESCAPE_KEEP_BACKSLASH);
  fputc('\n', stderr);
}

static int fail(kiln_status st) {
  const char *msg = kiln_status_message(st);
  fputs("kiln kernels: error: ", stderr);
  kiln_fput_escaped(stderr, msg, strlen(msg), KILN_ESCAPE_KEEP_NEWLINE | KILN_ESCAPE_KEEP_BACKSLASH);
  fputc('\n', stderr);
  kiln_status_free(st);
  return 1;
}

/* Templates whose code is built into this program. Backends loaded as
 * plugins register theirs with the host's service when they open. */
static kiln_status register_builtin_templates(kiln_kcache *kc) {
#if KILN_HAVE_CUDA
  for (unsigned i = 0; i < kiln_cuda_n_templates; i++)
    KILN_RETURN_IF_ERROR(kiln_kcache_register_template(kc, kiln_cuda_templates[i]));
#endif
  return NULL;
}

static void print_params(const kiln_ktemplate *t, kiln_kparam_kind kind) {
  for (uint32_t i = 0; i < t->n_params; i++) {
    const kiln_kparam_decl *p = &t->params[i];
    if (p->kind != kind) continue;
    printf("  %-8s %-16s %-6s %s\n", kind == KILN_KPARAM_BAKED ? "baked" : "runtime", p->name,
           kiln_kparam_type_name(p->type), p->help ? p->help : "");
  }
}

static int show_schema(kiln_kcache *kc) {
  uint32_t n = kiln_kcache_template_count(kc);
  if (!n) {
    printf("no kernel templates are built into this kiln (built without CUDA)\n");
    return 0;
  }
  for (uint32_t i = 0; i < n; i++) {
    const kiln_ktemplate *t = kiln_kcache_template_at(kc, i);
    printf("%s%s (version %" PRIu32 ", entry %s)\n", i ? "\n" : "", t->name, t->version,
           t->entry);
    if (t->help) printf("  %s\n", t->help);
    print_params(t, KILN_KPARAM_BAKED);
    print_params(t, KILN_KPARAM_RUNTIME);
  }
  return 0;
}

typedef struct list_state {
  unsigned n, n_bad;
} list_state;

/* Prints the canonical text indented, with f32/f64 bit patterns decoded
 * on a comment line for the reader (the bits are what the key holds). */
static void print_canonical(const char *canon) {
  const char *line = canon;
  while (*line) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    /* a cache entry is a file: its text is escaped like any file's */
    printf("    ");
    kiln_fput_escaped(stdout, line, len, 0);
    char name[KILN_KCACHE_NAME_MAX];
    unsigned long long bits;
    char type[4];
    if (sscanf(line, "param %63s %3s 0x%llx", name, type, &bits) == 3) {
      if (strcmp(type, "f32") == 0) {
        uint32_t b = (uint32_t)bits;
        float f;
        memcpy(&f, &b, sizeof f);
        printf("   (%.9g)", (double)f);
      } else if (strcmp(type, "f64") == 0) {
        uint64_t b = bits;
        double d;
        memcpy(&d, &b, sizeof d);
        printf("   (%.17g)", d);
      }
    }
    putchar('\n');
    line += len + (end ? 1 : 0);
  }
}

static void show_left(void *user, const char *file, const char *why) {
  (void)user;
  printf("left ");
  kiln_fput_escaped(stdout, file, strlen(file), 0); /* any name a folder may hold */
  printf(": %s\n", why);
}

/* --list and --clear look at an existing folder; opening the service would
 * create a missing one. *out_dir: the folder (malloc'd). Returns -1 to go
 * on, else the exit status: 0 after saying there is no folder, 1 on error. */
static int find_folder(const char *dir, char **out_dir) {
  *out_dir = NULL;
  char *d = NULL;
  if (dir) {
    d = strdup(dir);
    if (!d) return fail(kiln_status_new(KILN_STATUS_NO_MEMORY, "out of memory"));
  } else {
    kiln_status st = kiln_kcache_default_dir(&d);
    if (st) return fail(st);
  }
  struct stat sb;
  if (stat(d, &sb) != 0) {
    int e = errno;
    int rc = 1;
    if (e == ENOENT) {
      printf("no cache folder at %s\n", d);
      rc = 0;
    } else {
      fprintf(stderr, "kiln kernels: error: kernel cache folder %s: %s\n", d, strerror(e));
    }
    free(d);
    return rc;
  }
  if (!S_ISDIR(sb.st_mode)) {
    fprintf(stderr, "kiln kernels: error: kernel cache folder %s: not a folder\n", d);
    free(d);
    return 1;
  }
  *out_dir = d;
  return -1;
}

static void show_entry(void *user, const kiln_kcache_entry_info *e) {
  list_state *ls = user;
  ls->n++;
  if (e->problem) {
    ls->n_bad++;
    printf("%s  INVALID: ", e->file);
    kiln_fput_escaped(stdout, e->problem, strlen(e->problem), KILN_ESCAPE_KEEP_BACKSLASH);
    printf(" (never used: the kernel is rebuilt when needed)\n");
    return;
  }
  printf("%s  %s, %zu bytes\n", e->file, kiln_kimage_kind_name(e->image_kind), e->image_size);
  print_canonical(e->canonical);
}

int kiln_cmd_kernels(int argc, char **argv) {
  const char *dir = NULL, *action = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else if ((strcmp(a, "--dir") == 0 && i + 1 < argc) || strncmp(a, "--dir=", 6) == 0) {
      dir = a[5] == '=' ? a + 6 : argv[++i];
      /* An empty path would quietly mean the default folder. */
      if (!*dir) {
        fprintf(stderr, "kiln kernels: --dir: empty path\n");
        return 2;
      }
    } else if (strcmp(a, "--schema") == 0 || strcmp(a, "--list") == 0 ||
               strcmp(a, "--clear") == 0) {
      if (action) {
        fprintf(stderr, "kiln kernels: %s and %s: one action at a time\n", action, a);
        return 2;
      }
      action = a;
    } else {
      fprintf(stderr, "kiln kernels: unknown argument \"%s\"\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (!action) {
    usage(stderr);
    return 2;
  }
  bool schema = strcmp(action, "--schema") == 0;
  char *folder = NULL;
  if (!schema) {
    int rc = find_folder(dir, &folder);
    if (rc >= 0) return rc;
  }
  /* --schema reads no folder: the disk tier stays off, nothing is created. */
  kiln_kcache_options o = {.dir = folder, .disk_enabled = !schema, .log = log_stderr};
  kiln_kcache *kc = NULL;
  kiln_status st = kiln_kcache_open(&o, &kc);
  free(folder);
  if (st) return fail(st);
  int rc = 0;
  if (schema) {
    st = register_builtin_templates(kc);
    rc = st ? fail(st) : show_schema(kc);
  } else if (strcmp(action, "--list") == 0) {
    list_state ls = {0, 0};
    st = kiln_kcache_list(kc, show_entry, &ls);
    if (st) {
      rc = fail(st);
    } else {
      printf("%u cached kernel%s in %s", ls.n, ls.n == 1 ? "" : "s", kiln_kcache_dir(kc));
      if (ls.n_bad) printf(" (%u invalid)", ls.n_bad);
      putchar('\n');
    }
  } else {
    uint32_t removed = 0, left = 0;
    st = kiln_kcache_clear_report(kc, show_left, NULL, &removed, &left);
    printf("removed %" PRIu32 " file%s from %s", removed, removed == 1 ? "" : "s",
           kiln_kcache_dir(kc));
    if (left) printf("; left %" PRIu32 " file%s (reasons above)", left, left == 1 ? "" : "s");
    putchar('\n');
    if (st) rc = fail(st);
  }
  kiln_kcache_close(kc);
  return rc;
}
