/* kiln_vocab_load: reads the tokenizer.ggml.* keys llama.cpp's converter
 * writes (convert_hf_to_gguf.py, gguf-py's constants) and checks them
 * before building the vocabulary: array types and lengths, special ids in
 * range. Every message names the file and the key. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/escape.h"
#include "tokenizer_internal.h"

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_PRE "tokenizer.ggml.pre"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TYPES "tokenizer.ggml.token_type"
#define KEY_MERGES "tokenizer.ggml.merges"
#define KEY_ADD_BOS "tokenizer.ggml.add_bos_token"
#define KEY_ADD_PREFIX "tokenizer.ggml.add_space_prefix"

static bool is_signed_int(kiln_gguf_vtype t) {
  return t == KILN_GGUF_INT8 || t == KILN_GGUF_INT16 || t == KILN_GGUF_INT32 ||
         t == KILN_GGUF_INT64;
}

static bool is_unsigned_int(kiln_gguf_vtype t) {
  return t == KILN_GGUF_UINT8 || t == KILN_GGUF_UINT16 || t == KILN_GGUF_UINT32 ||
         t == KILN_GGUF_UINT64;
}

/* A special token id. Absent: `def` (llama.cpp's default for the model,
 * dropped when outside the vocabulary). -1, or 0xFFFFFFFF as converters
 * write for "none": unset. Anything else outside the vocabulary is an
 * error, where llama.cpp warns and keeps the default. */
static kiln_status read_id(const kiln_gguf *g, const char *key, int32_t def, int32_t n_tokens,
                           int32_t *out) {
  const kiln_gguf_kv *kv = kiln_gguf_find_kv(g, key);
  if (!kv) {
    *out = def < n_tokens ? def : -1;
    return NULL;
  }
  int64_t id;
  if (is_signed_int(kv->type)) {
    id = kv->v.i64;
  } else if (is_unsigned_int(kv->type)) {
    if (kv->v.u64 == UINT32_MAX || kv->v.u64 == UINT64_MAX) {
      *out = -1;
      return NULL;
    }
    id = kv->v.u64 > INT32_MAX ? INT64_MAX : (int64_t)kv->v.u64;
  } else {
    return kiln_status_new(KILN_STATUS_MALFORMED, "%s: %s is a %s, not an integer",
                           kiln_gguf_path(g), key, kiln_gguf_vtype_name(kv->type));
  }
  if (id == -1) {
    *out = -1;
    return NULL;
  }
  if (id < 0 || id >= n_tokens)
    return kiln_status_new(KILN_STATUS_MALFORMED,
                           "%s: %s = %lld is outside the vocabulary (0..%d)", kiln_gguf_path(g), key,
                           (long long)id, (int)n_tokens - 1);
  *out = (int32_t)id;
  return NULL;
}

/* An optional boolean: -1 when absent. */
static kiln_status read_flag(const kiln_gguf *g, const char *key, int *out) {
  *out = -1;
  if (!kiln_gguf_find_kv(g, key)) return NULL;
  bool b;
  KILN_RETURN_IF_ERROR(kiln_gguf_get_bool(g, key, &b));
  *out = b;
  return NULL;
}

/* An ARRAY of `type` with exactly n elements (checked against the token
 * count, so scores and types line up with tokens). */
static kiln_status get_array_n(const kiln_gguf *g, const char *key, kiln_gguf_vtype type,
                               uint64_t n, const kiln_gguf_kv **out) {
  KILN_RETURN_IF_ERROR(kiln_gguf_get_arr(g, key, type, out));
  if ((*out)->n != n)
    return kiln_status_new(KILN_STATUS_MALFORMED, "%s: %s has %llu entries, %s has %llu",
                           kiln_gguf_path(g), key, (unsigned long long)(*out)->n, KEY_TOKENS,
                           (unsigned long long)n);
  return NULL;
}

typedef struct load_arrays {
  const char **texts;
  size_t *lens;
  float *scores;
  int32_t *types;
  const char **merges;
  size_t *merge_lens;
  char *pre;
} load_arrays;

static void free_arrays(load_arrays *a) {
  free(a->texts);
  free(a->lens);
  free(a->scores);
  free(a->types);
  free(a->merges);
  free(a->merge_lens);
  free(a->pre);
}

