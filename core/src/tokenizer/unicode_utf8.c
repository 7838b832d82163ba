/* UTF-8 decoding and GPT-2's byte <-> code point mapping, the two pieces of
 * Unicode handling the tokenizers need (categories come from PCRE2). */
#include "config.h"

#include "tokenizer_internal.h"

size_t kiln__utf8_lead_len(uint8_t b) {
  static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[b >> 4];
}

size_t kiln__utf8_decode(const uint8_t *s, size_t n, uint32_t *out_cp) {
  if (n == 0) return 0;
  uint8_t b0 = s[0];
  if (b0 < 0x80) {
    *out_cp = b0;
    return 1;
  }
  size_t len;
  uint32_t cp, min;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return 0; /* continuation byte, C0/C1 overlong lead, or F5..FF */
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  *out_cp = cp;
  return len;
}

size_t kiln__utf8_encode(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* bytes_to_unicode keeps the printable Latin-1 bytes ('!'..'~', '¡'..'¬',
 * '®'..'ÿ') as themselves and gives the other 68 bytes the code points
 * 256, 257, ... in increasing byte order, so no byte maps to whitespace or
 * a control character. */
static bool byte_is_printable(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* The 68 non-printable bytes are 0x00..0x20 (33), 0x7F..0xA0 (34) and 0xAD,
 * numbered 0..67 in that order. */
uint32_t kiln__byte_to_cp(uint8_t b) {
  if (byte_is_printable(b)) return b;
  if (b <= 0x20) return 256u + b;
  if (b >= 0x7F && b <= 0xA0) return 256u + 33u + (b - 0x7Fu);
  return 256u + 67u; /* 0xAD */
}

int kiln__cp_to_byte(uint32_t cp) {
  if (cp < 256) return byte_is_printable(cp) ? (int)cp : -1;
  if (cp >= 256 + 68) return -1;
  uint32_t n = cp - 256;
  if (n <= 32) return (int)n;
  if (n <= 66) return (int)(0x7F + (n - 33));
  return 0xAD;
}
