/* The VM runs real programs: arithmetic through kernels, recursion,
 * closures, ADTs, dynamic shapes, loops, views and copies. Every result is
 * checked against a value computed by hand. */
#include <stdlib.h>
#include <string.h>

#include "rt_test_util.h"

/* ---- Arithmetic ---------------------------------------------------------- */

/* main(a: f32[4], b: f32[4]) -> a + b */
static nimble_executable *build_vadd(int64_t n) {
  nimble_executable_builder *b = rt_builder();
  int64_t k = rt_kernel(b, "vadd_f32");
  uint32_t f = rt_function(b, "main", 2, 6);
  int64_t shape[1] = {n};
  rt_emit_alloc(b, f, 2, 3, 4, RT_F32, 1, shape);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 0, 1, 2);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  nimble_tensor_info_t in[2] = {rt_info("a", RT_F32, 1, shape, NULL), rt_info("b", RT_F32, 1, shape, NULL)};
  nimble_tensor_info_t out = rt_info("c", RT_F32, 1, shape, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 2, &out, 1));
  rt_info_free(&in[0]);
  rt_info_free(&in[1]);
  rt_info_free(&out);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  return exe;
}

START_TEST(test_vector_add_matches_hand_computed_sums) {
  nimble_executable *exe = build_vadd(4);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  nimble_executable_release(exe); /* the VM keeps its own reference */
  float a[4] = {1, 2, 3, 4}, bb[4] = {10, 20, 30, 40};
  int64_t shape[1] = {4};
  DLTensor ta = rt_tensor(a, RT_F32, 1, shape), tb = rt_tensor(bb, RT_F32, 1, shape);
  NIMBLE_ASSERT_OK(nimble_vm_set_input_by_name(vm, "main", "a", &ta));
  NIMBLE_ASSERT_OK(nimble_vm_set_input_by_name(vm, "main", "b", &tb));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *c;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &c));
  const float *y = c->dl_tensor.data;
  ck_assert_float_eq(y[0], 11);
  ck_assert_float_eq(y[1], 22);
  ck_assert_float_eq(y[2], 33);
  ck_assert_float_eq(y[3], 44);
  ck_assert_int_eq(c->dl_tensor.ndim, 1);
  ck_assert_int_eq(c->dl_tensor.shape[0], 4);
  ck_assert_int_eq(c->dl_tensor.device.device_type, kDLCPU);
  /* The output outlives the VM (and so the executable). */
  nimble_vm_destroy(vm);
  ck_assert_float_eq(y[3], 44);
  c->deleter(c);
}
END_TEST

START_TEST(test_parallel_vector_add_over_four_threads_is_exact) {
  enum { N = 100000 };
  nimble_executable *exe = build_vadd(N);
  nimble_vm_options_t opt;
  nimble_vm_options_init(&opt);
  opt.num_threads = 4;
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, &opt, &vm));
  float *a = malloc(N * sizeof(float)), *bb = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) {
    a[i] = (float)i;
    bb[i] = (float)(2 * i);
  }
  int64_t shape[1] = {N};
  for (int round = 0; round < 5; round++) {
    DLTensor ta = rt_tensor(a, RT_F32, 1, shape), tb = rt_tensor(bb, RT_F32, 1, shape);
    NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &ta));
    NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &tb));
    NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
    DLManagedTensor *c;
    NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &c));
    const float *y = c->dl_tensor.data;
    for (int i = 0; i < N; i++) ck_assert_float_eq(y[i], (float)(3 * i));
    c->deleter(c);
  }
  free(a);
  free(bb);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_matmul_matches_hand_computed_product) {
  nimble_executable_builder *b = rt_builder();
  int64_t k = rt_kernel(b, "matmul_f32");
  uint32_t f = rt_function(b, "main", 2, 6);
  int64_t sa[2] = {2, 3}, sb[2] = {3, 2}, sc[2] = {2, 2};
  rt_emit_alloc(b, f, 2, 3, 4, RT_F32, 2, sc);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 0, 1, 2);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  nimble_tensor_info_t in[2] = {rt_info("A", RT_F32, 2, sa, NULL), rt_info("B", RT_F32, 2, sb, NULL)};
  nimble_tensor_info_t out = rt_info("C", RT_F32, 2, sc, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 2, &out, 1));
  rt_info_free(&in[0]);
  rt_info_free(&in[1]);
  rt_info_free(&out);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {7, 8, 9, 10, 11, 12};
  DLTensor ta = rt_tensor(A, RT_F32, 2, sa), tb = rt_tensor(B, RT_F32, 2, sb);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &ta));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &tb));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *c;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &c));
  const float *y = c->dl_tensor.data;
  /* [[1*7+2*9+3*11, 1*8+2*10+3*12], [4*7+5*9+6*11, 4*8+5*10+6*12]] */
  ck_assert_float_eq(y[0], 58);
  ck_assert_float_eq(y[1], 64);
  ck_assert_float_eq(y[2], 139);
  ck_assert_float_eq(y[3], 154);
  c->deleter(c);
  /* The workspace the kernel borrowed went back to the pool. */
  nimble_memory_stats_t st;
  NIMBLE_ASSERT_OK(nimble_vm_memory_stats(vm, kDLCPU, &st));
  ck_assert_uint_eq(st.bytes_in_use, 0);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_kernel_env_reports_its_size_and_version) {
  nimble_executable_builder *b = rt_builder();
  int64_t k = rt_kernel(b, "env_probe");
  uint32_t f = rt_function(b, "main", 0, 4);
  int64_t s3[1] = {3};
  rt_emit_alloc(b, f, 0, 1, 2, RT_I64, 1, s3);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  nimble_tensor_info_t out = rt_info("probe", RT_I64, 1, s3, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, NULL, 0, &out, 1));
  rt_info_free(&out);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *o;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &o));
  const int64_t *p = o->dl_tensor.data;
  ck_assert_int_eq(p[0], (int64_t)sizeof(nimble_kernel_env_t));
  ck_assert_int_eq(p[1], NIMBLE_KERNEL_ABI_VERSION);
  /* sgemm NULL iff NIMBLE_SGEMM=none: without a BLAS the own kernels fill
   * the slot. */
  const char *want = getenv("NIMBLE_SGEMM");
  ck_assert_int_eq(p[2], want && strcmp(want, "none") == 0);
  o->deleter(o);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

