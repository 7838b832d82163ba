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
 * Byte-level BPE pre-tokenizers (tokenizer.ggml.pre): "qwen2" (and
 * "deepseek-r1-qwen"), "qwen35", "llama-bpe" ("llama3", "llama-v3"),
 * "gpt-2", and "default" (also used when the key is absent, as llama.cpp
 * does); their regexes run through PCRE2 with Unicode properties.
 *
 * Where kiln differs from llama.cpp on purpose:
 *  - PARSE_SPECIAL off: llama.cpp still turns USER_DEFINED token texts in
 *    the prompt into those tokens; kiln turns no special text into a token.
 *  - Invalid UTF-8 in byte-level BPE: llama.cpp replaces each bad byte with
 *    U+FFFD; kiln encodes the bytes themselves, so decoding restores them.
 *    (SentencePiece keeps the bytes in both.)
 *  - Decoding with BOS first: kiln drops SentencePiece's prefix space from
 *    the piece after BOS (see kiln_detokenize).
 *  - Unicode categories come from the installed PCRE2 (Unicode 14 in
 *    Debian 12's 10.42), so characters assigned later (CJK extension H)
 *    may split otherwise than in llama.cpp's tables.
 * Like llama.cpp, and unlike Hugging Face's tokenizer.json for Qwen, kiln
 * does not NFC-normalize the text first.
 *
 * Ownership: a kiln_vocab copies what it needs out of the GGUF; it does not
 * keep the kiln_gguf alive. Arrays returned through out_* are malloc'd and
 * the caller's to free(). A loaded kiln_vocab is never modified, so any
 * number of threads may tokenize and decode with it at once.
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
 * mismatched lengths or ids out of range. Every message names the file and
 * the key (and the index for a bad array entry).
 * Required: tokenizer.ggml.model, .tokens and .token_type (values 0..6),
 * plus .scores for "llama" and .merges ("left right") for "gpt2"; .scores,
 * if present, must match .tokens in length (float32, or int32 as llama.cpp
 * accepts). Duplicate token texts are MALFORMED (llama.cpp refuses them
 * too). Special ids (.bos_token_id, .eos_token_id, .unknown_token_id,
 * .eot_token_id): any integer type; -1 or 0xFFFFFFFF means "none"; other
 * values outside the vocabulary are MALFORMED. Absent: llama.cpp's
 * defaults, bos 1, eos 2, unk 0 for "llama" and none for "gpt2".
 * tokenizer.ggml.add_bos_token defaults to true for "llama" and
 * "llama-bpe", false otherwise; true without a BOS id is MALFORMED. */
kiln_status kiln_vocab_load(const kiln_gguf *g, kiln_vocab **out_vocab);
void kiln_vocab_free(kiln_vocab *v);

kiln_vocab_kind kiln_vocab_kind_of(const kiln_vocab *v);
int32_t kiln_vocab_n_tokens(const kiln_vocab *v);
int32_t kiln_vocab_bos(const kiln_vocab *v);  /* -1 when unset */
int32_t kiln_vocab_eos(const kiln_vocab *v);  /* -1 when unset */
/* End of turn: tokenizer.ggml.eot_token_id when present, else the token
 * "<|im_end|>", "<|eot_id|>" or "<end_of_turn>" (first found); -1 when
 * none. */
int32_t kiln_vocab_eot(const kiln_vocab *v);
bool kiln_vocab_add_bos(const kiln_vocab *v); /* tokenizer.ggml.add_bos_token, or the model's default */
/* The type tokenizer.ggml.token_type gives; KILN_TOKEN_UNDEFINED for an id
 * outside the vocabulary. */
kiln_token_type kiln_vocab_token_type(const kiln_vocab *v, int32_t id);
/* The token's text as stored in the vocabulary (e.g. "▁Hello", "<0x0A>"),
 * NUL-terminated, valid while v lives; NULL for an id outside it. */
const char *kiln_vocab_token_text(const kiln_vocab *v, int32_t id);
/* Exact-match lookup of a token's stored text (len bytes, hashed: O(1));
 * -1 when absent. */
int32_t kiln_vocab_find(const kiln_vocab *v, const char *text, size_t len);

typedef enum kiln_tokenize_flags {
  KILN_TOKENIZE_ADD_BOS = 1,      /* prepend BOS (the caller decides, from add_bos) */
  KILN_TOKENIZE_PARSE_SPECIAL = 2 /* CONTROL / USER_DEFINED token texts in `text`
                                     become those tokens; without it they are
                                     plain text (user content) */
} kiln_tokenize_flags;

/* Encodes len bytes of UTF-8 `text` (NULL allowed when len is 0). *out_ids
 * is malloc'd (caller frees, also when *out_n is 0); *out_n tokens. Invalid
 * UTF-8 is encoded byte by byte, never dropped. An empty text gives no
 * tokens (just BOS with ADD_BOS).
 * PARSE_SPECIAL cuts special tokens out of the text first, as llama.cpp's
 * tokenizer_st_partition: CONTROL, USER_DEFINED and UNKNOWN tokens, and the
 * end-of-generation / fill-in-the-middle texts llama.cpp makes CONTROL
 * (e.g. "</s>" in Qwen2's vocabulary), longest text first. SentencePiece
 * puts its "▁" prefix before the text at the start and after each special
 * token, as llama.cpp does.
 * Errors: KILN_STATUS_INVALID_ARGUMENT for NULL pointers, unknown flags, or
 * ADD_BOS with a vocabulary that has no BOS; KILN_STATUS_NO_MEMORY. */
kiln_status kiln_tokenize(const kiln_vocab *v, const char *text, size_t len, int flags,
                          int32_t **out_ids, size_t *out_n);

/* Appends the bytes token `id` stands for (byte tokens as their byte, "▁" as
 * a space, BPE code points mapped back to bytes; CONTROL tokens as their
 * text only when render_special) to buf[*len..cap), updating *len. Returns
 * KILN_STATUS_OUT_OF_RANGE if it does not fit, INVALID_ARGUMENT for a bad id.
 * As llama.cpp's llama_token_to_piece: UNKNOWN tokens, and the texts
 * llama.cpp treats as CONTROL whatever their type (see kiln_tokenize), show
 * like CONTROL ones; USER_DEFINED tokens always show as their text; UNUSED
 * and UNDEFINED tokens give nothing; no space is stripped. On failure buf and *len are
 * left as they were. */
kiln_status kiln_token_to_piece(const kiln_vocab *v, int32_t id, bool render_special, char *buf,
                                size_t cap, size_t *len);

/* Decodes a whole sequence (a leading space after BOS removed as
 * SentencePiece does); *out_text is malloc'd and NUL-terminated.
 * The pieces of kiln_token_to_piece, concatenated, with llama.cpp's
 * llama_detokenize(remove_special = false) adjustments: for SentencePiece
 * (add_space_prefix), one space comes off the first piece after any leading
 * BOS tokens, so decode(encode(x)) == x with or without BOS (llama.cpp takes
 * it off the very first piece, which leaves " x" after a BOS); for the
 * "gpt-2", "default" and "llama-bpe" pre-tokenizers, llama.cpp's
 * clean_up_tokenization_spaces (" ," -> ",", " 's" -> "'s", ...).
 * Errors: KILN_STATUS_INVALID_ARGUMENT for NULL pointers or an id outside
 * the vocabulary (naming its index); KILN_STATUS_NO_MEMORY. */
kiln_status kiln_detokenize(const kiln_vocab *v, const int32_t *ids, size_t n,
                            bool render_special, char **out_text, size_t *out_len);

#ifdef __cplusplus
}
#endif
#endif /* KILN_TOKENIZER_H */
