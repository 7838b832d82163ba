/* A kernel timeline of any CUDA program through NVIDIA's CUPTI activity
 * API, loaded by the driver itself (CUDA_INJECTION64_PATH, CUPTI's
 * injection entry point InitializeInjection): no change to the program.
 * Every kernel the device runs, graph replays included, becomes one line
 * of KILN_TRACE_OUT (default /tmp/kiln-trace.csv) when the program exits:
 *
 *   start_ns,end_ns,stream,graph_id,graph_node,grid_x,grid_y,block_x,regs,name
 *
 * (GPU timestamps in ns). tools/device/kernel-trace/summarize.py reads it;
 * run.sh builds this and runs kiln bench under it. The kernels run as
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
  (void)ctx, (void)stream, (void)size;
  CUpti_Activity *rec = NULL;
  while (trace_out && cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
    fprintf(trace_out, "%llu,%llu,%u,%u,%llu,%d,%d,%d,%u,%s\n", (unsigned long long)k->start,
            (unsigned long long)k->end, k->streamId, k->graphId,
            (unsigned long long)k->graphNodeId, k->gridX, k->gridY, k->blockX,
            (unsigned)k->registersPerThread, k->name ? k->name : "?");
  }
  free(buf);
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
  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r == CUPTI_SUCCESS) r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
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
