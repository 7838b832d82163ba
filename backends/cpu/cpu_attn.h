/*
 * cpu_attn.h — vector kernels of ATTENTION (internal; op_attention.c
 * chooses them).
 */
#ifndef KILN_CPU_ATTN_H
#define KILN_CPU_ATTN_H

#include <stdint.h>

/* One query head against n_keys cached positions, at f32: s_j = scale *
 * q.k_j (k_j = k + j * kv_stride, hd values), softmax with the maximum
 * subtracted, y = sum_j softmax_j v_j. s holds n_keys floats, acc hd
 * floats, of scratch. hd a multiple of 8. AVX2 + FMA (cpu_simd.h). */
void cpu_attend_f32_avx2(const float *q, const float *k, const float *v, int64_t n_keys,
                         int64_t kv_stride, int64_t hd, float scale, float *s, float *acc, float *y);

#endif /* KILN_CPU_ATTN_H */
