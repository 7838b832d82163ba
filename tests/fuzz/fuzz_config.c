/* libFuzzer target for the INI configuration (core/src/config): any bytes
 * are either refused with a message naming the file and a line, or loaded
 * and validated into values every typed getter reads back. A file with a
 * NUL byte, or a line longer than inih's buffer, must be refused: both
 * were once cut silently ("n_predict = 4\0junk" read as 4). */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"
#include "kiln/config.h"
#include "kiln/kcache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NAME "fuzz.ini"

/* A line of more than inih's 199 bytes (its 200-byte buffer less the NUL),
 * its newline counted. */
static bool has_long_line(const uint8_t *d, size_t n) {
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    if (++run > 199) return true;
    if (d[i] == '\n') run = 0;
  }
  return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln_config *c;
  if (kiln_config_new(&c)) abort();
  /* fmemopen of 0 bytes is refused: an empty file is a real file */
  static const uint8_t empty[1];
  FILE *f = fmemopen((void *)(size ? data : empty), size ? size : 1, "r");
  if (!f) abort();
  if (!size) fgetc(f); /* consume the placeholder byte: the stream is at EOF */
  kiln_status st = kiln__config_load_stream(c, f, NAME);
  fclose(f);
  if (!st && (memchr(data, 0, size) || has_long_line(data, size))) abort();
  /* the runtime's first phase: core sections checked, plugins' not yet */
  if (!st) st = kiln_config_declare(c, "kernel_cache", kiln_kcache_config_keys, kiln_kcache_n_config_keys);
  if (!st) st = kiln_config_validate(c, true);
  if (st) {
    if (!strstr(kiln_status_message(st), NAME ":")) abort(); /* every refusal names the file */
    kiln_status_free(st);
  } else {
    /* every declared value reads back through its getter */
    static const struct {
      const char *section, *key;
      char type;
    } keys[] = {{"general", "log_level", 's'},  {"general", "plugin_path", 's'},
                {"model", "path", 's'},         {"model", "n_ctx", 'i'},
                {"backend", "name", 's'},       {"backend", "batch", 'i'},
                {"sampling", "temperature", 'f'}, {"sampling", "top_p", 'f'},
                {"sampling", "n_predict", 'i'}, {"kernel_cache", "enabled", 'b'}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
      const kiln_config_section *s = kiln_config_section_get(c, keys[i].section);
      if (!s) continue;
      volatile double sink = 0;
      switch (keys[i].type) {
      case 'i': sink += (double)kiln_config_get_int(s, keys[i].key); break;
      case 'f': sink += kiln_config_get_float(s, keys[i].key); break;
      case 'b': sink += kiln_config_get_bool(s, keys[i].key); break;
      default: {
        const char *v = kiln_config_get_str(s, keys[i].key);
        if (v) sink += (double)strlen(v);
      }
      }
      (void)sink;
    }
    static FILE *null;
    if (!null) null = fopen("/dev/null", "w");
    if (null) kiln_config_print(c, null);
  }
  kiln_config_free(c);
  return 0;
}
