/* nimble-run end to end: a vector-add executable built with the runtime's
 * builder and test kernels, run on .npy and .pb inputs; the output file is
 * checked against hand-computed sums and by NumPy. Then every usage and run
 * error: the exit code (2 usage, 1 run) and a single line naming the culprit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_test_util.h"
#include "tensor_io_test_util.h"

#ifndef NIMBLE_RUN_EMULATOR
#define NIMBLE_RUN_EMULATOR ""
#endif

static char model_path[8192];

/* main(a: f32[?n], b: f32[?n]) -> c: f32[?n] = a + b, the output sized at
 * run time from a's shape (ShapeOf, a kernel computing bytes, AllocStorage,
 * AllocTensorReg). */
static void write_vadd_model(void) {
  snprintf(model_path, sizeof(model_path), "%s", scratch("vadd.nimble"));
  nimble_executable_builder *b = rt_builder();
  int64_t vadd = rt_kernel(b, "vadd_f32"), nb = rt_kernel(b, "nbytes_i64");
  uint32_t f = rt_function(b, "main", 2, 10);
  RT_EMIT(b, f, NIMBLE_OP_SHAPE_OF, 2, 0);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 3, 4);
  rt_emit_alloc(b, f, 4, 5, 6, RT_I64, 0, NULL);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, nb, 1, 2, 3, 4);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 5, 4, 64, kDLCPU, 0, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 6, 0);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR_REG, 7, 5, 6, 2, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, vadd, 1, 0, 1, 7);
  RT_EMIT(b, f, NIMBLE_OP_RET, 7);
  const char *sym[1] = {"n"};
  nimble_tensor_info_t in[2] = {rt_info("a", RT_F32, 1, NULL, sym),
                                rt_info("b", RT_F32, 1, NULL, sym)};
  nimble_tensor_info_t out = rt_info("c", RT_F32, 1, NULL, sym);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 2, &out, 1));
  rt_info_free(&in[0]);
  rt_info_free(&in[1]);
  rt_info_free(&out);

  /* pair(x: f32[?n]) -> ("a/b": x + x, "a_b": x): two outputs whose names
   * need care as file names. */
  uint32_t g = rt_function(b, "pair", 1, 10);
  RT_EMIT(b, g, NIMBLE_OP_SHAPE_OF, 1, 0);
  RT_EMIT(b, g, NIMBLE_OP_LOAD_CONSTI, 2, 4);
  rt_emit_alloc(b, g, 3, 4, 5, RT_I64, 0, NULL);
  RT_EMIT(b, g, NIMBLE_OP_INVOKE_PACKED, nb, 1, 1, 2, 3);
  RT_EMIT(b, g, NIMBLE_OP_ALLOC_STORAGE, 4, 3, 64, kDLCPU, 0, kDLFloat, 32, 1);
  RT_EMIT(b, g, NIMBLE_OP_LOAD_CONSTI, 5, 0);
  RT_EMIT(b, g, NIMBLE_OP_ALLOC_TENSOR_REG, 6, 4, 5, 1, kDLFloat, 32, 1);
  RT_EMIT(b, g, NIMBLE_OP_INVOKE_PACKED, vadd, 1, 0, 0, 6);
  RT_EMIT(b, g, NIMBLE_OP_ALLOC_ADT, 7, 0, 6, 0);
  RT_EMIT(b, g, NIMBLE_OP_RET, 7);
  nimble_tensor_info_t x = rt_info("x", RT_F32, 1, NULL, sym);
  nimble_tensor_info_t outs[2] = {rt_info("a/b", RT_F32, 1, NULL, sym),
                                  rt_info("a_b", RT_F32, 1, NULL, sym)};
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "pair", g, &x, 1, outs, 2));
  rt_info_free(&x);
  rt_info_free(&outs[0]);
  rt_info_free(&outs[1]);
  /* flags("x=1": bool[?n]) -> '{"mask": 1}': x. Names a command line
   * must take as they are: '=' in an input's, JSON in an output's. */
  uint32_t h = rt_function(b, "flags", 1, 2);
  RT_EMIT(b, h, NIMBLE_OP_RET, 0);
  const DLDataType bool_dt = {kDLUInt, 1, 1};
  nimble_tensor_info_t fx = rt_info("x=1", bool_dt, 1, NULL, sym);
  nimble_tensor_info_t fm = rt_info("{\"mask\": 1}", bool_dt, 1, NULL, sym);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "flags", h, &fx, 1, &fm, 1));
  rt_info_free(&fx);
  rt_info_free(&fm);
  void *data;
  size_t size;
  NIMBLE_ASSERT_OK(nimble_builder_serialize(b, &data, &size));
  nimble_builder_destroy(b);
  FILE *fp = fopen(model_path, "wb");
  ck_assert_ptr_nonnull(fp);
  ck_assert_int_eq(fwrite(data, 1, size, fp), size);
  fclose(fp);
  free(data);
}

