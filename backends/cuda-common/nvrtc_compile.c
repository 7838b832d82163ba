/* NVRTC as the kernel-cache service's compiler for the CUDA backends.
 * Only the service calls compile(), with source it rendered from a
 * descriptor; nothing here is reachable with free-form source. */
#include "config.h"

#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc_compile.h"

/* Compiles and returns the PTX (malloc'd, size without the NUL) or a
 * status with NVRTC's log. */
static kiln_status run_nvrtc(const kiln_host_api *host, const char *program, const char *source,
                             const char *const *options, uint32_t n_options, char **out_ptx,
                             size_t *out_size) {
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, source, program, 0, NULL, NULL);
  if (r != NVRTC_SUCCESS)
    return host->status_new(KILN_STATUS_COMPILE, "NVRTC: creating %s: %s", program,
                            nvrtcGetErrorString(r));
  kiln_status st = NULL;
  r = nvrtcCompileProgram(prog, (int)n_options, options);
  if (r != NVRTC_SUCCESS) {
    size_t log_size = 0;
    char *log = NULL;
    if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size &&
        (log = malloc(log_size)) && nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
      log[0] = '\0';
    st = host->status_new(KILN_STATUS_COMPILE, "NVRTC: compiling %s: %s\n%s", program,
                          nvrtcGetErrorString(r), log ? log : "(no log)");
    free(log);
  } else {
    size_t size = 0;
    char *ptx = NULL;
    r = nvrtcGetPTXSize(prog, &size);
    if (r == NVRTC_SUCCESS && size > 1 && (ptx = malloc(size)) &&
        (r = nvrtcGetPTX(prog, ptx)) == NVRTC_SUCCESS) {
      *out_ptx = ptx;
      *out_size = strnlen(ptx, size); /* NVRTC counts the NUL */
    } else {
      free(ptx);
      st = host->status_new(KILN_STATUS_COMPILE, "NVRTC: no PTX for %s: %s", program,
                            r != NVRTC_SUCCESS ? nvrtcGetErrorString(r) : "empty or no memory");
    }
  }
  nvrtcDestroyProgram(&prog);
  return st;
}

static kiln_status nvrtc_compile(void *user, const char *program, const char *source,
                                 const char *const *options, uint32_t n_options,
                                 void **out_image, size_t *out_size) {
  const kiln_nvrtc *nv = user;
  char *ptx = NULL;
  size_t size = 0;
  KILN_RETURN_IF_ERROR(run_nvrtc(nv->host, program, source, options, n_options, &ptx, &size));
  *out_image = ptx;
  *out_size = size;
  return NULL;
}

static void nvrtc_free_image(void *user, void *image) { free(image); }

static void nvrtc_release_slot(void *user, void *slot) {
  const kiln_nvrtc *nv = user;
  if (nv->release_slot) nv->release_slot(nv->release_ctx, slot);
}

/* The value after `tag` on the PTX header line that has it, up to the end
 * of the line or a comma. */
static void header_field(const char *ptx, const char *tag, char *out, size_t cap) {
  out[0] = '\0';
  const char *p = strstr(ptx, tag);
  if (!p) return;
  p += strlen(tag);
  size_t n = strcspn(p, ",\r\n");
  snprintf(out, cap, "%.*s", (int)n, p);
}

kiln_status kiln_nvrtc_init(kiln_nvrtc *nv, const kiln_host_api *host, const char *arch) {
  memset(nv, 0, sizeof *nv);
  nv->host = host;
  unsigned num = 0;
  char suffix[4] = "";
  if (!arch || sscanf(arch, "sm_%3u%3s", &num, suffix) < 1 || strlen(arch) >= sizeof nv->arch ||
      (suffix[0] && strcmp(suffix, "a") != 0 && strcmp(suffix, "f") != 0))
    return host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                            "NVRTC: target \"%s\" is not an exact sm_XY[a|f]",
                            arch ? arch : "(null)");
  int n_archs = 0;
  if (nvrtcGetNumSupportedArchs(&n_archs) != NVRTC_SUCCESS || n_archs <= 0)
    return host->status_new(KILN_STATUS_UNSUPPORTED, "NVRTC: cannot list supported targets");
  int *archs = malloc((size_t)n_archs * sizeof *archs);
  bool supported = false;
  if (archs && nvrtcGetSupportedArchs(archs) == NVRTC_SUCCESS)
    for (int i = 0; i < n_archs; i++) supported |= archs[i] == (int)num;
  free(archs);
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  if (!supported)
    return host->status_new(KILN_STATUS_UNSUPPORTED, "NVRTC %d.%d cannot compile for %s", major,
                            minor, arch);
  snprintf(nv->arch, sizeof nv->arch, "%s", arch);
  snprintf(nv->arch_option, sizeof nv->arch_option, "--gpu-architecture=%s", arch);
  nv->options[0] = nv->arch_option;
  nv->options[1] = "--std=c++17";
  nv->n_options = 2;

  /* Two NVRTC builds with one major.minor may emit different code: the
   * fingerprint takes the release and build ID from a probe's PTX. */
  char *ptx = NULL;
  size_t size = 0;
  KILN_RETURN_IF_ERROR(host->status_annotate(
      run_nvrtc(host, "kiln_probe.cu", "extern \"C\" __global__ void kiln_probe(void) {}\n",
                nv->options, nv->n_options, &ptx, &size),
      "probing NVRTC's build"));
  char build[48];
  header_field(ptx, "Compiler Build ID: ", build, sizeof build);
  char rel_v[48] = "";
  const char *v = strstr(ptx, ", V");
  if (v) header_field(v, ", ", rel_v, sizeof rel_v);
  free(ptx);
  snprintf(nv->version, sizeof nv->version, "%d.%d%s%s%s%s", major, minor, rel_v[0] ? " " : "",
           rel_v, build[0] ? " " : "", build);
  return NULL;
}

void kiln_nvrtc_compiler_desc(const kiln_nvrtc *nv, kiln_kcompiler_desc *out_desc) {
  memset(out_desc, 0, sizeof *out_desc);
  out_desc->name = "nvrtc";
  out_desc->version = nv->version;
  out_desc->arch = nv->arch;
  out_desc->options = nv->options;
  out_desc->n_options = nv->n_options;
  out_desc->image_kind = KILN_KIMAGE_PTX;
  out_desc->compile = nvrtc_compile;
  out_desc->free_image = nvrtc_free_image;
  out_desc->release_slot = nv->release_slot ? nvrtc_release_slot : NULL;
  out_desc->user = (void *)nv;
}

kiln_status kiln_nvrtc_register(kiln_nvrtc *nv, const kiln_host_api *host, kiln_kcache *kc,
                                const char *arch, kiln_kcompiler **out_compiler) {
  KILN_RETURN_IF_ERROR(kiln_nvrtc_init(nv, host, arch));
  kiln_kcompiler_desc d;
  kiln_nvrtc_compiler_desc(nv, &d);
  return host->kcache_register_compiler(kc, &d, out_compiler);
}
