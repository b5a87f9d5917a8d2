/* A small fork-join pool: workers sleep on a condition variable until a
 * new loop (generation) starts, join it, take task indices from an atomic
 * counter, and leave. The caller takes tasks too; once they are all taken
 * it closes the loop and waits only for the workers that joined: a worker
 * that was not scheduled in time (another process on its core) finds the
 * loop closed and skips it, so the caller never waits a time slice for a
 * thread that had nothing to do. Joining and closing are one atomic word
 * (generation, closed, joined count), so no worker can start on a stale
 * body once the caller has moved on.
 *
 * Both sides spin briefly (SPIN_NS) before they sleep: an invoke runs one
 * parallel loop per kernel, microseconds apart, and a condition-variable
 * round trip per loop (a futex wake, the worker scheduled again, its
 * report back) cost more than the second thread gained (mobilenet_v2 was
 * slower at 2 threads than at 1). Spinning keeps the worker hot between
 * the loops of one invoke; after SPIN_NS without work it sleeps again. */
#include "vm/thread_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define SPIN_NS 100000 /* 0.1 ms */

static void cpu_relax(void) {
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

/* Spins while (*v == x) == equal, up to SPIN_NS; returns whether that
 * ended (the caller sleeps on its condition variable otherwise). */
static int spin_while(const atomic_uint_fast64_t *v, uint64_t x, int equal) {
  int64_t deadline = 0;
  for (uint32_t k = 0;; k++) {
    if ((atomic_load_explicit(v, memory_order_acquire) == x) != equal) return 1;
    if ((k & 63) == 63) {
      int64_t t = now_ns();
      if (!deadline) deadline = t + SPIN_NS;
      else if (t >= deadline) return 0;
    }
    cpu_relax();
  }
}

/* A worker's start argument: its pool and its place in it (1 + index). */
typedef struct worker_arg {
  nimble_thread_pool *p;
  uint32_t self;
} worker_arg;

struct nimble_thread_pool {
  pthread_mutex_t mu;
  pthread_cond_t work_cv, done_cv;
  pthread_t *threads;
  worker_arg *args;
  uint32_t num_workers;
  uint64_t generation;
  int stop;
  nimble_parallel_body_fn body;
  void *closure;
  int64_t n_tasks;
  /* A loop of more tasks than threads: thread s's block of them, taken
   * from its own counter (its cache line) and then, done, from the
   * others'. */
  struct task_block {
    _Alignas(64) atomic_int_fast64_t next;
    int64_t end;
  } *blocks;
  atomic_uint_fast64_t claimed; /* a loop of at most as many tasks as threads: the tasks taken */
  atomic_int error;
  /* A mirror of generation (and stop: UINT64_MAX), written under mu, read
   * while spinning without it. */
  atomic_uint_fast64_t gen_pub;
  /* The current loop: generation << 32 | CLOSED | workers in it. */
  atomic_uint_fast64_t loop;
};

#define LOOP_CLOSED ((uint64_t)1 << 31)
#define LOOP_JOINED(x) ((x) & (LOOP_CLOSED - 1))
#define LOOP_GEN(x) ((x) >> 32)

/* Joins loop `gen` unless it is over or closed; returns whether it did. */
static int loop_join(nimble_thread_pool *p, uint64_t gen) {
  uint64_t x = atomic_load_explicit(&p->loop, memory_order_acquire);
  for (;;) {
    if (LOOP_GEN(x) != (gen & 0xffffffffu) || (x & LOOP_CLOSED)) return 0;
    if (atomic_compare_exchange_weak_explicit(&p->loop, &x, x + 1, memory_order_acq_rel,
                                              memory_order_acquire))
      return 1;
  }
}

static _Thread_local int tls_in_task;

static void run_one(nimble_thread_pool *p, nimble_parallel_body_fn body, void *closure, int64_t i, int64_t n) {
  if (atomic_load_explicit(&p->error, memory_order_relaxed) != 0) return; /* drain */
  int32_t rc = body(i, n, closure);
  if (rc != 0) {
    int expected = 0;
    atomic_compare_exchange_strong(&p->error, &expected, rc);
  }
}

/* Claims task i (< 64) of a small loop; whether it was still free. */
static int claim(nimble_thread_pool *p, int64_t i) {
  uint64_t bit = (uint64_t)1 << i;
  return !(atomic_fetch_or_explicit(&p->claimed, bit, memory_order_relaxed) & bit);
}

/* Runs tasks of the loop until all are taken. `self` is the thread's
 * place in the pool (the caller 0, worker w w + 1). A loop of at most as
 * many tasks as threads (a convolution's bands of rows, a product's column
 * blocks) hands task `self` to thread `self` first: the same thread then
 * owns the same band in every kernel of an invoke, and a layer reads the
 * rows the previous one wrote from its own core's cache, where taking
 * tasks in arrival order gave band 0 to whichever thread came first. A
 * longer loop is cut the same way into one block of consecutive tasks per
 * thread: one shared counter had every task's claim move a cache line
 * between the cores (bert's layer norms, 64 tasks of two rows: 1.8 us at
 * one thread, 12 at two) and handed the rows out in arrival order. A task
 * whose thread has not come when the others are done is taken by them
 * (claims are bits of one word, or the block's counter), so no one waits
 * for a late thread. */
static void run_tasks(nimble_thread_pool *p, nimble_parallel_body_fn body, void *closure, int64_t n,
                      uint32_t self) {
  tls_in_task = 1;
  uint32_t T = p->num_workers + 1;
  if (n <= (int64_t)T && n <= 64) {
    if ((int64_t)self < n && claim(p, self)) run_one(p, body, closure, self, n);
    for (int64_t i = 0; i < n; i++)
      if (claim(p, i)) run_one(p, body, closure, i, n);
  } else {
    for (uint32_t k = 0; k < T; k++) {
      struct task_block *b = &p->blocks[(self + k) % T];
      for (;;) {
        int64_t i = atomic_fetch_add_explicit(&b->next, 1, memory_order_relaxed);
        if (i >= b->end) break;
        run_one(p, body, closure, i, n);
      }
    }
  }
  tls_in_task = 0;
}

static void *worker_main(void *arg) {
  worker_arg *wa = arg;
  nimble_thread_pool *p = wa->p;
  uint32_t self = wa->self;
  uint64_t seen = 0;
  for (;;) {
    spin_while(&p->gen_pub, seen, 1); /* until a new loop (or stop) */
    pthread_mutex_lock(&p->mu);
    while (!p->stop && p->generation == seen) pthread_cond_wait(&p->work_cv, &p->mu);
    if (p->stop) break;
    seen = p->generation;
    nimble_parallel_body_fn body = p->body;
    void *closure = p->closure;
    int64_t n = p->n_tasks;
    pthread_mutex_unlock(&p->mu);
    /* body and closure belong to loop `seen`: used only once joined, and
     * the caller does not return while a joined worker is in it. */
    if (!loop_join(p, seen)) continue;
    run_tasks(p, body, closure, n, self);
    uint64_t left = atomic_fetch_sub_explicit(&p->loop, 1, memory_order_acq_rel) - 1;
    if (LOOP_JOINED(left) == 0 && (left & LOOP_CLOSED)) {
      /* The caller may be asleep waiting for the last one out. */
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done_cv);
      pthread_mutex_unlock(&p->mu);
    }
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

nimble_status_t nimble_thread_pool_create(uint32_t num_threads, nimble_thread_pool **out) {
  nimble_thread_pool *p = calloc(1, sizeof *p);
  if (!p) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory creating a thread pool");
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work_cv, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  atomic_init(&p->claimed, 0);
  atomic_init(&p->error, 0);
  atomic_init(&p->gen_pub, 0);
  atomic_init(&p->loop, LOOP_CLOSED);
  uint32_t workers = num_threads > 1 ? num_threads - 1 : 0;
  if (workers) {
    p->threads = calloc(workers, sizeof *p->threads);
    p->args = calloc(workers, sizeof *p->args);
    p->blocks = aligned_alloc(64, (workers + 1) * sizeof *p->blocks);
    if (!p->threads || !p->args || !p->blocks) {
      nimble_thread_pool_destroy(p);
      return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory creating a thread pool");
    }
  }
  for (uint32_t i = 0; i < workers; i++) {
    p->args[i] = (worker_arg){p, i + 1};
    if (pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]) != 0) {
      nimble_thread_pool_destroy(p);
      return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "cannot start thread %u of %u", i + 1,
                                workers);
    }
    p->num_workers = i + 1;
  }
  *out = p;
  return nimble_ok();
}

