# unit tests: kcache (the kernel-cache service, NVRTC, the RMSNorm templates)
kcache_test_cflags = $(TEST_CFLAGS) -I$(top_srcdir)/core/src
kcache_testhost = tests/unit/kcache_testhost.c tests/unit/kcache_testhost.h

check_PROGRAMS += tests/unit/test_kcache_template tests/unit/test_kcache_canon
TESTS += tests/unit/test_kcache_template tests/unit/test_kcache_canon

tests_unit_test_kcache_template_SOURCES = tests/unit/test_kcache_template.c $(kcache_testhost)
tests_unit_test_kcache_template_CFLAGS = $(kcache_test_cflags)
tests_unit_test_kcache_template_LDADD = $(TEST_LIBS)

tests_unit_test_kcache_canon_SOURCES = tests/unit/test_kcache_canon.c $(kcache_testhost)
tests_unit_test_kcache_canon_CFLAGS = $(kcache_test_cflags) $(XXHASH_CFLAGS)
tests_unit_test_kcache_canon_LDADD = $(TEST_LIBS) $(XXHASH_LIBS)

if HAVE_CUDA
# These compile with NVRTC (no GPU needed) through backends/cuda-common.
kcache_cuda_cppflags = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) -I$(top_srcdir)/backends/cuda-common
kcache_cuda_libs = backends/cuda-common/libkilncudacommon.la $(TEST_LIBS) $(NVRTC_LIBS)

check_PROGRAMS += tests/unit/test_kcache_guard tests/unit/test_kcache_seed \
	tests/unit/test_kcache_disk tests/unit/test_kcache_tmp tests/unit/test_kcache_cli
TESTS += tests/unit/test_kcache_guard tests/unit/test_kcache_seed \
	tests/unit/test_kcache_disk tests/unit/test_kcache_tmp tests/unit/test_kcache_cli

tests_unit_test_kcache_guard_SOURCES = tests/unit/test_kcache_guard.c $(kcache_testhost)
tests_unit_test_kcache_guard_CPPFLAGS = $(kcache_cuda_cppflags)
tests_unit_test_kcache_guard_CFLAGS = $(kcache_test_cflags)
tests_unit_test_kcache_guard_LDADD = $(kcache_cuda_libs)

tests_unit_test_kcache_seed_SOURCES = tests/unit/test_kcache_seed.c $(kcache_testhost)
tests_unit_test_kcache_seed_CPPFLAGS = $(kcache_cuda_cppflags)
tests_unit_test_kcache_seed_CFLAGS = $(kcache_test_cflags)
tests_unit_test_kcache_seed_LDADD = $(kcache_cuda_libs)

tests_unit_test_kcache_disk_SOURCES = tests/unit/test_kcache_disk.c $(kcache_testhost)
tests_unit_test_kcache_disk_CPPFLAGS = $(kcache_cuda_cppflags)
tests_unit_test_kcache_disk_CFLAGS = $(kcache_test_cflags)
tests_unit_test_kcache_disk_LDADD = $(kcache_cuda_libs)

# The stress ends with `kiln kernels --clear`: cli/cmd_kernels.c compiled in.
tests_unit_test_kcache_tmp_SOURCES = tests/unit/test_kcache_tmp.c cli/cmd_kernels.c \
	cli/cmd_kernels.h $(kcache_testhost)
tests_unit_test_kcache_tmp_CPPFLAGS = $(kcache_cuda_cppflags)
tests_unit_test_kcache_tmp_CFLAGS = $(kcache_test_cflags)
tests_unit_test_kcache_tmp_LDADD = $(kcache_cuda_libs)

# cli/cmd_kernels.c is compiled in: the suite calls kiln_cmd_kernels().
tests_unit_test_kcache_cli_SOURCES = tests/unit/test_kcache_cli.c cli/cmd_kernels.c \
	cli/cmd_kernels.h $(kcache_testhost)
tests_unit_test_kcache_cli_CPPFLAGS = $(kcache_cuda_cppflags)
tests_unit_test_kcache_cli_CFLAGS = $(kcache_test_cflags)
tests_unit_test_kcache_cli_LDADD = $(kcache_cuda_libs)