/* ---- Recursion ----------------------------------------------------------- */

/* fact(n) = n == 0 ? 1 : n * fact(n - 1), scalars through kernels. */
static nimble_executable *build_factorial(void) {
  nimble_executable_builder *b = rt_builder();
  int64_t sub = rt_kernel(b, "sub_i64"), mul = rt_kernel(b, "mul_i64");
  uint32_t f = rt_function(b, "fact", 1, 10);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, 0);        /* 0 */
  RT_EMIT(b, f, NIMBLE_OP_IF, 0, 1, 1, 3);           /* 1: n == 0 ? 2 : 4 */
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 2, 1);        /* 2 */
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);                   /* 3 */
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 2, 1);        /* 4 */
  rt_emit_alloc(b, f, 3, 5, 6, RT_I64, 0, NULL);     /* n - 1 */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, sub, 1, 0, 2, 3);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE, 4, f, 3);          /* fact(n - 1) */
  rt_emit_alloc(b, f, 7, 5, 6, RT_I64, 0, NULL);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, mul, 1, 0, 4, 7);
  RT_EMIT(b, f, NIMBLE_OP_RET, 7);
  rt_add_scalar_entry(b, "fact", f, 1);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  return exe;
}

START_TEST(test_factorial_recurses_through_invoke_and_if) {
  nimble_executable *exe = build_factorial();
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  int64_t expect = 1;
  for (int64_t n = 0; n <= 20; n++) {
    if (n) expect *= n;
    ck_assert_int_eq(rt_run_i64(vm, "fact", &n, 1), expect);
  }
  ck_assert_int_eq(expect, 2432902008176640000LL); /* 20! */
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

/* fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2) */
static nimble_executable *build_fibonacci(void) {
  nimble_executable_builder *b = rt_builder();
  int64_t sub = rt_kernel(b, "sub_i64"), add = rt_kernel(b, "add_i64"), lt = rt_kernel(b, "lt_i64");
  uint32_t f = rt_function(b, "fib", 1, 14);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, 2);
  rt_emit_alloc(b, f, 2, 12, 13, RT_I64, 0, NULL);   /* pcs 1-4 */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, lt, 1, 0, 1, 2); /* 5: r2 = n < 2 */
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 3, 1);        /* 6 */
  RT_EMIT(b, f, NIMBLE_OP_IF, 2, 3, 1, 2);           /* 7: ? 8 : 9 */
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);                   /* 8 */
  rt_emit_alloc(b, f, 4, 12, 13, RT_I64, 0, NULL);   /* 9-12 */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, sub, 1, 0, 3, 4); /* n - 1 */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE, 5, f, 4);
  rt_emit_alloc(b, f, 6, 12, 13, RT_I64, 0, NULL);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, sub, 1, 0, 1, 6); /* n - 2 */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE, 7, f, 6);
  rt_emit_alloc(b, f, 8, 12, 13, RT_I64, 0, NULL);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, add, 1, 5, 7, 8);
  RT_EMIT(b, f, NIMBLE_OP_RET, 8);
  rt_add_scalar_entry(b, "fib", f, 1);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  return exe;
}

