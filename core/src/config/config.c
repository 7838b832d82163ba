/* Configuration: entries from the file, the environment and flags, checked
 * against declared schemas (kiln/config.h says why in two phases). */
#include "config.h"

#include "kiln/config.h"
#include "kiln/escape.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <ini.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "../base/ini_section.h"
#include "../base/open_regular.h"
#include "config_internal.h"

/* Where an entry came from; later priorities override earlier ones. */
enum { PRIO_FILE = 0, PRIO_ENV = 1, PRIO_FLAG = 2 };

typedef struct entry {
  char *section, *key, *value;
  char *base_dir; /* file entries: the file's folder, for relative PATH values */
  char *origin; /* "conf/kiln.ini:7", "KILN_BACKEND", "--backend" */
  /* where its [section] was named: the header's line for a file entry
   * (an unknown section is reported there, once), else origin */
  char *section_origin;
  int prio;
} entry;

struct kiln_config_section {
  char *name;
  const kiln_config_key *keys;
  uint32_t n_keys;
  char **values;  /* per key: current value text, NULL when unset */
  const char **origins;
};

/* A [section] line of the file with no key under it: inih calls no
 * handler for one, yet an unknown name there is as wrong as anywhere. */
typedef struct bare_section {
  char *name, *origin; /* origin: "conf/kiln.ini:7" */
} bare_section;

struct kiln_config {
  kiln_config_section **sections;
  size_t n_sections;
  entry *entries;
  size_t n_entries, cap_entries;
  bare_section *bare;
  size_t n_bare;
  char *file;
};

static char *xstrdup(const char *s) { return s ? strdup(s) : NULL; }

static const kiln_config_key *find_key(const kiln_config_section *s, const char *key, uint32_t *out_i) {
  for (uint32_t i = 0; i < s->n_keys; i++)
    if (strcmp(s->keys[i].name, key) == 0) {
      if (out_i) *out_i = i;
      return &s->keys[i];
    }
  return NULL;
}

static kiln_config_section *find_section(const kiln_config *c, const char *name) {
  for (size_t i = 0; i < c->n_sections; i++)
    if (strcmp(c->sections[i]->name, name) == 0) return c->sections[i];
  return NULL;
}

static const char *type_name(kiln_config_type t) {
  switch (t) {
  case KILN_CONFIG_BOOL: return "bool";
  case KILN_CONFIG_INT: return "int";
  case KILN_CONFIG_FLOAT: return "float";
  case KILN_CONFIG_STRING: return "string";
  case KILN_CONFIG_ENUM: return "enum";
  case KILN_CONFIG_PATH: return "path";
  }
  return "?";
}

/* Parses a bool spelling; -1 if it is none. */
static int parse_bool(const char *v) {
  static const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(v, yes[i]) == 0) return 1;
    if (strcasecmp(v, no[i]) == 0) return 0;
  }
  return -1;
}

static bool enum_has(const char *choices, const char *v) {
  size_t n = strlen(v);
  for (const char *p = choices; p && *p;) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && strncmp(p, v, n) == 0) return true;
    p = bar ? bar + 1 : NULL;
  }
  return false;
}

/* Checks `value` against key `k`; a status naming the problem, without the
 * location (the caller prefixes it). */
