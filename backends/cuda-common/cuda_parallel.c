/* Tensor parallelism on the CUDA plugins: the `devices` and
 * `tensor_parallel` keys, NCCL loaded on first need (nccl_loader.h), the
 * line `kiln backends` prints, and open()'s refusal of tensor_parallel > 1.
 *
 * The multi-GPU execution itself (one thread and context per device, the
 * shard graphs of kiln/tp.h, ncclAllReduce after attn_output and ffn_down,
 * ncclAllGather of the logits) is not built yet, so open() refuses
 * tensor_parallel > 1 even where NCCL and the devices are there, saying
 * which of them is missing first. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_origin.h"
#include "cuda_backend.h"

/* NCCL, loaded once per plugin on first need (it is a large library that
 * single-device runs never touch). */
static bool nccl_get(kiln_cuda_plugin *pl) {
  if (!pl->nccl_tried) {
    pl->nccl_tried = true;
    pl->nccl_ok = kiln_nccl_load(&pl->nccl, pl->nccl_why, sizeof pl->nccl_why);
  }
  return pl->nccl_ok;
}

kiln_status kiln_cuda_tp_read_config(const kiln_host_api *host, const char *section,
                                     const kiln_config_section *cfg, kiln_cuda_tp_config *out) {
  memset(out, 0, sizeof *out);
  out->n = cfg ? (int)host->cfg_int(cfg, "tensor_parallel") : 1;
  const char *list = cfg ? host->cfg_str(cfg, "devices") : NULL;
  if (out->n < 1 || out->n > KILN_CUDA_MAX_TP)
    return kiln_config_origin_annotate(
        host, cfg, "tensor_parallel",
        host->status_new(KILN_STATUS_OUT_OF_RANGE, "[%s] tensor_parallel = %d: 1..%d", section, out->n,
                         KILN_CUDA_MAX_TP));
  if (!list || !list[0]) return NULL;
  const char *p = list;
  while (*p) {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno || v < 0 || v > 1024 || (*end && *end != ','))
      return kiln_config_origin_annotate(
          host, cfg, "devices",
          host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "[%s] devices = %s: not a list of device indices such as 0,1", section, list));
    if (out->n_devices == KILN_CUDA_MAX_TP)
      return kiln_config_origin_annotate(
          host, cfg, "devices",
          host->status_new(KILN_STATUS_OUT_OF_RANGE, "[%s] devices = %s: more than %d devices", section,
                           list, KILN_CUDA_MAX_TP));
    for (int i = 0; i < out->n_devices; i++)
      if (out->devices[i] == (int)v)
        return kiln_config_origin_annotate(
            host, cfg, "devices",
            host->status_new(KILN_STATUS_INVALID_ARGUMENT, "[%s] devices = %s: device %ld is listed twice",
                             section, list, v));
    out->devices[out->n_devices++] = (int)v;
    p = *end ? end + 1 : end;
    if (*end && !*p)
      return kiln_config_origin_annotate(
          host, cfg, "devices",
          host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "[%s] devices = %s: not a list of device indices such as 0,1", section, list));
  }
  if (out->n_devices != out->n)
    return kiln_config_origin_annotate(
        host, cfg, "devices",
        host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                         "[%s] devices = %s lists %d device%s and tensor_parallel = %d: list one device per "
                         "shard",
                         section, list, out->n_devices, out->n_devices == 1 ? "" : "s", out->n));
  return NULL;
}

/* How many CUDA devices the driver sees, or -1 with why filled. */
static int device_count(const kiln_cuda_plugin *pl, char *why, size_t cap) {
  if (!pl->cu_ok) {
    snprintf(why, cap, "%s", pl->cu_why);
    return -1;
  }
  char err[256];
  CUresult r = pl->cu.Init(0);
  int count = 0;
  if (r == CUDA_SUCCESS) r = pl->cu.DeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    snprintf(why, cap, "the driver sees no CUDA device (%s)", kiln_cu_error_text(&pl->cu, r, err, sizeof err));
    return -1;
  }
  return count;
}

