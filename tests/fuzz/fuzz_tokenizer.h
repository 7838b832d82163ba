/* The body both tokenizer fuzz targets share (fuzz_tokenizer_spm.c,
 * fuzz_tokenizer_bpe.c): any bytes tokenize, with and without special-token
 * parsing, into ids inside the vocabulary that detokenize; and for
 * well-formed UTF-8 without special parsing, decode(encode(x)) == x
 * exactly. `round_trip_ok` excludes the texts for which a vocabulary's own
 * rules make the round trip lossy on purpose. */
#ifndef KILN_FUZZ_TOKENIZER_H
#define KILN_FUZZ_TOKENIZER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_vocab.h"

static kiln_vocab *fuzz_vocab;

static void fuzz_tokenize_one(const uint8_t *data, size_t size,
                              bool (*round_trip_ok)(const uint8_t *, size_t)) {
  const kiln_vocab *v = fuzz_vocab;
  int32_t n_vocab = kiln_vocab_n_tokens(v);
  for (int flags = 0; flags <= KILN_TOKENIZE_PARSE_SPECIAL; flags += KILN_TOKENIZE_PARSE_SPECIAL) {
    int32_t *ids = NULL;
    size_t n = 0;
    kiln_status st = kiln_tokenize(v, (const char *)data, size, flags, &ids, &n);
    if (st) abort(); /* any bytes tokenize: invalid UTF-8 byte by byte */
    for (size_t i = 0; i < n; i++)
      if (ids[i] < 0 || ids[i] >= n_vocab) abort();
    char *text = NULL;
    size_t len = 0;
    st = kiln_detokenize(v, ids, n, flags != 0, &text, &len);
    if (st) abort();
    if (!flags && fuzz_valid_utf8(data, size) && round_trip_ok(data, size) &&
        (len != size || memcmp(text, data, size) != 0))
      abort(); /* decode(encode(x)) != x */
    free(text);
    free(ids);
  }
}

#endif
