/* The kernel environment's sgemm over the VM's pool. See sgemm_threads.h. */
#include "vm/sgemm_threads.h"

#include "vm/blas_loader.h"
#include "vm/sgemm_own.h"

/* Below this many multiply-adds a product stays on one thread: about
 * 2-5 us of work at the own kernels' speed, where handing half of it to
 * a spinning worker and waiting for it costs about as much as it saves. */
#define MIN_MACS ((int64_t)1 << 17)
/* Column blocks are multiples of the widest own micro-kernel's 32 columns
 * and at least 64 wide; row blocks multiples of 8 rows, at least 16. */
#define COL_ALIGN 32
#define MIN_COLS 64
#define ROW_ALIGN 8
#define MIN_ROWS 16

static _Thread_local nimble_thread_pool *tls_pool;

nimble_thread_pool *nimble_sgemm_threads_swap(nimble_thread_pool *pool) {
  nimble_thread_pool *old = tls_pool;
  tls_pool = pool;
  return old;
}

nimble_thread_pool *nimble_sgemm_threads_pool(void) { return tls_pool; }

static int64_t ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }

/* The cut of n (columns or rows) into at most `threads` blocks of at
 * least `min` and multiples of `align`; 0 blocks when n is under 2 * min. */
static int64_t cut(uint32_t threads, int64_t n, int64_t min, int64_t align, int64_t *step) {
  if (n < 2 * min) return 0;
  int64_t blocks = threads < n / min ? threads : n / min;
  *step = ceil_div(ceil_div(n, blocks), align) * align;
  return ceil_div(n, *step);
}

int64_t nimble_sgemm_threads_plan(uint32_t threads, int64_t m, int64_t n, int64_t k, int pack_a, int pack_b,
                                  int *by_columns, int64_t *step) {
  *by_columns = 1;
  *step = n;
  if (threads < 2 || m <= 0 || n <= 0 || k <= 0) return 1;
  /* m * n * k without overflow: each factor fits in 63 bits. */
  if (m < MIN_MACS && n < MIN_MACS && k < MIN_MACS && m * n * k < MIN_MACS) return 1;
  int64_t cstep = n, rstep = m;
  int64_t cblocks = cut(threads, n, MIN_COLS, COL_ALIGN, &cstep);
  int64_t rblocks = cut(threads, m, MIN_ROWS, ROW_ALIGN, &rstep);
  /* Both possible: the one whose largest block is less work, counted in
   * the tiles the own kernels compute (columns by 16, rows by 8). On a
   * 14x14 image's 196 columns the column blocks are 128 + 68 (one thread
   * does twice the other's work); mobilenet_v2's 384 rows go 192 + 192. */
  if (cblocks && rblocks) {
    /* In double: the products of two dimensions may not fit in 64 bits. */
    double ccost = (double)ceil_div(cstep, 16) * 16 * (double)(ceil_div(m, 8) * 8);
    double rcost = (double)ceil_div(rstep, 8) * 8 * (double)(ceil_div(n, 16) * 16);
    /* An operand packed on every call is packed whole by each block that
     * needs all of it: A by every column block, B by every row block.
     * Packing a row of A (or a column of B) costs about 16 columns' (rows')
     * multiply-adds per step of k (bench_sgemm_own: 128x512 of A, 11 us,
     * against 44 us for its product with 64 columns): bert's 128x128x512
     * products cut by columns packed their A twice over (1.34x at two
     * threads). */
    if (pack_a) ccost += (double)(ceil_div(m, 8) * 8) * 16, rcost += (double)(ceil_div(rstep, 8) * 8) * 16;
    if (pack_b) ccost += (double)(ceil_div(cstep, 16) * 16) * 16, rcost += (double)(ceil_div(n, 16) * 16) * 16;
    if (rcost * 16 < ccost * 15) cblocks = 0; /* rows only when clearly better */
  }
  if (cblocks) {
    *step = cstep;
    return cblocks;
  }
  if (rblocks) {
    *by_columns = 0;
    *step = rstep;
    return rblocks;
  }
  return 1;
}

