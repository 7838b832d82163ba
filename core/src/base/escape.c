/* Escaping file text for the terminal (kiln/escape.h). */
#include "config.h"

#include "kiln/escape.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Length of the well-formed UTF-8 sequence at s[0..n) (RFC 3629, table 3-7
 * of the Unicode standard), or 0 when s does not start one. */
static size_t utf8_len(const unsigned char *s, size_t n, uint32_t *out_cp) {
  unsigned char c = s[0];
  size_t len;
  uint32_t cp, min;
  if (c < 0x80) {
    *out_cp = c;
    return 1;
  } else if (c >= 0xc2 && c <= 0xdf) {
    len = 2, cp = c & 0x1f, min = 0x80;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3, cp = c & 0x0f, min = 0x800;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (len > n) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  *out_cp = cp;
  return len;
}

/* The escape for the sequence at s (one byte, or a C1 control's two), in
 * out (room for 8), or "" when it is printed as it is; *out_len: the
 * bytes of s it covers. */
static void escape_one(const unsigned char *s, size_t n, unsigned flags, char out[8],
                       size_t *out_len) {
  static const char hex[] = "0123456789abcdef";
  uint32_t cp;
  size_t len = utf8_len(s, n, &cp);
  out[0] = '\0';
  if (!len) {
    *out_len = 1;
    snprintf(out, 8, "\\x%c%c", hex[s[0] >> 4], hex[s[0] & 15]);
    return;
  }
  *out_len = len;
  if (cp == '\n' && (flags & KILN_ESCAPE_KEEP_NEWLINE)) return;
  if (cp == '"' && (flags & KILN_ESCAPE_QUOTE)) {
    memcpy(out, "\\\"", 3);
  } else if (cp == '\\') {
    if (!(flags & KILN_ESCAPE_KEEP_BACKSLASH)) memcpy(out, "\\\\", 3);
  } else if (cp == '\n') {
    memcpy(out, "\\n", 3);
  } else if (cp == '\r') {
    memcpy(out, "\\r", 3);
  } else if (cp == '\t') {
    memcpy(out, "\\t", 3);
  } else if (cp < 0x20 || cp == 0x7f) {
    snprintf(out, 8, "\\x%c%c", hex[cp >> 4], hex[cp & 15]);
  } else if (cp >= 0x80 && cp <= 0x9f) {
    snprintf(out, 8, "\\u%04x", (unsigned)cp);
  }
}

size_t kiln_escape(char *buf, size_t cap, const char *s, size_t n, unsigned flags) {
  const unsigned char *u = (const unsigned char *)s;
  size_t total = 0, kept = 0;
  bool cut = false;
  for (size_t at = 0; at < n;) {
    char esc[8];
    size_t len;
    escape_one(u + at, n - at, flags, esc, &len);
    const char *piece = esc[0] ? esc : s + at;
    size_t plen = esc[0] ? strlen(esc) : len;
    if (!cut && kept + plen < cap) {
      memcpy(buf + kept, piece, plen);
      kept += plen;
    } else {
      cut = true; /* nothing after a piece that did not fit */
    }
    total += plen;
    at += len;
  }
  if (cap) buf[kept] = '\0';
  return total;
}

size_t kiln_fput_escaped(FILE *out, const char *s, size_t n, unsigned flags) {
  const unsigned char *u = (const unsigned char *)s;
  size_t total = 0, at = 0, plain = 0; /* plain: the run of bytes printed as they are */
  while (at < n) {
    char esc[8];
    size_t len;
    escape_one(u + at, n - at, flags, esc, &len);
    if (!esc[0]) {
      at += len;
      continue;
    }
    fwrite(s + plain, 1, at - plain, out);
    fputs(esc, out);
    total += (at - plain) + strlen(esc);
    at += len;
    plain = at;
  }
  fwrite(s + plain, 1, at - plain, out);
  return total + (at - plain);
}

const char *kiln_quote(char *buf, size_t cap, const char *s, size_t n, size_t max) {
  size_t shown = n;
  if (n > max) {
    shown = max;
    /* back off to the start of a UTF-8 sequence, so the cut itself does
     * not show as a stray \xNN */
    for (int k = 0; k < 3 && shown > 0 && ((unsigned char)s[shown] & 0xc0) == 0x80; k++) shown--;
  }
  const char *tail = shown < n ? "...\"" : "\"";
  const size_t tail_len = strlen(tail);
  if (cap < tail_len + 2) { /* no room for even the quotes */
    if (cap) buf[0] = '\0';
    return buf;
  }
  buf[0] = '"';
  /* the text gets what the quotes and the tail leave; kiln_escape cuts
   * at a whole escape */
  kiln_escape(buf + 1, cap - 1 - tail_len, s, shown, KILN_ESCAPE_QUOTE);
  strcat(buf, tail);
  return buf;
}