static kiln_status read_strings(const kiln_gguf *g, const kiln_gguf_kv *kv, const char ***out_s,
                                size_t **out_len) {
  size_t n = (size_t)kv->n;
  *out_s = malloc((n ? n : 1) * sizeof **out_s);
  *out_len = malloc((n ? n : 1) * sizeof **out_len);
  if (!*out_s || !*out_len)
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: %zu strings", kiln_gguf_path(g), n);
  for (size_t i = 0; i < n; i++) {
    kiln_gguf_str s = kiln_gguf_arr_str(g, kv, i);
    (*out_s)[i] = s.ptr;
    (*out_len)[i] = (size_t)s.len;
  }
  return NULL;
}

static kiln_status load(const kiln_gguf *g, load_arrays *a, kiln_vocab **out_vocab) {
  const char *path = kiln_gguf_path(g);
  kiln__vocab_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.name = path;

  const kiln_gguf_kv *model = kiln_gguf_find_kv(g, KEY_MODEL);
  if (!model)
    return kiln_status_new(KILN_STATUS_NOT_FOUND, "%s: no vocabulary (%s is absent)", path,
                           KEY_MODEL);
  if (model->type != KILN_GGUF_STRING)
    return kiln_status_new(KILN_STATUS_MALFORMED, "%s: %s is a %s, not a string", path, KEY_MODEL,
                           kiln_gguf_vtype_name(model->type));
  kiln_gguf_str m;
  KILN_RETURN_IF_ERROR(kiln_gguf_get_text(g, KEY_MODEL, &m)); /* refuses "gpt2\0" */
  if (m.len == 5 && !memcmp(m.ptr, "llama", 5)) {
    spec.kind = KILN_VOCAB_SPM;
  } else if (m.len == 4 && !memcmp(m.ptr, "gpt2", 4)) {
    spec.kind = KILN_VOCAB_BPE;
  } else {
    char q[KILN_QUOTE_CAP(64)];
    return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                           "%s: %s = %s is not supported (kiln reads \"llama\" and \"gpt2\")", path,
                           KEY_MODEL, kiln_quote(q, sizeof q, m.ptr, (size_t)m.len, 64));
  }

  const kiln_gguf_kv *tokens;
  KILN_RETURN_IF_ERROR(kiln_gguf_get_arr(g, KEY_TOKENS, KILN_GGUF_STRING, &tokens));
  if (tokens->n == 0 || tokens->n >= INT32_MAX / 2)
    return kiln_status_new(KILN_STATUS_MALFORMED, "%s: %s has %llu entries", path, KEY_TOKENS,
                           (unsigned long long)tokens->n);
  int32_t n = (int32_t)tokens->n;
  spec.n_tokens = n;
  KILN_RETURN_IF_ERROR(read_strings(g, tokens, &a->texts, &a->lens));
  spec.texts = a->texts;
  spec.text_lens = a->lens;

  /* Scores: SentencePiece merges by them, so an SPM vocabulary must have
   * them; byte-level BPE merges by rank and may omit them. llama.cpp also
   * accepts INT32 scores. */
  const kiln_gguf_kv *scores = kiln_gguf_find_kv(g, KEY_SCORES);
  if (!scores && spec.kind == KILN_VOCAB_SPM)
    return kiln_status_new(KILN_STATUS_NOT_FOUND, "%s: %s is absent (a \"llama\" vocabulary needs it)",
                           path, KEY_SCORES);
  if (scores) {
    kiln_gguf_vtype et = scores->type == KILN_GGUF_ARRAY ? scores->elem_type : scores->type;
    if (scores->type != KILN_GGUF_ARRAY || (et != KILN_GGUF_FLOAT32 && et != KILN_GGUF_INT32))
      return kiln_status_new(KILN_STATUS_MALFORMED,
                             "%s: %s is a %s%s%s, not an array of float32", path, KEY_SCORES,
                             kiln_gguf_vtype_name(scores->type),
                             scores->type == KILN_GGUF_ARRAY ? " of " : "",
                             scores->type == KILN_GGUF_ARRAY ? kiln_gguf_vtype_name(et) : "");
    KILN_RETURN_IF_ERROR(get_array_n(g, KEY_SCORES, et, tokens->n, &scores));
    a->scores = malloc((size_t)n * sizeof *a->scores);
    if (!a->scores) return kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: scores", path);
    for (int32_t i = 0; i < n; i++) {
      a->scores[i] = et == KILN_GGUF_FLOAT32 ? kiln_gguf_arr_f32(scores, (uint64_t)i)
                                             : (float)kiln_gguf_arr_i32(scores, (uint64_t)i);
      /* SentencePiece picks the best-scoring merge: a NaN compares false
       * both ways and an inf always wins, so either would tokenize
       * silently wrong rather than fail */
      if (!isfinite(a->scores[i]))
        return kiln_status_new(KILN_STATUS_MALFORMED, "%s: %s[%d] = %g is not a finite number", path,
                               KEY_SCORES, (int)i, (double)a->scores[i]);
    }
    spec.scores = a->scores;
  }

  const kiln_gguf_kv *types;
  KILN_RETURN_IF_ERROR(get_array_n(g, KEY_TYPES, KILN_GGUF_INT32, tokens->n, &types));
  a->types = malloc((size_t)n * sizeof *a->types);
  if (!a->types) return kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: token types", path);
  for (int32_t i = 0; i < n; i++) a->types[i] = kiln_gguf_arr_i32(types, (uint64_t)i);
  spec.types = a->types;

  if (spec.kind == KILN_VOCAB_BPE) {
    const kiln_gguf_kv *merges;
    KILN_RETURN_IF_ERROR(kiln_gguf_get_arr(g, KEY_MERGES, KILN_GGUF_STRING, &merges));
    if (merges->n >= INT32_MAX)
      return kiln_status_new(KILN_STATUS_MALFORMED, "%s: %s has %llu entries", path, KEY_MERGES,
                             (unsigned long long)merges->n);
    KILN_RETURN_IF_ERROR(read_strings(g, merges, &a->merges, &a->merge_lens));
    spec.n_merges = (size_t)merges->n;
    spec.merges = a->merges;
    spec.merge_lens = a->merge_lens;
    /* Absent: llama.cpp warns and uses "default". */
    const kiln_gguf_kv *pre = kiln_gguf_find_kv(g, KEY_PRE);
    if (pre) {
      if (pre->type != KILN_GGUF_STRING)
        return kiln_status_new(KILN_STATUS_MALFORMED, "%s: %s is a %s, not a string", path,
                               KEY_PRE, kiln_gguf_vtype_name(pre->type));
      kiln_gguf_str p;
      KILN_RETURN_IF_ERROR(kiln_gguf_get_text(g, KEY_PRE, &p)); /* no NUL inside */
      a->pre = malloc((size_t)p.len + 1);
      if (!a->pre) return kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: %s", path, KEY_PRE);
      memcpy(a->pre, p.ptr, (size_t)p.len);
      a->pre[p.len] = '\0';
      spec.pre = a->pre;
    }
  }

  /* llama.cpp's defaults: SPM bos 1, eos 2, unk 0; BPE none (its 11 is
   * GPT-2's "," and no GGUF relies on it). */
  bool spm = spec.kind == KILN_VOCAB_SPM;
  KILN_RETURN_IF_ERROR(read_id(g, "tokenizer.ggml.bos_token_id", spm ? 1 : -1, n, &spec.bos));
  KILN_RETURN_IF_ERROR(read_id(g, "tokenizer.ggml.eos_token_id", spm ? 2 : -1, n, &spec.eos));
  KILN_RETURN_IF_ERROR(read_id(g, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, n, &spec.unk));
  KILN_RETURN_IF_ERROR(read_id(g, "tokenizer.ggml.eot_token_id", -1, n, &spec.eot));
  KILN_RETURN_IF_ERROR(read_flag(g, KEY_ADD_BOS, &spec.add_bos));
  KILN_RETURN_IF_ERROR(read_flag(g, KEY_ADD_PREFIX, &spec.add_space_prefix));
  return kiln__vocab_build(&spec, out_vocab);
}

kiln_status kiln_vocab_load(const kiln_gguf *g, kiln_vocab **out_vocab) {
  if (!g || !out_vocab)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kiln_vocab_load: NULL argument");
  *out_vocab = NULL;
  load_arrays a;
  memset(&a, 0, sizeof a);
  kiln_status st = load(g, &a, out_vocab);
  free_arrays(&a);
  return st;
}
