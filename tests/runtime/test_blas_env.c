/* The kernel environment's sgemm: a BLAS found at run time (runtime/src/vm/
 * blas_loader.c) or the runtime's own kernels (vm/sgemm_own.h, tested on
 * their own in test_sgemm_own), checked against a triple loop written here;
 * the ways of having no BLAS (NIMBLE_BLAS=none, a library that is missing
 * or has no cblas_sgemm), which leave the own kernels in the slot and fail
 * nothing; and NIMBLE_SGEMM, which picks one side or none and makes VM
 * creation fail, saying why, when it cannot be honoured.
 *
 * Two ctest entries run this program: without arguments, the cases that
 * hold with or without a BLAS; with "needs-blas", the ones that call a
 * real BLAS, which exit 77 (ctest: skipped) saying "skipped: no BLAS" when
 * none can be opened, as under qemu-aarch64 with no arm64 OpenBLAS.
 *
 * The loader decides once per process, so cases that set NIMBLE_BLAS do it
 * in a child process of their own that has not loaded anything yet. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_test_util.h"
#include "vm/blas_loader.h"
#include "vm/sgemm_own.h"
#include "vm/sgemm_threads.h"
#include "vm/vm.h"

/* ---- Helpers -------------------------------------------------------------- */

/* main(a0) -> a0: the smallest program a VM can be made for. */
static nimble_vm *identity_vm(uint32_t threads) {
  nimble_executable_builder *b = rt_builder();
  uint32_t f = rt_function(b, "main", 1, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  rt_add_scalar_entry(b, "main", f, 1);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm_options_t o;
  nimble_vm_options_init(&o);
  o.num_threads = threads;
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, &o, &vm));
  nimble_executable_release(exe);
  return vm;
}

/* The reference: C = alpha * op(A) * op(B) + beta * C, row-major, in
 * double. bound[i*ldc+j] gets the sum of the terms' magnitudes, which sets
 * the tolerance. */
static void ref_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                      int64_t lda, const float *b, int64_t ldb, float beta, const float *c_in,
                      int64_t ldc, double *want, double *bound) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0, mag = 0;
      for (int64_t p = 0; p < k; p++) {
        double x = ta ? a[p * lda + i] : a[i * lda + p];
        double y = tb ? b[j * ldb + p] : b[p * ldb + j];
        acc += x * y;
        mag += fabs(x * y);
      }
      double cin = beta == 0.0f ? 0.0 : (double)beta * c_in[i * ldc + j];
      want[i * ldc + j] = alpha * acc + cin;
      bound[i * ldc + j] = fabs((double)alpha) * mag + fabs(cin);
    }
}

/* What is under test: the environment's sgemm, or the split adapter over a
 * CBLAS function with a small limit. */
typedef struct gemm_target {
  nimble_sgemm_fn env_sgemm;
  nimble_cblas_sgemm_fn cblas;
  int64_t limit;
} gemm_target;

