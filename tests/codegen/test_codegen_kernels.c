/* Generated kernels, compiled for x86_64, linked with ld.lld, loaded from a
 * memfd and run against plain C references on several shapes (extents that
 * are not multiples of the vector width, size-1 broadcast axes, zero-size
 * tensors), with parallel loops on pthreads, and their argument checks. */
#include <stdint.h>

#include "codegen_harness.h"

static nimble_ln_arena *arena;
static harness_lib lib = {.fd = -1};

/* x * sigmoid(1.702 x) where x > 0, else 0.1 x: exercises select,
 * comparisons, constants and an approximation inside one combine. */
static nimble_ln_expr *odd_combine(nimble_ln_arena *A, nimble_ln_expr *const *in, void *user) {
  nimble_ln_expr *x = in[0];
  nimble_ln_expr *pos = nimble_ln_binary(
      A, NIMBLE_LN_MUL, x, nimble_ln_unary(A, NIMBLE_LN_SIGMOID, nimble_ln_binary(A, NIMBLE_LN_MUL, x, nimble_ln_f32(A, 1.702))));
  nimble_ln_expr *neg = nimble_ln_binary(A, NIMBLE_LN_MUL, x, nimble_ln_f32(A, 0.1));
  return nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_GT, x, nimble_ln_f32(A, 0)), pos, neg);
}

static const nimble_ln_op_t unary_ops[] = {NIMBLE_LN_EXP, NIMBLE_LN_TANH, NIMBLE_LN_SIGMOID, NIMBLE_LN_ERF,
                                           NIMBLE_LN_SQRT, NIMBLE_LN_LOG, NIMBLE_LN_ABS, NIMBLE_LN_NEG};
static const char *const unary_names[] = {"u_exp", "u_tanh", "u_sigmoid", "u_erf", "u_sqrt", "u_log", "u_abs", "u_neg"};
enum { N_UNARY = 8 };
static const nimble_ln_op_t add_op = NIMBLE_LN_ADD;

static void build_all(void) {
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&arena));
  const nimble_ln_kernel *ks[32];
  size_t n = 0;
  nimble_ln_kernel *k;
  int r32[2] = {3, 2};
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(arena, "badd", 2, r32, 3, nimble_codegen_combine_binary,
                                                    (void *)&add_op, &k));
  ks[n++] = k;
  int r1 = 1;
  for (int i = 0; i < N_UNARY; i++) {
    NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(arena, unary_names[i], 1, &r1, 1, nimble_codegen_combine_unary,
                                                      (void *)&unary_ops[i], &k));
    ks[n++] = k;
  }
  int r2 = 2;
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(arena, "odd", 1, &r2, 2, odd_combine, NULL, &k));
  ks[n++] = k;
  int r0[2] = {0, 0};
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(arena, "sadd", 2, r0, 0, nimble_codegen_combine_binary,
                                                    (void *)&add_op, &k));
  ks[n++] = k;
  static const char *const red_names[3][3] = {{"sum0", "sum1", "sum2"}, {"mean0", "mean1", "mean2"}, {"max0", "max1", "max2"}};
  for (int kind = 0; kind < 3; kind++)
    for (int axis = 0; axis < 3; axis++) {
      NIMBLE_ASSERT_OK(nimble_codegen_build_reduce(arena, red_names[kind][axis], 3, axis, kind, &k));
      ks[n++] = k;
    }
  NIMBLE_ASSERT_OK(nimble_codegen_build_reduce(arena, "sum_all", 1, 0, NIMBLE_CODEGEN_REDUCE_SUM, &k));
  ks[n++] = k;
  NIMBLE_ASSERT_OK(nimble_codegen_build_softmax(arena, "softmax2", 2, &k));
  ks[n++] = k;
  NIMBLE_ASSERT_OK(nimble_codegen_build_dense(arena, "dense", NIMBLE_CODEGEN_EPILOGUE_NONE, &k));
  ks[n++] = k;
  NIMBLE_ASSERT_OK(nimble_codegen_build_dense(arena, "dense_bias", NIMBLE_CODEGEN_EPILOGUE_BIAS, &k));
  ks[n++] = k;
  NIMBLE_ASSERT_OK(nimble_codegen_build_dense(arena, "dense_relu", NIMBLE_CODEGEN_EPILOGUE_BIAS_RELU, &k));
  ks[n++] = k;
  harness_build_and_load(ks, n, &lib);
}

static void free_all(void) {
  harness_unload(&lib);
  nimble_ln_arena_destroy(arena);
  arena = NULL;
}

static int32_t call(const char *name, harness_env *he, harness_tensor **ts, int n) {
  DLTensor *args[8];
  for (int i = 0; i < n; i++) args[i] = &ts[i]->t;
  he->error[0] = 0;
  return harness_sym(&lib, name)(args, n, &he->env);
}

/* ---- element-wise ---- */

static void check_badd(const int64_t *os, const int64_t *as, const int64_t *bs, int threads) {
  unsigned seed = 7;
  harness_tensor a, b, o;
  harness_tensor_init(&a, 3, as, &seed, -1, 1);
  harness_tensor_init(&b, 2, bs, &seed, -1, 1);
  harness_tensor_init(&o, 3, os, &seed, 0, 0);
  harness_env he;
  harness_env_init(&he, threads, 0);
  harness_tensor *ts[] = {&a, &b, &o};
  ck_assert_msg(call("badd", &he, ts, 3) == 0, "badd failed: %s", he.error);
  double *want = malloc((o.n + 1) * sizeof *want);
  for (int64_t i = 0; i < os[0]; i++)
    for (int64_t j = 0; j < os[1]; j++)
      for (int64_t l = 0; l < os[2]; l++) {
        int64_t ai = ((as[0] == 1 ? 0 : i) * as[1] + (as[1] == 1 ? 0 : j)) * as[2] + (as[2] == 1 ? 0 : l);
        int64_t bi = (bs[0] == 1 ? 0 : j) * bs[1] + (bs[1] == 1 ? 0 : l);
        want[(i * os[1] + j) * os[2] + l] = (double)a.f[ai] + (double)b.f[bi];
      }
  harness_expect_close(o.f, want, o.n, 1e-6, 0, "badd");
  free(want);
  harness_tensor_deinit(&a);
  harness_tensor_deinit(&b);
  harness_tensor_deinit(&o);
}

