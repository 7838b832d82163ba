/* Helpers every node -> descriptor function shares (op_describe.h). */
#include "config.h"

#include "node_check.h"
#include "op_describe.h"

kiln_status kiln_cuda_describe_finish(const kiln_host_api *host, kiln_status st, kiln_kdesc *d,
                                      const kiln_node *node, kiln_kdesc **out_desc) {
  if (st) {
    host->kdesc_free(d);
    return host->status_annotate(st, "node %s", node->name);
  }
  *out_desc = d;
  return NULL;
}

kiln_status kiln_cuda_describe_check_threads(const kiln_host_api *host, const kiln_node *node,
                                             const char *what, uint32_t v, uint32_t lo, uint32_t hi,
                                             bool multiple_of_32) {
  if (v < lo || v > hi || (multiple_of_32 && v % 32 != 0))
    return kiln_node_error(host, KILN_STATUS_INVALID_ARGUMENT, node, "%s %u is outside %u..%u%s", what, v, lo,
                           hi, multiple_of_32 ? " or not a multiple of 32" : "");
  return NULL;
}