START_TEST(test_fibonacci_recurses_twice_per_call) {
  static const int64_t fib[] = {0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987,
                                1597, 2584, 4181, 6765};
  nimble_executable *exe = build_fibonacci();
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  for (int64_t n = 0; n <= 20; n++) ck_assert_int_eq(rt_run_i64(vm, "fib", &n, 1), fib[n]);
  nimble_memory_stats_t st;
  NIMBLE_ASSERT_OK(nimble_vm_memory_stats(vm, kDLCPU, &st));
  ck_assert_uint_eq(st.bytes_in_use, 0);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

/* ---- Closures ------------------------------------------------------------ */

START_TEST(test_closures_capture_values_and_are_applied_twice) {
  nimble_executable_builder *b = rt_builder();
  int64_t add = rt_kernel(b, "add_i64");
  /* add(x, y) = x + y */
  uint32_t fadd = rt_function(b, "add", 2, 5);
  rt_emit_alloc(b, fadd, 2, 3, 4, RT_I64, 0, NULL);
  RT_EMIT(b, fadd, NIMBLE_OP_INVOKE_PACKED, add, 1, 0, 1, 2);
  RT_EMIT(b, fadd, NIMBLE_OP_RET, 2);
  /* make_adder(x) = closure add(x, _) */
  uint32_t fmake = rt_function(b, "make_adder", 1, 2);
  RT_EMIT(b, fmake, NIMBLE_OP_ALLOC_CLOSURE, 1, fadd, 0);
  RT_EMIT(b, fmake, NIMBLE_OP_RET, 1);
  /* twice(g, v) = g(g(v)) */
  uint32_t ftwice = rt_function(b, "twice", 2, 4);
  RT_EMIT(b, ftwice, NIMBLE_OP_INVOKE_CLOSURE, 2, 0, 1);
  RT_EMIT(b, ftwice, NIMBLE_OP_INVOKE_CLOSURE, 3, 0, 2);
  RT_EMIT(b, ftwice, NIMBLE_OP_RET, 3);
  /* main(a, b) = twice(make_adder(b), a) = a + 2b */
  uint32_t fmain = rt_function(b, "main", 2, 4);
  RT_EMIT(b, fmain, NIMBLE_OP_INVOKE, 2, fmake, 1);
  RT_EMIT(b, fmain, NIMBLE_OP_KILL_REGISTER, 1); /* the closure keeps b alive */
  RT_EMIT(b, fmain, NIMBLE_OP_INVOKE, 3, ftwice, 2, 0);
  RT_EMIT(b, fmain, NIMBLE_OP_RET, 3);
  rt_add_scalar_entry(b, "main", fmain, 2);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  int64_t in[2] = {5, 100};
  ck_assert_int_eq(rt_run_i64(vm, "main", in, 2), 205);
  in[0] = -7;
  in[1] = 3;
  ck_assert_int_eq(rt_run_i64(vm, "main", in, 2), -1);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

/* ---- ADTs ---------------------------------------------------------------- */

enum { NIL = 0, CONS = 1, LEAF = 0, NODE = 1 };

START_TEST(test_sum_of_a_list_walks_cons_cells) {
  nimble_executable_builder *b = rt_builder();
  int64_t add = rt_kernel(b, "add_i64");
  /* sum(l) = tag(l) == NIL ? 0 : head(l) + sum(tail(l)) */
  uint32_t fsum = rt_function(b, "sum", 1, 9);
  RT_EMIT(b, fsum, NIMBLE_OP_GET_TAG, 1, 0);          /* 0 */
  RT_EMIT(b, fsum, NIMBLE_OP_LOAD_CONSTI, 2, NIL);    /* 1 */
  RT_EMIT(b, fsum, NIMBLE_OP_IF, 1, 2, 1, 3);         /* 2: ? 3 : 5 */
  RT_EMIT(b, fsum, NIMBLE_OP_LOAD_CONSTI, 3, 0);      /* 3 */
  RT_EMIT(b, fsum, NIMBLE_OP_RET, 3);                 /* 4 */
  RT_EMIT(b, fsum, NIMBLE_OP_GET_FIELD, 3, 0, 0);     /* 5: head */
  RT_EMIT(b, fsum, NIMBLE_OP_GET_FIELD, 4, 0, 1);     /* tail */
  RT_EMIT(b, fsum, NIMBLE_OP_INVOKE, 5, fsum, 4);
  rt_emit_alloc(b, fsum, 6, 7, 8, RT_I64, 0, NULL);
  RT_EMIT(b, fsum, NIMBLE_OP_INVOKE_PACKED, add, 1, 3, 5, 6);
  RT_EMIT(b, fsum, NIMBLE_OP_RET, 6);
  /* main(a, b, c) = sum([a, b, c]) */
  uint32_t fmain = rt_function(b, "main", 3, 8);
  RT_EMIT(b, fmain, NIMBLE_OP_ALLOC_ADT, 3, NIL);
  RT_EMIT(b, fmain, NIMBLE_OP_ALLOC_ADT, 4, CONS, 2, 3);
  RT_EMIT(b, fmain, NIMBLE_OP_ALLOC_ADT, 5, CONS, 1, 4);
  RT_EMIT(b, fmain, NIMBLE_OP_ALLOC_ADT, 6, CONS, 0, 5);
  RT_EMIT(b, fmain, NIMBLE_OP_INVOKE, 7, fsum, 6);
  RT_EMIT(b, fmain, NIMBLE_OP_RET, 7);
  rt_add_scalar_entry(b, "main", fmain, 3);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  int64_t in[3] = {5, 7, 11};
  ck_assert_int_eq(rt_run_i64(vm, "main", in, 3), 23);
  in[1] = -100;
  ck_assert_int_eq(rt_run_i64(vm, "main", in, 3), -84);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_fold_over_a_tree_applies_the_given_closure) {
  nimble_executable_builder *b = rt_builder();
  int64_t add = rt_kernel(b, "add_i64"), mul = rt_kernel(b, "mul_i64");
  uint32_t fadd = rt_function(b, "add", 2, 5), fmul = rt_function(b, "mul", 2, 5);
  rt_emit_alloc(b, fadd, 2, 3, 4, RT_I64, 0, NULL);
  RT_EMIT(b, fadd, NIMBLE_OP_INVOKE_PACKED, add, 1, 0, 1, 2);
  RT_EMIT(b, fadd, NIMBLE_OP_RET, 2);
  rt_emit_alloc(b, fmul, 2, 3, 4, RT_I64, 0, NULL);
  RT_EMIT(b, fmul, NIMBLE_OP_INVOKE_PACKED, mul, 1, 0, 1, 2);
  RT_EMIT(b, fmul, NIMBLE_OP_RET, 2);
  /* fold(g, t) = Leaf v -> v | Node l r -> g(fold(g, l), fold(g, r)) */
  uint32_t ffold = rt_function(b, "fold", 2, 9);
  RT_EMIT(b, ffold, NIMBLE_OP_GET_TAG, 2, 1);          /* 0 */
  RT_EMIT(b, ffold, NIMBLE_OP_LOAD_CONSTI, 3, LEAF);   /* 1 */
  RT_EMIT(b, ffold, NIMBLE_OP_IF, 2, 3, 1, 3);         /* 2: ? 3 : 5 */
  RT_EMIT(b, ffold, NIMBLE_OP_GET_FIELD, 4, 1, 0);     /* 3 */
  RT_EMIT(b, ffold, NIMBLE_OP_RET, 4);                 /* 4 */
  RT_EMIT(b, ffold, NIMBLE_OP_GET_FIELD, 4, 1, 0);     /* 5: left */
  RT_EMIT(b, ffold, NIMBLE_OP_GET_FIELD, 5, 1, 1);     /* right */
  RT_EMIT(b, ffold, NIMBLE_OP_INVOKE, 6, ffold, 0, 4);
  RT_EMIT(b, ffold, NIMBLE_OP_INVOKE, 7, ffold, 0, 5);
  RT_EMIT(b, ffold, NIMBLE_OP_INVOKE_CLOSURE, 8, 0, 6, 7);
  RT_EMIT(b, ffold, NIMBLE_OP_RET, 8);
  /* main(a, b, c, use_mul) = fold(use_mul ? mul : add, Node(Node(a, b), c)) */
  uint32_t fmain = rt_function(b, "main", 4, 12);
  RT_EMIT(b, fmain, NIMBLE_OP_ALLOC_ADT, 4, LEAF, 0);
  RT_EMIT(b, fmain, NIMBLE_OP_ALLOC_ADT, 5, LEAF, 1);
  RT_EMIT(b, fmain, NIMBLE_OP_ALLOC_ADT, 6, LEAF, 2);
  RT_EMIT(b, fmain, NIMBLE_OP_ALLOC_ADT, 7, NODE, 4, 5);
  RT_EMIT(b, fmain, NIMBLE_OP_ALLOC_ADT, 8, NODE, 7, 6);
  RT_EMIT(b, fmain, NIMBLE_OP_LOAD_CONSTI, 9, 1);
  RT_EMIT(b, fmain, NIMBLE_OP_IF, 3, 9, 1, 3);         /* 6: ? 7 : 9 */
  RT_EMIT(b, fmain, NIMBLE_OP_ALLOC_CLOSURE, 10, fmul); /* 7 */
  RT_EMIT(b, fmain, NIMBLE_OP_GOTO, 2);                /* 8 */
  RT_EMIT(b, fmain, NIMBLE_OP_ALLOC_CLOSURE, 10, fadd); /* 9 */
  RT_EMIT(b, fmain, NIMBLE_OP_INVOKE, 11, ffold, 10, 8); /* 10 */
  RT_EMIT(b, fmain, NIMBLE_OP_RET, 11);
  rt_add_scalar_entry(b, "main", fmain, 4);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  int64_t in[4] = {2, 3, 7, 1};
  ck_assert_int_eq(rt_run_i64(vm, "main", in, 4), 42); /* (2 * 3) * 7 */
  in[3] = 0;
  ck_assert_int_eq(rt_run_i64(vm, "main", in, 4), 12); /* (2 + 3) + 7 */
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_an_entry_with_two_outputs_returns_a_tuple) {
  nimble_executable_builder *b = rt_builder();
  int64_t add = rt_kernel(b, "add_i64");
  uint32_t f = rt_function(b, "main", 2, 6);
  rt_emit_alloc(b, f, 2, 3, 4, RT_I64, 0, NULL);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, add, 1, 0, 1, 2);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_ADT, 5, 0, 2, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 5);
  nimble_tensor_info_t in[2] = {rt_info("x", RT_I64, 0, NULL, NULL), rt_info("y", RT_I64, 0, NULL, NULL)};
  nimble_tensor_info_t out[2] = {rt_info("sum", RT_I64, 0, NULL, NULL), rt_info("x_again", RT_I64, 0, NULL, NULL)};
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 2, out, 2));
  for (int i = 0; i < 2; i++) {
    rt_info_free(&in[i]);
    rt_info_free(&out[i]);
  }
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  int64_t x = 40, y = 2;
  DLTensor tx = rt_tensor(&x, RT_I64, 0, NULL), ty = rt_tensor(&y, RT_I64, 0, NULL);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &tx));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &ty));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  ck_assert_uint_eq(nimble_vm_num_outputs(vm), 2);
  DLManagedTensor *o0, *o1;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 1, &o1));
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &o0));
  ck_assert_int_eq(*(int64_t *)o0->dl_tensor.data, 42);
  ck_assert_int_eq(*(int64_t *)o1->dl_tensor.data, 40);
  /* An entry may hand an input back: the output views the caller's data. */
  ck_assert_ptr_eq(o1->dl_tensor.data, &x);
  o0->deleter(o0);
  o1->deleter(o1);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

