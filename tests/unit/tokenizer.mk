# unit tests: tokenizer
