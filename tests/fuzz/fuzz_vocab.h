/* The vocabulary a tokenizer or chat fuzz target runs against: a real one
 * from the models folder ($KILN_MODELS_DIR, else the folder configure was
 * given), loaded once before the first input. A target whose file is
 * missing exits 77, which automake reports as SKIP. */
#ifndef KILN_FUZZ_VOCAB_H
#define KILN_FUZZ_VOCAB_H

#include <stdio.h>
#include <stdlib.h>

#include "kiln/gguf.h"
#include "kiln/tokenizer.h"

static inline kiln_vocab *fuzz_load_vocab(const char *file, char **out_template) {
  const char *dir = getenv("KILN_MODELS_DIR");
  if (!dir || !*dir) dir = KILN_FUZZ_MODELS_DIR;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  kiln_gguf *g;
  kiln_status st = kiln_gguf_open(path, &g);
  if (st) {
    fprintf(stderr, "SKIP: %s\n", kiln_status_message(st));
    exit(77);
  }
  kiln_vocab *v;
  st = kiln_vocab_load(g, &v);
  if (st) {
    fprintf(stderr, "%s: %s\n", path, kiln_status_message(st));
    abort();
  }
  if (out_template) {
    const kiln_gguf_kv *kv = kiln_gguf_find_kv(g, "tokenizer.chat_template");
    *out_template = NULL;
    if (kv && kv->type == KILN_GGUF_STRING) {
      *out_template = malloc(kv->v.str.len + 1);
      if (!*out_template) abort();
      for (uint64_t i = 0; i < kv->v.str.len; i++) (*out_template)[i] = kv->v.str.ptr[i];
      (*out_template)[kv->v.str.len] = '\0';
    }
  }
  kiln_gguf_close(g);
  return v;
}

/* Whether s[0..n) is well-formed UTF-8 (RFC 3629). */
static inline bool fuzz_valid_utf8(const unsigned char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) {
      i++;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      len = 2, cp = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3, cp = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

#endif