static void run_target(const gemm_target *t, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                       int64_t ldc) {
  if (t->env_sgemm)
    t->env_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    nimble_blas_sgemm_split(t->cblas, t->limit, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* One case: operands stored with `pad` extra columns per row (so leading
 * dimensions exceed the row length), C's padding filled with a sentinel
 * that must survive. A negative pad makes the rows of A and B overlap
 * (C keeps its row length). beta == 0 starts C as NaN, which must not
 * leak. */
static void check_case(const gemm_target *t, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                       float beta, int64_t pad, uint32_t seed) {
  int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + (pad > 0 ? pad : 0);
  if (lda < 1) lda = 1;
  if (ldb < 1) ldb = 1;
  if (ldc < 1) ldc = 1;
  size_t na = (size_t)(a_rows * lda) + 1, nb = (size_t)(b_rows * ldb) + 1, nc = (size_t)(m * ldc) + 1;
  float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = malloc(nc * sizeof *c),
        *c0 = malloc(nc * sizeof *c0);
  double *want = calloc(nc, sizeof *want), *bound = calloc(nc, sizeof *bound);
  ck_assert(a && b && c && c0 && want && bound);
  for (size_t i = 0; i < na; i++) a[i] = nimble_test_uniform(&seed);
  for (size_t i = 0; i < nb; i++) b[i] = nimble_test_uniform(&seed);
  const float sentinel = 12345.0f;
  for (size_t i = 0; i < nc; i++) c[i] = sentinel;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0.0f ? NAN : nimble_test_uniform(&seed);
  memcpy(c0, c, nc * sizeof *c);
  ref_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0, ldc, want, bound);
  run_target(t, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < ldc; j++) {
      size_t at = (size_t)(i * ldc + j);
      if (j >= n) {
        ck_assert_msg(c[at] == sentinel, "ta=%d tb=%d m=%lld n=%lld k=%lld: padding C[%lld][%lld] changed to %g",
                      ta, tb, (long long)m, (long long)n, (long long)k, (long long)i, (long long)j,
                      (double)c[at]);
        continue;
      }
      double tol = 1e-5 * bound[at] + 1e-6;
      ck_assert_msg(fabs((double)c[at] - want[at]) <= tol,
                    "ta=%d tb=%d m=%lld n=%lld k=%lld alpha=%g beta=%g pad=%lld: C[%lld][%lld] = %.9g, want %.9g",
                    ta, tb, (long long)m, (long long)n, (long long)k, (double)alpha, (double)beta,
                    (long long)pad, (long long)i, (long long)j, (double)c[at], want[at]);
    }
  ck_assert_msg(c[nc - 1] == sentinel, "C written past its last row");
  free(a);
  free(b);
  free(c);
  free(c0);
  free(want);
  free(bound);
}

static const int64_t shapes[][3] = {{1, 1, 1}, {2, 3, 4},   {5, 1, 7},   {1, 784, 512},
                                    {37, 30, 129}, {64, 64, 64}, {17, 33, 1}, {3, 2, 300}};

/* Every shape, every transpose combination, three (alpha, beta) pairs and
 * two paddings. */
static void check_all(const gemm_target *t) {
  static const float ab[][2] = {{1.0f, 0.0f}, {0.5f, 2.0f}, {-1.5f, 0.25f}};
  uint32_t seed = 7;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++)
        for (size_t p = 0; p < 3; p++)
          check_case(t, ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], ab[p][0], ab[p][1],
                     (int64_t)(p % 2) * 3, seed++);
}

/* A CBLAS that must not be reached. */
static void unreachable_cblas(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                              const float *a, int lda, const float *b, int ldb, float beta, float *c,
                              int ldc) {
  ck_abort_msg("BLAS called for m=%d n=%d k=%d lda=%d ldb=%d ldc=%d", m, n, k, lda, ldb, ldc);
}

/* Runs body() in a fresh child process with NIMBLE_BLAS set to `spec`
 * (unset when NULL); body writes an empty string on success or what went
 * wrong. Assumes this process has not loaded a BLAS yet (each case runs in
 * its own process under Check's default fork mode). */
static void in_child_sgemm(const char *spec, const char *sgemm, void (*body)(char *msg, size_t size));

static void in_child(const char *spec, void (*body)(char *msg, size_t size)) { in_child_sgemm(spec, NULL, body); }

