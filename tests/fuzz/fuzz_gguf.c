/* libFuzzer target for the GGUF reader: any bytes must be either refused
 * with a status or accepted as a file whose every key, array element and
 * tensor can be read and dequantized without touching memory outside the
 * input. Built with clang by `make fuzz-gguf` (tests/unit/gguf.mk), and run
 * by `make check` through fuzz_gguf_smoke.c's deterministic mutations under
 * ASan and UBSan. */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/dequant.h"
#include "kiln/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads every byte the reader hands out, so ASan sees any that are not in
 * the input; returns a checksum so the reads are not optimised away. */
static uint64_t touch(const void *p, uint64_t n) {
  const uint8_t *b = p;
  uint64_t h = 0;
  for (uint64_t i = 0; i < n; i++) h = h * 31 + b[i];
  return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln_gguf *g = NULL;
  kiln_status st = kiln_gguf_open_memory(data, size, "fuzz.gguf", &g);
  if (st) {
    /* a refusal must say something */
    if (!kiln_status_message(st)[0]) abort();
    kiln_status_free(st);
    return 0;
  }
  volatile uint64_t sink = 0;
  for (uint64_t i = 0; i < kiln_gguf_n_kv(g); i++) {
    const kiln_gguf_kv *kv = kiln_gguf_kv_at(g, i);
    sink += touch(kv->key.ptr, kv->key.len);
    if (kv->type == KILN_GGUF_STRING) sink += touch(kv->v.str.ptr, kv->v.str.len);
    if (kv->type != KILN_GGUF_ARRAY) continue;
    if (kv->elem_type == KILN_GGUF_STRING) {
      for (uint64_t j = 0; j < kv->n; j++) {
        kiln_gguf_str s = kiln_gguf_arr_str(g, kv, j);
        sink += touch(s.ptr, s.len);
      }
    } else {
      sink += touch(kv->arr_data, kv->n * kiln_gguf_vtype_size(kv->elem_type));
    }
    /* the lookup finds this key (or an equal earlier one: keys are unique) */
    if (kv->key.len < 256 && !memchr(kv->key.ptr, 0, kv->key.len)) {
      char key[256];
      memcpy(key, kv->key.ptr, kv->key.len);
      key[kv->key.len] = 0;
      if (kiln_gguf_find_kv(g, key) != kv) abort();
    }
  }
  for (uint64_t i = 0; i < kiln_gguf_n_tensors(g); i++) {
    const kiln_gguf_tensor *t = kiln_gguf_tensor_at(g, i);
    sink += touch(t->data, t->nbytes);
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    if (t->type != KILN_TYPE_I32 && n <= (1 << 20)) {
      float *out = malloc((size_t)n * sizeof *out + 1);
      if (out) {
        st = kiln_dequantize(t->type, t->data, out, n);
        if (st) abort(); /* an accepted tensor always dequantizes */
        free(out);
      }
    }
  }
  (void)sink;
  kiln_gguf_close(g);
  return 0;
}
