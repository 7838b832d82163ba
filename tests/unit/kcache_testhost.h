/* Shared by the kernel-cache suites: a host table with the real status
 * functions and the real kernel-cache entries (what a plugin gets), and a
 * log sink that keeps what the service logged. */
#ifndef KILN_KCACHE_TESTHOST_H
#define KILN_KCACHE_TESTHOST_H

#include <stddef.h>

#include "kiln/plugin.h"

/* The table: kiln_status_* and kiln__kcache_host_fill(). Built here rather
 * than taken from kiln_host_api_get() so that the suites also build where
 * the service is compiled into the test itself (the guard's red build). */
const kiln_host_api *kt_kcache_host(void);

typedef struct kt_log {
  char text[32768]; /* every line, "\n"-terminated, truncated when full */
  size_t len;
  int lines;
} kt_log;

/* A kiln_kcache_log_fn appending to the kt_log passed as user. */
void kt_log_sink(void *user, int level, const char *line);

/* Opens a service on `dir` (NULL: memory only) logging into *log (may be
 * NULL); fails the test on error. */
kiln_kcache *kt_kcache_open(const char *dir, kt_log *log);

#endif