/* ---- Dynamic shapes ------------------------------------------------------ */

/* main(x: f32[?n]) -> x + x, the output shaped by ShapeOf and allocated by
 * AllocTensorReg; its byte size is a shape function: shape * 4, computed by
 * a kernel against a constant from the pool. */
static nimble_executable *build_dynamic_double(void) {
  nimble_executable_builder *b = rt_builder();
  int64_t vadd = rt_kernel(b, "vadd_f32"), mul = rt_kernel(b, "mul_i64");
  int64_t four = 4, one[1] = {1};
  DLTensor c4 = rt_tensor(&four, RT_I64, 1, one);
  uint32_t kfour;
  NIMBLE_ASSERT_OK(nimble_builder_add_constant(b, &c4, &kfour));
  uint32_t f = rt_function(b, "main", 1, 10);
  RT_EMIT(b, f, NIMBLE_OP_SHAPE_OF, 1, 0);            /* [n] */
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONST, 2, kfour);      /* [4] */
  rt_emit_alloc(b, f, 3, 8, 9, RT_I64, 1, one);       /* bytes, shape [1] */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, mul, 1, 1, 2, 3);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 4, 3, 64, kDLCPU, 0, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 5, 0);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR_REG, 6, 4, 5, 1, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, vadd, 1, 0, 0, 6);
  RT_EMIT(b, f, NIMBLE_OP_RET, 6);
  const char *sym[1] = {"n"};
  nimble_tensor_info_t in = rt_info("x", RT_F32, 1, NULL, sym), out = rt_info("y", RT_F32, 1, NULL, sym);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, &in, 1, &out, 1));
  rt_info_free(&in);
  rt_info_free(&out);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  return exe;
}

