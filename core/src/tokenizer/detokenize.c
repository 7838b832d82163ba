/* Token ids back to bytes, as llama.cpp's token_to_piece and detokenize
 * (src/llama-vocab.cpp): SPM pieces turn "▁" into spaces and <0xNN> into
 * the byte; byte-level BPE pieces map each code point back to its byte;
 * CONTROL and UNKNOWN tokens are shown only when asked; USER_DEFINED
 * tokens always, as their text. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* The byte of a "<0xNN>" token, or -1 if the text is not of that form. */
static int byte_of(const char *t, size_t n) {
  if (n != 6 || memcmp(t, "<0x", 3) != 0 || t[5] != '>') return -1;
  int hi = hex_val(t[3]), lo = hex_val(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* Writes token id's piece to dst (when not NULL) and returns its length,
 * so one function both measures and writes. */
static size_t piece(const kiln_vocab *v, int32_t id, bool render_special, char *dst) {
  const char *t = kiln__strtab_text(&v->strs, id);
  size_t n = v->strs.len[id];
  uint8_t a = v->attr[id];
  if (a & (KILN__ATTR_CONTROL | KILN__ATTR_UNKNOWN)) {
    if (!render_special) return 0;
  }
  if (a) { /* special tokens are shown as their text */
    if (dst) memcpy(dst, t, n);
    return n;
  }
  switch ((kiln_token_type)v->types[id]) {
    case KILN_TOKEN_BYTE: {
      int b = byte_of(t, n);
      if (b < 0) { /* not "<0xNN>": show the text rather than lose it */
        if (dst) memcpy(dst, t, n);
        return n;
      }
      if (dst) dst[0] = (char)b;
      return 1;
    }
    case KILN_TOKEN_NORMAL: break;
    default: return 0; /* UNUSED, UNDEFINED: llama.cpp suppresses these like CONTROL */
  }
  size_t m = 0;
  if (v->kind == KILN_VOCAB_SPM) {
    for (size_t i = 0; i < n;) {
      if (n - i >= 3 && (uint8_t)t[i] == 0xE2 && (uint8_t)t[i + 1] == 0x96 &&
          (uint8_t)t[i + 2] == 0x81) {
        if (dst) dst[m] = ' ';
        m++;
        i += 3;
      } else {
        if (dst) dst[m] = t[i];
        m++;
        i++;
      }
    }
    return m;
  }
  /* Byte-level BPE: each code point is one byte. A code point outside the
   * 256 (only in a vocabulary that was not byte-level) is kept as UTF-8,
   * where llama.cpp writes "[UNK_BYTE_0x...]". */
  const uint8_t *u = (const uint8_t *)t;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t k = kiln__utf8_decode(u + i, n - i, &cp);
    int b = k ? kiln__cp_to_byte(cp) : -1;
    if (b >= 0) {
      if (dst) dst[m] = (char)b;
      m++;
    } else {
      if (!k) k = 1;
      if (dst) memcpy(dst + m, t + i, k);
      m += k;
    }
    i += k;
  }
  return m;
}

kiln_status kiln_token_to_piece(const kiln_vocab *v, int32_t id, bool render_special, char *buf,
                                size_t cap, size_t *len) {
  if (!v || !len || (!buf && cap))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kiln_token_to_piece: NULL argument");
  if (id < 0 || id >= v->n_tokens)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "kiln_token_to_piece: token id %d is outside the vocabulary (0..%d)",
                           (int)id, (int)v->n_tokens - 1);
  if (*len > cap)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "kiln_token_to_piece: *len %zu is past cap %zu", *len, cap);
  size_t n = piece(v, id, render_special, NULL);
  if (n > cap - *len)
    return kiln_status_new(KILN_STATUS_OUT_OF_RANGE,
                           "kiln_token_to_piece: token %d needs %zu bytes, %zu left", (int)id, n,
                           cap - *len);
  piece(v, id, render_special, buf + *len);
  *len += n;
  return NULL;
}

/* llama.cpp's clean_up_tokenization_spaces for the gpt-2 style
 * vocabularies: " ?", " !", " .", " ," lose the space; a lone " ' "
 * between spaces loses both; " 's", " 'm", " 're", " 've" lose the
 * space. Works in place; returns the new length. */
static size_t clean_spaces(char *t, size_t total) {
  if (total == 0) return 0;
  size_t n1 = total, k = 1;
  for (size_t i = 1; i < n1; i++) {
    char x = t[i];
    if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) k--;
    t[k++] = x;
  }
  size_t n2 = k;
  k = 1;
  for (size_t i = 1; i < n2; i++) {
    char x = t[i];
    if (x == '\'' && i + 1 < n2 && t[i - 1] == ' ' && t[i + 1] == ' ') {
      k--;
      t[++i] = '\0';
    }
    t[k++] = x;
  }
  size_t n3 = k;
  k = 1;
  for (size_t i = 1; i < n3; i++) {
    char x = t[i];
    if (t[i - 1] == ' ' && x == '\'' && i + 1 < n3) {
      char x1 = t[i + 1];
      if (x1 == 's' || x1 == 'm') {
        k--;
      } else if (i + 2 < n3) {
        char x2 = t[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) k--;
      }
    }
    t[k++] = x;
  }
  return k;
}

kiln_status kiln_detokenize(const kiln_vocab *v, const int32_t *ids, size_t n,
                            bool render_special, char **out_text, size_t *out_len) {
  if (!v || !out_text || !out_len || (!ids && n))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kiln_detokenize: NULL argument");
  *out_text = NULL;
  *out_len = 0;
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= v->n_tokens)
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "id %zu (%d) is outside the vocabulary's range 0..%d", i + 1, (int)ids[i],
                             (int)v->n_tokens - 1); /* counted from 1, as a user counts a list */
    total += piece(v, ids[i], render_special, NULL);
  }
  char *text = malloc(total + 1);
  if (!text) return kiln_status_new(KILN_STATUS_NO_MEMORY, "detokenizing %zu bytes", total);
  /* The space SentencePiece put in front of the text (add_space_prefix)
   * comes off the first piece after any leading BOS tokens. llama.cpp
   * strips it from the very first piece, which with a BOS in front is the
   * BOS itself; llama-cpp-python then strips it after a BOS that rendered
   * empty. kiln strips it after BOS either way, so that
   * decode(encode("<s>Hi", PARSE_SPECIAL), render_special) is "<s>Hi". */
  bool strip = v->add_space_prefix;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    size_t k = piece(v, ids[i], render_special, text + m);
    if (strip && ids[i] == v->bos) {
      m += k;
      continue;
    }
    if (strip && k > 0 && text[m] == ' ') {
      memmove(text + m, text + m + 1, k - 1);
      k--;
    }
    strip = false;
    m += k;
  }
  if (v->clean_spaces) m = clean_spaces(text, m);
  text[m] = '\0';
  *out_text = text;
  *out_len = m;
  return NULL;
}
