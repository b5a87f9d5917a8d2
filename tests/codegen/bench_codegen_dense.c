/* Timing program (not a test): the generated dense kernel's own loops
 * against OpenBLAS cblas_sgemm, single thread, square sizes. Peers run
 * interleaved in one process; medians of 7 runs are reported in GFLOP/s.
 * Run with OPENBLAS_NUM_THREADS=1; the OPENBLAS_CORETYPE in the
 * environment is printed with the results. */
#include <time.h>

#include "codegen_harness.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Check's assertions only work inside a running suite, so the program
 * loads the library and makes tensors without the harness helpers. */
static void *load(const nimble_codegen_output_t *out) {
  int fd = memfd_create("nimble-bench", MFD_CLOEXEC);
  if (fd < 0 || write(fd, out->shared_object, out->shared_object_size) != (ssize_t)out->shared_object_size)
    return NULL;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static void tensor(DLTensor *t, float *data, int64_t *shape) {
  memset(t, 0, sizeof *t);
  t->data = data;
  t->device.device_type = kDLCPU;
  t->ndim = 2;
  t->dtype.code = kDLFloat;
  t->dtype.bits = 32;
  t->dtype.lanes = 1;
  t->shape = shape;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(void) {
  nimble_ln_arena *A;
  nimble_ln_kernel *k;
  nimble_status_t s = nimble_ln_arena_create(&A);
  if (!s) s = nimble_codegen_build_dense(A, "dense", NIMBLE_CODEGEN_EPILOGUE_NONE, &k);
  nimble_codegen_output_t out;
  const nimble_ln_kernel *ks[1];
  if (!s) {
    ks[0] = k;
    s = nimble_codegen_build(ks, 1, NULL, &out);
  }
  if (s) {
    fprintf(stderr, "%s\n", nimble_status_message(s));
    return 1;
  }
  void *lib = load(&out);
  void *sym = lib ? dlsym(lib, "dense") : NULL;
  if (!sym) {
    fprintf(stderr, "cannot load the kernel: %s\n", dlerror());
    return 1;
  }
  nimble_kernel_fn fn;
  memcpy(&fn, &sym, sizeof fn);
  const char *core = getenv("OPENBLAS_CORETYPE");
  printf("single thread; OPENBLAS_CORETYPE=%s\n", core ? core : "(unset)");
  printf("%6s %12s %12s %8s\n", "n", "own GFLOP/s", "BLAS GFLOP/s", "own/BLAS");
  static const int64_t sizes[] = {64, 128, 256, 512, 1024};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    int64_t n = sizes[si];
    int64_t sh[2] = {n, n};
    size_t nn = (size_t)(n * n);
    float *xf = malloc(nn * sizeof(float)), *wf = malloc(nn * sizeof(float)), *yf = malloc(nn * sizeof(float));
    if (!xf || !wf || !yf) return 1;
    for (size_t i = 0; i < nn; i++) xf[i] = (float)(i % 17) * 0.1f - 0.8f, wf[i] = (float)(i % 13) * 0.1f - 0.6f;
    DLTensor x, w, y;
    tensor(&x, xf, sh);
    tensor(&w, wf, sh);
    tensor(&y, yf, sh);
    harness_env he;
    harness_env_init(&he, -1, 0); /* no thread pool, no sgemm: own loops on one thread */
    DLTensor *args[3] = {&x, &w, &y};
    int reps = n <= 128 ? 50 : n <= 256 ? 10 : 1;
    double own[7], blas[7];
    for (int r = 0; r < 7; r++) {
      double t0 = now();
      for (int i = 0; i < reps; i++)
        if (fn(args, 3, &he.env) != 0) return 1;
      double t1 = now();
      for (int i = 0; i < reps; i++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)n, (blasint)n, (blasint)n, 1.0f, xf,
                    (blasint)n, wf, (blasint)n, 0.0f, yf, (blasint)n);
      double t2 = now();
      double flops = 2.0 * (double)n * (double)n * (double)n * reps;
      own[r] = flops / (t1 - t0) / 1e9;
      blas[r] = flops / (t2 - t1) / 1e9;
    }
    qsort(own, 7, sizeof(double), cmp);
    qsort(blas, 7, sizeof(double), cmp);
    printf("%6lld %12.1f %12.1f %8.2f\n", (long long)n, own[3], blas[3], own[3] / blas[3]);
    free(xf);
    free(wf);
    free(yf);
  }
  dlclose(lib);
  nimble_codegen_output_deinit(&out);
  nimble_ln_arena_destroy(A);
  return 0;
}