START_TEST(test_dynamic_shapes_flow_through_shape_of_and_alloc_tensor_reg) {
  nimble_executable *exe = build_dynamic_double();
  const nimble_entry_info_t *e;
  NIMBLE_ASSERT_OK(nimble_executable_find_entry(exe, "main", &e));
  char buf[64];
  ck_assert_str_eq(nimble_format_declared_shape(&e->inputs[0], buf, sizeof buf), "[?n]");
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  static const int64_t lengths[] = {1, 5, 1000, 0, 37};
  for (size_t r = 0; r < sizeof lengths / sizeof lengths[0]; r++) {
    int64_t n = lengths[r];
    float *x = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = (float)i * 0.5f;
    int64_t shape[1] = {n};
    /* An empty tensor may come without data at all. */
    DLTensor tx = rt_tensor(n ? x : NULL, RT_F32, 1, shape);
    NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &tx));
    NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
    DLManagedTensor *y;
    NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &y));
    ck_assert_int_eq(y->dl_tensor.ndim, 1);
    ck_assert_int_eq(y->dl_tensor.shape[0], n);
    const float *py = y->dl_tensor.data;
    for (int64_t i = 0; i < n; i++) ck_assert_float_eq(py[i], (float)i);
    y->deleter(y);
    free(x);
  }
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

