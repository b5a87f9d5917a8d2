/* The kernel environment's sgemm over a thread pool
 * (runtime/src/vm/sgemm_threads.c): how a product is cut (column blocks
 * of whole 32-column multiples, row blocks when C is narrow, nothing for
 * small products, one thread or a call from inside a task), and the
 * products themselves on pools of 2 and 3 threads against a double
 * reference written here: all four transposes, padded leading dimensions
 * whose padding stays untouched, beta = 0 over NaNs. A product the own
 * kernels compute with alpha 1 must also equal, bit for bit, the same
 * product on one thread (their sums do not depend on where a block
 * starts); OpenBLAS's edge kernels may round differently, so the BLAS's
 * are held to the reference only. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/runtime.h"
#include "nimble_test.h"
#include "vm/blas_loader.h"
#include "vm/sgemm_own.h"
#include "vm/sgemm_threads.h"
#include "vm/thread_pool.h"

/* nimble_sgemm_threads_plan cuts (m, n, k), both operands constants (or
 * read in place), over `threads` into `blocks` blocks of `step` columns
 * (by_columns 1) or rows (0); check_plan_packed with A, B or both packed
 * on every call (pack: 1 A, 2 B, 3 both). */
static void check_plan_packed(uint32_t threads, int64_t m, int64_t n, int64_t k, int pack, int64_t blocks,
                              int by_columns, int64_t step) {
  int cols;
  int64_t got;
  ck_assert_int_eq(nimble_sgemm_threads_plan(threads, m, n, k, pack & 1, pack >> 1 & 1, &cols, &got), blocks);
  ck_assert_msg(cols == by_columns && got == step, "%u threads, %lldx%lldx%lld: by %s of %lld, want by %s of %lld",
                threads, (long long)m, (long long)n, (long long)k, cols ? "columns" : "rows", (long long)got,
                by_columns ? "columns" : "rows", (long long)step);
}

static void check_plan(uint32_t threads, int64_t m, int64_t n, int64_t k, int64_t blocks, int by_columns,
                       int64_t step) {
  check_plan_packed(threads, m, n, k, 0, blocks, by_columns, step);
}

START_TEST(test_plan_cuts_large_products_into_aligned_blocks) {
  int cols;
  int64_t step;
  /* One thread, or a product under 2^17 multiply-adds: one block. */
  ck_assert_int_eq(nimble_sgemm_threads_plan(1, 512, 512, 512, 0, 0, &cols, &step), 1);
  ck_assert_int_eq(nimble_sgemm_threads_plan(2, 32, 64, 63, 0, 0, &cols, &step), 1);
  ck_assert_int_eq(nimble_sgemm_threads_plan(2, 0, 4096, 4096, 0, 0, &cols, &step), 1);
  /* mlp's 64 x 512 x 784 on 2 threads: two blocks of 256 columns. */
  check_plan(2, 64, 512, 784, 2, 1, 256);
  /* 3 threads over 1000 columns: 334 rounded up to 352, 3 blocks. */
  check_plan(3, 16, 1000, 64, 3, 1, 352);
  /* 8 threads but only 200 columns, 16 rows: 3 blocks of at least 64
   * columns, 32-aligned (96 + 96 + 8). */
  check_plan(8, 16, 200, 512, 3, 1, 96);
  /* ... with 512 rows: 8 blocks of 64 rows, each 1/8 of the work, where
   * the largest column block was 96/200 of it. */
  check_plan(8, 512, 200, 512, 8, 0, 64);
  /* A 14x14 image's 196 columns on 2 threads: 128 + 68 columns would give
   * one thread twice the other's work; 384 rows go 192 + 192, 64 rows
   * 32 + 32 (mobilenet_v2's expansions and projections). */
  check_plan(2, 384, 196, 64, 2, 0, 192);
  check_plan(2, 64, 196, 384, 2, 0, 32);
  /* Even columns and even rows: columns (mlp's case above is one: 256 + 256
   * columns against 32 + 32 rows of 512). */
  check_plan(2, 128, 256, 128, 2, 1, 128);
  /* A matrix-vector product with one row of C: its columns. */
  check_plan(2, 1, 2048, 512, 2, 1, 1024);
  /* One column of C: rows, 8-aligned. */
  check_plan(2, 1000, 1, 512, 2, 0, 504);
  /* bert's 128x128x512 (an activation times a constant weight): even
   * either way, columns; with A packed on every call, rows (each column
   * block packed all of A); mlp's 64x512x784 keeps its columns with A
   * packed (256 of 512 columns against 32 of 64 rows plus half of A).
   * Both packed and even: columns. 32x200x64: rows (16 + 16 against 128
   * + 72 columns), but with B packed on every call columns (each row
   * block would pack all 200 of its columns). */
  check_plan(2, 128, 128, 512, 2, 1, 64);
  check_plan_packed(2, 128, 128, 512, 1, 2, 0, 64);
  check_plan_packed(2, 64, 512, 784, 1, 2, 1, 256);
  check_plan_packed(2, 128, 128, 64, 3, 2, 1, 64);
  check_plan(2, 32, 200, 64, 2, 0, 16);
  check_plan_packed(2, 32, 200, 64, 2, 2, 1, 128);
  /* Too narrow and too short to cut. */
  ck_assert_int_eq(nimble_sgemm_threads_plan(2, 31, 127, 100000, 0, 0, &cols, &step), 1);
}
END_TEST

