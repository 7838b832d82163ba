/* One shape of the split decode attention kernels compiled for the host
 * (test_attention_host.cc): include inside a namespace of its own after
 * defining the kernels' baked values (KILN_HEAD_DIM, KILN_N_HEAD,
 * KILN_N_HEAD_KV, KILN_SCALE, KILN_WARPS, KILN_N_SPLIT; KILN_FUSED_MERGE 1
 * for the split kernel merging itself) and
 * KILN_HOST_SHAPE, a token naming the shape, and its KV type twice:
 * KILN_KV_<TYPE> (F32, F16, BF16, Q8_0) for the kernels and KILN_HOST_KV
 * (the kiln_type) for the test; defines `shape`, a
 * host_shape, and undefines every macro the kernels and the caller set,
 * ready for the next shape. Not a header of its own: no include guard. */
#define KILN_HOST_CAT2(a, b) a##b
#define KILN_HOST_CAT(a, b) KILN_HOST_CAT2(a, b)
/* Distinct names for the kernels' extern "C" entries in each shape. */
#define kiln_attention_split KILN_HOST_CAT(KILN_HOST_SHAPE, _split)
#define kiln_attention_merge KILN_HOST_CAT(KILN_HOST_SHAPE, _merge)
#ifndef KILN_FUSED_MERGE
#define KILN_FUSED_MERGE 0 /* the split kernel merges itself: the shape sets it to 1 */
#endif
#include "kv_type.cuh.tmpl"
#include "attention_part.cuh.tmpl"
#include "attention_split.cu.tmpl"
#include "attention_merge.cu.tmpl"

#if KILN_FUSED_MERGE
/* The split kernel merging itself: launched twice, each launch must leave
 * every ticket 0 and the second give the first's y bit for bit (a ticket
 * not set back would leave the second's y unmerged: NaN). */
static const char *run(const float *q, const unsigned char *k, const unsigned char *v, float *part, float *y,
                       const int *step) {
  static unsigned tickets[KILN_N_HEAD_KV];
  static float first[KILN_HEAD_DIM * KILN_N_HEAD];
  for (int pass = 0; pass < 2; pass++) {
    if (pass) {
      memcpy(first, y, sizeof first);
      for (int i = 0; i < KILN_HEAD_DIM * KILN_N_HEAD; i++) y[i] = NAN;
    }
    const char *e =
        kiln_emu::launch(kiln_emu_dim3{KILN_N_SPLIT, KILN_N_HEAD_KV, 1}, 32 * KILN_WARPS,
                         [&] { kiln_attention_split(q, k, v, part, step, y, nullptr, tickets); });
    if (e) return e;
    for (int g = 0; g < KILN_N_HEAD_KV; g++)
      if (tickets[g] != 0) return "a ticket not set back to 0 after the launch";
  }
  if (memcmp(first, y, sizeof first) != 0) return "a second launch gave another y";
  return nullptr;
}
#else
static const char *run(const float *q, const unsigned char *k, const unsigned char *v, float *part, float *y,
                       const int *step) {
  const char *e =
      kiln_emu::launch(kiln_emu_dim3{KILN_N_SPLIT, KILN_N_HEAD_KV, 1}, 32 * KILN_WARPS,
                       [&] { kiln_attention_split(q, k, v, part, step, nullptr, nullptr, nullptr); });
  if (e) return e;
  return kiln_emu::launch(kiln_emu_dim3{KILN_N_HEAD, 1, 1}, 32 * KILN_WARPS,
                          [&] { kiln_attention_merge(part, y, nullptr); });
}
#endif

#define KILN_HOST_STR2(a) #a
#define KILN_HOST_STR(a) KILN_HOST_STR2(a)
static const host_shape shape = {KILN_HOST_STR(KILN_HOST_SHAPE), KILN_HEAD_DIM, KILN_N_HEAD,
                                 KILN_N_HEAD_KV, KILN_SCALE, KILN_WARPS, KILN_N_SPLIT, KILN_HOST_KV, run,
                                 KILN_TK};

#undef KILN_HOST_CAT2
#undef KILN_HOST_CAT
#undef KILN_HOST_STR2
#undef KILN_HOST_STR
#undef kiln_attention_split
#undef kiln_attention_merge
#undef KILN_HOST_SHAPE
#undef KILN_HEAD_DIM
#undef KILN_N_HEAD
#undef KILN_N_HEAD_KV
#undef KILN_SCALE
#undef KILN_WARPS
#undef KILN_N_SPLIT
#undef KILN_FUSED_MERGE
#undef KILN_FUSED_Q
#undef KILN_FM_NOUT
#undef KILN_PER_LANE
#undef KILN_GROUP
#undef KILN_THREADS
#undef KILN_CLASSES
#undef KILN_GATHER
#undef KILN_TK
#undef KILN_KST
#undef KILN_NQ
#undef KILN_NO
#undef KILN_LPT
#undef KILN_PREFETCH
#undef KILN_VEC
#undef KILN_LPQ
#undef KILN_FETCH_T
#undef KILN_FETCH_N
#undef KILN_MIN_BLOCKS
#undef KILN_SMEM_FIXED
#undef KILN_NSL_MEM
#undef KILN_NSL_T
#undef KILN_NSL_0
#undef KILN_NSL
#undef KILN_DS
#undef KILN_VCOL
#undef KILN_VG
#undef KILN_NOV
#undef KILN_PART_STRIDE
#undef KILN_PART_REC
#undef KILN_PART_M
#undef KILN_PART_L
#undef KILN_PART_ACC
#undef KILN_NEG_INF
#undef KILN_FULL_MASK
#undef KILN_HOST_KV
#undef KILN_KV_F32
#undef KILN_KV_F16
#undef KILN_KV_BF16
#undef KILN_KV_Q8_0
#undef KILN_KV_BYTES
#undef KILN_KV_ROW
#undef KILN_KV_HEAD
