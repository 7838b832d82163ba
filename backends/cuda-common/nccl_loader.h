/* NCCL resolved at run time: dlopen("libnccl.so.2") and dlsym of the few
 * entry points tensor parallelism needs, as cuda_driver.c does for the
 * driver API, so the CUDA plugins load (and say why tensor parallelism is
 * unavailable) on machines without NCCL. The types mirror nccl.h's, which
 * the build does not need: NCCL ships apart from the CUDA toolkit. */
#ifndef KILN_NCCL_LOADER_H
#define KILN_NCCL_LOADER_H

#include <stdbool.h>
#include <stddef.h>

typedef int kiln_nccl_result;     /* ncclResult_t: 0 = ncclSuccess */
typedef struct kiln_nccl_comm_s *kiln_nccl_comm; /* ncclComm_t */
typedef int kiln_nccl_dtype;      /* ncclDataType_t */
typedef int kiln_nccl_op;         /* ncclRedOp_t */
#define KILN_NCCL_FLOAT32 7       /* ncclFloat32 */
#define KILN_NCCL_SUM 0           /* ncclSum */

typedef struct kiln_nccl {
  void *lib;
  kiln_nccl_result (*GetVersion)(int *version);
  kiln_nccl_result (*CommInitAll)(kiln_nccl_comm *comms, int ndev, const int *devlist);
  kiln_nccl_result (*CommDestroy)(kiln_nccl_comm comm);
  kiln_nccl_result (*AllReduce)(const void *send, void *recv, size_t count, kiln_nccl_dtype type,
                                kiln_nccl_op op, kiln_nccl_comm comm, void *stream);
  kiln_nccl_result (*AllGather)(const void *send, void *recv, size_t send_count, kiln_nccl_dtype type,
                                kiln_nccl_comm comm, void *stream);
  kiln_nccl_result (*GroupStart)(void);
  kiln_nccl_result (*GroupEnd)(void);
  const char *(*GetErrorString)(kiln_nccl_result r);
  int version;        /* ncclGetVersion's code, 22809 for 2.28.9 */
  char version_text[16];
} kiln_nccl;

/* Loads libnccl.so.2 and every symbol above, and asks its version. On
 * failure nccl is zeroed and why says what is missing ("no libnccl.so.2
 * (...)", "libnccl.so.2 lacks ncclCommInitAll"). */
bool kiln_nccl_load(kiln_nccl *nccl, char *why, size_t why_size);
void kiln_nccl_unload(kiln_nccl *nccl);

/* "2.28.9" from a version code (NCCL >= 2.9: major*10000 + minor*100 +
 * patch; before: major*1000 + minor*100 + patch). */
void kiln_nccl_version_text(int code, char *buf, size_t n);

#endif