static const float PAD = 12345.0f;

/* Computes one product through nimble_sgemm_threads on `pool` and checks
 * it against the double reference and against the same call on no pool. */
static void check_product(nimble_thread_pool *pool, int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t pad,
                          float beta, uint32_t seed) {
  int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  int64_t lda = ac + pad, ldb = bc + pad, ldc = n + pad;
  float *a = malloc(sizeof(float) * (size_t)(ar * lda)), *b = malloc(sizeof(float) * (size_t)(br * ldb));
  float *c0 = malloc(sizeof(float) * (size_t)(m * ldc)), *c = malloc(sizeof(float) * (size_t)(m * ldc));
  float *c1 = malloc(sizeof(float) * (size_t)(m * ldc));
  ck_assert(a && b && c0 && c && c1);
  for (int64_t i = 0; i < ar * lda; i++) a[i] = nimble_test_uniform(&seed);
  for (int64_t i = 0; i < br * ldb; i++) b[i] = nimble_test_uniform(&seed);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < ldc; j++) c0[i * ldc + j] = j < n ? (beta == 0.0f ? NAN : nimble_test_uniform(&seed)) : PAD;
  /* alpha 1, as every product the code generator emits but a Gemm's with
   * an alpha attribute: with another alpha, a full tile (alpha * acc, then
   * + beta * C) and an edge tile may fuse a different multiply with the add,
   * and aarch64's 12-column panels put a column in an edge tile in one cut
   * and in a full one in another (qemu: 1 ulp apart). */
  const float alpha = 1.0f;
  memcpy(c, c0, sizeof(float) * (size_t)(m * ldc));
  memcpy(c1, c0, sizeof(float) * (size_t)(m * ldc));
  nimble_thread_pool *outer = nimble_sgemm_threads_swap(pool);
  nimble_sgemm_threads(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  nimble_sgemm_threads_swap(NULL);
  nimble_sgemm_threads(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c1, ldc);
  nimble_sgemm_threads_swap(outer);
  int own = nimble_blas_sgemm_pick(ta, tb, m, n, k, a, lda, b, ldb) == nimble_sgemm_own;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < ldc; j++) {
      float got = c[i * ldc + j];
      if (j >= n) {
        ck_assert_msg(got == PAD, "ta=%d tb=%d m=%lld n=%lld k=%lld: padding C[%lld,%lld] changed to %g", ta, tb,
                      (long long)m, (long long)n, (long long)k, (long long)i, (long long)j, (double)got);
        continue;
      }
      double acc = 0, mag = 0;
      for (int64_t p = 0; p < k; p++) {
        double x = ta ? a[p * lda + i] : a[i * lda + p];
        double y = tb ? b[j * ldb + p] : b[p * ldb + j];
        acc += x * y;
        mag += fabs(x * y);
      }
      double cin = beta == 0.0f ? 0.0 : (double)beta * c0[i * ldc + j];
      double want = alpha * acc + cin, tol = (double)(k + 4) * 1.2e-7 * (alpha * mag + fabs(cin)) + 1e-30;
      ck_assert_msg(fabs(got - want) <= tol, "ta=%d tb=%d m=%lld n=%lld k=%lld: C[%lld,%lld] = %.9g, want %.9g", ta,
                    tb, (long long)m, (long long)n, (long long)k, (long long)i, (long long)j, (double)got, want);
      ck_assert_msg(!own || memcmp(&got, &c1[i * ldc + j], sizeof got) == 0,
                    "ta=%d tb=%d m=%lld n=%lld k=%lld: C[%lld,%lld] = %.9g cut, %.9g on one thread", ta, tb,
                    (long long)m, (long long)n, (long long)k, (long long)i, (long long)j, (double)got,
                    (double)c1[i * ldc + j]);
    }
  free(a);
  free(b);
  free(c0);
  free(c);
  free(c1);
}