START_TEST(test_broadcast_add_matches_reference_on_many_shapes) {
  static const int64_t cases[][3][3] = {
      {{2, 3, 17}, {2, 3, 17}, {3, 17}}, /* tail of 1 after two vectors */
      {{4, 1, 16}, {4, 1, 16}, {1, 16}}, /* divisible: the specialised variant */
      {{2, 3, 8}, {1, 3, 8}, {3, 1}},    /* broadcast on axis 0 and the last axis */
      {{3, 4, 5}, {3, 1, 5}, {1, 5}},
      {{0, 3, 5}, {0, 3, 5}, {3, 5}}, /* zero-size */
      {{2, 3, 0}, {2, 3, 0}, {1, 0}},
      {{1, 1, 1}, {1, 1, 1}, {1, 1}},
      {{5, 7, 33}, {5, 7, 1}, {7, 33}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    check_badd(cases[c][0], cases[c][1], cases[c][2], 3);
    check_badd(cases[c][0], cases[c][1], cases[c][2], -1); /* no thread pool */
  }
}
END_TEST

START_TEST(test_in_place_add_takes_the_aliased_variant_and_stays_correct) {
  /* out is in0's buffer: the alias-free variants would be wrong to use. */
  const int64_t s3[3] = {3, 5, 37}, s2[2] = {5, 37};
  unsigned seed = 12;
  harness_tensor a, b;
  harness_tensor_init(&a, 3, s3, &seed, -1, 1);
  harness_tensor_init(&b, 2, s2, &seed, -1, 1);
  float *orig = malloc(a.n * sizeof(float));
  memcpy(orig, a.f, a.n * sizeof(float));
  harness_env he;
  harness_env_init(&he, 2, 0);
  harness_tensor *ts[] = {&a, &b, &a};
  ck_assert_int_eq(call("badd", &he, ts, 3), 0);
  for (size_t i = 0; i < a.n; i++) ck_assert_float_eq(a.f[i], orig[i] + b.f[i % (5 * 37)]);
  /* Overlapping but shifted by one element (out = in0 + 1): the aliased
   * variant keeps the loop nest's sequential order, which the alias-free
   * vector code would not. */
  memcpy(a.f, orig, a.n * sizeof(float));
  harness_tensor o = a;
  o.t.data = a.f + 1;
  o.t.shape = o.shape;
  int64_t s1[3] = {1, 1, 40};
  harness_tensor a1 = a, b1 = b;
  memcpy(a1.shape, s1, sizeof s1);
  memcpy(o.shape, s1, sizeof s1);
  a1.t.shape = a1.shape;
  int64_t sb[2] = {1, 1};
  memcpy(b1.shape, sb, sizeof sb);
  b1.t.shape = b1.shape;
  harness_tensor *shifted[] = {&a1, &b1, &o};
  ck_assert_int_eq(call("badd", &he, shifted, 3), 0);
  /* Reference: the same element order a scalar loop would use. */
  float want[41];
  memcpy(want, orig, sizeof want);
  for (int i = 0; i < 40; i++) want[i + 1] = want[i] + b.f[0];
  for (int i = 0; i < 41; i++) ck_assert_float_eq(a.f[i], want[i]);
  free(orig);
  harness_tensor_deinit(&a);
  harness_tensor_deinit(&b);
}
END_TEST

/* y[i] = x[i] + 1 for i in [0, shape(y, 0)). */
static nimble_ln_kernel *inc_kernel(nimble_ln_arena *A, const char *name, int in_place) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, name);
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 1, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
  nimble_ln_kernel_set_body(
      k, nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_shape(A, y, 0), NIMBLE_LN_SERIAL, 0,
                       nimble_ln_store(A, y, nimble_ln_ref(A, i),
                                       nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_load(A, x, nimble_ln_ref(A, i)),
                                                        nimble_ln_f32(A, 1)))));
  k->in_place = in_place;
  return k;
}

START_TEST(test_only_in_place_kernels_get_an_optimised_aliased_variant) {
  /* Every kernel still takes in-place calls and gets them right; the
   * aliased variant of one not marked in_place (which the VM never calls
   * so) is left unoptimised (optnone), the marked one's is optimised. */
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  for (int in_place = 0; in_place <= 1; in_place++) {
    const nimble_ln_kernel *k = inc_kernel(A, in_place ? "inc_in_place" : "inc", in_place);
    NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(k));
    nimble_codegen_options_t o = nimble_codegen_default_options();
    o.opt_level = 2;
    o.keep_ir = 1;
    nimble_codegen_output_t out;
    NIMBLE_ASSERT_OK(nimble_codegen_build(&k, 1, &o, &out));
    ck_assert_ptr_nonnull(out.llvm_ir);
    /* The optimised module's attribute groups: optnone only on the aliased variant. */
    ck_assert_msg((strstr(out.llvm_ir, "optnone") != NULL) == !in_place, "%s: optnone %s in\n%s", k->name,
                  in_place ? "present" : "missing", out.llvm_ir);
    harness_lib lib;
    harness_load_bytes(out.shared_object, out.shared_object_size, &lib);
    harness_env he;
    harness_env_init(&he, 0, 0);
    float d[37];
    for (int i = 0; i < 37; i++) d[i] = (float)i;
    int64_t n = 37;
    DLTensor t = {.data = d, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &n};
    DLTensor *args[2] = {&t, &t};
    ck_assert_int_eq(harness_sym(&lib, k->name)(args, 2, &he.env), 0);
    for (int i = 0; i < 37; i++) ck_assert_msg(d[i] == (float)i + 1, "%s: y[%d] = %g", k->name, i, (double)d[i]);
    harness_unload(&lib);
    nimble_codegen_output_deinit(&out);
  }
  nimble_ln_arena_destroy(A);
}
END_TEST

/* Whether some loop ID node of the module text lists both the metadata
 * node whose first operand is the string `a` and the one for `b` (a loop
 * ID: "!N = distinct !{!N, !X, !Y, ...}"). */
static int node_number(const char *ir, const char *name) {
  char pat[96];
  snprintf(pat, sizeof pat, "= !{!\"%s\"", name);
  const char *p = strstr(ir, pat);
  if (!p) return -1;
  while (p > ir && p[-1] != '!') p--;
  return atoi(p);
}

static int lists(const char *line, const char *end, int n) {
  char a[16], b[16];
  snprintf(a, sizeof a, " !%d,", n);
  snprintf(b, sizeof b, " !%d}", n);
  for (const char *p = line; p < end; p++)
    if (!strncmp(p, a, strlen(a)) || !strncmp(p, b, strlen(b))) return 1;
  return 0;
}

static int loop_id_holds_both(const char *ir, const char *a, const char *b) {
  int na = node_number(ir, a), nb = node_number(ir, b);
  if (na < 0 || nb < 0) return 0;
  for (const char *line = ir; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    const char *end = strchr(line, '\n');
    if (!end) end = line + strlen(line);
    if (line[0] == '!' && strstr(line, "distinct !{") && strstr(line, "distinct !{") < end && lists(line, end, na) &&
        lists(line, end, nb))
      return 1;
  }
  return 0;
}

