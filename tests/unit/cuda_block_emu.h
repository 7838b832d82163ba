/* Runs CUDA kernels written for kiln's templates on the host, one block
 * at a time, every thread of the block a green thread (ucontext), for
 * test_attention_host.cc and test_flash_host.cc: the kernels' indexing, their barriers and warp
 * shuffles, their edge cases (empty splits, partial tiles, one warp) run
 * here as they would on a device, on a machine with none.
 *
 * What it emulates: threadIdx, blockIdx, blockDim, gridDim;
 * __syncthreads() (every thread of the block must reach it: a barrier
 * some thread never reaches is reported as a deadlock, where a device
 * would hang or be undefined); __shfl_xor_sync / __shfl_sync with the full
 * mask (each a barrier of the warp's 32 lanes, with two exchange buffers
 * so a lane cannot overwrite a value a slower lane has yet to read);
 * __syncwarp() (a barrier of the warp's lanes); warp_gather (every lane's
 * fragments to every lane, for tensor-core instructions);
 * __shared__ as function statics (blocks run one after another, so a
 * static is the running block's shared memory); dynamic shared memory
 * (KILN_DYNAMIC_SHARED, the templates' spelling of extern __shared__) as
 * one buffer of the launch's size, filled with NaN bytes before each
 * block so a read of a float no thread stored shows; float4, uint2, uint4; the
 * qualifiers as nothing. Scheduling is cooperative and deterministic: a thread runs
 * until it waits at a barrier or returns, so it is no race detector (a
 * missing barrier may go unseen here; compute-sanitizer's racecheck sees
 * it on a device). atomicAdd on unsigned, __threadfence and __ldcg are
 * the plain operations: blocks run one after another and a block's
 * threads one at a time, so every write is seen by the next read, and the
 * last block of a grid is the one with the highest index (x fastest). Not
 * emulated: warp-divergent shuffles (a partial mask fails the launch). Include once, before the kernels, in
 * a C++ file. */
#ifndef KILN_CUDA_BLOCK_EMU_H
#define KILN_CUDA_BLOCK_EMU_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>
#include <vector>

struct kiln_emu_dim3 {
  unsigned x, y, z;
};

namespace kiln_emu {

enum { STACK_BYTES = 64 << 10, FRAG_BYTES = 64 };

struct thread {
  ucontext_t ctx;
  kiln_emu_dim3 idx;
  bool done, waiting;
  int wait_warp; /* -1: the block's barrier; else that warp's */
  unsigned wait_gen;
};

struct state {
  std::vector<thread> th;
  std::vector<char> stacks;
  std::vector<unsigned> warp_arrived, warp_gen, parity;
  std::vector<uint64_t> slots[2];
  std::vector<unsigned char> frags[2]; /* warp_gather: FRAG_BYTES a thread */
  ucontext_t sched;
  thread *cur = nullptr;
  kiln_emu_dim3 block_idx{0, 0, 0}, block_dim{0, 1, 1}, grid_dim{1, 1, 1};
  unsigned block_arrived = 0, block_gen = 0;
  std::function<void()> body;
  const char *error = nullptr;
  std::vector<float> dyn; /* the dynamic shared memory (floats: 4-byte aligned, and 16 by new) */
};

static state S;

/* Keeps the compiler from holding shared (static) values in registers
 * across a barrier: other threads ran meanwhile. */
static inline void clobber() { __asm__ __volatile__("" ::: "memory"); }

static void wait(int warp, unsigned gen) {
  thread *t = S.cur;
  t->waiting = true;
  t->wait_warp = warp;
  t->wait_gen = gen;
  swapcontext(&t->ctx, &S.sched);
  clobber();
}

static void warp_barrier(unsigned w) {
  const unsigned gen = S.warp_gen[w];
  if (++S.warp_arrived[w] == 32) {
    S.warp_arrived[w] = 0;
    S.warp_gen[w]++;
    clobber();
    return;
  }
  wait((int)w, gen);
}

/* Lane `src` of the calling lane's warp's value v, all 32 lanes taking part. */
template <class T> static T exchange(unsigned mask, T v, unsigned src) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "a shuffle moves at most 8 bytes");
  if (mask != 0xffffffffu && !S.error) S.error = "a shuffle with a partial mask";
  const unsigned tid = S.cur->idx.x, w = tid / 32;
  const unsigned par = S.parity[tid];
  S.parity[tid] ^= 1u;
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof v);
  S.slots[par][tid] = bits;
  warp_barrier(w);
  T r;
  bits = S.slots[par][w * 32 + (src & 31u)];
  memcpy(&r, &bits, sizeof r);
  return r;
}

/* Every lane's v, lane by lane into all[0..31], the warp's 32 lanes
 * taking part (one warp barrier): how a warp-wide instruction such as
 * mma.sync sees the fragments its lanes hold. */
template <class T> static void warp_gather(const T &v, T *all) {
  static_assert(sizeof(T) <= FRAG_BYTES, "a lane's fragments are at most FRAG_BYTES");
  const unsigned tid = S.cur->idx.x, w = tid / 32;
  const unsigned par = S.parity[tid];
  S.parity[tid] ^= 1u;
  memcpy(&S.frags[par][(size_t)tid * FRAG_BYTES], &v, sizeof v);
  warp_barrier(w);
  for (unsigned l = 0; l < 32; l++) memcpy(&all[l], &S.frags[par][(size_t)(w * 32 + l) * FRAG_BYTES], sizeof v);
}

