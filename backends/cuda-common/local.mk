# cuda-common: shared by the CUDA plugins (a libtool convenience library
# they link): the driver API resolved at run time, context, stream and
# device memory, the NVRTC compile hook, the kernel templates, the
# node -> descriptor functions, cuBLAS, and the ops table behind the three
# plugins' entry tables (cuda_backend.h). It never links libcuda or cudart (the
# driver API is resolved at run time) and never links libkiln (it reaches
# the host, the kernel cache included, through kiln_host_api).
#
# Templates are files in kernels/; each becomes a C string literal
# (kernels/NAME.inc in the build tree) with a sed rule, so no tool beyond
# sed is needed.
kiln_cuda_template_files = \
	backends/cuda-common/kernels/grid_dep.cuh.tmpl \
	backends/cuda-common/kernels/rmsnorm_common.cuh.tmpl \
	backends/cuda-common/kernels/rmsnorm_row_vec.cu.tmpl \
	backends/cuda-common/kernels/rmsnorm_rows.cu.tmpl \
	backends/cuda-common/kernels/rmsnorm_row_cc12.cu.tmpl \
	backends/cuda-common/kernels/step_block.cuh.tmpl \
	backends/cuda-common/kernels/kv_type.cuh.tmpl \
	backends/cuda-common/kernels/store_kv.cu.tmpl \
	backends/cuda-common/kernels/quant_mode.cuh.tmpl \
	backends/cuda-common/kernels/act_quant.cuh.tmpl \
	backends/cuda-common/kernels/quantize.cu.tmpl \
	backends/cuda-common/kernels/matvec_q_prims.cuh.tmpl \
	backends/cuda-common/kernels/matvec_q_types.cuh.tmpl \
	backends/cuda-common/kernels/matvec_q_stage.cuh.tmpl \
	backends/cuda-common/kernels/matvec_q.cu.tmpl \
	backends/cuda-common/kernels/add_rmsnorm.cu.tmpl \
	backends/cuda-common/kernels/swiglu_q.cu.tmpl \
	backends/cuda-common/kernels/wtype_select.cuh.tmpl \
	backends/cuda-common/kernels/wtype_common.cuh.tmpl \
	backends/cuda-common/kernels/matvec.cu.tmpl \
	backends/cuda-common/kernels/gemm_operand.cuh.tmpl \
	backends/cuda-common/kernels/dequant_rows.cu.tmpl \
	backends/cuda-common/kernels/gemm_input.cu.tmpl \
	backends/cuda-common/kernels/imma.cuh.tmpl \
	backends/cuda-common/kernels/mmq_types.cuh.tmpl \
	backends/cuda-common/kernels/mmq.cu.tmpl \
	backends/cuda-common/kernels/fp8_e4m3.cuh.tmpl \
	backends/cuda-common/kernels/fp8_rows.cu.tmpl \
	backends/cuda-common/kernels/fp8_input.cu.tmpl \
	backends/cuda-common/kernels/bias_add.cu.tmpl \
	backends/cuda-common/kernels/get_rows.cu.tmpl \
	backends/cuda-common/kernels/rope_common.cuh.tmpl \
	backends/cuda-common/kernels/rope.cu.tmpl \
	backends/cuda-common/kernels/rope_store.cu.tmpl \
	backends/cuda-common/kernels/attention.cu.tmpl \
	backends/cuda-common/kernels/attention_part.cuh.tmpl \
	backends/cuda-common/kernels/attention_split.cu.tmpl \
	backends/cuda-common/kernels/attention_merge.cu.tmpl \
	backends/cuda-common/kernels/mma_sync.cuh.tmpl \
	backends/cuda-common/kernels/attention_mma.cu.tmpl \
	backends/cuda-common/kernels/flash_layout.cuh.tmpl \
	backends/cuda-common/kernels/flash_attention.cu.tmpl \
	backends/cuda-common/kernels/swiglu.cu.tmpl \
	backends/cuda-common/kernels/add.cu.tmpl \
	backends/cuda-common/kernels/slice.cu.tmpl \
	backends/cuda-common/kernels/sigmoid_mul.cu.tmpl \
	backends/cuda-common/kernels/ssm_conv.cu.tmpl \
	backends/cuda-common/kernels/gdn_gate.cu.tmpl \
	backends/cuda-common/kernels/gdn_common.cuh.tmpl \
	backends/cuda-common/kernels/gdn_recurrent.cu.tmpl \
	backends/cuda-common/kernels/gdn_chunked.cu.tmpl \
	backends/cuda-common/kernels/rope_imrope.cu.tmpl
