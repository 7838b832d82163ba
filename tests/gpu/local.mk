# GPU tests (tests/gpu/): the CUDA plugins on a device, reached only
# through the plugin loader (they link libkiln, never CUDA). Without a
# usable device each program prints why and exits 77 (SKIP); with
# KILN_REQUIRE_GPU=1 it fails instead. Built on every configuration, so
# `make check` on a machine without CUDA lists them as skipped.
check_LTLIBRARIES += tests/gpu/libkilngputest.la
tests_gpu_libkilngputest_la_SOURCES = tests/gpu/gpu_common.c tests/gpu/gpu_common.h
tests_gpu_libkilngputest_la_CFLAGS = $(TEST_CFLAGS)

kiln_gpu_tests = tests/gpu/test_gpu_ops tests/gpu/test_gpu_rmsnorm tests/gpu/test_gpu_golden \
	tests/gpu/test_gpu_qwen35 tests/gpu/test_gpu_bounds tests/gpu/test_gpu_matvec_q \
	tests/gpu/test_gpu_matvec_q_direct tests/gpu/test_gpu_matvec_q_staged \
	tests/gpu/test_gpu_matvec_q_bulk \
	tests/gpu/test_gpu_attention tests/gpu/test_gpu_flash tests/gpu/test_gpu_kv_types
check_PROGRAMS += $(kiln_gpu_tests)
TESTS += $(kiln_gpu_tests)
kiln_gpu_test_libs = tests/gpu/libkilngputest.la $(TEST_LIBS)

tests_gpu_test_gpu_ops_SOURCES = tests/gpu/test_gpu_ops.c
tests_gpu_test_gpu_ops_CFLAGS = $(TEST_CFLAGS)
tests_gpu_test_gpu_ops_LDADD = $(kiln_gpu_test_libs)

tests_gpu_test_gpu_rmsnorm_SOURCES = tests/gpu/test_gpu_rmsnorm.c
tests_gpu_test_gpu_rmsnorm_CFLAGS = $(TEST_CFLAGS)
tests_gpu_test_gpu_rmsnorm_LDADD = $(kiln_gpu_test_libs)

tests_gpu_test_gpu_golden_SOURCES = tests/gpu/test_gpu_golden.c
tests_gpu_test_gpu_golden_CFLAGS = $(TEST_CFLAGS)
tests_gpu_test_gpu_golden_LDADD = $(kiln_gpu_test_libs)

tests_gpu_test_gpu_qwen35_SOURCES = tests/gpu/test_gpu_qwen35.c tests/qwen35_fixture.c tests/qwen35_fixture.h
tests_gpu_test_gpu_qwen35_CFLAGS = $(TEST_CFLAGS)
tests_gpu_test_gpu_qwen35_LDADD = $(kiln_gpu_test_libs)
$(tests_gpu_test_gpu_qwen35_OBJECTS): cli/kiln$(EXEEXT)

tests_gpu_test_gpu_bounds_SOURCES = tests/gpu/test_gpu_bounds.c
tests_gpu_test_gpu_bounds_CFLAGS = $(TEST_CFLAGS)
tests_gpu_test_gpu_bounds_LDADD = $(kiln_gpu_test_libs)

tests_gpu_test_gpu_kv_types_SOURCES = tests/gpu/test_gpu_kv_types.c
tests_gpu_test_gpu_kv_types_CFLAGS = $(TEST_CFLAGS)
tests_gpu_test_gpu_kv_types_LDADD = $(kiln_gpu_test_libs)

