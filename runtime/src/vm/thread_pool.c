/* A small fork-join pool: workers wait for a new loop (a generation in
 * the loop word), join it, run their tasks, and leave. The caller runs
 * tasks too; once its own are done it closes the loop, runs what no one
 * claimed and waits only for the workers that joined: a worker that was
 * not scheduled in time (another process on its core) finds the loop
 * closed and skips it, so the caller never waits a time slice for a
 * thread that had nothing to do. Joining and closing are one atomic word
 * (generation, closed, joined count), so no worker can start on a stale
 * body once the caller has moved on.
 *
 * Both sides spin briefly (SPIN_NS) before they sleep: an invoke runs one
 * parallel loop per kernel, microseconds apart, and a condition-variable
 * round trip per loop (a futex wake, the worker scheduled again, its
 * report back) cost more than the second thread gained (mobilenet_v2 was
 * slower at 2 threads than at 1). Spinning keeps the worker hot between
 * the loops of one invoke; after SPIN_NS without work it sleeps, and only
 * then does the caller take the mutex to wake it.
 *
 * SPIN_NS is 1 ms, not less, for models whose loops come far apart: an
 * LSTM runs its input projection over both threads and then 128 steps of
 * one-thread kernels (about 0.3 ms). A worker asleep by then joined the
 * next run's projection too late to take its half (on the build
 * machine's VM a sleeping thread's wake-up takes tens of microseconds):
 * that 128x512x128 product took 88 us at two threads after a 0.3 ms gap
 * against 42 back to back and 80 at one thread (lstm seq 128 at 2 threads:
 * 0.47 -> 0.43 ms with the longer spin). */
#include "vm/thread_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SPIN_NS 1000000 /* 1 ms */

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

/* Spins while ((*v & mask) == x) == equal, up to SPIN_NS; returns whether
 * that ended (the caller sleeps on its condition variable otherwise). */
