/* The pieces every synthetic-model writer uses (synth_internal.h): the
 * seeded normal stream, random tensors, keys, the copied vocabulary. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "kiln/dequant.h"
#include "kiln/gguf.h"
#include "kiln/tokenizer.h"
#include "synth_internal.h"

#define SPLITMIX_GAMMA 0x9e3779b97f4a7c15ull

/* SplitMix64's output for state z (after the state's increment). */
static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Box–Muller pair p counted from state b: u1 from the state b + (2p+1)γ,
 * u2 from b + (2p+2)γ; the cosine is the pair's first normal, the sine
 * its second (the spare). */
static double pair_normal(uint64_t b, uint64_t p, bool second) {
  double u1 = ((double)(mix(b + (2 * p + 1) * SPLITMIX_GAMMA) >> 11) + 1.0) * 0x1.0p-53;
  double u2 = (double)(mix(b + (2 * p + 2) * SPLITMIX_GAMMA) >> 11) * 0x1.0p-53;
  double mag = sqrt(-2.0 * log(u1));
  return second ? mag * sin(2.0 * M_PI * u2) : mag * cos(2.0 * M_PI * u2);
}

/* N(0, 1) by Box–Muller on two uniform doubles in (0, 1]. */
double kiln__synth_normal(kiln__synth_rng *r) {
  if (r->have_spare) {
    r->have_spare = false;
    return r->spare;
  }
  const uint64_t b = r->s;
  r->s += 2 * SPLITMIX_GAMMA;
  r->spare = pair_normal(b, 0, true);
  r->have_spare = true;
  return pair_normal(b, 0, false);
}

/* The stream is a counter: normal j after the state (r->s, have_spare)
 * is pair j / 2's cosine or sine, counted from the state before the pair
 * the spare came from. So a tensor's rows can be drawn in any order, by
 * any thread, and give the values the sequential stream gives. */
typedef struct stream_at {
  uint64_t base; /* the state before the pair of the tensor's first value */
  uint64_t skip; /* 1 when that first value is the pair's spare */
} stream_at;

static stream_at stream_now(const kiln__synth_rng *r) {
  return r->have_spare ? (stream_at){r->s - 2 * SPLITMIX_GAMMA, 1} : (stream_at){r->s, 0};
}

static double normal_at(stream_at a, uint64_t i) {
  const uint64_t j = i + a.skip;
  return pair_normal(a.base, j / 2, j & 1);
}

/* The stream moved on past n values from a, as n sequential calls leave it. */
static void stream_advance(kiln__synth_rng *r, stream_at a, uint64_t n) {
  const uint64_t end = n + a.skip, pairs = (end + 1) / 2;
  r->s = a.base + 2 * pairs * SPLITMIX_GAMMA;
  r->have_spare = end & 1;
  if (r->have_spare) r->spare = pair_normal(a.base, pairs - 1, true);
}

typedef struct add_job {
  kiln_type type;
  int64_t ne0, row_bytes, r0, r1; /* rows [r0, r1) */
  double std, offset, lo, hi, special_ms;
  const bool *special;
  stream_at at;
  unsigned char *data;
  kiln_status st;
} add_job;

static void *add_rows(void *arg) {
  add_job *j = arg;
  float *row = malloc((size_t)j->ne0 * sizeof *row);
  if (!row) {
    j->st = kiln_status_new(KILN_STATUS_NO_MEMORY, "synth: a row of %lld values", (long long)j->ne0);
    return NULL;
  }
  for (int64_t r = j->r0; !j->st && r < j->r1; r++) {
    for (int64_t i = 0; i < j->ne0; i++) {
      double v = j->offset + j->std * normal_at(j->at, (uint64_t)(r * j->ne0 + i));
      if (j->lo < j->hi) v = v < j->lo ? j->lo : v > j->hi ? j->hi : v;
      row[i] = (float)v;
    }
    if (j->special && j->special[r] && j->special_ms > 0.0) {
      double ms = 0.0;
      for (int64_t i = 0; i < j->ne0; i++) ms += (double)row[i] * row[i];
      ms /= (double)j->ne0;
      double k = sqrt(j->special_ms / ms);
      for (int64_t i = 0; i < j->ne0; i++) row[i] = (float)(row[i] * k);
    }
    j->st = kiln_quantize(j->type, row, j->data + r * j->row_bytes, j->ne0);
  }
  free(row);
  return NULL;
}

#define SYNTH_MAX_THREADS 64

/* Rows drawn and quantized on every online CPU (a 9B-shaped file is ~10
 * GB of values), a row at a time, so a 150k-row embedding never exists as
 * f32 all at once; the bytes are those of one thread. */
