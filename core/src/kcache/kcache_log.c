/* The service's one logging path: a line to the host's log callback, if
 * any. Below every tier, so the disk tier logs without calling up into the
 * service. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "kcache_internal.h"

void kiln__kcache_logf(const kiln_kcache *kc, int level, const char *fmt, ...) {
  if (!kc->log) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  kc->log(kc->log_user, level, line);
}