static kiln_status check_value(const kiln_config_key *k, const char *value) {
  switch (k->type) {
  case KILN_CONFIG_BOOL:
    if (parse_bool(value) < 0)
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "\"%s\" is not a bool (true/false, yes/no, on/off, 1/0)", value);
    return NULL;
  case KILN_CONFIG_INT: {
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (errno || end == value || *end)
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "\"%s\" is not an integer", value);
    if ((double)v < k->min || (double)v > k->max)
      return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "%lld is outside [%.17g, %.17g]", v, k->min,
                             k->max);
    return NULL;
  }
  case KILN_CONFIG_FLOAT: {
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (errno == ERANGE && end != value && !*end && fabs(v) <= DBL_MIN) /* 1e-320: not a wrong number, a tiny one */
      return kiln_status_new(KILN_STATUS_OUT_OF_RANGE,
                             "\"%s\" is below the smallest normal double (%.3g): give 0 or a larger value",
                             value, DBL_MIN);
    if (errno || end == value || *end || v != v || v - v != 0)
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "\"%s\" is not a finite number", value);
    if (v < k->min || v > k->max)
      return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "%s is outside [%.17g, %.17g]", value, k->min,
                             k->max);
    return NULL;
  }
  case KILN_CONFIG_ENUM:
    if (!enum_has(k->choices, value))
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "\"%s\" is not one of %s", value,
                             k->choices);
    return NULL;
  case KILN_CONFIG_STRING:
  case KILN_CONFIG_PATH:
    /* "path =" once read as unset for some keys and was refused for
     * others; one rule for all (kiln/config_schema.h) */
    if (!*value && !(k->default_value && !*k->default_value))
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "an empty value (give a %s, or leave the key out for its default)",
                             k->type == KILN_CONFIG_PATH ? "path" : "value");
    return NULL;
  }
  return kiln_status_new(KILN_STATUS_INTERNAL, "key %s has an unknown type", k->name);
}

kiln_status kiln_config_declare(kiln_config *c, const char *name, const kiln_config_key *keys,
                                uint32_t n_keys) {
  if (find_section(c, name))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "config section [%s] is declared twice", name);
  kiln_config_section *s = calloc(1, sizeof *s);
  kiln_config_section **grown = realloc(c->sections, (c->n_sections + 1) * sizeof *grown);
  if (!s || !grown) {
    free(s);
    if (grown) c->sections = grown;
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "declaring config section [%s]", name);
  }
  c->sections = grown;
  s->name = strdup(name);
  s->keys = keys;
  s->n_keys = n_keys;
  s->values = calloc(n_keys ? n_keys : 1, sizeof *s->values);
  s->origins = calloc(n_keys ? n_keys : 1, sizeof *s->origins);
  c->sections[c->n_sections++] = s;
  for (uint32_t i = 0; i < n_keys; i++) {
    if (!keys[i].default_value) continue;
    kiln_status st = check_value(&keys[i], keys[i].default_value);
    if (st)
      return kiln_status_annotate(st, "default of [%s] %s", name, keys[i].name);
    s->values[i] = strdup(keys[i].default_value);
    s->origins[i] = "default";
  }
  return NULL;
}

kiln_status kiln_config_new(kiln_config **out_config) {
  *out_config = NULL;
  kiln_config *c = calloc(1, sizeof *c);
  if (!c) return kiln_status_new(KILN_STATUS_NO_MEMORY, "allocating the configuration");
  for (const kiln__config_table *t = kiln__config_core_tables; t->name; t++) {
    kiln_status st = kiln_config_declare(c, t->name, t->keys, t->n_keys);
    if (st) {
      kiln_config_free(c);
      return st;
    }
  }
  *out_config = c;
  return NULL;
}

static void free_section(kiln_config_section *s) {
  for (uint32_t i = 0; i < s->n_keys; i++) free(s->values[i]);
  free(s->values);
  free(s->origins);
  free(s->name);
  free(s);
}

void kiln_config_free(kiln_config *c) {
  if (!c) return;
  for (size_t i = 0; i < c->n_sections; i++) free_section(c->sections[i]);
  for (size_t i = 0; i < c->n_entries; i++) {
    free(c->entries[i].section);
    free(c->entries[i].key);
    free(c->entries[i].value);
    free(c->entries[i].origin);
    free(c->entries[i].section_origin);
    free(c->entries[i].base_dir);
  }
  for (size_t i = 0; i < c->n_bare; i++) {
    free(c->bare[i].name);
    free(c->bare[i].origin);
  }
  free(c->bare);
  free(c->sections);
  free(c->entries);
  free(c->file);
  free(c);
}

