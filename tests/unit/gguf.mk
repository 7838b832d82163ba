# unit tests: gguf
