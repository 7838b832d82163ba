/* The cpu backend's worker pool (see cpu_threads.h for the contract).
 *
 * A job is published by bumping `generation`. Workers spin on it for up to
 * spin_ns after their last job, so the next node of a step starts within a
 * cache miss instead of a futex wake-up (tens of microseconds on a busy
 * machine, and a decode step has hundreds of nodes); past that they block
 * on a condition variable and use no CPU. The caller waits for `pending`
 * the same way. Sleeping and waking use the store-then-check order on
 * both sides (seq_cst atomics): a worker counts itself in `sleepers`
 * before it re-checks the generation under the mutex, and a dispatcher
 * bumps the generation before it reads `sleepers`, so one of the two
 * always sees the other and no wake-up is lost. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "cpu_threads.h"

typedef struct cpu_scratch {
  void *p;
  size_t n;
} cpu_scratch;

typedef struct cpu_worker {
  cpu_pool *pool;
  int ith;
  pthread_t thread;
} cpu_worker;

struct cpu_pool {
  int n;                /* workers, the caller (index 0) counted */
  cpu_worker *workers;  /* [n]; workers[0] has no thread */
  cpu_scratch *scratch; /* [n] */
  int n_started;        /* threads actually created (1..n) */
  int64_t spin_ns;      /* how long an idle thread polls before it blocks */

  /* The job: written by the dispatcher before `generation` is bumped
   * (release), read by workers after they see it (acquire). */
  cpu_task_fn fn;
  void *arg;
  int n_tasks; /* workers with ith < n_tasks run fn this generation */

  _Atomic uint64_t generation;
  _Atomic int pending;  /* workers of this generation still running */
  _Atomic int sleepers; /* workers blocked on start_cv */
  _Atomic bool caller_waits; /* the dispatcher is blocked on done_cv */
  _Atomic bool stop;

  pthread_mutex_t mu;
  pthread_cond_t start_cv; /* a new generation, or stop */
  pthread_cond_t done_cv;  /* pending reached 0 */
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Polls until `generation` differs from seen or spin_ns pass; whether it
 * changed. The clock is read every 64 polls only. */
static bool spin_for_job(cpu_pool *pool, uint64_t seen) {
  if (pool->spin_ns <= 0) return false;
  const int64_t end = now_ns() + pool->spin_ns;
  for (unsigned i = 1;; i++) {
    if (atomic_load_explicit(&pool->generation, memory_order_acquire) != seen) return true;
    if (atomic_load_explicit(&pool->stop, memory_order_relaxed)) return true;
    cpu_relax();
    if (i % 64 == 0 && now_ns() > end) return false;
  }
}

static void *cpu_worker_main(void *p) {
  cpu_worker *w = p;
  cpu_pool *pool = w->pool;
  uint64_t seen = 0;
  for (;;) {
    if (!spin_for_job(pool, seen)) {
      pthread_mutex_lock(&pool->mu);
      atomic_fetch_add(&pool->sleepers, 1);
      while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->stop))
        pthread_cond_wait(&pool->start_cv, &pool->mu);
      atomic_fetch_sub(&pool->sleepers, 1);
      pthread_mutex_unlock(&pool->mu);
    }
    if (atomic_load(&pool->stop)) break;
    seen = atomic_load_explicit(&pool->generation, memory_order_acquire);
    if (w->ith < pool->n_tasks) pool->fn(pool->arg, w->ith, pool->n_tasks);
    if (atomic_fetch_sub(&pool->pending, 1) == 1 && atomic_load(&pool->caller_waits)) {
      pthread_mutex_lock(&pool->mu);
      pthread_cond_signal(&pool->done_cv);
      pthread_mutex_unlock(&pool->mu);
    }
  }
  return NULL;
}

