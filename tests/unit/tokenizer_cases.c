#include "config.h"

#include "tokenizer_cases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/status.h"

static char *slurp(const char *path, size_t *out_len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  size_t r;
  while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n == cap) {
      cap *= 2;
      char *b = realloc(buf, cap + 1);
      if (!b) {
        free(buf);
        buf = NULL;
      }
      buf = b;
    }
  }
  fclose(f);
  if (buf) buf[n] = '\0';
  *out_len = n;
  return buf;
}

static bool push_case(tk_cases *c, tk_case k) {
  tk_case *v = realloc(c->v, (c->n + 1) * sizeof *v);
  if (!v) return false;
  c->v = v;
  c->v[c->n++] = k;
  return true;
}

/* Space-separated decimal ids in s[0..n). */
static bool parse_ids(const char *s, size_t n, int32_t **out, size_t *out_n) {
  int32_t *ids = malloc((n / 2 + 1) * sizeof *ids);
  size_t k = 0;
  size_t i = 0;
  while (i < n) {
    while (i < n && (s[i] == ' ' || s[i] == '\r')) i++;
    if (i == n) break;
    char *end;
    long x = strtol(s + i, &end, 10);
    if (end == s + i || x < 0 || x > INT32_MAX) {
      free(ids);
      return false;
    }
    ids[k++] = (int32_t)x;
    i = (size_t)(end - s);
  }
  *out = ids;
  *out_n = k;
  return true;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Hex digits s[0..n) to bytes (NUL-terminated for printing). */
static bool parse_hex(const char *s, size_t n, char **out, size_t *out_len) {
  if (n % 2) return false;
  char *b = malloc(n / 2 + 1);
  for (size_t i = 0; i < n / 2; i++) {
    int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      free(b);
      return false;
    }
    b[i] = (char)(hi * 16 + lo);
  }
  b[n / 2] = '\0';
  *out = b;
  *out_len = n / 2;
  return true;
}

bool tk_read_ids_file(const char *path, tk_cases *out) {
  memset(out, 0, sizeof *out);
  size_t len;
  char *buf = slurp(path, &len);
  if (!buf) return false;
  bool ok = true;
  int lineno = 0;
  for (char *line = buf; ok && line < buf + len;) {
    char *nl = memchr(line, '\n', (size_t)(buf + len - line));
    char *end = nl ? nl : buf + len;
    lineno++;
    if (end > line && line[0] != '#') {
      char *t1 = memchr(line, '\t', (size_t)(end - line));
      char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(end - t1 - 1)) : NULL;
      char *t3 = t2 ? memchr(t2 + 1, '\t', (size_t)(end - t2 - 1)) : NULL;
      char *t4 = t3 ? memchr(t3 + 1, '\t', (size_t)(end - t3 - 1)) : NULL;
      if (!t4) {
        fprintf(stderr, "%s:%d: expected 5 tab-separated fields\n", path, lineno);
        ok = false;
        break;
      }
      tk_case k;
      memset(&k, 0, sizeof k);
      k.line = lineno;
      for (char *f = line; f < t1; f++) {
        if (*f == 'b') k.flags |= KILN_TOKENIZE_ADD_BOS;
        else if (*f == 's') k.flags |= KILN_TOKENIZE_PARSE_SPECIAL;
        else if (*f != '-') ok = false;
      }
      ok = ok && parse_hex(t1 + 1, (size_t)(t2 - t1 - 1), &k.text, &k.len);
      ok = ok && parse_hex(t3 + 1, (size_t)(t4 - t3 - 1), &k.decoded, &k.decoded_len);
      if (ok) ok = parse_ids(t2 + 1, (size_t)(t3 - t2 - 1), &k.ids, &k.n_ids);
      if (!ok) {
        fprintf(stderr, "%s:%d: malformed case\n", path, lineno);
        free(k.text);
        free(k.decoded);
        break;
      }
      ok = push_case(out, k);
    }
    line = end + 1;
  }
  free(buf);
  if (!ok) tk_cases_free(out);
  return ok;
}

bool tk_read_llama_pair(const char *inp_path, const char *out_path, tk_cases *out) {
  memset(out, 0, sizeof *out);
  size_t ilen, olen;
  char *in = slurp(inp_path, &ilen);
  char *ou = in ? slurp(out_path, &olen) : NULL;
  if (!in || !ou) {
    free(in);
    free(ou);
    return false;
  }
  static const char sep[] = "\n__ggml_vocab_test__\n";
  const size_t seplen = sizeof sep - 1;
  bool ok = true;
  /* Inputs, as read_tests(): cut at each separator; text after the last
   * one is a final input only if non-empty. */
  size_t pos = 0;
  while (ok && pos < ilen) {
    const char *next = NULL;
    for (size_t i = pos; i + seplen <= ilen; i++)
      if (in[i] == '\n' && memcmp(in + i, sep, seplen) == 0) {
        next = in + i;
        break;
      }
    size_t end = next ? (size_t)(next - in) : ilen;
    tk_case k;
    memset(&k, 0, sizeof k);
    k.len = end - pos;
    k.text = malloc(k.len + 1);
    memcpy(k.text, in + pos, k.len);
    k.text[k.len] = '\0';
    k.line = (int)out->n + 1; /* the case's line in the .out file */
    ok = push_case(out, k);
    pos = next ? end + seplen : ilen;
  }
  /* Outputs: one line each. */
  size_t line = 0;
  for (size_t p = 0; ok && p < olen;) {
    const char *nl = memchr(ou + p, '\n', olen - p);
    size_t e = nl ? (size_t)(nl - ou) : olen;
    if (line >= out->n) {
      fprintf(stderr, "%s: more lines than %s has inputs\n", out_path, inp_path);
      ok = false;
      break;
    }
    ok = parse_ids(ou + p, e - p, &out->v[line].ids, &out->v[line].n_ids);
    line++;
    p = e + 1;
  }
  if (ok && line != out->n) {
    fprintf(stderr, "%s: %zu lines for %zu inputs\n", out_path, line, out->n);
    ok = false;
  }
  free(in);
  free(ou);
  if (!ok) tk_cases_free(out);
  return ok;
}

