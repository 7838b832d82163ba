# Tokenizers (SentencePiece, byte-level BPE) and chat templates. The
# algorithms and the vocabulary built from arrays; the sanitizer build of
# the tokenizer tests compiles these alone.
kiln_tokenizer_core_sources = \
	core/src/tokenizer/tokenizer_internal.h \
	core/src/tokenizer/strtab.c \
	core/src/tokenizer/pairtab.c \
	core/src/tokenizer/unicode_utf8.c \
	core/src/tokenizer/merge_heap.c \
	core/src/tokenizer/pretokenize.c \
	core/src/tokenizer/vocab.c \
	core/src/tokenizer/token_ids.c \
	core/src/tokenizer/tokenize.c \
	core/src/tokenizer/tokenize_special.c \
	core/src/tokenizer/tokenize_spm.c \
	core/src/tokenizer/tokenize_bpe.c \
	core/src/tokenizer/detokenize.c
kiln_tokenizer_sources = \
	$(kiln_tokenizer_core_sources) \
	core/src/tokenizer/vocab_gguf.c \
	core/src/tokenizer/chat.c \
	core/src/tokenizer/chat_turn.c
