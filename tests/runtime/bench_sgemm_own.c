/* A timing program, not a test: the own sgemm kernels (every variant this
 * CPU runs, per call and with constant operands packed once) against the
 * BLAS the runtime would load (vm/blas_loader.h: NIMBLE_BLAS, else
 * libopenblas.so.0, at one thread), on the products of the reference
 * models. Prints one line per product: median microseconds of R calls
 * (B and C rewritten before each call, as a model's activations are) and
 * the own/BLAS ratio. The rule in blas_loader.c and the table in
 * docs/vm.md ("Own sgemm") came from this.
 *
 *   bench_sgemm_own [R] [WORD]  OPENBLAS_CORETYPE picks OpenBLAS's kernels;
 *                               WORD: only the products whose 'from' has it */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vm/blas_loader.h"
#include "vm/sgemm_own.h"

typedef void (*set_threads_fn)(int);

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

typedef struct shape {
  int64_t m, n, k;
  int ta, tb;
  const char *what;
  int weights_b; /* B is a recurrent weight: the same every call, in cache */
} shape;

static const shape shapes[] = {
    {64, 512, 784, 0, 1, "mlp batch 64"},       {64, 10, 512, 0, 1, "mlp classifier"},
    {1, 512, 784, 0, 1, "mlp batch 1"},         {128, 512, 128, 0, 1, "lstm input projection, seq 128"},
    {128, 512, 128, 0, 0, "lstm input projection, W [I, 4H]"},         {16, 384, 128, 0, 0, "bert seq 16"},
    {128, 384, 128, 0, 0, "bert seq 128"},      {128, 128, 512, 0, 0, "bert ffn"},
    {128, 128, 64, 0, 0, "bert scores, seq 128"}, {128, 64, 128, 0, 0, "bert probs x V, seq 128"},
    {64, 64, 64, 0, 0, "bert scores, seq 64"},  {64, 64, 64, 0, 0, "bert probs x V, seq 64"},
    {16, 16, 64, 0, 0, "bert scores, seq 16"},  {16, 64, 16, 0, 0, "bert probs x V, seq 16"},
    {32, 196, 144, 0, 0, "cnn conv"},           {32, 784, 144, 0, 0, "cnn conv"},
    {96, 12321, 147, 0, 0, "squeezenet conv1"}, {64, 3025, 144, 0, 0, "squeezenet expand"},
    {256, 169, 576, 0, 0, "squeezenet late"},   {32, 12544, 27, 0, 0, "mobilenet conv1"},
    {96, 12544, 16, 0, 0, "mobilenet 1x1"},     {64, 196, 192, 0, 0, "mobilenet 14x14"},
    {1280, 49, 320, 0, 0, "mobilenet last"},    {256, 256, 256, 1, 1, "256^3, both transposed"},
    /* An LSTM step's h R (R is [H, 4H] when the importer transposed it,
     * [4H, H] otherwise): the same R every step, from L2 (lstm) or L3
     * (lstm2, 4 MB). */
    {1, 512, 128, 0, 0, "lstm step, R [H, 4H]", 1}, {1, 512, 128, 0, 1, "lstm step, R [4H, H]", 1},
    {1, 2048, 512, 0, 1, "lstm2 step, R [4H, H]", 1}, {1, 2048, 512, 0, 0, "lstm2 step, R [H, 4H]", 1},
};

/* Median microseconds of `reps` calls; mode 0 the BLAS, 1 the own kernels
 * on `isa`. B is rewritten before each call unless it is registered as a
 * constant (which promises it does not change). */
