/* Reading the expected-id files of tests/data/tokenizer (format in
 * gen_ids.py) and llama.cpp's .inp/.out pairs, and checking a vocabulary
 * against them. Shared by the tokenizer test programs. */
#ifndef KILN_TESTS_TOKENIZER_CASES_H
#define KILN_TESTS_TOKENIZER_CASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/tokenizer.h"

typedef struct tk_case {
  int flags;          /* KILN_TOKENIZE_* */
  char *text;         /* input bytes (NUL-terminated for printing) */
  size_t len;
  int32_t *ids;       /* expected ids */
  size_t n_ids;
  char *decoded;      /* llama.cpp's llama_detokenize of ids, or NULL */
  size_t decoded_len;
  int line;           /* line in the file, for messages */
} tk_case;

typedef struct tk_cases {
  tk_case *v;
  size_t n;
} tk_cases;

/* Reads an .ids file; false (and a message on stderr) if it cannot. */
bool tk_read_ids_file(const char *path, tk_cases *out);

/* Reads llama.cpp's test-tokenizer-0 pair: inputs are split on
 * "\n__ggml_vocab_test__\n" exactly as read_tests() does (so each input
 * loses the newline before the separator), outputs are one line of ids
 * per input; flags are 0 (add_special = false, parse_special = false). */
bool tk_read_llama_pair(const char *inp_path, const char *out_path, tk_cases *out);

void tk_cases_free(tk_cases *c);

/* Tokenizes every case and compares; prints each mismatch (input, want,
 * got) to stderr. Returns the number that matched. */
size_t tk_check_cases(const kiln_vocab *v, const tk_cases *c, const char *what);

/* For every case with valid UTF-8 input: decode(encode(text)) == text byte
 * for byte, encoding without BOS and rendering special tokens when the
 * case parses them (SPM cases that parse them are skipped). Returns
 * the number checked; *out_bad counts failures, printed to stderr. */
size_t tk_check_roundtrip(const kiln_vocab *v, const tk_cases *c, const char *what,
                          size_t *out_bad);

/* For every case with llama.cpp's decoding (SPM: not starting with BOS):
 * kiln_detokenize of the expected ids equals it byte for byte, rendering
 * special tokens when the case parses them. Returns the number checked;
 * *out_bad counts failures, printed to stderr. */
size_t tk_check_decode(const kiln_vocab *v, const tk_cases *c, const char *what,
                       size_t *out_bad);

/* Path of tests/data/tokenizer/<name> under $KILN_SRCDIR, malloc'd, or NULL. */
char *tk_data_path(const char *name);

#endif
