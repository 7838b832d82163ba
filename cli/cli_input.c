/* Prompts: -p with llama.cpp's escapes, -f FILE, -f - (standard input). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/src/base/open_regular.h"
#include "cli.h"

/* A prompt larger than this is refused: no context holds it, and a device
 * like /dev/zero or an endless pipe must not eat the machine's memory. */
#define CLI_MAX_PROMPT_BYTES (64u << 20)

static kiln_status read_stream(FILE *f, const char *name, char **out_text, size_t *out_len) {
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  if (!buf) return kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: reading", name);
  for (;;) {
    if (len + 1 == cap) {
      if (cap > CLI_MAX_PROMPT_BYTES) {
        free(buf);
        return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "%s: more than %u MiB; a prompt may hold at most that",
                               name, CLI_MAX_PROMPT_BYTES >> 20);
      }
      char *b = realloc(buf, cap * 2);
      if (!b) {
        free(buf);
        return kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: reading", name);
      }
      buf = b;
      cap *= 2;
    }
    size_t n = fread(buf + len, 1, cap - 1 - len, f);
    len += n;
    if (n == 0) break;
  }
  if (ferror(f)) {
    free(buf);
    return kiln_status_new(KILN_STATUS_IO, "%s: read error", name);
  }
  buf[len] = 0;
  *out_text = buf;
  *out_len = len;
  return NULL;
}

kiln_status cli_read_file(const char *path, char **out_text, size_t *out_len) {
  *out_text = NULL;
  *out_len = 0;
  if (!strcmp(path, "-")) return read_stream(stdin, "standard input", out_text, out_len);
  struct stat sb;
  FILE *f;
  int r = kiln__fopen_regular(path, "rb", &sb, &f); /* a FIFO refused, not waited on */
  if (r == -2)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: not a regular file (-f - reads standard input)", path);
  if (r < 0) return kiln_status_new(KILN_STATUS_NOT_FOUND, "%s: %s", path, strerror(errno));
  if ((uint64_t)sb.st_size > CLI_MAX_PROMPT_BYTES) {
    fclose(f);
    return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "%s: %lld bytes; a prompt file may hold at most %u MiB", path,
                           (long long)sb.st_size, CLI_MAX_PROMPT_BYTES >> 20);
  }
  kiln_status st = read_stream(f, path, out_text, out_len);
  fclose(f);
  return st;
}

static int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* llama.cpp's string_process_escapes, in place: the result is never longer. */
static size_t process_escapes(char *s, size_t len) {
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] != '\\' || i + 1 == len) {
      s[o++] = s[i];
      continue;
    }
    char e = s[++i];
    switch (e) {
    case 'n': s[o++] = '\n'; break;
    case 'r': s[o++] = '\r'; break;
    case 't': s[o++] = '\t'; break;
    case '\'': s[o++] = '\''; break;
    case '"': s[o++] = '"'; break;
    case '\\': s[o++] = '\\'; break;
    case 'x':
      if (i + 2 < len && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
        s[o++] = (char)(hex(s[i + 1]) * 16 + hex(s[i + 2]));
        i += 2;
        break;
      }
      /* fall through - not \xHH: kept as written */
    default:
      s[o++] = '\\';
      s[o++] = e;
    }
  }
  s[o] = 0;
  return o;
}

bool cli_prompt(const char *cmd, const char *prompt, const char *file, bool escape, char **out_text,
                size_t *out_len, kiln_status *out_status) {
  *out_text = NULL;
  *out_len = 0;
  *out_status = NULL;
  if (!prompt == !file) {
    fprintf(stderr, "kiln %s: give exactly one of -p PROMPT and -f FILE (-f - reads standard input)\n", cmd);
    return false;
  }
  if (file) {
    *out_status = cli_read_file(file, out_text, out_len);
    return true;
  }
  size_t len = strlen(prompt);
  char *t = malloc(len + 1);
  if (!t) {
    *out_status = kiln_status_new(KILN_STATUS_NO_MEMORY, "prompt");
    return true;
  }
  memcpy(t, prompt, len + 1);
  *out_len = escape ? process_escapes(t, len) : len;
  *out_text = t;
  return true;
}
