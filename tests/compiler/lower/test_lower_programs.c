/* Lowering .nir programs after the default pass pipeline and running them
 * on the real VM through the real loader, with the primitives' kernels
 * written in C (kernels/lower_test_kernels.c). Every expected value is
 * computed by hand (or by the plain loops beside the test). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower_vm_util.h"
#include "nimble/bytecode.h"
#include "nimble/lower.h"
#include "nimble/nir.h"
#include "nimble/passes.h"
#include "nimble/typing.h"
#include "nimble_test.h"

typedef struct lowered {
  nimble_arena *arena;
  nimble_module *m;
  nimble_executable_builder *b;
  const nimble_lower_result *r;
} lowered;

static void parse_text(lowered *l, const char *name, const char *text) {
  NIMBLE_ASSERT_OK(nimble_arena_create(&l->arena));
  NIMBLE_ASSERT_OK(nimble_nir_parse(l->arena, name, text, strlen(text), &l->m));
}

static void parse_file(lowered *l, const char *file) {
  const char *src = getenv("NIMBLE_SOURCE_DIR");
  ck_assert_ptr_nonnull(src);
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/compiler/lower/programs/%s", src, file);
  NIMBLE_ASSERT_OK(nimble_arena_create(&l->arena));
  NIMBLE_ASSERT_OK(nimble_nir_parse_file(l->arena, path, &l->m));
}

/* Type-checks, runs the default pipeline at level 2 and lowers with the
 * program's symbol prefix. */
static void lower_with(lowered *l, const char *prefix) {
  nimble_typing *t;
  NIMBLE_ASSERT_OK(nimble_typing_infer_module(l->m, &t));
  NIMBLE_ASSERT_OK(nimble_passes_run_default(l->m, 2, true, NULL, NULL));
  l->b = lt_builder();
  ck_assert_ptr_nonnull(l->b);
  nimble_lower_options_t o;
  nimble_lower_options_init(&o);
  o.symbol_prefix = prefix;
  NIMBLE_ASSERT_OK(nimble_lower_module(l->m, &o, l->b, &l->r));
}

static void lower_file(lowered *l, const char *file, const char *prefix) {
  parse_file(l, file);
  lower_with(l, prefix);
}

static void done(lowered *l) {
  lt_builder_destroy(l->b);
  nimble_arena_destroy(l->arena);
}

static lt_value f32s(float *data, int32_t ndim, const int64_t *shape) {
  lt_value v;
  memset(&v, 0, sizeof v);
  v.dtype = LT_F32;
  v.ndim = ndim;
  for (int32_t i = 0; i < ndim; i++) v.shape[i] = shape[i];
  v.data = data;
  return v;
}

static lt_value f32_scalar(float *x) { return f32s(x, 0, NULL); }

static lt_value i64_scalar(int64_t *x) {
  lt_value v;
  memset(&v, 0, sizeof v);
  v.dtype = LT_I64;
  v.data = x;
  return v;
}

static float out_f32(const lt_value *v, size_t i) { return ((const float *)v->data)[i]; }
static int64_t out_i64(const lt_value *v) { return *(const int64_t *)v->data; }

/* ---- programs ------------------------------------------------------------ */

START_TEST(test_factorial_and_fibonacci_run_recursively_on_the_vm) {
  lowered l;
  lower_file(&l, "recursion.nir", "recursion_");
  /* 10! = 3628800, fib(15) = 610; the base cases: 1! = 1, fib(1) = 1. */
  int64_t cases[][4] = {{10, 15, 3628800, 610}, {1, 1, 1, 1}, {5, 10, 120, 55}};
  for (size_t c = 0; c < 3; c++) {
    lt_value in[2] = {i64_scalar(&cases[c][0]), i64_scalar(&cases[c][1])}, out[2];
    uint32_t n = 0;
    NIMBLE_ASSERT_OK(lt_run(l.b, 0, in, 2, out, 2, &n));
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(out[0].ndim, 0);
    ck_assert_int_eq(out_i64(&out[0]), cases[c][2]);
    ck_assert_int_eq(out_i64(&out[1]), cases[c][3]);
    lt_values_free(out, n);
  }
  /* fact multiplies after its recursive call returns: a real Invoke. */
  lt_fn_stats st;
  NIMBLE_ASSERT_OK(lt_function_stats(l.b, "fact", &st));
  ck_assert_uint_eq(st.self_invokes, 1);
  ck_assert_uint_eq(st.gotos_to_start, 0);
  done(&l);
}
END_TEST