static double time_calls(const shape *s, int mode, nimble_sgemm_isa isa, const nimble_blas_lib_t *lib, int reps,
                         const float *a, float *b, float *c, int b_constant) {
  int64_t lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
  double *t = malloc(sizeof(double) * (size_t)reps);
  if (!t) return NAN;
  for (int r = 0; r < reps; r++) {
    if (!b_constant)
      for (int64_t i = 0; i < s->k * s->n; i++) b[i] = (float)(i % 7) * 0.125f;
    for (int64_t i = 0; i < s->m * s->n; i++) c[i] = 0.5f;
    double t0 = now_us();
    if (mode == 0)
      nimble_blas_sgemm_split(lib->sgemm, INT32_MAX, s->ta, s->tb, s->m, s->n, s->k, 1.0f, a, lda, b, ldb, 1.0f, c,
                              s->n);
    else
      (void)nimble_sgemm_own_isa(isa, s->ta, s->tb, s->m, s->n, s->k, 1.0f, a, lda, b, ldb, 1.0f, c, s->n);
    t[r] = now_us() - t0;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_double);
  double med = t[reps / 2];
  free(t);
  return med;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 41;
  if (reps < 1) reps = 1;
  nimble_blas_lib_t lib;
  nimble_status_t st = nimble_blas_open(getenv("NIMBLE_BLAS"), &lib);
  if (st) {
    printf("bench_sgemm_own: no BLAS (%s)\n", nimble_status_message(st));
    nimble_status_free(st);
    return 0;
  }
  set_threads_fn set_threads = (set_threads_fn)dlsym(lib.handle, "openblas_set_num_threads");
  if (set_threads) set_threads(1);
  printf("BLAS: %s, set to 1 thread\nown: best variant %s; median us of %d calls\n\n", lib.name,
         nimble_sgemm_isa_name(nimble_sgemm_own_best_isa()), reps);
  printf("| product (m x n x k) | from | BLAS | own, per call | own, constants packed once | own avx2 | own / BLAS (best own) |\n");
  printf("|---|---|---:|---:|---:|---:|---:|\n");
  for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++) {
    const shape *s = &shapes[q];
    if (argc > 2 && !strstr(s->what, argv[2])) continue;
    /* A recurrent weight is an executable's constant: 64-byte aligned, as
     * every constant is (docs/executable.md). malloc's 16-byte alignment
     * splits each AVX-512 load over two cache lines, which made the LSTM
     * step's product look 1.6x slower than it runs in the model. */
    size_t bbytes_al = (sizeof(float) * (size_t)(s->k * s->n) + 63) / 64 * 64;
    float *a = malloc(sizeof(float) * (size_t)(s->m * s->k)),
          *b = s->weights_b ? aligned_alloc(64, bbytes_al) : malloc(sizeof(float) * (size_t)(s->k * s->n)),
          *c = malloc(sizeof(float) * (size_t)(s->m * s->n));
    if (!a || !b || !c) return 1;
    for (int64_t i = 0; i < s->m * s->k; i++) a[i] = (float)(i % 13) * 0.01f;
    nimble_sgemm_isa best = nimble_sgemm_own_best_isa();
    for (int64_t i = 0; i < s->k * s->n; i++) b[i] = (float)(i % 7) * 0.125f;
    double tb = time_calls(s, 0, best, &lib, reps, a, b, c, s->weights_b);
    double to = time_calls(s, 1, best, &lib, reps, a, b, c, s->weights_b);
    /* The weights (A; and B when stored transposed, as a dense layer's
     * are) as an executable's constants: packed on the first call. */
    size_t abytes = sizeof(float) * (size_t)(s->m * s->k), bbytes = sizeof(float) * (size_t)(s->k * s->n);
    nimble_sgemm_own_constants_add(a, abytes);
    if (s->tb) nimble_sgemm_own_constants_add(b, bbytes);
    double tc = time_calls(s, 1, best, &lib, reps, a, b, c, s->tb || s->weights_b);
    nimble_sgemm_own_constants_remove(a, abytes);
    if (s->tb) nimble_sgemm_own_constants_remove(b, bbytes);
    double t2 = nimble_sgemm_isa_available(NIMBLE_SGEMM_ISA_AVX2)
                    ? time_calls(s, 1, NIMBLE_SGEMM_ISA_AVX2, &lib, reps, a, b, c, s->weights_b)
                    : NAN;
    printf("| %lldx%lldx%lld%s | %s | %.1f | %.1f | %.1f | %.1f | %.2f |\n", (long long)s->m, (long long)s->n,
           (long long)s->k, s->tb ? ", B^T" : "", s->what, tb, to, tc, t2, (tc < to ? tc : to) / tb);
    free(a);
    free(b);
    free(c);
  }
  nimble_blas_close(&lib);
  return 0;
}
