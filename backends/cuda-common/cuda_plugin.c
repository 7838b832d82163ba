/* The CUDA plugins' life cycle: init (the driver library), probe (device,
 * compute capability, memory, or why there is none), open (context,
 * stream, compiler, cuBLAS) and close. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_origin.h"
#include "cuda_backend.h"
#include "kernel_templates.h"

kiln_status kiln_cuda_init(const kiln_cuda_flavor *fl, const kiln_host_api *host,
                           void **out_plugin) {
  *out_plugin = NULL;
  /* cfg_origin (2.4) is read only where the table has it (config_origin.h) */
  if (host->abi_major != KILN_PLUGIN_ABI_MAJOR || host->struct_size < KILN_HOST_API_SIZE_2_3)
    return host->status_new(KILN_STATUS_ABI,
                            "%s: host table is ABI %u.%u with %u bytes; this plugin needs %d.x "
                            "with at least %zu bytes",
                            fl->name, host->abi_major, host->abi_minor, host->struct_size,
                            KILN_PLUGIN_ABI_MAJOR, KILN_HOST_API_SIZE_2_3);
  kiln_cuda_plugin *pl = calloc(1, sizeof *pl);
  if (!pl) return host->status_new(KILN_STATUS_NO_MEMORY, "%s: no memory for the plugin", fl->name);
  pl->host = host;
  pl->fl = fl;
  /* A missing driver is not an error here: probe() reports it. */
  pl->cu_ok = kiln_cu_load(&pl->cu, pl->cu_why, sizeof pl->cu_why);
  *out_plugin = pl;
  return NULL;
}

void kiln_cuda_fini(void *plugin) {
  kiln_cuda_plugin *pl = plugin;
  if (!pl) return;
  kiln_cu_unload(&pl->cu);
  kiln_nccl_unload(&pl->nccl);
  free(pl);
}

/* "13.0" from cuDriverGetVersion's 13000. */
static void version_text(int v, char *buf, size_t n) {
  snprintf(buf, n, "%d.%d", v / 1000, v % 1000 / 10);
}

kiln_status kiln_cuda_probe(void *plugin, kiln_probe_info *out_info) {
  const kiln_cuda_plugin *pl = plugin;
  const kiln_cu *cu = &pl->cu;
  const kiln_cuda_flavor *fl = pl->fl;
  memset(out_info, 0, sizeof *out_info);
  snprintf(out_info->device, sizeof out_info->device, "NVIDIA GPU");
  if (!pl->cu_ok) {
    snprintf(out_info->reason, sizeof out_info->reason, "%s", pl->cu_why);
    return NULL;
  }
  char err[256];
  CUresult r = cu->Init(0);
  if (r != CUDA_SUCCESS) {
    snprintf(out_info->reason, sizeof out_info->reason, "cuInit: %s",
             kiln_cu_error_text(cu, r, err, sizeof err));
    return NULL;
  }
  int count = 0;
  r = cu->DeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count < 1) {
    snprintf(out_info->reason, sizeof out_info->reason, "no CUDA device%s%s",
             r != CUDA_SUCCESS ? ": cuDeviceGetCount: " : "",
             r != CUDA_SUCCESS ? kiln_cu_error_text(cu, r, err, sizeof err) : "");
    return NULL;
  }
  CUdevice dev;
  char name[128] = "";
  int major = 0, minor = 0, drv = 0;
  size_t mem = 0;
  if ((r = cu->DeviceGet(&dev, 0)) != CUDA_SUCCESS ||
      (r = cu->DeviceGetName(name, (int)sizeof name, dev)) != CUDA_SUCCESS ||
      (r = cu->DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)) !=
          CUDA_SUCCESS ||
      (r = cu->DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)) !=
          CUDA_SUCCESS ||
      (r = cu->DeviceTotalMem(&mem, dev)) != CUDA_SUCCESS ||
      (r = cu->DriverGetVersion(&drv)) != CUDA_SUCCESS) {
    snprintf(out_info->reason, sizeof out_info->reason, "querying device 0: %s",
             kiln_cu_error_text(cu, r, err, sizeof err));
    return NULL;
  }
  char dv[16];
  version_text(drv, dv, sizeof dv);
  snprintf(out_info->device, sizeof out_info->device, "%s", name);
  int len = snprintf(out_info->detail, sizeof out_info->detail,
                     "compute capability %d.%d, %.1f GiB, driver API %s, %d device%s (device 0 "
                     "shown)",
                     major, minor, (double)mem / (1024.0 * 1024.0 * 1024.0), dv, count,
                     count == 1 ? "" : "s");
  out_info->available = true;
  if (fl->cc_major && major != fl->cc_major) {
    if (major < fl->cc_major && fl->has_allow_lower_cc) {
      /* probe() cannot see the config: report the device as usable and
       * let open() refuse unless allow_lower_cc is set, so a test can
       * still plan on it. */
      if (len > 0 && (size_t)len < sizeof out_info->detail)
        snprintf(out_info->detail + len, sizeof out_info->detail - (size_t)len,
                 "; compute capability %d.%d is below %d.0: open() refuses unless [%s] "
                 "allow_lower_cc = true",
                 major, minor, fl->cc_major, fl->name);
    } else {
      out_info->available = false;
      snprintf(out_info->reason, sizeof out_info->reason,
               "compute capability %d.%d of %s is not %d.x (this plugin is for %d.x devices; "
               "use cuda-batched)",
               major, minor, name, fl->cc_major, fl->cc_major);
    }
  }
  return NULL;
}

