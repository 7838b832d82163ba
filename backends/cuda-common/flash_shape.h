/* The launch shape of the flash prefill attention (kernels/
 * flash_attention.cu.tmpl) and the dynamic shared memory it needs, as
 * plain C with no other dependency: cuda-common sizes its launches with it
 * and tests/unit/test_flash_host.cc checks it against the kernel's own
 * layout (kernels/flash_layout.cuh.tmpl). */
#ifndef KILN_CUDA_FLASH_SHAPE_H
#define KILN_CUDA_FLASH_SHAPE_H

#include <stdint.h>

/* A flavor's tiles: bq query rows ((token, query head) pairs of one GQA
 * group) and bk cache positions per block, `warps` warps a block (each
 * owning bq / warps rows). */
typedef struct kiln_cuda_flash_shape {
  uint32_t bq, bk, warps;
} kiln_cuda_flash_shape;

/* The kernel's K/V tile row stride in floats: head_dim rounded so that
 * its float4 count is odd (flash_layout.cuh.tmpl says why). */
static inline uint32_t kiln_cuda_flash_kv_stride(uint32_t head_dim) {
  return (head_dim / 4) % 2 ? head_dim : head_dim + 4;
}

/* Bytes of dynamic shared memory a block takes: Q [bq][head_dim], the K/V
 * tile [bk][stride], P [bq][bk], floats (flash_layout.cuh.tmpl). */
static inline uint64_t kiln_cuda_flash_smem_bytes(uint32_t head_dim, uint32_t bq, uint32_t bk) {
  return 4u * ((uint64_t)bq * head_dim + (uint64_t)bk * kiln_cuda_flash_kv_stride(head_dim) +
               (uint64_t)bq * bk);
}

#endif
