# unit tests: gguf (reader, writer, dequantization, quantization)
gguf_unit_tests = \
	tests/unit/test_gguf_read \
	tests/unit/test_gguf_malformed \
	tests/unit/test_gguf_write \
	tests/unit/test_dequant \
	tests/unit/test_quantize
check_PROGRAMS += $(gguf_unit_tests)
TESTS += $(gguf_unit_tests)
EXTRA_DIST += tests/unit/gguf_testbuf.h
# llama.cpp's Q5_K results (tests/data/quant/README.md) for test_dequant and
# test_quantize, and the program that wrote them (built by hand, not here).
EXTRA_DIST += tests/data/quant/q5_k_ggml.txt tests/data/quant/make_q5_k_ref.c \
	tests/data/quant/README.md

tests_unit_test_gguf_read_SOURCES = tests/unit/test_gguf_read.c
tests_unit_test_gguf_read_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_gguf_read_LDADD = $(TEST_LIBS)

# The reader is compiled in, so the counting allocator (tests/heap_count.h)
# sees its every allocation: the suite measures each open's peak heap.
tests_unit_test_gguf_malformed_SOURCES = tests/unit/test_gguf_malformed.c tests/unit/gguf_testbuf.h \
	$(kiln_gguf_read_sources) core/src/base/status.c core/src/base/escape.c \
	$(heap_count_sources)
tests_unit_test_gguf_malformed_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_gguf_malformed_LDFLAGS = $(heap_count_ldflags)
tests_unit_test_gguf_malformed_LDADD = tests/libkilntest.la $(CMOCKA_LIBS) -lm

tests_unit_test_gguf_write_SOURCES = tests/unit/test_gguf_write.c
tests_unit_test_gguf_write_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_gguf_write_LDADD = $(TEST_LIBS)

tests_unit_test_dequant_SOURCES = tests/unit/test_dequant.c tests/unit/q5_k_ref.h
tests_unit_test_dequant_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_dequant_LDADD = $(TEST_LIBS)

tests_unit_test_quantize_SOURCES = tests/unit/test_quantize.c tests/unit/q5_k_ref.h
tests_unit_test_quantize_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_quantize_LDADD = $(TEST_LIBS)

# The loader robustness tests again under ASan and UBSan, with the reader
# compiled into the program so libkiln itself stays uninstrumented.
if HAVE_SANITIZERS
check_PROGRAMS += tests/unit/test_gguf_malformed_san
TESTS += tests/unit/test_gguf_malformed_san
tests_unit_test_gguf_malformed_san_SOURCES = tests/unit/test_gguf_malformed.c \
	$(kiln_gguf_read_sources) core/src/base/status.c core/src/base/escape.c \
	$(heap_count_sources)
tests_unit_test_gguf_malformed_san_CFLAGS = $(TEST_CFLAGS) $(KILN_SAN_CFLAGS)
tests_unit_test_gguf_malformed_san_LDFLAGS = $(KILN_SAN_CFLAGS) $(heap_count_ldflags)
tests_unit_test_gguf_malformed_san_LDADD = tests/libkilntest.la $(CMOCKA_LIBS) -lm

# The quantizers under UBSan too: extreme inputs must never reach an
# undefined float-to-int conversion.
check_PROGRAMS += tests/unit/test_quantize_san
TESTS += tests/unit/test_quantize_san
tests_unit_test_quantize_san_SOURCES = tests/unit/test_quantize.c tests/unit/q5_k_ref.h \
	$(kiln_gguf_quant_sources) core/src/base/status.c
tests_unit_test_quantize_san_CFLAGS = $(TEST_CFLAGS) $(KILN_SAN_CFLAGS)
tests_unit_test_quantize_san_LDFLAGS = $(KILN_SAN_CFLAGS)
tests_unit_test_quantize_san_LDADD = tests/libkilntest.la $(CMOCKA_LIBS) -lm
endif
