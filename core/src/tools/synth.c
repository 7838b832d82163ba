/* Synthetic models with seeded random weights (kiln/synth.h). */
#include "config.h"

#include "kiln/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/dequant.h"
#include "kiln/gguf.h"
#include "kiln/gguf_write.h"
#include "kiln/tokenizer.h"

typedef struct rng {
  uint64_t s;
  bool have_spare;
  double spare;
} rng;

static uint64_t next_u64(rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* N(0, 1) by Box–Muller on two uniform doubles in (0, 1]. */
static double normal(rng *r) {
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

void kiln_synth_defaults(kiln_synth_options *o, kiln_arch arch) {
  memset(o, 0, sizeof *o);
  o->arch = arch;
  o->n_layer = 2;
  o->n_embd = 64;
  o->n_ff = 128;
  o->n_head = 4;
  o->n_head_kv = 2;
  o->n_ctx = 512;
  o->n_vocab = 256;
  o->eps = arch == KILN_ARCH_LLAMA ? 1e-5f : 1e-6f;
  o->rope_theta = arch == KILN_ARCH_LLAMA ? 10000.0f : 1000000.0f;
  o->matrix_type = KILN_TYPE_F32;
  o->embd_type = KILN_TYPE_F32;
  o->tied_output = arch != KILN_ARCH_LLAMA;
  o->seed = 1;
}

static const char *arch_name(kiln_arch a) {
  switch (a) {
  case KILN_ARCH_LLAMA: return "llama";
  case KILN_ARCH_QWEN2: return "qwen2";
  case KILN_ARCH_QWEN3: return "qwen3";
  }
  return NULL;
}

typedef struct synth {
  const kiln_synth_options *o;
  kiln_gguf_writer *w;
  rng r;
  const char *arch;
} synth;

/* A [ne0, ne1] tensor of `type` drawn row by row: row values N(0, std²),
 * plus `offset`; rows listed in `special` (bool per row, may be NULL) are
 * rescaled to mean-square special_ms. Quantized a row at a time, so a
 * 150k-row embedding never exists as f32 all at once. */
static kiln_status add_random(synth *s, const char *name, kiln_type type, int64_t ne0, int64_t ne1, double std,
                              double offset, const bool *special, double special_ms) {
  int64_t row_bytes = kiln_type_row_bytes(type, ne0);
  if (row_bytes < 0)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: %s: width %lld is not a whole number of %s blocks",
                           name, (long long)ne0, kiln_type_name(type));
  unsigned char *data = malloc((size_t)(row_bytes * ne1));
  float *row = malloc((size_t)ne0 * sizeof *row);
  kiln_status st = NULL;
  if (!data || !row) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "synth: %s", name);
  for (int64_t r = 0; !st && r < ne1; r++) {
    for (int64_t i = 0; i < ne0; i++) row[i] = (float)(offset + std * normal(&s->r));
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
  if (!st) st = kiln_gguf_writer_add_tensor_raw(s->w, name, type, ne1 > 1 ? 2 : 1, ne, data,
                                                (uint64_t)(row_bytes * ne1));
  free(data);
  free(row);
  return st;
}

static kiln_status set_u32(synth *s, const char *suffix, uint32_t v) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", s->arch, suffix);
  return kiln_gguf_writer_set_u32(s->w, key, v);
}

static kiln_status set_f32(synth *s, const char *suffix, float v) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", s->arch, suffix);
  return kiln_gguf_writer_set_f32(s->w, key, v);
}

static kiln_status check(const kiln_synth_options *o, uint32_t head_dim) {
  if (!arch_name(o->arch)) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: unknown architecture");
  if (!o->n_layer || !o->n_embd || !o->n_ff || !o->n_head || !o->n_head_kv || !o->n_ctx)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: layers, widths, heads and n_ctx must be > 0");
  if (o->n_head % o->n_head_kv)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: n_head %u is not a multiple of n_head_kv %u",
                           o->n_head, o->n_head_kv);
  if (!o->head_dim && o->n_embd % o->n_head)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: n_embd %u is not a multiple of n_head %u",
                           o->n_embd, o->n_head);
  uint32_t n_rot = o->n_rot ? o->n_rot : head_dim;
  if (!o->n_rot && head_dim % 2)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "synth: head_dim %u is odd; RoPE rotates pairs (give an even head_dim, or --rot)", head_dim);
  if (n_rot % 2 || n_rot > head_dim)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: n_rot %u must be even and <= head_dim %u", n_rot,
                           head_dim);
  if (!(o->eps > 0.0f)) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: eps must be > 0");
  if (o->arch != KILN_ARCH_LLAMA && !(o->rope_theta > 0.0f))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: a %s model needs rope_theta", arch_name(o->arch));
  return NULL;
}

/* Copies the vocabulary and marks its CONTROL tokens. */
static kiln_status copy_vocab(synth *s, uint32_t *out_n_vocab, bool **out_special) {
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
    *out_n_vocab = (uint32_t)tokens->n;
  }
  kiln_gguf_close(g);
  *out_special = special;
  return st ? kiln_status_annotate(st, "%s", s->o->vocab_from) : NULL;
}