/* Validates k, checks that its printed nest holds `word` exactly when
 * `mark` (the kernel cache keys on the printed nest), builds it at -O2
 * keeping the optimised IR, and loads the object. */
static void build_marked(nimble_ln_kernel *k, const char *word, int mark, nimble_codegen_output_t *out,
                         harness_lib *lib) {
  NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(k));
  char *text = NULL;
  NIMBLE_ASSERT_OK(nimble_ln_kernel_print(k, &text));
  ck_assert_msg((strstr(text, word) != NULL) == mark, "%s", text);
  free(text);
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.opt_level = 2;
  o.keep_ir = 1;
  const nimble_ln_kernel *kc = k;
  NIMBLE_ASSERT_OK(nimble_codegen_build(&kc, 1, &o, out));
  ck_assert_ptr_nonnull(out->llvm_ir);
  harness_load_bytes(out->shared_object, out->shared_object_size, lib);
}

START_TEST(test_a_no_unroll_loop_carries_unroll_disable) {
  /* y[i] = x[i] + 1 over a constant 128 elements, vectorized by 8: with
   * nimble_ln_no_unroll the loop's ID carries llvm.loop.unroll.disable
   * beside its vectorize hints (and the printed nest says "nounroll", which
   * the kernel cache keys on); without it, it does not. Both compute the
   * same. */
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  for (int mark = 0; mark <= 1; mark++) {
    nimble_ln_kernel *k = nimble_ln_kernel_create(A, mark ? "inc_nounroll" : "inc_unroll");
    nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
    nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 1, 1);
    nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
    nimble_ln_stmt *loop =
        nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_i64(A, 128), NIMBLE_LN_VECTORIZED, 8,
                      nimble_ln_store(A, y, nimble_ln_ref(A, i),
                                      nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_load(A, x, nimble_ln_ref(A, i)),
                                                       nimble_ln_f32(A, 1))));
    if (mark) ck_assert_ptr_eq(nimble_ln_no_unroll(loop), loop);
    nimble_ln_kernel_set_body(k, loop);
    nimble_codegen_output_t out;
    harness_lib lib;
    build_marked(k, "nounroll", mark, &out, &lib);
    /* LLVM unrolls the unmarked loop's 16 vector iterations (the general
     * and the specialised variant's); the marked loop keeps one vector add
     * per variant. */
    ck_assert_msg(loop_id_holds_both(out.llvm_ir, "llvm.loop.vectorize.width", "llvm.loop.unroll.disable") == mark,
                  "%s: the vectorized loop's ID %s llvm.loop.unroll.disable", k->name, mark ? "lacks" : "has");
    harness_env he;
    harness_env_init(&he, 0, 0);
    float xs[128], ys[128];
    for (int j = 0; j < 128; j++) xs[j] = (float)j * 0.5f, ys[j] = -1;
    int64_t n = 128;
    DLTensor tx = {.data = xs, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &n};
    DLTensor ty = {.data = ys, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &n};
    DLTensor *args[2] = {&tx, &ty};
    ck_assert_int_eq(harness_sym(&lib, k->name)(args, 2, &he.env), 0);
    for (int j = 0; j < 128; j++) ck_assert_msg(ys[j] == xs[j] + 1, "%s: y[%d] = %g", k->name, j, (double)ys[j]);
    harness_unload(&lib);
    nimble_codegen_output_deinit(&out);
  }
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_a_masked_tail_is_one_masked_vector_step) {
  /* y[r, i] = x[r, i] + 1 over rows of a constant 7 elements, vectorized
   * by 8 and not unrolled (rows: a run-time count, so the kernel is
   * compiled in full): with nimble_ln_masked_tail each row's 7 run as one
   * masked vector step (llvm.masked.load/store in the optimised IR; the
   * printed nest says "masked", which the kernel cache keys on), without
   * it as scalar steps. Both compute the same, and neither writes past the
   * last row. */
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  for (int mark = 0; mark <= 1; mark++) {
    nimble_ln_kernel *k = nimble_ln_kernel_create(A, mark ? "inc7_masked" : "inc7_scalar");
    nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 2, 0);
    nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 2, 1);
    nimble_ln_var *r = nimble_ln_var_create(A, "r", NIMBLE_LN_I64), *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
    nimble_ln_expr *at = nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_binary(A, NIMBLE_LN_MUL, nimble_ln_ref(A, r), nimble_ln_i64(A, 7)),
                                          nimble_ln_ref(A, i));
    nimble_ln_stmt *row =
        nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_i64(A, 7), NIMBLE_LN_VECTORIZED, 8,
                      nimble_ln_store(A, y, at,
                                      nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_load(A, x, at), nimble_ln_f32(A, 1))));
    nimble_ln_no_unroll(row);
    if (mark) ck_assert_ptr_eq(nimble_ln_masked_tail(row), row);
    nimble_ln_kernel_set_body(k, nimble_ln_for(A, r, nimble_ln_i64(A, 0), nimble_ln_shape(A, x, 0), NIMBLE_LN_SERIAL, 0, row));
    nimble_codegen_output_t out;
    harness_lib lib;
    build_marked(k, "masked", mark, &out, &lib);
    ck_assert_msg((strstr(out.llvm_ir, "llvm.masked.store") != NULL) == mark, "%s: masked stores %s expected",
                  k->name, mark ? "" : "not");
    harness_env he;
    harness_env_init(&he, 0, 0);
    float xs[22], ys[22];
    for (int j = 0; j < 22; j++) xs[j] = (float)j * 0.5f, ys[j] = -1;
    int64_t shape[2] = {3, 7};
    DLTensor tx = {.data = xs, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = shape};
    DLTensor ty = {.data = ys, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = shape};
    DLTensor *args[2] = {&tx, &ty};
    ck_assert_int_eq(harness_sym(&lib, k->name)(args, 2, &he.env), 0);
    for (int j = 0; j < 21; j++) ck_assert_msg(ys[j] == xs[j] + 1, "%s: y[%d] = %g", k->name, j, (double)ys[j]);
    ck_assert_msg(ys[21] == -1, "%s: wrote past the last row", k->name);
    harness_unload(&lib);
    nimble_codegen_output_deinit(&out);
  }
  /* Only a vectorized loop is marked. */
  nimble_ln_var *v = nimble_ln_var_create(A, "v", NIMBLE_LN_I64);
  nimble_ln_stmt *serial = nimble_ln_for(A, v, nimble_ln_i64(A, 0), nimble_ln_i64(A, 7), NIMBLE_LN_SERIAL, 0,
                                         nimble_ln_seq(A, NULL, 0));
  ck_assert(!nimble_ln_masked_tail(serial)->masked_tail);
  nimble_ln_arena_destroy(A);
}
END_TEST

