/* Logging to stderr with a process-wide level. */
#include "config.h"

#include "kiln/log.h"

#include <stdio.h>
#include <string.h>

static kiln_log_level current_level = KILN_LOG_WARN;

void kiln_log_set_level(kiln_log_level level) { current_level = level; }
kiln_log_level kiln_log_get_level(void) { return current_level; }

static const char *level_names[] = {"error", "warn", "info", "debug"};

int kiln_log_level_parse(const char *name) {
  for (int i = 0; i < 4; i++)
    if (strcmp(name, level_names[i]) == 0) return i;
  return -1;
}

void kiln_logv(kiln_log_level level, const char *who, const char *fmt, va_list ap) {
  if (level > current_level) return;
  /* One fprintf per line so concurrent writers do not interleave mid-line. */
  char msg[2048];
  vsnprintf(msg, sizeof msg, fmt, ap);
  fprintf(stderr, "kiln[%s]: %s: %s\n", who ? who : "core", level_names[level], msg);
}

void kiln_log(kiln_log_level level, const char *who, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln_logv(level, who, fmt, ap);
  va_end(ap);
}