/* The same with NIMBLE_SGEMM set to `sgemm` (unset when NULL). */
static void in_child_sgemm(const char *spec, const char *sgemm, void (*body)(char *msg, size_t size)) {
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    if (spec)
      setenv("NIMBLE_BLAS", spec, 1);
    else
      unsetenv("NIMBLE_BLAS");
    if (sgemm)
      setenv("NIMBLE_SGEMM", sgemm, 1);
    else
      unsetenv("NIMBLE_SGEMM");
    char msg[2048] = "";
    body(msg, sizeof msg);
    ssize_t w = write(fds[1], msg, strlen(msg));
    _exit(w == (ssize_t)strlen(msg) ? 0 : 3);
  }
  close(fds[1]);
  char msg[2048];
  size_t got = 0;
  ssize_t r;
  while (got < sizeof msg - 1 && (r = read(fds[0], msg + got, sizeof msg - 1 - got)) > 0) got += (size_t)r;
  msg[got] = '\0';
  close(fds[0]);
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child ended with status %d", status);
  ck_assert_msg(msg[0] == '\0', "NIMBLE_BLAS=%s NIMBLE_SGEMM=%s: %s", spec ? spec : "(unset)",
                sgemm ? sgemm : "(unset)", msg);
}

/* The VM is made without Check's asserts (they belong to the parent). */
static nimble_vm *child_vm(char *msg, size_t size) {
  nimble_executable_builder *b;
  size_t n;
  const void *k = rt_kernels(&n);
  nimble_status_t s = nimble_builder_create("test", &b);
  if (!s) s = nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CPU, k, n);
  uint32_t f = 0;
  if (!s) s = nimble_builder_add_function(b, "main", 1, 1, &f);
  if (!s) s = NIMBLE_BUILDER_EMIT(b, f, NIMBLE_OP_RET, 0);
  nimble_tensor_info_t in = rt_info("a0", RT_I64, 0, NULL, NULL), out = rt_info("out", RT_I64, 0, NULL, NULL);
  if (!s) s = nimble_builder_add_entry(b, "main", f, &in, 1, &out, 1);
  rt_info_free(&in);
  rt_info_free(&out);
  void *data = NULL;
  size_t size_bytes = 0;
  if (!s) s = nimble_builder_serialize(b, &data, &size_bytes);
  nimble_builder_destroy(b);
  nimble_executable *exe = NULL;
  if (!s) s = nimble_executable_load_memory(data, size_bytes, 0, &exe);
  free(data);
  nimble_vm *vm = NULL;
  if (!s) s = nimble_vm_create(exe, NULL, &vm);
  nimble_executable_release(exe);
  if (s) {
    snprintf(msg, size, "making a VM: %s", nimble_status_message(s));
    nimble_status_free(s);
    return NULL;
  }
  return vm;
}

/* ---- Cases that hold with or without a BLAS ------------------------------ */

/* With no BLAS, the slot holds the own kernels and the names say so. */
static void expect_own_without_blas(const char *blas_name, int prefix_only, char *msg, size_t size) {
  nimble_vm *vm = child_vm(msg, size);
  if (!vm) return;
  const char *name = nimble_runtime_blas_name(), *sg = nimble_runtime_sgemm_name();
  char want_sg[512];
  snprintf(want_sg, sizeof want_sg, "own (%s); BLAS: none (", nimble_sgemm_isa_name(nimble_sgemm_own_best_isa()));
  if (vm->env.sgemm != nimble_sgemm_threads || nimble_blas_sgemm() != nimble_sgemm_own)
    snprintf(msg, size, "env->sgemm is not the own sgemm (%s)", sg);
  else if (prefix_only ? strncmp(name, blas_name, strlen(blas_name)) != 0 : strcmp(name, blas_name) != 0)
    snprintf(msg, size, "nimble_runtime_blas_name() = '%s', want '%s'", name, blas_name);
  else if (strncmp(sg, want_sg, strlen(want_sg)) != 0)
    snprintf(msg, size, "nimble_runtime_sgemm_name() = '%s', want it to start '%s'", sg, want_sg);
  nimble_vm_destroy(vm);
}

static void body_none(char *msg, size_t size) {
  expect_own_without_blas("none (NIMBLE_BLAS=none: no BLAS wanted)", 0, msg, size);
}

START_TEST(test_nimble_blas_none_leaves_the_own_kernels_in_the_slot) { in_child("none", body_none); }
END_TEST