static kiln_status build(synth *s) {
  const kiln_synth_options *o = s->o;
  uint32_t head_dim = o->head_dim ? o->head_dim : o->n_embd / o->n_head;
  KILN_RETURN_IF_ERROR(check(o, head_dim));
  uint32_t n_rot = o->n_rot ? o->n_rot : head_dim;
  kiln_gguf_writer *w = s->w;
  KILN_RETURN_IF_ERROR(kiln_gguf_writer_set_str(w, "general.architecture", s->arch));
  KILN_RETURN_IF_ERROR(kiln_gguf_writer_set_str(w, "general.name", o->name ? o->name : "kiln-synth"));
  KILN_RETURN_IF_ERROR(set_u32(s, "context_length", o->n_ctx));
  KILN_RETURN_IF_ERROR(set_u32(s, "embedding_length", o->n_embd));
  KILN_RETURN_IF_ERROR(set_u32(s, "feed_forward_length", o->n_ff));
  KILN_RETURN_IF_ERROR(set_u32(s, "block_count", o->n_layer));
  KILN_RETURN_IF_ERROR(set_u32(s, "attention.head_count", o->n_head));
  KILN_RETURN_IF_ERROR(set_u32(s, "attention.head_count_kv", o->n_head_kv));
  KILN_RETURN_IF_ERROR(set_u32(s, "attention.key_length", head_dim));
  KILN_RETURN_IF_ERROR(set_u32(s, "attention.value_length", head_dim));
  KILN_RETURN_IF_ERROR(set_u32(s, "rope.dimension_count", n_rot));
  KILN_RETURN_IF_ERROR(set_f32(s, "attention.layer_norm_rms_epsilon", o->eps));
  if (o->rope_theta > 0.0f) KILN_RETURN_IF_ERROR(set_f32(s, "rope.freq_base", o->rope_theta));

  uint32_t n_vocab = o->n_vocab;
  bool *special = NULL;
  if (o->vocab_from) KILN_RETURN_IF_ERROR(copy_vocab(s, &n_vocab, &special));
  if (!n_vocab) {
    free(special);
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: n_vocab must be > 0");
  }
  double embd_std = sqrt(o->embd_ms > 0.0 ? o->embd_ms : 3e-4);
  kiln_status st = add_random(s, "token_embd.weight", o->embd_type, o->n_embd, n_vocab, embd_std, 0.0, special,
                              o->special_ms);
  free(special);
  KILN_RETURN_IF_ERROR(st);
  KILN_RETURN_IF_ERROR(add_random(s, "output_norm.weight", KILN_TYPE_F32, o->n_embd, 1, 0.1, 1.0, NULL, 0));
  if (!o->tied_output)
    KILN_RETURN_IF_ERROR(add_random(s, "output.weight", o->embd_type, o->n_embd, n_vocab,
                                    1.0 / sqrt((double)o->n_embd), 0.0, NULL, 0));

  int64_t qw = (int64_t)head_dim * o->n_head, kvw = (int64_t)head_dim * o->n_head_kv;
  for (uint32_t l = 0; l < o->n_layer; l++) {
    struct {
      const char *suffix;
      int64_t ne0, ne1;
      int kind; /* 0 matrix, 1 norm, 2 bias */
      bool want;
    } t[] = {
        {"attn_norm.weight", o->n_embd, 1, 1, true},
        {"attn_q.weight", o->n_embd, qw, 0, true},
        {"attn_k.weight", o->n_embd, kvw, 0, true},
        {"attn_v.weight", o->n_embd, kvw, 0, true},
        {"attn_q.bias", qw, 1, 2, o->arch == KILN_ARCH_QWEN2},
        {"attn_k.bias", kvw, 1, 2, o->arch == KILN_ARCH_QWEN2},
        {"attn_v.bias", kvw, 1, 2, o->arch == KILN_ARCH_QWEN2},
        {"attn_q_norm.weight", head_dim, 1, 1, o->arch == KILN_ARCH_QWEN3},
        {"attn_k_norm.weight", head_dim, 1, 1, o->arch == KILN_ARCH_QWEN3},
        {"attn_output.weight", qw, o->n_embd, 0, true},
        {"ffn_norm.weight", o->n_embd, 1, 1, true},
        {"ffn_gate.weight", o->n_embd, o->n_ff, 0, true},
        {"ffn_up.weight", o->n_embd, o->n_ff, 0, true},
        {"ffn_down.weight", o->n_ff, o->n_embd, 0, true},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
      if (!t[i].want) continue;
      char name[96];
      snprintf(name, sizeof name, "blk.%u.%s", l, t[i].suffix);
      kiln_type type = t[i].kind == 0 ? o->matrix_type : KILN_TYPE_F32;
      double std = t[i].kind == 0 ? 1.0 / sqrt((double)t[i].ne0) : t[i].kind == 1 ? 0.1 : 0.02;
      KILN_RETURN_IF_ERROR(add_random(s, name, type, t[i].ne0, t[i].ne1, std, t[i].kind == 1 ? 1.0 : 0.0, NULL, 0));
    }
  }
  return NULL;
}

kiln_status kiln_synth_write(const kiln_synth_options *o, const char *path) {
  synth s = {o, NULL, {o->seed, false, 0.0}, arch_name(o->arch)};
  KILN_RETURN_IF_ERROR(kiln_gguf_writer_new(&s.w));
  kiln_status st = build(&s);
  if (!st) st = kiln_gguf_writer_write_file(s.w, path);
  kiln_gguf_writer_free(s.w);
  return st ? kiln_status_annotate(st, "synthesizing %s", path) : NULL;
}
