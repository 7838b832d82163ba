# libkiln: the core (executor, graph, plugin loader, kernel cache, config,
# GGUF, model builders, tokenizers, sampler, parity). Each area lists its
# own sources in a fragment of its own.
lib_LTLIBRARIES += libkiln.la
libkiln_la_SOURCES = \
	core/src/status.c \
	$(kiln_gguf_sources) \
	$(kiln_tokenizer_sources) \
	$(kiln_kcache_sources) \
	$(kiln_runtime_sources)
libkiln_la_CFLAGS = $(AM_CFLAGS) $(INIH_CFLAGS) $(PCRE2_CFLAGS) $(XXHASH_CFLAGS)
libkiln_la_LIBADD = $(INIH_LIBS) $(PCRE2_LIBS) $(XXHASH_LIBS) -lm
libkiln_la_LDFLAGS = -version-info 0:0:0 -no-undefined \
	-export-symbols-regex '^kiln_'

pkgconfig_DATA += core/kiln.pc plugins/kiln-plugin.pc

kilninclude_HEADERS += \
	core/include/kiln/status.h \
	core/include/kiln/types.h \
	core/include/kiln/half.h \
	core/include/kiln/graph.h \
	core/include/kiln/config_schema.h \
	core/include/kiln/plugin.h \
	core/include/kiln/gguf.h \
	core/include/kiln/dequant.h \
	core/include/kiln/tokenizer.h

include core/gguf.mk
include core/tokenizer.mk
include core/kcache.mk
include core/runtime.mk
