/* The tokenizers' shared state and helpers: the vocabulary (vocab.c,
 * vocab_gguf.c), the string and pair hash tables (strtab.c, pairtab.c),
 * UTF-8 and GPT-2 byte-level helpers (unicode_utf8.c), the pre-tokenizers
 * (pretokenize.c), the merge heap (merge_heap.c), the two merge algorithms
 * (tokenize_spm.c, tokenize_bpe.c) and special-token splitting
 * (tokenize_special.c). Internal to libkiln: names start with kiln__ so
 * they never collide with the public kiln_ API. */
#ifndef KILN_SRC_TOKENIZER_INTERNAL_H
#define KILN_SRC_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tokenizer.h"

/* ---- growable id array ------------------------------------------------ */

typedef struct kiln__ids {
  int32_t *v;
  size_t n, cap;
} kiln__ids;

/* Appends id; KILN_STATUS_NO_MEMORY when growing fails. */
kiln_status kiln__ids_push(kiln__ids *a, int32_t id);

/* ---- string table: text -> id (strtab.c) ------------------------------ */

/* Open addressing over an arena of strings: each entry is a byte string
 * (not necessarily NUL-free) with an id equal to its insertion order.
 * The vocabulary's token texts are entries 0..n_tokens-1; BPE merges may
 * intern further strings (parts of merges that are not tokens), which get
 * ids >= n_tokens and are never returned to callers as token ids. */
typedef struct kiln__strtab {
  char *arena;          /* entry texts, each followed by a NUL */
  size_t arena_len, arena_cap;
  uint64_t *off;        /* entry i starts at arena + off[i] */
  uint32_t *len;        /* entry i's length in bytes */
  int32_t n, cap;       /* entries used / allocated */
  int32_t *slots;       /* entry id + 1; 0 = empty */
  uint64_t mask;        /* slot count - 1 (a power of two) */
} kiln__strtab;

kiln_status kiln__strtab_init(kiln__strtab *t, int32_t expected);
void kiln__strtab_free(kiln__strtab *t);
/* The id of text, or -1. */
int32_t kiln__strtab_find(const kiln__strtab *t, const char *text, size_t len);
/* Adds text as entry t->n and returns its id in *out_id; if it is already
 * present, *out_id is the existing id and *out_added false. */
kiln_status kiln__strtab_add(kiln__strtab *t, const char *text, size_t len, int32_t *out_id,
                             bool *out_added);
static inline const char *kiln__strtab_text(const kiln__strtab *t, int32_t id) {
  return t->arena + t->off[id];
}

/* ---- pair table: (left id, right id) -> merge (pairtab.c) ------------- */

typedef struct kiln__pair_slot {
  uint64_t key;   /* (left << 32) | right; UINT64_MAX = empty */
  int32_t rank;   /* index in tokenizer.ggml.merges */
  int32_t merged; /* strtab id of left+right */
} kiln__pair_slot;

typedef struct kiln__pairtab {
  kiln__pair_slot *slots;
  uint64_t mask;
  size_t n;
} kiln__pairtab;

kiln_status kiln__pairtab_init(kiln__pairtab *t, size_t expected);
void kiln__pairtab_free(kiln__pairtab *t);
/* Inserts unless the pair is present (the first, lowest rank wins, as
 * llama.cpp's bpe_ranks.emplace). */
void kiln__pairtab_add(kiln__pairtab *t, int32_t left, int32_t right, int32_t rank,
                       int32_t merged);
/* The slot of (left, right), or NULL. */
const kiln__pair_slot *kiln__pairtab_find(const kiln__pairtab *t, int32_t left, int32_t right);

/* ---- UTF-8 and byte-level helpers (unicode_utf8.c) --------------------- */

/* llama.cpp's unicode_len_utf8: the length a lead byte announces, from its
 * high four bits only (continuation and invalid bytes count as 1). The SPM
 * and BPE symbol splitters use it, so invalid input splits as it does
 * there. */
size_t kiln__utf8_lead_len(uint8_t b);

/* Decodes one well-formed UTF-8 sequence at s[0..n) (no overlongs, no
 * surrogates, at most U+10FFFF). Returns its length (1..4) and the code
 * point in *out_cp, or 0 if the bytes there are not valid UTF-8. */
size_t kiln__utf8_decode(const uint8_t *s, size_t n, uint32_t *out_cp);