# One source, four programs (MQ_PART): every block type read directly,
# staged and by bulk copies (most of the NVRTC compiles), then the rest
# (the fused layer, rope_store), so that `make check -j` runs them side by
# side; test_gpu_matvec_q is the last part.
tests_gpu_test_gpu_matvec_q_SOURCES = tests/gpu/test_gpu_matvec_q.c
tests_gpu_test_gpu_matvec_q_CPPFLAGS = $(AM_CPPFLAGS) -DMQ_PART=3
tests_gpu_test_gpu_matvec_q_CFLAGS = $(TEST_CFLAGS)
tests_gpu_test_gpu_matvec_q_LDADD = $(kiln_gpu_test_libs)
tests_gpu_test_gpu_matvec_q_direct_SOURCES = tests/gpu/test_gpu_matvec_q.c
tests_gpu_test_gpu_matvec_q_direct_CPPFLAGS = $(AM_CPPFLAGS) -DMQ_PART=0
tests_gpu_test_gpu_matvec_q_direct_CFLAGS = $(TEST_CFLAGS)
tests_gpu_test_gpu_matvec_q_direct_LDADD = $(kiln_gpu_test_libs)
tests_gpu_test_gpu_matvec_q_staged_SOURCES = tests/gpu/test_gpu_matvec_q.c
tests_gpu_test_gpu_matvec_q_staged_CPPFLAGS = $(AM_CPPFLAGS) -DMQ_PART=1
tests_gpu_test_gpu_matvec_q_staged_CFLAGS = $(TEST_CFLAGS)
tests_gpu_test_gpu_matvec_q_staged_LDADD = $(kiln_gpu_test_libs)
tests_gpu_test_gpu_matvec_q_bulk_SOURCES = tests/gpu/test_gpu_matvec_q.c
tests_gpu_test_gpu_matvec_q_bulk_CPPFLAGS = $(AM_CPPFLAGS) -DMQ_PART=2
tests_gpu_test_gpu_matvec_q_bulk_CFLAGS = $(TEST_CFLAGS)
tests_gpu_test_gpu_matvec_q_bulk_LDADD = $(kiln_gpu_test_libs)

tests_gpu_test_gpu_attention_SOURCES = tests/gpu/test_gpu_attention.c
tests_gpu_test_gpu_attention_CFLAGS = $(TEST_CFLAGS)
tests_gpu_test_gpu_attention_LDADD = $(kiln_gpu_test_libs)

tests_gpu_test_gpu_flash_SOURCES = tests/gpu/test_gpu_flash.c
tests_gpu_test_gpu_flash_CFLAGS = $(TEST_CFLAGS)
tests_gpu_test_gpu_flash_LDADD = $(kiln_gpu_test_libs)

# The captured decode step: 64 replayed steps against the uncaptured path
# (test_gpu_replay), and the same test against a plugin whose captured
# step replays stale positions (test_gpu_replay_stale), which must fail.
kiln_replay_tests = tests/gpu/test_gpu_replay tests/gpu/test_gpu_replay_stale
check_PROGRAMS += $(kiln_replay_tests)
TESTS += $(kiln_replay_tests)
XFAIL_TESTS += tests/gpu/test_gpu_replay_stale
tests_gpu_test_gpu_replay_SOURCES = tests/gpu/test_gpu_replay.c
tests_gpu_test_gpu_replay_CFLAGS = $(TEST_CFLAGS)
tests_gpu_test_gpu_replay_LDADD = $(kiln_gpu_test_libs)
tests_gpu_test_gpu_replay_stale_SOURCES = tests/gpu/test_gpu_replay.c
tests_gpu_test_gpu_replay_stale_CPPFLAGS = $(AM_CPPFLAGS) -DKILN_TEST_STALE_PLUGIN
tests_gpu_test_gpu_replay_stale_CFLAGS = $(TEST_CFLAGS)
tests_gpu_test_gpu_replay_stale_LDADD = $(kiln_gpu_test_libs)

if HAVE_CUDA
noinst_LTLIBRARIES += backends/cuda-common/libkilncudagraph_stale.la
backends_cuda_common_libkilncudagraph_stale_la_SOURCES = backends/cuda-common/cuda_graph.c
backends_cuda_common_libkilncudagraph_stale_la_CPPFLAGS = \
	$(backends_cuda_common_libkilncudacommon_la_CPPFLAGS) -DKILN_CUDA_TEST_STALE_STEP
check_LTLIBRARIES += tests/plugins/kiln-cuda-stale.la
tests_plugins_kiln_cuda_stale_la_SOURCES = tests/plugins/cuda_stale_entry.c
tests_plugins_kiln_cuda_stale_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) \
	-I$(top_srcdir)/backends/cuda-common
tests_plugins_kiln_cuda_stale_la_LIBADD = backends/cuda-common/libkilncudacommon.la \
	backends/cuda-common/libkilncudagraph_stale.la $(NVRTC_LIBS) $(CUBLAS_LIBS) -ldl -lm
tests_plugins_kiln_cuda_stale_la_LDFLAGS = -module -avoid-version -shared -no-undefined \
	-export-symbols-regex '^kiln_backend_entry$$' -rpath $(abs_builddir)
endif

# matvec_q's block decoders compiled for the host (C++): no device, no CUDA.
check_PROGRAMS += tests/unit/test_matvec_q_host
TESTS += tests/unit/test_matvec_q_host
tests_unit_test_matvec_q_host_SOURCES = tests/unit/test_matvec_q_host.cc \
	tests/unit/matvec_q_host_prims.h tests/unit/matvec_q_host_check.h tests/unit/q5_k_ref.h
