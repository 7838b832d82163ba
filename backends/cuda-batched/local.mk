# The cuda-batched backend plugin (kiln-cuda-batched.so): an entry table over
# backends/cuda-common (see backends/cuda-common/cuda_backend.h). It links
# NVRTC and cuBLAS from the toolkit (with an rpath), never libcuda (the
# driver API is resolved at run time) and never libkiln.
if HAVE_CUDA
pkglib_LTLIBRARIES += kiln-cuda-batched.la
kiln_cuda_batched_la_SOURCES = backends/cuda-batched/batched_entry.c
kiln_cuda_batched_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) -I$(top_srcdir)/backends/cuda-common
kiln_cuda_batched_la_LIBADD = backends/cuda-common/libkilncudacommon.la \
	backends/cuda-common/libkilncudagraph.la $(NVRTC_LIBS) $(CUBLAS_LIBS) -ldl -lm
kiln_cuda_batched_la_LDFLAGS = $(kiln_plugin_link_flags)
endif
