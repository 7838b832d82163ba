# Executor, plugin loader, config, model builders, sampler, embedding API.
kiln_runtime_sources = \
	core/src/kcache_internal.h \
	core/src/log.c \
	core/src/config.c \
	core/src/config_table.c \
	core/src/config_internal.h \
	core/src/host_api.c \
	core/src/plugin_load.c \
	core/src/plugin_registry.c \
	core/src/model_internal.h \
	core/src/model_hparams.c \
	core/src/model.c \
	core/src/graph_build.c \
	core/src/plan.c \
	core/src/sampler.c \
	core/src/runtime_internal.h \
	core/src/runtime.c \
	core/src/session.c \
	core/src/generate.c

kilninclude_HEADERS += \
	core/include/kiln/config.h \
	core/include/kiln/log.h \
	core/include/kiln/host.h \
	core/include/kiln/backend.h \
	core/include/kiln/model.h \
	core/include/kiln/plan.h \
	core/include/kiln/sampler.h \
	core/include/kiln/kiln.h

kiln_runtime_sources += \
	core/src/golden.c \
	core/src/golden_run.c \
	core/src/synth.c \
	core/src/chat.c \
	core/src/parity.c
kilninclude_HEADERS += \
	core/include/kiln/golden.h \
	core/include/kiln/chat.h \
	core/include/kiln/parity.h \
	core/include/kiln/synth.h