tests_unit_test_matvec_q_host_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/gpu \
	-I$(top_srcdir)/backends/cuda-common/kernels
tests_unit_test_matvec_q_host_CXXFLAGS = $(CMOCKA_CFLAGS) -I$(top_srcdir)/tests -std=gnu++17
tests_unit_test_matvec_q_host_LDADD = $(kiln_gpu_test_libs)

# The weight decoders of wtype_common.cuh compiled for the host (C++), one
# namespace per weight type: no device, no CUDA.
check_PROGRAMS += tests/unit/test_wtype_host
TESTS += tests/unit/test_wtype_host
tests_unit_test_wtype_host_SOURCES = tests/unit/test_wtype_host.cc tests/unit/wtype_host_one.h \
	tests/unit/q5_k_ref.h
tests_unit_test_wtype_host_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/gpu \
	-I$(top_srcdir)/backends/cuda-common/kernels
tests_unit_test_wtype_host_CXXFLAGS = $(CMOCKA_CFLAGS) -I$(top_srcdir)/tests -std=gnu++17
tests_unit_test_wtype_host_LDADD = $(kiln_gpu_test_libs)

# The split decode attention kernels run on the host, block by block, on
# green threads (tests/unit/cuda_block_emu.h): no device, no CUDA.
check_PROGRAMS += tests/unit/test_attention_host
TESTS += tests/unit/test_attention_host
tests_unit_test_attention_host_SOURCES = tests/unit/test_attention_host.cc \
	tests/unit/cuda_block_emu.h tests/unit/attention_host_shape.h tests/unit/kv_host_cache.h \
	tests/unit/attention_host_check.h
tests_unit_test_attention_host_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/gpu \
	-I$(top_srcdir)/backends/cuda-common/kernels
tests_unit_test_attention_host_CXXFLAGS = $(CMOCKA_CFLAGS) -I$(top_srcdir)/tests -std=gnu++17 \
	-Wall -Wextra -Wno-unknown-pragmas -Wno-unused-parameter
tests_unit_test_attention_host_LDADD = $(kiln_gpu_test_libs)

# The tensor-core split decode attention (attention_mma) the same way,
# mma.sync emulated from its fragment layout.
check_PROGRAMS += tests/unit/test_attention_mma_host
TESTS += tests/unit/test_attention_mma_host
tests_unit_test_attention_mma_host_SOURCES = tests/unit/test_attention_mma_host.cc \
	tests/unit/cuda_block_emu.h tests/unit/attention_mma_host_shape.h tests/unit/kv_host_cache.h \
	tests/unit/attention_host_check.h
tests_unit_test_attention_mma_host_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/gpu \
	-I$(top_srcdir)/backends/cuda-common/kernels
tests_unit_test_attention_mma_host_CXXFLAGS = $(CMOCKA_CFLAGS) -I$(top_srcdir)/tests -std=gnu++17 -O2 \
	-Wall -Wextra -Wno-unknown-pragmas -Wno-unused-parameter
tests_unit_test_attention_mma_host_LDADD = $(kiln_gpu_test_libs)

# The flash prefill attention kernel runs on the host the same way.
check_PROGRAMS += tests/unit/test_flash_host
TESTS += tests/unit/test_flash_host
tests_unit_test_flash_host_SOURCES = tests/unit/test_flash_host.cc \
	tests/unit/cuda_block_emu.h tests/unit/flash_host_shape.h tests/unit/kv_host_cache.h
tests_unit_test_flash_host_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/gpu \
	-I$(top_srcdir)/backends/cuda-common/kernels -I$(top_srcdir)/backends/cuda-common
tests_unit_test_flash_host_CXXFLAGS = $(CMOCKA_CFLAGS) -I$(top_srcdir)/tests -std=gnu++17 -O2 \
	-fno-strict-aliasing -Wall -Wextra -Wno-unknown-pragmas -Wno-unused-parameter
tests_unit_test_flash_host_LDADD = $(kiln_gpu_test_libs)
# store_kv's typed writes (F16, BF16, Q8_0) on the host, the same way.
check_PROGRAMS += tests/unit/test_store_kv_host
TESTS += tests/unit/test_store_kv_host
tests_unit_test_store_kv_host_SOURCES = tests/unit/test_store_kv_host.cc tests/unit/cuda_block_emu.h
tests_unit_test_store_kv_host_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/gpu \
	-I$(top_srcdir)/backends/cuda-common/kernels