/* ---- Loops --------------------------------------------------------------- */

START_TEST(test_a_loop_from_if_and_goto_sums_one_to_n) {
  nimble_executable_builder *b = rt_builder();
  int64_t add = rt_kernel(b, "add_i64");
  /* i = 0; acc = 0; while (i != n) { i += 1; acc += i; } return acc */
  uint32_t f = rt_function(b, "main", 1, 5);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, 0);           /* 0: i */
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 2, 0);           /* 1: acc */
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 3, 1);           /* 2: one */
  RT_EMIT(b, f, NIMBLE_OP_IF, 1, 0, 4, 1);              /* 3: i == n ? 7 : 4 */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, add, 1, 1, 3, 1); /* 4: i += 1 (in place) */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, add, 1, 2, 1, 2); /* 5: acc += i */
  RT_EMIT(b, f, NIMBLE_OP_GOTO, -3);                    /* 6 */
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);                      /* 7 */
  rt_add_scalar_entry(b, "main", f, 1);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  int64_t n = 100;
  ck_assert_int_eq(rt_run_i64(vm, "main", &n, 1), 5050);
  n = 0;
  ck_assert_int_eq(rt_run_i64(vm, "main", &n, 1), 0);
  n = 100000;
  ck_assert_int_eq(rt_run_i64(vm, "main", &n, 1), 5000050000LL);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

/* LoadConsti into a register whose scalar nothing else holds may reuse
 * that object; one that a Move, an ADT or a kernel's in-place update has
 * reached must keep its value. r2 = 5 (moved from r1 before r1 is
 * reloaded), the ADT's field = 7, r1 = 13 after being loaded twice more;
 * then a loop of n steps reloads r6 = 3 and adds it in place to r5 each
 * time: 5 + 7 + 13 + 3n, computed by hand. */
START_TEST(test_load_consti_into_a_register_keeps_values_other_registers_hold) {
  nimble_executable_builder *b = rt_builder();
  int64_t add = rt_kernel(b, "add_i64");
  uint32_t f = rt_function(b, "main", 1, 8);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, 5);              /* 0 */
  RT_EMIT(b, f, NIMBLE_OP_MOVE, 2, 1);                     /* 1: r2 and r1 share the 5 */
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, 7);              /* 2: r2 must stay 5 */
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_ADT, 3, 0, 1);             /* 3: the ADT holds the 7 */
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, 11);             /* 4: the field must stay 7 */
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, 13);             /* 5: r1's 11 is its own */
  RT_EMIT(b, f, NIMBLE_OP_GET_FIELD, 4, 3, 0);             /* 6: r4 = 7 */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, add, 1, 2, 4, 2); /* 7: r2 += r4 (in place) */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, add, 1, 2, 1, 2); /* 8: r2 += r1 */
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 5, 0);              /* 9: i */
  RT_EMIT(b, f, NIMBLE_OP_IF, 5, 0, 7, 1);                 /* 10: i == n ? 17 : 11 */
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 6, 3);              /* 11: r6 = 3 */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, add, 1, 2, 6, 2); /* 12: r2 += 3 */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, add, 1, 6, 6, 6); /* 13: r6 = 6, in place: reloaded next */
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 7, 1);              /* 14 */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, add, 1, 5, 7, 5); /* 15: i += 1; back to 10 */
  RT_EMIT(b, f, NIMBLE_OP_GOTO, -6);                       /* 16 -> 10 */
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);                         /* 17 */
  rt_add_scalar_entry(b, "main", f, 1);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  int64_t n = 0;
  ck_assert_int_eq(rt_run_i64(vm, "main", &n, 1), 25);
  n = 1;
  ck_assert_int_eq(rt_run_i64(vm, "main", &n, 1), 28);
  n = 1000;
  ck_assert_int_eq(rt_run_i64(vm, "main", &n, 1), 3025);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

/* AllocTensor into a register whose tensor nothing else holds may turn
 * that object into the new view; one a Move reached must keep viewing its
 * storage. With S2 = 2a (through r3, then moved to r4), S6 = 3a (through a
 * new r3), r3 re-made over S2 and r8 over S6: r8 = r3 + r8 = 5a, by hand
 * (6a if r3 had kept S6's data, garbage if r4's view had been reused). */
