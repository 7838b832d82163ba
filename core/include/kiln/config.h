/*
 * kiln/config.h — kiln's configuration: INI files (read with inih),
 * environment variables and command-line flags, checked against tables.
 *
 * Every section and key is declared once (kiln/config_schema.h): core's
 * sections in core/src/config/config_table.c, the kernel cache's [kernel_cache],
 * and each plugin's own section. A file is read in two phases, because the
 * plugin folder may itself come from the file: kiln_config_load_file()
 * parses and keeps every entry with its line; kiln_config_validate() checks
 * them once all schemas are registered. Unknown sections and keys, values of
 * the wrong type and out-of-range values are errors naming the file and the
 * line ("conf/kiln.ini:12: [cpu] precision = f16: not one of f32|f64").
 *
 * Precedence, lowest first: declared defaults, the file, environment
 * variables (KILN_BACKEND, KILN_MODEL, KILN_PLUGIN_PATH, KILN_LOG_LEVEL,
 * KILN_FALLBACK, KILN_KERNEL_CACHE_DIR), then kiln_config_set() calls (the
 * command line's flags). The file is $KILN_CONFIG when set.
 *
 * Ownership: strings returned point into the kiln_config and live until
 * kiln_config_free().
 */
#ifndef KILN_CONFIG_H
#define KILN_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/config_schema.h"
#include "kiln/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_config kiln_config;

/* A configuration with core's sections declared and every default applied. */
kiln_status kiln_config_new(kiln_config **out_config);
void kiln_config_free(kiln_config *c);

/* A copy of c: the same declared sections and every entry, not yet
 * validated (call kiln_config_validate). For a session that overrides a
 * backend's keys without touching the runtime's configuration. */
kiln_status kiln_config_copy(const kiln_config *c, kiln_config **out_copy);

/* Declares section `name` with `keys` (a plugin's, or [kernel_cache]).
 * The table must outlive c. KILN_STATUS_INVALID_ARGUMENT if the section is
 * already declared or a key's default does not satisfy its own type. */
kiln_status kiln_config_declare(kiln_config *c, const char *name, const kiln_config_key *keys,
                                uint32_t n_keys);

/* Parses INI file `path` (inih). Syntax errors fail at once naming
 * path:line; entries are checked against the schemas later, by
 * kiln_config_validate(). KILN_STATUS_NOT_FOUND / IO naming the path if it
 * cannot be read. At most one file per config. */
kiln_status kiln_config_load_file(kiln_config *c, const char *path);

/* Applies the KILN_* environment variables listed above. Errors name the
 * variable. */
kiln_status kiln_config_apply_env(kiln_config *c);

/* Sets section.key from `origin` (e.g. "--backend"): checked at once
 * against the schema if the section is declared, else at validation. */
kiln_status kiln_config_set(kiln_config *c, const char *section, const char *key,
                            const char *value, const char *origin);

/* Checks every entry from the file, the environment and kiln_config_set()
 * against the declared schemas. With `allow_undeclared_sections` (used
 * before plugins are loaded), entries of unknown sections are kept for a
 * later call; otherwise each is an error naming file and line, as is a
 * [section] line of the file with no key under it whose section is not
 * declared. All problems are reported in one status, one per line. */
kiln_status kiln_config_validate(kiln_config *c, bool allow_undeclared_sections);

/* Calls fn for each distinct section named by an entry (file, environment
 * or flag), or by a [section] line of the file with no key under it, that
 * is not declared yet: the plugin loader loads the plugin of that name so
 * it can declare its keys. */
void kiln_config_each_undeclared(const kiln_config *c, void (*fn)(const char *section, void *user),
                                 void *user);

/* The section `name`, or NULL if it is not declared. */
const kiln_config_section *kiln_config_section_get(const kiln_config *c, const char *name);

/* Whether section s declares `key` (false for a NULL s): for readers of
 * keys only some backends have, such as `kiln bench` showing a backend's
 * precision. */
bool kiln_config_has_key(const kiln_config_section *s, const char *key);

/* Typed reads of a validated section (the default when unset; NULL/0 when
 * the key has no default and is unset). Reading an undeclared key or with
 * the wrong type is a programming error: it is logged to stderr and 0/NULL
 * returned. */
const char *kiln_config_get_str(const kiln_config_section *s, const char *key);
int64_t kiln_config_get_int(const kiln_config_section *s, const char *key);
double kiln_config_get_float(const kiln_config_section *s, const char *key);
bool kiln_config_get_bool(const kiln_config_section *s, const char *key);
/* Where the value came from: "default", "conf/kiln.ini:7", "KILN_BACKEND",
 * "--backend". */
const char *kiln_config_origin(const kiln_config_section *s, const char *key);

/* The file that was loaded, or NULL. */
const char *kiln_config_file(const kiln_config *c);

/* Prints every declared section and key with type, range, default and
 * help: `kiln config --help`. */
void kiln_config_print_help(const kiln_config *c, FILE *out);

/* Prints the effective configuration (every key, value and origin). */
void kiln_config_print(const kiln_config *c, FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* KILN_CONFIG_H */