static int spin_while(const atomic_uint_fast64_t *v, uint64_t mask, uint64_t x, int equal) {
  int64_t deadline = 0;
  for (uint32_t k = 0;; k++) {
    if (((atomic_load_explicit(v, memory_order_acquire) & mask) == x) != equal) return 1;
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

/* The pool's words sit on cache lines by who writes them: a line moves
 * between two cores in 0.2-0.25 us on the build machines (a round trip
 * of one word: 0.42-0.5 us), so a loop's start and end cost what lines
 * they move. The caller writes the loop's line (the loop word, the body
 * and its arguments) and a worker reads it once it sees a new loop; each
 * thread claims its own task on its own line; workers sleep and wake
 * through a mutex that the fast path never touches. (With a mutex taken
 * by both sides every loop and the task claims on one shared word, a
 * loop of two 0.75 us tasks took 1.4 us on two threads, 1.5 on one.) */
struct nimble_thread_pool {
  /* The current loop: generation << 32 | CLOSED | workers in it. Workers
   * read body, closure, n_tasks and gen only once they have joined the
   * loop (the caller writes them while the loop before is closed and
   * empty, then publishes the loop word with release). */
  _Alignas(64) atomic_uint_fast64_t loop;
  nimble_parallel_body_fn body;
  void *closure;
  int64_t n_tasks;
  uint64_t gen;
  atomic_int error;
  atomic_int stop;
  /* Sleeping and waking: workers that gave up spinning wait on work_cv,
   * the caller on done_cv; `sleepers` and `caller_waits` say whether
   * anyone needs the signal (set before the sleeper's last look). */
  _Alignas(64) pthread_mutex_t mu;
  pthread_cond_t work_cv, done_cv;
  atomic_int sleepers, caller_waits;
  pthread_t *threads;
  worker_arg *args;
  uint32_t num_workers;
  /* A loop of at most as many tasks as threads: task i claimed for loop
   * `gen` once claims[i].gen == gen (no reset between loops). */
  struct task_claim {
    _Alignas(64) atomic_uint_fast64_t gen;
  } *claims;
  /* A loop of more tasks than threads: thread s's block of them, taken
   * from its own counter (its cache line) and then, done, from the
   * others'. */
  struct task_block {
    _Alignas(64) atomic_int_fast64_t next;
    int64_t end;
  } *blocks;
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

/* Claims task i of a small loop for loop `gen`; whether it was still free. */
static int claim(nimble_thread_pool *p, int64_t i, uint64_t gen) {
  return atomic_exchange_explicit(&p->claims[i].gen, gen, memory_order_relaxed) != gen;
}

/* Runs tasks of a long loop (more tasks than threads) until all are
 * taken. `self` is the thread's place in the pool (the caller 0, worker w
 * w + 1). The loop is cut into one block of consecutive tasks per thread:
 * one shared counter had every task's claim move a cache line between the
 * cores (bert's layer norms, 64 tasks of two rows: 1.8 us at one thread,
 * 12 at two) and handed the rows out in arrival order. A block whose
 * thread has not come when the others are done is taken by them, so no
 * one waits for a late thread. */
static void run_blocks(nimble_thread_pool *p, nimble_parallel_body_fn body, void *closure, int64_t n,
                       uint32_t self) {
  uint32_t T = p->num_workers + 1;
  for (uint32_t k = 0; k < T; k++) {
    struct task_block *b = &p->blocks[(self + k) % T];
    for (;;) {
      int64_t i = atomic_fetch_add_explicit(&b->next, 1, memory_order_relaxed);
      if (i >= b->end) break;
      run_one(p, body, closure, i, n);
    }
  }
}

/* Waits for a loop after `seen` (or stop): spinning, then asleep. */
static void wait_for_loop(nimble_thread_pool *p, uint64_t seen) {
  if (spin_while(&p->loop, ~(uint64_t)0 << 32, seen << 32, 1)) return;
  pthread_mutex_lock(&p->mu);
  /* sleepers before the last look, the caller's loop word before its look
   * at sleepers (both seq_cst): one of the two sees the other. */
  atomic_fetch_add(&p->sleepers, 1);
  while (LOOP_GEN(atomic_load(&p->loop)) == seen && !atomic_load(&p->stop))
    pthread_cond_wait(&p->work_cv, &p->mu);
  atomic_fetch_sub(&p->sleepers, 1);
  pthread_mutex_unlock(&p->mu);
}

static void *worker_main(void *arg) {
  worker_arg *wa = arg;
  nimble_thread_pool *p = wa->p;
  uint32_t self = wa->self;
  uint64_t seen = 0;
  for (;;) {
    wait_for_loop(p, seen);
    if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
    seen = LOOP_GEN(atomic_load_explicit(&p->loop, memory_order_acquire));
    if (!loop_join(p, seen)) continue;
    /* Joined: the loop's fields are this loop's until the last one out. */
    nimble_parallel_body_fn body = p->body;
    void *closure = p->closure;
    int64_t n = p->n_tasks;
    tls_in_task = 1;
    if (n > (int64_t)p->num_workers + 1) run_blocks(p, body, closure, n, self);
    else if ((int64_t)self < n && claim(p, self, p->gen)) run_one(p, body, closure, self, n);
    tls_in_task = 0;
    uint64_t left = atomic_fetch_sub(&p->loop, 1) - 1;
    if (LOOP_JOINED(left) == 0 && (left & LOOP_CLOSED) && atomic_load(&p->caller_waits)) {
      /* The caller may be asleep waiting for the last one out. */
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done_cv);
      pthread_mutex_unlock(&p->mu);
    }
  }
  return NULL;
}

nimble_status_t nimble_thread_pool_create(uint32_t num_threads, nimble_thread_pool **out) {
  nimble_thread_pool *p = aligned_alloc(64, (sizeof *p + 63) / 64 * 64);
  if (!p) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory creating a thread pool");
  memset(p, 0, sizeof *p);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work_cv, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  atomic_init(&p->error, 0);
  atomic_init(&p->stop, 0);
  atomic_init(&p->sleepers, 0);
  atomic_init(&p->caller_waits, 0);
  atomic_init(&p->loop, LOOP_CLOSED);
  uint32_t workers = num_threads > 1 ? num_threads - 1 : 0;
  if (workers) {
    p->threads = calloc(workers, sizeof *p->threads);
    p->args = calloc(workers, sizeof *p->args);
    p->blocks = aligned_alloc(64, (workers + 1) * sizeof *p->blocks);
    p->claims = aligned_alloc(64, (workers + 1) * sizeof *p->claims);
    if (!p->threads || !p->args || !p->blocks || !p->claims) {
      nimble_thread_pool_destroy(p);
      return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory creating a thread pool");
    }
    for (uint32_t s = 0; s <= workers; s++) atomic_init(&p->claims[s].gen, 0);
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
  /* A new (closed) loop word wakes the spinners, the broadcast the
   * sleepers; both then see stop. */
  atomic_store(&p->stop, 1);
  atomic_store(&p->loop, ((LOOP_GEN(atomic_load(&p->loop)) + 1) & 0xffffffffu) << 32 | LOOP_CLOSED);
  pthread_mutex_lock(&p->mu);
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->mu);
  for (uint32_t i = 0; i < p->num_workers; i++) pthread_join(p->threads[i], NULL);
  free(p->threads);
  free(p->args);
  free(p->blocks);
  free(p->claims);
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
  /* The loop before is closed and empty: no worker reads these now. */
  uint32_t T = p->num_workers + 1;
  uint64_t gen = ++p->gen;
  p->body = body;
  p->closure = closure;
  p->n_tasks = n_tasks;
  int small = n_tasks <= (int64_t)T;
  if (!small) {
    int64_t per = n_tasks / T, extra = n_tasks % T, at = 0;
    for (uint32_t s = 0; s < T; s++) { /* the first `extra` blocks one task longer */
      atomic_store_explicit(&p->blocks[s].next, at, memory_order_relaxed);
      at += per + ((int64_t)s < extra);
      p->blocks[s].end = at;
    }
  }
  atomic_store_explicit(&p->error, 0, memory_order_relaxed);
  atomic_store(&p->loop, (gen & 0xffffffffu) << 32);
  if (atomic_load(&p->sleepers)) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
  }
  tls_in_task = 1;
  uint64_t x;
  if (small) {
    /* Task s to thread s (the same thread then owns the same band of rows
     * in every kernel of an invoke and reads what it wrote from its own
     * cache). Its own task done, the caller closes the loop and runs the
     * tasks no one claimed; a worker that joined runs its own. */
    if (claim(p, 0, gen)) run_one(p, body, closure, 0, n_tasks);
    x = atomic_fetch_or(&p->loop, LOOP_CLOSED) | LOOP_CLOSED;
    if (LOOP_JOINED(x) < p->num_workers || n_tasks < (int64_t)T)
      for (int64_t i = 1; i < n_tasks; i++)
        if (claim(p, i, gen)) run_one(p, body, closure, i, n_tasks);
  } else {
    run_blocks(p, body, closure, n_tasks, 0);
    /* Every task is taken: close the loop to latecomers. */
    x = atomic_fetch_or(&p->loop, LOOP_CLOSED) | LOOP_CLOSED;
  }
  tls_in_task = 0;
  /* Wait for the workers in the loop to finish theirs. */
  if (LOOP_JOINED(x) && !spin_while(&p->loop, ~(uint64_t)0, x & ~(LOOP_CLOSED - 1), 0)) {
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->caller_waits, 1);
    while (LOOP_JOINED(atomic_load(&p->loop))) pthread_cond_wait(&p->done_cv, &p->mu);
    atomic_store(&p->caller_waits, 0);
    pthread_mutex_unlock(&p->mu);
  }
  return atomic_load(&p->error);
}

uint32_t nimble_thread_pool_size(const nimble_thread_pool *p) { return p ? p->num_workers + 1 : 1; }

int nimble_thread_pool_in_task(void) { return tls_in_task; }
