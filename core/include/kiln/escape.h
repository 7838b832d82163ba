/*
 * kiln/escape.h — text from a file made safe to print on a terminal.
 *
 * A GGUF's metadata, a configuration value or a cache entry can hold any
 * bytes, and a terminal acts on control bytes (ESC [ ... rewrites the
 * screen, a title sequence runs in some). Every command that echoes such
 * text prints it through these: printable ASCII and well-formed UTF-8 stay
 * as they are; every C0 control byte (0x00-0x1f), DEL (0x7f), C1 control
 * (U+0080-U+009F, which terminals take as 8-bit escapes) and byte that is
 * not part of well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, at
 * most U+10FFFF) is written as an escape: \n \r \t as C spells them, a C1
 * control as \u0085, any other byte as \xNN; and a backslash as \\, so the
 * result reads back unambiguously.
 */
#ifndef KILN_ESCAPE_H
#define KILN_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Flags for kiln_escape(). */
enum {
  /* Keep '\n' as a line break (a multi-line message). */
  KILN_ESCAPE_KEEP_NEWLINE = 1,
  /* Leave '\\' alone (a message whose quotes are already escaped, such as
   * the GGUF reader's 'key\x1b'). */
  KILN_ESCAPE_KEEP_BACKSLASH = 2,
  /* Write '"' as \" (text shown between double quotes). */
  KILN_ESCAPE_QUOTE = 4
};

/* Writes the escaped form of s[0..n) to buf, NUL-terminated, truncated at
 * a whole escape to fit cap bytes (cap 0: nothing written). Returns the
 * length of the whole escaped form, without the NUL, as snprintf does. */
size_t kiln_escape(char *buf, size_t cap, const char *s, size_t n, unsigned flags);

/* Writes the escaped form of s[0..n) to out. Returns its length in bytes. */
size_t kiln_fput_escaped(FILE *out, const char *s, size_t n, unsigned flags);

/* Room kiln_quote needs for at most `max` bytes of text: 4 characters a
 * byte at worst (\xNN), two quotes, "..." and the NUL. */
#define KILN_QUOTE_CAP(max) (4 * (size_t)(max) + 6)

/* A value from a file, for an error message: s[0..n) between double
 * quotes, escaped (KILN_ESCAPE_QUOTE: an embedded NUL reads \x00, a quote
 * \"), and cut after at most `max` bytes of s (at a character boundary)
 * with "..." before the closing quote. Every message that quotes a file's
 * string goes through this, so a value that holds a NUL or a control byte
 * is shown as the file holds it, not cut short by "%.*s" into another
 * value. Writes into buf (KILN_QUOTE_CAP(max) bytes never truncate) and
 * returns buf. */
const char *kiln_quote(char *buf, size_t cap, const char *s, size_t n, size_t max);

#ifdef __cplusplus
}
#endif
#endif /* KILN_ESCAPE_H */
