/* aarch64 smoke test: a vector-add kernel compiled for aarch64-linux-gnu
 * is an AArch64 ELF shared object with NEON vector code, and, when
 * qemu-aarch64 and aarch64-linux-gnu-gcc are installed, a small aarch64
 * host program dlopens it under qemu-user and checks its results. */
#include <sys/stat.h>
#include <sys/wait.h>

#include "codegen_harness.h"

static const char host_source[] =
    "#include <dlfcn.h>\n"
    "#include <stdio.h>\n"
    "#include <string.h>\n"
    "#include \"nimble/kernel_abi.h\"\n"
    "static char err[256];\n"
    "static void set_error(const nimble_kernel_env_t *e, const char *m) { snprintf(err, sizeof err, \"%s\", m); }\n"
    "int main(int argc, char **argv) {\n"
    "  void *h = dlopen(argv[1], RTLD_NOW);\n"
    "  if (!h) { printf(\"dlopen: %s\\n\", dlerror()); return 2; }\n"
    "  nimble_kernel_fn f = (nimble_kernel_fn)dlsym(h, \"vadd\");\n"
    "  if (!f) { printf(\"no vadd\\n\"); return 3; }\n"
    "  nimble_kernel_env_t env; memset(&env, 0, sizeof env);\n"
    "  env.struct_size = sizeof env; env.abi_version = NIMBLE_KERNEL_ABI_VERSION; env.set_error = set_error;\n"
    "  static const int64_t sizes[] = {0, 1, 7, 8, 37, 1000};\n"
    "  static float a[1000], b[1000], y[1000];\n"
    "  for (int s = 0; s < 6; s++) {\n"
    "    int64_t n = sizes[s];\n"
    "    for (int i = 0; i < n; i++) { a[i] = (float)i * 0.5f - 3.0f; b[i] = (float)(i % 7) * 0.25f; y[i] = -1.0f; }\n"
    "    DLTensor ta = {a, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &n, NULL, 0};\n"
    "    DLTensor tb = ta, ty = ta; tb.data = b; ty.data = y;\n"
    "    DLTensor *args[3] = {&ta, &tb, &ty};\n"
    "    if (f(args, 3, &env) != 0) { printf(\"kernel failed: %s\\n\", err); return 4; }\n"
    "    for (int i = 0; i < n; i++) if (y[i] != a[i] + b[i]) { printf(\"y[%d] = %g, want %g\\n\", i, y[i], a[i] + b[i]); return 5; }\n"
    "  }\n"
    "  DLTensor *none[1] = {0};\n"
    "  if (f(none, 1, &env) == 0 || strstr(err, \"expects 3 arguments\") == NULL) { printf(\"no arity error\\n\"); return 6; }\n"
    "  printf(\"aarch64 vadd ok\\n\");\n"
    "  return 0;\n"
    "}\n";

static int on_path(const char *prog) {
  const char *path = getenv("PATH");
  if (!path) return 0;
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *dir = strtok(buf, ":"); dir; dir = strtok(NULL, ":")) {
    char full[4200];
    snprintf(full, sizeof full, "%s/%s", dir, prog);
    if (access(full, X_OK) == 0) return 1;
  }
  return 0;
}

static void write_all(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, n, f), n);
  ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_vector_add_for_aarch64_is_neon_code_that_runs_under_qemu) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k;
  int ranks[2] = {1, 1};
  nimble_ln_op_t add = NIMBLE_LN_ADD;
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(A, "vadd", 2, ranks, 1, nimble_codegen_combine_binary, &add, &k));
  const nimble_ln_kernel *ks[] = {k};
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.triple = "aarch64-linux-gnu";
  o.keep_ir = 1;
  nimble_codegen_output_t out;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, 1, &o, &out));
  const uint8_t *e = out.shared_object;
  ck_assert_uint_gt(out.shared_object_size, 64);
  ck_assert_int_eq(memcmp(e, "\177ELF", 4), 0);
  ck_assert_int_eq(e[4], 2);                   /* ELFCLASS64 */
  ck_assert_int_eq(e[16] | e[17] << 8, 3);     /* ET_DYN */
  ck_assert_int_eq(e[18] | e[19] << 8, 183);   /* EM_AARCH64 */
  ck_assert_ptr_nonnull(strstr(out.llvm_ir, "fadd <4 x float>"));

  if (!on_path("qemu-aarch64") || !on_path("aarch64-linux-gnu-gcc")) {
    printf("qemu-aarch64 or aarch64-linux-gnu-gcc not installed: ran the ELF checks only\n");
  } else {
    char dir[] = "/tmp/nimble-a64-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char so[256], src[256], exe[256], log[256], cmd[2048];
    snprintf(so, sizeof so, "%s/kernels.so", dir);
    snprintf(src, sizeof src, "%s/host.c", dir);
    snprintf(exe, sizeof exe, "%s/host", dir);
    snprintf(log, sizeof log, "%s/log.txt", dir);
    write_all(so, out.shared_object, out.shared_object_size);
    write_all(src, host_source, strlen(host_source));
    snprintf(cmd, sizeof cmd, "aarch64-linux-gnu-gcc -O2 -I%s -I%s %s -o %s -ldl > %s 2>&1", NIMBLE_KERNEL_ABI_INCLUDE,
             NIMBLE_CROSS_DLPACK_INCLUDE, src, exe, log);
    int rc = system(cmd);
    char text[2048] = "";
    FILE *f = fopen(log, "r");
    if (f) {
      size_t n = fread(text, 1, sizeof text - 1, f);
      text[n] = 0;
      fclose(f);
    }
    ck_assert_msg(rc == 0, "cross compile failed: %s", text);
    snprintf(cmd, sizeof cmd, "qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib %s %s > %s 2>&1", exe, so, log);
    rc = system(cmd);
    f = fopen(log, "r");
    text[0] = 0;
    if (f) {
      size_t n = fread(text, 1, sizeof text - 1, f);
      text[n] = 0;
      fclose(f);
    }
    ck_assert_msg(rc == 0 && strstr(text, "aarch64 vadd ok"), "qemu run failed (%d): %s", rc, text);
    unlink(so);
    unlink(src);
    unlink(exe);
    unlink(log);
    ck_assert_int_eq(rmdir(dir), 0);
  }
  nimble_codegen_output_deinit(&out);
  nimble_ln_arena_destroy(A);
}
END_TEST

int main(void) {
  Suite *s = suite_create("codegen_aarch64");
  TCase *tc = tcase_create("aarch64");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_vector_add_for_aarch64_is_neon_code_that_runs_under_qemu);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
