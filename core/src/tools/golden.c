/* Golden-set files: INI through inih, with C-escaped strings. */
#include "config.h"

#include "kiln/golden.h"
#include "../base/ini_section.h"
#include "../base/open_regular.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* The keys of a case, and the line each was given on (0: not given), so
 * that an error about a key names the key's own line. */
enum { K_PROMPT, K_TEXT, K_IDS, K_PROMPT_IDS, K_TOP, K_CHAT, K_N, N_KEYS };
static const char *const key_names[N_KEYS] = {"prompt", "text", "ids", "prompt_ids", "top", "chat", "n"};
typedef struct case_lines {
  int key[N_KEYS];
} case_lines;

typedef struct parse {
  kiln_golden *g;
  FILE *f;
  int line;
  kiln_status err;
  case_lines *lines;   /* one per case of g */
  char last_key[32];   /* the key an indented line continues (inih multi-line) */
  bool indented;       /* the current line starts with blanks */
  /* A [section] line read and not yet turned into a case (see reader):
   * inih hands the handler only keys, and the same name twice in a row
   * would otherwise read as one case. */
  int header_line;     /* 0: none waiting */
  char header[128];
} parse;

static kiln_status add_case(parse *p, const char *name, int line);

/* The waiting [section] line had no key under it: a case all the same,
 * which the checks after parsing find empty. */
static void flush_header(parse *p) {
  if (!p->header_line) return;
  int line = p->header_line;
  p->header_line = 0;
  if (!p->err) p->err = add_case(p, p->header, line);
}

/* Notes a line inih will take as a section header (ini_section.h; an
 * indented line after a key continues its value). */
static void note_header(parse *p, const char *line) {
  char name[sizeof p->header];
  if (!kiln__ini_section_line(line, p->line, p->last_key[0] != 0, name, sizeof name)) return;
  flush_header(p);
  memcpy(p->header, name, sizeof name);
  p->header_line = p->line;
  p->last_key[0] = 0;
}

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
  p->indented = kiln__ini_indented(buf);
  note_header(p, buf);
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

/* Whether s[0..n) is a whole decimal number as make_golden.py's %.9g
 * writes one: a sign, digits, a '.' only with digits after it, an
 * exponent only with digits. A value cut short ("9.", "1e", "-") is not. */
static bool whole_number(const char *s, size_t n) {
  size_t i = 0, d = 0;
  if (i < n && (s[i] == '-' || s[i] == '+')) i++;
  for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) d++;
  if (i < n && s[i] == '.') {
    size_t f = 0;
    for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) f++;
    if (!f) return false;
    d += f;
  }
  if (!d) return false;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    size_t e = 0;
    if (++i < n && (s[i] == '-' || s[i] == '+')) i++;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) e++;
    if (!e) return false;
  }
  return i == n;
}

/* `top` pairs id:logit, blank-separated; an indented line continues the
 * list. Every entry must be whole: a list cut short inside an entry is an
 * error, not the entries before it. */
