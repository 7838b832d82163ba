/* The cpu backend's worker pool (see cpu_threads.h for the contract).
 *
 * A run publishes a job (fn, arg, n_tasks) and bumps `generation`. Its
 * tasks are claimed one at a time from `claim` by whoever gets there:
 * the caller, and the workers that wake in time. The caller returns when
 * `done` counts every task, so a worker the OS has descheduled (the
 * machine is shared, or busy) never holds a step up: the others take its
 * tasks, and it finds none left when it does run. `claim` and `done` carry
 * the run's generation in their top 32 bits, so a worker that was asleep
 * through a run cannot claim a task of a later one; the job is kept in one
 * of two slots by generation, and a worker only calls it after a claim of
 * its generation succeeded.
 *
 * Idle workers spin on `generation` for up to spin_ns after their last
 * job, so the next node of a step starts within a cache miss instead of a
 * futex wake-up (tens of microseconds on a busy machine; a decode step has
 * hundreds of nodes); past that they block on a condition variable and use
 * no CPU. The caller waits for `done` the same way. Sleeping and waking
 * use the store-then-check order on both sides (seq_cst atomics): a worker
 * counts itself in `sleepers` before it re-checks the generation under the
 * mutex, and a dispatcher bumps the generation before it reads `sleepers`,
 * so one of the two always sees the other and no wake-up is lost. */
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

typedef struct cpu_job {
  _Atomic(cpu_task_fn) fn;
  _Atomic(void *) arg;
} cpu_job;

struct cpu_pool {
  int n;                /* threads, the caller (index 0) counted */
  cpu_worker *workers;  /* [n]; workers[0] has no thread */
  cpu_scratch *scratch; /* [n], one per task index */
  cpu_scratch shared;   /* one area the caller fills before a run, every worker reads */
  int n_started;        /* threads actually created (1..n) */
  int64_t spin_ns;      /* how long an idle thread polls before it blocks */

  cpu_job job[2];                /* the job of generation g is job[g & 1] */
  _Atomic uint64_t generation;   /* runs so far */
  _Atomic uint64_t claim;        /* (generation << 32) | (n_tasks << 16) | next task */
  _Atomic uint64_t done;         /* (generation << 32) | tasks finished */
  _Atomic int sleepers;          /* workers blocked on start_cv */
  _Atomic bool caller_waits;     /* the dispatcher is blocked on done_cv */
  _Atomic bool stop;

  pthread_mutex_t mu;
  pthread_cond_t start_cv; /* a new generation, or stop */
  pthread_cond_t done_cv;  /* every task of the generation done */
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

static inline uint64_t tag(uint64_t gen) { return (gen & 0xffffffffu) << 32; }

/* Claims and runs tasks of generation gen until none is left. The job is
 * read only after a claim of gen succeeded: from then until the task is
 * counted done, the caller of gen cannot return and republish the slot. */
static void run_tasks(cpu_pool *pool, uint64_t gen) {
  uint64_t v = atomic_load(&pool->claim);
  for (;;) {
    const int n = (int)((v >> 16) & 0xffffu), task = (int)(v & 0xffffu);
    if ((v & ~(uint64_t)0xffffffffu) != tag(gen) || task >= n) return;
    if (!atomic_compare_exchange_weak(&pool->claim, &v, v + 1)) continue;
    const cpu_job *job = &pool->job[gen & 1];
    atomic_load_explicit(&job->fn, memory_order_relaxed)(
        atomic_load_explicit(&job->arg, memory_order_relaxed), task, n);
    if ((int)((atomic_fetch_add(&pool->done, 1) + 1) & 0xffffffffu) == n &&
        atomic_load(&pool->caller_waits)) {
      pthread_mutex_lock(&pool->mu);
      pthread_cond_signal(&pool->done_cv);
      pthread_mutex_unlock(&pool->mu);
    }
    v = atomic_load(&pool->claim);
  }
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
    run_tasks(pool, seen);
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
  free(pool->shared.p);
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
  const uint64_t gen = atomic_load_explicit(&pool->generation, memory_order_relaxed) + 1;
  cpu_job *job = &pool->job[gen & 1];
  atomic_store_explicit(&job->fn, fn, memory_order_relaxed);
  atomic_store_explicit(&job->arg, arg, memory_order_relaxed);
  atomic_store(&pool->done, tag(gen));
  atomic_store(&pool->claim, tag(gen) | ((uint64_t)n_tasks << 16));
  atomic_store(&pool->generation, gen); /* seq_cst: publishes the job; before the sleepers check */
  if (atomic_load(&pool->sleepers) > 0) {
    pthread_mutex_lock(&pool->mu);
    pthread_cond_broadcast(&pool->start_cv);
    pthread_mutex_unlock(&pool->mu);
  }

  run_tasks(pool, gen);

  const uint64_t all = tag(gen) | (uint64_t)n_tasks;
  if (atomic_load_explicit(&pool->done, memory_order_acquire) == all) return;
  const int64_t end = pool->spin_ns > 0 ? now_ns() + pool->spin_ns : 0;
  for (unsigned i = 1; end; i++) {
    if (atomic_load_explicit(&pool->done, memory_order_acquire) == all) return;
    cpu_relax();
    if (i % 64 == 0 && now_ns() > end) break;
  }
  pthread_mutex_lock(&pool->mu);
  atomic_store(&pool->caller_waits, true); /* seq_cst: before the done check */
  while (atomic_load(&pool->done) != all) pthread_cond_wait(&pool->done_cv, &pool->mu);
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

void *cpu_pool_shared(cpu_pool *pool, size_t nbytes) {
  size_t want = (nbytes + 63) & ~(size_t)63;
  if (want == 0) want = 64;
  if (pool->shared.n >= want) return pool->shared.p;
  void *p = aligned_alloc(64, want);
  if (!p) return NULL;
  free(pool->shared.p);
  pool->shared.p = p;
  pool->shared.n = want;
  return p;
}