static void body_missing(char *msg, size_t size) {
  expect_own_without_blas("none (NIMBLE_BLAS=/nonexistent/libnoblas.so: /nonexistent/libnoblas.so", 1, msg, size);
}

START_TEST(test_a_missing_library_named_by_nimble_blas_leaves_the_own_kernels) {
  in_child("/nonexistent/libnoblas.so", body_missing);
}
END_TEST

static void body_no_cblas(char *msg, size_t size) {
  expect_own_without_blas("none (NIMBLE_BLAS=libm.so.6: libm.so.6: has no cblas_sgemm)", 0, msg, size);
}

START_TEST(test_a_library_without_cblas_sgemm_leaves_the_own_kernels) {
  in_child("libm.so.6", body_no_cblas);
}
END_TEST

static void body_sgemm_none(char *msg, size_t size) {
  nimble_vm *vm = child_vm(msg, size);
  if (!vm) return;
  const char *sg = nimble_runtime_sgemm_name();
  if (vm->env.sgemm)
    snprintf(msg, size, "env->sgemm is set (%s)", sg);
  else if (strcmp(sg, "none [NIMBLE_SGEMM=none]: kernels use their own loops") != 0)
    snprintf(msg, size, "nimble_runtime_sgemm_name() = '%s'", sg);
  nimble_vm_destroy(vm);
}

START_TEST(test_nimble_sgemm_none_leaves_the_slot_empty) { in_child_sgemm(NULL, "none", body_sgemm_none); }
END_TEST

static void body_sgemm_own(char *msg, size_t size) {
  nimble_vm *vm = child_vm(msg, size);
  if (!vm) return;
  if (vm->env.sgemm != nimble_sgemm_threads || nimble_blas_sgemm() != nimble_sgemm_own)
    snprintf(msg, size, "env->sgemm is not the own sgemm (%s)", nimble_runtime_sgemm_name());
  nimble_vm_destroy(vm);
}

START_TEST(test_nimble_sgemm_own_puts_the_own_kernels_in_the_slot) {
  in_child_sgemm(NULL, "own", body_sgemm_own);
}
END_TEST

/* VM creation must fail with exactly `want`. */
static void expect_vm_refused(const char *want, char *msg, size_t size) {
  char got[1024] = "";
  nimble_vm *vm = child_vm(got, sizeof got);
  if (vm) {
    snprintf(msg, size, "the VM was made (sgemm: %s)", nimble_runtime_sgemm_name());
    nimble_vm_destroy(vm);
  } else if (strcmp(got, want) != 0) {
    snprintf(msg, size, "got '%s', want '%s'", got, want);
  }
}

static void body_sgemm_blas_without_blas(char *msg, size_t size) {
  expect_vm_refused("making a VM: NIMBLE_SGEMM=blas, but there is no BLAS: none (NIMBLE_BLAS=none: no BLAS wanted)",
                    msg, size);
}

START_TEST(test_nimble_sgemm_blas_without_a_blas_refuses_to_make_a_vm) {
  in_child_sgemm("none", "blas", body_sgemm_blas_without_blas);
}
END_TEST

static void body_sgemm_unknown(char *msg, size_t size) {
  expect_vm_refused("making a VM: NIMBLE_SGEMM=fastest: expected auto, own, blas or none", msg, size);
}

START_TEST(test_an_unknown_nimble_sgemm_refuses_to_make_a_vm) {
  in_child_sgemm(NULL, "fastest", body_sgemm_unknown);
}
END_TEST