static void thread_main() {
  S.body();
  S.cur->done = true; /* then uc_link: back to the scheduler */
}

static bool runnable(const thread &t) {
  if (t.done) return false;
  if (!t.waiting) return true;
  return t.wait_warp < 0 ? S.block_gen != t.wait_gen : S.warp_gen[(unsigned)t.wait_warp] != t.wait_gen;
}

/* Runs f on every thread of every block of grid, `threads` threads a
 * block (a multiple of 32); NULL, or what went wrong. */
static const char *launch(kiln_emu_dim3 grid, unsigned threads, std::function<void()> f,
                          size_t shared_bytes = 0) {
  if (threads == 0 || threads % 32 != 0) return "a block that is not whole warps";
  if (shared_bytes % sizeof(float) != 0) return "dynamic shared memory that is not whole floats";
  S.body = std::move(f);
  S.error = nullptr;
  S.th.assign(threads, thread{});
  S.stacks.assign((size_t)threads * STACK_BYTES, 0);
  S.grid_dim = grid;
  S.block_dim = kiln_emu_dim3{threads, 1, 1};
  for (unsigned bz = 0; bz < grid.z; bz++)
    for (unsigned by = 0; by < grid.y; by++)
      for (unsigned bx = 0; bx < grid.x; bx++) {
        S.block_idx = kiln_emu_dim3{bx, by, bz};
        S.block_arrived = 0;
        S.dyn.assign(shared_bytes / sizeof(float), __builtin_nanf(""));
        S.warp_arrived.assign(threads / 32, 0);
        S.warp_gen.assign(threads / 32, 0);
        S.parity.assign(threads, 0);
        S.slots[0].assign(threads, 0);
        S.slots[1].assign(threads, 0);
        S.frags[0].assign((size_t)threads * FRAG_BYTES, 0);
        S.frags[1].assign((size_t)threads * FRAG_BYTES, 0);
        for (unsigned i = 0; i < threads; i++) {
          thread &t = S.th[i];
          t.idx = kiln_emu_dim3{i, 0, 0};
          t.done = t.waiting = false;
          getcontext(&t.ctx);
          t.ctx.uc_stack.ss_sp = S.stacks.data() + (size_t)i * STACK_BYTES;
          t.ctx.uc_stack.ss_size = STACK_BYTES;
          t.ctx.uc_link = &S.sched;
          makecontext(&t.ctx, thread_main, 0);
        }
        for (;;) {
          bool alive = false, ran = false;
          for (unsigned i = 0; i < threads; i++) {
            thread &t = S.th[i];
            if (!t.done) alive = true;
            if (!runnable(t)) continue;
            t.waiting = false;
            S.cur = &t;
            swapcontext(&S.sched, &t.ctx);
            ran = true;
          }
          if (!alive) break;
          if (!ran) return "a barrier that not every thread of the block reaches (deadlock)";
        }
        if (S.error) return S.error;
      }
  return nullptr;
}

} // namespace kiln_emu

/* The CUDA names the kernels use. */
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define threadIdx (kiln_emu::S.cur->idx)
#define blockIdx (kiln_emu::S.block_idx)
#define blockDim (kiln_emu::S.block_dim)
#define gridDim (kiln_emu::S.grid_dim)
/* The launch's dynamic shared memory; on a device, extern __shared__. */
#define KILN_DYNAMIC_SHARED(T, name) T *const name = reinterpret_cast<T *>(kiln_emu::S.dyn.data())

struct alignas(16) float4 {
  float x, y, z, w;
};
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return uint4{x, y, z, w};
}

static inline void __syncthreads() {
  const unsigned gen = kiln_emu::S.block_gen;
  if (++kiln_emu::S.block_arrived == kiln_emu::S.block_dim.x) {
    kiln_emu::S.block_arrived = 0;
    kiln_emu::S.block_gen++;
    kiln_emu::clobber();
    return;
  }
  kiln_emu::wait(-1, gen);
}
/* A warp barrier (the full mask). */
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
  if (mask != 0xffffffffu && !kiln_emu::S.error) kiln_emu::S.error = "__syncwarp with a partial mask";
  kiln_emu::warp_barrier(kiln_emu::S.cur->idx.x / 32);
}
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int o) {
  return kiln_emu::exchange(mask, v, (kiln_emu::S.cur->idx.x % 32) ^ (unsigned)o);
}
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src) {
  return kiln_emu::exchange(mask, v, (unsigned)src);
}
static inline float __int_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline float __uint_as_float(unsigned u) { return __int_as_float(u); }
static inline unsigned __float_as_uint(float f) {
  unsigned u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static inline int min(int a, int b) { return a < b ? a : b; }
static inline unsigned atomicAdd(unsigned *p, unsigned v) {
  const unsigned old = *p;
  *p = old + v;
  return old;
}
static inline void __threadfence() { kiln_emu::clobber(); }
template <class T> static inline T __ldcg(const T *p) { return *p; }

/* Every kernel's first statement (the grid dependency of programmatic
 * launches): nothing on the host, where blocks run one after another. */
#include "grid_dep.cuh.tmpl"

#endif
