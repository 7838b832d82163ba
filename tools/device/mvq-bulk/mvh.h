/* One matvec_q expansion as the harness sees it (expand.py writes NAME_info). */
#pragma once
#include <cuda_runtime.h>
typedef struct {
  const char *name, *desc, *group;
  int block, bulk, k, t[3], rows[3], bias[3];
  long long smem, units;
  const void *fn;
} mvh_cfg;
