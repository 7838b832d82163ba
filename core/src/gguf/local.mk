# GGUF reader, typed getters, writer, dequantization and quantization.
kiln_gguf_read_sources = \
	core/src/gguf/byteorder.h \
	core/src/gguf/gguf_internal.h \
	core/src/gguf/gguf_vtype.c \
	core/src/gguf/gguf_read.c \
	core/src/gguf/gguf_get.c
kiln_gguf_quant_sources = \
	core/src/gguf/dequant.c \
	core/src/gguf/quantize.c
kiln_gguf_sources = \
	$(kiln_gguf_read_sources) \
	core/src/gguf/gguf_write.c \
	$(kiln_gguf_quant_sources)