static void backend_free(kiln_cuda_backend *be) {
  const kiln_cu *cu = be->cu;
  if (be->ctx) cu->CtxSetCurrent(be->ctx);
  if (be->stream) cu->StreamSynchronize(be->stream);
  if (be->stream) kiln_cuda_prof_finish(be); /* the table, if profile = true */
  if (be->ctx) {
    if (be->graph.captures)
      be->host->log(KILN_LOG_INFO, be->fl->name, "decode steps: %llu captured, %llu replayed",
                    (unsigned long long)be->graph.captures, (unsigned long long)be->graph.replays);
    kiln_cuda_graph_drop_all(be);
  }
  /* Unloads every module kept in a slot (kiln_cuda_release_slot). */
  if (be->compiler) be->host->kcache_unregister_compiler(be->compiler);
  kiln_cuda_blas_close(be);
  if (be->scratch) cu->MemFree(be->scratch);
  if (be->x16) cu->MemFree(be->x16);
  if (be->lt_ws) cu->MemFree(be->lt_ws);
  if (be->lt_out) cu->MemFree(be->lt_out);
  if (be->xq) cu->MemFree(be->xq);
  if (be->attn_part) cu->MemFree(be->attn_part);
  if (be->attn_tickets) cu->MemFree(be->attn_tickets);
  kiln_cuda_sanitize_close(be);
  if (be->step_dev) cu->MemFree(be->step_dev);
  if (be->staging) cu->MemFreeHost(be->staging);
  if (be->up_staging) cu->MemFreeHost(be->up_staging);
  if (be->up_ev) cu->EventDestroy(be->up_ev);
  if (be->stream) cu->StreamDestroy(be->stream);
  if (be->ctx) cu->DevicePrimaryCtxRelease(be->dev);
  free(be->states);
  free(be);
}