# The guard must be able to go red: the same suite, linked not with
# libkiln but with the service's sources compiled again with a test-only
# switch that drops ε from the canonical form and from what the key covers
# (a service with an incomplete key). It must fail; if it ever passes, the
# guard no longer catches the defect and `make check` fails.
check_PROGRAMS += tests/unit/test_kcache_guard_drop
TESTS += tests/unit/test_kcache_guard_drop
XFAIL_TESTS += tests/unit/test_kcache_guard_drop
tests_unit_test_kcache_guard_drop_SOURCES = tests/unit/test_kcache_guard.c $(kcache_testhost) \
	core/src/base/status.c $(kiln_kcache_sources)
tests_unit_test_kcache_guard_drop_CPPFLAGS = $(kcache_cuda_cppflags) \
	-DKILN_KCACHE_TEST_DROP_PARAM='"eps"'
tests_unit_test_kcache_guard_drop_CFLAGS = $(kcache_test_cflags) $(XXHASH_CFLAGS)
tests_unit_test_kcache_guard_drop_LDADD = backends/cuda-common/libkilncudacommon.la \
	tests/libkilntest.la $(CMOCKA_LIBS) $(XXHASH_LIBS) $(NVRTC_LIBS) -lm

# The same for each other kind of value a kernel bakes that a defect could
# leave out of a key: qwen35's L2-norm ε, RoPE θ (rope, rope_imrope), a
# rotary section, a delta-rule head dim, the conv width, the chunk size,
# matvec_q's load0, groups_per_block and stages, the prefill GEMM's operand
# form (dequant_rows, gemm_input), the FP8 GEMM's baked scale (fp8_max) in
# each of fp8_rows and fp8_input alone, the tensor-core decode attention's cache
# type (mma_type), the split decode attention's
# n_split, n_head_kv (its GQA ratio) and merge, each checked in attention_split
# alone (KILN_KCACHE_TEST_DROP_TEMPLATE: attention and rope_store bake
# n_head_kv too, and would go red first), n_split in attention_merge, the
# merge's quant and k (its quantized output's mode and column length:
# matvec_q bakes both too, and would go red first), and
# the KV cache's type (kv_type) in each of store_kv, attention,
# attention_split and rope_store alone.
# And every baked parameter of the flash prefill attention (head_dim,
# n_head, n_head_kv, the scale, bq, bk, warps, kv_type), each in
# flash_attention alone: its source depends on each of them.
# And every baked parameter of the integer tensor-core prefill GEMM (mmq:
# mmq_type, quant, k, tile_m, tile_n, warps), each in mmq alone (quant, k
# and warps are other templates' too, and would go red there first).
# Each checks only the templates declaring its parameter (test_kcache_guard.c).
kcache_guard_drop_sources = tests/unit/test_kcache_guard.c $(kcache_testhost) core/src/base/status.c \
	$(kiln_kcache_sources)
kcache_guard_drop_libs = $(tests_unit_test_kcache_guard_drop_LDADD)
kcache_guard_drop_cflags = $(kcache_test_cflags) $(XXHASH_CFLAGS)
kcache_guard_drop_more = tests/unit/test_kcache_guard_drop_l2_eps tests/unit/test_kcache_guard_drop_theta \
	tests/unit/test_kcache_guard_drop_sect_h tests/unit/test_kcache_guard_drop_head_k_dim \
	tests/unit/test_kcache_guard_drop_d_conv tests/unit/test_kcache_guard_drop_chunk \
	tests/unit/test_kcache_guard_drop_load0 tests/unit/test_kcache_guard_drop_groups_per_block \
	tests/unit/test_kcache_guard_drop_stages tests/unit/test_kcache_guard_drop_operand \
	tests/unit/test_kcache_guard_drop_fp8_rows tests/unit/test_kcache_guard_drop_fp8_input \
	tests/unit/test_kcache_guard_drop_mma_type \
	tests/unit/test_kcache_guard_drop_n_split tests/unit/test_kcache_guard_drop_n_head_kv \
	tests/unit/test_kcache_guard_drop_merge_split \
	tests/unit/test_kcache_guard_drop_n_split_merge tests/unit/test_kcache_guard_drop_quant_merge \
	tests/unit/test_kcache_guard_drop_k_merge tests/unit/test_kcache_guard_drop_kv_store \
	tests/unit/test_kcache_guard_drop_kv_attention tests/unit/test_kcache_guard_drop_kv_split \
	tests/unit/test_kcache_guard_drop_kv_rope_store \
	$(kcache_guard_drop_flash) $(kcache_guard_drop_mmq)
