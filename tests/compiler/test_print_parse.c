/* Printer and parser: every test program reads back to the same IR
 * (print(parse(t)) == print(parse(print(parse(t)))) and structural
 * equality), and the printer writes the documented text form. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"

/* The round-trip property for one program text. */
static void check_round_trip(const char *name, const char *text) {
  nimble_arena *a;
  nimble_module *m1, *m2, *m3;
  char *p1, *p2, *p3;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  NIMBLE_ASSERT_OK(nimble_nir_parse(a, name, text, strlen(text), &m1));
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m1, &p1));
  NIMBLE_ASSERT_OK(nimble_nir_parse(a, "printed.nir", p1, strlen(p1), &m2));
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m2, &p2));
  ck_assert_msg(strcmp(p1, p2) == 0, "%s: printing is not stable:\n%s\n---\n%s", name, p1, p2);
  ck_assert_msg(nimble_ir_module_equal(m1, m2), "%s: reparsed module differs", name);
  NIMBLE_ASSERT_OK(nimble_nir_parse(a, "printed2.nir", p2, strlen(p2), &m3));
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m3, &p3));
  ck_assert_str_eq(p2, p3);
  ck_assert(nimble_ir_module_equal(m1, m3));
  /* Both parses type-check alike. */
  nimble_typing *t1, *t2;
  NIMBLE_ASSERT_OK(nimble_typing_infer_module(m1, &t1));
  NIMBLE_ASSERT_OK(nimble_typing_infer_module(m2, &t2));
  for (size_t i = 0; i < nimble_module_num_funcs(m1); i++) {
    const char *g = nimble_module_func_at(m1, i)->name;
    char x[1024], y[1024];
    ck_assert_str_eq(test_global_type(t1, g, x, sizeof x), test_global_type(t2, g, y, sizeof y));
  }
  free(p1);
  free(p2);
  free(p3);
  nimble_arena_destroy(a);
}

static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  ck_assert_ptr_nonnull(buf);
  ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

START_TEST(test_every_program_round_trips_through_the_printer) {
  char *dir = test_source_path("tests/compiler/programs");
  DIR *d = opendir(dir);
  ck_assert_msg(d != NULL, "cannot open %s", dir);
  int count = 0;
  struct dirent *ent;
  while ((ent = readdir(d))) {
    size_t n = strlen(ent->d_name);
    if (n < 5 || strcmp(ent->d_name + n - 4, ".nir") != 0) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
    char *text = read_all(path);
    check_round_trip(ent->d_name, text);
    free(text);
    count++;
  }
  closedir(d);
  free(dir);
  ck_assert_int_ge(count, 5);
}
END_TEST

START_TEST(test_the_treelstm_example_round_trips) {
  char *path = test_source_path("examples/treelstm.nir");
  char *text = read_all(path);
  check_round_trip("treelstm.nir", text);
  free(text);
  free(path);
}
END_TEST