void nimble_thread_pool_destroy(nimble_thread_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  atomic_store_explicit(&p->gen_pub, UINT64_MAX, memory_order_release);
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->mu);
  for (uint32_t i = 0; i < p->num_workers; i++) pthread_join(p->threads[i], NULL);
  free(p->threads);
  free(p->args);
  free(p->blocks);
  pthread_cond_destroy(&p->work_cv);
  pthread_cond_destroy(&p->done_cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

int32_t nimble_thread_pool_run(nimble_thread_pool *p, int64_t n_tasks, nimble_parallel_body_fn body,
                               void *closure) {
  if (n_tasks <= 0) return 0;
  if (!p || p->num_workers == 0 || n_tasks == 1 || tls_in_task) {
    for (int64_t i = 0; i < n_tasks; i++) {
      int32_t rc = body(i, n_tasks, closure);
      if (rc != 0) return rc;
    }
    return 0;
  }
  pthread_mutex_lock(&p->mu);
  p->body = body;
  p->closure = closure;
  p->n_tasks = n_tasks;
  uint32_t T = p->num_workers + 1;
  int64_t per = n_tasks / T, extra = n_tasks % T, at = 0;
  for (uint32_t s = 0; s < T; s++) { /* the first `extra` blocks one task longer */
    atomic_store_explicit(&p->blocks[s].next, at, memory_order_relaxed);
    at += per + ((int64_t)s < extra);
    p->blocks[s].end = at;
  }
  atomic_store(&p->claimed, 0);
  atomic_store(&p->error, 0);
  p->generation++;
  atomic_store_explicit(&p->loop, (p->generation & 0xffffffffu) << 32, memory_order_release);
  atomic_store_explicit(&p->gen_pub, p->generation, memory_order_release);
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->mu);
  run_tasks(p, body, closure, n_tasks, 0);
  /* Every task is taken: close the loop to latecomers and wait for the
   * workers in it to finish theirs. */
  uint64_t x = atomic_fetch_or_explicit(&p->loop, LOOP_CLOSED, memory_order_acq_rel) | LOOP_CLOSED;
  if (LOOP_JOINED(x) && !spin_while(&p->loop, LOOP_CLOSED | (x & ~(LOOP_CLOSED - 1)), 0)) {
    pthread_mutex_lock(&p->mu);
    while (LOOP_JOINED(atomic_load_explicit(&p->loop, memory_order_acquire)))
      pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
  }
  return atomic_load(&p->error);
}

uint32_t nimble_thread_pool_size(const nimble_thread_pool *p) { return p ? p->num_workers + 1 : 1; }

int nimble_thread_pool_in_task(void) { return tls_in_task; }
