# cmocka suites. Tests find models through KILN_MODELS_DIR (default: the
# folder given to configure --with-models-dir, else ../shared/models beside
# the source tree) and plugins through KILN_PLUGIN_PATH (the build's .libs).
AM_TESTS_ENVIRONMENT = \
	KILN_MODELS_DIR="$${KILN_MODELS_DIR:-$(KILN_MODELS_DIR_DEFAULT)}"; export KILN_MODELS_DIR; \
	KILN_TOKENIZERS_DIR="$${KILN_TOKENIZERS_DIR:-$(KILN_MODELS_DIR_DEFAULT)/../tokenizers}"; export KILN_TOKENIZERS_DIR; \
	KILN_PLUGIN_PATH="$(abs_top_builddir)/.libs"; export KILN_PLUGIN_PATH; \
	KILN_SRCDIR="$(abs_top_srcdir)"; export KILN_SRCDIR; \
	KILN_BUILDDIR="$(abs_top_builddir)"; export KILN_BUILDDIR; \
	XDG_CACHE_HOME="$(abs_top_builddir)/tests/cache-home"; export XDG_CACHE_HOME;

# Helpers every test links: model lookup, skip rules, temp files.
check_LTLIBRARIES += tests/libkilntest.la
tests_libkilntest_la_SOURCES = tests/testutil.c tests/testutil.h tests/kiln_proc.c tests/kiln_proc.h \
	tests/runtime_fixture.c tests/runtime_fixture.h
tests_libkilntest_la_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)

TEST_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) -I$(top_srcdir)/tests

# The counting allocator (tests/heap_count.h): compile these sources into a
# test and link it with these flags to measure its heap.
heap_count_sources = tests/heap_count.c tests/heap_count.h
heap_count_ldflags = -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc -Wl,--wrap=free \
	-Wl,--wrap=strdup -Wl,--wrap=strndup
TEST_LIBS = tests/libkilntest.la libkiln.la $(CMOCKA_LIBS) -lm

include tests/unit/local.mk
include tests/integration/local.mk
include tests/gpu/local.mk
include tests/fuzz/local.mk