tests_unit_test_store_kv_host_CXXFLAGS = $(CMOCKA_CFLAGS) -I$(top_srcdir)/tests -std=gnu++17 \
	-Wall -Wextra -Wno-unknown-pragmas -Wno-unused-parameter
tests_unit_test_store_kv_host_LDADD = $(kiln_gpu_test_libs)

# The prefill GEMM's operand kernels (dequant_rows, gemm_input) on the
# host, the same way: every weight type's tile in each operand form.
check_PROGRAMS += tests/unit/test_gemm_operand_host
TESTS += tests/unit/test_gemm_operand_host
tests_unit_test_gemm_operand_host_SOURCES = tests/unit/test_gemm_operand_host.cc \
	tests/unit/cuda_block_emu.h tests/unit/dequant_host_shape.h
tests_unit_test_gemm_operand_host_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/gpu \
	-I$(top_srcdir)/backends/cuda-common/kernels
tests_unit_test_gemm_operand_host_CXXFLAGS = $(CMOCKA_CFLAGS) -I$(top_srcdir)/tests -std=gnu++17 \
	-O2 -fno-strict-aliasing -Wall -Wextra -Wno-unknown-pragmas -Wno-unused-parameter \
	-Wno-unused-function
tests_unit_test_gemm_operand_host_LDADD = $(kiln_gpu_test_libs)

# The prefill's integer tensor-core GEMM (gemm = q16mma: quantize, then
# mmq) the same way, mma.sync's int8 shapes emulated from their fragment
# layouts, against f64 and against the decode matvec_q's q16 sums.
check_PROGRAMS += tests/unit/test_mmq_host
TESTS += tests/unit/test_mmq_host
tests_unit_test_mmq_host_SOURCES = tests/unit/test_mmq_host.cc \
	tests/unit/cuda_block_emu.h tests/unit/mmq_host_shape.h tests/unit/matvec_q_host_prims.h
tests_unit_test_mmq_host_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/gpu \
	-I$(top_srcdir)/backends/cuda-common/kernels
tests_unit_test_mmq_host_CXXFLAGS = $(CMOCKA_CFLAGS) -I$(top_srcdir)/tests -std=gnu++17 -O2 \
	-fno-strict-aliasing -Wall -Wextra -Wno-unknown-pragmas -Wno-unused-parameter \
	-Wno-unused-function
tests_unit_test_mmq_host_LDADD = $(kiln_gpu_test_libs)
# gemm = fp8's operand kernels (fp8_rows, fp8_input) on the host, the
# same way: the e4m3 rounding against the format's definition, each tile
# and column bit for bit, and the GEMM they give against f64.
check_PROGRAMS += tests/unit/test_fp8_host
TESTS += tests/unit/test_fp8_host
tests_unit_test_fp8_host_SOURCES = tests/unit/test_fp8_host.cc \
	tests/unit/cuda_block_emu.h tests/unit/fp8_host_shape.h
tests_unit_test_fp8_host_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/gpu \
	-I$(top_srcdir)/backends/cuda-common/kernels
tests_unit_test_fp8_host_CXXFLAGS = $(CMOCKA_CFLAGS) -I$(top_srcdir)/tests -std=gnu++17 \
	-O2 -fno-strict-aliasing -Wall -Wextra -Wno-unknown-pragmas -Wno-unused-parameter \
	-Wno-unused-function
tests_unit_test_fp8_host_LDADD = $(kiln_gpu_test_libs)

# CI-side checks of the CUDA code that need no device: the plugins load
# and report themselves (libkiln only, through the loader), and every
# template compiles with NVRTC for sm_90 / sm_120 / sm_121.
check_PROGRAMS += tests/unit/test_cuda_plugins
TESTS += tests/unit/test_cuda_plugins
tests_unit_test_cuda_plugins_SOURCES = tests/unit/test_cuda_plugins.c
tests_unit_test_cuda_plugins_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_cuda_plugins_LDADD = $(TEST_LIBS) -ldl

if HAVE_CUDA
# One source, four programs (KT_PART: every template for sm_90, sm_120,
# sm_121, then the other tests), so that `make check -j` compiles the
# three arches' kernels side by side: as one program it outlasted a
# device call's 330 s on 16 cores while llama.cpp built beside it (H200,
# 2026-12-07); as four, the whole make check took 5 min on 2 cores here.
CUDA_TEMPLATES_SRC = tests/unit/test_cuda_templates.c tests/unit/kcache_testhost.c \
	tests/unit/kcache_testhost.h
