/* The disk tier's folder, opened on first use rather than at
 * kiln_kcache_open(): a run whose backends compile nothing (cpu) neither
 * needs a folder nor creates one, and a GPU run without a usable folder
 * keeps the memory tier and says so once. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kcache_internal.h"

/* A temporary file whose lock is free and that is at least this old has
 * lost its writer (a writer locks its file right after creating it); the
 * margin covers a writer stalled between the two calls. */
#define KCACHE_STALE_TMP_AGE_S 60.0

kiln_status kiln_kcache_default_dir(char **out_dir) {
  if (!out_dir) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "default_dir: NULL");
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  const char *base, *suffix;
  if (xdg && xdg[0] == '/') {
    base = xdg;
    suffix = "/kiln";
  } else if (home && home[0] == '/') {
    base = home;
    suffix = "/.cache/kiln";
  } else {
    return kiln_status_new(KILN_STATUS_NOT_FOUND,
                           "kernel cache: no folder: neither XDG_CACHE_HOME nor HOME is an "
                           "absolute path; set [kernel_cache] dir");
  }
  size_t n = strlen(base) + strlen(suffix) + 1;
  char *p = malloc(n);
  if (!p) return kiln_status_new(KILN_STATUS_NO_MEMORY, "kernel cache: out of memory");
  snprintf(p, n, "%s%s", base, suffix);
  *out_dir = p;
  return NULL;
}

/* mkdir -p, mode 0700 for what it creates. */
static kiln_status make_dirs(const char *dir) {
  char *p = strdup(dir);
  if (!p) return kiln_status_new(KILN_STATUS_NO_MEMORY, "kernel cache: out of memory");
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s != '\0') continue;
    char c = *s;
    *s = '\0';
    if (mkdir(p, 0700) != 0 && errno != EEXIST) {
      kiln_status st = kiln_status_new(KILN_STATUS_IO, "kernel cache folder %s: mkdir %s: %s",
                                       dir, p, strerror(errno));
      free(p);
      return st;
    }
    *s = c;
    if (!c) break;
  }
  free(p);
  return NULL;
}

/* Resolves, creates and opens the folder; with kc->mu held. */
static kiln_status open_folder(kiln_kcache *kc) {
  if (!kc->dir) KILN_RETURN_IF_ERROR(kiln_kcache_default_dir(&kc->dir));
  KILN_RETURN_IF_ERROR(make_dirs(kc->dir));
  int fd = open(kc->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return kiln_status_new(KILN_STATUS_IO, "kernel cache folder %s: %s", kc->dir, strerror(errno));
  kc->dirfd = fd;
  unsigned swept = kiln__kcache_tmp_sweep(fd, KCACHE_STALE_TMP_AGE_S);
  if (swept)
    kiln__kcache_logf(kc, 2, "kernel cache: removed %u stale temporary file%s from %s", swept,
                      swept == 1 ? "" : "s", kc->dir);
  return NULL;
}

/* Opens the folder once; returns the state it ends in. With kc->mu held. */
static kcache_folder_state ensure_folder(kiln_kcache *kc) {
  if (kc->folder == KCACHE_FOLDER_UNTRIED) {
    kiln_status st = open_folder(kc);
    kc->folder = st ? KCACHE_FOLDER_UNUSABLE : KCACHE_FOLDER_OPEN;
    kc->folder_error = st;
  }
  return kc->folder;
}

int kiln__kcache_folder_fd(kiln_kcache *kc) {
  pthread_mutex_lock(&kc->mu);
  kcache_folder_state state = ensure_folder(kc);
  bool warn = state == KCACHE_FOLDER_UNUSABLE && !kc->folder_warned;
  if (warn) kc->folder_warned = true;
  int fd = state == KCACHE_FOLDER_OPEN ? kc->dirfd : -1;
  pthread_mutex_unlock(&kc->mu);
  if (warn)
    kiln__kcache_logf(kc, 1,
                      "kernel cache: no usable folder (%s); compiled kernels stay in memory for "
                      "this run",
                      kiln_status_message(kc->folder_error));
  return fd;
}

kiln_status kiln__kcache_folder_open(kiln_kcache *kc, int *out_fd) {
  *out_fd = -1;
  pthread_mutex_lock(&kc->mu);
  kcache_folder_state state = ensure_folder(kc);
  kiln_status st = NULL;
  if (state == KCACHE_FOLDER_OFF)
    st = kiln_status_new(KILN_STATUS_UNSUPPORTED, "the kernel cache's disk tier is off");
  else if (state == KCACHE_FOLDER_UNUSABLE)
    st = kiln_status_new(kiln_status_code_of(kc->folder_error), "%s",
                         kiln_status_message(kc->folder_error));
  else
    *out_fd = kc->dirfd;
  pthread_mutex_unlock(&kc->mu);
  return st;
}
