/*
 * cpu_threads.h — the cpu backend's persistent worker pool (internal).
 *
 * One pool per open() backend: n-1 pthreads and the calling thread, which
 * works too. An idle worker polls for the next job for a short while
 * (spin, default CPU_POOL_DEFAULT_SPIN_US) and then blocks on a condition
 * variable, so the back-to-back nodes of a step hand over in well under a
 * microsecond while a pool with nothing to do uses no CPU. Each task index
 * owns a scratch area (64-byte aligned) that ops size with
 * cpu_pool_reserve() before they dispatch, so allocation failures surface
 * on the caller's thread as a status instead of inside a worker.
 *
 * Work splitting never changes results: every op computes each output
 * element from the same operations in the same order whatever the thread
 * count, so threads = 1 and threads = 4 agree bit for bit.
 *
 * Not reentrant: one cpu_pool_run() at a time (the host calls a backend from
 * one thread at a time, kiln/plugin.h).
 */
#ifndef KILN_CPU_THREADS_H
#define KILN_CPU_THREADS_H

#include <stddef.h>

typedef struct cpu_pool cpu_pool;

/* fn(arg, ith, nth) runs once for every ith in [0, nth). */
typedef void (*cpu_task_fn)(void *arg, int ith, int nth);

/* A pool of n_threads (>= 1) workers, the caller counted. Returns 0, or an
 * errno value (ENOMEM, EAGAIN from pthread_create, EINVAL for n_threads < 1)
 * with *out_pool NULL. */
int cpu_pool_create(int n_threads, cpu_pool **out_pool);

/* Stops and joins the workers and frees the scratch areas; NULL is fine. */
void cpu_pool_destroy(cpu_pool *pool);

/* Number of workers, the caller counted. */
int cpu_pool_size(const cpu_pool *pool);

/* How long (microseconds) an idle worker, and the caller waiting for the
 * others, poll before they block; 0 blocks at once. Call between runs. */
#define CPU_POOL_DEFAULT_SPIN_US 200
void cpu_pool_set_spin(cpu_pool *pool, int spin_us);

/* Workers blocked waiting for work right now (0 .. size-1): how a test sees
 * that an idle pool sleeps instead of spinning. */
int cpu_pool_sleepers(cpu_pool *pool);

/* Runs fn(arg, ith, nth) once for every task ith in [0, nth), nth =
 * min(max_tasks, pool size) (at least one), and returns when all are done.
 * Tasks go to whichever threads claim them first, the caller's included:
 * a worker the OS has not scheduled yet holds nothing up, the others take
 * its share. With one task it runs on the caller without waking anyone,
 * so small ops cost nothing extra. A task's scratch area is the one of its
 * index, cpu_pool_scratch(pool, ith): no two tasks of a run share one. */
void cpu_pool_run(cpu_pool *pool, int max_tasks, cpu_task_fn fn, void *arg);

/* Makes every task index's scratch area at least nbytes. Returns 0 or ENOMEM
 * (the areas already held are kept). Call between runs only. */
int cpu_pool_reserve(cpu_pool *pool, size_t nbytes);

/* Task ith's scratch area (as reserved; NULL before any reserve). */
void *cpu_pool_scratch(const cpu_pool *pool, int ith);

/* An area of at least nbytes (64-byte aligned) that the caller fills before
 * a run and every worker may read during it (an op's inputs converted
 * once: MUL_MAT's quantized columns). NULL when allocation fails (the area
 * held is kept). Call between runs only. */
void *cpu_pool_shared(cpu_pool *pool, size_t nbytes);

/* Splits [0, n) into nth nearly equal contiguous ranges; range ith is
 * [*out_begin, *out_end). */
static inline void cpu_split(long long n, int ith, int nth, long long *out_begin,
                             long long *out_end) {
  long long base = n / nth, rem = n % nth;
  long long b = ith * base + (ith < rem ? ith : rem);
  *out_begin = b;
  *out_end = b + base + (ith < rem ? 1 : 0);
}

#endif /* KILN_CPU_THREADS_H */