/* Runs nimble-run with `args` (a shell fragment); returns the exit code and
 * stdout+stderr in `out`. */
static int run_tool(const char *args, char *out, size_t size) {
  char cmd[40000];
  snprintf(cmd, sizeof(cmd), "%s '%s' %s 2>&1", NIMBLE_RUN_EMULATOR, NIMBLE_RUN_PATH, args);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  size_t n = fread(out, 1, size - 1, p);
  out[n] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* Expects exit `code` and exactly one line "nimble-run: ..." with `fragment`. */
static void expect_failure(const char *args, int code, const char *fragment) {
  char out[8192];
  int rc = run_tool(args, out, sizeof(out));
  ck_assert_msg(rc == code, "nimble-run %s: exit %d, want %d; output: %s", args, rc, code, out);
  ck_assert_msg(strncmp(out, "nimble-run: ", 12) == 0, "nimble-run %s: output '%s'", args, out);
  ck_assert_msg(count_lines(out) == 1, "nimble-run %s: %d lines: %s", args, count_lines(out), out);
  ck_assert_msg(strstr(out, fragment) != NULL, "nimble-run %s: '%s' lacks '%s'", args, out,
                fragment);
}

static void setup(void) { write_vadd_model(); }

START_TEST(test_vector_add_writes_the_sum_as_npy_that_numpy_reads) {
  char args[32768], out[8192], dir[8192], want[16384];
  snprintf(dir, sizeof(dir), "%s", scratch("run1"));
  mkdir(dir, 0777);
  snprintf(args, sizeof(args), "'%s' --input a='%s' --input 'b=%s' --output-dir '%s'",
           model_path, fixture("vadd_a.npy"), fixture("vadd_b.pb"), dir);
  ck_assert_msg(run_tool(args, out, sizeof(out)) == 0, "output: %s", out);
  snprintf(want, sizeof(want), "c: float32 [4] -> %s/c.npy\n", dir);
  ck_assert_str_eq(out, want);

  char cpath[8300];
  snprintf(cpath, sizeof(cpath), "%s/c.npy", dir);
  nimble_tensor_file_t c;
  NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(cpath, &c));
  const float *v = c.tensor.data;
  /* [1, 2, 3, 4.5] + [10, 20, 30, 40] */
  ck_assert_int_eq(c.tensor.ndim, 1);
  ck_assert_int_eq(c.tensor.shape[0], 4);
  ck_assert(v[0] == 11.0f && v[1] == 22.0f && v[2] == 33.0f && v[3] == 44.5f);
  nimble_tensor_file_deinit(&c);
  ck_assert_int_eq(verify_with_reference(cpath, "float32", "4", "11.0,22.0,33.0,44.5", NULL), 0);
}
END_TEST

