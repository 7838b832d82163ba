# unit tests: tokenizer (SentencePiece, byte-level BPE, vocabulary loading).
# The expected-id files they read are in tests/data/tokenizer (see
# gen_ids.py there for how they were made).
tokenizer_unit_tests = \
	tests/unit/test_tokenizer_algo \
	tests/unit/test_tokenizer_vocab \
	tests/unit/test_tokenizer_spm \
	tests/unit/test_tokenizer_qwen
check_PROGRAMS += $(tokenizer_unit_tests)
TESTS += $(tokenizer_unit_tests)
EXTRA_DIST += \
	tests/data/tokenizer/gen_ids.py \
	tests/data/tokenizer/stories260k.ids \
	tests/data/tokenizer/llama_spm_extra.ids \
	tests/data/tokenizer/qwen2.ids \
	tests/data/tokenizer/qwen35.ids \
	tests/data/tokenizer/qwen2_as_gpt2.ids \
	tests/data/tokenizer/qwen2_as_llama3.ids \
	tests/data/tokenizer/qwen2_as_default.ids \
	tests/data/tokenizer/qwen2_special_hf.ids \
	tests/data/tokenizer/gen_special_ids.py

# The algorithm tests reach internal kiln__ functions through the
# internal header.
tokenizer_test_cflags = $(TEST_CFLAGS) -I$(top_srcdir)/core/src
tokenizer_cases_sources = tests/unit/tokenizer_cases.c tests/unit/tokenizer_cases.h

tests_unit_test_tokenizer_algo_SOURCES = tests/unit/test_tokenizer_algo.c
tests_unit_test_tokenizer_algo_CFLAGS = $(tokenizer_test_cflags)
tests_unit_test_tokenizer_algo_LDADD = $(TEST_LIBS)

tests_unit_test_tokenizer_vocab_SOURCES = tests/unit/test_tokenizer_vocab.c
tests_unit_test_tokenizer_vocab_CFLAGS = $(tokenizer_test_cflags)
tests_unit_test_tokenizer_vocab_LDADD = $(TEST_LIBS)

tests_unit_test_tokenizer_spm_SOURCES = tests/unit/test_tokenizer_spm.c $(tokenizer_cases_sources)
tests_unit_test_tokenizer_spm_CFLAGS = $(tokenizer_test_cflags)
tests_unit_test_tokenizer_spm_LDADD = $(TEST_LIBS)

tests_unit_test_tokenizer_qwen_SOURCES = tests/unit/test_tokenizer_qwen.c $(tokenizer_cases_sources)
tests_unit_test_tokenizer_qwen_CFLAGS = $(tokenizer_test_cflags)
tests_unit_test_tokenizer_qwen_LDADD = $(TEST_LIBS)

# The in-memory algorithm tests again under ASan and UBSan, with the
# tokenizer compiled into the program (vocab_gguf.c left out: these tests
# build vocabularies from arrays), so libkiln itself stays uninstrumented.
if HAVE_SANITIZERS
check_PROGRAMS += tests/unit/test_tokenizer_algo_san
TESTS += tests/unit/test_tokenizer_algo_san
tests_unit_test_tokenizer_algo_san_SOURCES = tests/unit/test_tokenizer_algo.c \
	$(kiln_tokenizer_core_sources) core/src/base/status.c core/src/base/escape.c
tests_unit_test_tokenizer_algo_san_CFLAGS = $(tokenizer_test_cflags) $(PCRE2_CFLAGS) \
	$(XXHASH_CFLAGS) $(KILN_SAN_CFLAGS)
tests_unit_test_tokenizer_algo_san_LDFLAGS = $(KILN_SAN_CFLAGS)
tests_unit_test_tokenizer_algo_san_LDADD = tests/libkilntest.la $(PCRE2_LIBS) $(XXHASH_LIBS) \
	$(CMOCKA_LIBS) -lm
endif
