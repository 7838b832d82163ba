# The cuda-cc120 backend plugin (kiln-cuda-cc120.so): an entry table over
# backends/cuda-common (see backends/cuda-common/cuda_backend.h). It links
# NVRTC and cuBLAS from the toolkit (with an rpath), never libcuda (the
# driver API is resolved at run time) and never libkiln.
if HAVE_CUDA
pkglib_LTLIBRARIES += kiln-cuda-cc120.la
kiln_cuda_cc120_la_SOURCES = backends/cuda-cc120/cc120_entry.c
kiln_cuda_cc120_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) -I$(top_srcdir)/backends/cuda-common
kiln_cuda_cc120_la_LIBADD = backends/cuda-common/libkilncudacommon.la \
	backends/cuda-common/libkilncudagraph.la $(NVRTC_LIBS) $(CUBLAS_LIBS) -ldl -lm
kiln_cuda_cc120_la_LDFLAGS = $(kiln_plugin_link_flags)
endif