/* Reads the plugin's section (NULL: every key at its default). */
static kiln_status read_config(kiln_cuda_backend *be, const kiln_config_section *cfg,
                               bool *out_allow_lower) {
  const kiln_host_api *host = be->host;
  const kiln_cuda_flavor *fl = be->fl;
  be->device = cfg ? (int)host->cfg_int(cfg, "device") : 0;
  be->poison = cfg ? (int)host->cfg_int(cfg, "poison") : -1;
  be->prof.on = cfg ? host->cfg_bool(cfg, "profile") : false;
  be->act = KILN_CUDA_QUANT_Q16;
  be->fuse = cfg ? host->cfg_bool(cfg, "fuse") : true;
  be->graph.on = cfg ? host->cfg_bool(cfg, "graph") : true;
  be->pdl = cfg ? host->cfg_bool(cfg, "pdl") : true; /* and cc >= 9.0: open() */
  if (cfg) {
    const char *a = host->cfg_str(cfg, "activations");
    if (!a || strcmp(a, "q16") == 0) be->act = KILN_CUDA_QUANT_Q16;
    else if (strcmp(a, "q8") == 0) be->act = KILN_CUDA_QUANT_Q8;
    else if (strcmp(a, "f32") == 0) be->act = KILN_CUDA_QUANT_NONE;
    else
      return kiln_config_origin_annotate(
          host, cfg, "activations",
          host->status_new(KILN_STATUS_INVALID_ARGUMENT, "[%s] activations = %s is not f32|q16|q8",
                           fl->name, a));
  }
  be->recurrent_guard = true;
  if (cfg) {
    const char *g = host->cfg_str(cfg, "recurrent_guard");
    if (!g || strcmp(g, "f32") == 0) be->recurrent_guard = true;
    else if (strcmp(g, "off") == 0) be->recurrent_guard = false;
    else
      return kiln_config_origin_annotate(
          host, cfg, "recurrent_guard",
          host->status_new(KILN_STATUS_INVALID_ARGUMENT, "[%s] recurrent_guard = %s is not f32|off",
                           fl->name, g));
  }
  be->mvq_load = 0;
  be->mvq_forced = (kiln_cuda_matvec_shape){0, 0, 0, 0, 0};
  if (cfg) {
    const char *l = host->cfg_str(cfg, "matvec_load");
    be->mvq_load = !l || strcmp(l, "auto") == 0 ? 0
                   : strcmp(l, "direct") == 0       ? 1
                   : strcmp(l, "staged") == 0       ? 2
                                                    : 3; /* bulk: the key's choices */
    const char *sh = host->cfg_str(cfg, "matvec_shape");
    if (sh && strcmp(sh, "auto") != 0) {
      uint32_t v[5] = {0, 0, 0, 1, 0};
      const int n = kiln_cuda_parse_uints(sh, v, 5);
      const uint32_t w = v[0], k = v[1], r = v[2], g = v[3], s = v[4];
      if ((n != 3 && n != 4 && n != 5) || w < 1 || w > 32 || k < 1 || w % k != 0 || r < 1 ||
          r > 8 || g < 1 || g > 64 || s == 1 || s > 16 || (s && g != 1))
        return kiln_config_origin_annotate(
            host, cfg, "matvec_shape",
            host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "[%s] matvec_shape = %s is not auto or "
                             "WARPS,K_SPLIT,ROWS[,GROUPS[,STAGES]] (warps 1..32, k_split "
                             "dividing it, rows 1..8, groups 1..64, stages 0 or 2..16 with "
                             "groups 1)",
                             fl->name, sh));
      be->mvq_forced = (kiln_cuda_matvec_shape){w, k, r, g, s};
    }
  }
  be->attn_splits_forced = cfg ? (uint32_t)host->cfg_int(cfg, "attention_splits") : 0;
  be->attn_merge_kernel = true;
  if (cfg) {
    const char *am = host->cfg_str(cfg, "attention_merge");
    be->attn_merge_kernel = !am || strcmp(am, "fused") != 0;
  }
  be->attn_mma = true;
  if (cfg) {
    const char *da = host->cfg_str(cfg, "decode_attention");
    be->attn_mma = !da || strcmp(da, "split") != 0;
  }
  /* Only the flavors with flash tiles (the batched ones) declare the key. */
  be->prefill_flash = fl->flash.bq > 0;
  if (fl->flash.bq > 0 && cfg) {
    const char *pa = host->cfg_str(cfg, "prefill_attention");
    be->prefill_flash = !pa || strcmp(pa, "rows") != 0;
  }
  be->prof.step_running = be->prof.step_done = -1;
  *out_allow_lower = cfg && fl->has_allow_lower_cc ? host->cfg_bool(cfg, "allow_lower_cc") : false;
  /* the batched flavors' default (cuda-serial has no GEMM) */
  be->gemm = fl->has_gemm_keys ? KILN_CUDA_GEMM_BF16X3 : KILN_CUDA_GEMM_F32;
  be->scratch_cap = (uint64_t)256 << 20;
  /* mmq's tile (gemm = q16mma): 128 weight rows by 64 tokens, 4 warps of
   * 32 x 64 outputs each, no prefetch; 42 KiB of shared memory, 161 (Q4_K)
   * and 156 (Q6_K) registers (ptxas, sm_90). Swept on an H100 (perf-notes
   * v10): no shape moved pp512 by more than 10 %. */
  be->mmq_shape = (kiln_cuda_mmq_shape){128, 64, 4, 0};
  if (fl->has_gemm_keys && cfg) {
    const char *g = host->cfg_str(cfg, "gemm");
    if (!g || strcmp(g, "bf16x3") == 0) be->gemm = KILN_CUDA_GEMM_BF16X3;
    else if (strcmp(g, "f32") == 0) be->gemm = KILN_CUDA_GEMM_F32;
    else if (strcmp(g, "tf32") == 0) be->gemm = KILN_CUDA_GEMM_TF32;
    else if (strcmp(g, "bf16") == 0) be->gemm = KILN_CUDA_GEMM_BF16;
    else if (strcmp(g, "q16mma") == 0) be->gemm = KILN_CUDA_GEMM_Q16MMA;
    else if (strcmp(g, "fp8") == 0) be->gemm = KILN_CUDA_GEMM_FP8;
    else if (strcmp(g, "tf32x3") == 0) be->gemm = KILN_CUDA_GEMM_TF32X3;
    else
      return kiln_config_origin_annotate(
          host, cfg, "gemm",
          host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "[%s] gemm = %s is not f32|tf32|bf16|bf16x3|tf32x3|q16mma|fp8", fl->name, g));
    be->scratch_cap = (uint64_t)host->cfg_int(cfg, "gemm_scratch_mib") << 20;
    const char *ms = host->cfg_str(cfg, "mmq_shape");
    if (ms && strcmp(ms, "auto") != 0) {
      uint32_t v[4] = {0, 0, 0, 0};
      const int n = kiln_cuda_parse_uints(ms, v, 4);
      const kiln_cuda_mmq_shape s = {v[0], v[1], v[2], v[3]};
      if ((n != 3 && n != 4) || !kiln_cuda_mmq_shape_ok(&s, KILN_CUDA_QUANT_Q16))
        return kiln_config_origin_annotate(
            host, cfg, "mmq_shape",
            host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "[%s] mmq_shape = %s is not auto or TILE_M,TILE_N,WARPS[,PREFETCH] "
                             "(tile_m a multiple of 16 in 16..256, tile_n of 8 in 8..256, "
                             "warps 1..16 dividing the 16x8 fragments, at most 48 KiB of "
                             "shared memory, prefetch 0 or 1)",
                             fl->name, ms));
      be->mmq_shape = s;
    }
  }
  if (be->device < 0 || be->poison < -1 || be->poison > 255 || be->scratch_cap < (1u << 20)) {
    /* the message names all three; the place is the first one's out of range */
    const char *key = be->device < 0                          ? "device"
                      : be->poison < -1 || be->poison > 255 ? "poison"
                                                              : "gemm_scratch_mib";
    return kiln_config_origin_annotate(
        host, cfg, key,
        host->status_new(KILN_STATUS_OUT_OF_RANGE,
                         "[%s] device = %d, poison = %d, gemm_scratch_mib = %llu: out of range",
                         fl->name, be->device, be->poison,
                         (unsigned long long)(be->scratch_cap >> 20)));
  }
  return NULL;
}

