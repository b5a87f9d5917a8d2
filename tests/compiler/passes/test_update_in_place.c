/* update_in_place: which scatters may write into their data tensor, and
 * where a copy must come first. Each expectation is read off the program
 * in the test by hand (who else can see the tensor, on which path); the
 * pass's statistics are checked against the printed result, and the
 * driver's suite test_update_in_place_run runs such programs for values. */
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"
#include "passes_test_util.h"

/* The loop every test uses: writes v * t into row t of Y for t < n. */
#define FILL                                                                                               \
  "def @fill(%t: Tensor[(), int64], %n: Tensor[(), int64], %Y: Tensor[(?, 3), float32],\n"              \
  "          %v: Tensor[(3,), float32]) -> Tensor[(?, 3), float32] {\n"                                    \
  "  if (less(%t, %n)) {\n"                                                                             \
  "    let %row = multiply(%v, cast(%t, dtype=\"float32\"));\n"                                            \
  "    let %Y2 = scatter_nd(%Y, reshape(%t, newshape=[1, 1]), expand_dims(%row, axis=0));\n"                \
  "    @fill(add(%t, 1), %n, %Y2, %v)\n"                                                                  \
  "  } else {\n"                                                                                        \
  "    %Y\n"                                                                                            \
  "  }\n"                                                                                               \
  "}\n"

typedef struct result {
  size_t in_place, copies; /* from the statistics */
  size_t printed_in_place, printed_copies; /* read off the printed module */
} result;

static size_t count(const char *text, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* to_anf, then update_in_place; checks types and that the result prints
 * and parses back. */
static result run(const char *program) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  pt_pass_fn anf = nimble_passes_to_anf;
  nimble_module *m = pt_run(a, program, &anf, 1);
  nimble_inplace_stats_t st;
  NIMBLE_ASSERT_OK(nimble_passes_update_in_place_stats(m, &st));
  nimble_typing *t;
  NIMBLE_ASSERT_OK(nimble_typing_infer_module(m, &t));
  char *text;
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &text));
  result r = {st.in_place, st.copies, count(text, "inplace=1"), count(text, "copy(")};
  nimble_arena *b;
  NIMBLE_ASSERT_OK(nimble_arena_create(&b));
  pt_parse(b, text);
  nimble_arena_destroy(b);
  ck_assert_uint_eq(r.in_place, r.printed_in_place);
  ck_assert_uint_eq(r.copies, r.printed_copies);
  free(text);
  nimble_arena_destroy(a);
  return r;
}

static void expect(const char *program, size_t in_place, size_t copies) {
  result r = run(program);
  ck_assert_msg(r.in_place == in_place && r.copies == copies, "want %zu in place, %zu copies; got %zu, %zu\n%s",
                in_place, copies, r.in_place, r.copies, program);
}

START_TEST(test_a_loop_over_a_fresh_tensor_updates_it_in_place_with_no_copy) {
  /* Y0 is made in main and handed over; in @fill, Y is used by the
   * scatter on the loop path and returned on the other. */
  expect(FILL "def @main(%x: Tensor[(?, 3), float32], %v: Tensor[(3,), float32]) -> Tensor[(?, 3), float32] {\n"
              "  let %Y0 = multiply(%x, 0.0);\n"
              "  @fill(0, take(shape_of(%x), 0), %Y0, %v)\n"
              "}\n",
         1, 0);
}
END_TEST

START_TEST(test_an_entry_input_handed_to_the_loop_is_copied_first) {
  /* main's parameter is the caller's memory. */
  expect(FILL "def @main(%x: Tensor[(?, 3), float32], %v: Tensor[(3,), float32]) -> Tensor[(?, 3), float32] {\n"
              "  @fill(0, take(shape_of(%x), 0), %x, %v)\n"
              "}\n",
         1, 1);
}
END_TEST

START_TEST(test_a_tensor_read_after_the_call_is_copied_first) {
  expect(FILL "def @main(%x: Tensor[(?, 3), float32], %v: Tensor[(3,), float32]) -> (Tensor[(?, 3), float32], "
              "Tensor[(?, 3), float32]) {\n"
              "  let %Y0 = multiply(%x, 2.0);\n"
              "  let %f = @fill(0, take(shape_of(%x), 0), %Y0, %v);\n"
              "  (%f, %Y0)\n"
              "}\n",
         1, 1);
}
END_TEST

START_TEST(test_one_tensor_handed_to_two_loops_is_copied_for_each) {
  expect(FILL "def @main(%x: Tensor[(?, 3), float32], %v: Tensor[(3,), float32]) -> (Tensor[(?, 3), float32], "
              "Tensor[(?, 3), float32]) {\n"
              "  let %Y0 = multiply(%x, 2.0);\n"
              "  let %n = take(shape_of(%x), 0);\n"
              "  let %a = @fill(0, %n, %Y0, %v);\n"
              "  let %b = @fill(1, %n, %Y0, %v);\n"
              "  (%a, %b)\n"
              "}\n",
         1, 2);
}
END_TEST

