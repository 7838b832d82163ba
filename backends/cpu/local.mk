# The cpu backend plugin (kiln-cpu.so): the reference backend.
#
# The ops live in a convenience library that does not link libkiln, so the
# plugin and the unit tests (tests/unit/cpu.mk) share one build of them:
# the plugin hands them the host table's services, the tests libkiln's.
noinst_LTLIBRARIES += backends/cpu/libkilncpuops.la
backends_cpu_libkilncpuops_la_SOURCES = \
	backends/cpu/cpu_ops.h \
	backends/cpu/cpu_dot.h \
	backends/cpu/cpu_simd.h \
	backends/cpu/cpu_simd.c \
	backends/cpu/cpu_mm.h \
	backends/cpu/mm_avx2.h \
	backends/cpu/mm_avx2_table.c \
	backends/cpu/mm_avx2_float.c \
	backends/cpu/mm_avx2_q8_0.c \
	backends/cpu/mm_avx2_q4_0.c \
	backends/cpu/mm_avx2_q5_0.c \
	backends/cpu/mm_avx2_q4_k.c \
	backends/cpu/mm_avx2_q5_k.c \
	backends/cpu/mm_avx2_q6_k.c \
	backends/cpu/mm_avx2_q16.c \
	backends/cpu/mm_avx2_gemm.c \
	backends/cpu/cpu_attn.h \
	backends/cpu/attn_avx2.c \
	backends/cpu/vexp_avx2.h \
	backends/cpu/cpu_swiglu.h \
	backends/cpu/swiglu_avx2.c \
	backends/cpu/cpu_threads.h \
	backends/cpu/cpu_threads.c \
	backends/cpu/cpu_op_util.c \
	backends/cpu/cpu_check.c \
	backends/cpu/cpu_weights.c \
	backends/cpu/cpu_buffers.c \
	backends/cpu/op_get_rows.c \
	backends/cpu/op_rms_norm.c \
	backends/cpu/op_mul_mat.c \
	backends/cpu/op_rope.c \
	backends/cpu/op_store_kv.c \
	backends/cpu/op_attention.c \
	backends/cpu/op_swiglu.c \
	backends/cpu/op_add.c \
	backends/cpu/op_slice.c \
	backends/cpu/op_sigmoid_mul.c \
	backends/cpu/op_ssm_conv.c \
	backends/cpu/op_gdn_gate.c \
	backends/cpu/op_gated_delta_net.c \
	backends/cpu/gdn_body.h \
	backends/cpu/op_get_columns.c
# -fno-math-errno lets sqrtf inline (errno is never read); the vectorizer's
# dynamic cost model lets gcc -O2 vectorize the lane loops of cpu_dot.h
# (KILN_CPU_VEC_CFLAGS: configure keeps the flags the compiler accepts).
# Neither changes a result. -ffp-contract=off keeps a*b+c two roundings
# even under -std=gnu11 or -march with FMA, so results do not depend on the
# build or on which cpu_dot.h clone (SSE2 or AVX2) runs.
backends_cpu_libkilncpuops_la_CFLAGS = $(AM_CFLAGS) -fno-math-errno -ffp-contract=off \
	$(KILN_CPU_VEC_CFLAGS)
backends_cpu_libkilncpuops_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/backends/common
# The node's structure is checked by backends/common, as in every backend.
backends_cpu_libkilncpuops_la_LIBADD = backends/common/libkilnnodecheck.la -lm

pkglib_LTLIBRARIES += kiln-cpu.la
kiln_cpu_la_SOURCES = backends/cpu/cpu_entry.c
kiln_cpu_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/backends/common
kiln_cpu_la_LIBADD = backends/cpu/libkilncpuops.la -lm
kiln_cpu_la_LDFLAGS = $(kiln_plugin_link_flags)