START_TEST(test_a_list_built_by_the_program_sums_to_the_triangle_number) {
  lowered l;
  lower_file(&l, "list_sum.nir", "list_sum_");
  float ns[] = {100.0f, 0.0f, 3.0f}, want[] = {5050.0f, 0.0f, 6.0f};
  for (size_t c = 0; c < 3; c++) {
    lt_value in = f32_scalar(&ns[c]), out;
    uint32_t n = 0;
    NIMBLE_ASSERT_OK(lt_run(l.b, 0, &in, 1, &out, 1, &n));
    ck_assert_float_eq(out_f32(&out, 0), want[c]);
    lt_values_free(&out, n);
  }
  /* Cons is tag 0 and Nil tag 1 (declaration order): the match reads tags. */
  lt_fn_stats st;
  NIMBLE_ASSERT_OK(lt_function_stats(l.b, "sum", &st));
  ck_assert_uint_eq(st.count[NIMBLE_OP_GET_TAG], 1);
  ck_assert_uint_eq(st.count[NIMBLE_OP_GET_FIELD], 2);
  ck_assert_uint_eq(st.count[NIMBLE_OP_FATAL], 0); /* exhaustive: no Fatal */
  NIMBLE_ASSERT_OK(lt_function_stats(l.b, "build", &st));
  ck_assert_uint_eq(st.count[NIMBLE_OP_ALLOC_ADT], 2);
  ck_assert_uint_eq(st.adt_tags, 3); /* Cons 0 and Nil 1 */
  done(&l);
}
END_TEST

START_TEST(test_a_fold_over_a_tree_adds_its_leaves) {
  lowered l;
  lower_file(&l, "tree_fold.nir", "tree_fold_");
  /* a + b + a*b + a with a = (1, 2), b = (3, -4): (8, -8). */
  float a[] = {1.0f, 2.0f}, b[] = {3.0f, -4.0f};
  int64_t shape[] = {2};
  lt_value in[2] = {f32s(a, 1, shape), f32s(b, 1, shape)}, out;
  uint32_t n = 0;
  NIMBLE_ASSERT_OK(lt_run(l.b, 0, in, 2, &out, 1, &n));
  ck_assert_int_eq(out.ndim, 1);
  ck_assert_int_eq(out.shape[0], 2);
  ck_assert_float_eq(out_f32(&out, 0), 8.0f);
  ck_assert_float_eq(out_f32(&out, 1), -8.0f);
  lt_values_free(&out, n);
  done(&l);
}
END_TEST

START_TEST(test_closures_capture_values_and_globals_pass_as_closures) {
  lowered l;
  lower_file(&l, "closures.nir", "closures_");
  /* y = x * k + x = (3, 6, 9) for x = (1, 2, 3), k = 2; then double(y). */
  float x[] = {1.0f, 2.0f, 3.0f}, k = 2.0f;
  int64_t shape[] = {3};
  lt_value in[2] = {f32s(x, 1, shape), f32_scalar(&k)}, out[2];
  uint32_t n = 0;
  NIMBLE_ASSERT_OK(lt_run(l.b, 0, in, 2, out, 2, &n));
  ck_assert_uint_eq(n, 2);
  for (int i = 0; i < 3; i++) {
    ck_assert_float_eq(out_f32(&out[0], (size_t)i), 3.0f * (float)(i + 1));
    ck_assert_float_eq(out_f32(&out[1], (size_t)i), 6.0f * (float)(i + 1));
  }
  lt_values_free(out, n);
  lt_fn_stats st;
  NIMBLE_ASSERT_OK(lt_function_stats(l.b, "main", &st));
  ck_assert_uint_eq(st.count[NIMBLE_OP_ALLOC_CLOSURE], 3); /* scale, shift, @double */
  NIMBLE_ASSERT_OK(lt_function_stats(l.b, "apply", &st));
  ck_assert_uint_eq(st.count[NIMBLE_OP_INVOKE_CLOSURE], 1);
  /* A closure's code takes the captured value first, then its parameter. */
  const nimble_lower_function_t *f = nimble_lower_find_function(l.r, "main_lambda0");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(f->num_params, 2);
  done(&l);
}
END_TEST

START_TEST(test_if_takes_both_branches) {
  lowered l;
  lower_file(&l, "branches.nir", "branches_");
  /* x = 3: y = 6, z = 7, x < 10: (z, y). x = -4: y = 4, z = 5: (5, 4).
   * x = 20: y = 40, z = 41, not x < 10: (y, z) = (40, 41). */
  float xs[] = {3.0f, -4.0f, 20.0f}, want[][2] = {{7, 6}, {5, 4}, {40, 41}};
  for (size_t c = 0; c < 3; c++) {
    lt_value in = f32_scalar(&xs[c]), out[2];
    uint32_t n = 0;
    NIMBLE_ASSERT_OK(lt_run(l.b, 0, &in, 1, out, 2, &n));
    ck_assert_uint_eq(n, 2);
    ck_assert_float_eq(out_f32(&out[0], 0), want[c][0]);
    ck_assert_float_eq(out_f32(&out[1], 0), want[c][1]);
    lt_values_free(out, n);
  }
  done(&l);
}
END_TEST

