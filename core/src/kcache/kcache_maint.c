/* Maintenance of the disk tier for `kiln kernels`: listing entries (each
 * checked as a load would check it) and clearing the folder. Listing reads
 * only names shaped like the service's own files; clearing removes only
 * those that also hold the service's content (a name proves nothing: a
 * user's file once named like an entry was deleted by --clear): an entry
 * must begin with the entry header, a temporary file must be empty or
 * begin like an entry and have no live writer (kcache_tmp.c). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kcache_internal.h"

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The folder's names accepted by `keep`, sorted, malloc'd. */
static kiln_status scan(kiln_kcache *kc, bool (*keep)(const char *), char ***out_names,
                        size_t *out_n) {
  int dirfd;
  KILN_RETURN_IF_ERROR(kiln__kcache_folder_open(kc, &dirfd));
  int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
  if (!dir) {
    if (fd >= 0) close(fd);
    return kiln_status_new(KILN_STATUS_IO, "kernel cache folder %s: %s", kc->dir,
                           strerror(errno));
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(dir))) {
    if (!keep(e->d_name)) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 32;
      char **g = realloc(names, cap * sizeof *g);
      if (!g) break;
      names = g;
    }
    if (!(names[n] = strdup(e->d_name))) break;
    n++;
  }
  closedir(dir);
  if (n) qsort(names, n, sizeof *names, cmp_str);
  *out_names = names;
  *out_n = n;
  return NULL;
}

static void free_names(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

static bool any_name(const char *name) { return strcmp(name, ".") && strcmp(name, ".."); }

kiln_status kiln_kcache_list(kiln_kcache *kc, kiln_kcache_list_fn fn, void *user) {
  if (!kc || !fn) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kcache_list: NULL");
  char **names;
  size_t n;
  KILN_RETURN_IF_ERROR(scan(kc, kiln__kcache_is_entry_name, &names, &n));
  for (size_t i = 0; i < n; i++) {
    kiln_kcache_entry_info info = {.file = names[i]};
    char problem[256] = "";
    char *buf = NULL, *canonical = NULL;
    void *image = NULL;
    size_t size = 0;
    int fd = openat(kc->dirfd, names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat sb;
    if (fd < 0) {
      snprintf(problem, sizeof problem, "cannot open: %s", strerror(errno));
    } else if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > (256 << 20)) {
      snprintf(problem, sizeof problem, "not a regular file of sane size");
    } else if (!(buf = malloc((size_t)sb.st_size + 1))) {
      snprintf(problem, sizeof problem, "out of memory");
    } else {
      size_t got = 0;
      ssize_t r;
      while (got < (size_t)sb.st_size && (r = read(fd, buf + got, (size_t)sb.st_size - got)) > 0)
        got += (size_t)r;
      kiln_status st =
          kiln__kcache_entry_decode(buf, got, &canonical, &info.image_kind, &image, &size);
      if (st) {
        snprintf(problem, sizeof problem, "%s", kiln_status_message(st));
        kiln_status_free(st);
      } else {
        char hex[KILN_KKEY_HEX_SIZE];
        kiln__kcache_hash_hex(canonical, strlen(canonical), hex);
        if (strncmp(hex, names[i], 32) != 0)
          snprintf(problem, sizeof problem, "its name is not the key of its descriptor (%s)",
                   hex);
      }
    }
    if (fd >= 0) close(fd);
    if (problem[0]) {
      info.problem = problem;
      info.image_kind = KILN_KIMAGE_PTX;
    } else {
      info.canonical = canonical;
      info.image_size = size;
    }
    fn(user, &info);
    free(buf);
    free(canonical);
    free(image);
  }
  free_names(names, n);
  return NULL;
}

/* Why `name` (in the folder) must be left alone ("" when it has vanished
 * meanwhile), or NULL when it is one of the service's files: then *out_fd
 * is the file opened (never through a symlink) and *out_sb its identity,
 * checked again just before unlinking. why holds any message built. */
static const char *not_ours(int dirfd, const char *name, int *out_fd, struct stat *out_sb,
                            char *why, size_t cap) {
  *out_fd = -1;
  bool tmp = kiln__kcache_is_tmp_name(name);
  if (!kiln__kcache_is_entry_name(name) && !tmp) return "not named like a cache entry";
  struct stat sb;
  /* Looked at before opening, so a device node is never opened. */
  if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return ""; /* removed by someone else since the scan */
    snprintf(why, cap, "cannot examine it: %s", strerror(errno));
    return why;
  }
  if (S_ISLNK(sb.st_mode)) return "a symbolic link (never followed; the cache writes none)";
  if (S_ISDIR(sb.st_mode)) return "a folder (the cache writes none)";
  if (!S_ISREG(sb.st_mode)) return "not a regular file (the cache writes only those)";
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return "";
    snprintf(why, cap, "cannot open it to check its content: %s", strerror(errno));
    return why;
  }
  if (fstat(fd, out_sb) != 0 || !S_ISREG(out_sb->st_mode)) {
    close(fd);
    return "changed while being checked";
  }
  if (tmp) {
    /* A writer killed before its first bytes were out left it empty. */
    const char *busy = kiln__kcache_tmp_not_stale(fd, out_sb);
    if (busy) {
      close(fd);
      return busy;
    }
  } else if (!kiln__kcache_has_entry_magic(fd)) {
    close(fd);
    return "does not begin with the cache-entry header \"kiln-kcache-entry 1\" (not a "
           "kiln cache file)";
  }
  *out_fd = fd;
  return NULL;
}

kiln_status kiln_kcache_clear_report(kiln_kcache *kc, kiln_kcache_left_fn on_left, void *user,
                                     uint32_t *out_removed, uint32_t *out_left) {
  if (!kc) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kcache_clear: NULL");
  if (out_removed) *out_removed = 0;
  if (out_left) *out_left = 0;
  char **names;
  size_t n;
  KILN_RETURN_IF_ERROR(scan(kc, any_name, &names, &n));
  kiln_status st = NULL;
  uint32_t removed = 0, left = 0;
  for (size_t i = 0; i < n; i++) {
    char buf[320];
    int fd;
    struct stat sb;
    const char *why = not_ours(kc->dirfd, names[i], &fd, &sb, buf, sizeof buf);
    if (!why) {
      /* The name must still be the file whose content was checked: the
       * folder may be shared with other processes. unlinkat never follows
       * a symlink and fails on a folder. */
      struct stat now;
      if (fstatat(kc->dirfd, names[i], &now, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) why = ""; /* gone already: neither removed nor left */
        else why = "changed while being checked";
      } else if (now.st_dev != sb.st_dev || now.st_ino != sb.st_ino) {
        why = "changed while being checked";
      } else if (unlinkat(kc->dirfd, names[i], 0) == 0) {
        removed++;
      } else if (errno == ENOENT) {
        why = "";
      } else {
        int e = errno;
        snprintf(buf, sizeof buf, "cannot remove it: %s", strerror(e));
        why = buf;
        if (!st)
          st = kiln_status_new(KILN_STATUS_IO, "kernel cache: cannot remove %s/%s: %s", kc->dir,
                               names[i], strerror(e));
      }
      close(fd);
    }
    if (why && *why) {
      left++;
      if (on_left) on_left(user, names[i], why);
    }
  }
  free_names(names, n);
  if (out_removed) *out_removed = removed;
  if (out_left) *out_left = left;
  return st;
}

kiln_status kiln_kcache_clear(kiln_kcache *kc, uint32_t *out_removed) {
  return kiln_kcache_clear_report(kc, NULL, NULL, out_removed, NULL);
}