kiln_cuda_template_incs = $(kiln_cuda_template_files:.tmpl=.inc)
EXTRA_DIST += $(kiln_cuda_template_files)
CLEANFILES += $(kiln_cuda_template_incs)

# Escape \ " and ? (no trigraphs), then wrap each line in "...\n".
.tmpl.inc:
	$(AM_V_GEN)$(MKDIR_P) $(@D) && \
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/?/\\?/g' -e 's/^/"/' -e 's/$$/\\n"/' \
	  $< > $@.tmp && mv $@.tmp $@

if HAVE_CUDA
noinst_LTLIBRARIES += backends/cuda-common/libkilncudacommon.la
backends_cuda_common_libkilncudacommon_la_SOURCES = \
	backends/cuda-common/kernel_templates.c \
	backends/cuda-common/kernel_templates.h \
	backends/cuda-common/qwen35_templates.c \
	backends/cuda-common/qwen35_describe.h \
	backends/cuda-common/qwen35_describe.c \
	backends/cuda-common/qwen35_check.c \
	backends/cuda-common/qwen35_cuda.h \
	backends/cuda-common/qwen35_cuda.c \
	backends/cuda-common/nvrtc_compile.c \
	backends/cuda-common/nvrtc_compile.h \
	backends/cuda-common/rmsnorm_describe.c \
	backends/cuda-common/rmsnorm_describe.h \
	backends/cuda-common/op_describe.h \
	backends/cuda-common/op_describe.c \
	backends/cuda-common/cuda_check.c \
	backends/cuda-common/matmul_describe.c \
	backends/cuda-common/mmq_describe.c \
	backends/cuda-common/fp8_describe.c \
	backends/cuda-common/fused_describe.c \
	backends/cuda-common/misc_describe.c \
	backends/cuda-common/flash_describe.c \
	backends/cuda-common/flash_shape.h \
	backends/cuda-common/cuda_driver.c \
	backends/cuda-common/cuda_driver.h \
	backends/cuda-common/nccl_loader.c \
	backends/cuda-common/nccl_loader.h \
	backends/cuda-common/cuda_parallel.c \
	backends/cuda-common/cuda_backend.h \
	backends/cuda-common/cuda_config_keys.h \
	backends/cuda-common/cuda_context.c \
	backends/cuda-common/cuda_step.c \
	backends/cuda-common/cuda_step.h \
	backends/cuda-common/cuda_plugin.c \
	backends/cuda-common/cuda_buffers.c \
	backends/cuda-common/cuda_kernel.c \
	backends/cuda-common/cuda_prepare.c \
	backends/cuda-common/cuda_node_run.c \
	backends/cuda-common/cuda_fuse.c \
	backends/cuda-common/cuda_run.c \
	backends/cuda-common/cuda_profile.c \
	backends/cuda-common/cuda_gemm.c \
	backends/cuda-common/gemm_choice.c \
	backends/cuda-common/config_list.c \
	backends/cuda-common/cuda_mmq.c \
	backends/cuda-common/cuda_gemm_fp8.c \
	backends/cuda-common/cuda_sanitize.c
backends_cuda_common_libkilncudacommon_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) \
	-I$(top_srcdir)/backends/common -I$(top_builddir)/backends/cuda-common/kernels
backends_cuda_common_libkilncudacommon_la_LIBADD = backends/common/libkilnnodecheck.la \
	$(NVRTC_LIBS) $(CUBLAS_LIBS) -ldl -lm
# The captured decode step (cuda_graph.c) is a library of its own, so that
# a test-only plugin can link a build of it that replays stale positions
# (tests/plugins/kiln-cuda-stale.so); every real plugin links this one.
noinst_LTLIBRARIES += backends/cuda-common/libkilncudagraph.la
backends_cuda_common_libkilncudagraph_la_SOURCES = backends/cuda-common/cuda_graph.c
backends_cuda_common_libkilncudagraph_la_CPPFLAGS = $(backends_cuda_common_libkilncudacommon_la_CPPFLAGS)
# The generated template text must exist before kernel_templates.c compiles.
$(backends_cuda_common_libkilncudacommon_la_OBJECTS): $(kiln_cuda_template_incs)
endif