START_TEST(test_a_loop_of_ten_thousand_iterations_runs_in_constant_frames) {
  lowered l;
  lower_file(&l, "loop.nir", "loop_");
  /* 10,000 iterations adding 0.5: 5000, with at most 3 frames (main,
   * loop and one spare): recursion by Invoke would need 10,001. */
  int64_t bound = 10000;
  lt_value in = i64_scalar(&bound), out;
  uint32_t n = 0;
  NIMBLE_ASSERT_OK(lt_run(l.b, 3, &in, 1, &out, 1, &n));
  ck_assert_float_eq(out_f32(&out, 0), 5000.0f);
  lt_values_free(&out, n);
  lt_fn_stats st;
  NIMBLE_ASSERT_OK(lt_function_stats(l.b, "loop", &st));
  ck_assert_uint_eq(st.gotos_to_start, 1);
  ck_assert_uint_eq(st.count[NIMBLE_OP_INVOKE], 0);
  done(&l);

  /* The same frame limit stops a real recursion: factorial of 10 needs 11
   * frames. */
  lower_file(&l, "recursion.nir", "recursion_");
  int64_t ten = 10, one = 1;
  lt_value in2[2] = {i64_scalar(&ten), i64_scalar(&one)}, out2[2];
  n = 0;
  NIMBLE_ASSERT_ERROR(lt_run(l.b, 3, in2, 2, out2, 2, &n), NIMBLE_RESOURCE_EXHAUSTED, "");
  done(&l);
}
END_TEST

static void mlp_reference(const float *x, int64_t batch, const float *b1, const float *w2, float *y) {
  static const float w1[3][2] = {{1.0f, 2.0f}, {-1.0f, 0.5f}, {0.25f, -3.0f}};
  for (int64_t i = 0; i < batch; i++) {
    float h[3];
    for (int j = 0; j < 3; j++) {
      h[j] = x[i * 2] * w1[j][0] + x[i * 2 + 1] * w1[j][1] + b1[j];
      if (h[j] < 0) h[j] = 0;
    }
    for (int j = 0; j < 2; j++) y[i * 2 + j] = h[0] * w2[j * 3] + h[1] * w2[j * 3 + 1] + h[2] * w2[j * 3 + 2];
  }
}

START_TEST(test_an_mlp_with_a_symbolic_batch_runs_at_batch_1_3_and_64) {
  lowered l;
  lower_file(&l, "mlp.nir", "mlp_");
  char sig[256];
  NIMBLE_ASSERT_OK(lt_entry_signature(l.b, "main", sig, sizeof sig));
  ck_assert_str_eq(sig, "main(x[?n,2] b1[3] w2[2,3]) -> output0[?n,2]");
  float b1[] = {0.5f, -1.0f, 2.0f}, w2[] = {1.0f, -2.0f, 0.5f, 3.0f, 0.25f, -1.0f};
  int64_t b1s[] = {3}, w2s[] = {2, 3};
  int64_t batches[] = {1, 3, 64};
  for (size_t c = 0; c < 3; c++) {
    int64_t batch = batches[c], xs[] = {batch, 2};
    float *x = malloc((size_t)batch * 2 * sizeof *x), *want = malloc((size_t)batch * 2 * sizeof *want);
    for (int64_t i = 0; i < batch * 2; i++) x[i] = (float)((i * 7) % 11) - 5.0f;
    mlp_reference(x, batch, b1, w2, want);
    lt_value in[3] = {f32s(x, 2, xs), f32s(b1, 1, b1s), f32s(w2, 2, w2s)}, out;
    uint32_t n = 0;
    NIMBLE_ASSERT_OK(lt_run(l.b, 0, in, 3, &out, 1, &n));
    ck_assert_int_eq(out.ndim, 2);
    ck_assert_int_eq(out.shape[0], batch);
    ck_assert_int_eq(out.shape[1], 2);
    for (int64_t i = 0; i < batch * 2; i++) ck_assert_float_eq_tol(out_f32(&out, (size_t)i), want[i], 1e-4);
    lt_values_free(&out, n);
    free(x);
    free(want);
  }
  /* The first weight comes from the constant pool; shapes from ShapeOf. */
  lt_fn_stats st;
  NIMBLE_ASSERT_OK(lt_function_stats(l.b, "main", &st));
  ck_assert_uint_ge(st.count[NIMBLE_OP_LOAD_CONST], 1);
  ck_assert_uint_eq(st.count[NIMBLE_OP_SHAPE_OF], 2);
  ck_assert_uint_eq(st.count[NIMBLE_OP_ALLOC_TENSOR_REG], 2);
  done(&l);
}
END_TEST