static kiln_status add_entry(kiln_config *c, const char *section, const char *key, const char *value,
                             const char *origin, const char *section_origin, int prio, const char *base_dir);
static kiln_status add_bare(kiln_config *c, const char *name, const char *origin);

kiln_status kiln_config_copy(const kiln_config *c, kiln_config **out_copy) {
  *out_copy = NULL;
  kiln_config *d = calloc(1, sizeof *d);
  if (!d) return kiln_status_new(KILN_STATUS_NO_MEMORY, "copying the configuration");
  kiln_status st = NULL;
  for (size_t i = 0; !st && i < c->n_sections; i++)
    st = kiln_config_declare(d, c->sections[i]->name, c->sections[i]->keys, c->sections[i]->n_keys);
  for (size_t i = 0; !st && i < c->n_entries; i++) {
    const entry *e = &c->entries[i];
    st = add_entry(d, e->section, e->key, e->value, e->origin, e->section_origin, e->prio, e->base_dir);
  }
  for (size_t i = 0; !st && i < c->n_bare; i++) st = add_bare(d, c->bare[i].name, c->bare[i].origin);
  if (!st && c->file && !(d->file = strdup(c->file))) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "config");
  if (st) {
    kiln_config_free(d);
    return st;
  }
  *out_copy = d;
  return NULL;
}

static kiln_status add_entry(kiln_config *c, const char *section, const char *key, const char *value,
                             const char *origin, const char *section_origin, int prio, const char *base_dir) {
  if (c->n_entries == c->cap_entries) {
    size_t cap = c->cap_entries ? 2 * c->cap_entries : 16;
    entry *e = realloc(c->entries, cap * sizeof *e);
    if (!e) return kiln_status_new(KILN_STATUS_NO_MEMORY, "config entry");
    c->entries = e;
    c->cap_entries = cap;
  }
  entry *e = &c->entries[c->n_entries++];
  e->section = xstrdup(section);
  e->key = xstrdup(key);
  e->value = xstrdup(value);
  e->origin = xstrdup(origin);
  e->section_origin = xstrdup(section_origin ? section_origin : origin);
  e->base_dir = xstrdup(base_dir);
  e->prio = prio;
  if (!e->section || !e->key || !e->value || !e->origin || !e->section_origin || (base_dir && !e->base_dir))
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "config entry");
  return NULL;
}

static kiln_status add_bare(kiln_config *c, const char *name, const char *origin) {
  bare_section *b = realloc(c->bare, (c->n_bare + 1) * sizeof *b);
  if (!b) return kiln_status_new(KILN_STATUS_NO_MEMORY, "config section");
  c->bare = b;
  b[c->n_bare] = (bare_section){strdup(name), strdup(origin)};
  if (!b[c->n_bare].name || !b[c->n_bare].origin) {
    free(b[c->n_bare].name);
    free(b[c->n_bare].origin);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "config section");
  }
  c->n_bare++;
  return NULL;
}

/* inih hands us lines through this reader so we know the line number of
 * each key: inih's own lineno is only passed to handlers when the library
 * is built with INI_HANDLER_LINENO, which Debian's is not. */
typedef struct parse_state {
  kiln_config *c;
  FILE *f;
  const char *path;
  char *dir;
  int line;
  kiln_status error;
  int error_line;      /* line of `error`, to order it against inih's own */
  bool indented;       /* the current line starts with blanks: inih's continuation */
  /* the last [section] line, until a key follows it (see note_header) */
  char header[50];     /* inih's MAX_SECTION, its own limit on a name */
  int header_line;     /* 0: no header waiting for a key */
  int section_line;    /* the line of the section the keys now read are in */
  bool after_key;      /* a key was read since the last section line (inih's prev_name) */
} parse_state;

static void set_error(parse_state *ps, kiln_status st) {
  if (ps->error) {
    kiln_status_free(st);
    return;
  }
  ps->error = st;
  ps->error_line = ps->line;
}

