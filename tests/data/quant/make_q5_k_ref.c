/* Writes q5_k_ggml.txt: llama.cpp's own Q5_K dequantization and reference
 * quantization of blocks and rows built by the formulas below, which
 * tests/unit/test_dequant.c and test_quantize.c rebuild and compare kiln
 * against. Not part of the build: it links ggml from the llama-cpp-python
 * 0.3.36 sdist (vendor/llama.cpp/ggml), as README.md in this folder says.
 *
 * Blocks (256 of them, b = 0..255), 176 bytes each:
 *   bytes 0-1 (d) the f16 bits (b * 40503 + 0x3a1f) mod 65536, bytes 2-3
 *   (dmin) (b * 30011 + 0x1b35) mod 65536, each with bit 14 flipped when
 *   its exponent field is 31 (no infinity or NaN); byte i of 4..175
 *   (scales, qh, qs) (b * (2 * ((37 i) mod 128) + 1) + 101 i) mod 256: the
 *   multiplier is odd, so over the 256 blocks every such byte takes each of
 *   its 256 values once.
 * Rows (64 super-blocks of 256 values, r = 0..63): one stream of the 64-bit
 *   LCG s = s * 6364136223846793005 + 1442695040888963407 from s = 0x51354b,
 *   advanced before each value; v = ((s >> 40) mod 2^24) - 2^23, then
 *   r % 8 == 3: |v|; r % 8 == 5: -|v|; r % 8 == 6: v = 0 in values 64..95;
 *   r == 7: v = 77777 everywhere; r == 15: v = 0 everywhere; and
 *   x = v * 2^((r % 11) - 30), exact in f32.
 * Output lines (after '#' comments):
 *   deq B HB HY         block B: FNV-1a 64 of its 176 bytes, of its 256
 *                       dequantized f32 values (little-endian bits)
 *   val B Y0 .. Y255    blocks 0..7: every value's f32 bits in hex
 *   quant R HX HQ       row R: FNV-1a 64 of its 256 f32 inputs, of the
 *                       176 bytes quantize_row_q5_K_ref writes
 *   qbytes R Q0 .. Q175 rows 0..7: those bytes in hex */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ggml.h"
#include "ggml-quants.h"

static uint64_t fnv(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static uint16_t finite_f16(uint16_t h) { return (h & 0x7c00) == 0x7c00 ? h ^ 0x4000 : h; }

static void make_block(int b, unsigned char *p) {
  const uint16_t d = finite_f16((uint16_t)(b * 40503u + 0x3a1fu));
  const uint16_t dmin = finite_f16((uint16_t)(b * 30011u + 0x1b35u));
  p[0] = (unsigned char)d, p[1] = (unsigned char)(d >> 8);
  p[2] = (unsigned char)dmin, p[3] = (unsigned char)(dmin >> 8);
  for (int i = 4; i < 176; i++)
    p[i] = (unsigned char)((unsigned)b * (2u * ((37u * (unsigned)i) & 127u) + 1u) + 101u * (unsigned)i);
}

int main(void) {
  if (sizeof(block_q5_K) != 176) return 1;
  printf("# Q5_K reference values from llama.cpp's ggml (llama-cpp-python 0.3.36 sdist,\n"
         "# vendor/llama.cpp/ggml/src/ggml-quants.c: dequantize_row_q5_K,\n"
         "# quantize_row_q5_K_ref), written by make_q5_k_ref.c (its header gives the\n"
         "# formulas for the blocks and rows and the line formats; README.md the build).\n");
  for (int b = 0; b < 256; b++) {
    unsigned char blk[176];
    float y[256];
    make_block(b, blk);
    dequantize_row_q5_K((const block_q5_K *)(const void *)blk, y, 256);
    printf("deq %d %016" PRIx64 " %016" PRIx64 "\n", b, fnv(blk, 176), fnv(y, sizeof y));
    if (b < 8) {
      printf("val %d", b);
      for (int i = 0; i < 256; i++) {
        uint32_t u;
        memcpy(&u, &y[i], 4);
        printf(" %08" PRIx32, u);
      }
      printf("\n");
    }
  }
  uint64_t s = 0x51354bull;
  for (int r = 0; r < 64; r++) {
    float x[256];
    for (int i = 0; i < 256; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      int32_t v = (int32_t)((s >> 40) & 0xffffffu) - 0x800000;
      if (r % 8 == 3) v = v < 0 ? -v : v;
      if (r % 8 == 5) v = v < 0 ? v : -v;
      if (r % 8 == 6 && i >= 64 && i < 96) v = 0;
      if (r == 7) v = 77777;
      if (r == 15) v = 0;
      x[i] = ldexpf((float)v, r % 11 - 30);
    }
    block_q5_K q;
    quantize_row_q5_K_ref(x, &q, 256);
    printf("quant %d %016" PRIx64 " %016" PRIx64 "\n", r, fnv(x, sizeof x), fnv(&q, sizeof q));
    if (r < 8) {
      const unsigned char *qb = (const unsigned char *)&q;
      printf("qbytes %d", r);
      for (int i = 0; i < 176; i++) printf(" %02x", qb[i]);
      printf("\n");
    }
  }
  return 0;
}
