# GGUF reader, writer, dequantization and quantization.
kiln_gguf_sources = \
	core/src/byteorder.h \
	core/src/gguf_internal.h \
	core/src/gguf_read.c \
	core/src/gguf_get.c \
	core/src/gguf_write.c \
	core/src/dequant.c \
	core/src/quantize.c

kilninclude_HEADERS += core/include/kiln/gguf_write.h