START_TEST(test_opening_a_library_without_cblas_sgemm_is_refused) {
  nimble_blas_lib_t lib;
  NIMBLE_ASSERT_ERROR(nimble_blas_open("libm.so.6", &lib), NIMBLE_NOT_FOUND,
                      "NIMBLE_BLAS=libm.so.6: libm.so.6: has no cblas_sgemm");
  ck_assert_ptr_null(lib.handle);
  NIMBLE_ASSERT_ERROR(nimble_blas_open("none", &lib), NIMBLE_NOT_FOUND, "NIMBLE_BLAS=none");
  NIMBLE_ASSERT_ERROR(nimble_blas_open("/nonexistent/libnoblas.so", &lib), NIMBLE_NOT_FOUND,
                      "NIMBLE_BLAS=/nonexistent/libnoblas.so: /nonexistent/libnoblas.so");
  nimble_blas_close(&lib); /* an empty lib is fine */
  nimble_blas_close(NULL);
}
END_TEST

START_TEST(test_blas_name_agrees_with_the_environment) {
  nimble_vm *vm = identity_vm(1);
  const char *name = nimble_runtime_blas_name();
  ck_assert_ptr_nonnull(name);
  ck_assert_msg(name[0], "empty BLAS name");
  /* The own kernels at least, BLAS or not (NIMBLE_SGEMM is unset here). */
  ck_assert_msg(vm->env.sgemm != NULL, "no sgemm: %s", nimble_runtime_sgemm_name());
  ck_assert_msg(strstr(nimble_runtime_sgemm_name(), name) != NULL, "sgemm name '%s' lacks the BLAS's '%s'",
                nimble_runtime_sgemm_name(), name);
  /* Every VM gets the same choice. */
  nimble_vm *vm2 = identity_vm(2);
  ck_assert(vm2->env.sgemm == vm->env.sgemm);
  /* And having none fails nothing: the VM runs. */
  int64_t x = 42;
  ck_assert_int_eq(rt_run_i64(vm, "main", &x, 1), 42);
  nimble_vm_destroy(vm2);
  nimble_vm_destroy(vm);
}
END_TEST

START_TEST(test_empty_products_only_scale_c_by_beta) {
  gemm_target t = {NULL, unreachable_cblas, INT32_MAX};
  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  /* k = 0: C = beta * C. */
  float c[4] = {1, -2, 3, -4};
  run_target(&t, 0, 0, 2, 2, 0, 1.0f, a, 1, b, 2, 2.0f, c, 2);
  ck_assert(c[0] == 2 && c[1] == -4 && c[2] == 6 && c[3] == -8);
  /* alpha = 0: the same, A and B unread. */
  run_target(&t, 1, 1, 2, 2, 2, 0.0f, a, 2, b, 2, 0.5f, c, 2);
  ck_assert(c[0] == 1 && c[1] == -2 && c[2] == 3 && c[3] == -4);
  /* beta = 0 clears, NaN included. */
  float cn[4] = {NAN, NAN, 7, NAN};
  run_target(&t, 0, 0, 2, 1, 0, 1.0f, a, 1, b, 1, 0.0f, cn, 2);
  ck_assert(cn[0] == 0 && isnan(cn[1]) && cn[2] == 0 && isnan(cn[3]));
  /* m = 0 or n = 0: nothing. */
  float cz[1] = {9};
  run_target(&t, 0, 0, 0, 1, 2, 1.0f, a, 2, b, 1, 0.0f, cz, 1);
  run_target(&t, 0, 0, 1, 0, 2, 1.0f, a, 2, b, 1, 0.0f, cz, 1);
  ck_assert(cz[0] == 9);
}
END_TEST