/* y[i] = x[i] + 1 for i in [3, e) through nimble_ln_split_overlap. */
static nimble_ln_kernel *overlap_kernel(nimble_ln_arena *A, const char *name, nimble_ln_expr *(*end)(nimble_ln_arena *, nimble_ln_param *)) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, name);
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 1, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
  nimble_ln_stmt *loop =
      nimble_ln_for(A, i, nimble_ln_i64(A, 3), end(A, x), NIMBLE_LN_VECTORIZED, 8,
                    nimble_ln_store(A, y, nimble_ln_ref(A, i),
                                    nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_load(A, x, nimble_ln_ref(A, i)),
                                                     nimble_ln_f32(A, 1))));
  nimble_ln_kernel_set_body(k, nimble_ln_split_overlap(A, loop, 8));
  return k;
}
static nimble_ln_expr *end_30(nimble_ln_arena *A, nimble_ln_param *x) {
  (void)x;
  return nimble_ln_i64(A, 30);
}
static nimble_ln_expr *end_shape(nimble_ln_arena *A, nimble_ln_param *x) { return nimble_ln_shape(A, x, 0); }

START_TEST(test_split_overlap_writes_every_element_once_in_whole_vectors) {
  /* Over [3, 30) (27 elements, a constant): three vectors and a fourth
   * ending at 30 that overlaps the third, and no scalar step at all (the
   * short-loop branch folds away). Over [3, n) for n from 0 to 24 at run
   * time: the elements in range are x + 1 (n - 3 under 8: one by one), and
   * nothing outside the range is written. */
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  for (int dyn = 0; dyn <= 1; dyn++) {
    nimble_ln_kernel *k = overlap_kernel(A, dyn ? "inc_overlap_n" : "inc_overlap_30", dyn ? end_shape : end_30);
    nimble_codegen_output_t out;
    harness_lib lib;
    build_marked(k, "vectorized", 1, &out, &lib);
    if (!dyn) {
      /* The alias-free variant (the aliased one is never vectorized). */
      const char *g = strstr(out.llvm_ir, "inc_overlap_30.general(");
      ck_assert_ptr_nonnull(g);
      const char *g_end = strstr(g, "\n}\n");
      ck_assert_ptr_nonnull(g_end);
      size_t len = (size_t)(g_end - g);
      char *fn = strndup(g, len);
      ck_assert_msg(strstr(fn, "fadd float") == NULL && strstr(fn, "fadd <8 x float>") != NULL,
                    "inc_overlap_30: scalar adds left, or no vector add");
      free(fn);
    }
    harness_env he;
    harness_env_init(&he, 0, 0);
    for (int64_t n = dyn ? 0 : 30; n <= (dyn ? 24 : 30); n++) {
      float xs[32], ys[32];
      for (int j = 0; j < 32; j++) xs[j] = (float)j * 0.5f, ys[j] = -1;
      DLTensor tx = {.data = xs, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &n};
      DLTensor ty = {.data = ys, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &n};
      DLTensor *args[2] = {&tx, &ty};
      ck_assert_int_eq(harness_sym(&lib, k->name)(args, 2, &he.env), 0);
      for (int j = 0; j < 32; j++) {
        float want = j >= 3 && j < n ? xs[j] + 1 : -1;
        ck_assert_msg(ys[j] == want, "%s n=%lld: y[%d] = %g, want %g", k->name, (long long)n, j, (double)ys[j],
                      (double)want);
      }
    }
    harness_unload(&lib);
    nimble_codegen_output_deinit(&out);
  }
  /* A factor under 2 has no vector to overlap. */
  nimble_ln_var *v = nimble_ln_var_create(A, "v", NIMBLE_LN_I64);
  nimble_ln_stmt *loop = nimble_ln_for(A, v, nimble_ln_i64(A, 0), nimble_ln_i64(A, 7), NIMBLE_LN_SERIAL, 0,
                                       nimble_ln_seq(A, NULL, 0));
  ck_assert_ptr_null(nimble_ln_split_overlap(A, loop, 1));
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_large_add_runs_parallel_tasks_on_threads) {
  const int64_t os[3] = {64, 3, 1001}, bs[2] = {3, 1001};
  unsigned seed = 9;
  harness_tensor a, b, o;
  harness_tensor_init(&a, 3, os, &seed, -1, 1);
  harness_tensor_init(&b, 2, bs, &seed, -1, 1);
  harness_tensor_init(&o, 3, os, &seed, 0, 0);
  harness_env he;
  harness_env_init(&he, 3, 0);
  harness_tensor *ts[] = {&a, &b, &o};
  ck_assert_int_eq(call("badd", &he, ts, 3), 0);
  ck_assert_int_eq(atomic_load(&he.parallel_calls), 1);
  /* 64 rows of 3003 elements: at least 16384 elements a task -> 6 rows. */
  ck_assert_int_eq(atomic_load(&he.tasks_run), (64 + 5) / 6);
  for (size_t i = 0; i < o.n; i++) {
    size_t bi = i % (size_t)(3 * 1001);
    if (o.f[i] != a.f[i] + b.f[bi]) ck_abort_msg("out[%zu] = %g, want %g", i, (double)o.f[i], (double)(a.f[i] + b.f[bi]));
  }
  harness_tensor_deinit(&a);
  harness_tensor_deinit(&b);
  harness_tensor_deinit(&o);
}
END_TEST

static double ref_unary(int op, double x) {
  switch (op) {
  case 0: return exp(x);
  case 1: return tanh(x);
  case 2: return 1.0 / (1.0 + exp(-x));
  case 3: return erf(x);
  case 4: return sqrt(x);
  case 5: return log(x);
  case 6: return fabs(x);
  default: return -x;
  }
}

START_TEST(test_unary_kernels_match_libm) {
  static const int64_t sizes[] = {0, 1, 7, 8, 9, 1003};
  for (int op = 0; op < N_UNARY; op++) {
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      unsigned seed = 11 + (unsigned)s;
      harness_tensor x, y;
      float lo = (op == 4 || op == 5) ? 0.001f : -9.0f;
      harness_tensor_init(&x, 1, &sizes[s], &seed, lo, 9.0f);
      harness_tensor_init(&y, 1, &sizes[s], &seed, 0, 0);
      harness_env he;
      harness_env_init(&he, 2, 0);
      harness_tensor *ts[] = {&x, &y};
      ck_assert_int_eq(call(unary_names[op], &he, ts, 2), 0);
      double *want = malloc((x.n + 1) * sizeof *want);
      for (size_t i = 0; i < x.n; i++) want[i] = ref_unary(op, x.f[i]);
      harness_expect_close(y.f, want, y.n, 2e-6, 1e-7, unary_names[op]);
      free(want);
      harness_tensor_deinit(&x);
      harness_tensor_deinit(&y);
    }
  }
}
END_TEST

