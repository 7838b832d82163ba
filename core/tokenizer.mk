# Tokenizers (SentencePiece, byte-level BPE) and chat templates.
kiln_tokenizer_sources =