START_TEST(test_leading_dimensions_blas_would_refuse_are_computed_here) {
  gemm_target t = {NULL, unreachable_cblas, INT32_MAX};
  /* Over INT32_MAX, which CBLAS's int cannot hold: with one row of A (and
   * of C) the leading dimension is never used to address, so the case fits
   * in memory. op(A) = [1 2 3], B = [[1,0],[0,1],[1,1]]: C = [4 5]. */
  float a1[3] = {1, 2, 3}, b1[6] = {1, 0, 0, 1, 1, 1}, c1[2] = {-1, -1};
  int64_t huge = (int64_t)INT32_MAX + 5;
  run_target(&t, 0, 0, 1, 2, 3, 1.0f, a1, huge, b1, 2, 0.0f, c1, huge);
  ck_assert_msg(c1[0] == 4 && c1[1] == 5, "C = [%g %g], want [4 5]", (double)c1[0], (double)c1[1]);
  /* A huge ldb with B transposed and one row of it (n = 1):
   * A = [[1,0,0],[0,1,0]], op(B) = [1 2 3]^T, alpha 2: C = [2 4]^T. */
  float a2[6] = {1, 0, 0, 0, 1, 0}, b2[3] = {1, 2, 3}, c2[2] = {0, 0};
  run_target(&t, 0, 1, 2, 1, 3, 2.0f, a2, 3, b2, huge, 0.0f, c2, 1);
  ck_assert_msg(c2[0] == 2 && c2[1] == 4, "C = [%g %g], want [2 4]", (double)c2[0], (double)c2[1]);
  /* Below the row length: rows of A overlap (lda 2 for 2x3), which CBLAS
   * rejects; the definition still says what C is. A = [[1,2,3],[3,4,5]]
   * over storage {1,2,3,4,5}; B = I(3) * 2. */
  float a[5] = {1, 2, 3, 4, 5}, b[9] = {2, 0, 0, 0, 2, 0, 0, 0, 2}, c[6] = {0};
  run_target(&t, 0, 0, 2, 3, 3, 1.0f, a, 2, b, 3, 0.0f, c, 3);
  static const float want[6] = {2, 4, 6, 6, 8, 10};
  for (int i = 0; i < 6; i++) ck_assert_msg(c[i] == want[i], "c[%d] = %g, want %g", i, (double)c[i], (double)want[i]);
  /* Every transpose combination with overlapping rows of A and B. */
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) check_case(&t, ta, tb, 3, 4, 5, 0.75f, 0.5f, -1, 11u + (uint32_t)(ta * 2 + tb));
}
END_TEST

/* ---- Cases that need a BLAS ---------------------------------------------- */

START_TEST(test_environment_sgemm_matches_a_triple_loop_for_every_transpose) {
  nimble_vm *vm = identity_vm(2);
  ck_assert_msg(vm->env.sgemm != NULL, "no sgemm: %s", nimble_runtime_blas_name());
  gemm_target t = {vm->env.sgemm, NULL, 0};
  check_all(&t);
  nimble_vm_destroy(vm);
}
END_TEST

START_TEST(test_calls_split_to_fit_blas_ints_match_the_triple_loop) {
  /* The adapter cuts m, n and k at INT32_MAX; the same code cut at 3 and
   * at 7 must still give the one product (k pieces add into C, beta
   * applied once). */
  nimble_blas_lib_t lib;
  NIMBLE_ASSERT_OK(nimble_blas_open(getenv("NIMBLE_BLAS"), &lib));
  static const int64_t cut[][3] = {{7, 9, 8}, {10, 3, 20}, {1, 17, 6}};
  for (int64_t limit = 3; limit <= 7; limit += 4) {
    gemm_target t = {NULL, lib.sgemm, limit};
    for (size_t s = 0; s < 3; s++)
      for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
          check_case(&t, ta, tb, cut[s][0], cut[s][1], cut[s][2], 1.25f, 0.0f, 0, 100u + (uint32_t)s);
          check_case(&t, ta, tb, cut[s][0], cut[s][1], cut[s][2], -0.5f, 1.5f, 2, 200u + (uint32_t)s);
        }
  }
  nimble_blas_close(&lib);
}
END_TEST

typedef struct thread_case {
  uint32_t seed;
  nimble_sgemm_fn seen;
  int failed;
  char msg[256];
} thread_case;

/* Each thread makes its own VM (the first ones race to load the BLAS) and
 * multiplies through it. */