void tk_cases_free(tk_cases *c) {
  for (size_t i = 0; i < c->n; i++) {
    free(c->v[i].text);
    free(c->v[i].ids);
    free(c->v[i].decoded);
  }
  free(c->v);
  memset(c, 0, sizeof *c);
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
  fprintf(stderr, "  %s:", label);
  for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", (int)ids[i]);
  fprintf(stderr, "\n");
}

size_t tk_check_cases(const kiln_vocab *v, const tk_cases *c, const char *what) {
  size_t good = 0;
  for (size_t i = 0; i < c->n; i++) {
    const tk_case *k = &c->v[i];
    int32_t *ids = NULL;
    size_t n = 0;
    kiln_status st = kiln_tokenize(v, k->text, k->len, k->flags, &ids, &n);
    if (st) {
      fprintf(stderr, "%s case %d: %s\n", what, k->line, kiln_status_message(st));
      kiln_status_free(st);
      continue;
    }
    bool same = n == k->n_ids && (n == 0 || memcmp(ids, k->ids, n * sizeof *ids) == 0);
    if (same) {
      good++;
    } else {
      fprintf(stderr, "%s case %d (flags %d) mismatch for \"%s\"\n", what, k->line, k->flags, k->text);
      print_ids("want", k->ids, k->n_ids);
      print_ids("got ", ids, n);
    }
    free(ids);
  }
  return good;
}

static bool valid_utf8(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    unsigned char b = u[i];
    size_t k = b < 0x80 ? 1 : b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3
             : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    if (!k || i + k > n) return false;
    uint32_t cp = k == 1 ? b : k == 2 ? b & 0x1Fu : k == 3 ? b & 0x0Fu : b & 0x07u;
    for (size_t j = 1; j < k; j++) {
      if ((u[i + j] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (u[i + j] & 0x3Fu);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += k;
  }
  return true;
}

size_t tk_check_roundtrip(const kiln_vocab *v, const tk_cases *c, const char *what,
                          size_t *out_bad) {
  size_t checked = 0;
  *out_bad = 0;
  for (size_t i = 0; i < c->n; i++) {
    const tk_case *k = &c->v[i];
    if (!valid_utf8(k->text, k->len)) continue;
    /* SentencePiece puts a "▁" before text that follows a special token,
     * which decoding cannot tell from a typed space: those cases cannot
     * round-trip and are left out. */
    bool special = (k->flags & KILN_TOKENIZE_PARSE_SPECIAL) != 0;
    if (special && kiln_vocab_kind_of(v) == KILN_VOCAB_SPM) continue;
    int32_t *ids = NULL;
    size_t n = 0;
    char *text = NULL;
    size_t len = 0;
    /* Without BOS: a rendered "<s>" in front is not part of the text. */
    kiln_status st = kiln_tokenize(v, k->text, k->len, k->flags & ~KILN_TOKENIZE_ADD_BOS, &ids, &n);
    if (!st) st = kiln_detokenize(v, ids, n, special, &text, &len);
    checked++;
    if (st || len != k->len || memcmp(text, k->text, len) != 0) {
      (*out_bad)++;
      fprintf(stderr, "%s case %d: decode(encode(\"%s\")) = \"%s\" %s\n", what, k->line, k->text,
              text ? text : "", kiln_status_message(st));
    }
    kiln_status_free(st);
    free(ids);
    free(text);
  }
  return checked;
}

size_t tk_check_decode(const kiln_vocab *v, const tk_cases *c, const char *what,
                       size_t *out_bad) {
  size_t checked = 0;
  *out_bad = 0;
  for (size_t i = 0; i < c->n; i++) {
    const tk_case *k = &c->v[i];
    if (!k->decoded) continue;
    /* After a leading BOS kiln takes SentencePiece's space off the next
     * piece where llama.cpp does not (see detokenize.c). */
    if (kiln_vocab_kind_of(v) == KILN_VOCAB_SPM && k->n_ids > 0 && k->ids[0] == kiln_vocab_bos(v))
      continue;
    char *text = NULL;
    size_t len = 0;
    bool special = (k->flags & KILN_TOKENIZE_PARSE_SPECIAL) != 0;
    kiln_status st = kiln_detokenize(v, k->ids, k->n_ids, special, &text, &len);
    checked++;
    if (st || len != k->decoded_len || memcmp(text, k->decoded, len) != 0) {
      (*out_bad)++;
      fprintf(stderr, "%s case %d: detokenize gave \"%s\", llama.cpp \"%s\" %s\n", what, k->line,
              text ? text : "", k->decoded, kiln_status_message(st));
    }
    kiln_status_free(st);
    free(text);
  }
  return checked;
}

char *tk_data_path(const char *name) {
  const char *src = getenv("KILN_SRCDIR");
  if (!src || !*src) {
    fprintf(stderr, "KILN_SRCDIR is not set\n");
    return NULL;
  }
  size_t n = strlen(src) + strlen(name) + 32;
  char *p = malloc(n);
  snprintf(p, n, "%s/tests/data/tokenizer/%s", src, name);
  return p;
}