int cpu_pool_create(int n_threads, cpu_pool **out_pool) {
  *out_pool = NULL;
  if (n_threads < 1) return EINVAL;
  cpu_pool *pool = calloc(1, sizeof *pool);
  if (!pool) return ENOMEM;
  pool->n = n_threads;
  pool->spin_ns = (int64_t)CPU_POOL_DEFAULT_SPIN_US * 1000;
  pool->workers = calloc((size_t)n_threads, sizeof *pool->workers);
  pool->scratch = calloc((size_t)n_threads, sizeof *pool->scratch);
  if (!pool->workers || !pool->scratch) {
    free(pool->workers);
    free(pool->scratch);
    free(pool);
    return ENOMEM;
  }
  pthread_mutex_init(&pool->mu, NULL);
  pthread_cond_init(&pool->start_cv, NULL);
  pthread_cond_init(&pool->done_cv, NULL);
  pool->n_started = 1;
  for (int i = 0; i < n_threads; i++) {
    pool->workers[i].pool = pool;
    pool->workers[i].ith = i;
  }
  for (int i = 1; i < n_threads; i++) {
    int rc = pthread_create(&pool->workers[i].thread, NULL, cpu_worker_main, &pool->workers[i]);
    if (rc != 0) {
      cpu_pool_destroy(pool);
      return rc;
    }
    pool->n_started++;
  }
  *out_pool = pool;
  return 0;
}

void cpu_pool_destroy(cpu_pool *pool) {
  if (!pool) return;
  pthread_mutex_lock(&pool->mu);
  atomic_store(&pool->stop, true);
  pthread_cond_broadcast(&pool->start_cv);
  pthread_mutex_unlock(&pool->mu);
  for (int i = 1; i < pool->n_started; i++) pthread_join(pool->workers[i].thread, NULL);
  for (int i = 0; i < pool->n; i++) free(pool->scratch[i].p);
  pthread_cond_destroy(&pool->done_cv);
  pthread_cond_destroy(&pool->start_cv);
  pthread_mutex_destroy(&pool->mu);
  free(pool->scratch);
  free(pool->workers);
  free(pool);
}

int cpu_pool_size(const cpu_pool *pool) { return pool->n; }

void cpu_pool_set_spin(cpu_pool *pool, int spin_us) {
  pool->spin_ns = spin_us > 0 ? (int64_t)spin_us * 1000 : 0;
}

int cpu_pool_sleepers(cpu_pool *pool) { return atomic_load(&pool->sleepers); }

void cpu_pool_run(cpu_pool *pool, int max_tasks, cpu_task_fn fn, void *arg) {
  int n_tasks = max_tasks < pool->n ? max_tasks : pool->n;
  if (n_tasks <= 1) {
    fn(arg, 0, 1);
    return;
  }
  pool->fn = fn;
  pool->arg = arg;
  pool->n_tasks = n_tasks;
  /* Every worker takes part in a generation (those past n_tasks only
   * count down), so none can read the job of a later one by mistake. */
  atomic_store(&pool->pending, pool->n - 1);
  atomic_fetch_add(&pool->generation, 1); /* seq_cst: before the sleepers check */
  if (atomic_load(&pool->sleepers) > 0) {
    pthread_mutex_lock(&pool->mu);
    pthread_cond_broadcast(&pool->start_cv);
    pthread_mutex_unlock(&pool->mu);
  }

  fn(arg, 0, n_tasks);

  if (atomic_load_explicit(&pool->pending, memory_order_acquire) == 0) return;
  const int64_t end = pool->spin_ns > 0 ? now_ns() + pool->spin_ns : 0;
  for (unsigned i = 1; end; i++) {
    if (atomic_load_explicit(&pool->pending, memory_order_acquire) == 0) return;
    cpu_relax();
    if (i % 64 == 0 && now_ns() > end) break;
  }
  pthread_mutex_lock(&pool->mu);
  atomic_store(&pool->caller_waits, true); /* seq_cst: before the pending check */
  while (atomic_load(&pool->pending) > 0) pthread_cond_wait(&pool->done_cv, &pool->mu);
  atomic_store(&pool->caller_waits, false);
  pthread_mutex_unlock(&pool->mu);
}

int cpu_pool_reserve(cpu_pool *pool, size_t nbytes) {
  /* aligned_alloc wants a size that is a multiple of the alignment. */
  size_t want = (nbytes + 63) & ~(size_t)63;
  if (want == 0) want = 64;
  for (int i = 0; i < pool->n; i++) {
    if (pool->scratch[i].n >= want) continue;
    void *p = aligned_alloc(64, want);
    if (!p) return ENOMEM;
    free(pool->scratch[i].p);
    pool->scratch[i].p = p;
    pool->scratch[i].n = want;
  }
  return 0;
}

void *cpu_pool_scratch(const cpu_pool *pool, int ith) { return pool->scratch[ith].p; }