CUDA_TEMPLATES_CPP = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) -I$(top_srcdir)/backends/cuda-common
CUDA_TEMPLATES_CF = $(TEST_CFLAGS) -I$(top_srcdir)/core/src
CUDA_TEMPLATES_LD = backends/cuda-common/libkilncudacommon.la $(TEST_LIBS) $(NVRTC_LIBS)
check_PROGRAMS += tests/unit/test_cuda_templates tests/unit/test_cuda_templates_sm90 \
	tests/unit/test_cuda_templates_sm120 tests/unit/test_cuda_templates_sm121
TESTS += tests/unit/test_cuda_templates_sm90 tests/unit/test_cuda_templates_sm120 \
	tests/unit/test_cuda_templates_sm121 tests/unit/test_cuda_templates
tests_unit_test_cuda_templates_SOURCES = $(CUDA_TEMPLATES_SRC)
tests_unit_test_cuda_templates_CPPFLAGS = $(CUDA_TEMPLATES_CPP) -DKT_PART=3
tests_unit_test_cuda_templates_CFLAGS = $(CUDA_TEMPLATES_CF)
tests_unit_test_cuda_templates_LDADD = $(CUDA_TEMPLATES_LD)
tests_unit_test_cuda_templates_sm90_SOURCES = $(CUDA_TEMPLATES_SRC)
tests_unit_test_cuda_templates_sm90_CPPFLAGS = $(CUDA_TEMPLATES_CPP) -DKT_PART=0
tests_unit_test_cuda_templates_sm90_CFLAGS = $(CUDA_TEMPLATES_CF)
tests_unit_test_cuda_templates_sm90_LDADD = $(CUDA_TEMPLATES_LD)
tests_unit_test_cuda_templates_sm120_SOURCES = $(CUDA_TEMPLATES_SRC)
tests_unit_test_cuda_templates_sm120_CPPFLAGS = $(CUDA_TEMPLATES_CPP) -DKT_PART=1
tests_unit_test_cuda_templates_sm120_CFLAGS = $(CUDA_TEMPLATES_CF)
tests_unit_test_cuda_templates_sm120_LDADD = $(CUDA_TEMPLATES_LD)
tests_unit_test_cuda_templates_sm121_SOURCES = $(CUDA_TEMPLATES_SRC)
tests_unit_test_cuda_templates_sm121_CPPFLAGS = $(CUDA_TEMPLATES_CPP) -DKT_PART=2
tests_unit_test_cuda_templates_sm121_CFLAGS = $(CUDA_TEMPLATES_CF)
tests_unit_test_cuda_templates_sm121_LDADD = $(CUDA_TEMPLATES_LD)

# Which GEMM each batched MUL_MAT takes on devices of compute capability
# 7.5 to 12.0, and the describe_modes line that counts them: no device.
check_PROGRAMS += tests/unit/test_cuda_gemm_modes
TESTS += tests/unit/test_cuda_gemm_modes
tests_unit_test_cuda_gemm_modes_SOURCES = tests/unit/test_cuda_gemm_modes.c
tests_unit_test_cuda_gemm_modes_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) \
	-I$(top_srcdir)/backends/cuda-common
tests_unit_test_cuda_gemm_modes_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_cuda_gemm_modes_LDADD = backends/cuda-common/libkilncudacommon.la $(TEST_LIBS) \
	$(NVRTC_LIBS)

check_PROGRAMS += tests/unit/test_cuda_qwen35
TESTS += tests/unit/test_cuda_qwen35
tests_unit_test_cuda_qwen35_SOURCES = tests/unit/test_cuda_qwen35.c \
	tests/unit/kcache_testhost.c tests/unit/kcache_testhost.h
tests_unit_test_cuda_qwen35_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) \
	-I$(top_srcdir)/backends/cuda-common -I$(top_srcdir)/backends/common
tests_unit_test_cuda_qwen35_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/core/src
tests_unit_test_cuda_qwen35_LDADD = backends/cuda-common/libkilncudacommon.la $(TEST_LIBS) \
	$(NVRTC_LIBS)
endif

# Building and running these on the GPU machine in one call: the device
# scripts ask for the list of GPU suites here.
print-gpu-tests:
	@echo $(kiln_gpu_tests) $(kiln_replay_tests)
.PHONY: print-gpu-tests
EXTRA_DIST += tools/device/prepare-gpu.sh tools/device/on-device-gpu.sh tools/device/sanitize.sh \
	tools/device/all-gpu.sh tools/device/mvq-sweep.sh tools/device/ncu-matvec.sh \
	tools/device/initcheck-probe.sh tools/device/initcheck-probe.cu
