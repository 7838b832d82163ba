/* A kernel timeline of any CUDA program through NVIDIA's CUPTI activity
 * API, loaded by the driver itself (CUDA_INJECTION64_PATH, CUPTI's
 * injection entry point InitializeInjection): no change to the program.
 * Every kernel the device runs, graph replays included, becomes one line
 * of KILN_TRACE_OUT (default /tmp/kiln-trace.csv):
 *
 *   start_ns,end_ns,stream,graph_id,graph_node,grid_x,grid_y,block_x,regs,name
 *
 * (GPU timestamps in ns), flushed every 200 ms, before a context is
 * destroyed and at exit; dropped records are reported on stderr.
 * tools/device/kernel-trace/summarize.py reads it; prepare-gpu.sh builds
 * this, run.sh runs kiln bench under it. The kernels run as
 * they would without it, but for CUPTI's own cost per record. */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>

static FILE *trace_out;

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records) {
  *size = (size_t)8 << 20;
  *buf = aligned_alloc(8, *size);
  *max_records = 0;
  if (!*buf) *size = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                      size_t valid) {
  (void)size;
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
    fprintf(stderr, "kiln-trace: CUPTI dropped %zu records: the timeline has holes\n", dropped);
  CUpti_Activity *rec = NULL;
  while (trace_out && cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
    fprintf(trace_out, "%llu,%llu,%u,%u,%llu,%d,%d,%d,%u,%s\n", (unsigned long long)k->start,
            (unsigned long long)k->end, k->streamId, k->graphId,
            (unsigned long long)k->graphNodeId, k->gridX, k->gridY, k->blockX,
            (unsigned)k->registersPerThread, k->name ? k->name : "?");
  }
  if (trace_out) fflush(trace_out); /* a killed program keeps what was written */
  free(buf);
}

/* Before a context goes (kiln closes its contexts and unloads the driver
 * before it exits), its records are written. */
static void CUPTIAPI on_resource(void *data, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                                 const void *info) {
  (void)data, (void)info;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

static void flush_at_exit(void) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (trace_out) fclose(trace_out);
  trace_out = NULL;
}

/* Called by the driver at cuInit when CUDA_INJECTION64_PATH names this
 * library. Returns 1 when tracing is on; on any failure it says why on
 * stderr and the program runs untraced. */
int InitializeInjection(void) {
  const char *path = getenv("KILN_TRACE_OUT");
  if (!path || !*path) path = "/tmp/kiln-trace.csv";
  trace_out = fopen(path, "w");
  if (!trace_out) {
    perror(path);
    return 0;
  }
  CUpti_SubscriberHandle sub;
  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r == CUPTI_SUCCESS) r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r == CUPTI_SUCCESS) r = cuptiSubscribe(&sub, on_resource, NULL);
  if (r == CUPTI_SUCCESS)
    r = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE,
                            CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
  if (r == CUPTI_SUCCESS) r = cuptiActivityFlushPeriod(200); /* ms: records flow as it runs */
  if (r != CUPTI_SUCCESS) {
    const char *what = NULL;
    cuptiGetResultString(r, &what);
    fprintf(stderr, "kiln-trace: CUPTI: %s\n", what ? what : "error");
    fclose(trace_out);
    trace_out = NULL;
    return 0;
  }
  atexit(flush_at_exit);
  return 1;
}
