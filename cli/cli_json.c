/* JSON output (--json) through jansson. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

/* Length of the valid UTF-8 sequence at s[0..n), or 0 (RFC 3629: no
 * overlongs, no surrogates, nothing above U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (!len || len > n) return 0;
  for (size_t i = 1; i < len; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  if (c == 0xe0 && s[1] < 0xa0) return 0;
  if (c == 0xed && s[1] > 0x9f) return 0;
  if (c == 0xf0 && s[1] < 0x90) return 0;
  if (c == 0xf4 && s[1] > 0x8f) return 0;
  return len;
}

json_t *cli_json_text(const char *text, size_t len) {
  const unsigned char *s = (const unsigned char *)text;
  char *buf = malloc(3 * len + 1); /* each bad byte becomes 3 bytes */
  if (!buf) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < len;) {
    size_t k = utf8_seq(s + i, len - i);
    if (k == 0) {
      buf[o++] = (char)0xef; /* U+FFFD */
      buf[o++] = (char)0xbf;
      buf[o++] = (char)0xbd;
      i++;
      continue;
    }
    for (size_t j = 0; j < k; j++) buf[o++] = (char)s[i + j];
    i += k;
  }
  json_t *j = json_stringn(buf, o);
  free(buf);
  return j;
}

bool cli_json_print(json_t *j) {
  if (!j) {
    fprintf(stderr, "kiln: error: out of memory building JSON output\n");
    return false;
  }
  int rc = json_dumpf(j, stdout, JSON_COMPACT | JSON_REAL_PRECISION(12));
  json_decref(j);
  return rc == 0 && fputc('\n', stdout) != EOF;
}
