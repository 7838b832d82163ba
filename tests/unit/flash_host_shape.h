/* One shape of the flash prefill attention kernel compiled for the host
 * (test_flash_host.cc): include inside a namespace of its own after
 * defining the kernel's baked values (KILN_HEAD_DIM, KILN_N_HEAD,
 * KILN_N_HEAD_KV, KILN_SCALE, KILN_BQ, KILN_BK, KILN_WARPS) and
 * KILN_HOST_SHAPE, a token naming the shape, and its KV type twice:
 * KILN_KV_<TYPE> (F32, F16, BF16, Q8_0) for the kernel and KILN_HOST_KV
 * (the kiln_type) for the test; defines `shape`, a
 * flash_shape_host, and undefines every macro the kernel and the caller
 * set, ready for the next shape. Not a header of its own: no include
 * guard. */
#define KILN_HOST_CAT2(a, b) a##b
#define KILN_HOST_CAT(a, b) KILN_HOST_CAT2(a, b)
#define kiln_flash_attention KILN_HOST_CAT(KILN_HOST_SHAPE, _flash)
#include "kv_type.cuh.tmpl"
#include "flash_layout.cuh.tmpl"
#include "flash_attention.cu.tmpl"

/* The grid the node runner launches: ceil(rows / bq) x n_head_kv. */
static const char *run(const float *q, const unsigned char *k, const unsigned char *v, float *y,
                       const int *step) {
  const unsigned rows = (unsigned)step[KILN_STEP_N_TOKENS] * KILN_GROUP;
  return kiln_emu::launch(kiln_emu_dim3{(rows + KILN_BQ - 1) / KILN_BQ, KILN_N_HEAD_KV, 1},
                          KILN_THREADS, [&] { kiln_flash_attention(q, k, v, y, step); },
                          (size_t)KILN_FLASH_SMEM_FLOATS * sizeof(float));
}

#define KILN_HOST_STR2(a) #a
#define KILN_HOST_STR(a) KILN_HOST_STR2(a)
static const flash_shape_host shape = {KILN_HOST_STR(KILN_HOST_SHAPE), KILN_HEAD_DIM, KILN_N_HEAD,
                                       KILN_N_HEAD_KV, KILN_SCALE, KILN_BQ, KILN_BK, KILN_WARPS,
                                       (size_t)KILN_FLASH_SMEM_FLOATS * sizeof(float), KILN_HOST_KV, run};

#undef KILN_HOST_CAT2
#undef KILN_HOST_CAT
#undef KILN_HOST_STR2
#undef KILN_HOST_STR
#undef kiln_flash_attention
#undef KILN_HOST_SHAPE
#undef KILN_HEAD_DIM
#undef KILN_N_HEAD
#undef KILN_N_HEAD_KV
#undef KILN_SCALE
#undef KILN_BQ
#undef KILN_BK
#undef KILN_WARPS
#undef KILN_GROUP
#undef KILN_THREADS
#undef KILN_RQ
#undef KILN_CK
#undef KILN_PER_LANE
#undef KILN_D4
#undef KILN_NEG_INF
#undef KILN_FULL_MASK
#undef KILN_KS
#undef KILN_FLASH_Q_OFF
#undef KILN_FLASH_KV_OFF
#undef KILN_FLASH_P_OFF
#undef KILN_FLASH_SMEM_FLOATS
#undef KILN_KV_ROW
#undef KILN_KV_HEAD
#undef KILN_KV_BYTES
#undef KILN_HOST_KV
#undef KILN_KV_F32
#undef KILN_KV_F16
#undef KILN_KV_BF16
#undef KILN_KV_Q8_0