/* The waiting [section] line had no key under it: kept for
 * kiln_config_validate. */
static void keep_bare_header(parse_state *ps) {
  if (!ps->header_line) return;
  char origin[4096 + 32];
  snprintf(origin, sizeof origin, "%s:%d", ps->path, ps->header_line);
  ps->header_line = 0;
  kiln_status st = add_bare(ps->c, ps->header, origin);
  if (st) set_error(ps, st);
}

/* inih calls the handler only for keys (ini_section.h): the reader notes
 * each line that inih will take as a section, and on_entry clears it when
 * a key comes. A line inih refuses fails the load anyway. */
static void note_header(parse_state *ps, const char *line) {
  char name[sizeof ps->header];
  if (!kiln__ini_section_line(line, ps->line, ps->after_key, name, sizeof name)) return;
  keep_bare_header(ps);
  memcpy(ps->header, name, sizeof name);
  ps->header_line = ps->line;
  ps->section_line = ps->line;
  ps->after_key = false;
}

/* fgets() with the length kept: inih reads each line as a C string, so a
 * NUL byte would silently end it ("n_predict = 4\0junk" read as 4). */
static char *read_line(char *buf, int size, void *stream) {
  parse_state *ps = stream;
  size_t n = 0;
  int c = EOF;
  const char *nul = NULL;
  while (n < (size_t)size - 1 && (c = getc(ps->f)) != EOF) {
    if (c == '\0' && !nul) nul = buf + n;
    buf[n++] = (char)c;
    if (c == '\n') break;
  }
  if (n == 0) return NULL;
  buf[n] = '\0';
  ps->line++;
  ps->indented = kiln__ini_indented(buf);
  if (nul) {
    set_error(ps, kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                                  "%s:%d: a NUL byte at column %d (a configuration file is text; "
                                  "the line would have been cut there)",
                                  ps->path, ps->line, (int)(nul - buf) + 1));
    return NULL;
  }
  /* inih's line buffer is fixed; a longer line would be split silently. */
  if (n == (size_t)size - 1 && buf[n - 1] != '\n' && (c = getc(ps->f)) != EOF &&
      ungetc(c, ps->f) != EOF) {
    set_error(ps, kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                                  "%s:%d: line longer than %d bytes (inih's line limit; a value cannot "
                                  "continue on the next line)",
                                  ps->path, ps->line, size - 2));
    return NULL;
  }
  note_header(ps, buf);
  return buf;
}

static int on_entry(void *user, const char *section, const char *name, const char *value) {
  parse_state *ps = user;
  if (!name) return 1; /* a bare [section] line: note_header has it */
  ps->header_line = 0;  /* the section has a key: checked through it */
  ps->after_key = true;
  char origin[4096 + 32];
  snprintf(origin, sizeof origin, "%s:%d", ps->path, ps->line);
  if (!*section) {
    set_error(ps, kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: key \"%s\" is outside any [section]", origin,
                                  name));
    return 0;
  }
  for (size_t i = 0; i < ps->c->n_entries; i++) {
    entry *e = &ps->c->entries[i];
    if (e->prio == PRIO_FILE && !strcmp(e->section, section) && !strcmp(e->key, name)) {
      /* inih hands an indented line after a key to us as the same key */
      bool continuation = ps->indented && i == ps->c->n_entries - 1;
      set_error(ps, continuation
                        ? kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                                          "%s: an indented line continues [%s] %s; kiln takes each value on one "
                                          "line",
                                          origin, section, name)
                        : kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: [%s] %s is set twice (first at %s)",
                                          origin, section, name, e->origin));
      return 0;
    }
  }
  char section_origin[4096 + 32];
  snprintf(section_origin, sizeof section_origin, "%s:%d", ps->path, ps->section_line);
  kiln_status st = add_entry(ps->c, section, name, value, origin, section_origin, PRIO_FILE, ps->dir);
  if (st) {
    set_error(ps, st);
    return 0;
  }
  return 1;
}

