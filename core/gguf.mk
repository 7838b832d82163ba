# GGUF reader, writer, dequantization and quantization.
kiln_gguf_sources =