static kiln_status open_device(kiln_cuda_backend *be, const kiln_config_section *cfg, bool allow_lower) {
  const kiln_host_api *host = be->host;
  const kiln_cu *cu = be->cu;
  const kiln_cuda_flavor *fl = be->fl;
  KILN_CU_CHECK(host, cu, NULL, Init(0));
  int count = 0;
  KILN_CU_CHECK(host, cu, NULL, DeviceGetCount(&count));
  if (be->device >= count)
    return kiln_config_origin_annotate(
        host, cfg, "device",
        host->status_new(KILN_STATUS_UNAVAILABLE,
                         "[%s] device = %d, but the driver sees %d CUDA device%s", fl->name,
                         be->device, count, count == 1 ? "" : "s"));
  KILN_CU_CHECK(host, cu, NULL, DeviceGet(&be->dev, be->device));
  KILN_CU_CHECK(host, cu, NULL,
                DeviceGetAttribute(&be->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                   be->dev));
  KILN_CU_CHECK(host, cu, NULL,
                DeviceGetAttribute(&be->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                   be->dev));
  KILN_CU_CHECK(host, cu, NULL,
                DeviceGetAttribute(&be->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                   be->dev));
  KILN_CU_CHECK(host, cu, NULL,
                DeviceGetAttribute(&be->smem_optin,
                                   CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, be->dev));
  if (fl->cc_major && be->cc_major != fl->cc_major) {
    if (be->cc_major > fl->cc_major || !allow_lower)
      return host->status_new(KILN_STATUS_UNAVAILABLE,
                              "compute capability %d.%d is %s %d.0%s", be->cc_major,
                              be->cc_minor, be->cc_major > fl->cc_major ? "above" : "below",
                              fl->cc_major,
                              be->cc_major > fl->cc_major
                                  ? " (this plugin is for 12.x devices; use cuda-batched)"
                                  : " (set [cuda-cc120] allow_lower_cc = true to test it anyway)");
    host->log(KILN_LOG_WARN, fl->name,
              "compute capability %d.%d is below %d.0; running the %d.x kernel variants "
              "compiled for sm_%d%d because allow_lower_cc = true",
              be->cc_major, be->cc_minor, fl->cc_major, fl->cc_major, be->cc_major, be->cc_minor);
  }
  if (be->cc_major < 9) be->pdl = false; /* griddepcontrol is sm_90's */
  /* FP8 tensor cores are sm_89's, but the per-row and per-token scale
   * vectors fp8 hands cuBLASLt (OUTER_VEC_32F) are offered from Hopper
   * (sm_90) on; Ada's cuBLASLt scales FP8 per tensor only. bf16 tensor
   * cores, mma.sync m16n8k16 / m16n8k32 (f16, bf16, s8) and cp.async are
   * sm_80's. Below what a mode needs the GEMMs take the next mode down
   * (kiln_cuda_gemm_on_device: fp8 -> bf16x3 -> f32), said, not silent,
   * and describe_modes says it after the plan too. */
  be->gemm_asked = be->gemm;
  be->gemm = kiln_cuda_gemm_on_device(be->gemm_asked, be->cc_major);
  if (be->gemm != be->gemm_asked)
    host->log(KILN_LOG_WARN, fl->name,
              "gemm = %s needs compute capability %d.0 (%s); the device is %d.%d: the prefill "
              "GEMMs take %s",
              kiln_cuda_gemm_name(be->gemm_asked), kiln_cuda_gemm_cc_needed(be->gemm_asked),
              kiln_cuda_gemm_cc_what(be->gemm_asked), be->cc_major, be->cc_minor,
              kiln_cuda_gemm_name(be->gemm));
  /* below sm_80 decode attention keeps the CUDA-core kernel */
  if (be->cc_major < 8) be->attn_mma = false;
  if (be->cc_major < 9 && (be->mvq_load == 3 || be->mvq_forced.stages))
    return kiln_config_origin_annotate(
        host, cfg, be->mvq_load == 3 ? "matvec_load" : "matvec_shape",
        host->status_new(KILN_STATUS_UNSUPPORTED,
                         "[%s] %s needs compute capability 9.0 (bulk copies); the device is "
                         "%d.%d",
                         fl->name, be->mvq_load == 3 ? "matvec_load = bulk" : "matvec_shape with stages",
                         be->cc_major, be->cc_minor));
  /* The descriptor's arch is always the device's exact sm_XY. */
  if (be->cc_major < 1 || be->cc_minor < 0 || be->cc_minor > 9)
    return host->status_new(KILN_STATUS_UNSUPPORTED, "compute capability %d.%d has no sm_XY",
                            be->cc_major, be->cc_minor);
  snprintf(be->arch, sizeof be->arch, "sm_%d%d", be->cc_major, be->cc_minor);
  KILN_CU_CHECK(host, cu, NULL, DevicePrimaryCtxRetain(&be->ctx, be->dev));
  KILN_CU_CHECK(host, cu, NULL, CtxSetCurrent(be->ctx));
  KILN_CU_CHECK(host, cu, NULL, StreamCreate(&be->stream, CU_STREAM_NON_BLOCKING));
  /* The step block starts at 0 (the reserved fields stay so). */
  KILN_RETURN_IF_ERROR(
      kiln_cuda_mem_alloc(be, 4u * KILN_CUDA_STEP_FIELDS, NULL, &be->step_dev));
  KILN_CU_CHECK(host, cu, NULL, MemsetD32Async(be->step_dev, 0, KILN_CUDA_STEP_FIELDS, be->stream));
  KILN_CU_CHECK(host, cu, NULL, StreamSynchronize(be->stream));
  return NULL;
}

