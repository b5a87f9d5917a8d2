/* Finds a CBLAS sgemm at run time (see blas_loader.h) and adapts it to the
 * kernel ABI's sgemm: 64-bit sizes split into calls BLAS's 32-bit ints can
 * take, and a call BLAS would refuse computed here instead, because a
 * kernel has no way to hear that its sgemm did nothing. */
#include "vm/blas_loader.h"

#include "vm/sgemm_own.h"

#include "nimble/runtime.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef const char *(*openblas_get_config_fn)(void);
typedef int (*openblas_get_num_threads_fn)(void);
typedef void (*openblas_set_num_threads_fn)(int);

/* Fills lib->name: OpenBLAS says what it is (version, core, threads);
 * any other library is named by the file it came from. */
static void describe(nimble_blas_lib_t *lib) {
  openblas_get_config_fn config = (openblas_get_config_fn)dlsym(lib->handle, "openblas_get_config");
  openblas_get_num_threads_fn threads =
      (openblas_get_num_threads_fn)dlsym(lib->handle, "openblas_get_num_threads");
  if (config && threads) {
    const char *c = config();
    int n = threads();
    snprintf(lib->name, sizeof lib->name, "%s (%s, %d thread%s)", c ? c : "OpenBLAS", lib->file, n,
             n == 1 ? "" : "s");
  } else {
    snprintf(lib->name, sizeof lib->name, "cblas_sgemm from %s", lib->file);
  }
}

/* dlopen()s `file` and looks up cblas_sgemm. On failure appends why to
 * `why` (a message being built) and returns 0. */
static int try_open(const char *file, nimble_blas_lib_t *lib, char *why, size_t why_size) {
  size_t used = strlen(why);
  const char *sep = used ? "; " : "";
  void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(why + used, why_size - used, "%s%s", sep, e ? e : file);
    return 0;
  }
  nimble_cblas_sgemm_fn fn = (nimble_cblas_sgemm_fn)dlsym(h, "cblas_sgemm");
  if (!fn) {
    snprintf(why + used, why_size - used, "%s%s: has no cblas_sgemm", sep, file);
    dlclose(h);
    return 0;
  }
  lib->handle = h;
  lib->sgemm = fn;
  lib->sgemv = (nimble_cblas_sgemv_fn)dlsym(h, "cblas_sgemv");
  snprintf(lib->file, sizeof lib->file, "%s", file);
  describe(lib);
  return 1;
}

nimble_status_t nimble_blas_open(const char *spec, nimble_blas_lib_t *out) {
  memset(out, 0, sizeof *out);
  if (spec && strcmp(spec, "none") == 0)
    return nimble_status_make(NIMBLE_NOT_FOUND, "NIMBLE_BLAS=none: no BLAS wanted");
  char why[1024] = "";
  if (spec && spec[0]) {
    if (try_open(spec, out, why, sizeof why)) return nimble_ok();
    return nimble_status_make(NIMBLE_NOT_FOUND, "NIMBLE_BLAS=%s: %s", spec, why);
  }
  /* OpenBLAS by its own name first: libblas.so.3 may be the reference
   * BLAS, which is correct but several times slower. */
  static const char *const defaults[] = {"libopenblas.so.0", "libblas.so.3"};
  for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
    if (try_open(defaults[i], out, why, sizeof why)) return nimble_ok();
  return nimble_status_make(NIMBLE_NOT_FOUND, "no BLAS found: %s", why);
}

void nimble_blas_close(nimble_blas_lib_t *lib) {
  if (!lib || !lib->handle) return;
  dlclose(lib->handle);
  memset(lib, 0, sizeof *lib);
}

/* ---- The adapter ---------------------------------------------------------- */

/* C = beta * C over an m x n block, beta == 0 clearing (not multiplying, so
 * NaNs in an uninitialised C go away), as BLAS does. */
static void scale_c(int64_t m, int64_t n, float beta, float *c, int64_t ldc) {
  if (beta == 1.0f) return;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
}

