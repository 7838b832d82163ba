/* A deterministic mutation run of the GGUF fuzz target, for `make check`
 * (built with ASan and UBSan where the compiler has them): seed files made
 * with kiln's writer (every value type, every tensor type, alignment 32 and
 * 64) are cut, bit-flipped, and have their length, count, offset and type
 * fields overwritten with boundary values; each result goes through
 * LLVMFuzzerTestOneInput from a heap buffer of exactly its size, so a read
 * past the end is caught. Exit status: 0, or the sanitizer's abort. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/gguf_write.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ITERATIONS 100000

static uint64_t rng = 0x853c49e6748fea9bull;
static uint64_t next(void) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return rng >> 17;
}

static void check(kiln_status st, const char *what) {
  if (st) {
    fprintf(stderr, "seed: %s: %s\n", what, kiln_status_message(st));
    exit(1);
  }
}

static void make_seed(uint32_t alignment, void **out, size_t *out_size) {
  kiln_gguf_writer *w;
  check(kiln_gguf_writer_new(&w), "new");
  check(kiln_gguf_writer_set_alignment(w, alignment), "alignment");
  check(kiln_gguf_writer_set_str(w, "general.architecture", "llama"), "str");
  check(kiln_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f), "f32");
  check(kiln_gguf_writer_set_u64(w, "u64", 7), "u64");
  check(kiln_gguf_writer_set_i8(w, "i8", -3), "i8");
  check(kiln_gguf_writer_set_bool(w, "b", true), "bool");
  check(kiln_gguf_writer_set_f64(w, "f64", 0.5), "f64");
  const char *toks[] = {"<unk>", "<s>", "</s>", "a", "", "bc"};
  check(kiln_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 6), "tokens");
  const int32_t types[] = {2, 3, 3, 1, 1, 1};
  check(kiln_gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, 6), "types");
  const uint16_t u16[] = {1, 65535};
  check(kiln_gguf_writer_set_arr(w, "u16s", KILN_GGUF_UINT16, u16, 2), "u16s");
  float v[512];
  for (int i = 0; i < 512; i++) v[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  const kiln_type tt[] = {KILN_TYPE_F32,  KILN_TYPE_F16,  KILN_TYPE_BF16,
                          KILN_TYPE_Q8_0, KILN_TYPE_Q4_0, KILN_TYPE_Q5_0,
                          KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K};
  for (int k = 0; k < 9; k++) {
    char name[32];
    snprintf(name, sizeof name, "blk.%d.w", k);
    int64_t ne[2] = {k < 6 ? 32 : 256, k < 6 ? 2 : 1};
    check(kiln_gguf_writer_add_tensor_f32(w, name, tt[k], 2, ne, v), name);
  }
  check(kiln_gguf_writer_write_memory(w, out, out_size), "write");
  kiln_gguf_writer_free(w);
}

static const uint64_t boundary[] = {0,
                                    1,
                                    2,
                                    3,
                                    4,
                                    5,
                                    7,
                                    8,
                                    12,
                                    13,
                                    31,
                                    32,
                                    33,
                                    63,
                                    64,
                                    255,
                                    256,
                                    4096,
                                    65535,
                                    65536,
                                    0x7fffffff,
                                    0x80000000u,
                                    0xffffffffu,
                                    0x100000000ull,
                                    1ull << 62,
                                    1ull << 63,
                                    0x7fffffffffffffffull,
                                    0xffffffffffffffffull};

int main(void) {
  void *seeds[2];
  size_t sizes[2];
  make_seed(32, &seeds[0], &sizes[0]);
  make_seed(64, &seeds[1], &sizes[1]);
  for (int s = 0; s < 2; s++) LLVMFuzzerTestOneInput(seeds[s], sizes[s]);
  size_t cap = sizes[0] > sizes[1] ? sizes[0] : sizes[1];
  uint8_t *buf = malloc(cap + 64);
  for (int it = 0; it < ITERATIONS; it++) {
    int s = (int)(next() % 2);
    size_t n = sizes[s];
    memcpy(buf, seeds[s], n);
    int edits = 1 + (int)(next() % 4);
    for (int e = 0; e < edits; e++) {
      /* mostly in the header, where the lengths and counts are */
      if (n == 0) break;
      size_t hdr = n < 1024 ? n : 1024;
      size_t at = (next() % 4) ? next() % hdr : next() % n;
      switch (next() % 5) {
      case 0: buf[at] ^= (uint8_t)(1u << (next() % 8)); break;
      case 1: buf[at] = (uint8_t)next(); break;
      case 2: { /* a 4- or 8-byte field set to a boundary value */
        uint64_t v = boundary[next() % (sizeof boundary / sizeof boundary[0])];
        size_t w = (next() % 2) ? 8 : 4;
        for (size_t i = 0; i < w && at + i < n; i++) buf[at + i] = (uint8_t)(v >> (8 * i));
        break;
      }
      case 3: n = at; break; /* cut */
      default:               /* grow with junk */
        if (n + 16 <= cap + 64) {
          for (int i = 0; i < 16; i++) buf[n + i] = (uint8_t)next();
          n += 16;
        }
      }
    }
    uint8_t *exact = malloc(n ? n : 1);
    memcpy(exact, buf, n);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
  }
  printf("fuzz_gguf_smoke: %d mutated inputs, no crash\n", ITERATIONS);
  free(buf);
  free(seeds[0]);
  free(seeds[1]);
  return 0;
}