START_TEST(test_alloc_tensor_into_a_register_keeps_views_other_registers_hold) {
  nimble_executable_builder *b = rt_builder();
  int64_t add = rt_kernel(b, "add_i64");
  uint32_t f = rt_function(b, "main", 1, 9);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, 8);                                 /* 0 */
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 2, 1, 64, kDLCPU, 0, kDLInt, 64, 1); /* 1: S2 */
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 6, 1, 64, kDLCPU, 0, kDLInt, 64, 1); /* 2: S6 */
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 5, 0);                                 /* 3: offset */
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR, 3, 2, 5, kDLInt, 64, 1);              /* 4: r3 over S2 */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, add, 1, 0, 0, 3);                    /* 5: S2 = 2a */
  RT_EMIT(b, f, NIMBLE_OP_MOVE, 4, 3);                                        /* 6: r4 shares it */
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR, 3, 6, 5, kDLInt, 64, 1);              /* 7: r3 over S6 */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, add, 1, 4, 0, 3);                    /* 8: S6 = 3a */
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR, 3, 2, 5, kDLInt, 64, 1);              /* 9: r3 over S2 */
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR, 8, 6, 5, kDLInt, 64, 1);              /* 10: r8 over S6 */
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, add, 1, 3, 8, 8);                    /* 11: S6 = 5a */
  RT_EMIT(b, f, NIMBLE_OP_RET, 8);                                            /* 12 */
  rt_add_scalar_entry(b, "main", f, 1);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  int64_t a = 7;
  ck_assert_int_eq(rt_run_i64(vm, "main", &a, 1), 35);
  a = -1000003;
  ck_assert_int_eq(rt_run_i64(vm, "main", &a, 1), -5000015);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

/* ---- Memory: KillRegister ------------------------------------------------ */

/* Allocates 1 MiB twice; with `kill` the first block is dropped in between
 * and the second allocation reuses it. */
static void run_two_allocations(int kill, nimble_memory_stats_t *st) {
  nimble_executable_builder *b = rt_builder();
  uint32_t f = rt_function(b, "main", 0, 4);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 0, 1 << 20);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 1, 0, 64, kDLCPU, 0, kDLFloat, 32, 1);
  if (kill) RT_EMIT(b, f, NIMBLE_OP_KILL_REGISTER, 1);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 2, 0, 64, kDLCPU, 0, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 3, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 3);
  rt_add_scalar_entry(b, "main", f, 0);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  ck_assert_int_eq(rt_run_i64(vm, "main", NULL, 0), 0);
  NIMBLE_ASSERT_OK(nimble_vm_memory_stats(vm, kDLCPU, st));
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}

START_TEST(test_kill_register_releases_storage_for_reuse) {
  nimble_memory_stats_t with_kill, without;
  run_two_allocations(1, &with_kill);
  run_two_allocations(0, &without);
  ck_assert_uint_eq(with_kill.system_allocations, 1);
  ck_assert_uint_eq(with_kill.pool_hits, 1);
  ck_assert_uint_eq(with_kill.peak_bytes_reserved, 1 << 20);
  ck_assert_uint_eq(without.system_allocations, 2);
  ck_assert_uint_eq(without.peak_bytes_reserved, 2 << 20);
  /* Frames release everything when the call ends. */
  ck_assert_uint_eq(with_kill.bytes_in_use, 0);
  ck_assert_uint_eq(without.bytes_in_use, 0);
}
END_TEST

/* ---- Views, copies, constants -------------------------------------------- */

START_TEST(test_reshape_makes_a_view_and_device_copy_makes_a_copy) {
  nimble_executable_builder *b = rt_builder();
  int64_t s32[1] = {2}, newshape[2] = {3, 2};
  DLTensor cs = rt_tensor(newshape, RT_I64, 1, s32);
  uint32_t kshape;
  NIMBLE_ASSERT_OK(nimble_builder_add_constant(b, &cs, &kshape));
  uint32_t f = rt_function(b, "main", 1, 5);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONST, 1, kshape);
  RT_EMIT(b, f, NIMBLE_OP_RESHAPE_TENSOR, 2, 0, 1);
  RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 3, 0, kDLCPU, 0);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_ADT, 4, 0, 2, 3);
  RT_EMIT(b, f, NIMBLE_OP_RET, 4);
  int64_t s23[2] = {2, 3};
  nimble_tensor_info_t in = rt_info("x", RT_F32, 2, s23, NULL);
  nimble_tensor_info_t out[2] = {rt_info("view", RT_F32, 2, newshape, NULL), rt_info("copy", RT_F32, 2, s23, NULL)};
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, &in, 1, out, 2));
  rt_info_free(&in);
  rt_info_free(&out[0]);
  rt_info_free(&out[1]);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  float x[6] = {1, 2, 3, 4, 5, 6};
  DLTensor tx = rt_tensor(x, RT_F32, 2, s23);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &tx));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *view, *copy;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &view));
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 1, &copy));
  ck_assert_ptr_eq(view->dl_tensor.data, x);
  ck_assert_int_eq(view->dl_tensor.shape[0], 3);
  ck_assert_int_eq(view->dl_tensor.shape[1], 2);
  ck_assert_ptr_ne(copy->dl_tensor.data, x);
  ck_assert_int_eq(memcmp(copy->dl_tensor.data, x, sizeof x), 0);
  view->deleter(view);
  copy->deleter(copy);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

