/*
 * kiln/config_schema.h — how a configuration key is declared.
 *
 * Every section and key kiln accepts is declared once, in a table of these:
 * core's own sections in core/src/config/config_table.c, and each backend's section
 * ([cpu], [cuda-batched], ...) in the plugin's entry table. The INI reader
 * checks a file against these tables (unknown sections and keys, values of
 * the wrong type or out of range are errors naming the file and line) and
 * `kiln config --help` prints them. Part of the plugin ABI.
 */
#ifndef KILN_CONFIG_SCHEMA_H
#define KILN_CONFIG_SCHEMA_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kiln_config_type {
  KILN_CONFIG_BOOL = 0,   /* true/false, yes/no, on/off, 1/0 */
  KILN_CONFIG_INT = 1,    /* decimal int64 within [min, max] */
  KILN_CONFIG_FLOAT = 2,  /* a finite double within [min, max] */
  KILN_CONFIG_STRING = 3, /* any text; empty only where the default is "" (below) */
  KILN_CONFIG_ENUM = 4,   /* one of `choices`, a '|'-separated list ("f32|f64") */
  KILN_CONFIG_PATH = 5    /* a file or folder path; "~/" and $XDG_* are not expanded */
} kiln_config_type;

typedef struct kiln_config_key {
  const char *name;          /* the key, lower-case, [a-z0-9_] */
  kiln_config_type type;
  /* As it would be written in the file; NULL: no default, may be unset.
   * A STRING or PATH key whose default is "" is one whose help says what
   * empty means: only such a key takes an empty value ("key =" in a file,
   * -m ""); for any other an empty value is an error naming where it was
   * given, never read as unset. */
  const char *default_value;
  double min, max;           /* INT and FLOAT only (inclusive) */
  const char *choices;       /* ENUM only */
  const char *help;          /* one line for `kiln config --help` */
} kiln_config_key;

/* A parsed, validated section, opaque; read it through the host table's
 * cfg_* functions (kiln/plugin.h) or kiln_config_get_* (kiln/config.h). */
typedef struct kiln_config_section kiln_config_section;

#ifdef __cplusplus
}
#endif
#endif /* KILN_CONFIG_SCHEMA_H */
