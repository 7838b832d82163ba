/* Progress on stderr, only when it is a terminal: a pipe or a log file
 * gets none of it. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "cli.h"

static int progress_state = -1; /* -1 unknown, 0 off, 1 on */
static bool line_shown;

bool cli_progress_on(void) {
  if (progress_state < 0) progress_state = isatty(STDERR_FILENO) ? 1 : 0;
  return progress_state == 1;
}

void cli_progress(const char *fmt, ...) {
  if (!cli_progress_on()) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("\r\033[K", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fflush(stderr);
  line_shown = true;
}

void cli_progress_clear(void) {
  if (!line_shown) return;
  fputs("\r\033[K", stderr);
  fflush(stderr);
  line_shown = false;
}
