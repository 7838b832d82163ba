/* libFuzzer target for the byte-level BPE tokenizer on Qwen2's vocabulary
 * (ggml-vocab-qwen2.gguf, pre-tokenizer "qwen2"): see fuzz_tokenizer.h.
 * Byte-level BPE maps every byte to a symbol, so the round trip holds for
 * every well-formed UTF-8 text (Qwen2's pre-tokenizer applies none of
 * llama.cpp's clean-up of spaces before punctuation). */
#include "config.h"

#include "fuzz_tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_vocab = fuzz_load_vocab("ggml-vocab-qwen2.gguf", NULL);
  return 0;
}

static bool always(const uint8_t *d, size_t n) {
  (void)d, (void)n;
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_tokenize_one(data, size, always);
  return 0;
}