static void *thread_body(void *p) {
  thread_case *tc = p;
  char msg[2048] = "";
  nimble_vm *vm = child_vm(msg, sizeof msg);
  if (!vm) {
    tc->failed = 1;
    snprintf(tc->msg, sizeof tc->msg, "%s", msg);
    return NULL;
  }
  tc->seen = vm->env.sgemm;
  enum { M = 24, N = 40, K = 33 };
  float a[M * K], b[K * N], c[M * N];
  for (int i = 0; i < M * K; i++) a[i] = nimble_test_uniform(&tc->seed);
  for (int i = 0; i < K * N; i++) b[i] = nimble_test_uniform(&tc->seed);
  for (int rep = 0; rep < 20 && tc->seen && !tc->failed; rep++) {
    tc->seen(0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
    for (int i = 0; i < M && !tc->failed; i++)
      for (int j = 0; j < N; j++) {
        double acc = 0, mag = 0;
        for (int p = 0; p < K; p++) acc += (double)a[i * K + p] * b[p * N + j], mag += fabs((double)a[i * K + p] * b[p * N + j]);
        if (fabs(c[i * N + j] - acc) > 1e-5 * mag + 1e-6) {
          tc->failed = 1;
          snprintf(tc->msg, sizeof tc->msg, "C[%d][%d] = %g, want %g", i, j, (double)c[i * N + j], acc);
          break;
        }
      }
  }
  nimble_vm_destroy(vm);
  return NULL;
}

START_TEST(test_vms_on_many_threads_share_one_loaded_sgemm) {
  enum { T = 8 };
  pthread_t th[T];
  thread_case tc[T];
  memset(tc, 0, sizeof tc);
  size_t n;
  rt_kernels(&n); /* read once here: rt_kernels() caches without a lock */
  for (int i = 0; i < T; i++) {
    tc[i].seed = 1000u + (uint32_t)i;
    ck_assert_int_eq(pthread_create(&th[i], NULL, thread_body, &tc[i]), 0);
  }
  for (int i = 0; i < T; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
  for (int i = 0; i < T; i++) {
    ck_assert_msg(!tc[i].failed, "thread %d: %s", i, tc[i].msg);
    ck_assert_msg(tc[i].seen != NULL, "thread %d saw no sgemm: %s", i, nimble_runtime_blas_name());
    ck_assert(tc[i].seen == tc[0].seen);
  }
}
END_TEST

typedef int (*get_threads_fn)(void);

START_TEST(test_loaded_openblas_runs_on_one_thread_and_says_so) {
  nimble_vm *vm = identity_vm(1);
  const char *name = nimble_runtime_blas_name();
  ck_assert_msg(vm->env.sgemm != NULL, "no sgemm: %s", name);
  /* The same library, opened again (dlopen counts references), to ask
   * OpenBLAS itself. */
  nimble_blas_lib_t lib;
  NIMBLE_ASSERT_OK(nimble_blas_open(getenv("NIMBLE_BLAS"), &lib));
  get_threads_fn threads = (get_threads_fn)dlsym(lib.handle, "openblas_get_num_threads");
  const char *user = getenv("OPENBLAS_NUM_THREADS");
  if (threads && !(user && user[0])) {
    ck_assert_int_eq(threads(), 1);
    ck_assert_msg(strstr(name, "OpenBLAS") && strstr(name, ", 1 thread)"), "name '%s'", name);
  } else if (!threads) {
    ck_assert_msg(strncmp(name, "cblas_sgemm from ", 17) == 0, "name '%s'", name);
  }
  ck_assert_msg(strstr(name, lib.file) != NULL, "name '%s' lacks '%s'", name, lib.file);
  nimble_blas_close(&lib);
  nimble_vm_destroy(vm);
}
END_TEST

static void body_libblas(char *msg, size_t size) {
  nimble_vm *vm = child_vm(msg, size);
  if (!vm) return;
  const char *name = nimble_runtime_blas_name();
  if (!vm->env.sgemm || !strstr(name, "libblas.so.3")) {
    snprintf(msg, size, "sgemm %s, name '%s'", vm->env.sgemm ? "set" : "NULL", name);
  } else {
    /* [[1,2],[3,4]] * [[5,6],[7,8]]^T = [[17,23],[39,53]], + 1 * C. */
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {1, 1, 1, 1};
    vm->env.sgemm(0, 1, 2, 2, 2, 1.0f, a, 2, b, 2, 1.0f, c, 2);
    if (c[0] != 18 || c[1] != 24 || c[2] != 40 || c[3] != 54)
      snprintf(msg, size, "C = [%g %g; %g %g], want [18 24; 40 54]", (double)c[0], (double)c[1], (double)c[2],
               (double)c[3]);
  }
  nimble_vm_destroy(vm);
}

START_TEST(test_library_named_by_nimble_blas_is_the_one_used) {
  nimble_blas_lib_t lib;
  /* Debian's OpenBLAS provides libblas.so.3 (update-alternatives), so
   * wherever this suite found a BLAS it is there too. */
  nimble_status_t s = nimble_blas_open("libblas.so.3", &lib);
  ck_assert_msg(s == NULL, "libblas.so.3 does not open (%s); the BLAS this suite found should provide it",
                s ? nimble_status_message(s) : "");
  nimble_blas_close(&lib);
  in_child("libblas.so.3", body_libblas);
}
END_TEST

int main(int argc, char **argv) {
  int needs_blas = argc > 1 && strcmp(argv[1], "needs-blas") == 0;
  if (needs_blas) {
    /* Asked without making the process-wide choice, so the cases below
     * start from a fresh one. */
    nimble_blas_lib_t lib;
    nimble_status_t st = nimble_blas_open(getenv("NIMBLE_BLAS"), &lib);
    if (st) {
      printf("test_blas_env: skipped: no BLAS (%s)\n", nimble_status_message(st));
      nimble_status_free(st);
      return 77;
    }
    printf("test_blas_env: BLAS %s\n", lib.name);
    nimble_blas_close(&lib);
  }
  Suite *s = suite_create("blas_env");
  TCase *tc = tcase_create(needs_blas ? "needs_blas" : "any_blas");
  tcase_set_timeout(tc, 120);
  if (needs_blas) {
    tcase_add_test(tc, test_environment_sgemm_matches_a_triple_loop_for_every_transpose);
    tcase_add_test(tc, test_calls_split_to_fit_blas_ints_match_the_triple_loop);
    tcase_add_test(tc, test_vms_on_many_threads_share_one_loaded_sgemm);
    tcase_add_test(tc, test_loaded_openblas_runs_on_one_thread_and_says_so);
    tcase_add_test(tc, test_library_named_by_nimble_blas_is_the_one_used);
  } else {
    /* The child-process cases first: under CK_FORK=no they need a process
     * that has not loaded a BLAS yet. */
    tcase_add_test(tc, test_nimble_blas_none_leaves_the_own_kernels_in_the_slot);
    tcase_add_test(tc, test_a_missing_library_named_by_nimble_blas_leaves_the_own_kernels);
    tcase_add_test(tc, test_a_library_without_cblas_sgemm_leaves_the_own_kernels);
    tcase_add_test(tc, test_nimble_sgemm_none_leaves_the_slot_empty);
    tcase_add_test(tc, test_nimble_sgemm_own_puts_the_own_kernels_in_the_slot);
    tcase_add_test(tc, test_nimble_sgemm_blas_without_a_blas_refuses_to_make_a_vm);
    tcase_add_test(tc, test_an_unknown_nimble_sgemm_refuses_to_make_a_vm);
    tcase_add_test(tc, test_opening_a_library_without_cblas_sgemm_is_refused);
    tcase_add_test(tc, test_blas_name_agrees_with_the_environment);
    tcase_add_test(tc, test_empty_products_only_scale_c_by_beta);
    tcase_add_test(tc, test_leading_dimensions_blas_would_refuse_are_computed_here);
  }
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