/* weights() -> w: the constant WEIGHTS, returned as it is. */
static const float WEIGHTS[3] = {0.25f, -1.5f, 8.0f};

static nimble_executable *build_weights(void) {
  nimble_executable_builder *b = rt_builder();
  int64_t s3[1] = {3};
  DLTensor cw = rt_tensor((void *)WEIGHTS, RT_F32, 1, s3);
  uint32_t kw;
  NIMBLE_ASSERT_OK(nimble_builder_add_constant(b, &cw, &kw));
  uint32_t f = rt_function(b, "weights", 0, 1);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONST, 0, kw);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  nimble_tensor_info_t out = rt_info("w", RT_F32, 1, s3, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "weights", f, NULL, 0, &out, 1));
  rt_info_free(&out);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  return exe;
}

START_TEST(test_a_constant_output_outlives_its_executable) {
  nimble_executable *exe = build_weights();
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  nimble_executable_release(exe);
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "weights"));
  DLManagedTensor *o;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &o));
  nimble_vm_destroy(vm);
  ck_assert_uint_eq((uintptr_t)o->dl_tensor.data % 64, 0); /* the pool's alignment */
  ck_assert_int_eq(memcmp(o->dl_tensor.data, WEIGHTS, sizeof WEIGHTS), 0);
  o->deleter(o);
}
END_TEST

/* The constant an entry returns, loaded through the VM's own view of it
 * (docs/vm.md "Objects"), handed out on every call: outputs freed on
 * another thread while the VM goes on loading the same constant keep
 * their values (the tsan stage checks the counts' races). */
static void free_output(void *item, void *ctx) {
  (void)ctx;
  DLManagedTensor *o = item;
  o->deleter(o);
}

START_TEST(test_constant_outputs_freed_on_another_thread_while_the_vm_loads_it) {
  enum { CALLS = 400 };
  nimble_executable *exe = build_weights();
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  /* Every other output freed at once on the other thread, the rest kept
   * past the VM and the executable. */
  DLManagedTensor *kept[CALLS / 2];
  rt_handoff h;
  rt_handoff_start(&h, free_output, NULL);
  for (int i = 0; i < CALLS; i++) {
    DLManagedTensor *o;
    NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "weights"));
    NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &o));
    ck_assert_int_eq(memcmp(o->dl_tensor.data, WEIGHTS, sizeof WEIGHTS), 0);
    if (i % 2) rt_handoff_push(&h, o);
    else kept[i / 2] = o;
  }
  rt_handoff_finish(&h);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
  for (int i = 0; i < CALLS / 2; i++) {
    ck_assert_int_eq(memcmp(kept[i]->dl_tensor.data, WEIGHTS, sizeof WEIGHTS), 0);
    kept[i]->deleter(kept[i]);
  }
}
END_TEST

Suite *vm_programs_suite(void) {
  Suite *s = suite_create("vm_programs");
  TCase *tc = tcase_create("programs");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_vector_add_matches_hand_computed_sums);
  tcase_add_test(tc, test_parallel_vector_add_over_four_threads_is_exact);
  tcase_add_test(tc, test_matmul_matches_hand_computed_product);
  tcase_add_test(tc, test_kernel_env_reports_its_size_and_version);
  tcase_add_test(tc, test_factorial_recurses_through_invoke_and_if);
  tcase_add_test(tc, test_fibonacci_recurses_twice_per_call);
  tcase_add_test(tc, test_closures_capture_values_and_are_applied_twice);
  tcase_add_test(tc, test_sum_of_a_list_walks_cons_cells);
  tcase_add_test(tc, test_fold_over_a_tree_applies_the_given_closure);
  tcase_add_test(tc, test_an_entry_with_two_outputs_returns_a_tuple);
  tcase_add_test(tc, test_dynamic_shapes_flow_through_shape_of_and_alloc_tensor_reg);
  tcase_add_test(tc, test_a_loop_from_if_and_goto_sums_one_to_n);
  tcase_add_test(tc, test_load_consti_into_a_register_keeps_values_other_registers_hold);
  tcase_add_test(tc, test_alloc_tensor_into_a_register_keeps_views_other_registers_hold);
  tcase_add_test(tc, test_kill_register_releases_storage_for_reuse);
  tcase_add_test(tc, test_reshape_makes_a_view_and_device_copy_makes_a_copy);
  tcase_add_test(tc, test_a_constant_output_outlives_its_executable);
  tcase_add_test(tc, test_constant_outputs_freed_on_another_thread_while_the_vm_loads_it);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(vm_programs_suite()); }
