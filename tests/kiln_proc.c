/* kt_kiln: fork, exec, files for the standard streams (no pipe to fill
 * up), and a pseudo-terminal for stderr when asked. */
#include "config.h"

#include "kiln_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static bool slurp_fd(int fd, char **out, size_t *len) {
  size_t cap = 4096, n = 0;
  char *b = malloc(cap);
  if (!b) return false;
  if (lseek(fd, 0, SEEK_SET) < 0) {
    free(b);
    return false;
  }
  for (;;) {
    if (n + 1 == cap) {
      char *g = realloc(b, cap *= 2);
      if (!g) {
        free(b);
        return false;
      }
      b = g;
    }
    ssize_t r = read(fd, b + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
  }
  b[n] = 0;
  *out = b;
  *len = n;
  return true;
}

/* An unlinked temporary file under $TMPDIR (or /tmp). */
static int temp_fd(void) {
  const char *tmp = getenv("TMPDIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/kiln-proc-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  int fd = mkstemp(path);
  if (fd >= 0) unlink(path);
  return fd;
}

/* Appends what the pty master has to *buf. */
static void drain(int master, char **buf, size_t *len, size_t *cap, int timeout_ms) {
  struct pollfd p = {master, POLLIN, 0};
  while (poll(&p, 1, timeout_ms) > 0) {
    if (*len + 4096 + 1 > *cap) {
      size_t c = *cap ? *cap * 2 : 8192;
      while (c < *len + 4096 + 1) c *= 2;
      char *g = realloc(*buf, c);
      if (!g) return;
      *buf = g;
      *cap = c;
    }
    ssize_t r = read(master, *buf + *len, 4096);
    if (r <= 0) return; /* EIO once the child's side is closed */
    *len += (size_t)r;
    (*buf)[*len] = 0;
    timeout_ms = 0;
  }
}

bool kt_kiln(const char *const *args, const char *in, size_t in_len, bool err_tty, kt_proc *out) {
  memset(out, 0, sizeof *out);
  const char *build = getenv("KILN_BUILDDIR");
  if (!build) {
    fprintf(stderr, "kt_kiln: KILN_BUILDDIR is not set\n");
    return false;
  }
  char exe[4096];
  snprintf(exe, sizeof exe, "%s/cli/kiln", build);
  size_t n_args = 0;
  while (args[n_args]) n_args++;
  char **argv = calloc(n_args + 2, sizeof *argv);
  int fd_in = in ? temp_fd() : open("/dev/null", O_RDONLY), fd_out = temp_fd(), fd_err = -1, master = -1, slave = -1;
  if (err_tty) {
    if (openpty(&master, &slave, NULL, NULL, NULL) != 0) {
      fprintf(stderr, "kt_kiln: openpty: %s\n", strerror(errno));
      return false;
    }
  } else {
    fd_err = temp_fd();
  }
  if (!argv || fd_in < 0 || fd_out < 0 || (!err_tty && fd_err < 0)) {
    fprintf(stderr, "kt_kiln: cannot set up the streams\n");
    return false;
  }
  if (in && (write(fd_in, in, in_len) != (ssize_t)in_len || lseek(fd_in, 0, SEEK_SET) != 0)) {
    fprintf(stderr, "kt_kiln: cannot write standard input\n");
    return false;
  }
  argv[0] = "kiln";
  for (size_t i = 0; i < n_args; i++) argv[i + 1] = (char *)args[i];
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "kt_kiln: fork: %s\n", strerror(errno));
    return false;
  }
  if (pid == 0) {
    dup2(fd_in, 0);
    dup2(fd_out, 1);
    dup2(err_tty ? slave : fd_err, 2);
    if (err_tty) {
      close(master);
      close(slave);
    }
    execv(exe, argv);
    _exit(127);
  }
  free(argv);
  char *tty = NULL;
  size_t tty_len = 0, tty_cap = 0;
  if (err_tty) close(slave);
  int status = 0;
  time_t t0 = time(NULL);
  for (;;) {
    if (err_tty) drain(master, &tty, &tty_len, &tty_cap, 50);
    else usleep(10000);
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (time(NULL) - t0 > 120) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
  }
  if (err_tty) {
    drain(master, &tty, &tty_len, &tty_cap, 50);
    close(master);
    out->err = tty ? tty : calloc(1, 1);
    out->err_len = tty_len;
  } else {
    slurp_fd(fd_err, &out->err, &out->err_len);
    close(fd_err);
  }
  slurp_fd(fd_out, &out->out, &out->out_len);
  close(fd_out);
  close(fd_in);
  out->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out->out && out->err;
}

void kt_proc_free(kt_proc *p) {
  free(p->out);
  free(p->err);
  memset(p, 0, sizeof *p);
}