/* Encodes cp (< 0x110000) into out[0..4); returns the length. */
size_t kiln__utf8_encode(uint32_t cp, char *out);

/* GPT-2's bytes_to_unicode (Radford et al. 2019, encoder.py): the code
 * point byte b is written as in a byte-level BPE vocabulary. */
uint32_t kiln__byte_to_cp(uint8_t b);
/* The inverse: the byte for code point cp, or -1 if cp is not one of the
 * 256 byte code points. */
int kiln__cp_to_byte(uint32_t cp);

/* ---- pre-tokenizers (pretokenize.c) ------------------------------------ */

typedef enum kiln__pre_kind {
  KILN__PRE_NONE = 0,   /* SPM: no pre-tokenizer */
  KILN__PRE_DEFAULT,    /* llama.cpp LLAMA_VOCAB_PRE_TYPE_DEFAULT */
  KILN__PRE_GPT2,       /* "gpt-2" */
  KILN__PRE_LLAMA3,     /* "llama-bpe", "llama3", "llama-v3" */
  KILN__PRE_QWEN2,      /* "qwen2", "deepseek-r1-qwen" */
  KILN__PRE_QWEN35      /* "qwen35" */
} kiln__pre_kind;

#define KILN__PRE_MAX_REGEX 4

typedef struct kiln__pretok {
  kiln__pre_kind kind;
  int n_regex;
  void *code[KILN__PRE_MAX_REGEX]; /* pcre2_code_8 *, compiled with UTF | UCP */
} kiln__pretok;

/* Maps a tokenizer.ggml.pre value to its kind and llama.cpp's per-type
 * flags; KILN_STATUS_UNSUPPORTED naming `pre` for any other value. */
kiln_status kiln__pretok_lookup(const char *pre, kiln__pre_kind *out_kind, bool *out_ignore_merges,
                                bool *out_clean_spaces, bool *out_add_bos);
kiln_status kiln__pretok_init(kiln__pretok *p, kiln__pre_kind kind);
void kiln__pretok_free(kiln__pretok *p);

/* One pre-token: bytes [off, off+len) of the text. */
typedef struct kiln__span {
  size_t off, len;
} kiln__span;

typedef struct kiln__spans {
  kiln__span *v;
  size_t n, cap;
} kiln__spans;

/* Splits text[0..len) into words. Well-formed UTF-8 runs go through the
 * regexes; each byte of an invalid sequence becomes a word of its own (see
 * pretokenize.c for why). out is reset first; the caller frees out->v. */
kiln_status kiln__pretokenize(const kiln__pretok *p, const char *text, size_t len,
                              kiln__spans *out);

/* ---- the vocabulary ---------------------------------------------------- */

/* A token's effective attributes (llama.cpp's llama_token_attr bits that
 * change behaviour): its token_type, plus CONTROL for the end-of-generation
 * and fill-in-the-middle tokens llama.cpp recognizes by their text (see
 * vocab.c). CONTROL and UNKNOWN tokens are hidden unless special tokens are
 * rendered; all three kinds are cut out of text with PARSE_SPECIAL. */
enum {
  KILN__ATTR_CONTROL = 1,
  KILN__ATTR_USER_DEFINED = 2,
  KILN__ATTR_UNKNOWN = 4
};

/* llama.cpp's per-vocabulary switches that change how text is split or
 * decoded. */
struct kiln_vocab {
  kiln_vocab_kind kind;
  int32_t n_tokens;
  kiln__strtab strs;        /* token texts are ids 0..n_tokens-1 */
  float *scores;            /* n_tokens; 0 when the GGUF has none */
  uint8_t *types;           /* n_tokens kiln_token_type, as the file says */
  uint8_t *attr;            /* n_tokens KILN__ATTR_* bits: how llama.cpp treats the token */

  int32_t bos, eos, unk, eot; /* -1 = unset */
  bool add_bos;
  bool add_space_prefix;    /* SPM: prepend "▁" to the first text fragment */
  bool clean_spaces;        /* BPE decode: llama.cpp's clean_up_tokenization_spaces */
  bool ignore_merges;       /* BPE: a pre-token that is a whole token is taken as is */

