/* Internal to libkiln: the table of core's config sections. */
#ifndef KILN_CONFIG_INTERNAL_H
#define KILN_CONFIG_INTERNAL_H

#include <stdio.h>

#include "kiln/config.h"
#include "kiln/config_schema.h"

typedef struct kiln__config_table {
  const char *name;
  const kiln_config_key *keys;
  uint32_t n_keys;
} kiln__config_table;

/* Core's sections, ended by an entry with name NULL (core/src/config/config_table.c). */
extern const kiln__config_table kiln__config_core_tables[];

/* kiln_config_load_file() after its checks on the path: parses the INI
 * text read from f, naming `path` in messages (tests/fuzz/fuzz_config.c
 * feeds it bytes from memory). The caller closes f. */
kiln_status kiln__config_load_stream(kiln_config *c, FILE *f, const char *path);

#endif
