/* examples/run_model.c builds and runs: on an executable written to a file
 * it prints the sum computed by the kernels, and on a missing file it
 * fails with the reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_test_util.h"

/* main(a: f32[?n], b: f32[?n]) -> a + b, output sized at run time. */
static void write_model(const char *path) {
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
  nimble_tensor_info_t in[2] = {rt_info("a", RT_F32, 1, NULL, sym), rt_info("b", RT_F32, 1, NULL, sym)};
  nimble_tensor_info_t out = rt_info("c", RT_F32, 1, NULL, sym);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 2, &out, 1));
  rt_info_free(&in[0]);
  rt_info_free(&in[1]);
  rt_info_free(&out);
  void *data;
  size_t size;
  NIMBLE_ASSERT_OK(nimble_builder_serialize(b, &data, &size));
  nimble_builder_destroy(b);
  FILE *fp = fopen(path, "wb");
  ck_assert(fp != NULL);
  ck_assert(fwrite(data, 1, size, fp) == size);
  fclose(fp);
  free(data);
}

/* Runs the example with `args`; returns its exit status and stdout. */
static int run_example(const char *args, char *out, size_t out_size) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "%s '%s' %s 2>&1", NIMBLE_RUN_MODEL_EMULATOR, NIMBLE_RUN_MODEL_PATH, args);
  FILE *p = popen(cmd, "r");
  ck_assert(p != NULL);
  size_t n = fread(out, 1, out_size - 1, p);
  out[n] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

START_TEST(test_run_model_prints_the_sum_of_its_inputs) {
  char path[4096], args[4200], out[4096];
  const char *dir = getenv("NIMBLE_BUILD_DIR");
  snprintf(path, sizeof path, "%s/run_model_test.%d.nimble", dir ? dir : "/tmp", (int)getpid());
  write_model(path);
  snprintf(args, sizeof args, "'%s' 4", path);
  ck_assert_int_eq(run_example(args, out, sizeof out), 0);
  ck_assert_str_eq(out, "0 2 4 6\n"); /* [0,1,2,3] + [0,1,2,3] */
  snprintf(args, sizeof args, "'%s' 7", path);
  ck_assert_int_eq(run_example(args, out, sizeof out), 0);
  ck_assert_str_eq(out, "0 2 4 6 8 10 12\n");
  unlink(path);
  ck_assert_int_eq(run_example(args, out, sizeof out), 1);
  ck_assert_msg(strstr(out, "No such file or directory") != NULL, "got: %s", out);
  ck_assert_int_eq(run_example("", out, sizeof out), 2);
  ck_assert_msg(strstr(out, "usage:") != NULL, "got: %s", out);
}
END_TEST

int main(void) {
  Suite *s = suite_create("example_run_model");
  TCase *tc = tcase_create("example");
  tcase_add_test(tc, test_run_model_prints_the_sum_of_its_inputs);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