/* The epilogue through nimble_sgemm_threads_epilogue: + row bias, clamp
 * to [0, 6] (Clip) keeping NaN; the bias of a row-cut block must be its
 * own rows'. */
static void check_epilogue(nimble_thread_pool *pool, int ta, int tb, int64_t m, int64_t n, int64_t k, uint32_t seed) {
  int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  float *a = malloc(sizeof(float) * (size_t)(ar * ac)), *b = malloc(sizeof(float) * (size_t)(br * bc));
  float *c = malloc(sizeof(float) * (size_t)(m * n)), *bias = malloc(sizeof(float) * (size_t)m);
  float *cb = malloc(sizeof(float) * (size_t)n), *res = malloc(sizeof(float) * (size_t)(m * (n + 5)));
  ck_assert(a && b && c && bias && cb && res);
  for (int64_t j = 0; j < n; j++) cb[j] = nimble_test_uniform(&seed);
  for (int64_t i = 0; i < m * (n + 5); i++) res[i] = nimble_test_uniform(&seed);
  for (int64_t i = 0; i < ar * ac; i++) a[i] = nimble_test_uniform(&seed);
  for (int64_t i = 0; i < br * bc; i++) b[i] = nimble_test_uniform(&seed);
  for (int64_t i = 0; i < m; i++) bias[i] = 4.0f * nimble_test_uniform(&seed);
  for (int64_t i = 0; i < m * n; i++) c[i] = NAN;
  int nan_row = m > 2 ? 2 : -1;
  if (nan_row >= 0) a[ta ? 2 : 2 * ac] = NAN; /* op(A)[2, 0]: row 2 of C is NaN */
  nimble_thread_pool *outer = nimble_sgemm_threads_swap(pool);
  /* Odd seeds also add a column bias and a residual (leading dimension n + 5). */
  int all = seed & 1;
  nimble_sgemm_epilogue_t epi = {bias, all ? cb : NULL, all ? res : NULL, n + 5, 0.0f, 6.0f};
  nimble_sgemm_threads_epilogue(ta, tb, m, n, k, 1.0f, a, ac, b, bc, 0.0f, c, n, &epi);
  nimble_sgemm_threads_swap(outer);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0, mag = fabs(bias[i]);
      for (int64_t p = 0; p < k; p++) {
        double x = ta ? a[p * ac + i] : a[i * ac + p], y = tb ? b[j * bc + p] : b[p * bc + j];
        acc += x * y;
        mag += fabs(x * y);
      }
      double want = acc + bias[i] + (all ? (double)cb[j] + res[i * (n + 5) + j] : 0.0);
      double tol = (double)(k + 6) * 1.2e-7 * (mag + 2.0);
      float got = c[i * n + j];
      int ok = i == nan_row ? isnan(got)
                      : (want <= 0 ? got == 0.0f || fabs(got - want) <= tol
                                   : want >= 6 ? got == 6.0f || fabs(got - want) <= tol : fabs(got - want) <= tol);
      ck_assert_msg(ok, "epilogue ta=%d tb=%d m=%lld n=%lld k=%lld: C[%lld,%lld] = %.9g, want %.9g", ta, tb,
                    (long long)m, (long long)n, (long long)k, (long long)i, (long long)j, (double)got,
                    i == nan_row ? NAN : want);
    }
  free(a);
  free(b);
  free(c);
  free(bias);
  free(cb);
  free(res);
}

