/* nvptx64 emission: kernels become PTX entry points (marked through
 * nvvm.annotations) that ptxas accepts for sm_80 when the CUDA toolkit is
 * installed. No GPU is needed; running them is left to a GPU machine. */
#include <sys/stat.h>
#include <sys/wait.h>

#include "codegen_harness.h"

#define PTXAS "/usr/local/cuda/bin/ptxas"

START_TEST(test_kernels_emit_ptx_entries_that_ptxas_accepts) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k[4];
  int r[2] = {2, 1}, r1 = 1;
  nimble_ln_op_t add = NIMBLE_LN_ADD, t = NIMBLE_LN_ERF;
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(A, "badd", 2, r, 2, nimble_codegen_combine_binary, &add, &k[0]));
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(A, "verf", 1, &r1, 1, nimble_codegen_combine_unary, &t, &k[1]));
  NIMBLE_ASSERT_OK(nimble_codegen_build_softmax(A, "softmax", 3, &k[2]));
  NIMBLE_ASSERT_OK(nimble_codegen_build_dense(A, "dense", NIMBLE_CODEGEN_EPILOGUE_BIAS_RELU, &k[3]));
  const nimble_ln_kernel *ks[] = {k[0], k[1], k[2], k[3]};
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.triple = "nvptx64-nvidia-cuda";
  nimble_codegen_output_t out;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, 4, &o, &out));
  ck_assert_ptr_null(out.shared_object);
  ck_assert_ptr_nonnull(out.ptx);
  ck_assert_ptr_nonnull(strstr(out.ptx, ".target sm_80"));
  static const char *const entries[] = {".visible .entry badd(", ".visible .entry verf(", ".visible .entry softmax(",
                                        ".visible .entry dense("};
  for (int i = 0; i < 4; i++) ck_assert_msg(strstr(out.ptx, entries[i]) != NULL, "no '%s'", entries[i]);
  /* Threads: the parallel loops read the grid's special registers. */
  ck_assert_ptr_nonnull(strstr(out.ptx, "%ctaid.x"));
  ck_assert_ptr_nonnull(strstr(out.ptx, "%nctaid.x"));
  /* No calls: the math is inline and there is no libm on the device. */
  ck_assert_ptr_null(strstr(out.ptx, "call.uni"));

  if (access(PTXAS, X_OK) != 0) {
    printf(PTXAS " not installed: checked the PTX text only\n");
  } else {
    char dir[] = "/tmp/nimble-ptx-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char ptx[128], cubin[128], log[128], cmd[1024];
    snprintf(ptx, sizeof ptx, "%s/k.ptx", dir);
    snprintf(cubin, sizeof cubin, "%s/k.cubin", dir);
    snprintf(log, sizeof log, "%s/log.txt", dir);
    FILE *f = fopen(ptx, "w");
    ck_assert_ptr_nonnull(f);
    fputs(out.ptx, f);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(cmd, sizeof cmd, PTXAS " -arch=sm_80 %s -o %s > %s 2>&1", ptx, cubin, log);
    int rc = system(cmd);
    char text[2048] = "";
    f = fopen(log, "r");
    if (f) {
      size_t n = fread(text, 1, sizeof text - 1, f);
      text[n] = 0;
      fclose(f);
    }
    ck_assert_msg(rc == 0, "ptxas rejected the PTX: %s", text);
    struct stat st;
    ck_assert_int_eq(stat(cubin, &st), 0);
    ck_assert_int_gt(st.st_size, 0);
    unlink(ptx);
    unlink(cubin);
    unlink(log);
    ck_assert_int_eq(rmdir(dir), 0);
  }
  nimble_codegen_output_deinit(&out);
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_ptx_refuses_what_the_device_cannot_run) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k;
  int r1 = 1;
  nimble_ln_op_t lg = NIMBLE_LN_LOG;
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(A, "vlog", 1, &r1, 1, nimble_codegen_combine_unary, &lg, &k));
  const nimble_ln_kernel *ks[] = {k};
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.triple = "nvptx64-nvidia-cuda";
  nimble_codegen_output_t out;
  NIMBLE_ASSERT_ERROR(nimble_codegen_build(ks, 1, &o, &out), NIMBLE_UNIMPLEMENTED,
                      "kernel 'vlog': log is not available on nvptx64");
  ck_assert_ptr_null(out.ptx);
  nimble_ln_arena_destroy(A);
}
END_TEST

int main(void) {
  Suite *s = suite_create("codegen_ptx");
  TCase *tc = tcase_create("ptx");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_kernels_emit_ptx_entries_that_ptxas_accepts);
  tcase_add_test(tc, test_ptx_refuses_what_the_device_cannot_run);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
