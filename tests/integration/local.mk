# integration tests: real model files, the plugins as built, the CLI.
check_PROGRAMS += tests/integration/test_golden_cpu tests/integration/test_eps_from_gguf \
	tests/integration/test_fallback tests/integration/test_conf_files tests/integration/test_parity_qwen \
	tests/integration/test_cli_tokenize tests/integration/test_cli_run tests/integration/test_perplexity \
	tests/integration/test_golden_qwen35 tests/integration/test_parity_qwen35 tests/integration/test_model_qwen35 \
	tests/integration/test_output_head tests/integration/test_parity_cpu_fast tests/integration/test_parity_recurrent_guard \
	tests/integration/test_tp_emulation tests/integration/test_session_rewind tests/integration/test_cli_config_origin
TESTS += tests/integration/test_golden_cpu tests/integration/test_eps_from_gguf \
	tests/integration/test_fallback tests/integration/test_conf_files tests/integration/test_parity_qwen \
	tests/integration/test_cli_tokenize tests/integration/test_cli_run tests/integration/test_perplexity \
	tests/integration/test_golden_qwen35 tests/integration/test_parity_qwen35 tests/integration/test_model_qwen35 \
	tests/integration/test_output_head tests/integration/test_parity_cpu_fast tests/integration/test_parity_recurrent_guard \
	tests/integration/test_tp_emulation tests/integration/test_session_rewind tests/integration/test_cli_config_origin \
	tests/integration/test_cli.sh tests/integration/test_cli_hardening.sh tests/integration/test_n_ctx.sh \
	tests/embed/test_embed.sh
EXTRA_DIST += tests/integration/test_cli.sh tests/integration/test_cli_hardening.sh tests/integration/test_n_ctx.sh \
	tests/integration/cli_test_lib.sh \
	tests/embed/test_embed.sh \
	tests/embed/embed_example.c \
	tests/golden/stories260K.golden tests/golden/make_golden.py \
	tests/golden/qwen35-tiny.golden tests/golden/qwen35-tiny.synth tests/golden/make_golden_qwen35.py
tests_integration_test_session_rewind_SOURCES = tests/integration/test_session_rewind.c
tests_integration_test_session_rewind_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_session_rewind_LDADD = $(TEST_LIBS)
tests_integration_test_golden_cpu_SOURCES = tests/integration/test_golden_cpu.c
tests_integration_test_golden_cpu_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_golden_cpu_LDADD = $(TEST_LIBS)
tests_integration_test_eps_from_gguf_SOURCES = tests/integration/test_eps_from_gguf.c
tests_integration_test_eps_from_gguf_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_eps_from_gguf_LDADD = $(TEST_LIBS)
tests_integration_test_fallback_SOURCES = tests/integration/test_fallback.c
tests_integration_test_fallback_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_fallback_LDADD = $(TEST_LIBS)
tests_integration_test_conf_files_SOURCES = tests/integration/test_conf_files.c
tests_integration_test_conf_files_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_conf_files_LDADD = $(TEST_LIBS)
tests_integration_test_parity_qwen_SOURCES = tests/integration/test_parity_qwen.c
tests_integration_test_parity_qwen_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_parity_qwen_LDADD = $(TEST_LIBS)

# The command end to end (tests/kiln_proc.c runs it), checked with jansson.
tests_integration_test_cli_tokenize_SOURCES = tests/integration/test_cli_tokenize.c \
	tests/unit/tokenizer_cases.c tests/unit/tokenizer_cases.h
tests_integration_test_cli_tokenize_CFLAGS = $(TEST_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_test_cli_tokenize_LDADD = $(TEST_LIBS) $(JANSSON_LIBS)
$(tests_integration_test_cli_tokenize_OBJECTS): cli/kiln$(EXEEXT)
tests_integration_test_cli_run_SOURCES = tests/integration/test_cli_run.c
tests_integration_test_cli_run_CFLAGS = $(TEST_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_test_cli_run_LDADD = $(TEST_LIBS) $(JANSSON_LIBS)
$(tests_integration_test_cli_run_OBJECTS): cli/kiln$(EXEEXT)
# Needs tests/plugins/kiln-cfg-origin.la (tests/unit/core.mk), built with
# the other check libraries before any test runs.
tests_integration_test_cli_config_origin_SOURCES = tests/integration/test_cli_config_origin.c
tests_integration_test_cli_config_origin_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_cli_config_origin_LDADD = $(TEST_LIBS)
$(tests_integration_test_cli_config_origin_OBJECTS): cli/kiln$(EXEEXT)
tests_integration_test_perplexity_SOURCES = tests/integration/test_perplexity.c
tests_integration_test_perplexity_CFLAGS = $(TEST_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_test_perplexity_LDADD = $(TEST_LIBS) $(JANSSON_LIBS)
$(tests_integration_test_perplexity_OBJECTS): cli/kiln$(EXEEXT)
EXTRA_DIST += tests/data/perplexity/stories.txt tests/data/perplexity/README.md \
	tests/data/perplexity/stories260K.ppl tests/data/perplexity/make_ppl_reference.py
tests_integration_test_golden_qwen35_SOURCES = tests/integration/test_golden_qwen35.c \
	tests/qwen35_fixture.c tests/qwen35_fixture.h
tests_integration_test_golden_qwen35_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_golden_qwen35_LDADD = $(TEST_LIBS)
$(tests_integration_test_golden_qwen35_OBJECTS): cli/kiln$(EXEEXT)
tests_integration_test_parity_qwen35_SOURCES = tests/integration/test_parity_qwen35.c
tests_integration_test_parity_qwen35_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_parity_qwen35_LDADD = $(TEST_LIBS)
tests_integration_test_model_qwen35_SOURCES = tests/integration/test_model_qwen35.c
tests_integration_test_model_qwen35_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_model_qwen35_LDADD = $(TEST_LIBS)
tests_integration_test_output_head_SOURCES = tests/integration/test_output_head.c
tests_integration_test_output_head_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_output_head_LDADD = $(TEST_LIBS)
tests_integration_test_parity_cpu_fast_SOURCES = tests/integration/test_parity_cpu_fast.c
tests_integration_test_parity_cpu_fast_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_parity_cpu_fast_LDADD = $(TEST_LIBS)
tests_integration_test_parity_recurrent_guard_SOURCES = tests/integration/test_parity_recurrent_guard.c \
	tests/qwen35_fixture.c tests/qwen35_fixture.h
tests_integration_test_parity_recurrent_guard_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_parity_recurrent_guard_LDADD = $(TEST_LIBS)
tests_integration_test_tp_emulation_SOURCES = tests/integration/test_tp_emulation.c
tests_integration_test_tp_emulation_CFLAGS = $(TEST_CFLAGS)
tests_integration_test_tp_emulation_LDADD = $(TEST_LIBS)