START_TEST(test_the_kernel_list_names_each_primitive_and_shape_function) {
  lowered l;
  lower_file(&l, "mlp.nir", "mlp_");
  /* In order of first use: the first layer's shape function, the size
   * computation, the layer, then the second layer's shape function and
   * kernel. */
  static const struct {
    const char *name, *symbol, *mode;
    nimble_lower_kernel_kind_t kind;
  } want[] = {
      {"fused.dense_add_relu", "mlp_fused_dense_add_relu_shape", "data_independent", NIMBLE_LOWER_KERNEL_SHAPE_FUNC},
      {"fused.storage_size_r2_e4", "mlp_fused_storage_size_r2_e4", NULL, NIMBLE_LOWER_KERNEL_COMPUTE},
      {"fused.dense_add_relu", "mlp_fused_dense_add_relu", NULL, NIMBLE_LOWER_KERNEL_COMPUTE},
      {"fused.dense", "mlp_fused_dense_shape", "data_independent", NIMBLE_LOWER_KERNEL_SHAPE_FUNC},
      {"fused.dense", "mlp_fused_dense", NULL, NIMBLE_LOWER_KERNEL_COMPUTE},
  };
  ck_assert_uint_eq(nimble_lower_num_primitives(l.r), 5);
  for (size_t i = 0; i < 5; i++) {
    const nimble_lower_primitive_t *p = nimble_lower_primitive_at(l.r, i);
    ck_assert_str_eq(p->name, want[i].name);
    ck_assert_str_eq(p->symbol, want[i].symbol);
    ck_assert_int_eq(p->kind, want[i].kind);
    ck_assert_int_eq(p->device, kDLCPU);
    ck_assert_uint_eq(p->num_outputs, 1);
    ck_assert_uint_eq(p->kernel_index, i);
    ck_assert_ptr_eq(p->func, nimble_module_find_func(l.m, want[i].name));
    if (want[i].mode) ck_assert_str_eq(p->shape_mode, want[i].mode);
    else ck_assert_ptr_null(p->shape_mode);
  }
  ck_assert_ptr_null(nimble_lower_primitive_at(l.r, 5));
  done(&l);
}
END_TEST

START_TEST(test_nested_patterns_with_wildcards_pick_the_first_matching_arm) {
  lowered l;
  lower_file(&l, "nested_match.nir", "nested_match_");
  /* Node(Leaf a, _) -> a; Node(Node, Leaf b) -> 10 b; Node(_, _) -> 100;
   * a Leaf -> -1. */
  float a = 1.5f, b = 2.5f;
  lt_value in[2] = {f32_scalar(&a), f32_scalar(&b)}, out[4];
  uint32_t n = 0;
  NIMBLE_ASSERT_OK(lt_run(l.b, 0, in, 2, out, 4, &n));
  ck_assert_uint_eq(n, 4);
  ck_assert_float_eq(out_f32(&out[0], 0), 1.5f);
  ck_assert_float_eq(out_f32(&out[1], 0), 25.0f);
  ck_assert_float_eq(out_f32(&out[2], 0), 100.0f);
  ck_assert_float_eq(out_f32(&out[3], 0), -1.0f);
  lt_values_free(out, n);
  done(&l);
}
END_TEST

START_TEST(test_a_value_no_arm_matches_stops_at_fatal_naming_the_function) {
  lowered l;
  lower_file(&l, "partial_match.nir", "partial_match_");
  float x = 2.0f;
  lt_value in = f32_scalar(&x), out;
  uint32_t n = 0;
  NIMBLE_ASSERT_OK(lt_run(l.b, 0, &in, 1, &out, 1, &n));
  ck_assert_float_eq(out_f32(&out, 0), 2.0f);
  lt_values_free(&out, n);
  x = -1.0f; /* Nil: no arm */
  n = 0;
  nimble_status_t s = lt_run(l.b, 0, &in, 1, &out, 1, &n);
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_INTERNAL);
  ck_assert_msg(strstr(nimble_status_message(s), "function 'head'") &&
                    strstr(nimble_status_message(s), "Fatal"),
                "%s", nimble_status_message(s));
  nimble_status_free(s);
  lt_fn_stats st;
  NIMBLE_ASSERT_OK(lt_function_stats(l.b, "head", &st));
  ck_assert_uint_eq(st.count[NIMBLE_OP_FATAL], 1);
  done(&l);
}
END_TEST

START_TEST(test_a_long_let_chain_keeps_few_registers) {
  /* 300 calls in a chain: x + 300, in a handful of registers. */
  enum { N = 300 };
  size_t cap = 64 * N + 512, len = 0;
  char *text = malloc(cap);
  len += (size_t)snprintf(text + len, cap - len,
                          "def @inc(%%v: Tensor[(), float32]) -> Tensor[(), float32] { add(%%v, 1.0) }\n"
                          "def @main(%%x0: Tensor[(), float32]) {\n");
  for (int i = 1; i <= N; i++) len += (size_t)snprintf(text + len, cap - len, "  let %%x%d = @inc(%%x%d);\n", i, i - 1);
  len += (size_t)snprintf(text + len, cap - len, "  %%x%d\n}\n", N);
  lowered l;
  parse_text(&l, "chain.nir", text);
  free(text);
  lower_with(&l, "chain_");
  float x = 0.5f;
  lt_value in = f32_scalar(&x), out;
  uint32_t n = 0;
  NIMBLE_ASSERT_OK(lt_run(l.b, 0, &in, 1, &out, 1, &n));
  ck_assert_float_eq(out_f32(&out, 0), 300.5f);
  lt_values_free(&out, n);
  lt_fn_stats st;
  NIMBLE_ASSERT_OK(lt_function_stats(l.b, "main", &st));
  ck_assert_uint_le(st.registers, 2);
  ck_assert_uint_eq(st.count[NIMBLE_OP_INVOKE], N); /* the last is Invoke then Ret */
  const nimble_lower_function_t *f = nimble_lower_find_function(l.r, "main");
  ck_assert_uint_eq(f->num_registers, st.registers);
  done(&l);
}
END_TEST

