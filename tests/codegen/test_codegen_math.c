/* Accuracy of the inline exp, tanh, sigmoid and erf approximations against
 * libm (evaluated in double, then rounded), over a sweep of the whole float
 * range (every 4099th bit pattern, both signs, subnormals, infinities and
 * NaNs) plus special values. The bounds asserted here are the ones written
 * in docs/codegen.md; the suite prints what it measured. Each kernel is
 * also built for x86-64-v4 (the AVX-512 clone nimble compile adds for
 * x86), which must give the very same bits where the CPU runs it. */
#include <float.h>
#include <stdint.h>

#include "codegen_harness.h"
#include "nimble/kernel_abi.h"

static harness_lib lib = {.fd = -1};
static nimble_ln_arena *arena;

static const nimble_ln_op_t ops[] = {NIMBLE_LN_EXP, NIMBLE_LN_TANH, NIMBLE_LN_SIGMOID, NIMBLE_LN_ERF};
static const char *const names[] = {"m_exp", "m_tanh", "m_sigmoid", "m_erf"};
static const char *const wide_names[] = {"m_exp" NIMBLE_KERNEL_AVX512_SUFFIX, "m_tanh" NIMBLE_KERNEL_AVX512_SUFFIX,
                                         "m_sigmoid" NIMBLE_KERNEL_AVX512_SUFFIX, "m_erf" NIMBLE_KERNEL_AVX512_SUFFIX};

static void build(void) {
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&arena));
  const nimble_ln_kernel *ks[8];
  int r = 1;
  for (int i = 0; i < 4; i++) {
    nimble_ln_kernel *k, *w;
    NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(arena, names[i], 1, &r, 1, nimble_codegen_combine_unary,
                                                      (void *)&ops[i], &k));
    NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(arena, wide_names[i], 1, &r, 1, nimble_codegen_combine_unary,
                                                      (void *)&ops[i], &w));
    ck_assert(nimble_ln_kernel_vector_transcendental(k));
    w->isa = NIMBLE_LN_ISA_X86_64_V4;
    ks[i] = k;
    ks[4 + i] = w;
  }
  harness_build_and_load(ks, 8, &lib);
}

/* Whether this CPU runs the x86-64-v4 kernels. */
static int cpu_has_v4(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("x86-64-v4");
}

static void unbuild(void) {
  harness_unload(&lib);
  nimble_ln_arena_destroy(arena);
}

static double ref(int f, double x) {
  switch (f) {
  case 0: return exp(x);
  case 1: return tanh(x);
  case 2: return 1.0 / (1.0 + exp(-x));
  default: return erf(x);
  }
}

/* The distance from got to want in units of the last place of want
 * rounded to float (subnormal spacing below FLT_MIN). */
static double ulp_error(float got, double want) {
  float wf = (float)want;
  if (isinf(wf)) {
    /* Overflow: the exact result rounds to infinity; accept infinity or
     * the largest finite value of the same sign. */
    if (isinf(got) && signbit(got) == signbit(wf)) return 0;
    if (fabsf(got) == FLT_MAX && signbit(got) == signbit(wf)) return 1;
    return INFINITY;
  }
  int e;
  frexp(fabs((double)wf), &e);
  double ulp = fabs((double)wf) < FLT_MIN ? ldexp(1.0, -149) : ldexp(1.0, e - 24);
  return fabs((double)got - want) / ulp;
}

typedef struct stats {
  double max_ulp, at;
  double max_rel, rel_at;
  size_t n;
} stats;

static stats run(int f, const float *in, size_t n) {
  harness_tensor x, y;
  int64_t shape = (int64_t)n;
  unsigned seed = 1;
  harness_tensor_init(&x, 1, &shape, &seed, 0, 0);
  harness_tensor_init(&y, 1, &shape, &seed, 0, 0);
  memcpy(x.f, in, n * sizeof(float));
  harness_env he;
  harness_env_init(&he, 1, 0);
  DLTensor *args[2] = {&x.t, &y.t};
  ck_assert_int_eq(harness_sym(&lib, names[f])(args, 2, &he.env), 0);
  if (cpu_has_v4()) {
    harness_tensor yw;
    harness_tensor_init(&yw, 1, &shape, &seed, 0, 0);
    DLTensor *wargs[2] = {&x.t, &yw.t};
    ck_assert_int_eq(harness_sym(&lib, wide_names[f])(wargs, 2, &he.env), 0);
    for (size_t i = 0; i < n; i++)
      ck_assert_msg(memcmp(&y.f[i], &yw.f[i], sizeof(float)) == 0, "%s(%a): %a, its x86-64-v4 clone %a", names[f],
                    (double)x.f[i], (double)y.f[i], (double)yw.f[i]);
    harness_tensor_deinit(&yw);
  }
  stats s = {0};
  for (size_t i = 0; i < n; i++) {
    double want = ref(f, x.f[i]);
    float got = y.f[i];
    if (isnan(want)) {
      if (!isnan(got)) ck_abort_msg("%s(%a) = %a, want NaN", names[f], (double)x.f[i], (double)got);
      continue;
    }
    if (isnan(got)) ck_abort_msg("%s(%a) = NaN, want %a", names[f], (double)x.f[i], want);
    double u = ulp_error(got, want);
    if (u > s.max_ulp) s.max_ulp = u, s.at = x.f[i];
    double rel = !isinf((float)want) && fabs(want) >= FLT_MIN ? fabs(got - want) / fabs(want) : 0;
    if (rel > s.max_rel) s.max_rel = rel, s.rel_at = x.f[i];
    s.n++;
  }
  harness_tensor_deinit(&x);
  harness_tensor_deinit(&y);
  return s;
}