START_TEST(test_a_scatter_whose_data_is_read_later_on_its_path_makes_a_copy) {
  /* In main itself: %z is read by the tuple after the scatter. */
  expect("def @main(%x: Tensor[(2, 3), float32], %u: Tensor[(1, 3), float32]) -> (Tensor[(2, 3), float32], "
         "Tensor[(2, 3), float32]) {\n"
         "  let %z = multiply(%x, 2.0);\n"
         "  let %w = scatter_nd(%z, const[(1, 1), int64]{1}, %u);\n"
         "  (%w, %z)\n"
         "}\n",
         0, 0);
  /* ... and the same with the read in the other branch: in place. */
  expect("def @main(%x: Tensor[(2, 3), float32], %u: Tensor[(1, 3), float32], %p: Tensor[(), bool]) -> "
         "Tensor[(2, 3), float32] {\n"
         "  let %z = multiply(%x, 2.0);\n"
         "  if (%p) { scatter_nd(%z, const[(1, 1), int64]{1}, %u) } else { %z }\n"
         "}\n",
         1, 0);
}
END_TEST

START_TEST(test_a_view_a_constant_or_an_entry_input_is_never_updated) {
  /* A view shares its source's memory. */
  expect("def @main(%x: Tensor[(6,), float32], %u: Tensor[(1, 3), float32]) -> Tensor[(2, 3), float32] {\n"
         "  let %z = reshape(multiply(%x, 2.0), newshape=[2, 3]);\n"
         "  scatter_nd(%z, const[(1, 1), int64]{1}, %u)\n"
         "}\n",
         0, 0);
  expect("def @main(%x: Tensor[(2, 3), float32], %u: Tensor[(1, 3), float32]) -> Tensor[(2, 3), float32] {\n"
         "  scatter_nd(%x, const[(1, 1), int64]{1}, %u)\n"
         "}\n",
         0, 0);
  expect("def @main(%u: Tensor[(1, 3), float32]) -> Tensor[(2, 3), float32] {\n"
         "  scatter_nd(const[(2, 3), float32]{1, 2, 3, 4, 5, 6}, const[(1, 1), int64]{1}, %u)\n"
         "}\n",
         0, 0);
}
END_TEST

START_TEST(test_a_captured_tensor_is_never_updated_by_the_closure) {
  /* The closure may run twice: each run must see the original z. */
  expect("def @main(%x: Tensor[(2, 3), float32], %u: Tensor[(1, 3), float32]) -> Tensor[(2, 3), float32] {\n"
         "  let %z = multiply(%x, 2.0);\n"
         "  let %f = fn (%w: Tensor[(1, 3), float32]) -> Tensor[(2, 3), float32] {\n"
         "    scatter_nd(%z, const[(1, 1), int64]{0}, %w)\n"
         "  };\n"
         "  add(%f(%u), %f(%u))\n"
         "}\n",
         0, 0);
}
END_TEST

START_TEST(test_a_loop_used_as_a_value_keeps_its_parameters) {
  /* @fill escapes as a value: its callers are unknown, so its Y is never
   * owned; the scatter copies (no in place, no copies inserted). */
  expect(FILL "def @main(%x: Tensor[(?, 3), float32], %v: Tensor[(3,), float32]) -> Tensor[(?, 3), float32] {\n"
              "  let %g = @fill;\n"
              "  let %Y0 = multiply(%x, 0.0);\n"
              "  %g(0, take(shape_of(%x), 0), %Y0, %v)\n"
              "}\n",
         0, 0);
}
END_TEST

START_TEST(test_a_scatter_reading_its_data_twice_is_not_in_place) {
  /* The updates are a view of the data itself. */
  expect("def @main(%x: Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] {\n"
         "  let %z = multiply(%x, 2.0);\n"
         "  scatter_nd(%z, const[(1, 1), int64]{1}, strided_slice(%z, begin=[0], end=[1], axes=[0]))\n"
         "}\n",
         0, 0);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("update_in_place");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_a_loop_over_a_fresh_tensor_updates_it_in_place_with_no_copy);
  tcase_add_test(tc, test_an_entry_input_handed_to_the_loop_is_copied_first);
  tcase_add_test(tc, test_a_tensor_read_after_the_call_is_copied_first);
  tcase_add_test(tc, test_one_tensor_handed_to_two_loops_is_copied_for_each);
  tcase_add_test(tc, test_a_scatter_whose_data_is_read_later_on_its_path_makes_a_copy);
  tcase_add_test(tc, test_a_view_a_constant_or_an_entry_input_is_never_updated);
  tcase_add_test(tc, test_a_captured_tensor_is_never_updated_by_the_closure);
  tcase_add_test(tc, test_a_loop_used_as_a_value_keeps_its_parameters);
  tcase_add_test(tc, test_a_scatter_reading_its_data_twice_is_not_in_place);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
