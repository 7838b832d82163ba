/* Golden-set files: INI through inih, with C-escaped strings. */
#include "config.h"

#include "kiln/golden.h"
#include "../base/open_regular.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

typedef struct parse {
  kiln_golden *g;
  FILE *f;
  int line;
  kiln_status err;
  char section[128];
  char last_key[32]; /* a key seen again continues its value (inih multi-line) */
} parse;

static char *reader(char *buf, int size, void *stream) {
  parse *p = stream;
  char *r = fgets(buf, size, p->f);
  if (!r) return NULL;
  p->line++;
  size_t n = strlen(buf);
  if (n == (size_t)size - 1 && buf[n - 1] != '\n' && !feof(p->f)) {
    if (!p->err)
      p->err = kiln_status_new(KILN_STATUS_MALFORMED,
                               "%s:%d: line longer than %d bytes (continue a value on an indented line)",
                               p->g->path, p->line, size - 2);
    return NULL;
  }
  return r;
}

/* Appends b[0..bn) to the malloc'd a[0..*an). */
static kiln_status append(char **a, size_t *an, const char *b, size_t bn) {
  char *s = realloc(*a, *an + bn + 1);
  if (!s) return kiln_status_new(KILN_STATUS_NO_MEMORY, "golden string");
  memcpy(s + *an, b, bn);
  *an += bn;
  s[*an] = 0;
  *a = s;
  return NULL;
}

/* "..." with C escapes -> bytes. */
static kiln_status unquote(const char *v, char **out, size_t *out_len) {
  size_t n = strlen(v);
  if (n < 2 || v[0] != '"' || v[n - 1] != '"') return kiln_status_new(KILN_STATUS_MALFORMED, "expected a \"quoted\" string");
  char *s = malloc(n);
  if (!s) return kiln_status_new(KILN_STATUS_NO_MEMORY, "golden string");
  size_t o = 0;
  for (size_t i = 1; i + 1 < n; i++) {
    if (v[i] != '\\') {
      s[o++] = v[i];
      continue;
    }
    if (++i + 1 >= n) {
      free(s);
      return kiln_status_new(KILN_STATUS_MALFORMED, "a string ends in a lone backslash");
    }
    switch (v[i]) {
    case 'n': s[o++] = '\n'; break;
    case 't': s[o++] = '\t'; break;
    case 'r': s[o++] = '\r'; break;
    case '"': s[o++] = '"'; break;
    case '\\': s[o++] = '\\'; break;
    case 'x': {
      unsigned x;
      if (i + 2 >= n - 1 || sscanf(v + i + 1, "%2x", &x) != 1) {
        free(s);
        return kiln_status_new(KILN_STATUS_MALFORMED, "bad \\x escape");
      }
      s[o++] = (char)x;
      i += 2;
      break;
    }
    default:
      free(s);
      return kiln_status_new(KILN_STATUS_MALFORMED, "unknown escape \\%c", v[i]);
    }
  }
  s[o] = 0;
  *out = s;
  *out_len = o;
  return NULL;
}

static kiln_status parse_ids(const char *v, int32_t **out, size_t *out_n) {
  size_t cap = 16, n = 0;
  int32_t *ids = malloc(cap * sizeof *ids);
  if (!ids) return kiln_status_new(KILN_STATUS_NO_MEMORY, "golden ids");
  for (const char *p = v;;) {
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) break;
    char *end;
    errno = 0;
    long x = strtol(p, &end, 10);
    if (end == p || errno || x < 0 || x > INT32_MAX || (*end && *end != ' ' && *end != '\t')) {
      free(ids);
      return kiln_status_new(KILN_STATUS_MALFORMED, "\"%.20s\" is not a token id", p);
    }
    if (n == cap) {
      int32_t *g = realloc(ids, 2 * cap * sizeof *ids);
      if (!g) {
        free(ids);
        return kiln_status_new(KILN_STATUS_NO_MEMORY, "golden ids");
      }
      ids = g;
      cap *= 2;
    }
    ids[n++] = (int32_t)x;
    p = end;
  }
  *out = ids;
  *out_n = n;
  return NULL;
}

static kiln_status parse_top(kiln_golden_case *c, const char *v) {
  c->n_top = 0;
  for (const char *p = v; *p;) {
    while (*p == ' ') p++;
    if (!*p) break;
    int id, used;
    float logit;
    if (sscanf(p, "%d:%f%n", &id, &logit, &used) != 2 || id < 0)
      return kiln_status_new(KILN_STATUS_MALFORMED, "top: expected id:logit pairs");
    if (c->n_top == KILN_GOLDEN_MAX_TOP)
      return kiln_status_new(KILN_STATUS_MALFORMED, "top: more than %d pairs", KILN_GOLDEN_MAX_TOP);
    c->top_id[c->n_top] = id;
    c->top_logit[c->n_top++] = logit;
    p += used;
  }
  return NULL;
}

/* A string key: the first line sets it, continuation lines append. */
static kiln_status string_key(const char *v, bool cont, char **s, size_t *n) {
  char *piece = NULL;
  size_t len = 0;
  KILN_RETURN_IF_ERROR(unquote(v, &piece, &len));
  if (!cont || !*s) {
    free(*s);
    *s = piece;
    *n = len;
    return NULL;
  }
  kiln_status st = append(s, n, piece, len);
  free(piece);
  return st;
}