START_TEST(test_self_tail_calls_that_permute_their_parameters_move_them_in_parallel) {
  lowered l;
  lower_file(&l, "swap.nir", "swap_");
  /* gcd(48, 18) = 6 (48 18 -> 18 12 -> 12 6 -> 6 0). rot(a, b, 7, n)
   * rotates left n times: n = 4 from (48, 18, 7) gives (18, 7, 48);
   * n = 0 leaves it. */
  int64_t cases[][6] = {{48, 18, 4, 6, 18, 7}, {35, 14, 0, 7, 35, 14}, {9, 28, 3, 1, 9, 28}};
  int64_t third[] = {48, 7, 7};
  for (size_t c = 0; c < 3; c++) {
    lt_value in[3] = {i64_scalar(&cases[c][0]), i64_scalar(&cases[c][1]), i64_scalar(&cases[c][2])},
             out[4];
    uint32_t n = 0;
    NIMBLE_ASSERT_OK(lt_run(l.b, 4, in, 3, out, 4, &n));
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(out_i64(&out[0]), cases[c][3]);
    ck_assert_int_eq(out_i64(&out[1]), cases[c][4]);
    ck_assert_int_eq(out_i64(&out[2]), cases[c][5]);
    ck_assert_int_eq(out_i64(&out[3]), third[c]);
    lt_values_free(out, n);
  }
  const char *loops[] = {"gcd", "rot"};
  for (size_t i = 0; i < 2; i++) {
    lt_fn_stats st;
    NIMBLE_ASSERT_OK(lt_function_stats(l.b, loops[i], &st));
    ck_assert_uint_eq(st.gotos_to_start, 1);
    ck_assert_uint_eq(st.self_invokes, 0);
  }
  done(&l);
}
END_TEST

START_TEST(test_a_polymorphic_map_applies_a_closure_over_a_built_list) {
  lowered l;
  lower_file(&l, "list_map.nir", "list_map_");
  /* range(4) = [4, 3, 2, 1]; times k = 3: sum 30, length 4. range(0) is
   * empty: sum 0, length 0. */
  float ns[] = {4.0f, 0.0f}, k = 3.0f, sums[] = {30.0f, 0.0f};
  int64_t lens[] = {4, 0};
  for (size_t c = 0; c < 2; c++) {
    lt_value in[2] = {f32_scalar(&ns[c]), f32_scalar(&k)}, out[2];
    uint32_t n = 0;
    NIMBLE_ASSERT_OK(lt_run(l.b, 0, in, 2, out, 2, &n));
    ck_assert_float_eq(out_f32(&out[0], 0), sums[c]);
    ck_assert_int_eq(out_i64(&out[1]), lens[c]);
    lt_values_free(out, n);
  }
  done(&l);
}
END_TEST