static void check_on_threads(uint32_t threads) {
  nimble_thread_pool *pool = NULL;
  nimble_status_t s = nimble_thread_pool_create(threads, &pool);
  ck_assert_msg(!s, "%s", nimble_status_message(s));
  /* Shapes of the reference models and around the block edges: column
   * cuts (n >= 128), row cuts (narrow C, and C whose columns cut unevenly:
   * 130, 196), a matrix-vector product each way, and a product too small
   * to cut. */
  static const int64_t shapes[][3] = {{64, 512, 784}, {96, 3136, 16}, {128, 130, 128}, {1, 2048, 300},
                                      {700, 1, 256},  {100, 60, 200}, {33, 161, 97},  {8, 8, 8},
                                      {384, 196, 64}};
  uint32_t seed = threads;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int t = 0; t < 4; t++)
      check_product(pool, t & 1, t >> 1, shapes[i][0], shapes[i][1], shapes[i][2], (int64_t)(i % 3),
                    i % 2 ? 0.0f : 0.5f, seed++);
  /* The epilogue on column cuts, row cuts, a matrix-vector product and
   * a product too small to cut (mobilenet_v2's first expansion block), and
   * on a 14x14 projection's rows. */
  static const int64_t epi_shapes[][3] = {{96, 784, 16}, {200, 60, 64}, {700, 1, 64}, {1, 1000, 64}, {9, 9, 9},
                                          {64, 196, 96}};
  for (size_t i = 0; i < sizeof epi_shapes / sizeof epi_shapes[0]; i++)
    for (int t = 0; t < 4; t++)
      check_epilogue(pool, t & 1, t >> 1, epi_shapes[i][0], epi_shapes[i][1], epi_shapes[i][2], seed++);
  nimble_thread_pool_destroy(pool);
}

START_TEST(test_products_on_two_threads_match_the_reference_and_one_thread) { check_on_threads(2); }
END_TEST

START_TEST(test_products_on_three_threads_match_the_reference_and_one_thread) { check_on_threads(3); }
END_TEST

/* A kernel's parallel task that calls sgemm: the product runs inline on
 * the task's thread (a pool runs one loop at a time). */
typedef struct task_case {
  nimble_thread_pool *pool;
  float a[64 * 256], b[256 * 512], c[2][64 * 512];
} task_case;

static int32_t task_body(int64_t task, int64_t n_tasks, void *closure) {
  (void)n_tasks;
  task_case *t = closure;
  nimble_thread_pool *outer = nimble_sgemm_threads_swap(t->pool);
  nimble_sgemm_threads(0, 0, 64, 512, 256, 1.0f, t->a, 256, t->b, 512, 0.0f, t->c[task], 512);
  nimble_sgemm_threads_swap(outer);
  return 0;
}