  /* SPM: the id of <0xNN> (else of the one-byte token), -1 if neither.
   * BPE: the id of the token for byte b's code point, -1 if absent. */
  int32_t byte_token[256];
  /* BPE: the strtab id of byte b's code point text (a token, or a merge
   * part interned beside the tokens), -1 if neither: a word's first
   * symbols. */
  int32_t byte_sym[256];

  kiln__pairtab merges;     /* BPE */
  kiln__pretok pretok;      /* BPE */

  /* Tokens with any KILN__ATTR_* bit, longest text first (ties by id):
   * the order tokenizer_st_partition tries them in. */
  int32_t *special;
  size_t n_special;
};

/* Everything a vocabulary is built from, as arrays in memory (what
 * kiln_vocab_load reads out of a GGUF, or what a test writes by hand). */
typedef struct kiln__vocab_spec {
  kiln_vocab_kind kind;
  int32_t n_tokens;
  const char *const *texts;  /* n_tokens strings */
  const size_t *text_lens;   /* n_tokens lengths */
  const float *scores;       /* n_tokens, or NULL (all 0) */
  const int32_t *types;      /* n_tokens kiln_token_type values, or NULL (all NORMAL) */
  size_t n_merges;           /* BPE: "left right" strings */
  const char *const *merges;
  const size_t *merge_lens;
  const char *pre;           /* BPE: tokenizer.ggml.pre, NULL = "default" */
  int32_t bos, eos, unk, eot; /* -1 = unset; eot -1 = look it up by text */
  int add_bos;               /* -1 = the model's default */
  int add_space_prefix;      /* -1 = the model's default */
  const char *name;          /* for messages (the GGUF path) */
} kiln__vocab_spec;

/* Builds a vocabulary from spec, validating it (ids in range, token types
 * known, merges well formed, no duplicate tokens). Errors name spec->name
 * and the key or index at fault. */
kiln_status kiln__vocab_build(const kiln__vocab_spec *spec, kiln_vocab **out_vocab);

/* The id of text among the tokens (not interned merge parts), or -1. */
static inline int32_t kiln__vocab_find(const kiln_vocab *v, const char *text, size_t len) {
  int32_t id = kiln__strtab_find(&v->strs, text, len);
  return id < v->n_tokens ? id : -1;
}

/* ---- merge heap (merge_heap.c) ---------------------------------------- */

/* A candidate merge of symbols left and right. The heap pops the highest
 * key first (SPM: the merged token's score; BPE: minus the merge rank), and
 * among equal keys the leftmost, as llama.cpp's comparators. */
typedef struct kiln__bigram {
  double key;
  int32_t left, right;
  int32_t a, b;   /* what the symbols were when queued (sizes or ids), to spot stale entries */
} kiln__bigram;

typedef struct kiln__heap {
  kiln__bigram *v;
  size_t n, cap;
} kiln__heap;

kiln_status kiln__heap_push(kiln__heap *h, kiln__bigram b);
/* Pops the top into *out; false when empty. */
bool kiln__heap_pop(kiln__heap *h, kiln__bigram *out);

/* ---- the algorithms ---------------------------------------------------- */

/* SentencePiece BPE as llama.cpp's llm_tokenizer_spm_session: text is
 * already escaped ("▁" for spaces, prefix added). Appends ids to out. */
kiln_status kiln__spm_encode(const kiln_vocab *v, const char *text, size_t len, kiln__ids *out);

/* Byte-level BPE as llama.cpp's llm_tokenizer_bpe_session: pre-tokenize,
 * map bytes to code points, merge by rank. Appends ids to out. */
kiln_status kiln__bpe_encode(const kiln_vocab *v, const char *text, size_t len, kiln__ids *out);

/* One piece of text after special-token splitting. */
typedef struct kiln__fragment {
  int32_t token;      /* >= 0: a special token; -1: raw text */
  size_t off, len;    /* raw text bytes */
} kiln__fragment;

typedef struct kiln__fragments {
  kiln__fragment *v;
  size_t n, cap;
} kiln__fragments;

/* llama.cpp's tokenizer_st_partition: text as one raw fragment, then each
 * special token (longest first) is cut out of every raw fragment. With
 * parse_special false nothing is cut (kiln's rule: user text never yields
 * special tokens). The caller frees out->v. */
kiln_status kiln__split_special(const kiln_vocab *v, const char *text, size_t len,
                                bool parse_special, kiln__fragments *out);

#endif /* KILN_SRC_TOKENIZER_INTERNAL_H */
