# Tokenizers (SentencePiece, byte-level BPE) and chat templates.
# The algorithms and the vocabulary built from arrays; the sanitizer build
# of the tokenizer tests compiles these alone.
kiln_tokenizer_core_sources = \
	core/src/tokenizer_internal.h \
	core/src/strtab.c \
	core/src/pairtab.c \
	core/src/unicode_utf8.c \
	core/src/merge_heap.c \
	core/src/pretokenize.c \
	core/src/vocab.c \
	core/src/tokenize.c \
	core/src/tokenize_special.c \
	core/src/tokenize_spm.c \
	core/src/tokenize_bpe.c \
	core/src/detokenize.c
kiln_tokenizer_sources = $(kiln_tokenizer_core_sources) core/src/vocab_gguf.c
