/* The pieces every synthetic-model writer uses (synth_internal.h): the
 * seeded normal stream, random tensors, keys, the copied vocabulary. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kiln/dequant.h"
#include "kiln/gguf.h"
#include "kiln/tokenizer.h"
#include "synth_internal.h"

static uint64_t next_u64(kiln__synth_rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* N(0, 1) by Box–Muller on two uniform doubles in (0, 1]. */
double kiln__synth_normal(kiln__synth_rng *r) {
  if (r->have_spare) {
    r->have_spare = false;
    return r->spare;
  }
  double u1 = ((double)(next_u64(r) >> 11) + 1.0) * 0x1.0p-53;
  double u2 = (double)(next_u64(r) >> 11) * 0x1.0p-53;
  double mag = sqrt(-2.0 * log(u1));
  r->spare = mag * sin(2.0 * M_PI * u2);
  r->have_spare = true;
  return mag * cos(2.0 * M_PI * u2);
}

/* Quantized a row at a time, so a 150k-row embedding never exists as f32
 * all at once. */
kiln_status kiln__synth_add(kiln__synth *s, const char *name, kiln_type type, bool matrix, int64_t ne0,
                            int64_t ne1, double std, double offset, double lo, double hi, const bool *special,
                            double special_ms) {
  int64_t row_bytes = kiln_type_row_bytes(type, ne0);
  if (row_bytes < 0)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: %s: width %lld is not a whole number of %s blocks",
                           name, (long long)ne0, kiln_type_name(type));
  unsigned char *data = malloc((size_t)(row_bytes * ne1));
  float *row = malloc((size_t)ne0 * sizeof *row);
  kiln_status st = NULL;
  if (!data || !row) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "synth: %s", name);
  for (int64_t r = 0; !st && r < ne1; r++) {
    for (int64_t i = 0; i < ne0; i++) {
      double v = offset + std * kiln__synth_normal(&s->r);
      if (lo < hi) v = v < lo ? lo : v > hi ? hi : v;
      row[i] = (float)v;
    }
    if (special && special[r] && special_ms > 0.0) {
      double ms = 0.0;
      for (int64_t i = 0; i < ne0; i++) ms += (double)row[i] * row[i];
      ms /= (double)ne0;
      double k = sqrt(special_ms / ms);
      for (int64_t i = 0; i < ne0; i++) row[i] = (float)(row[i] * k);
    }
    st = kiln_quantize(type, row, data + r * row_bytes, ne0);
  }
  int64_t ne[2] = {ne0, ne1};
  if (!st) st = kiln_gguf_writer_add_tensor_raw(s->w, name, type, matrix ? 2 : 1, ne, data,
                                                (uint64_t)(row_bytes * ne1));
  free(data);
  free(row);
  return st;
}

kiln_status kiln__synth_set_u32(kiln__synth *s, const char *suffix, uint32_t v) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", s->arch, suffix);
  return kiln_gguf_writer_set_u32(s->w, key, v);
}

kiln_status kiln__synth_set_f32(kiln__synth *s, const char *suffix, float v) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", s->arch, suffix);
  return kiln_gguf_writer_set_f32(s->w, key, v);
}

kiln_status kiln__synth_copy_vocab(kiln__synth *s, uint32_t *out_n_tokens, bool **out_special) {
  kiln_gguf *g;
  KILN_RETURN_IF_ERROR(kiln_gguf_open(s->o->vocab_from, &g));
  const kiln_gguf_kv *tokens, *types = NULL;
  kiln_status st = kiln_gguf_get_arr(g, "tokenizer.ggml.tokens", KILN_GGUF_STRING, &tokens);
  if (!st && kiln_gguf_find_kv(g, "tokenizer.ggml.token_type"))
    st = kiln_gguf_get_arr(g, "tokenizer.ggml.token_type", KILN_GGUF_INT32, &types);
  if (!st && (tokens->n == 0 || tokens->n > INT32_MAX))
    st = kiln_status_new(KILN_STATUS_MALFORMED, "tokenizer.ggml.tokens has %llu entries",
                         (unsigned long long)tokens->n);
  if (!st && types && types->n != tokens->n)
    st = kiln_status_new(KILN_STATUS_MALFORMED, "tokenizer.ggml.token_type has %llu entries, tokens %llu",
                         (unsigned long long)types->n, (unsigned long long)tokens->n);
  if (!st) st = kiln_gguf_writer_copy_kvs(s->w, g, "tokenizer.", NULL);
  bool *special = NULL;
  if (!st) {
    special = calloc(tokens->n, sizeof *special);
    if (!special) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "synth: vocabulary");
    for (uint64_t i = 0; !st && types && i < types->n; i++)
      special[i] = kiln_gguf_arr_i32(types, i) == KILN_TOKEN_CONTROL;
    *out_n_tokens = (uint32_t)tokens->n;
  }
  kiln_gguf_close(g);
  *out_special = special;
  return st ? kiln_status_annotate(st, "%s", s->o->vocab_from) : NULL;
}