START_TEST(test_repeat_prints_the_median_and_minimum_latency) {
  char args[32768], out[8192], dir[8192];
  snprintf(dir, sizeof(dir), "%s", scratch("run2"));
  mkdir(dir, 0777);
  snprintf(args, sizeof(args),
           "'%s' --input=a='%s' --input b='%s' --output-dir='%s' --repeat 5 --threads=2",
           model_path, fixture("vadd_a.npy"), fixture("vadd_a.npy"), dir);
  ck_assert_msg(run_tool(args, out, sizeof(out)) == 0, "output: %s", out);
  ck_assert_msg(strstr(out, "c: float32 [4] -> ") == out, "output: %s", out);
  ck_assert_msg(strstr(out, "\nlatency over 5 runs (2 threads): median ") != NULL, "output: %s", out);
  ck_assert_msg(strstr(out, " ms, min ") != NULL, "output: %s", out);
  double median = -1, min = -1;
  const char *m = strstr(out, "median ");
  ck_assert_int_eq(sscanf(m, "median %lf ms, min %lf ms", &median, &min), 2);
  ck_assert(min >= 0 && min <= median);
  nimble_tensor_file_t c;
  char cpath[8300];
  snprintf(cpath, sizeof(cpath), "%s/c.npy", dir);
  NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(cpath, &c));
  const float *v = c.tensor.data; /* a + a */
  ck_assert(v[0] == 2.0f && v[1] == 4.0f && v[2] == 6.0f && v[3] == 9.0f);
  nimble_tensor_file_deinit(&c);
  /* Untimed runs first: the timed count and the outputs are the same. */
  for (int w = 0; w <= 3; w += 3) {
    snprintf(args, sizeof(args), "'%s' --input=a='%s' --input b='%s' --output-dir='%s' --repeat 2 --warmup %d",
             model_path, fixture("vadd_a.npy"), fixture("vadd_a.npy"), dir, w);
    ck_assert_msg(run_tool(args, out, sizeof(out)) == 0, "output: %s", out);
    ck_assert_msg(strstr(out, "\nlatency over 2 runs (1 thread): median ") != NULL, "output: %s", out);
    NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(cpath, &c));
    v = c.tensor.data;
    ck_assert(v[0] == 2.0f && v[1] == 4.0f && v[2] == 6.0f && v[3] == 9.0f);
    nimble_tensor_file_deinit(&c);
  }
}
END_TEST

START_TEST(test_every_output_gets_a_file_whose_name_stays_in_the_directory) {
  char args[32768], out[8192], dir[8192], want[32768];
  snprintf(dir, sizeof(dir), "%s", scratch("run3"));
  mkdir(dir, 0777);
  snprintf(args, sizeof(args), "'%s' --entry pair --input x='%s' --output-dir '%s'", model_path,
           fixture("vadd_a.npy"), dir);
  ck_assert_msg(run_tool(args, out, sizeof(out)) == 0, "output: %s", out);
  /* "a/b" must not name a subdirectory; "a_b" must not overwrite it. */
  snprintf(want, sizeof(want), "a/b: float32 [4] -> %s/a_b.npy\na_b: float32 [4] -> %s/output_1.npy\n",
           dir, dir);
  ck_assert_str_eq(out, want);
  char path[8300];
  snprintf(path, sizeof(path), "%s/a_b.npy", dir);
  ck_assert_int_eq(verify_with_reference(path, "float32", "4", "2.0,4.0,6.0,9.0", NULL), 0);
  snprintf(path, sizeof(path), "%s/output_1.npy", dir);
  ck_assert_int_eq(verify_with_reference(path, "float32", "4", "1.0,2.0,3.0,4.5", NULL), 0);
}
END_TEST

/* A bool input from an ONNX BOOL TensorProto comes back as NumPy bool
 * (and as an ONNX BOOL tensor), under names that need care on a command
 * line; --output takes a name or a position and says where each went. */
