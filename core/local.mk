# libkiln: the core. Each part of core/src/ lists its own sources in the
# local.mk of its folder; the folders draw the data flow (README, "Layout").
include core/src/base/local.mk
include core/src/config/local.mk
include core/src/gguf/local.mk
include core/src/tokenizer/local.mk
include core/src/graph/local.mk
include core/src/model/local.mk
include core/src/exec/local.mk
include core/src/kcache/local.mk
include core/src/plugin/local.mk
include core/src/tools/local.mk
include core/src/tp/local.mk

# Internal headers across parts are included as "part/header.h".
kiln_core_internal_cppflags = -I$(top_srcdir)/core/src

lib_LTLIBRARIES += libkiln.la
libkiln_la_SOURCES = \
	$(kiln_base_sources) \
	$(kiln_config_sources) \
	$(kiln_gguf_sources) \
	$(kiln_tokenizer_sources) \
	$(kiln_graph_sources) \
	$(kiln_model_sources) \
	$(kiln_exec_sources) \
	$(kiln_kcache_sources) \
	$(kiln_plugin_sources) \
	$(kiln_tools_sources) \
	$(kiln_tp_sources)
libkiln_la_CPPFLAGS = $(AM_CPPFLAGS) $(kiln_core_internal_cppflags)
libkiln_la_CFLAGS = $(AM_CFLAGS) $(INIH_CFLAGS) $(PCRE2_CFLAGS) $(XXHASH_CFLAGS)
libkiln_la_LIBADD = $(INIH_LIBS) $(PCRE2_LIBS) $(XXHASH_LIBS) -lm
libkiln_la_LDFLAGS = -version-info 0:0:0 -no-undefined \
	-export-symbols-regex '^kiln_'

pkgconfig_DATA += core/kiln.pc plugins/kiln-plugin.pc

kilninclude_HEADERS += \
	core/include/kiln/status.h \
	core/include/kiln/types.h \
	core/include/kiln/half.h \
	core/include/kiln/kv_cache.h \
	core/include/kiln/graph.h \
	core/include/kiln/config_schema.h \
	core/include/kiln/plugin.h \
	core/include/kiln/gguf.h \
	core/include/kiln/gguf_write.h \
	core/include/kiln/dequant.h \
	core/include/kiln/tokenizer.h \
	core/include/kiln/kcache.h \
	core/include/kiln/config.h \
	core/include/kiln/log.h \
	core/include/kiln/escape.h \
	core/include/kiln/host.h \
	core/include/kiln/backend.h \
	core/include/kiln/model.h \
	core/include/kiln/plan.h \
	core/include/kiln/sampler.h \
	core/include/kiln/kiln.h \
	core/include/kiln/golden.h \
	core/include/kiln/chat.h \
	core/include/kiln/parity.h \
	core/include/kiln/synth.h \
	core/include/kiln/tp.h \
	core/include/kiln/perplexity.h
