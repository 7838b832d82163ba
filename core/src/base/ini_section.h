/* Which lines inih takes as a [section] header, for the two readers that
 * must see them (the configuration and the golden sets): Debian's libinih
 * calls the handler only for keys (it is built without
 * INI_CALL_HANDLER_ON_NEW_SECTION), so a reader notes section lines itself
 * and has to agree with inih on every one of them, or a key lands in a
 * section the reader never saw open. inih (ini.c, ini_parse_stream) skips
 * a UTF-8 BOM on the first line and isspace() blanks; an indented line
 * after a key continues that key's value (INI_ALLOW_MULTILINE), whatever
 * it holds; otherwise '[' NAME ']' is a section, and a '[' without ']' is
 * its syntax error.
 * Header-only: every build that compiles a reader gets it. */
#ifndef KILN_INI_SECTION_H
#define KILN_INI_SECTION_H

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

/* Whether `line` (line number line_no, from 1) is a section header to
 * inih, after_key saying whether a key was read since the last section
 * (inih's prev_name); if so its name, cut to cap - 1 bytes, into name. */
static inline bool kiln__ini_section_line(const char *line, int line_no, bool after_key, char *name,
                                          size_t cap) {
  const char *p = line;
  if (line_no == 1 && !strncmp(p, "\xEF\xBB\xBF", 3)) p += 3;
  while (*p && isspace((unsigned char)*p)) p++;
  if (after_key && *p && p > line) return false; /* a continuation */
  const char *end = *p == '[' ? strchr(p + 1, ']') : NULL;
  if (!end || !cap) return false;
  size_t n = (size_t)(end - p - 1);
  if (n >= cap) n = cap - 1;
  memcpy(name, p + 1, n);
  name[n] = '\0';
  return true;
}

/* Whether inih would take `line`, after a key, as that key's continuation:
 * it starts with an isspace() byte (blank lines give the handler nothing). */
static inline bool kiln__ini_indented(const char *line) { return isspace((unsigned char)line[0]) != 0; }

#endif