/* An id list: continuation lines append. */
static kiln_status ids_key(const char *v, bool cont, int32_t **ids, size_t *n) {
  int32_t *more = NULL;
  size_t m = 0;
  KILN_RETURN_IF_ERROR(parse_ids(v, &more, &m));
  if (!cont || !*ids) {
    free(*ids);
    *ids = more;
    *n = m;
    return NULL;
  }
  int32_t *all = realloc(*ids, (*n + m) * sizeof *all);
  if (!all) {
    free(more);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "golden ids");
  }
  memcpy(all + *n, more, m * sizeof *more);
  *ids = all;
  *n += m;
  free(more);
  return NULL;
}

static kiln_status on_key(parse *p, kiln_golden_case *c, const char *key, const char *v) {
  bool cont = strcmp(key, p->last_key) == 0;
  snprintf(p->last_key, sizeof p->last_key, "%s", key);
  if (!strcmp(key, "prompt")) return string_key(v, cont, &c->prompt, &c->prompt_len);
  if (!strcmp(key, "text")) return string_key(v, cont, &c->text, &c->text_len);
  if (!strcmp(key, "ids")) return ids_key(v, cont, &c->ids, &c->n_ids);
  if (!strcmp(key, "prompt_ids")) return ids_key(v, cont, &c->prompt_ids, &c->n_prompt_ids);
  if (!strcmp(key, "top")) return parse_top(c, v);
  if (!strcmp(key, "chat")) {
    if (!strcasecmp(v, "true")) c->chat = true;
    else if (!strcasecmp(v, "false")) c->chat = false;
    else return kiln_status_new(KILN_STATUS_MALFORMED, "chat must be true or false");
    return NULL;
  }
  if (!strcmp(key, "n")) {
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < 1 || n > 65536) return kiln_status_new(KILN_STATUS_MALFORMED, "n must be 1..65536");
    c->n = (int32_t)n;
    return NULL;
  }
  return kiln_status_new(KILN_STATUS_MALFORMED, "unknown key \"%s\"", key);
}

static int handler(void *user, const char *section, const char *key, const char *value) {
  parse *p = user;
  if (p->err) return 0;
  kiln_golden *g = p->g;
  if (!*section) {
    p->err = kiln_status_new(KILN_STATUS_MALFORMED, "%s:%d: \"%s\" is outside any [case] section", g->path, p->line,
                             key ? key : "");
    return 0;
  }
  if (!g->n_cases || strcmp(section, p->section) != 0) {
    for (size_t i = 0; i < g->n_cases; i++)
      if (!strcmp(g->cases[i].name, section)) {
        p->err = kiln_status_new(KILN_STATUS_MALFORMED, "%s:%d: case [%s] is defined twice (first at line %d)",
                                 g->path, p->line, section, g->cases[i].line);
        return 0;
      }
    kiln_golden_case *cs = realloc(g->cases, (g->n_cases + 1) * sizeof *cs);
    if (!cs) {
      p->err = kiln_status_new(KILN_STATUS_NO_MEMORY, "golden cases");
      return 0;
    }
    g->cases = cs;
    memset(&cs[g->n_cases], 0, sizeof *cs);
    cs[g->n_cases].name = strdup(section);
    cs[g->n_cases].line = p->line;
    g->n_cases++;
    p->last_key[0] = 0;
    snprintf(p->section, sizeof p->section, "%s", section);
  }
  if (!key) return 1;
  kiln_status st = on_key(p, &g->cases[g->n_cases - 1], key, value);
  if (st) p->err = kiln_status_annotate(st, "%s:%d: [%s] %s", g->path, p->line, section, key);
  return st ? 0 : 1;
}

kiln_status kiln_golden_load(const char *path, kiln_golden **out_golden) {
  *out_golden = NULL;
  struct stat sb;
  FILE *f;
  int r = kiln__fopen_regular(path, "r", &sb, &f);
  if (r == -2) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: not a regular file", path);
  if (r < 0) return kiln_status_new(KILN_STATUS_NOT_FOUND, "%s: %s", path, strerror(errno));
  kiln_golden *g = calloc(1, sizeof *g);
  if (!g) {
    fclose(f);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "golden set");
  }
  g->path = strdup(path);
  parse p = {g, f, 0, NULL, "", ""};
  int rc = ini_parse_stream(reader, &p, handler, &p);
  fclose(f);
  kiln_status st = p.err;
  if (!st && rc > 0) st = kiln_status_new(KILN_STATUS_MALFORMED, "%s:%d: syntax error", path, rc);
  if (!st && rc < 0) st = kiln_status_new(KILN_STATUS_IO, "%s: cannot read", path);
  if (!st && g->n_cases == 0) st = kiln_status_new(KILN_STATUS_MALFORMED, "%s: no [case] sections", path);
  for (size_t i = 0; !st && i < g->n_cases; i++) {
    kiln_golden_case *c = &g->cases[i];
    const char *missing = !c->prompt ? "prompt" : !c->n ? "n" : !c->ids ? "ids" : NULL;
    if (missing)
      st = kiln_status_new(KILN_STATUS_MALFORMED, "%s:%d: case [%s] has no %s", path, c->line, c->name, missing);
    else if (c->n_ids > (size_t)c->n)
      st = kiln_status_new(KILN_STATUS_MALFORMED, "%s:%d: case [%s] lists %zu ids but n = %d", path, c->line,
                           c->name, c->n_ids, c->n);
  }
  if (st) {
    kiln_golden_free(g);
    return st;
  }
  *out_golden = g;
  return NULL;
}

void kiln_golden_free(kiln_golden *g) {
  if (!g) return;
  for (size_t i = 0; i < g->n_cases; i++) {
    kiln_golden_case *c = &g->cases[i];
    free(c->name);
    free(c->prompt);
    free(c->prompt_ids);
    free(c->ids);
    free(c->text);
  }
  free(g->cases);
  free(g->path);
  free(g);
}