kiln_status kiln__synth_add(kiln__synth *s, const char *name, kiln_type type, bool matrix, int64_t ne0,
                            int64_t ne1, double std, double offset, double lo, double hi, const bool *special,
                            double special_ms) {
  int64_t row_bytes = kiln_type_row_bytes(type, ne0);
  if (row_bytes < 0)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: %s: width %lld is not a whole number of %s blocks (%lld values)",
                           name, (long long)ne0, kiln_type_name(type), (long long)kiln_type_block_size(type));
  unsigned char *data = malloc((size_t)(row_bytes * ne1));
  if (!data) return kiln_status_new(KILN_STATUS_NO_MEMORY, "synth: %s", name);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int64_t n_thr = cpus < 1 ? 1 : cpus > SYNTH_MAX_THREADS ? SYNTH_MAX_THREADS : cpus;
  if (ne0 * ne1 < (1 << 20)) n_thr = 1; /* not worth a thread */
  if (n_thr > ne1) n_thr = ne1 > 0 ? ne1 : 1;
  add_job jobs[SYNTH_MAX_THREADS];
  pthread_t tid[SYNTH_MAX_THREADS];
  bool started[SYNTH_MAX_THREADS] = {false};
  const stream_at at = stream_now(&s->r);
  for (int64_t t = 0; t < n_thr; t++) {
    jobs[t] = (add_job){type, ne0, row_bytes, ne1 * t / n_thr, ne1 * (t + 1) / n_thr, std, offset, lo, hi,
                        special_ms, special, at, data, NULL};
    if (t > 0) started[t] = pthread_create(&tid[t], NULL, add_rows, &jobs[t]) == 0;
    if (t > 0 && !started[t]) add_rows(&jobs[t]); /* no thread: this one does it */
  }
  add_rows(&jobs[0]);
  kiln_status st = NULL;
  for (int64_t t = 0; t < n_thr; t++) {
    if (started[t]) pthread_join(tid[t], NULL);
    if (!st) st = jobs[t].st;
    else kiln_status_free(jobs[t].st);
  }
  stream_advance(&s->r, at, (uint64_t)(ne0 * ne1));
  int64_t ne[2] = {ne0, ne1};
  if (!st) st = kiln_gguf_writer_add_tensor_raw(s->w, name, type, matrix ? 2 : 1, ne, data,
                                                (uint64_t)(row_bytes * ne1));
  free(data);
  return st ? kiln_status_annotate(st, "synth: %s", name) : NULL;
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

/* The token list padded to `rows` entries, as llama.cpp's converter pads a
 * checkpoint whose vocab_size exceeds its tokenizer (conversion/base.py:
 * "[PAD<id>]", type UNUSED), so that llama.cpp, which sizes token_embd by
 * the token count, loads a file with padded embedding rows. */
static kiln_status pad_vocab(kiln_gguf_writer *w, const kiln_gguf *g, const kiln_gguf_kv *tokens,
                             const kiln_gguf_kv *types, uint32_t rows) {
  const uint64_t n = tokens->n;
  kiln_gguf_str *strs = calloc(rows, sizeof *strs);
  int32_t *ty = calloc(rows, sizeof *ty);
  char *names = calloc(rows - n, 24);
  kiln_status st = NULL;
  if (!types)
    st = kiln_status_new(KILN_STATUS_MALFORMED,
                         "synth: --vocab-rows: the vocabulary has no tokenizer.ggml.token_type "
                         "to pad (its CONTROL tokens would become NORMAL)");
  else if (kiln_gguf_find_kv(g, "tokenizer.ggml.scores"))
    st = kiln_status_new(KILN_STATUS_UNSUPPORTED,
                         "synth: --vocab-rows past the tokens of a vocabulary with "
                         "tokenizer.ggml.scores (SentencePiece) is not written; use a BPE "
                         "vocabulary or no --vocab-rows");
  else if (!strs || !ty || !names)
    st = kiln_status_new(KILN_STATUS_NO_MEMORY, "synth: vocabulary padding");
  for (uint64_t i = 0; !st && i < rows; i++) {
    if (i < n) {
      strs[i] = kiln_gguf_arr_str(g, tokens, i);
      ty[i] = kiln_gguf_arr_i32(types, i);
      continue;
    }
    char *name = names + (i - n) * 24;
    int len = snprintf(name, 24, "[PAD%llu]", (unsigned long long)i);
    strs[i] = (kiln_gguf_str){name, (uint64_t)len};
    ty[i] = KILN_TOKEN_UNUSED;
  }
  if (!st) st = kiln_gguf_writer_set_arr_strv(w, "tokenizer.ggml.tokens", strs, rows);
  if (!st) st = kiln_gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", ty, rows);
  free(names);
  free(ty);
  free(strs);
  return st;
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
  if (!st && s->o->vocab_rows > tokens->n) st = pad_vocab(s->w, g, tokens, types, s->o->vocab_rows);
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