kiln_status kiln__config_load_stream(kiln_config *c, FILE *f, const char *path) {
  if (c->file)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: a configuration file (%s) is already loaded",
                           path, c->file);
  /* Relative paths in a file are relative to the file's folder, so a
   * config means the same whatever the current directory. */
  const char *slash = strrchr(path, '/');
  parse_state ps = {c, f, path, slash ? strndup(path, (size_t)(slash - path)) : strdup("."), 0, NULL, 0, false,
                    "", 0, 0, false};
  int rc = ini_parse_stream(read_line, &ps, on_entry, &ps);
  keep_bare_header(&ps);
  free(ps.dir);
  /* inih returns the line of the first line it could not parse; report
   * whichever problem comes first in the file. */
  if (rc > 0 && (!ps.error || rc < ps.error_line)) {
    kiln_status_free(ps.error);
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "%s:%d: syntax error (expected [section], key = value, or a ; comment)", path, rc);
  }
  if (ps.error) return ps.error;
  if (rc < 0) return kiln_status_new(KILN_STATUS_IO, "%s: cannot read configuration file", path);
  c->file = strdup(path);
  return NULL;
}

kiln_status kiln_config_load_file(kiln_config *c, const char *path) {
  if (c->file)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: a configuration file (%s) is already loaded",
                           path, c->file);
  if (!*path) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "the configuration file path is empty");
  struct stat sb;
  FILE *f;
  int r = kiln__fopen_regular(path, "r", &sb, &f);
  if (r == -2)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: not a regular file (a configuration file is an INI text file)",
                           path);
  if (r < 0)
    return kiln_status_new(errno == ENOENT ? KILN_STATUS_NOT_FOUND : KILN_STATUS_IO,
                           "%s: cannot open configuration file: %s", path, strerror(errno));
  kiln_status st = kiln__config_load_stream(c, f, path);
  fclose(f);
  return st;
}

/* Environment variables and the section.key each one sets. */
static const struct {
  const char *var, *section, *key;
} env_map[] = {
    {"KILN_BACKEND", "backend", "name"},
    {"KILN_FALLBACK", "backend", "fallback"},
    {"KILN_MODEL", "model", "path"},
    {"KILN_PLUGIN_PATH", "general", "plugin_path"},
    {"KILN_LOG_LEVEL", "general", "log_level"},
    {"KILN_KERNEL_CACHE_DIR", "kernel_cache", "dir"},
};

kiln_status kiln_config_apply_env(kiln_config *c) {
  for (size_t i = 0; i < sizeof env_map / sizeof env_map[0]; i++) {
    const char *v = getenv(env_map[i].var);
    if (!v || !*v) continue;
    KILN_RETURN_IF_ERROR(
        add_entry(c, env_map[i].section, env_map[i].key, v, env_map[i].var, NULL, PRIO_ENV, NULL));
  }
  return NULL;
}

kiln_status kiln_config_set(kiln_config *c, const char *section, const char *key, const char *value,
                            const char *origin) {
  kiln_config_section *s = find_section(c, section);
  if (s) {
    const kiln_config_key *k = find_key(s, key, NULL);
    if (!k)
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: section [%s] has no key \"%s\"", origin,
                             section, key);
    kiln_status st = check_value(k, value);
    if (st) return kiln_status_annotate(st, "%s: [%s] %s", origin, section, key);
  }
  return add_entry(c, section, key, value, origin, NULL, PRIO_FLAG, NULL);
}

/* `value` (a ':'-separated list of paths) with each relative element
 * prefixed by base_dir; malloc'd. */
static char *resolve_paths(const char *base_dir, const char *value) {
  size_t cap = strlen(value) + 1, n = 0;
  for (const char *p = value; *p; p++) cap += *p == ':' ? strlen(base_dir) + 1 : 0;
  cap += strlen(base_dir) + 1;
  char *out = malloc(cap);
  if (!out) return NULL;
  for (const char *p = value;;) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    if (len && p[0] != '/') n += (size_t)snprintf(out + n, cap - n, "%s/", base_dir);
    memcpy(out + n, p, len);
    n += len;
    if (!colon) break;
    out[n++] = ':';
    p = colon + 1;
  }
  out[n] = 0;
  return out;
}