/* The definition, for calls no BLAS would take. */
static void plain_sgemm(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, float alpha,
                        const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                        int64_t ldc) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0;
      for (int64_t p = 0; p < k; p++) {
        float x = ta ? a[p * lda + i] : a[i * lda + p];
        float y = tb ? b[j * ldb + p] : b[p * ldb + j];
        acc += (double)x * y;
      }
      float *cij = &c[i * ldc + j];
      *cij = (float)(alpha * acc) + (beta == 0.0f ? 0.0f : beta * *cij);
    }
}

static int64_t max1(int64_t x) { return x > 1 ? x : 1; }
static int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }

void nimble_blas_sgemm_split(nimble_cblas_sgemm_fn fn, int64_t limit, int32_t trans_a, int32_t trans_b,
                             int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                             const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  if (limit > INT32_MAX) limit = INT32_MAX;
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.0f) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
  /* CBLAS row-major rejects a leading dimension below the stored row
   * length (printing to stderr and leaving C alone); one over INT32_MAX
   * does not fit its int, and cutting the product into pieces does not
   * make it smaller. */
  int64_t need_a = max1(trans_a ? m : k), need_b = max1(trans_b ? k : n), need_c = max1(n);
  if (limit < 1 || lda < need_a || ldb < need_b || ldc < need_c || lda > INT32_MAX || ldb > INT32_MAX ||
      ldc > INT32_MAX) {
    plain_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  int ta = trans_a ? CBLAS_TRANS : CBLAS_NO_TRANS, tb = trans_b ? CBLAS_TRANS : CBLAS_NO_TRANS;
  /* Blocks of C, and along k partial products summed into C (beta applies
   * once, on the first). */
  for (int64_t i0 = 0; i0 < m; i0 += limit)
    for (int64_t j0 = 0; j0 < n; j0 += limit)
      for (int64_t p0 = 0; p0 < k; p0 += limit) {
        int64_t mi = min64(limit, m - i0), nj = min64(limit, n - j0), kp = min64(limit, k - p0);
        const float *ab = trans_a ? a + p0 * lda + i0 : a + i0 * lda + p0;
        const float *bb = trans_b ? b + j0 * ldb + p0 : b + p0 * ldb + j0;
        fn(CBLAS_ROW_MAJOR, ta, tb, (int)mi, (int)nj, (int)kp, alpha, ab, (int)lda, bb, (int)ldb,
           p0 == 0 ? beta : 1.0f, c + i0 * ldc + j0, (int)ldc);
      }
}

int nimble_blas_sgemm_as_gemv(nimble_cblas_sgemv_fn fn, int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                              int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                              float beta, float *c, int64_t ldc) {
  if (!fn || (m != 1 && n != 1) || m <= 0 || n <= 0 || k <= 0 || alpha == 0.0f) return 0;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX || ldc > INT32_MAX)
    return 0;
  /* The same leading-dimension rule as sgemm: rows may not overlap. */
  if (lda < max1(trans_a ? m : k) || ldb < max1(trans_b ? k : n) || ldc < max1(n)) return 0;
  /* beta == 0 must clear C even when it holds NaNs: do not leave that to
   * the BLAS's scaling of y. */
  if (beta == 0.0f) scale_c(m, n, 0.0f, c, ldc);
  if (m == 1) {
    /* c[0, :] (unit stride) = alpha * op(B)^T x, x = op(A)'s only row:
     * A[0, p] (A stored [1, k]) or A[p, 0] (stored [k, 1], stride lda). */
    int incx = trans_a ? (int)lda : 1;
    if (trans_b) /* B stored [n, k]: y = B x */
      fn(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, (int)n, (int)k, alpha, b, (int)ldb, a, incx, beta, c, 1);
    else /* B stored [k, n]: y = B^T x */
      fn(CBLAS_ROW_MAJOR, CBLAS_TRANS, (int)k, (int)n, alpha, b, (int)ldb, a, incx, beta, c, 1);
    return 1;
  }
  /* n == 1: c[:, 0] (stride ldc) = alpha * op(A) x, x = op(B)'s only
   * column: B[p, 0] (stored [k, 1], stride ldb) or B[0, p] (stored [1, k]). */
  int incx = trans_b ? 1 : (int)ldb;
  if (trans_a) /* A stored [k, m]: y = A^T x */
    fn(CBLAS_ROW_MAJOR, CBLAS_TRANS, (int)k, (int)m, alpha, a, (int)lda, b, incx, beta, c, (int)ldc);
  else /* A stored [m, k]: y = A x */
    fn(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, (int)m, (int)k, alpha, a, (int)lda, b, incx, beta, c, (int)ldc);
  return 1;
}

