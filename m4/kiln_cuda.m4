# KILN_CHECK_CUDA
# ---------------
# --with-cuda[=DIR] / --without-cuda.  Looks for the CUDA toolkit's NVRTC,
# cuBLAS and driver-API header (cuda.h) under DIR (default /usr/local/cuda).
# The driver library itself (libcuda.so.1) is NOT linked: cuda-common
# dlopens it at run time, so the plugins load on machines without a driver.
# Sets kiln_have_cuda=yes|no, CUDA_CPPFLAGS, NVRTC_LIBS, CUBLAS_LIBS,
# CUDA_LIBDIR, and defines KILN_CUDA_LIBDIR.
AC_DEFUN([KILN_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
      [build the CUDA backend plugins against the toolkit in DIR (default: /usr/local/cuda if present)])],
    [], [with_cuda=check])
  kiln_have_cuda=no
  kiln_cuda_summary="(--without-cuda or not found)"
  AS_IF([test "x$with_cuda" != xno], [
    AS_CASE([$with_cuda], [yes|check], [kiln_cuda_dir=/usr/local/cuda], [kiln_cuda_dir=$with_cuda])
    CUDA_CPPFLAGS="-I$kiln_cuda_dir/include"
    CUDA_LIBDIR="$kiln_cuda_dir/lib64"
    AS_IF([test ! -d "$CUDA_LIBDIR"], [CUDA_LIBDIR="$kiln_cuda_dir/lib"])
    save_CPPFLAGS=$CPPFLAGS; save_LIBS=$LIBS; save_LDFLAGS=$LDFLAGS
    CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
    LDFLAGS="$LDFLAGS -L$CUDA_LIBDIR"
    kiln_cuda_ok=yes
    AC_CHECK_HEADERS([cuda.h nvrtc.h cublas_v2.h cublasLt.h], [], [kiln_cuda_ok=no])
    dnl optional: NVTX 3's memory API, to mark cuBLAS outputs for compute-sanitizer
    AC_CHECK_HEADERS([nvtx3/nvToolsExtMemCudaRt.h])
    AS_IF([test $kiln_cuda_ok = yes],
      [AC_CHECK_LIB([nvrtc], [nvrtcCreateProgram], [], [kiln_cuda_ok=no])])
    AS_IF([test $kiln_cuda_ok = yes],
      [AC_CHECK_LIB([cublas], [cublasCreate_v2], [], [kiln_cuda_ok=no])])
    AS_IF([test $kiln_cuda_ok = yes],
      [AC_CHECK_LIB([cublasLt], [cublasLtCreate], [], [kiln_cuda_ok=no])])
    CPPFLAGS=$save_CPPFLAGS; LIBS=$save_LIBS; LDFLAGS=$save_LDFLAGS
    AS_IF([test $kiln_cuda_ok = yes], [
      kiln_have_cuda=yes
      kiln_cuda_summary="($kiln_cuda_dir)"
      NVRTC_LIBS="-L$CUDA_LIBDIR -Wl,-rpath,$CUDA_LIBDIR -lnvrtc"
      CUBLAS_LIBS="-L$CUDA_LIBDIR -Wl,-rpath,$CUDA_LIBDIR -lcublas -lcublasLt"
      AC_DEFINE([KILN_HAVE_CUDA], [1], [the CUDA toolkit was found])
      AC_DEFINE_UNQUOTED([KILN_CUDA_LIBDIR], ["$CUDA_LIBDIR"], [the CUDA toolkit's library folder])
    ], [
      AS_IF([test "x$with_cuda" != xcheck],
        [AC_MSG_ERROR([--with-cuda: no usable CUDA toolkit (cuda.h, nvrtc, cublas, cublasLt) under $kiln_cuda_dir])])
    ])
  ])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LIBDIR])
  AC_SUBST([NVRTC_LIBS])
  AC_SUBST([CUBLAS_LIBS])
])