START_TEST(test_a_product_inside_a_parallel_task_runs_inline) {
  static task_case t;
  ck_assert(!nimble_thread_pool_create(2, &t.pool));
  uint32_t seed = 7;
  for (size_t i = 0; i < sizeof t.a / sizeof t.a[0]; i++) t.a[i] = nimble_test_uniform(&seed);
  for (size_t i = 0; i < sizeof t.b / sizeof t.b[0]; i++) t.b[i] = nimble_test_uniform(&seed);
  ck_assert_int_eq(nimble_thread_pool_run(t.pool, 2, task_body, &t), 0);
  for (int i = 0; i < 64; i += 21)
    for (int j = 0; j < 512; j += 37) {
      double want = 0;
      for (int p = 0; p < 256; p++) want += (double)t.a[i * 256 + p] * t.b[p * 512 + j];
      for (int r = 0; r < 2; r++)
        ck_assert_msg(fabs(t.c[r][i * 512 + j] - want) <= 1e-4, "task %d C[%d,%d] = %g, want %g", r, i, j,
                      (double)t.c[r][i * 512 + j], want);
    }
  nimble_thread_pool_destroy(t.pool);
}
END_TEST

/* The pool itself, many short loops back to back: every task of every loop
 * runs exactly once, on whichever thread, and a failing task's code comes
 * back (a worker late for a loop must skip it, never run it stale). Under
 * ThreadSanitizer this is the join/close protocol's check. */
typedef struct loop_case {
  int hits[48];
  int64_t fail_at;
} loop_case;

static int32_t count_body(int64_t task, int64_t n_tasks, void *closure) {
  (void)n_tasks;
  loop_case *l = closure;
  __atomic_fetch_add(&l->hits[task], 1, __ATOMIC_RELAXED);
  return task == l->fail_at ? 7 : 0;
}

START_TEST(test_many_short_loops_run_every_task_once) {
  nimble_thread_pool *pool = NULL;
  ck_assert(!nimble_thread_pool_create(3, &pool));
  ck_assert_int_eq(nimble_thread_pool_size(pool), 3);
  for (int round = 0; round < 5000; round++) {
    loop_case l;
    memset(&l, 0, sizeof l);
    int64_t n = 2 + round % 47; /* at most as many tasks as threads, and blocks of uneven length */
    l.fail_at = round % 7 == 0 ? round % n : -1;
    int32_t rc = nimble_thread_pool_run(pool, n, count_body, &l);
    ck_assert_int_eq(rc, l.fail_at >= 0 ? 7 : 0);
    for (int64_t t = 0; t < n; t++)
      ck_assert_msg(l.hits[t] == 1 || (l.fail_at >= 0 && l.hits[t] == 0), "round %d: task %lld ran %d times", round,
                    (long long)t, l.hits[t]);
    if (l.fail_at < 0)
      for (int64_t t = 0; t < n; t++) ck_assert_int_eq(l.hits[t], 1);
  }
  nimble_thread_pool_destroy(pool);
}
END_TEST

/* A loop of more tasks than threads is cut into one block of consecutive
 * tasks per thread: once both threads are in the loop (each one's first
 * task waits for the other's), the worker's first task is the first of
 * the second block, which one shared counter would have given to
 * whichever thread asked next. */
typedef struct block_case {
  pthread_t caller;
  int id;                /* the round, so that a thread knows its first task of it */
  int arrived;
  int late;              /* a thread did not come within the wait: nothing to check */
  int on_worker[32];
} block_case;

static int32_t block_body(int64_t task, int64_t n_tasks, void *closure) {
  (void)n_tasks;
  block_case *b = closure;
  static _Thread_local int entered_round = -1;
  int worker = !pthread_equal(pthread_self(), b->caller);
  b->on_worker[task] = worker;
  if (entered_round != b->id) {
    entered_round = b->id;
    __atomic_fetch_add(&b->arrived, 1, __ATOMIC_ACQ_REL);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (__atomic_load_n(&b->arrived, __ATOMIC_ACQUIRE) < 2) {
      clock_gettime(CLOCK_MONOTONIC, &t);
      if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 2000000000L) {
        __atomic_store_n(&b->late, 1, __ATOMIC_RELEASE);
        break;
      }
    }
  }
  return 0;
}

