/* What every cpu op uses: node errors made through the host's status
 * functions, and how many pool tasks a piece of work is worth. Below the
 * ops and below cpu_check.c, the dispatch that calls them. */
#include "config.h"

#include <stdarg.h>
#include <string.h>

#include "kiln/plugin.h"

#include "cpu_ops.h"
#include "node_check.h"

/* The shared checks make statuses through a host table; the ops library
 * holds the host's status functions in its ctx instead (the plugin gives it
 * the host's, the unit tests libkiln's), so they are handed over in a table
 * holding just those: node_check.h uses nothing else. */
void cpu_status_host(const cpu_ctx *ctx, kiln_host_api *out) {
  memset(out, 0, sizeof *out);
  out->abi_major = KILN_PLUGIN_ABI_MAJOR;
  out->abi_minor = KILN_PLUGIN_ABI_MINOR;
  out->struct_size = sizeof *out;
  out->status_new = ctx->status_new;
  out->status_annotate = ctx->status_annotate;
  out->status_free = ctx->status_free;
}

kiln_status cpu_node_error(const cpu_ctx *ctx, kiln_status_code code, const kiln_node *node,
                           const char *fmt, ...) {
  kiln_host_api host;
  cpu_status_host(ctx, &host);
  va_list ap;
  va_start(ap, fmt);
  kiln_status st = kiln_node_verror(&host, code, node, fmt, ap);
  va_end(ap);
  return st;
}

int cpu_task_count(const cpu_ctx *ctx, int64_t units, double work) {
  int64_t pool = cpu_pool_size(ctx->pool);
  /* In double: N*K*T of a large prefill can pass int64. */
  double want = work / CPU_MIN_TASK_WORK + 1.0;
  int64_t n = want > (double)pool ? pool : (int64_t)want;
  if (n > units) n = units;
  return n < 1 ? 1 : (int)n;
}
