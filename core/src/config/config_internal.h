/* Internal to libkiln: the table of core's config sections. */
#ifndef KILN_CONFIG_INTERNAL_H
#define KILN_CONFIG_INTERNAL_H

#include "kiln/config_schema.h"

typedef struct kiln__config_table {
  const char *name;
  const kiln_config_key *keys;
  uint32_t n_keys;
} kiln__config_table;

/* Core's sections, ended by an entry with name NULL (core/src/config/config_table.c). */
extern const kiln__config_table kiln__config_core_tables[];

#endif