START_TEST(test_select_combine_matches_reference) {
  const int64_t shape[2] = {13, 29};
  unsigned seed = 5;
  harness_tensor x, y;
  harness_tensor_init(&x, 2, shape, &seed, -6, 6);
  harness_tensor_init(&y, 2, shape, &seed, 0, 0);
  harness_env he;
  harness_env_init(&he, 2, 0);
  harness_tensor *ts[] = {&x, &y};
  ck_assert_int_eq(call("odd", &he, ts, 2), 0);
  double want[13 * 29];
  for (size_t i = 0; i < x.n; i++) {
    double v = x.f[i];
    want[i] = v > 0 ? v / (1.0 + exp(-(double)(float)(v * 1.702f))) : v * (double)0.1f;
  }
  harness_expect_close(y.f, want, y.n, 3e-6, 1e-7, "odd");
  harness_tensor_deinit(&x);
  harness_tensor_deinit(&y);
}
END_TEST

START_TEST(test_rank_zero_kernel_adds_scalars) {
  unsigned seed = 1;
  harness_tensor a, b, o;
  harness_tensor_init(&a, 0, NULL, &seed, 1, 2);
  harness_tensor_init(&b, 0, NULL, &seed, 1, 2);
  harness_tensor_init(&o, 0, NULL, &seed, 0, 0);
  harness_env he;
  harness_env_init(&he, 0, 0);
  harness_tensor *ts[] = {&a, &b, &o};
  ck_assert_int_eq(call("sadd", &he, ts, 3), 0);
  ck_assert_float_eq(o.f[0], a.f[0] + b.f[0]);
  harness_tensor_deinit(&a);
  harness_tensor_deinit(&b);
  harness_tensor_deinit(&o);
}
END_TEST

/* ---- reductions ---- */

static void check_reduce(int kind, int axis, const int64_t *xs) {
  static const char *const names[3][3] = {{"sum0", "sum1", "sum2"}, {"mean0", "mean1", "mean2"}, {"max0", "max1", "max2"}};
  unsigned seed = 3;
  harness_tensor x, y;
  int64_t ys[2];
  for (int a = 0, b = 0; a < 3; a++)
    if (a != axis) ys[b++] = xs[a];
  harness_tensor_init(&x, 3, xs, &seed, -4, 4);
  harness_tensor_init(&y, 2, ys, &seed, 0, 0);
  harness_env he;
  harness_env_init(&he, 2, 0);
  harness_tensor *ts[] = {&x, &y};
  ck_assert_msg(call(names[kind][axis], &he, ts, 2) == 0, "%s: %s", names[kind][axis], he.error);
  double *want = malloc((y.n + 1) * sizeof *want);
  int64_t outer = 1, inner = 1, n = xs[axis];
  for (int a = 0; a < axis; a++) outer *= xs[a];
  for (int a = axis + 1; a < 3; a++) inner *= xs[a];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double acc = kind == 2 ? -INFINITY : 0;
      for (int64_t r = 0; r < n; r++) {
        double v = x.f[(o * n + r) * inner + i];
        acc = kind == 2 ? fmax(acc, v) : acc + v;
      }
      if (kind == 1) acc /= (double)n;
      want[o * inner + i] = acc;
    }
  harness_expect_close(y.f, want, y.n, 1e-5, 1e-5, names[kind][axis]);
  free(want);
  harness_tensor_deinit(&x);
  harness_tensor_deinit(&y);
}

START_TEST(test_reductions_match_reference_on_every_axis) {
  static const int64_t shapes[][3] = {{3, 5, 17}, {2, 9, 8}, {1, 1, 1}, {4, 33, 2}, {2, 0, 3}, {0, 2, 3}};
  for (int kind = 0; kind < 3; kind++)
    for (int axis = 0; axis < 3; axis++)
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        if (kind == 2 && shapes[s][axis] == 0) continue; /* an error, tested below */
        check_reduce(kind, axis, shapes[s]);
      }
}
END_TEST

START_TEST(test_reduce_max_over_empty_axis_is_an_error_and_sum_is_zero) {
  const int64_t xs[3] = {2, 0, 3}, ys[2] = {2, 3};
  unsigned seed = 1;
  harness_tensor x, y;
  harness_tensor_init(&x, 3, xs, &seed, 0, 1);
  harness_tensor_init(&y, 2, ys, &seed, 5, 6);
  harness_env he;
  harness_env_init(&he, 1, 0);
  harness_tensor *ts[] = {&x, &y};
  ck_assert_int_ne(call("max1", &he, ts, 2), 0);
  ck_assert_str_eq(he.error, "max over an empty axis has no value");
  ck_assert_int_eq(call("sum1", &he, ts, 2), 0);
  for (int i = 0; i < 6; i++) ck_assert_float_eq(y.f[i], 0.0f);
  /* Output shape that is not the input's without the axis. */
  y.shape[1] = 4;
  ck_assert_int_ne(call("sum1", &he, ts, 2), 0);
  ck_assert_str_eq(he.error, "output extents must be the input's without the reduced axis");
  harness_tensor_deinit(&x);
  harness_tensor_deinit(&y);
}
END_TEST

START_TEST(test_full_reduction_of_a_vector_to_a_scalar) {
  const int64_t n = 1000;
  unsigned seed = 2;
  harness_tensor x, y;
  harness_tensor_init(&x, 1, &n, &seed, -1, 1);
  harness_tensor_init(&y, 0, NULL, &seed, 0, 0);
  harness_env he;
  harness_env_init(&he, 1, 0);
  harness_tensor *ts[] = {&x, &y};
  ck_assert_int_eq(call("sum_all", &he, ts, 2), 0);
  double want = 0;
  for (int i = 0; i < n; i++) want += x.f[i];
  harness_expect_close(y.f, &want, 1, 1e-5, 1e-4, "sum_all");
  harness_tensor_deinit(&x);
  harness_tensor_deinit(&y);
}
END_TEST

/* ---- softmax ---- */