/* Whether one of entries[0..n) was named by the same [section] line as e
 * (or flag, or variable): its unknown section is told once. */
static bool section_told(const kiln_config *c, const entry *e, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(c->entries[i].section_origin, e->section_origin) && !strcmp(c->entries[i].section, e->section))
      return true;
  return false;
}

/* Whether one of entries[0..n) is in section `name`. */
static bool section_has_entry(const kiln_config *c, const char *name, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(c->entries[i].section, name)) return true;
  return false;
}

/* Appends "line" to a status that collects every problem. */
static kiln_status collect(kiln_status all, kiln_status one) {
  if (!all) return one;
  kiln_status merged = kiln_status_new(kiln_status_code_of(all), "%s\n%s", kiln_status_message(all),
                                       kiln_status_message(one));
  kiln_status_free(all);
  kiln_status_free(one);
  return merged;
}

kiln_status kiln_config_validate(kiln_config *c, bool allow_undeclared_sections) {
  kiln_status all = NULL;
  for (int prio = PRIO_FILE; prio <= PRIO_FLAG; prio++) {
    for (size_t i = 0; i < c->n_entries; i++) {
      entry *e = &c->entries[i];
      if (e->prio != prio) continue;
      kiln_config_section *s = find_section(c, e->section);
      if (!s) {
        if (!allow_undeclared_sections && !section_told(c, e, i))
          all = collect(all, kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                                             "%s: unknown section [%s] (kiln config --help lists them)",
                                             e->section_origin, e->section));
        continue;
      }
      uint32_t ki;
      const kiln_config_key *k = find_key(s, e->key, &ki);
      if (!k) {
        all = collect(all, kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                                           "%s: unknown key \"%s\" in section [%s]", e->origin, e->key,
                                           e->section));
        continue;
      }
      kiln_status st = check_value(k, e->value);
      if (st) {
        all = collect(all, kiln_status_annotate(st, "%s: [%s] %s", e->origin, e->section, e->key));
        continue;
      }
      free(s->values[ki]);
      s->values[ki] = k->type == KILN_CONFIG_PATH && e->base_dir ? resolve_paths(e->base_dir, e->value)
                                                                 : strdup(e->value);
      s->origins[ki] = e->origin;
    }
  }
  for (size_t i = 0; !allow_undeclared_sections && i < c->n_bare; i++) {
    const bare_section *b = &c->bare[i];
    if (find_section(c, b->name) || section_has_entry(c, b->name, c->n_entries)) continue; /* told above */
    all = collect(all, kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                                       "%s: unknown section [%s] (kiln config --help lists them)", b->origin,
                                       b->name));
  }
  return all;
}

void kiln_config_each_undeclared(const kiln_config *c, void (*fn)(const char *section, void *user),
                                 void *user) {
  for (size_t i = 0; i < c->n_entries; i++) {
    const char *name = c->entries[i].section;
    if (!find_section(c, name) && !section_has_entry(c, name, i)) fn(name, user);
  }
  /* a plugin's section with no key in the file ([cuda-batched] alone) is
   * declared too, so it is known rather than unknown */
  for (size_t i = 0; i < c->n_bare; i++) {
    const char *name = c->bare[i].name;
    if (find_section(c, name) || section_has_entry(c, name, c->n_entries)) continue;
    bool seen = false;
    for (size_t j = 0; j < i && !seen; j++) seen = strcmp(c->bare[j].name, name) == 0;
    if (!seen) fn(name, user);
  }
}

const kiln_config_section *kiln_config_section_get(const kiln_config *c, const char *name) {
  return find_section(c, name);
}

/* The value text of `key`, whose declared type must be in `mask` (bits of
 * kiln_config_type). */