kiln_status kiln_cuda_tp_check_open(kiln_cuda_plugin *pl, const kiln_config_section *cfg,
                                    const kiln_cuda_tp_config *tc, int device) {
  const kiln_host_api *host = pl->host;
  const char *name = pl->fl->name;
  if (tc->n <= 1) {
    if (tc->n_devices == 1 && tc->devices[0] != device)
      return kiln_config_origin_annotate(
          host, cfg, "devices",
          host->status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "[%s] devices = %d and device = %d disagree: with tensor_parallel = 1 set one "
                           "of them",
                           name, tc->devices[0], device));
    return NULL;
  }
  if (!nccl_get(pl))
    return kiln_config_origin_annotate(
        host, cfg, "tensor_parallel",
        host->status_new(KILN_STATUS_UNAVAILABLE,
                         "[%s] tensor_parallel = %d needs NCCL, and it is unavailable: %s (install NCCL, "
                         "e.g. the libnccl2 package of NVIDIA's CUDA repository, or set tensor_parallel = 1)",
                         name, tc->n, pl->nccl_why));
  char why[320];
  int count = device_count(pl, why, sizeof why);
  if (count < 0)
    return kiln_config_origin_annotate(
        host, cfg, "tensor_parallel",
        host->status_new(KILN_STATUS_UNAVAILABLE, "[%s] tensor_parallel = %d: %s", name, tc->n, why));
  int highest = -1;
  for (int i = 0; i < tc->n_devices; i++)
    if (tc->devices[i] > highest) highest = tc->devices[i];
  if (count < tc->n || highest >= count)
    return kiln_config_origin_annotate(
        host, cfg, "tensor_parallel",
        host->status_new(KILN_STATUS_UNAVAILABLE,
                         "[%s] tensor_parallel = %d needs %d CUDA devices%s, and the driver sees %d", name,
                         tc->n, tc->n, highest >= count ? " (as listed in devices)" : "", count));
  return kiln_config_origin_annotate(
      host, cfg, "tensor_parallel",
      host->status_new(KILN_STATUS_UNSUPPORTED,
                       "[%s] tensor_parallel = %d: NCCL %s and %d CUDA devices are there, but kiln's "
                       "multi-GPU execution is not built yet (the sharding plan runs only in the cpu "
                       "emulation, kiln/tp.h); set tensor_parallel = 1",
                       name, tc->n, pl->nccl.version_text, count));
}

kiln_status kiln_cuda_probe_parallel(void *plugin, const kiln_config_section *cfg, char *out, size_t cap) {
  kiln_cuda_plugin *pl = plugin;
  kiln_cuda_tp_config tc;
  kiln_status st = kiln_cuda_tp_read_config(pl->host, pl->fl->name, cfg, &tc);
  const char *conf = "";
  char confbuf[96];
  if (st) {
    pl->host->status_free(st);
  } else if (tc.n > 1) {
    snprintf(confbuf, sizeof confbuf, " (configured: tensor_parallel = %d)", tc.n);
    conf = confbuf;
  }
  if (!nccl_get(pl)) {
    snprintf(out, cap, "unavailable: %s%s", pl->nccl_why, conf);
    return NULL;
  }
  char why[320];
  int count = device_count(pl, why, sizeof why);
  if (count < 0) snprintf(out, cap, "unavailable: NCCL %s loads, but %s%s", pl->nccl.version_text, why, conf);
  else if (count < 2)
    snprintf(out, cap, "unavailable: NCCL %s, %d CUDA device (tensor parallelism needs 2 or more)%s",
             pl->nccl.version_text, count, conf);
  else
    snprintf(out, cap,
             "NCCL %s and %d CUDA devices are there; tensor_parallel > 1 is refused until the multi-GPU path "
             "exists (the plan runs in the cpu emulation)%s",
             pl->nccl.version_text, count, conf);
  return NULL;
}