check_PROGRAMS += $(kcache_guard_drop_more)
TESTS += $(kcache_guard_drop_more)
XFAIL_TESTS += $(kcache_guard_drop_more)
tests_unit_test_kcache_guard_drop_l2_eps_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_l2_eps_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"l2_eps"'
tests_unit_test_kcache_guard_drop_l2_eps_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_l2_eps_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_theta_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_theta_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"theta"'
tests_unit_test_kcache_guard_drop_theta_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_theta_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_sect_h_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_sect_h_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"sect_h"'
tests_unit_test_kcache_guard_drop_sect_h_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_sect_h_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_head_k_dim_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_head_k_dim_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"head_k_dim"'
tests_unit_test_kcache_guard_drop_head_k_dim_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_head_k_dim_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_d_conv_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_d_conv_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"d_conv"'
tests_unit_test_kcache_guard_drop_d_conv_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_d_conv_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_chunk_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_chunk_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"chunk"'
tests_unit_test_kcache_guard_drop_chunk_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_chunk_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_load0_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_load0_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"load0"'
tests_unit_test_kcache_guard_drop_load0_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_load0_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_stages_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_stages_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"stages"'
tests_unit_test_kcache_guard_drop_stages_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_stages_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_operand_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_operand_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"operand"'
tests_unit_test_kcache_guard_drop_operand_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_operand_LDADD = $(kcache_guard_drop_libs)
# The FP8 GEMM's baked scale (fp8_max), in each of its two templates alone.
tests_unit_test_kcache_guard_drop_fp8_rows_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_fp8_rows_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"fp8_max"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"fp8_rows"'
tests_unit_test_kcache_guard_drop_fp8_rows_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_fp8_rows_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_fp8_input_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_fp8_input_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"fp8_max"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"fp8_input"'
tests_unit_test_kcache_guard_drop_fp8_input_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_fp8_input_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_mma_type_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_mma_type_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"mma_type"'
tests_unit_test_kcache_guard_drop_mma_type_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_mma_type_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_groups_per_block_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_groups_per_block_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"groups_per_block"'
tests_unit_test_kcache_guard_drop_groups_per_block_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_groups_per_block_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_n_split_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_n_split_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"n_split"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"attention_split"'
tests_unit_test_kcache_guard_drop_n_split_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_n_split_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_n_head_kv_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_n_head_kv_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"n_head_kv"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"attention_split"'
tests_unit_test_kcache_guard_drop_n_head_kv_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_n_head_kv_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_merge_split_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_merge_split_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"merge"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"attention_split"'
tests_unit_test_kcache_guard_drop_merge_split_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_merge_split_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_n_split_merge_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_n_split_merge_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"n_split"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"attention_merge"'
tests_unit_test_kcache_guard_drop_n_split_merge_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_n_split_merge_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_quant_merge_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_quant_merge_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"quant"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"attention_merge"'
tests_unit_test_kcache_guard_drop_quant_merge_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_quant_merge_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_k_merge_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_k_merge_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"k"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"attention_merge"'
tests_unit_test_kcache_guard_drop_k_merge_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_k_merge_LDADD = $(kcache_guard_drop_libs)
kcache_guard_drop_flash = tests/unit/test_kcache_guard_drop_flash_head_dim \
	tests/unit/test_kcache_guard_drop_flash_n_head \
	tests/unit/test_kcache_guard_drop_flash_n_head_kv \
	tests/unit/test_kcache_guard_drop_flash_scale \
	tests/unit/test_kcache_guard_drop_flash_bq \
	tests/unit/test_kcache_guard_drop_flash_bk \
	tests/unit/test_kcache_guard_drop_flash_warps \
	tests/unit/test_kcache_guard_drop_kv_flash
