/* Programs whose scatters update_in_place may turn into in-place writes,
 * compiled for x86 and run: the results are computed by hand, and every
 * tensor the program still reads afterwards (its inputs, a value returned
 * next to the loop's result) must be unchanged — a wrong in-place write
 * shows up there. Run at opt levels 2 (in place) and 0 (the pass does not
 * run), which must agree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver_test_util.h"
#include "nimble_test.h"

/* Row t of Y becomes v * (t + 1), for t < n. */
#define FILL                                                                                               \
  "def @fill(%t: Tensor[(), int64], %n: Tensor[(), int64], %Y: Tensor[(?, 3), float32],\n"              \
  "          %v: Tensor[(3,), float32]) -> Tensor[(?, 3), float32] {\n"                                    \
  "  if (less(%t, %n)) {\n"                                                                             \
  "    let %row = multiply(%v, cast(add(%t, 1), dtype=\"float32\"));\n"                                    \
  "    let %Y2 = scatter_nd(%Y, reshape(%t, newshape=[1, 1]), expand_dims(%row, axis=0));\n"                \
  "    @fill(add(%t, 1), %n, %Y2, %v)\n"                                                                  \
  "  } else {\n"                                                                                        \
  "    %Y\n"                                                                                            \
  "  }\n"                                                                                               \
  "}\n"

static nimble_executable *compile_text(const char *text, int opt_level) {
  char path[] = "/tmp/nimble-inplace-XXXXXX.nir";
  int fd = mkstemps(path, 4);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  nimble_compile_options_t o;
  nimble_compile_options_init(&o);
  o.target = "x86";
  o.opt_level = opt_level;
  nimble_compile_result *r = NULL;
  nimble_status_t s = nimble_compile_file(path, &o, &r);
  unlink(path);
  ck_assert_msg(s == NULL, "%s", s ? nimble_status_message(s) : "");
  void *bytes = NULL;
  size_t size = 0;
  NIMBLE_ASSERT_OK(nimble_compile_result_serialize(r, &bytes, &size));
  nimble_executable *exe = NULL;
  NIMBLE_ASSERT_OK(nimble_executable_load_memory(bytes, size, 0, &exe));
  free(bytes);
  nimble_compile_result_destroy(r);
  return exe;
}

static DLTensor f32(float *data, int ndim, int64_t *shape) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.shape = shape;
  t.dtype = (DLDataType){kDLFloat, 32, 1};
  return t;
}

/* Runs `main` on x [rows, 3] and v [3]; checks output k against want[k]
 * (rows x 3 floats each) and that x and v are unchanged. */
static void run_and_check(const char *text, int rows, int nout, float want[][8 * 3]) {
  for (int level = 2; level >= 0; level -= 2) {
    nimble_executable *exe = compile_text(text, level);
    nimble_vm *vm = NULL;
    NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
    float x[8 * 3], v[3] = {1.0f, -2.0f, 0.5f}, x0[8 * 3];
    for (int i = 0; i < rows * 3; i++) x0[i] = x[i] = (float)(i + 1);
    int64_t xs[2] = {rows, 3}, vs[1] = {3};
    DLTensor xt = f32(x, 2, xs), vt = f32(v, 1, vs);
    for (int rep = 0; rep < 2; rep++) { /* twice: nothing carries over */
      NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &xt));
      NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &vt));
      NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
      ck_assert_uint_eq(nimble_vm_num_outputs(vm), (uint32_t)nout);
      for (int k = 0; k < nout; k++) {
        DLManagedTensor *out = NULL;
        NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, (uint32_t)k, &out));
        ck_assert_int_eq(out->dl_tensor.ndim, 2);
        ck_assert_int_eq(out->dl_tensor.shape[0], rows);
        const float *y = out->dl_tensor.data;
        for (int i = 0; i < rows * 3; i++)
          ck_assert_msg(y[i] == want[k][i], "opt level %d, run %d, output %d [%d]: got %g, want %g", level, rep, k,
                        i, y[i], want[k][i]);
        out->deleter(out);
      }
      for (int i = 0; i < rows * 3; i++) ck_assert_msg(x[i] == x0[i], "input x[%d] changed to %g", i, x[i]);
      ck_assert(v[0] == 1.0f && v[1] == -2.0f && v[2] == 0.5f);
    }
    nimble_vm_destroy(vm);
    nimble_executable_release(exe);
  }
}

