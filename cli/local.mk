# The kiln command.
bin_PROGRAMS += cli/kiln
cli_kiln_SOURCES = \
	cli/kiln.c \
	cli/cli.h \
	cli/cli_common.c \
	cli/cli_input.c \
	cli/cli_progress.c \
	cli/cli_json.c \
	cli/cmd_run.c \
	cli/run.h \
	cli/run_output.c \
	cli/run_conversation.c \
	cli/cmd_inspect.c \
	cli/cmd_backends.c \
	cli/cmd_config.c \
	cli/cmd_qa.c \
	cli/cmd_parity.c \
	cli/cmd_bench.c \
	cli/cmd_synth.c \
	cli/cmd_kernels.c \
	cli/cmd_kernels_main.c \
	cli/cmd_tokenize.c \
	cli/cmd_perplexity.c \
	cli/cmd_kernels.h \
	backends/cuda-common/kernel_templates.c \
	backends/cuda-common/qwen35_templates.c \
	backends/cuda-common/kernel_templates.h
# `kiln kernels --schema` lists the CUDA templates, whose text needs no
# CUDA toolkit, so the command has them on every build.
cli_kiln_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS) -DKILN_ABS_BUILDDIR='"$(abs_top_builddir)"' \
	-I$(top_builddir)/backends/cuda-common/kernels
$(cli_kiln_OBJECTS): $(kiln_cuda_template_incs)
cli_kiln_LDADD = libkiln.la $(JANSSON_LIBS)

EXTRA_DIST += bench/kiln_vs_llamacpp.py