START_TEST(test_a_long_loop_gives_each_thread_its_own_block) {
  nimble_thread_pool *pool = NULL;
  ck_assert(!nimble_thread_pool_create(2, &pool));
  int checked = 0;
  for (int round = 0; round < 8; round++) {
    block_case *b = calloc(1, sizeof *b);
    b->caller = pthread_self();
    b->id = round;
    int64_t n = 9 + round; /* blocks of 5 and 4 tasks, 5 and 5, ... */
    ck_assert_int_eq(nimble_thread_pool_run(pool, n, block_body, b), 0);
    if (!b->late) {
      int64_t first = (n + 1) / 2;
      ck_assert_msg(!b->on_worker[0], "round %d: task 0 ran on the worker", round);
      ck_assert_msg(b->on_worker[first], "round %d: task %lld, the second block's first, ran on the caller", round,
                    (long long)first);
      checked++;
    }
    free(b);
  }
  ck_assert_msg(checked > 0, "the worker never came within the wait");
  nimble_thread_pool_destroy(pool);
}
END_TEST

/* Sleeping and waking. After a pause longer than the pool's spin (0.1
 * ms) the worker is asleep; a loop whose task 0 (the caller's) waits for
 * task 1 to start on another thread then needs the worker woken: a lost
 * wake-up would leave task 1 to the caller once its wait gave up, which
 * is still correct but serial, so the test checks which thread ran it.
 * Task 1 then runs longer than the spin, so the caller also sleeps
 * waiting for the last one out and must be woken in turn. */
typedef struct wake_case {
  pthread_t caller;
  int started; /* task 1 is running */
  int on_worker;
  int hits[2];
} wake_case;

static void sleep_us(long us) {
  struct timespec t = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&t, NULL);
}

static int32_t wake_body(int64_t task, int64_t n_tasks, void *closure) {
  (void)n_tasks;
  wake_case *w = closure;
  __atomic_fetch_add(&w->hits[task], 1, __ATOMIC_RELAXED);
  if (task == 1) {
    w->on_worker = !pthread_equal(pthread_self(), w->caller);
    __atomic_store_n(&w->started, 1, __ATOMIC_RELEASE);
    sleep_us(300); /* past the caller's spin */
    return 0;
  }
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (!__atomic_load_n(&w->started, __ATOMIC_ACQUIRE)) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 2000000000L) break;
    sleep_us(50);
  }
  return 0;
}

START_TEST(test_a_sleeping_worker_is_woken_for_the_next_loop) {
  nimble_thread_pool *pool = NULL;
  ck_assert(!nimble_thread_pool_create(2, &pool));
  for (int round = 0; round < 20; round++) {
    sleep_us(round % 2 ? 2000 : 150 + 20 * round); /* the worker asleep, or just about to be */
    wake_case w;
    memset(&w, 0, sizeof w);
    w.caller = pthread_self();
    ck_assert_int_eq(nimble_thread_pool_run(pool, 2, wake_body, &w), 0);
    ck_assert_msg(w.hits[0] == 1 && w.hits[1] == 1, "round %d: tasks ran %d and %d times", round, w.hits[0],
                  w.hits[1]);
    ck_assert_msg(w.on_worker, "round %d: task 1 ran on the caller (the worker was not woken)", round);
  }
  nimble_thread_pool_destroy(pool);
}
END_TEST

int main(void) {
  /* NIMBLE_SGEMM=blas where no BLAS loads: nothing to cut. */
  if (!nimble_blas_sgemm()) {
    printf("skipped: no sgemm here (%s)\n", nimble_runtime_sgemm_name());
    return 77;
  }
  Suite *s = suite_create("sgemm_threads");
  TCase *tc = tcase_create("threads");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_plan_cuts_large_products_into_aligned_blocks);
  tcase_add_test(tc, test_products_on_two_threads_match_the_reference_and_one_thread);
  tcase_add_test(tc, test_products_on_three_threads_match_the_reference_and_one_thread);
  tcase_add_test(tc, test_a_product_inside_a_parallel_task_runs_inline);
  tcase_add_test(tc, test_many_short_loops_run_every_task_once);
  tcase_add_test(tc, test_a_long_loop_gives_each_thread_its_own_block);
  tcase_add_test(tc, test_a_sleeping_worker_is_woken_for_the_next_loop);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
