# unit tests: cpu
#
# The suites link the cpu backend's op library directly (plus libkiln for
# kiln_status, kiln_quantize and kiln_dequantize), except test_cpu_plugin,
# which loads the built kiln-cpu.so through core's plugin loader.
check_LTLIBRARIES += tests/unit/libkilncputest.la
tests_unit_libkilncputest_la_SOURCES = tests/unit/test_cpu_common.c tests/unit/test_cpu_common.h
tests_unit_libkilncputest_la_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/backends/cpu

kiln_cpu_test_cflags = $(TEST_CFLAGS) -I$(top_srcdir)/backends/cpu
kiln_cpu_test_libs = tests/unit/libkilncputest.la backends/cpu/libkilncpuops.la $(TEST_LIBS)

kiln_cpu_tests = \
	tests/unit/test_cpu_rms_norm \
	tests/unit/test_cpu_rope \
	tests/unit/test_cpu_mul_mat \
	tests/unit/test_cpu_attention \
	tests/unit/test_cpu_ops \
	tests/unit/test_cpu_threads \
	tests/unit/test_cpu_qwen35 \
	tests/unit/test_cpu_plugin
check_PROGRAMS += $(kiln_cpu_tests)
TESTS += $(kiln_cpu_tests)

tests_unit_test_cpu_rms_norm_SOURCES = tests/unit/test_cpu_rms_norm.c
tests_unit_test_cpu_rms_norm_CFLAGS = $(kiln_cpu_test_cflags)
tests_unit_test_cpu_rms_norm_LDADD = $(kiln_cpu_test_libs)

tests_unit_test_cpu_rope_SOURCES = tests/unit/test_cpu_rope.c
tests_unit_test_cpu_rope_CFLAGS = $(kiln_cpu_test_cflags)
tests_unit_test_cpu_rope_LDADD = $(kiln_cpu_test_libs)

tests_unit_test_cpu_mul_mat_SOURCES = tests/unit/test_cpu_mul_mat.c
tests_unit_test_cpu_mul_mat_CFLAGS = $(kiln_cpu_test_cflags)
tests_unit_test_cpu_mul_mat_LDADD = $(kiln_cpu_test_libs)

tests_unit_test_cpu_attention_SOURCES = tests/unit/test_cpu_attention.c
tests_unit_test_cpu_attention_CFLAGS = $(kiln_cpu_test_cflags)
tests_unit_test_cpu_attention_LDADD = $(kiln_cpu_test_libs)

tests_unit_test_cpu_ops_SOURCES = tests/unit/test_cpu_ops.c
tests_unit_test_cpu_ops_CFLAGS = $(kiln_cpu_test_cflags)
tests_unit_test_cpu_ops_LDADD = $(kiln_cpu_test_libs)

tests_unit_test_cpu_threads_SOURCES = tests/unit/test_cpu_threads.c
tests_unit_test_cpu_threads_CFLAGS = $(kiln_cpu_test_cflags)
tests_unit_test_cpu_threads_LDADD = $(kiln_cpu_test_libs)

tests_unit_test_cpu_qwen35_SOURCES = tests/unit/test_cpu_qwen35.c
tests_unit_test_cpu_qwen35_CFLAGS = $(kiln_cpu_test_cflags)
tests_unit_test_cpu_qwen35_LDADD = $(kiln_cpu_test_libs)

# Needs kiln-cpu.la built first: `make check` builds `all` before the tests.
tests_unit_test_cpu_plugin_SOURCES = tests/unit/test_cpu_plugin.c
tests_unit_test_cpu_plugin_CFLAGS = $(kiln_cpu_test_cflags)
tests_unit_test_cpu_plugin_LDADD = $(kiln_cpu_test_libs)