/* want[0][t] = v * (t + 1) for the first n rows, else what Y started as. */
static void filled(float *out, int rows, int n, const float *start) {
  const float v[3] = {1.0f, -2.0f, 0.5f};
  for (int t = 0; t < rows; t++)
    for (int j = 0; j < 3; j++) out[t * 3 + j] = t < n ? v[j] * (float)(t + 1) : start[t * 3 + j];
}

START_TEST(test_a_loop_filling_a_fresh_tensor_gives_every_row) {
  float want[1][24], zero[24] = {0};
  filled(want[0], 5, 5, zero);
  run_and_check(FILL "def @main(%x: Tensor[(?, 3), float32], %v: Tensor[(3,), float32]) -> Tensor[(?, 3), float32] {\n"
                     "  @fill(0, take(shape_of(%x), 0), multiply(%x, 0.0), %v)\n"
                     "}\n",
                5, 1, want);
}
END_TEST

START_TEST(test_a_loop_over_the_entry_input_leaves_the_input_alone) {
  /* Y starts as x itself; rows 0..2 of 4 are written, row 3 stays x's. */
  float want[1][24], x[24];
  for (int i = 0; i < 12; i++) x[i] = (float)(i + 1);
  filled(want[0], 4, 3, x);
  run_and_check(FILL "def @main(%x: Tensor[(?, 3), float32], %v: Tensor[(3,), float32]) -> Tensor[(?, 3), float32] {\n"
                     "  @fill(0, subtract(take(shape_of(%x), 0), 1), %x, %v)\n"
                     "}\n",
                4, 1, want);
}
END_TEST

START_TEST(test_a_tensor_returned_beside_the_loop_keeps_its_values) {
  /* z = 2x goes into the loop and is returned too: it must stay 2x. */
  float want[2][24], x[24], z[24];
  for (int i = 0; i < 18; i++) x[i] = (float)(i + 1), z[i] = 2 * x[i];
  filled(want[0], 6, 6, z);
  memcpy(want[1], z, sizeof z);
  run_and_check(FILL "def @main(%x: Tensor[(?, 3), float32], %v: Tensor[(3,), float32]) -> (Tensor[(?, 3), float32], "
                     "Tensor[(?, 3), float32]) {\n"
                     "  let %z = multiply(%x, 2.0);\n"
                     "  let %f = @fill(0, take(shape_of(%x), 0), %z, %v);\n"
                     "  (%f, %z)\n"
                     "}\n",
                6, 2, want);
}
END_TEST

START_TEST(test_two_loops_from_one_tensor_each_see_it_unchanged) {
  /* a fills every row of z; b fills rows 0..1 only, so its row 2 is z's. */
  float want[2][24], z[24];
  for (int i = 0; i < 9; i++) z[i] = (float)(i + 1) + 10;
  filled(want[0], 3, 3, z);
  filled(want[1], 3, 2, z);
  run_and_check(FILL "def @main(%x: Tensor[(?, 3), float32], %v: Tensor[(3,), float32]) -> (Tensor[(?, 3), float32], "
                     "Tensor[(?, 3), float32]) {\n"
                     "  let %z = add(%x, 10.0);\n"
                     "  let %n = take(shape_of(%x), 0);\n"
                     "  let %a = @fill(0, %n, %z, %v);\n"
                     "  let %b = @fill(0, subtract(%n, 1), %z, %v);\n"
                     "  (%a, %b)\n"
                     "}\n",
                3, 2, want);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("update_in_place_run");
  TCase *tc = tcase_create("run");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_a_loop_filling_a_fresh_tensor_gives_every_row);
  tcase_add_test(tc, test_a_loop_over_the_entry_input_leaves_the_input_alone);
  tcase_add_test(tc, test_a_tensor_returned_beside_the_loop_keeps_its_values);
  tcase_add_test(tc, test_two_loops_from_one_tensor_each_see_it_unchanged);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