START_TEST(test_bool_round_trips_and_outputs_go_where_output_says) {
  char args[32768], out[8192], dir[8192], want[32768], npy[8300], pb[8300];
  snprintf(dir, sizeof(dir), "%s", scratch("run4"));
  mkdir(dir, 0777);
  snprintf(npy, sizeof(npy), "%s/mask.npy", dir);
  snprintf(pb, sizeof(pb), "%s/mask.pb", dir);
  snprintf(args, sizeof(args), "'%s' --entry flags --input 'x=1=%s' --output '{\"mask\": 1}=%s'", model_path,
           fixture("typed_bool.pb"), npy);
  ck_assert_msg(run_tool(args, out, sizeof(out)) == 0, "output: %s", out);
  snprintf(want, sizeof(want), "{\"mask\": 1}: bool [3] -> %s\n", npy);
  ck_assert_str_eq(out, want);
  ck_assert_int_eq(verify_with_reference(npy, "bool", "3", "True,False,True", NULL), 0);
  snprintf(args, sizeof(args), "'%s' --entry flags --input 'x=1=%s' --output '0=%s'", model_path,
           fixture("typed_bool.pb"), pb);
  ck_assert_msg(run_tool(args, out, sizeof(out)) == 0, "output: %s", out);
  ck_assert_int_eq(verify_with_reference(pb, "bool", "3", "True,False,True", "{\"mask\": 1}"), 0);
  /* Without --output: a file name made safe, in the output directory. */
  snprintf(args, sizeof(args), "'%s' --entry flags --input 'x=1=%s' --output-dir '%s'", model_path,
           fixture("b1_2x2.npy"), dir);
  expect_failure(args, 1, "input 'x=1' has shape [2,2], expected [?n]");
}
END_TEST

START_TEST(test_help_describes_the_options_and_exit_codes) {
  char out[8192];
  ck_assert_int_eq(run_tool("--help", out, sizeof(out)), 0);
  const char *want[] = {"usage: nimble-run MODEL.nimble --input NAME=FILE", "--output-dir DIR",
                        "--repeat N", "median", "--warmup N", "--threads N", "--output NAME=FILE", "--entry NAME",
                        ".npy", ".pb",
                        "Exit status: 0 success; 1", "2 a usage error"};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
    ck_assert_msg(strstr(out, want[i]) != NULL, "--help lacks '%s'", want[i]);
  ck_assert_int_eq(run_tool("--version", out, sizeof(out)), 0);
  ck_assert_msg(strncmp(out, "nimble-run ", 11) == 0, "got %s", out);
}
END_TEST

START_TEST(test_malformed_command_lines_exit_2_with_one_line) {
  char args[32768];
  expect_failure("", 2, "no model given");
  expect_failure("--bogus", 2, "unknown option '--bogus'");
  expect_failure("-x m.nimble", 2, "unknown option '-x'");
  expect_failure("m.nimble --input a", 2, "--input 'a': expected NAME=FILE");
  expect_failure("m.nimble --input =x.npy", 2, "--input '=x.npy': the NAME is empty");
  expect_failure("m.nimble --output =x.npy", 2, "--output '=x.npy': the NAME is empty");
  expect_failure("m.nimble --output c", 2, "--output 'c': expected NAME=FILE");
  expect_failure("m.nimble --input a=", 2, "--input 'a=': the FILE is empty");
  expect_failure("m.nimble --input", 2, "--input needs a value");
  expect_failure("m.nimble --repeat 0", 2, "--repeat '0': expected a whole number");
  expect_failure("m.nimble --repeat 3x", 2, "--repeat '3x'");
  expect_failure("m.nimble --repeat 99999999999999999999", 2, "--repeat '9999");
  expect_failure("m.nimble --warmup -1", 2, "--warmup '-1': expected a whole number from 0");
  expect_failure("m.nimble --warmup 1e3", 2, "--warmup '1e3'");
  expect_failure("m.nimble --threads -1", 2, "--threads '-1'");
  expect_failure("m.nimble --output-dir=", 2, "--output-dir is empty");
  expect_failure("m.nimble n.nimble", 2, "more than one model given ('m.nimble' and 'n.nimble')");
  /* Against the model: names it does not have. */
  snprintf(args, sizeof(args), "'%s' --input a='%s' --input z='%s'", model_path,
           fixture("vadd_a.npy"), fixture("vadd_a.npy"));
  expect_failure(args, 2, "has no input 'z' (its inputs: a, b)");
  snprintf(args, sizeof(args), "'%s' --input a='%s'", model_path, fixture("vadd_a.npy"));
  expect_failure(args, 2, "input 'b' of entry 'main' is not given (use --input b=FILE)");
  snprintf(args, sizeof(args), "'%s' --input a=x.npy --input a=y.npy", model_path);
  expect_failure(args, 2, "input 'a' is given twice");
  snprintf(args, sizeof(args), "'%s' --input a='%s' --input b='%s' --output d=d.npy", model_path,
           fixture("vadd_a.npy"), fixture("vadd_a.npy"));
  expect_failure(args, 2, "has no output 'd' (its outputs: c; or give a position from 0)");
  snprintf(args, sizeof(args), "'%s' --input a='%s' --input b='%s' --output 1=d.npy", model_path,
           fixture("vadd_a.npy"), fixture("vadd_a.npy"));
  expect_failure(args, 2, "has no output '1'");
  snprintf(args, sizeof(args), "'%s' --input a='%s' --input b='%s' --output c=d.npy --output 0=e.npy",
           model_path, fixture("vadd_a.npy"), fixture("vadd_a.npy"));
  expect_failure(args, 2, "output 'c' is given twice");
  snprintf(args, sizeof(args), "'%s' --entry nope --input a='%s'", model_path,
           fixture("vadd_a.npy"));
  expect_failure(args, 2, "no entry 'nope'");
}
END_TEST

