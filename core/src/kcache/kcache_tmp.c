/* The disk tier's temporary files (the protocol is in kcache_internal.h):
 * named so the service knows its own, locked while a writer lives, so a
 * writer killed at any point leaves a file that the next sweep or
 * `kiln kernels --clear` removes, and no live writer's file is ever
 * taken. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kcache_internal.h"

bool kiln__kcache_is_tmp_name(const char *name) {
  /* "<32 hex>.kk.tmp.<pid>.<n>" */
  for (int i = 0; i < 32; i++)
    if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return false;
  if (strncmp(name + 32, ".kk.tmp.", 8) != 0) return false;
  const char *rest = name + 40;
  size_t pid_len = strspn(rest, "0123456789");
  if (!pid_len || rest[pid_len] != '.') return false;
  const char *n = rest + pid_len + 1;
  size_t n_len = strspn(n, "0123456789");
  return n_len && !n[n_len];
}

int kiln__kcache_tmp_create(kiln_kcache *kc, int dirfd, const char *hex, char out_name[96]) {
  pthread_mutex_lock(&kc->mu);
  uint64_t n = ++kc->tmp_counter;
  pthread_mutex_unlock(&kc->mu);
  snprintf(out_name, 96, "%s.kk.tmp.%ld.%" PRIu64, hex, (long)getpid(), n);
  int fd = openat(dirfd, out_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  /* Never blocks: only a --clear that found the file unlocked in the
   * instant since it was created can hold it, and it is removing it. */
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

/* Empty, or a beginning of an entry: what a writer leaves when killed. */
static bool content_is_partial_entry(int fd, const struct stat *sb) {
  static const char magic[] = KCACHE_ENTRY_MAGIC;
  size_t want = sizeof magic - 1;
  if ((uint64_t)sb->st_size < want) want = (size_t)sb->st_size;
  char head[sizeof magic];
  size_t got = 0;
  while (got < want) {
    ssize_t r = pread(fd, head + got, want - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += (size_t)r;
  }
  return memcmp(head, magic, want) == 0;
}

const char *kiln__kcache_tmp_not_stale(int fd, const struct stat *sb) {
  if (!content_is_partial_entry(fd, sb))
    return "does not begin like a cache entry, though named like its temporary files (not a "
           "kiln cache file)";
  if (flock(fd, LOCK_EX | LOCK_NB) != 0)
    return errno == EWOULDBLOCK ? "a temporary file a running kiln is writing"
                                : "a temporary file whose lock cannot be examined";
  return NULL;
}

static double age_seconds(const struct stat *sb) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return (double)(now.tv_sec - sb->st_mtim.tv_sec) +
         (double)(now.tv_nsec - sb->st_mtim.tv_nsec) * 1e-9;
}

unsigned kiln__kcache_tmp_sweep(int dirfd, double min_age_s) {
  int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
  if (!dir) {
    if (fd >= 0) close(fd);
    return 0;
  }
  unsigned removed = 0;
  struct dirent *e;
  while ((e = readdir(dir))) {
    if (!kiln__kcache_is_tmp_name(e->d_name)) continue;
    struct stat first;
    /* Looked at before opening, so a device node is never opened. */
    if (fstatat(dirfd, e->d_name, &first, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(first.st_mode))
      continue;
    int tfd = openat(dirfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (tfd < 0) continue;
    struct stat sb, now;
    /* Unlinked only while locked and still the same file under the name. */
    if (fstat(tfd, &sb) == 0 && S_ISREG(sb.st_mode) && age_seconds(&sb) >= min_age_s &&
        !kiln__kcache_tmp_not_stale(tfd, &sb) &&
        fstatat(dirfd, e->d_name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == sb.st_dev &&
        now.st_ino == sb.st_ino && unlinkat(dirfd, e->d_name, 0) == 0)
      removed++;
    close(tfd);
  }
  closedir(dir);
  return removed;
}
