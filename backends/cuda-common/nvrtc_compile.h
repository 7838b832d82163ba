/* The NVRTC compile hook of the CUDA backends: CUDA C -> PTX for one exact
 * target (sm_XY), registered with the kernel-cache service as a compiler
 * whose fingerprint carries NVRTC's exact build and the options. */
#ifndef KILN_CUDA_NVRTC_COMPILE_H
#define KILN_CUDA_NVRTC_COMPILE_H

#include "kiln/plugin.h"

#define KILN_NVRTC_MAX_OPTIONS 4

typedef struct kiln_nvrtc {
  const kiln_host_api *host; /* statuses are made through it */
  char arch[16];             /* "sm_90" */
  char version[128];         /* "13.0 V13.0.88 CL-36424714" */
  char arch_option[48];      /* "--gpu-architecture=sm_90" */
  const char *options[KILN_NVRTC_MAX_OPTIONS];
  uint32_t n_options;
  /* Optional, set by a backend after kiln_nvrtc_init: unloads what the
   * backend keeps in a kernel's slot (its CUmodule) when the compiler is
   * unregistered. NULL: slots are never used. */
  void (*release_slot)(void *release_ctx, void *slot);
  void *release_ctx;
} kiln_nvrtc;

/* Prepares nv to compile for `arch` (an exact "sm_<digits>[a|f]", e.g.
 * from kiln_kcache_arch_from_cc; sm_120 and sm_121 are different targets).
 * Checks that this NVRTC supports the arch (nvrtcGetSupportedArchs) and
 * reads its exact build by compiling an empty program (nvrtcVersion gives
 * only major.minor; the PTX header names the release and the build ID).
 * Errors: KILN_STATUS_INVALID_ARGUMENT for a malformed arch,
 * KILN_STATUS_UNSUPPORTED for one this NVRTC cannot target,
 * KILN_STATUS_COMPILE if the probe fails. */
kiln_status kiln_nvrtc_init(kiln_nvrtc *nv, const kiln_host_api *host, const char *arch);

/* The compiler description for kcache_register_compiler: name "nvrtc",
 * nv's version, arch and options, PTX images, and nv->release_slot (when
 * set) as its release_slot. It points into nv, which must outlive the
 * registration. */
void kiln_nvrtc_compiler_desc(const kiln_nvrtc *nv, kiln_kcompiler_desc *out_desc);

/* kiln_nvrtc_init, then registers the compiler with kc through the host
 * table; what a CUDA backend's open() calls. */
kiln_status kiln_nvrtc_register(kiln_nvrtc *nv, const kiln_host_api *host, kiln_kcache *kc,
                                const char *arch, kiln_kcompiler **out_compiler);

#endif
