/* One shape of the tensor-core split decode attention (attention_mma, then
 * attention_merge) compiled for the host (test_attention_mma_host.cc):
 * include inside a namespace of its own after defining the kernels' baked
 * values (KILN_HEAD_DIM, KILN_N_HEAD, KILN_N_HEAD_KV, KILN_SCALE,
 * KILN_WARPS, KILN_N_SPLIT), KILN_MMA_f16 or KILN_MMA_bf16, KILN_HOST_KV
 * (the cache's kiln_type) and KILN_HOST_SHAPE (a token naming the shape);
 * defines `shape`, a host_shape, and undefines every macro the kernels and
 * the caller set, ready for the next shape. Not a header of its own: no
 * include guard. */
#define KILN_HOST_CAT2(a, b) a##b
#define KILN_HOST_CAT(a, b) KILN_HOST_CAT2(a, b)
#define kiln_attention_mma KILN_HOST_CAT(KILN_HOST_SHAPE, _mma)
#define kiln_attention_merge KILN_HOST_CAT(KILN_HOST_SHAPE, _merge)
#define KILN_MERGE_K (KILN_HEAD_DIM * KILN_N_HEAD)
#include "mma_sync.cuh.tmpl"
#include "attention_part.cuh.tmpl"
#include "attention_mma.cu.tmpl"
#include "attention_merge.cu.tmpl"

static const char *run(const float *q, const unsigned char *k, const unsigned char *v, float *part, float *y,
                       const int *step) {
  const char *e = kiln_emu::launch(kiln_emu_dim3{KILN_N_SPLIT, KILN_N_HEAD_KV, 1}, 32 * KILN_WARPS,
                                   [&] { kiln_attention_mma(q, k, v, part, step, nullptr, nullptr, nullptr); },
                                   KILN_WARPS * KILN_WARP_BYTES);
  if (e) return e;
  return kiln_emu::launch(kiln_emu_dim3{KILN_N_HEAD, 1, 1}, 32 * KILN_WARPS,
                          [&] { kiln_attention_merge(part, y, nullptr); });
}

#define KILN_HOST_STR2(a) #a
#define KILN_HOST_STR(a) KILN_HOST_STR2(a)
static const host_shape shape = {KILN_HOST_STR(KILN_HOST_SHAPE), KILN_HEAD_DIM, KILN_N_HEAD, KILN_N_HEAD_KV,
                                 KILN_SCALE, KILN_WARPS, KILN_N_SPLIT, KILN_HOST_KV, run, KILN_KT};

#undef KILN_HOST_CAT2
#undef KILN_HOST_CAT
#undef KILN_HOST_STR2
#undef KILN_HOST_STR
#undef kiln_attention_mma
#undef kiln_attention_merge
#undef KILN_HOST_SHAPE
#undef KILN_HOST_KV
#undef KILN_HEAD_DIM
#undef KILN_N_HEAD
#undef KILN_N_HEAD_KV
#undef KILN_SCALE
#undef KILN_WARPS
#undef KILN_N_SPLIT
#undef KILN_MERGE_K
#undef KILN_MERGE_Q
#undef KILN_MMA_f16
#undef KILN_MMA_bf16
#undef KILN_MMA_PTX_TYPE
#undef KILN_MMA_TERMS
#undef KILN_GROUP
#undef KILN_THREADS
#undef KILN_KT
#undef KILN_NK
#undef KILN_ND
#undef KILN_RS
#undef KILN_ROW_BYTES
#undef KILN_CHUNKS
#undef KILN_P_SCALE
#undef KILN_WARP_BYTES
#undef KILN_CLASSES
#undef KILN_GATHER
#undef KILN_PART_STRIDE
#undef KILN_PART_REC
#undef KILN_PART_M
#undef KILN_PART_L
#undef KILN_PART_ACC
#undef KILN_NEG_INF
#undef KILN_FULL_MASK
