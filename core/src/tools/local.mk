# What the tool commands are built on: parity, golden sets, synthetic
# models, perplexity.
kiln_tools_sources = \
	core/src/tools/parity.c \
	core/src/tools/golden.c \
	core/src/tools/golden_run.c \
	core/src/tools/synth_internal.h \
	core/src/tools/synth_util.c \
	core/src/tools/synth.c \
	core/src/tools/synth_qwen35.c \
	core/src/tools/perplexity.c