static kiln_status parse_top(kiln_golden_case *c, const char *v, bool cont) {
  if (!cont) c->n_top = 0;
  for (const char *p = v;;) {
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) break;
    size_t len = strcspn(p, " \t");
    const char *colon = memchr(p, ':', len);
    size_t id_len = colon ? (size_t)(colon - p) : len;
    bool id_ok = id_len > 0 && id_len <= 10 && strspn(p, "0123456789") == id_len;
    long long id = id_ok ? strtoll(p, NULL, 10) : -1;
    if (!colon || !id_ok || id > INT32_MAX || !whole_number(colon + 1, len - id_len - 1))
      return kiln_status_new(KILN_STATUS_MALFORMED, "entry %d \"%.*s\" is not a whole id:logit pair", c->n_top + 1,
                             (int)(len > 40 ? 40 : len), p);
    errno = 0;
    float logit = strtof(colon + 1, NULL);
    if (errno == ERANGE || !isfinite(logit))
      return kiln_status_new(KILN_STATUS_MALFORMED, "entry %d \"%.*s\": the logit is not a finite float",
                             c->n_top + 1, (int)(len > 40 ? 40 : len), p);
    if (c->n_top == KILN_GOLDEN_MAX_TOP)
      return kiln_status_new(KILN_STATUS_MALFORMED, "more than %d pairs", KILN_GOLDEN_MAX_TOP);
    c->top_id[c->n_top] = (int32_t)id;
    c->top_logit[c->n_top++] = logit;
    p += len;
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

static kiln_status add_case(parse *p, const char *name, int line) {
  kiln_golden *g = p->g;
  for (size_t i = 0; i < g->n_cases; i++)
    if (!strcmp(g->cases[i].name, name))
      return kiln_status_new(KILN_STATUS_MALFORMED, "%s:%d: case [%s] is defined twice (first at line %d)", g->path,
                             line, name, g->cases[i].line);
  kiln_golden_case *cs = realloc(g->cases, (g->n_cases + 1) * sizeof *cs);
  if (cs) g->cases = cs;
  case_lines *ls = cs ? realloc(p->lines, (g->n_cases + 1) * sizeof *ls) : NULL;
  if (ls) p->lines = ls;
  if (!cs || !ls) return kiln_status_new(KILN_STATUS_NO_MEMORY, "golden cases");
  memset(&cs[g->n_cases], 0, sizeof *cs);
  memset(&ls[g->n_cases], 0, sizeof *ls);
  cs[g->n_cases].line = line;
  if (!(cs[g->n_cases].name = strdup(name))) return kiln_status_new(KILN_STATUS_NO_MEMORY, "golden cases");
  g->n_cases++;
  return NULL;
}

static kiln_status on_key(parse *p, kiln_golden_case *c, case_lines *ls, const char *key, const char *v) {
  int k = 0;
  while (k < N_KEYS && strcmp(key, key_names[k]) != 0) k++;
  if (k == N_KEYS) return kiln_status_new(KILN_STATUS_MALFORMED, "unknown key \"%s\"", key);
  /* inih hands an indented line after a key to us as that key again */
  bool cont = p->indented && strcmp(key, p->last_key) == 0;
  snprintf(p->last_key, sizeof p->last_key, "%s", key);
  if (!cont && ls->key[k])
    return kiln_status_new(KILN_STATUS_MALFORMED, "set twice (first at line %d)", ls->key[k]);
  if (!cont) ls->key[k] = p->line;
  switch (k) {
  case K_PROMPT: return string_key(v, cont, &c->prompt, &c->prompt_len);
  case K_TEXT: return string_key(v, cont, &c->text, &c->text_len);
  case K_IDS: return ids_key(v, cont, &c->ids, &c->n_ids);
  case K_PROMPT_IDS: return ids_key(v, cont, &c->prompt_ids, &c->n_prompt_ids);
  case K_TOP: return parse_top(c, v, cont);
  case K_CHAT:
    if (cont) return kiln_status_new(KILN_STATUS_MALFORMED, "takes one value (an indented line continues it)");
    if (!strcasecmp(v, "true")) c->chat = true;
    else if (!strcasecmp(v, "false")) c->chat = false;
    else return kiln_status_new(KILN_STATUS_MALFORMED, "must be true or false");
    return NULL;
  case K_N: {
    if (cont) return kiln_status_new(KILN_STATUS_MALFORMED, "takes one value (an indented line continues it)");
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (end == v || *end || errno || n < 1 || n > 65536) return kiln_status_new(KILN_STATUS_MALFORMED, "must be 1..65536");
    c->n = (int32_t)n;
    return NULL;
  }
  }
  return kiln_status_new(KILN_STATUS_INTERNAL, "golden key %d", k);
}

static int handler(void *user, const char *section, const char *key, const char *value) {
  parse *p = user;
  if (p->err) return 0;
  kiln_golden *g = p->g;
  if (!key) return 1; /* a library built to report section lines: the reader has them */
  if (!*section) {
    p->err = kiln_status_new(KILN_STATUS_MALFORMED, "%s:%d: \"%s\" is outside any [case] section", g->path, p->line,
                             key);
    return 0;
  }
  if (p->header_line) { /* the first key under a [section] line: a new case */
    int line = p->header_line;
    p->header_line = 0;
    if ((p->err = add_case(p, section, line))) return 0;
  }
  if (!g->n_cases || strcmp(g->cases[g->n_cases - 1].name, section) != 0) {
    /* ini_section.h and inih disagree on a line: never a key in the wrong case */
    p->err = kiln_status_new(KILN_STATUS_INTERNAL, "%s:%d: [%s] %s: its section's line was not seen", g->path,
                             p->line, section, key);
    return 0;
  }
  kiln_status st = on_key(p, &g->cases[g->n_cases - 1], &p->lines[g->n_cases - 1], key, value);
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
  parse p = {.g = g, .f = f};
  int rc = ini_parse_stream(reader, &p, handler, &p);
  flush_header(&p);
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
    else if (c->n_ids > (size_t)c->n) /* the ids overflow n: at their line, naming n's */
      st = kiln_status_new(KILN_STATUS_MALFORMED, "%s:%d: case [%s] lists %zu ids but n = %d (line %d)", path,
                           p.lines[i].key[K_IDS], c->name, c->n_ids, c->n, p.lines[i].key[K_N]);
  }
  free(p.lines);
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