START_TEST(test_printer_writes_the_documented_form) {
  const char *src =
      "type List[T] { Cons(T, List[T]), Nil }\n"
      "def @f(%x: Tensor[(?, n, 3), float32], %l: List[float32]) -> Tensor[(?, n, 3), float32] {\n"
      "  let %y = add(%x, 1.5); let %z: Tensor[(), int64] = 7;\n"
      "  if (true) { %y } else { multiply(%y, %y) } }\n";
  const char *want =
      "type List[T] {\n"
      "  Cons(T, List[T]),\n"
      "  Nil,\n"
      "}\n"
      "\n"
      "def @f(%x: Tensor[(?, n, 3), float32], %l: List[Tensor[(), float32]]) -> Tensor[(?, n, 3), float32] {\n"
      "  let %y = add(%x, 1.5);\n"
      "  let %z: Tensor[(), int64] = 7;\n"
      "  if (true) {\n"
      "    %y\n"
      "  } else {\n"
      "    multiply(%y, %y)\n"
      "  }\n"
      "}\n";
  nimble_arena *a;
  char *out;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  NIMBLE_ASSERT_OK(nimble_ir_print_module(test_parse(a, src), &out));
  ck_assert_str_eq(out, want);
  free(out);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_attributes_print_only_when_not_default) {
  nimble_arena *a;
  char *out;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m = test_parse(a,
      "def @f(%x: Tensor[(1, 2, 8, 8), float32], %w: Tensor[(4, 2, 3, 3), float32]) {"
      " conv2d(%x, %w, groups=1, strides=[2, 2], pads=[]) }");
  NIMBLE_ASSERT_OK(nimble_ir_print_expr(nimble_module_find_func(m, "f")->u.func.body, &out));
  ck_assert_str_eq(out, "conv2d(%x, %w, strides=[2, 2])");
  free(out);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_floats_print_so_that_they_read_back_exactly) {
  nimble_arena *a;
  char *out;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m = test_parse(a,
      "def @f() { (0.1, 1e-30, 3.0, 16777216.0, const[(2,), float64]{0.1, 1e300}, leaky_relu(1.0, alpha=0.2)) }");
  NIMBLE_ASSERT_OK(nimble_ir_print_expr(nimble_module_find_func(m, "f")->u.func.body, &out));
  ck_assert_str_eq(out, "(0.1, 1e-30, 3.0, 16777216.0, const[(2,), float64]{0.1, 1e+300}, leaky_relu(1.0, alpha=0.2))");
  free(out);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_built_ir_prints_and_parses_back_equal) {
  /* Build fn(%x) { let %y = sigmoid(%x); (%y, %y.shape) } with the API. */
  nimble_arena *a;
  nimble_module *m, *back;
  char *text;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  NIMBLE_ASSERT_OK(nimble_module_create(a, &m));
  nimble_dim_t dims[2] = {nimble_dim_any(), nimble_dim_const(8)};
  const nimble_expr *x = nimble_ir_var(a, "x", nimble_type_tensor(a, NIMBLE_DTYPE_FLOAT32, 2, dims), NULL);
  const nimble_expr *y = nimble_ir_var(a, "y", NULL, NULL);
  const nimble_expr *sig, *shape, *sum;
  NIMBLE_ASSERT_OK(nimble_ir_call_op(a, nimble_op_find("sigmoid"), 1, &x, NULL, 0, NULL, &sig));
  NIMBLE_ASSERT_OK(nimble_ir_call_op(a, nimble_op_find("shape_of"), 1, &y, NULL, 0, NULL, &shape));
  int64_t axes[1] = {1};
  nimble_named_attr_t attr = {"axes", {NIMBLE_ATTR_INTS, 0, 0, NULL, 1, axes}};
  NIMBLE_ASSERT_OK(nimble_ir_call_op(a, nimble_op_find("sum"), 1, &y, &attr, 1, NULL, &sum));
  const nimble_expr *fields[3] = {y, shape, sum};
  const nimble_expr *body = nimble_ir_let(a, y, sig, nimble_ir_tuple(a, 3, fields, NULL), NULL);
  NIMBLE_ASSERT_OK(nimble_module_add_func(m, "main", nimble_ir_func(a, 0, NULL, 1, &x, NULL, body, NULL)));
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &text));
  ck_assert_str_eq(text,
                   "def @main(%x: Tensor[(?, 8), float32]) {\n"
                   "  let %y = sigmoid(%x);\n"
                   "  (%y, shape_of(%y), sum(%y, axes=[1]))\n"
                   "}\n");
  NIMBLE_ASSERT_OK(nimble_nir_parse(a, "built.nir", text, strlen(text), &back));
  ck_assert(nimble_ir_module_equal(m, back));
  free(text);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_names_that_are_not_identifiers_print_quoted) {
  /* ONNX value names such as "input.1" or "onnx::Gemm_5" survive. */
  nimble_arena *a;
  nimble_module *m, *back;
  char *text;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  NIMBLE_ASSERT_OK(nimble_module_create(a, &m));
  const nimble_expr *x = nimble_ir_var(a, "input.1", nimble_type_scalar(a, NIMBLE_DTYPE_FLOAT32), NULL);
  const nimble_expr *y = nimble_ir_var(a, "onnx::Gemm \"5\"\\", NULL, NULL);
  const nimble_expr *e;
  NIMBLE_ASSERT_OK(nimble_ir_call_op(a, nimble_op_find("exp"), 1, &x, NULL, 0, NULL, &e));
  NIMBLE_ASSERT_OK(nimble_module_add_func(m, "main graph",
                                          nimble_ir_func(a, 0, NULL, 1, &x, NULL, nimble_ir_let(a, y, e, y, NULL), NULL)));
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &text));
  ck_assert_str_eq(text,
                   "def @\"main graph\"(%\"input.1\": Tensor[(), float32]) {\n"
                   "  let %\"onnx::Gemm \\\"5\\\"\\\\\" = exp(%\"input.1\");\n"
                   "  %\"onnx::Gemm \\\"5\\\"\\\\\"\n"
                   "}\n");
  NIMBLE_ASSERT_OK(nimble_nir_parse(a, "quoted.nir", text, strlen(text), &back));
  ck_assert(nimble_ir_module_equal(m, back));
  ck_assert_ptr_nonnull(nimble_module_find_func(back, "main graph"));
  free(text);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_equality_sees_renamed_variables_as_equal_and_changes_as_different) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m1 = test_parse(a, "def @f(%x: float32) { let %y = exp(%x); fn (%z: float32) { add(%y, %z) } }");
  nimble_module *m2 = test_parse(a, "def @f(%a: float32) { let %b = exp(%a); fn (%c: float32) { add(%b, %c) } }");
  nimble_module *m3 = test_parse(a, "def @f(%a: float32) { let %b = exp(%a); fn (%c: float32) { add(%c, %b) } }");
  nimble_module *m4 = test_parse(a, "def @f(%a: float32) { let %b = exp(%a); fn (%c: float32) { subtract(%b, %c) } }");
  nimble_module *m5 = test_parse(a, "def @f(%a: float32) { let %b = exp(%a); fn (%c: float64) { add(%b, %c) } }");
  ck_assert(nimble_ir_module_equal(m1, m2));
  ck_assert(!nimble_ir_module_equal(m1, m3));
  ck_assert(!nimble_ir_module_equal(m1, m4));
  ck_assert(!nimble_ir_module_equal(m1, m5));
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_shadowed_names_and_deep_let_chains_round_trip) {
  /* 5000 lets in a row: parsing, printing and checking do not recurse per
   * let. */
  size_t cap = 5000 * 40 + 200;
  char *text = malloc(cap);
  size_t n = (size_t)snprintf(text, cap, "def @f(%%x: Tensor[(?,), float32]) {\n");
  for (int i = 0; i < 5000; i++) n += (size_t)snprintf(text + n, cap - n, "  let %%x = add(%%x, 1.0);\n");
  snprintf(text + n, cap - n, "  %%x\n}\n");
  check_round_trip("deep.nir", text);
  free(text);
}
END_TEST

int main(void) {
  Suite *s = suite_create("print_parse");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_every_program_round_trips_through_the_printer);
  tcase_add_test(tc, test_the_treelstm_example_round_trips);
  tcase_add_test(tc, test_printer_writes_the_documented_form);
  tcase_add_test(tc, test_attributes_print_only_when_not_default);
  tcase_add_test(tc, test_floats_print_so_that_they_read_back_exactly);
  tcase_add_test(tc, test_built_ir_prints_and_parses_back_equal);
  tcase_add_test(tc, test_names_that_are_not_identifiers_print_quoted);
  tcase_add_test(tc, test_equality_sees_renamed_variables_as_equal_and_changes_as_different);
  tcase_add_test(tc, test_shadowed_names_and_deep_let_chains_round_trip);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
