/* The cpu backend's worker pool (see cpu_threads.h for the contract). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

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

  pthread_mutex_t mu;
  pthread_cond_t start_cv; /* a new generation of work, or stop */
  pthread_cond_t done_cv;  /* pending reached 0 */
  uint64_t generation;
  int pending; /* workers of this generation still running */
  bool stop;
  cpu_task_fn fn;
  void *arg;
  int n_tasks; /* workers with ith < n_tasks run fn this generation */
};

static void *cpu_worker_main(void *p) {
  cpu_worker *w = p;
  cpu_pool *pool = w->pool;
  uint64_t seen = 0;
  pthread_mutex_lock(&pool->mu);
  for (;;) {
    while (pool->generation == seen && !pool->stop) pthread_cond_wait(&pool->start_cv, &pool->mu);
    if (pool->stop) break;
    seen = pool->generation;
    cpu_task_fn fn = pool->fn;
    void *arg = pool->arg;
    int n_tasks = pool->n_tasks;
    pthread_mutex_unlock(&pool->mu);
    if (w->ith < n_tasks) fn(arg, w->ith, n_tasks);
    pthread_mutex_lock(&pool->mu);
    if (--pool->pending == 0) pthread_cond_signal(&pool->done_cv);
  }
  pthread_mutex_unlock(&pool->mu);
  return NULL;
}

int cpu_pool_create(int n_threads, cpu_pool **out_pool) {
  *out_pool = NULL;
  if (n_threads < 1) return EINVAL;
  cpu_pool *pool = calloc(1, sizeof *pool);
  if (!pool) return ENOMEM;
  pool->n = n_threads;
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
  pool->stop = true;
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

void cpu_pool_run(cpu_pool *pool, int max_tasks, cpu_task_fn fn, void *arg) {
  int n_tasks = max_tasks < pool->n ? max_tasks : pool->n;
  if (n_tasks <= 1) {
    fn(arg, 0, 1);
    return;
  }
  pthread_mutex_lock(&pool->mu);
  pool->fn = fn;
  pool->arg = arg;
  pool->n_tasks = n_tasks;
  /* Every worker wakes for a generation (those past n_tasks do nothing):
   * simpler than per-worker signalling, and the pool is small. */
  pool->pending = pool->n - 1;
  pool->generation++;
  pthread_cond_broadcast(&pool->start_cv);
  pthread_mutex_unlock(&pool->mu);

  fn(arg, 0, n_tasks);

  pthread_mutex_lock(&pool->mu);
  while (pool->pending > 0) pthread_cond_wait(&pool->done_cv, &pool->mu);
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
