/* libFuzzer target for the SentencePiece tokenizer on llama's vocabulary
 * (ggml-vocab-llama-spm.gguf): see fuzz_tokenizer.h. The round trip holds
 * for every well-formed UTF-8 text except one holding U+2581 "▁", which
 * SentencePiece uses for a space and so decodes as one (llama.cpp too). */
#include "config.h"

#include "fuzz_tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_vocab = fuzz_load_vocab("ggml-vocab-llama-spm.gguf", NULL);
  return 0;
}

static bool no_space_marker(const uint8_t *d, size_t n) {
  for (size_t i = 0; i + 2 < n; i++)
    if (d[i] == 0xe2 && d[i + 1] == 0x96 && d[i + 2] == 0x81) return false;
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_tokenize_one(data, size, no_space_marker);
  return 0;
}