START_TEST(test_softmax_matches_reference_and_rows_sum_to_one) {
  static const int64_t shapes[][2] = {{5, 37}, {3, 1}, {0, 4}, {2, 1000}, {130, 8}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    unsigned seed = 4;
    harness_tensor x, y;
    harness_tensor_init(&x, 2, shapes[s], &seed, -30, 30);
    harness_tensor_init(&y, 2, shapes[s], &seed, 0, 0);
    harness_env he;
    harness_env_init(&he, 2, 0);
    harness_tensor *ts[] = {&x, &y};
    ck_assert_int_eq(call("softmax2", &he, ts, 2), 0);
    int64_t rows = shapes[s][0], n = shapes[s][1];
    double *want = malloc((x.n + 1) * sizeof *want);
    for (int64_t r = 0; r < rows; r++) {
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; j++) m = fmax(m, x.f[r * n + j]);
      for (int64_t j = 0; j < n; j++) sum += exp(x.f[r * n + j] - m);
      double got = 0;
      for (int64_t j = 0; j < n; j++) {
        want[r * n + j] = exp(x.f[r * n + j] - m) / sum;
        got += y.f[r * n + j];
      }
      ck_assert_msg(fabs(got - 1.0) < 1e-5, "row %lld sums to %g", (long long)r, got);
    }
    harness_expect_close(y.f, want, y.n, 1e-5, 1e-9, "softmax");
    free(want);
    harness_tensor_deinit(&x);
    harness_tensor_deinit(&y);
  }
}
END_TEST

/* ---- dense ---- */

static void check_dense(const char *name, int epilogue, int64_t M, int64_t N, int64_t K, int with_sgemm) {
  unsigned seed = 6;
  int64_t xs[2] = {M, K}, ws[2] = {K, N}, ys[2] = {M, N};
  harness_tensor x, w, b, y;
  harness_tensor_init(&x, 2, xs, &seed, -1, 1);
  harness_tensor_init(&w, 2, ws, &seed, -1, 1);
  harness_tensor_init(&b, 1, &N, &seed, -1, 1);
  harness_tensor_init(&y, 2, ys, &seed, 100, 101); /* garbage the kernel must overwrite */
  harness_env he;
  harness_env_init(&he, 3, with_sgemm);
  harness_tensor *with_bias[] = {&x, &w, &b, &y};
  harness_tensor *no_bias[] = {&x, &w, &y};
  int32_t rc = epilogue ? call(name, &he, with_bias, 4) : call(name, &he, no_bias, 3);
  ck_assert_msg(rc == 0, "%s: %s", name, he.error);
  double *want = malloc((y.n + 1) * sizeof *want);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double acc = epilogue ? b.f[j] : 0;
      for (int64_t k = 0; k < K; k++) acc += (double)x.f[i * K + k] * w.f[k * N + j];
      if (epilogue == 2 && acc < 0) acc = 0;
      want[i * N + j] = acc;
    }
  char what[96];
  snprintf(what, sizeof what, "%s %lldx%lldx%lld sgemm=%d", name, (long long)M, (long long)N, (long long)K, with_sgemm);
  harness_expect_close(y.f, want, y.n, 1e-4, 1e-5 * (double)(K + 1), what);
  free(want);
  harness_tensor_deinit(&x);
  harness_tensor_deinit(&w);
  harness_tensor_deinit(&b);
  harness_tensor_deinit(&y);
}

START_TEST(test_dense_with_and_without_sgemm_matches_reference) {
  static const int64_t sizes[][3] = {{1, 1, 1}, {5, 7, 3}, {33, 65, 129}, {64, 300, 260}, {3, 16, 8}, {0, 5, 3}, {4, 6, 0}};
  static const char *const names[] = {"dense", "dense_bias", "dense_relu"};
  for (int ep = 0; ep < 3; ep++)
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
      for (int blas = 0; blas < 2; blas++) check_dense(names[ep], ep, sizes[s][0], sizes[s][1], sizes[s][2], blas);
}
END_TEST

START_TEST(test_dense_calls_sgemm_only_when_the_runtime_offers_it) {
  /* An env whose struct_size ends before sgemm must not have it read. */
  unsigned seed = 8;
  int64_t xs[2] = {2, 3}, ws[2] = {3, 4}, ys[2] = {2, 4};
  harness_tensor x, w, y;
  harness_tensor_init(&x, 2, xs, &seed, -1, 1);
  harness_tensor_init(&w, 2, ws, &seed, -1, 1);
  harness_tensor_init(&y, 2, ys, &seed, 0, 0);
  harness_env he;
  harness_env_init(&he, 0, 1);
  he.env.sgemm = (nimble_sgemm_fn)(uintptr_t)1; /* would crash if called */
  he.env.struct_size = offsetof(nimble_kernel_env_t, sgemm);
  harness_tensor *ts[] = {&x, &w, &y};
  ck_assert_msg(call("dense", &he, ts, 3) == 0, "%s", he.error);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) {
      double acc = 0;
      for (int k = 0; k < 3; k++) acc += (double)x.f[i * 3 + k] * w.f[k * 4 + j];
      ck_assert_double_eq_tol(y.f[i * 4 + j], acc, 1e-5);
    }
  harness_tensor_deinit(&x);
  harness_tensor_deinit(&w);
  harness_tensor_deinit(&y);
}
END_TEST

/* ---- argument checks ---- */

