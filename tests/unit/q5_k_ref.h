/* The inputs of tests/data/quant/q5_k_ggml.txt, rebuilt by the formulas of
 * make_q5_k_ref.c that wrote it (its header), and the file's lines, for
 * test_dequant (llama.cpp's dequantize_row_q5_K) and test_quantize
 * (quantize_row_q5_K_ref). Each input's FNV-1a hash is in the file, so a
 * formula that drifted from the generator's fails as such. C and C++
 * (test_matvec_q_host.cc and test_wtype_host.cc build Q5_K blocks with it). */
#ifndef KILN_TEST_Q5_K_REF_H
#define KILN_TEST_Q5_K_REF_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline uint64_t q5r_fnv(const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static inline uint16_t q5r_finite_f16(uint16_t h) { return (h & 0x7c00) == 0x7c00 ? h ^ 0x4000 : h; }

/* Block b (0..255) of the dequantization set. */
static inline void q5r_block(int b, unsigned char p[176]) {
  const uint16_t d = q5r_finite_f16((uint16_t)(b * 40503u + 0x3a1fu));
  const uint16_t dmin = q5r_finite_f16((uint16_t)(b * 30011u + 0x1b35u));
  p[0] = (unsigned char)d, p[1] = (unsigned char)(d >> 8);
  p[2] = (unsigned char)dmin, p[3] = (unsigned char)(dmin >> 8);
  for (int i = 4; i < 176; i++)
    p[i] = (unsigned char)((unsigned)b * (2u * ((37u * (unsigned)i) & 127u) + 1u) + 101u * (unsigned)i);
}

/* The 64 rows of the quantization set, 256 values each, into x[64 * 256]. */
static inline void q5r_rows(float *x) {
  uint64_t s = 0x51354bull;
  for (int r = 0; r < 64; r++)
    for (int i = 0; i < 256; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      int32_t v = (int32_t)((s >> 40) & 0xffffffu) - 0x800000;
      if (r % 8 == 3) v = v < 0 ? -v : v;
      if (r % 8 == 5) v = v < 0 ? v : -v;
      if (r % 8 == 6 && i >= 64 && i < 96) v = 0;
      if (r == 7) v = 77777;
      if (r == 15) v = 0;
      x[256 * r + i] = ldexpf((float)v, r % 11 - 30);
    }
}

/* The data file, whole, as a NUL-terminated string (free it), or NULL
 * when KILN_SRCDIR is unset or the file cannot be read. */
static inline char *q5r_read_file(void) {
  const char *src = getenv("KILN_SRCDIR");
  if (!src) return NULL;
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/data/quant/q5_k_ggml.txt", src);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t n = 0, cap = 0, got;
  do {
    if (n + 65536 + 1 > cap) {
      cap = cap ? 2 * cap : 65536 * 2;
      char *nb = (char *)realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = nb;
    }
    got = fread(buf + n, 1, 65536, f);
    n += got;
  } while (got > 0);
  fclose(f);
  buf[n] = '\0';
  return buf;
}

/* The next line of the file from *pos on that starts with `tag` and a
 * space: the rest of it copied into out (size bytes, NUL-terminated), *pos
 * moved past it. false when there is none (or it does not fit). */
static inline int q5r_next(const char **pos, const char *tag, char *out, size_t size) {
  const size_t tn = strlen(tag);
  while (**pos) {
    const char *line = *pos, *nl = strchr(line, '\n');
    const size_t len = nl ? (size_t)(nl - line) : strlen(line);
    *pos = line + len + (nl ? 1 : 0);
    if (len > tn && strncmp(line, tag, tn) == 0 && line[tn] == ' ') {
      if (len - tn >= size) return 0;
      memcpy(out, line + tn + 1, len - tn - 1);
      out[len - tn - 1] = '\0';
      return 1;
    }
  }
  return 0;
}

#endif /* KILN_TEST_Q5_K_REF_H */
