#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kcache/kcache_internal.h"
#include "kcache_testhost.h"
#include "testutil.h"

const kiln_host_api *kt_kcache_host(void) {
  static kiln_host_api h;
  if (!h.abi_major) {
    h.abi_major = KILN_PLUGIN_ABI_MAJOR;
    h.abi_minor = KILN_PLUGIN_ABI_MINOR;
    h.struct_size = sizeof h;
    h.status_new = kiln_status_new;
    h.status_annotate = kiln_status_annotate;
    h.status_free = kiln_status_free;
    kiln__kcache_host_fill(&h);
  }
  return &h;
}

void kt_log_sink(void *user, int level, const char *line) {
  kt_log *log = user;
  (void)level;
  size_t n = strlen(line);
  if (log->len + n + 2 < sizeof log->text) {
    memcpy(log->text + log->len, line, n);
    log->len += n;
    log->text[log->len++] = '\n';
    log->text[log->len] = '\0';
  }
  log->lines++;
}

kiln_kcache *kt_kcache_open(const char *dir, kt_log *log) {
  kiln_kcache_options o = {.dir = dir, .disk_enabled = dir != NULL};
  if (log) {
    memset(log, 0, sizeof *log);
    o.log = kt_log_sink;
    o.log_user = log;
  }
  kiln_kcache *kc = NULL;
  KT_ASSERT_OK(kiln_kcache_open(&o, &kc));
  return kc;
}