tests_unit_test_kcache_guard_drop_flash_head_dim_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_flash_head_dim_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"head_dim"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"flash_attention"'
tests_unit_test_kcache_guard_drop_flash_head_dim_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_flash_head_dim_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_flash_n_head_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_flash_n_head_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"n_head"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"flash_attention"'
tests_unit_test_kcache_guard_drop_flash_n_head_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_flash_n_head_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_flash_n_head_kv_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_flash_n_head_kv_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"n_head_kv"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"flash_attention"'
tests_unit_test_kcache_guard_drop_flash_n_head_kv_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_flash_n_head_kv_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_flash_scale_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_flash_scale_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"scale"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"flash_attention"'
tests_unit_test_kcache_guard_drop_flash_scale_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_flash_scale_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_flash_bq_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_flash_bq_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"bq"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"flash_attention"'
tests_unit_test_kcache_guard_drop_flash_bq_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_flash_bq_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_flash_bk_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_flash_bk_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"bk"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"flash_attention"'
tests_unit_test_kcache_guard_drop_flash_bk_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_flash_bk_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_flash_warps_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_flash_warps_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"warps"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"flash_attention"'
tests_unit_test_kcache_guard_drop_flash_warps_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_flash_warps_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_kv_store_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_kv_store_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"kv_type"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"store_kv"'
tests_unit_test_kcache_guard_drop_kv_store_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_kv_store_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_kv_attention_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_kv_attention_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"kv_type"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"attention"'
tests_unit_test_kcache_guard_drop_kv_attention_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_kv_attention_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_kv_split_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_kv_split_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"kv_type"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"attention_split"'
tests_unit_test_kcache_guard_drop_kv_split_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_kv_split_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_kv_rope_store_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_kv_rope_store_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"kv_type"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"rope_store"'
tests_unit_test_kcache_guard_drop_kv_rope_store_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_kv_rope_store_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_kv_flash_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_kv_flash_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"kv_type"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"flash_attention"'
tests_unit_test_kcache_guard_drop_kv_flash_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_kv_flash_LDADD = $(kcache_guard_drop_libs)

# mmq's drop builds (see above).
kcache_guard_drop_mmq = tests/unit/test_kcache_guard_drop_mmq_type_mmq \
	tests/unit/test_kcache_guard_drop_quant_mmq \
	tests/unit/test_kcache_guard_drop_k_mmq \
	tests/unit/test_kcache_guard_drop_tile_m_mmq \
	tests/unit/test_kcache_guard_drop_tile_n_mmq \
	tests/unit/test_kcache_guard_drop_warps_mmq \
	tests/unit/test_kcache_guard_drop_prefetch_mmq
tests_unit_test_kcache_guard_drop_mmq_type_mmq_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_mmq_type_mmq_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"mmq_type"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"mmq"'
tests_unit_test_kcache_guard_drop_mmq_type_mmq_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_mmq_type_mmq_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_quant_mmq_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_quant_mmq_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"quant"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"mmq"'
tests_unit_test_kcache_guard_drop_quant_mmq_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_quant_mmq_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_k_mmq_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_k_mmq_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"k"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"mmq"'
tests_unit_test_kcache_guard_drop_k_mmq_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_k_mmq_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_tile_m_mmq_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_tile_m_mmq_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"tile_m"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"mmq"'
tests_unit_test_kcache_guard_drop_tile_m_mmq_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_tile_m_mmq_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_tile_n_mmq_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_tile_n_mmq_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"tile_n"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"mmq"'
tests_unit_test_kcache_guard_drop_tile_n_mmq_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_tile_n_mmq_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_warps_mmq_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_warps_mmq_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"warps"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"mmq"'
tests_unit_test_kcache_guard_drop_warps_mmq_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_warps_mmq_LDADD = $(kcache_guard_drop_libs)
tests_unit_test_kcache_guard_drop_prefetch_mmq_SOURCES = $(kcache_guard_drop_sources)
tests_unit_test_kcache_guard_drop_prefetch_mmq_CPPFLAGS = $(kcache_cuda_cppflags) -DKILN_KCACHE_TEST_DROP_PARAM='"prefetch"' \
	-DKILN_KCACHE_TEST_DROP_TEMPLATE='"mmq"'
tests_unit_test_kcache_guard_drop_prefetch_mmq_CFLAGS = $(kcache_guard_drop_cflags)
tests_unit_test_kcache_guard_drop_prefetch_mmq_LDADD = $(kcache_guard_drop_libs)
endif
