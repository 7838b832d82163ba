/* The CUDA plugins' list-valued keys ([<plugin>] matvec_shape, mmq_shape):
 * "N,N,N" read strictly, so that a sign, a value past its range or
 * anything after the last number is an error rather than a wrapped or
 * ignored value (sscanf's %u takes "-4" as 4294967292 and stops quietly
 * at "4x"). No CUDA call: test_cuda_gemm_modes runs it on any machine. */
#include "config.h"

#include "cuda_backend.h"

int kiln_cuda_parse_uints(const char *s, uint32_t *out, int n_max) {
  if (!s) return -1;
  int n = 0;
  const char *p = s;
  for (;;) {
    if (*p < '0' || *p > '9' || n == n_max) return -1;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
      v = v * 10u + (uint64_t)(*p - '0');
      if (v > KILN_CUDA_LIST_MAX) return -1;
    }
    out[n++] = (uint32_t)v;
    if (*p == '\0') return n;
    if (*p != ',') return -1;
    p++;
  }
}