START_TEST(test_kernels_reject_bad_arguments_with_messages) {
  unsigned seed = 1;
  int64_t s3[3] = {2, 3, 4}, s2[2] = {3, 4}, bad2[2] = {3, 5};
  harness_tensor a, b, o, c;
  harness_tensor_init(&a, 3, s3, &seed, 0, 1);
  harness_tensor_init(&b, 2, s2, &seed, 0, 1);
  harness_tensor_init(&o, 3, s3, &seed, 0, 1);
  harness_tensor_init(&c, 2, bad2, &seed, 0, 1);
  harness_env he;
  harness_env_init(&he, 1, 0);
  harness_tensor *ok[] = {&a, &b, &o};
  ck_assert_int_eq(call("badd", &he, ok, 3), 0);

  ck_assert_int_ne(call("badd", &he, ok, 2), 0);
  ck_assert_str_eq(he.error, "expects 3 arguments (inputs then outputs)");

  harness_tensor *mismatch[] = {&a, &c, &o};
  ck_assert_int_ne(call("badd", &he, mismatch, 3), 0);
  ck_assert_str_eq(he.error, "input 1 axis 1: extent is neither 1 nor the output's axis 2 extent");

  harness_tensor *rank[] = {&b, &b, &o};
  ck_assert_int_ne(call("badd", &he, rank, 3), 0);
  ck_assert_str_eq(he.error, "argument 0 ('in0') must have rank 3");

  b.t.dtype.bits = 64;
  ck_assert_int_ne(call("badd", &he, ok, 3), 0);
  ck_assert_str_eq(he.error, "argument 1 ('in1') must be float32 (DLPack code 2, 32 bits, 1 lane)");
  b.t.dtype.bits = 32;

  int64_t strides[3] = {12, 4, 1};
  o.t.strides = strides;
  ck_assert_int_eq(call("badd", &he, ok, 3), 0); /* explicit compact strides are fine */
  strides[1] = 8;
  ck_assert_int_ne(call("badd", &he, ok, 3), 0);
  ck_assert_str_eq(he.error, "argument 2 ('out') is not C-contiguous");
  o.t.strides = NULL;

  int64_t neg[3] = {2, -3, 4};
  o.t.shape = neg;
  ck_assert_int_ne(call("badd", &he, ok, 3), 0);
  ck_assert_str_eq(he.error, "argument 2 ('out') has a negative extent");
  int64_t huge[3] = {(int64_t)1 << 40, (int64_t)1 << 20, 4};
  o.t.shape = huge;
  ck_assert_int_ne(call("badd", &he, ok, 3), 0);
  ck_assert_str_eq(he.error, "argument 2 ('out') has more bytes than fit in 63 bits");
  o.t.shape = o.shape;

  b.t.data = NULL;
  ck_assert_int_ne(call("badd", &he, ok, 3), 0);
  ck_assert_str_eq(he.error, "argument 1 ('in1') has a NULL data pointer");
  b.t.data = b.f;

  harness_tensor *null_arg[] = {&a, &b, NULL};
  DLTensor *args[3] = {&a.t, &b.t, NULL};
  (void)null_arg;
  ck_assert_int_ne(harness_sym(&lib, "badd")(args, 3, &he.env), 0);
  ck_assert_str_eq(he.error, "argument 2 ('out') is NULL");
  /* No env at all: nothing to report to, but no crash. */
  args[2] = &o.t;
  ck_assert_int_ne(harness_sym(&lib, "badd")(args, 3, NULL), 0);

  int64_t ws[2] = {5, 4};
  harness_tensor w;
  harness_tensor_init(&w, 2, ws, &seed, 0, 1);
  harness_tensor *dense_bad[] = {&b, &w, &c};
  ck_assert_int_ne(call("dense", &he, dense_bad, 3), 0);
  ck_assert_str_eq(he.error, "w's rows must equal x's columns");
  harness_tensor_deinit(&w);
  harness_tensor_deinit(&a);
  harness_tensor_deinit(&b);
  harness_tensor_deinit(&o);
  harness_tensor_deinit(&c);
}
END_TEST

/* ---- a hand-written kernel: integers, if, unrolled loops, accumulators ---- */

/* q = a / b, r = a % b (i64, never trapping), f = a > b ? f32(a) * 0.5 : f32(b),
 * and total[0] = the number of i with a[i] > b[i], counted by an
 * accumulator in an unrolled loop. */
static nimble_ln_kernel *intops_kernel(nimble_ln_arena *A) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "intops");
  nimble_ln_param *a = nimble_ln_kernel_add_param(k, "a", NIMBLE_LN_I64, 1, 0);
  nimble_ln_param *b = nimble_ln_kernel_add_param(k, "b", NIMBLE_LN_I64, 1, 0);
  nimble_ln_param *q = nimble_ln_kernel_add_param(k, "q", NIMBLE_LN_I64, 1, 1);
  nimble_ln_param *r = nimble_ln_kernel_add_param(k, "r", NIMBLE_LN_I64, 1, 1);
  nimble_ln_param *f = nimble_ln_kernel_add_param(k, "f", NIMBLE_LN_F32, 1, 1);
  nimble_ln_param *total = nimble_ln_kernel_add_param(k, "total", NIMBLE_LN_I32, 1, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64), *x = nimble_ln_var_create(A, "x", NIMBLE_LN_I64),
                *y = nimble_ln_var_create(A, "y", NIMBLE_LN_I64), *cnt = nimble_ln_var_create(A, "cnt", NIMBLE_LN_I32);
  nimble_ln_expr *iv = nimble_ln_ref(A, i), *xv = nimble_ln_ref(A, x), *yv = nimble_ln_ref(A, y);
  nimble_ln_stmt *st[4];
  st[0] = nimble_ln_store(A, q, iv, nimble_ln_binary(A, NIMBLE_LN_DIV, xv, yv));
  st[1] = nimble_ln_store(A, r, iv, nimble_ln_binary(A, NIMBLE_LN_REM, xv, yv));
  nimble_ln_expr *gt = nimble_ln_binary(A, NIMBLE_LN_GT, xv, yv);
  st[2] = nimble_ln_if(
      A, gt,
      nimble_ln_seq2(A,
                     nimble_ln_store(A, f, iv, nimble_ln_binary(A, NIMBLE_LN_MUL, nimble_ln_cast(A, NIMBLE_LN_F32, xv),
                                                               nimble_ln_f32(A, 0.5))),
                     nimble_ln_assign(A, cnt, nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_ref(A, cnt), nimble_ln_i32(A, 1)))),
      nimble_ln_store(A, f, iv, nimble_ln_cast(A, NIMBLE_LN_F32, yv)));
  nimble_ln_stmt *body = nimble_ln_let(A, x, nimble_ln_load(A, a, iv),
                                       nimble_ln_let(A, y, nimble_ln_load(A, b, iv), nimble_ln_seq(A, st, 3)));
  nimble_ln_stmt *loop =
      nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_shape(A, a, 0), NIMBLE_LN_UNROLLED, 4, body);
  nimble_ln_stmt *all = nimble_ln_decl(
      A, cnt, nimble_ln_i32(A, 0), nimble_ln_seq2(A, loop, nimble_ln_store(A, total, nimble_ln_i64(A, 0), nimble_ln_ref(A, cnt))));
  nimble_ln_stmt *checks[3];
  for (int p = 0; p < 2; p++)
    checks[p] = nimble_ln_check(A, nimble_ln_binary(A, NIMBLE_LN_EQ, nimble_ln_shape(A, k->params[p + 1], 0), nimble_ln_shape(A, a, 0)),
                                "b and q must have a's length");
  checks[2] = all;
  nimble_ln_kernel_set_body(k, nimble_ln_seq(A, checks, 3));
  return k;
}