START_TEST(test_upper_bound_and_data_dependent_shapes_come_out_at_their_real_size) {
  lowered l;
  lower_file(&l, "dynamic.nir", "dynamic_");
  char sig[256];
  NIMBLE_ASSERT_OK(lt_entry_signature(l.b, "main", sig, sizeof sig));
  ck_assert_str_eq(sig, "main(x[6] f[?] s[2]) -> output0[?] output1[?,?]");
  /* unique of (3, 1, 6, 2, 5, 4) is (1, ..., 6). f of 6 elements
   * reshaped to (-1, 2) is 3 x 2. Repeated values are checked below. */
  int64_t x[] = {3, 1, 6, 2, 5, 4}, xs[] = {6}, sh[] = {-1, 2}, shs[] = {2}, fs[] = {6};
  float f[] = {0, 1, 2, 3, 4, 5};
  lt_value in[3] = {{LT_I64, 1, {0}, x}, f32s(f, 1, fs), {LT_I64, 1, {0}, sh}}, out[2];
  in[0].shape[0] = xs[0];
  in[2].shape[0] = shs[0];
  uint32_t n = 0;
  NIMBLE_ASSERT_OK(lt_run(l.b, 0, in, 3, out, 2, &n));
  ck_assert_uint_eq(n, 2);
  ck_assert_int_eq(out[0].ndim, 1);
  ck_assert_int_eq(out[0].shape[0], 6);
  for (int i = 0; i < 6; i++) ck_assert_int_eq(((int64_t *)out[0].data)[i], i + 1);
  ck_assert_int_eq(out[1].ndim, 2);
  ck_assert_int_eq(out[1].shape[0], 3);
  ck_assert_int_eq(out[1].shape[1], 2);
  for (int i = 0; i < 6; i++) ck_assert_float_eq(out_f32(&out[1], (size_t)i), (float)i);
  lt_values_free(out, n);
  /* With repeated values the real size (4) is below the bound (6): the
   * result is a view of the real-size prefix. */
  int64_t xr[] = {3, 1, 3, 4, 1, 2};
  in[0].data = xr;
  NIMBLE_ASSERT_OK(lt_run(l.b, 0, in, 3, out, 2, &n));
  ck_assert_int_eq(out[0].ndim, 1);
  ck_assert_int_eq(out[0].shape[0], 4);
  for (int i = 0; i < 4; i++) ck_assert_int_eq(((int64_t *)out[0].data)[i], i + 1);
  lt_values_free(out, n);
  /* The upper-bound kernel takes its shape output too: 2 outputs. */
  for (size_t i = 0; i < nimble_lower_num_primitives(l.r); i++) {
    const nimble_lower_primitive_t *p = nimble_lower_primitive_at(l.r, i);
    if (strcmp(p->symbol, "dynamic_fused_unique") == 0) ck_assert_uint_eq(p->num_outputs, 2);
    if (strcmp(p->symbol, "dynamic_fused_unique_shape") == 0) ck_assert_str_eq(p->shape_mode, "upper_bound");
    if (strcmp(p->symbol, "dynamic_fused_dyn_reshape_shape") == 0)
      ck_assert_str_eq(p->shape_mode, "data_dependent");
  }
  ck_assert_uint_eq(nimble_lower_num_primitives(l.r), 4);
  done(&l);
}
END_TEST

START_TEST(test_the_repository_programs_lower_into_bytecode_the_loader_accepts) {
  /* Every .nir program of the compiler suites and the Tree-LSTM example
   * (whose @main takes a tree, so another global is its entry here):
   * the loader checks every register, jump, call and kernel index. */
  static const struct {
    const char *path, *entry, *signature;
  } programs[] = {
      {"tests/compiler/programs/dynamic_mlp.nir", "main", NULL},
      {"tests/compiler/programs/edge_cases.nir", "main", NULL},
      {"tests/compiler/programs/layers.nir", "main", NULL},
      {"tests/compiler/programs/list_sum.nir", "main", "main(x[]) -> output0[] output1[]"},
      {"tests/compiler/programs/option_tree.nir", "main", NULL},
      {"tests/compiler/programs/attention.nir", "attention", NULL},
      {"tests/compiler/passes/programs/mlp3.nir", "main", "main(x[?,32] w1[64,32] b1[64] w2[64,64] b2[64] w3[10,64] b3[10]) -> output0[?,10]"},
      {"tests/compiler/passes/programs/mlp_layers.nir", "main", NULL},
      {"examples/treelstm.nir", "leaf_cell", NULL},
  };
  const char *src = getenv("NIMBLE_SOURCE_DIR");
  ck_assert_ptr_nonnull(src);
  for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", src, programs[i].path);
    lowered l;
    NIMBLE_ASSERT_OK(nimble_arena_create(&l.arena));
    NIMBLE_ASSERT_OK(nimble_nir_parse_file(l.arena, path, &l.m));
    nimble_typing *t;
    NIMBLE_ASSERT_OK(nimble_typing_infer_module(l.m, &t));
    NIMBLE_ASSERT_OK(nimble_passes_run_default(l.m, 2, true, NULL, NULL));
    l.b = lt_builder();
    nimble_lower_options_t o;
    nimble_lower_options_init(&o);
    o.entry = programs[i].entry;
    nimble_status_t s = nimble_lower_module(l.m, &o, l.b, &l.r);
    ck_assert_msg(s == NULL, "%s: %s", programs[i].path, s ? nimble_status_message(s) : "");
    s = lt_validate(l.b);
    ck_assert_msg(s == NULL, "%s: %s", programs[i].path, s ? nimble_status_message(s) : "");
    ck_assert_uint_gt(nimble_lower_num_primitives(l.r), 0);
    if (programs[i].signature) {
      char sig[512];
      NIMBLE_ASSERT_OK(lt_entry_signature(l.b, programs[i].entry, sig, sizeof sig));
      ck_assert_str_eq(sig, programs[i].signature);
    }
    done(&l);
  }
}
END_TEST

/* ---- names and errors --------------------------------------------------- */

START_TEST(test_mangling_turns_dots_into_underscores_and_escapes_other_bytes) {
  char buf[64];
  ck_assert(nimble_lower_mangle(NULL, "fused.add.1", buf, sizeof buf));
  ck_assert_str_eq(buf, "nimble_k_fused_add_1");
  ck_assert(nimble_lower_mangle("m_", "fused.a-b", buf, sizeof buf));
  ck_assert_str_eq(buf, "m_fused_a_x2db");
  ck_assert(!nimble_lower_mangle(NULL, "fused.a_rather_long_name", buf, 12));
  ck_assert_uint_eq(strlen(buf), 11);
}
END_TEST

