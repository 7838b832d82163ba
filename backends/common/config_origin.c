/* Where a refused config value came from (config_origin.h). */
#include "config.h"

#include <stddef.h>
#include <string.h>

#include "config_origin.h"

kiln_status kiln_config_origin_annotate(const kiln_host_api *host, const kiln_config_section *sec,
                                        const char *key, kiln_status st) {
  /* a table of 2.3 ends before cfg_origin: the bytes past it are not ours */
  if (!st || !sec || host->abi_minor < 4 ||
      host->struct_size < KILN_HOST_API_SIZE_2_3 + sizeof host->cfg_origin || !host->cfg_origin)
    return st;
  const char *origin = host->cfg_origin(sec, key);
  if (!origin || strcmp(origin, "default") == 0 || strcmp(origin, "unset") == 0) return st;
  return host->status_annotate(st, "%s", origin);
}