typedef struct split_call {
  nimble_sgemm_fn fn;
  int32_t trans_a, trans_b;
  int64_t m, n, k;
  float alpha, beta;
  const float *a, *b;
  float *c;
  int64_t lda, ldb, ldc;
  int by_columns;
  int64_t step;
  const nimble_sgemm_epi *epi; /* NULL: none */
} split_call;

/* One block: the chosen implementation, then the epilogue (inside the own
 * kernels' tiles, else as a pass over the block while it is in cache). */
static void block_call(const split_call *s, int64_t m, int64_t n, const float *a, const float *b, float *c,
                       int64_t row0, int64_t col0) {
  if (!s->epi) {
    s->fn(s->trans_a, s->trans_b, m, n, s->k, s->alpha, a, s->lda, b, s->ldb, s->beta, c, s->ldc);
    return;
  }
  /* The epilogue's pointers at the block's [row0, col0]. */
  nimble_sgemm_epi e = *s->epi;
  if (e.row_bias) e.row_bias += row0;
  if (e.col_bias) e.col_bias += col0;
  if (e.residual) e.residual += row0 * e.ldr + col0;
  if (s->fn == nimble_sgemm_own) {
    nimble_sgemm_own_epi(s->trans_a, s->trans_b, m, n, s->k, s->alpha, a, s->lda, b, s->ldb, s->beta, c, s->ldc, &e);
  } else {
    s->fn(s->trans_a, s->trans_b, m, n, s->k, s->alpha, a, s->lda, b, s->ldb, s->beta, c, s->ldc);
    nimble_sgemm_apply_epi(m, n, c, s->ldc, &e);
  }
}

static int32_t split_task(int64_t task, int64_t n_tasks, void *closure) {
  (void)n_tasks;
  const split_call *s = closure;
  int64_t lo = task * s->step;
  if (s->by_columns) {
    int64_t cols = s->n - lo < s->step ? s->n - lo : s->step;
    const float *b = s->trans_b ? s->b + lo * s->ldb : s->b + lo;
    block_call(s, s->m, cols, s->a, b, s->c + lo, 0, lo);
  } else {
    int64_t rows = s->m - lo < s->step ? s->m - lo : s->step;
    const float *a = s->trans_a ? s->a + lo : s->a + lo * s->lda;
    block_call(s, rows, s->n, a, s->b, s->c + lo * s->ldc, lo, 0);
  }
  return 0;
}

/* Both entry points: epi NULL for plain sgemm. */
static void threads_call(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                         const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc,
                         const nimble_sgemm_epi *epi) {
  /* The implementation is chosen for the whole product, never per block. */
  nimble_sgemm_fn fn = nimble_blas_sgemm_pick(trans_a, trans_b, m, n, k, a, lda, b, ldb);
  nimble_thread_pool *pool = tls_pool;
  int by_columns = 1;
  int64_t step = n;
  int64_t blocks = 1;
  if (pool && !nimble_thread_pool_in_task() && nimble_thread_pool_size(pool) > 1) {
    /* What the product packs on every call: the BLAS both operands, the
     * own kernels A unless it is a registered constant and B only when
     * stored transposed and not constant (else read in place). */
    int own = fn == nimble_sgemm_own;
    int pack_a = !own || !nimble_sgemm_own_is_constant(!trans_a, a, lda, k, m);
    int pack_b = !own || (trans_b && !nimble_sgemm_own_is_constant(trans_b, b, ldb, k, n));
    blocks = nimble_sgemm_threads_plan(nimble_thread_pool_size(pool), m, n, k, pack_a, pack_b, &by_columns, &step);
  }
  split_call s = {fn, trans_a, trans_b, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc, by_columns, step, epi};
  if (blocks <= 1) {
    if (m > 0 && n > 0) block_call(&s, m, n, a, b, c, 0, 0);
    return;
  }
  nimble_thread_pool_run(pool, blocks, split_task, &s);
}

void nimble_sgemm_threads(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                          const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                          int64_t ldc) {
  threads_call(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL);
}

void nimble_sgemm_threads_epilogue(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                                   int64_t ldc, const nimble_sgemm_epilogue_t *epi) {
  threads_call(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epi);
}