kiln_status kiln_cuda_open(void *plugin, const kiln_config_section *cfg, void **out_backend) {
  kiln_cuda_plugin *pl = plugin;
  const kiln_host_api *host = pl->host;
  const kiln_cuda_flavor *fl = pl->fl;
  *out_backend = NULL;
  /* tensor_parallel > 1 is refused before anything is opened, naming what
   * is missing (NCCL, the driver, devices) or that the path is not built */
  kiln_cuda_tp_config tc;
  KILN_RETURN_IF_ERROR(kiln_cuda_tp_read_config(host, fl->name, cfg, &tc));
  KILN_RETURN_IF_ERROR(kiln_cuda_tp_check_open(pl, cfg, &tc, cfg ? (int)host->cfg_int(cfg, "device") : 0));
  if (!pl->cu_ok) return host->status_new(KILN_STATUS_UNAVAILABLE, "%s", pl->cu_why);
  kiln_kcache *kc = host->kcache();
  if (!kc)
    return host->status_new(KILN_STATUS_UNAVAILABLE,
                            "the host runs without a kernel-cache service, through which every "
                            "CUDA kernel is compiled");
  kiln_cuda_backend *be = calloc(1, sizeof *be);
  if (!be) return host->status_new(KILN_STATUS_NO_MEMORY, "%s: no memory for a backend", fl->name);
  be->host = host;
  be->fl = fl;
  be->cu = &pl->cu;
  bool allow_lower = false;
  kiln_status st = read_config(be, cfg, &allow_lower);
  if (!st) st = open_device(be, cfg, allow_lower);
  if (!st) st = kiln_nvrtc_init(&be->nv, host, be->arch);
  if (!st) {
    be->nv.release_slot = kiln_cuda_release_slot;
    be->nv.release_ctx = be;
    st = kiln_cuda_templates_register(host, kc);
  }
  if (!st) {
    kiln_kcompiler_desc d;
    kiln_nvrtc_compiler_desc(&be->nv, &d);
    st = host->kcache_register_compiler(kc, &d, &be->compiler);
  }
  if (!st && fl->prefill == KILN_CUDA_PREFILL_BATCHED) st = kiln_cuda_blas_open(be);
  if (st) {
    backend_free(be);
    return st; /* the loader names the backend */
  }
  const char *off = be->fuse ? (be->graph.on ? "" : ", graph off")
                             : (be->graph.on ? ", fuse off" : ", fuse and graph off");
  host->log(KILN_LOG_INFO, fl->name, "device %d (%s), NVRTC %s, activations %s%s%s%s%s%s",
            be->device, be->arch, be->nv.version,
            be->act == KILN_CUDA_QUANT_NONE ? "f32" : kiln_cuda_quant_name(be->act),
            be->act == KILN_CUDA_QUANT_NONE ? ""
            : be->recurrent_guard           ? " (f32 for the matvecs that feed a recurrent state)"
                                            : " (recurrent_guard off)",
            off,
            be->pdl ? "" : ", pdl off",
            fl->prefill == KILN_CUDA_PREFILL_BATCHED ? ", gemm " : "",
            fl->prefill != KILN_CUDA_PREFILL_BATCHED ? "" : kiln_cuda_gemm_name(be->gemm));
  *out_backend = be;
  return NULL;
}

void kiln_cuda_close(void *backend) {
  if (backend) backend_free(backend);
}

kiln_status kiln_cuda_sync(void *backend) {
  kiln_cuda_backend *be = backend;
  KILN_RETURN_IF_ERROR(kiln_cuda_enter(be));
  KILN_CU_CHECK(be->host, be->cu, NULL, StreamSynchronize(be->stream));
  return kiln_cuda_prof_collect(be);
}