static const char kHandWritten[] =
    "def @\"fused.a_b\"(%p0: Tensor[(2,), float32]) -> Tensor[(2,), float32] { negative(%p0) }\n"
    "def @\"fused.a.b\"(%p0: Tensor[(2,), float32]) -> Tensor[(2,), float32] { multiply(%p0, 2.0) }\n"
    "def @main(%x: Tensor[(2,), float32]) {\n"
    "  let %s = alloc_storage(16, alignment=64);\n"
    "  let %y = alloc_tensor(%s, 0, shape=[2], dtype=\"float32\");\n"
    "  let %u = invoke(%x, %y, kernel=\"fused.a_b\", num_outputs=1);\n"
    "  let %z = alloc_tensor(%s, 8, shape=[2], dtype=\"float32\");\n"
    "  let %v = invoke(%y, %z, kernel=\"fused.a.b\", num_outputs=1);\n"
    "  let %k = kill(%y);\n"
    "  %z\n"
    "}\n";

START_TEST(test_hand_written_explicit_memory_lowers_and_names_colliding_kernels_apart) {
  lowered l;
  parse_text(&l, "hand.nir", kHandWritten);
  l.b = lt_builder();
  nimble_lower_options_t o;
  nimble_lower_options_init(&o);
  o.symbol_prefix = "hand_";
  NIMBLE_ASSERT_OK(nimble_lower_module(l.m, &o, l.b, &l.r));
  ck_assert_uint_eq(nimble_lower_num_primitives(l.r), 2);
  ck_assert_str_eq(nimble_lower_primitive_at(l.r, 0)->symbol, "hand_fused_a_b");
  ck_assert_str_eq(nimble_lower_primitive_at(l.r, 1)->symbol, "hand_fused_a_b_2");
  ck_assert_str_eq(nimble_lower_primitive_at(l.r, 1)->name, "fused.a.b");
  /* z = 2 * -x, at byte 8 of the same storage as y. */
  float x[] = {1.0f, -3.0f};
  int64_t xs[] = {2};
  lt_value in = f32s(x, 1, xs), out;
  uint32_t n = 0;
  NIMBLE_ASSERT_OK(lt_run(l.b, 0, &in, 1, &out, 1, &n));
  ck_assert_float_eq(out_f32(&out, 0), -2.0f);
  ck_assert_float_eq(out_f32(&out, 1), 6.0f);
  lt_values_free(&out, n);
  lt_fn_stats st;
  NIMBLE_ASSERT_OK(lt_function_stats(l.b, "main", &st));
  ck_assert_uint_eq(st.count[NIMBLE_OP_ALLOC_STORAGE], 1);
  ck_assert_uint_eq(st.count[NIMBLE_OP_ALLOC_TENSOR], 2);
  ck_assert_uint_eq(st.count[NIMBLE_OP_INVOKE_PACKED], 2);
  ck_assert_uint_eq(st.count[NIMBLE_OP_KILL_REGISTER], 1);
  done(&l);
}
END_TEST

START_TEST(test_a_kernel_invoked_with_two_output_counts_is_refused) {
  lowered l;
  parse_text(&l, "twice.nir",
             "def @\"fused.n\"(%p0: Tensor[(2,), float32]) -> Tensor[(2,), float32] { negative(%p0) }\n"
             "def @main(%x: Tensor[(2,), float32]) {\n"
             "  let %s = alloc_storage(16);\n"
             "  let %y = alloc_tensor(%s, 0, shape=[2]);\n"
             "  let %u = invoke(%x, %y, kernel=\"fused.n\", num_outputs=1);\n"
             "  let %v = invoke(%x, %y, kernel=\"fused.n\", num_outputs=2);\n"
             "  %y\n"
             "}\n");
  l.b = lt_builder();
  NIMBLE_ASSERT_ERROR(nimble_lower_module(l.m, NULL, l.b, NULL), NIMBLE_INVALID_ARGUMENT,
                      "primitive 'fused.n' is invoked with 2 outputs here and 1 before");
  done(&l);
}
END_TEST

START_TEST(test_a_function_literal_or_a_primitive_call_left_by_partial_passes_is_refused) {
  lowered l;
  parse_text(&l, "lit.nir",
             "def @main(%x: Tensor[(2,), float32]) {\n"
             "  let %f = fn (%v: Tensor[(2,), float32]) -> Tensor[(2,), float32] { negative(%v) };\n"
             "  %f(%x)\n"
             "}\n");
  NIMBLE_ASSERT_OK(nimble_passes_to_anf(l.m));
  l.b = lt_builder();
  NIMBLE_ASSERT_ERROR(nimble_lower_module(l.m, NULL, l.b, NULL), NIMBLE_UNIMPLEMENTED,
                      "run lift_lambdas before lowering");
  done(&l);
  parse_text(&l, "fused.nir", "def @main(%x: Tensor[(2,), float32]) { negative(%x) }\n");
  NIMBLE_ASSERT_OK(nimble_passes_to_anf(l.m));
  NIMBLE_ASSERT_OK(nimble_passes_fuse_ops(l.m));
  l.b = lt_builder();
  NIMBLE_ASSERT_ERROR(nimble_lower_module(l.m, NULL, l.b, NULL), NIMBLE_UNIMPLEMENTED,
                      "run manifest_memory before lowering");
  done(&l);
}
END_TEST