/* ---- The process-wide choice ---------------------------------------------- */

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static nimble_blas_lib_t blas_lib;       /* never closed */
static char blas_name[1280];

static void blas_adapter(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                         const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                         int64_t ldc) {
  if (nimble_blas_sgemm_as_gemv(blas_lib.sgemv, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
    return;
  nimble_blas_sgemm_split(blas_lib.sgemm, INT32_MAX, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
                          c, ldc);
}

/* The OpenBLAS kernel set for this CPU by its instruction set, or NULL to
 * leave the choice to OpenBLAS. OpenBLAS 0.3.21 (DYNAMIC_ARCH) picks by
 * CPU model and falls back to its SSE3 "Prescott" kernels on models it
 * does not know (this project's Xeon, family 6 model 207, and Zen 5);
 * those run sgemm 2-4x slower than the AVX2/AVX-512 ones the CPU can
 * execute (docs/vm.md has the measurements). */
static const char *pick_coretype(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return NULL;
}

static void blas_load(void) {
  /* secure_getenv: a set-user-ID program must not dlopen a path its
   * caller chose. */
  const char *spec = secure_getenv("NIMBLE_BLAS");
  /* OpenBLAS reads OPENBLAS_CORETYPE when it is loaded: choose a kernel set
   * by instruction set unless the user chose one (any value, even empty,
   * is theirs). No effect when the process has OpenBLAS loaded already. */
  const char *core = NULL;
  if (!(spec && strcmp(spec, "none") == 0) && !getenv("OPENBLAS_CORETYPE")) {
    core = pick_coretype();
    if (core && setenv("OPENBLAS_CORETYPE", core, 0) != 0) core = NULL;
  }
  /* One OpenBLAS thread, asked for before it loads: OpenBLAS starts its
   * worker threads when loaded, and after openblas_set_num_threads(1)
   * (below) they still spin, yielding, for a while before they sleep. A
   * short-lived process (nimble-run with a few repeats) then shared its
   * second core with an idle OpenBLAS thread for its whole life:
   * mobilenet_v2 at --threads 2 took 10-12 ms in bench/models/run.sh
   * against 5-6 ms alone. Anyone who set the variable keeps their value. */
  int one_thread_set = 0;
  if (!(spec && strcmp(spec, "none") == 0) && !getenv("OPENBLAS_NUM_THREADS"))
    one_thread_set = setenv("OPENBLAS_NUM_THREADS", "1", 0) == 0;
  nimble_status_t s = nimble_blas_open(spec, &blas_lib);
  if (s) {
    snprintf(blas_name, sizeof blas_name, "none (%s)", nimble_status_message(s));
    nimble_status_free(s);
    return;
  }
  /* One OpenBLAS thread. Kernels call sgemm from the VM's threads: from a
   * parallel_for task, or from several VMs at once, and OpenBLAS's own pool
   * would then put its threads on cores the VM's pool already fills. On
   * the 2-core build machine a 256x256x256 sgemm from two callers at once
   * took 0.45 ms each with one OpenBLAS thread and 0.75-3.7 ms with two; a
   * lone 1x784x512 call gained little or nothing from a second thread
   * (docs/vm.md has the table). The setting is process-wide, so whoever
   * sets OPENBLAS_NUM_THREADS keeps what they asked for. */
  openblas_set_num_threads_fn set_threads =
      (openblas_set_num_threads_fn)dlsym(blas_lib.handle, "openblas_set_num_threads");
  const char *want = getenv("OPENBLAS_NUM_THREADS");
  if (set_threads && (one_thread_set || !(want && want[0]))) {
    set_threads(1);
    describe(&blas_lib);
  }
  if (core && dlsym(blas_lib.handle, "openblas_get_config"))
    snprintf(blas_name, sizeof blas_name, "%s [OPENBLAS_CORETYPE=%s set by the runtime]", blas_lib.name, core);
  else
    snprintf(blas_name, sizeof blas_name, "%s", blas_lib.name);
}

/* ---- Own kernels or the BLAS, per call -------------------------------------- */

/* What NIMBLE_SGEMM asked for. */
typedef enum { SGEMM_AUTO, SGEMM_OWN, SGEMM_BLAS, SGEMM_NONE } sgemm_mode;

static pthread_once_t sgemm_once = PTHREAD_ONCE_INIT;
static sgemm_mode mode = SGEMM_AUTO;
static char sgemm_error[1536]; /* why NIMBLE_SGEMM cannot be honoured; "" when it can */
static char sgemm_name[1792];
/* The instruction-set level (nimble_sgemm_isa's order) of the own kernels
 * and of the BLAS's: the faster side wins every call; at a tie the shape
 * decides (own_takes). */
static int own_level, blas_level;

/* How wide the BLAS's kernels are: OpenBLAS names its kernel set
 * (openblas_get_corename); other libraries (the reference BLAS behind
 * libblas.so.3) count as scalar. */
static int blas_isa_level(void) {
  typedef const char *(*corename_fn)(void);
  corename_fn corename = (corename_fn)dlsym(blas_lib.handle, "openblas_get_corename");
  const char *core = corename ? corename() : NULL;
  if (!core) return NIMBLE_SGEMM_ISA_PORTABLE;
  static const char *const avx512[] = {"skylakex", "cooperlake", "sapphirerapids"};
  static const char *const avx2[] = {"haswell", "zen", "skylake"};
  for (size_t i = 0; i < sizeof avx512 / sizeof avx512[0]; i++)
    if (strcasecmp(core, avx512[i]) == 0) return NIMBLE_SGEMM_ISA_AVX512;
  for (size_t i = 0; i < sizeof avx2 / sizeof avx2[0]; i++)
    if (strcasecmp(core, avx2[i]) == 0) return NIMBLE_SGEMM_ISA_AVX2;
#if defined(__aarch64__)
  /* OpenBLAS's arm64 kernels are NEON (or SVE): at least the own portable
   * ones' level, so a tie goes by shape. */
  return NIMBLE_SGEMM_ISA_PORTABLE;
#else
  return NIMBLE_SGEMM_ISA_PORTABLE - 1; /* Prescott, Atom, ...: SSE at best */
#endif
}

/* At equal instruction sets, whether the own kernels take this product.
 * Measured on the AMD EPYC (Zen 5, AVX-512) build machine against OpenBLAS
 * 0.3.21's SkylakeX kernels, one thread, shapes of the reference models
 * (docs/vm.md, "Own sgemm"): the own kernels took 0.7-0.95x OpenBLAS's
 * time on matrix-vector products, on products with B stored [k, n] and at
 * least 256 columns (bert's projections, the convolutions' im2col
 * products), and on those whose constant operand they had packed once (a
 * transposed B: mlp's 64x512x784 0.75x; an A of 64 rows or more:
 * mobilenet_v2's late 1x1 convolutions over 196 and 49 pixels 0.90-0.97x).
 * OpenBLAS was ahead on the rest: a transposed B repacked per call (mlp's
 * 64x512x784 1.17x), a 10-column classifier (2x), cnn's 32x196x144
 * convolution (1.15x), where the own kernels' last partial panel of 32
 * columns is a large share. */
static int own_takes(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, const float *a,
                     int64_t lda, const float *b, int64_t ldb) {
  if (m == 1 || n == 1) return 1;
  if (trans_b) return n >= 16 && nimble_sgemm_own_is_constant(trans_b, b, ldb, k, n);
  if (n >= 256) return 1;
  /* Activations times activations of 128 rows (bert's scores and
   * probabilities times V at seq 128): 0.72-0.77x OpenBLAS's time on the
   * Xeon (AVX-512) CI machine once A's panels were packed by transposes
   * (sgemm_own_kernel.inc); at 64 rows OpenBLAS stays ahead (1.2x). */
  if (!trans_a && m >= 128 && n >= 64 && k >= 64) return 1;
  return m >= 64 && nimble_sgemm_own_is_constant(!trans_a, a, lda, k, m);
}

static nimble_sgemm_fn auto_pick(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k,
                                  const float *a, int64_t lda, const float *b, int64_t ldb) {
  if (own_level > blas_level || (own_level == blas_level && own_takes(trans_a, trans_b, m, n, k, a, lda, b, ldb)))
    return nimble_sgemm_own;
  return blas_adapter;
}

static void auto_sgemm(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                       const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                       int64_t ldc) {
  auto_pick(trans_a, trans_b, m, n, k, a, lda, b, ldb)(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                                                       ldc);
}

static void sgemm_choose(void) {
  pthread_once(&blas_once, blas_load);
  nimble_sgemm_isa isa = nimble_sgemm_own_best_isa();
  own_level = (int)isa;
  blas_level = blas_lib.sgemm ? blas_isa_level() : -1;
  const char *want = getenv("NIMBLE_SGEMM");
  if (!want || !want[0] || strcmp(want, "auto") == 0) mode = SGEMM_AUTO;
  else if (strcmp(want, "own") == 0) mode = SGEMM_OWN;
  else if (strcmp(want, "blas") == 0) mode = SGEMM_BLAS;
  else if (strcmp(want, "none") == 0) mode = SGEMM_NONE;
  else {
    snprintf(sgemm_error, sizeof sgemm_error,
             "NIMBLE_SGEMM=%.64s: expected auto, own, blas or none", want);
    mode = SGEMM_NONE;
  }
  if (mode == SGEMM_BLAS && !blas_lib.sgemm)
    snprintf(sgemm_error, sizeof sgemm_error, "NIMBLE_SGEMM=blas, but there is no BLAS: %s", blas_name);
  const char *own = nimble_sgemm_isa_name(isa);
  switch (mode) {
  case SGEMM_AUTO:
    if (!blas_lib.sgemm)
      snprintf(sgemm_name, sizeof sgemm_name, "own (%s); BLAS: %s", own, blas_name);
    else if (own_level > blas_level)
      snprintf(sgemm_name, sizeof sgemm_name, "own (%s), wider than the BLAS's kernels; BLAS: %s", own, blas_name);
    else if (own_level < blas_level)
      snprintf(sgemm_name, sizeof sgemm_name, "BLAS, wider than the own (%s) kernels; BLAS: %s", own, blas_name);
    else
      snprintf(sgemm_name, sizeof sgemm_name, "own (%s) or BLAS by shape; BLAS: %s", own, blas_name);
    break;
  case SGEMM_OWN: snprintf(sgemm_name, sizeof sgemm_name, "own (%s) [NIMBLE_SGEMM=own]", own); break;
  case SGEMM_BLAS: snprintf(sgemm_name, sizeof sgemm_name, "BLAS [NIMBLE_SGEMM=blas]: %s", blas_name); break;
  case SGEMM_NONE: snprintf(sgemm_name, sizeof sgemm_name, "none [NIMBLE_SGEMM=none]: kernels use their own loops"); break;
  }
}

nimble_sgemm_fn nimble_blas_sgemm(void) {
  pthread_once(&sgemm_once, sgemm_choose);
  if (sgemm_error[0]) return NULL;
  switch (mode) {
  case SGEMM_OWN: return nimble_sgemm_own;
  case SGEMM_BLAS: return blas_adapter;
  case SGEMM_NONE: return NULL;
  default: return blas_lib.sgemm ? auto_sgemm : nimble_sgemm_own;
  }
}

nimble_sgemm_fn nimble_blas_sgemm_pick(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k,
                                       const float *a, int64_t lda, const float *b, int64_t ldb) {
  nimble_sgemm_fn fn = nimble_blas_sgemm();
  return fn == auto_sgemm ? auto_pick(trans_a, trans_b, m, n, k, a, lda, b, ldb) : fn;
}

nimble_status_t nimble_sgemm_check(void) {
  pthread_once(&sgemm_once, sgemm_choose);
  if (sgemm_error[0]) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s", sgemm_error);
  return nimble_ok();
}

const char *nimble_runtime_blas_name(void) {
  pthread_once(&blas_once, blas_load);
  return blas_name;
}

const char *nimble_runtime_sgemm_name(void) {
  pthread_once(&sgemm_once, sgemm_choose);
  return sgemm_error[0] ? sgemm_error : sgemm_name;
}
