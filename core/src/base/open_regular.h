/* Opening a file that must be a regular one (a model, a configuration, a
 * golden set) without blocking on what is not: open(2) of a FIFO for
 * reading waits for a writer, so the file is opened O_NONBLOCK, checked
 * with fstat, and only then made blocking again (O_NONBLOCK means nothing
 * for a regular file's reads, but the flag is cleared all the same).
 * Header-only: every build that compiles a reader gets it. */
#ifndef KILN_OPEN_REGULAR_H
#define KILN_OPEN_REGULAR_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* The descriptor (O_RDONLY, O_CLOEXEC) and its stat in *sb; -1 with errno
 * set when it cannot be opened or stat'ed; -2 when it is not a regular
 * file (nothing left open). */
static inline int kiln__open_regular(const char *path, struct stat *sb) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  if (fstat(fd, sb) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  if (!S_ISREG(sb->st_mode)) {
    close(fd);
    return -2;
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

/* The same as a stream opened with fdopen(mode), in *out: 0; -1 with
 * errno set; -2 when not a regular file. Nothing is left open on failure. */
static inline int kiln__fopen_regular(const char *path, const char *mode, struct stat *sb, FILE **out) {
  *out = NULL;
  int fd = kiln__open_regular(path, sb);
  if (fd < 0) return fd;
  if (!(*out = fdopen(fd, mode))) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return 0;
}

#endif /* KILN_OPEN_REGULAR_H */