START_TEST(test_lowering_before_the_passes_names_the_operator_left) {
  lowered l;
  parse_text(&l, "raw.nir", "def @main(%x: Tensor[(2,), float32]) { add(%x, %x) }\n");
  nimble_typing *t;
  NIMBLE_ASSERT_OK(nimble_typing_infer_module(l.m, &t));
  l.b = lt_builder();
  NIMBLE_ASSERT_ERROR(nimble_lower_module(l.m, NULL, l.b, NULL), NIMBLE_UNIMPLEMENTED,
                      "operator 'add' outside a primitive function");
  done(&l);
}
END_TEST

START_TEST(test_a_missing_entry_and_a_bad_prefix_are_refused) {
  lowered l;
  parse_text(&l, "f.nir", "def @f(%x: Tensor[(2,), float32]) { %x }\n");
  l.b = lt_builder();
  NIMBLE_ASSERT_ERROR(nimble_lower_module(l.m, NULL, l.b, NULL), NIMBLE_NOT_FOUND, "no global @main");
  nimble_lower_options_t o;
  nimble_lower_options_init(&o);
  o.entry = "f";
  o.symbol_prefix = "bad-prefix";
  NIMBLE_ASSERT_ERROR(nimble_lower_module(l.m, &o, l.b, NULL), NIMBLE_INVALID_ARGUMENT, "bad-prefix");
  done(&l);
}
END_TEST

START_TEST(test_an_entry_returning_an_adt_is_refused_with_its_type) {
  lowered l;
  parse_text(&l, "adt.nir",
             "type Box { B(Tensor[(), float32]) }\n"
             "def @main(%x: Tensor[(), float32]) -> Box { B(%x) }\n");
  l.b = lt_builder();
  NIMBLE_ASSERT_ERROR(nimble_lower_module(l.m, NULL, l.b, NULL), NIMBLE_UNIMPLEMENTED,
                      "entry 'main': output 'output0' has type Box");
  done(&l);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("lower_programs");
  TCase *tc = tcase_create("programs");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_factorial_and_fibonacci_run_recursively_on_the_vm);
  tcase_add_test(tc, test_a_list_built_by_the_program_sums_to_the_triangle_number);
  tcase_add_test(tc, test_a_fold_over_a_tree_adds_its_leaves);
  tcase_add_test(tc, test_closures_capture_values_and_globals_pass_as_closures);
  tcase_add_test(tc, test_if_takes_both_branches);
  tcase_add_test(tc, test_a_loop_of_ten_thousand_iterations_runs_in_constant_frames);
  tcase_add_test(tc, test_an_mlp_with_a_symbolic_batch_runs_at_batch_1_3_and_64);
  tcase_add_test(tc, test_the_kernel_list_names_each_primitive_and_shape_function);
  tcase_add_test(tc, test_nested_patterns_with_wildcards_pick_the_first_matching_arm);
  tcase_add_test(tc, test_a_value_no_arm_matches_stops_at_fatal_naming_the_function);
  tcase_add_test(tc, test_a_long_let_chain_keeps_few_registers);
  tcase_add_test(tc, test_self_tail_calls_that_permute_their_parameters_move_them_in_parallel);
  tcase_add_test(tc, test_a_polymorphic_map_applies_a_closure_over_a_built_list);
  tcase_add_test(tc, test_upper_bound_and_data_dependent_shapes_come_out_at_their_real_size);
  tcase_add_test(tc, test_the_repository_programs_lower_into_bytecode_the_loader_accepts);
  suite_add_tcase(s, tc);
  TCase *te = tcase_create("errors");
  tcase_add_test(te, test_mangling_turns_dots_into_underscores_and_escapes_other_bytes);
  tcase_add_test(te, test_lowering_before_the_passes_names_the_operator_left);
  tcase_add_test(te, test_a_missing_entry_and_a_bad_prefix_are_refused);
  tcase_add_test(te, test_an_entry_returning_an_adt_is_refused_with_its_type);
  tcase_add_test(te, test_hand_written_explicit_memory_lowers_and_names_colliding_kernels_apart);
  tcase_add_test(te, test_a_kernel_invoked_with_two_output_counts_is_refused);
  tcase_add_test(te, test_a_function_literal_or_a_primitive_call_left_by_partial_passes_is_refused);
  suite_add_tcase(s, te);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
