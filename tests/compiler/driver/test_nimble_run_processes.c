/* The user's path, as two processes: `nimble compile MODEL -o X.nimble`,
 * then `nimble-run X.nimble --input ... --output-dir DIR`, outputs read
 * back from DIR/NAME.npy and checked against values computed here by
 * hand. nimble-run links libc, libdl and pthreads only, so what a kernel
 * object needs beyond those (libm) must come with the object itself. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nimble/tensor_io.h"
#include "nimble_test.h"
#include "onnx_model_builder.h"

static char g_tmp[256];

static char *path_in(const char *base, const char *rel) {
  char *p = NULL;
  ck_assert_int_ge(asprintf(&p, "%s/%s", base, rel), 0);
  return p;
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
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

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fputs(text, f) >= 0, 1);
  ck_assert_int_eq(fclose(f), 0);
}

/* Runs argv (argv[0] a path) with stdout and stderr captured into *out
 * (caller frees); returns the exit status (-signal when killed). */
static int run_prog(char *const argv[], char **out) {
  char *log = path_in(g_tmp, "output.txt");
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(120);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(argv[0], argv);
    _exit(122);
  }
  int st = 0;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  *out = read_text(log);
  free(log);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

static char *build_path(const char *rel) {
  const char *b = getenv("NIMBLE_BUILD_DIR");
  ck_assert_ptr_nonnull(b);
  return path_in(b, rel);
}

/* nimble compile MODEL --target=x86 -o OUT, which must succeed. */
static void compile_model(const char *model, const char *out) {
  char *nimble = build_path("client/nimble");
  char *argv[] = {nimble, "compile", (char *)model, "--target=x86", "-o", (char *)out, NULL};
  char *text = NULL;
  int rc = run_prog(argv, &text);
  ck_assert_msg(rc == 0, "nimble compile %s: exit %d:\n%s", model, rc, text);
  free(text);
  free(nimble);
}

/* nimble-run EXE --input NAME=FILE... --output-dir DIR; returns the exit
 * status, the output text in *text (caller frees). */
static int nimble_run(const char *exe, const char *outdir, char **text, ...) {
  char *run = build_path("runtime/tools/nimble-run");
  char *argv[40];
  int n = 0;
  argv[n++] = run;
  argv[n++] = (char *)exe;
  va_list ap;
  va_start(ap, text);
  const char *in;
  while ((in = va_arg(ap, const char *)) && n < 34) {
    argv[n++] = "--input";
    argv[n++] = (char *)in;
  }
  va_end(ap);
  argv[n++] = "--output-dir";
  argv[n++] = (char *)outdir;
  argv[n] = NULL;
  ck_assert_int_eq(mkdir(outdir, 0755) == 0 || errno == EEXIST, 1);
  int rc = run_prog(argv, text);
  free(run);
  return rc;
}

/* Writes a float32 .npy of shape dims (rank n) into the temp folder;
 * returns "NAME=PATH" (caller frees). */
static char *npy_f32(const char *name, const float *data, int rank, const int64_t *dims) {
  char file[64];
  snprintf(file, sizeof file, "%s.npy", name);
  char *path = path_in(g_tmp, file);
  DLTensor t = {.data = (void *)data, .device = {kDLCPU, 0}, .ndim = rank, .dtype = {kDLFloat, 32, 1},
                .shape = (int64_t *)dims};
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(path, &t));
  char *arg = NULL;
  ck_assert_int_ge(asprintf(&arg, "%s=%s", name, path), 0);
  free(path);
  return arg;
}

static inline char *npy_bool(const char *name, int value) {
  char file[64];
  snprintf(file, sizeof file, "%s.npy", name);
  char *path = path_in(g_tmp, file);
  uint8_t v = (uint8_t)(value != 0);
  DLTensor t = {.data = &v, .device = {kDLCPU, 0}, .ndim = 0, .dtype = {kDLUInt, 1, 1}, .shape = NULL};
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(path, &t));
  char *arg = NULL;
  ck_assert_int_ge(asprintf(&arg, "%s=%s", name, path), 0);
  free(path);
  return arg;
}

/* Reads DIR/NAME.npy; the caller frees with nimble_tensor_file_free. */
static void read_output(const char *dir, const char *name, nimble_tensor_file_t *out) {
  char file[128];
  snprintf(file, sizeof file, "%s.npy", name);
  char *path = path_in(dir, file);
  NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(path, out));
  free(path);
}

static void setup(void) {
  snprintf(g_tmp, sizeof g_tmp, "/tmp/nimble-run-test-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(g_tmp));
}

static void teardown(void) {
  char cmd[320];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
  ck_assert_int_eq(system(cmd), 0);
}

/* ---- kernels that call libm ---------------------------------------------- */

/* log and pow call logf and powf; constant_of_shape's fill becomes a
 * memset (libc). Before kernel objects named libm.so.6, nimble-run said
 * "cpu kernels: the shared object does not load: ...: undefined symbol:
 * logf". */
START_TEST(test_a_program_calling_log_and_pow_runs_in_nimble_run) {
  char *src = path_in(g_tmp, "logpow.nir");
  write_text(src,
             "def @main(%x: Tensor[(?,), float32]) {\n"
             "  (power(log(%x), 1.5), constant_of_shape(shape_of(%x)))\n"
             "}\n");
  char *exe = path_in(g_tmp, "logpow.nimble");
  compile_model(src, exe);
  enum { N = 37 };
  float x[N];
  for (int i = 0; i < N; i++) x[i] = 1.0f + 0.75f * (float)i;
  int64_t n = N;
  char *in = npy_f32("x", x, 1, &n);
  char *outdir = path_in(g_tmp, "out"), *text = NULL;
  int rc = nimble_run(exe, outdir, &text, in, NULL);
  ck_assert_msg(rc == 0, "nimble-run: exit %d:\n%s", rc, text);
  nimble_tensor_file_t y0, y1;
  read_output(outdir, "output0", &y0);
  read_output(outdir, "output1", &y1);
  ck_assert_int_eq(y0.tensor.ndim, 1);
  ck_assert_int_eq(y0.tensor.shape[0], N);
  const float *g0 = (const float *)y0.tensor.data;
  for (int i = 0; i < N; i++) {
    float want = powf(logf(x[i]), 1.5f);
    ck_assert_msg(fabsf(g0[i] - want) <= 1e-5f * fabsf(want) + 1e-6f, "y0[%d] = %g, want %g", i, g0[i], want);
  }
  ck_assert_int_eq(y1.tensor.ndim, 1);
  ck_assert_int_eq(y1.tensor.shape[0], N);
  for (int i = 0; i < N; i++) ck_assert_float_eq(((const float *)y1.tensor.data)[i], 0.0f);
  nimble_tensor_file_deinit(&y0);
  nimble_tensor_file_deinit(&y1);
  free(text);
  free(in);
  free(outdir);
  free(exe);
  free(src);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("nimble_run_processes");
  TCase *tc = tcase_create("processes");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_a_program_calling_log_and_pow_runs_in_nimble_run);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