/* Max ULP bounds per function (measured values plus a margin; see
 * docs/codegen.md). */
static const double ulp_bound[] = {1.5, 2.5, 3.0, 3.0};

START_TEST(test_sweep_of_the_float_range_stays_within_documented_ulp_bounds) {
  int f = _i;
  size_t n = 0;
  float *in = malloc(((size_t)1 << 32) / 4099 * sizeof(float) + 16);
  ck_assert_ptr_nonnull(in);
  for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += 4099) {
    uint32_t bits = (uint32_t)u;
    memcpy(&in[n++], &bits, 4);
  }
  stats s = run(f, in, n);
  printf("%-10s %zu inputs: max %.3f ulp at %a, max rel %.3g at %a\n", names[f], s.n, s.max_ulp, s.at, s.max_rel,
         s.rel_at);
  ck_assert_msg(s.max_ulp <= ulp_bound[f], "%s: %.3f ulp at %a exceeds %.1f", names[f], s.max_ulp, s.at, ulp_bound[f]);
  free(in);
}
END_TEST

START_TEST(test_dense_sweep_of_the_interesting_range_stays_within_bounds) {
  /* Every 97th float with magnitude in [2^-10, 20]: the branch points and
   * the bulk of real activations, about 2.5 million inputs. */
  int f = _i;
  size_t cap = 0;
  uint32_t lo_bits, hi_bits;
  float lo = 0x1p-10f, hi = 20.0f;
  memcpy(&lo_bits, &lo, 4);
  memcpy(&hi_bits, &hi, 4);
  cap = (hi_bits - lo_bits) / 97 * 2 + 4;
  float *in = malloc(cap * sizeof(float));
  size_t n = 0;
  for (uint32_t b = lo_bits; b <= hi_bits && n + 2 <= cap; b += 97) {
    float v;
    memcpy(&v, &b, 4);
    in[n++] = v;
    in[n++] = -v;
  }
  stats s = run(f, in, n);
  printf("%-10s %zu inputs in [-20, 20]: max %.3f ulp at %a\n", names[f], s.n, s.max_ulp, s.at);
  ck_assert_msg(s.max_ulp <= ulp_bound[f], "%s: %.3f ulp at %a exceeds %.1f", names[f], s.max_ulp, s.at, ulp_bound[f]);
  free(in);
}
END_TEST

START_TEST(test_special_values_follow_libm) {
  int f = _i;
  const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MIN, -FLT_MIN, 1e-45f, -1e-45f,
                      FLT_MAX, -FLT_MAX, 88.72f, 88.73f, 89.0f, -87.33f, -103.9f, -104.0f, -150.0f, 1e-20f,
                      0.25f, -0.25f, 0.5f, -0.5f, 0.2499999f, 0.4999999f, 4.0f, 9.0f, 10.0f, -10.0f};
  const size_t n = sizeof sp / sizeof sp[0];
  stats s = run(f, sp, n);
  ck_assert_msg(s.max_ulp <= ulp_bound[f], "%s: %.3f ulp at %a", names[f], s.max_ulp, s.at);
  /* Signs of zero are kept where libm keeps them. */
  harness_tensor x, y;
  int64_t two = 2;
  unsigned seed = 0;
  harness_tensor_init(&x, 1, &two, &seed, 0, 0);
  harness_tensor_init(&y, 1, &two, &seed, 0, 0);
  x.f[0] = 0.0f;
  x.f[1] = -0.0f;
  harness_env he;
  harness_env_init(&he, 0, 0);
  DLTensor *args[2] = {&x.t, &y.t};
  ck_assert_int_eq(harness_sym(&lib, names[f])(args, 2, &he.env), 0);
  float want1 = (float)ref(f, -0.0);
  ck_assert_int_eq(signbit(y.f[1]) != 0, signbit(want1) != 0);
  ck_assert_float_eq((float)ref(f, 0.0), y.f[0]);
  harness_tensor_deinit(&x);
  harness_tensor_deinit(&y);
}
END_TEST

int main(void) {
  if (!cpu_has_v4()) printf("skipped: the x86-64-v4 clones' runs (this CPU has no x86-64-v4)\n");
  Suite *s = suite_create("codegen_math");
  TCase *tc = tcase_create("accuracy");
  tcase_add_unchecked_fixture(tc, build, unbuild);
  tcase_set_timeout(tc, 240);
  tcase_add_loop_test(tc, test_sweep_of_the_float_range_stays_within_documented_ulp_bounds, 0, 4);
  tcase_add_loop_test(tc, test_dense_sweep_of_the_interesting_range_stays_within_bounds, 0, 4);
  tcase_add_loop_test(tc, test_special_values_follow_libm, 0, 4);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