START_TEST(test_unreadable_files_and_failed_runs_exit_1_naming_the_culprit) {
  char args[32768], missing[8192];
  snprintf(missing, sizeof(missing), "%s", scratch("no_such_model.nimble"));
  snprintf(args, sizeof(args), "'%s' --input a=x.npy", missing);
  expect_failure(args, 1, missing);
  /* Not an executable at all. */
  snprintf(args, sizeof(args), "'%s' --input a=x.npy", fixture("vadd_a.npy"));
  expect_failure(args, 1, "vadd_a.npy");
  snprintf(args, sizeof(args), "'%s' --input a='%s' --input b=/nonexistent/b.npy", model_path,
           fixture("vadd_a.npy"));
  expect_failure(args, 1, "input 'b': /nonexistent/b.npy: cannot open");
  snprintf(args, sizeof(args), "'%s' --input a='%s' --input b='%s'", model_path,
           fixture("vadd_a.npy"), fixture("typed_string.pb"));
  expect_failure(args, 1, "input 'b': ");
  /* Shapes that disagree on the symbolic n, and a wrong dtype: the VM's
   * messages name the input. */
  snprintf(args, sizeof(args), "'%s' --input a='%s' --input b='%s' --output-dir '%s'", model_path,
           fixture("vadd_a.npy"), fixture("vadd_b3.npy"), fixture_dir());
  expect_failure(args, 1, "'b'");
  snprintf(args, sizeof(args), "'%s' --input a='%s' --input b='%s'", model_path,
           fixture("vadd_a.npy"), fixture("vadd_i64.npy"));
  expect_failure(args, 1, "input 'b' has dtype");
  snprintf(args, sizeof(args), "'%s' --input a='%s' --input b='%s' --output-dir /nonexistent/out",
           model_path, fixture("vadd_a.npy"), fixture("vadd_b.pb"));
  expect_failure(args, 1, "output 'c': /nonexistent/out/c.npy: cannot create");
}
END_TEST

int main(void) {
  Suite *s = suite_create("nimble_run");
  TCase *tc = tcase_create("cli");
  tcase_add_checked_fixture(tc, setup, NULL);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_vector_add_writes_the_sum_as_npy_that_numpy_reads);
  tcase_add_test(tc, test_repeat_prints_the_median_and_minimum_latency);
  tcase_add_test(tc, test_every_output_gets_a_file_whose_name_stays_in_the_directory);
  tcase_add_test(tc, test_bool_round_trips_and_outputs_go_where_output_says);
  tcase_add_test(tc, test_help_describes_the_options_and_exit_codes);
  tcase_add_test(tc, test_malformed_command_lines_exit_2_with_one_line);
  tcase_add_test(tc, test_unreadable_files_and_failed_runs_exit_1_naming_the_culprit);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