START_TEST(test_handwritten_integer_kernel_divides_by_zero_without_trapping) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k = intops_kernel(A);
  NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(k));
  harness_lib l = {.fd = -1};
  const nimble_ln_kernel *ks[] = {k};
  harness_build_and_load(ks, 1, &l);
  enum { N = 11 };
  int64_t av[N] = {7, -7, 7, INT64_MIN, INT64_MIN, 5, 0, 9, -9, 100, 3};
  int64_t bv[N] = {2, 2, 0, -1, 1, -1, 0, 3, -4, 7, 3};
  int64_t qv[N], rv[N];
  float fv[N];
  int32_t tv[1] = {-5};
  int64_t n = N, one = 1;
  DLTensor ta = {av, {kDLCPU, 0}, 1, {kDLInt, 64, 1}, &n, NULL, 0};
  DLTensor tb = ta, tq = ta, tr = ta;
  tb.data = bv;
  tq.data = qv;
  tr.data = rv;
  DLTensor tf = {fv, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &n, NULL, 0};
  DLTensor tt = {tv, {kDLCPU, 0}, 1, {kDLInt, 32, 1}, &one, NULL, 0};
  DLTensor *args[6] = {&ta, &tb, &tq, &tr, &tf, &tt};
  harness_env he;
  harness_env_init(&he, 0, 0);
  ck_assert_msg(harness_sym(&l, "intops")(args, 6, &he.env) == 0, "%s", he.error);
  int count = 0;
  for (int i = 0; i < N; i++) {
    int64_t x = av[i], y = bv[i], wq, wr;
    if (y == 0) wq = 0, wr = 0;                               /* documented: zero divisor gives 0 */
    else if (y == -1) wq = (int64_t)(0 - (uint64_t)x), wr = 0; /* INT64_MIN / -1 wraps */
    else wq = x / y, wr = x % y;
    ck_assert_msg(qv[i] == wq && rv[i] == wr, "%lld / %lld: got %lld r %lld, want %lld r %lld", (long long)x,
                  (long long)y, (long long)qv[i], (long long)rv[i], (long long)wq, (long long)wr);
    float wf = x > y ? (float)x * 0.5f : (float)y;
    ck_assert_float_eq(fv[i], wf);
    count += x > y;
  }
  ck_assert_int_eq(tv[0], count);
  /* An int64 tensor where an int32 is expected is refused by name. */
  tt.dtype.bits = 64;
  ck_assert_int_ne(harness_sym(&l, "intops")(args, 6, &he.env), 0);
  ck_assert_str_eq(he.error, "argument 5 ('total') must be int32 (DLPack code 0, 32 bits, 1 lane)");
  harness_unload(&l);
  nimble_ln_arena_destroy(A);
}
END_TEST

/* ---- generated code shape ---- */

START_TEST(test_vector_loops_become_eight_wide_avx_code_without_libm_calls) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k1, *k2;
  int r = 1;
  nimble_ln_op_t add = NIMBLE_LN_ADD, ex = NIMBLE_LN_TANH;
  int r2[2] = {1, 1};
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(A, "vadd", 2, r2, 1, nimble_codegen_combine_binary, &add, &k1));
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(A, "vtanh", 1, &r, 1, nimble_codegen_combine_unary, &ex, &k2));
  const nimble_ln_kernel *ks[] = {k1, k2};
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.keep_ir = 1;
  nimble_codegen_output_t out;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, 2, &o, &out));
  ck_assert_ptr_nonnull(strstr(out.llvm_ir, "fadd <8 x float>"));
  ck_assert_ptr_nonnull(strstr(out.llvm_ir, "fdiv <8 x float>")); /* tanh's 2/(e+1), widened */
  ck_assert_ptr_null(strstr(out.llvm_ir, "@tanhf"));
  ck_assert_ptr_null(strstr(out.llvm_ir, "@expf"));
  nimble_codegen_output_deinit(&out);

  /* Unoptimised, the variants are still separate: a divisible one and a
   * general one, both called from the entry point. */
  o.opt_level = 0;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, 1, &o, &out));
  ck_assert_ptr_nonnull(strstr(out.llvm_ir, "define internal i32 @vadd.divisible("));
  ck_assert_ptr_nonnull(strstr(out.llvm_ir, "define internal i32 @vadd.general("));
  ck_assert_ptr_nonnull(strstr(out.llvm_ir, "call i32 @vadd.divisible("));
  ck_assert_ptr_nonnull(strstr(out.llvm_ir, "define internal i32 @vadd.par0("));
  nimble_codegen_output_deinit(&out);

  /* A sum over the last axis vectorizes too (the hint allows
   * reassociation), and so does softmax's exponential pass. */
  nimble_ln_kernel *sum, *sm;
  NIMBLE_ASSERT_OK(nimble_codegen_build_reduce(A, "rsum", 2, 1, NIMBLE_CODEGEN_REDUCE_SUM, &sum));
  NIMBLE_ASSERT_OK(nimble_codegen_build_softmax(A, "rsoftmax", 2, &sm));
  const nimble_ln_kernel *one[] = {sum};
  o = nimble_codegen_default_options();
  o.keep_ir = 1;
  NIMBLE_ASSERT_OK(nimble_codegen_build(one, 1, &o, &out));
  ck_assert_ptr_nonnull(strstr(out.llvm_ir, "fadd <8 x float>"));
  nimble_codegen_output_deinit(&out);
  one[0] = sm;
  NIMBLE_ASSERT_OK(nimble_codegen_build(one, 1, &o, &out));
  ck_assert_ptr_nonnull(strstr(out.llvm_ir, "@llvm.fmuladd.v8f32"));
  nimble_codegen_output_deinit(&out);
  nimble_ln_arena_destroy(A);
}
END_TEST

int main(void) {
  Suite *s = suite_create("codegen_kernels");
  TCase *tc = tcase_create("kernels");
  tcase_add_unchecked_fixture(tc, build_all, free_all);
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_broadcast_add_matches_reference_on_many_shapes);
  tcase_add_test(tc, test_in_place_add_takes_the_aliased_variant_and_stays_correct);
  tcase_add_test(tc, test_only_in_place_kernels_get_an_optimised_aliased_variant);
  tcase_add_test(tc, test_a_no_unroll_loop_carries_unroll_disable);
  tcase_add_test(tc, test_a_masked_tail_is_one_masked_vector_step);
  tcase_add_test(tc, test_split_overlap_writes_every_element_once_in_whole_vectors);
  tcase_add_test(tc, test_large_add_runs_parallel_tasks_on_threads);
  tcase_add_test(tc, test_unary_kernels_match_libm);
  tcase_add_test(tc, test_select_combine_matches_reference);
  tcase_add_test(tc, test_rank_zero_kernel_adds_scalars);
  tcase_add_test(tc, test_reductions_match_reference_on_every_axis);
  tcase_add_test(tc, test_reduce_max_over_empty_axis_is_an_error_and_sum_is_zero);
  tcase_add_test(tc, test_full_reduction_of_a_vector_to_a_scalar);
  tcase_add_test(tc, test_softmax_matches_reference_and_rows_sum_to_one);
  tcase_add_test(tc, test_dense_with_and_without_sgemm_matches_reference);
  tcase_add_test(tc, test_dense_calls_sgemm_only_when_the_runtime_offers_it);
  tcase_add_test(tc, test_kernels_reject_bad_arguments_with_messages);
  tcase_add_test(tc, test_vector_loops_become_eight_wide_avx_code_without_libm_calls);
  tcase_add_test(tc, test_handwritten_integer_kernel_divides_by_zero_without_trapping);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