static const char *get_typed(const kiln_config_section *s, const char *key, unsigned mask,
                             const char *want) {
  if (!s) return NULL;
  uint32_t i;
  const kiln_config_key *k = find_key(s, key, &i);
  if (!k || !(mask & (1u << k->type))) {
    fprintf(stderr, "kiln: internal error: config [%s] %s read as %s, declared %s\n", s->name, key,
            want, k ? type_name(k->type) : "nowhere");
    return NULL;
  }
  return s->values[i];
}

#define TYPE_BIT(t) (1u << (t))

bool kiln_config_has_key(const kiln_config_section *s, const char *key) { return s && find_key(s, key, NULL); }

const char *kiln_config_get_str(const kiln_config_section *s, const char *key) {
  return get_typed(s, key,
                   TYPE_BIT(KILN_CONFIG_STRING) | TYPE_BIT(KILN_CONFIG_PATH) | TYPE_BIT(KILN_CONFIG_ENUM),
                   "string");
}

int64_t kiln_config_get_int(const kiln_config_section *s, const char *key) {
  const char *v = get_typed(s, key, TYPE_BIT(KILN_CONFIG_INT), "int");
  return v ? strtoll(v, NULL, 10) : 0;
}

double kiln_config_get_float(const kiln_config_section *s, const char *key) {
  const char *v = get_typed(s, key, TYPE_BIT(KILN_CONFIG_FLOAT), "float");
  return v ? strtod(v, NULL) : 0.0;
}

bool kiln_config_get_bool(const kiln_config_section *s, const char *key) {
  const char *v = get_typed(s, key, TYPE_BIT(KILN_CONFIG_BOOL), "bool");
  return v && parse_bool(v) == 1;
}

const char *kiln_config_origin(const kiln_config_section *s, const char *key) {
  uint32_t i;
  if (!s || !find_key(s, key, &i)) return NULL;
  return s->origins[i] ? s->origins[i] : "unset";
}

const char *kiln_config_file(const kiln_config *c) { return c->file; }

static void print_range(const kiln_config_key *k, FILE *out) {
  switch (k->type) {
  case KILN_CONFIG_INT: fprintf(out, "int %.0f..%.0f", k->min, k->max); break;
  case KILN_CONFIG_FLOAT: fprintf(out, "float %g..%g", k->min, k->max); break;
  case KILN_CONFIG_ENUM: fprintf(out, "one of %s", k->choices); break;
  default: fputs(type_name(k->type), out); break;
  }
}

void kiln_config_print_help(const kiln_config *c, FILE *out) {
  for (size_t i = 0; i < c->n_sections; i++) {
    const kiln_config_section *s = c->sections[i];
    fprintf(out, "[%s]\n", s->name);
    for (uint32_t j = 0; j < s->n_keys; j++) {
      const kiln_config_key *k = &s->keys[j];
      fprintf(out, "  %-16s ", k->name);
      print_range(k, out);
      fprintf(out, ", default %s\n      %s\n", k->default_value ? k->default_value : "(unset)", k->help);
    }
    fputc('\n', out);
  }
}

void kiln_config_print(const kiln_config *c, FILE *out) {
  for (size_t i = 0; i < c->n_sections; i++) {
    const kiln_config_section *s = c->sections[i];
    fprintf(out, "[%s]\n", s->name);
    for (uint32_t j = 0; j < s->n_keys; j++) {
      /* values and origins (file paths) come from files and the
       * environment: escaped for the terminal (kiln/escape.h) */
      const char *v = s->values[j] ? s->values[j] : "", *o = s->origins[j] ? s->origins[j] : "unset";
      fprintf(out, "%s = ", s->keys[j].name);
      kiln_fput_escaped(out, v, strlen(v), 0);
      fputs("    ; ", out);
      kiln_fput_escaped(out, o, strlen(o), 0);
      fputc('\n', out);
    }
    fputc('\n', out);
  }
}
