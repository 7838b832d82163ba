/*
 * kiln/tokenizer.h — text to token ids and back, from a GGUF vocabulary.
 *
 * The vocabulary is read from the GGUF keys llama.cpp's converter writes
 * (tokenizer.ggml.model, .tokens, .scores, .token_type, .merges, .pre,
 * .bos_token_id, .eos_token_id, .unknown_token_id, .add_bos_token, ...).
 * Two models:
 *   "llama": SentencePiece (Kudo & Richardson 2018) as llama.cpp's
 *            llm_tokenizer_spm: a "▁" prefix and spaces as "▁", greedy
 *            bigram merging by score, <0xNN> byte fallback.
 *   "gpt2":  byte-level BPE (Radford et al. 2019): a pre-tokenizer regex
 *            chosen by tokenizer.ggml.pre, bytes mapped to printable code
 *            points, merges applied by rank.
 * Both must agree token for token with llama.cpp (tests/unit/test_tokenizer*).
 *
 * Ownership: a kiln_vocab copies what it needs out of the GGUF; it does not
 * keep the kiln_gguf alive. Arrays returned through out_* are malloc'd and
 * the caller's to free().
 */
#ifndef KILN_TOKENIZER_H
#define KILN_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/gguf.h"
#include "kiln/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
typedef enum kiln_token_type {
  KILN_TOKEN_UNDEFINED = 0,
  KILN_TOKEN_NORMAL = 1,
  KILN_TOKEN_UNKNOWN = 2,
  KILN_TOKEN_CONTROL = 3,
  KILN_TOKEN_USER_DEFINED = 4,
  KILN_TOKEN_UNUSED = 5,
  KILN_TOKEN_BYTE = 6
} kiln_token_type;

typedef enum kiln_vocab_kind {
  KILN_VOCAB_SPM = 1, /* tokenizer.ggml.model = "llama" */
  KILN_VOCAB_BPE = 2  /* tokenizer.ggml.model = "gpt2" */
} kiln_vocab_kind;

typedef struct kiln_vocab kiln_vocab;

/* Reads the vocabulary of `g`. Fails with KILN_STATUS_NOT_FOUND when the
 * file has none (naming the key), KILN_STATUS_UNSUPPORTED for another
 * tokenizer.ggml.model or .pre, KILN_STATUS_MALFORMED for arrays of
 * mismatched lengths or ids out of range. */
kiln_status kiln_vocab_load(const kiln_gguf *g, kiln_vocab **out_vocab);
void kiln_vocab_free(kiln_vocab *v);

kiln_vocab_kind kiln_vocab_kind_of(const kiln_vocab *v);
int32_t kiln_vocab_n_tokens(const kiln_vocab *v);
int32_t kiln_vocab_bos(const kiln_vocab *v);  /* -1 when unset */
int32_t kiln_vocab_eos(const kiln_vocab *v);  /* -1 when unset */
int32_t kiln_vocab_eot(const kiln_vocab *v);  /* end of turn (<|im_end|>), -1 when unknown */
bool kiln_vocab_add_bos(const kiln_vocab *v); /* tokenizer.ggml.add_bos_token, or the model's default */
kiln_token_type kiln_vocab_token_type(const kiln_vocab *v, int32_t id);
/* The token's text as stored in the vocabulary (e.g. "▁Hello", "<0x0A>"). */
const char *kiln_vocab_token_text(const kiln_vocab *v, int32_t id);
/* Exact-match lookup of a token's stored text; -1 when absent. */
int32_t kiln_vocab_find(const kiln_vocab *v, const char *text, size_t len);

typedef enum kiln_tokenize_flags {
  KILN_TOKENIZE_ADD_BOS = 1,      /* prepend BOS (the caller decides, from add_bos) */
  KILN_TOKENIZE_PARSE_SPECIAL = 2 /* CONTROL / USER_DEFINED token texts in `text`
                                     become those tokens; without it they are
                                     plain text (user content) */
} kiln_tokenize_flags;

/* Encodes len bytes of UTF-8 `text`. *out_ids is malloc'd (caller frees);
 * *out_n tokens. Invalid UTF-8 is encoded byte by byte, never dropped. */
kiln_status kiln_tokenize(const kiln_vocab *v, const char *text, size_t len, int flags,
                          int32_t **out_ids, size_t *out_n);

/* Appends the bytes token `id` stands for (byte tokens as their byte, "▁" as
 * a space, BPE code points mapped back to bytes; CONTROL tokens as their
 * text only when render_special) to buf[*len..cap), updating *len. Returns
 * KILN_STATUS_OUT_OF_RANGE if it does not fit, INVALID_ARGUMENT for a bad id. */
kiln_status kiln_token_to_piece(const kiln_vocab *v, int32_t id, bool render_special, char *buf,
                                size_t cap, size_t *len);

/* Decodes a whole sequence (a leading space after BOS removed as
 * SentencePiece does); *out_text is malloc'd and NUL-terminated. */
kiln_status kiln_detokenize(const kiln_vocab *v, const int32_t *ids, size_t n,
                            bool render_special, char **out_text, size_t *out_len);

#ifdef __cplusplus
}
#endif
#endif /* KILN_TOKENIZER_H */
