/* Kernels from the kernel-cache service to launches: the PTX of a
 * kiln_kernel is loaded once into a module kept in the kernel's slot (so a
 * launch never hashes or looks anything up), and unloaded by the
 * compiler's release_slot when the backend closes. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"

/* Plugins cannot call libkiln's kiln_kimage_kind_name. */
static const char *kiln_kimage_kind_name_of(kiln_kimage_kind k) {
  return k == KILN_KIMAGE_PTX ? "ptx" : k == KILN_KIMAGE_CUBIN ? "cubin" : "unknown";
}

/* With profile = true: what the driver's JIT made of a kernel, once per
 * loaded kernel (registers a thread, local memory a thread: spills, static
 * shared memory a block), the facts `nvcc -Xptxas -v` would print, to
 * read the per-node times against. Best effort: a failed query logs
 * nothing. */
static void log_resources(const kiln_cuda_backend *be, const kiln_kernel *k, const kiln_node *node,
                          CUfunction fn) {
  int regs = -1, local = -1, shared = -1;
  const kiln_cu *cu = be->cu;
  if (cu->FuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn) != CUDA_SUCCESS ||
      cu->FuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn) != CUDA_SUCCESS ||
      cu->FuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn) != CUDA_SUCCESS)
    return;
  be->host->log(KILN_LOG_INFO, be->fl->name,
                "profile: kernel %s, first for node %.*s: %d registers, %d bytes local a thread "
                "(spills), %d bytes shared a block",
                k->template_name, KILN_NAME_MAX, node->name, regs, local, shared);
}

/* Whether the kernel's PTX waits on its grid dependency (grid_dep.cuh's
 * griddepcontrol.wait): only such a kernel may start before the one
 * before it has finished. */
static bool waits_on_grid(const kiln_kernel *k) {
  static const char needle[] = "griddepcontrol.wait";
  const size_t n = sizeof needle - 1;
  const char *p = k->image;
  for (size_t i = 0; k->image_size >= n && i <= k->image_size - n; i++)
    if (p[i] == 'g' && memcmp(p + i, needle, n) == 0) return true;
  return false;
}

static bool launches_programmatically(const kiln_cuda_backend *be, CUfunction fn) {
  if (!be->pdl) return false;
  for (uint32_t i = 0; i < be->n_pdl_fns; i++)
    if (be->pdl_fns[i] == fn) return true;
  return false;
}

kiln_status kiln_cuda_kernel_fn(kiln_cuda_backend *be, kiln_kernel *k, const kiln_node *node,
                                CUfunction *out_fn) {
  const kiln_host_api *host = be->host;
  const kiln_cu *cu = be->cu;
  kiln_cuda_module *m = k->slot;
  if (!m) {
    if (k->image_kind != KILN_KIMAGE_PTX)
      return host->status_new(KILN_STATUS_INTERNAL,
                              "kernel %s for node %.*s is a %s image; the CUDA backends load PTX",
                              k->template_name, KILN_NAME_MAX, node->name,
                              kiln_kimage_kind_name_of(k->image_kind));
    m = calloc(1, sizeof *m);
    if (!m) return host->status_new(KILN_STATUS_NO_MEMORY, "kernel %s", k->template_name);
    char log[4096] = "";
    CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
    CUresult r = cu->ModuleLoadDataEx(&m->module, k->image, 2, opts, vals);
    if (r != CUDA_SUCCESS) {
      free(m);
      kiln_status st = kiln_cu_error(host, cu, r, "cuModuleLoadDataEx", node);
      return host->status_annotate(st, "loading kernel %s (%s)%s%s", k->template_name, be->arch,
                                   log[0] ? ", JIT log: " : "", log);
    }
    r = cu->ModuleGetFunction(&m->fn, m->module, k->entry);
    if (r != CUDA_SUCCESS) {
      cu->ModuleUnload(m->module);
      free(m);
      return host->status_annotate(kiln_cu_error(host, cu, r, "cuModuleGetFunction", node),
                                   "kernel %s, entry %s", k->template_name, k->entry);
    }
    k->slot = m;
    if (be->prof.on) log_resources(be, k, node, m->fn);
    if (waits_on_grid(k) && be->n_pdl_fns < KILN_CUDA_MAX_PDL_FNS)
      be->pdl_fns[be->n_pdl_fns++] = m->fn;
  }
  *out_fn = m->fn;
  return NULL;
}

void kiln_cuda_release_slot(void *backend, void *slot) {
  kiln_cuda_backend *be = backend;
  kiln_cuda_module *m = slot;
  if (!m) return;
  /* a later module's function may get the same handle */
  for (uint32_t i = 0; i < be->n_pdl_fns; i++)
    if (be->pdl_fns[i] == m->fn) be->pdl_fns[i--] = be->pdl_fns[--be->n_pdl_fns];
  if (be->cu->CtxSetCurrent(be->ctx) == CUDA_SUCCESS) be->cu->ModuleUnload(m->module);
  free(m);
}

kiln_status kiln_cuda_launch(kiln_cuda_backend *be, const kiln_node *node, const char *what,
                             CUfunction fn, uint32_t gx, uint32_t gy, uint32_t block,
                             void **args) {
  return kiln_cuda_launch_shared(be, node, what, fn, gx, gy, block, 0, args);
}

kiln_status kiln_cuda_launch_shared(kiln_cuda_backend *be, const kiln_node *node,
                                    const char *what, CUfunction fn, uint32_t gx, uint32_t gy,
                                    uint32_t block, uint32_t shared_bytes, void **args) {
  if (!fn)
    return be->host->status_new(KILN_STATUS_INTERNAL,
                                "%s node '%.*s': the %s kernel was not prepared",
                                kiln_op_name(node->op), KILN_NAME_MAX, node->name, what);
  if (gx == 0 || gy == 0) return NULL;
  CUresult r;
  const bool pdl = launches_programmatically(be, fn);
  if (pdl) {
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig c;
    memset(&c, 0, sizeof c);
    c.gridDimX = gx, c.gridDimY = gy, c.gridDimZ = 1;
    c.blockDimX = block, c.blockDimY = 1, c.blockDimZ = 1;
    c.sharedMemBytes = shared_bytes;
    c.hStream = be->stream;
    c.attrs = &attr;
    c.numAttrs = 1;
    r = be->cu->LaunchKernelEx(&c, fn, args, NULL);
  } else {
    r = be->cu->LaunchKernel(fn, gx, gy, 1, block, 1, 1, shared_bytes, be->stream, args, NULL);
  }
  if (r != CUDA_SUCCESS) {
    char call[160];
    snprintf(call, sizeof call, "%s(%s, grid %ux%u, block %u, shared %u)",
             pdl ? "cuLaunchKernelEx (programmatic)" : "cuLaunchKernel", what, gx, gy, block,
             shared_bytes);
    return kiln_cu_error(be->host, be->cu, r, call, node);
  }
  return NULL;
}
