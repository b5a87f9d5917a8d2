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

static char *npy_i64_scalar(const char *name, int64_t value) {
  char file[64];
  snprintf(file, sizeof file, "%s.npy", name);
  char *path = path_in(g_tmp, file);
  DLTensor t = {.data = &value, .device = {kDLCPU, 0}, .ndim = 0, .dtype = {kDLInt, 64, 1}, .shape = NULL};
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


/* ---- If branches of different ranks -------------------------------------- */

static const char *const DX[] = {"N", "4", "T"};

/* x: [N, 4, T]; y = If(Greater(s, 0), then: ReduceSum(x, axes=[2],
 * keepdims=0) -> [N, 4], else: Relu(x) -> [N, 4, T]); then nodes that
 * work for either rank: ReduceSum over all axes, Shape, Flatten(axis=1),
 * Neg then ReduceMax; with `rank3`, a Transpose(perm=[0, 2, 1]) that
 * takes rank 3 only. */
static void write_if_rank_model(const char *path, int rank3) {
  omb_graph g = {{0}}, t = {{0}}, e = {{0}};
  omb_input(&g, "x", OMB_FLOAT, 3, DX);
  omb_input(&g, "s", OMB_FLOAT, 0, NULL);
  float zero = 0;
  omb_init_f32(&g, "zero", 0, NULL, &zero, 1);
  int64_t ax2 = 2, one = 1;
  omb_init_i64(&t, "ax2", 1, &one, &ax2, 1);
  omb_attr kd = omb_a_int("keepdims", 0), ax1 = omb_a_int("axis", 1);
  omb_node(&t, "rs", "ReduceSum", (const char *[]){"x", "ax2"}, 2, (const char *[]){"t_out"}, 1, &kd, 1);
  omb_output(&t, "t_out", OMB_FLOAT, -1, NULL);
  omb_node(&e, "relu", "Relu", (const char *[]){"x"}, 1, (const char *[]){"e_out"}, 1, NULL, 0);
  omb_output(&e, "e_out", OMB_FLOAT, -1, NULL);
  omb_node(&g, "gt", "Greater", (const char *[]){"s", "zero"}, 2, (const char *[]){"c"}, 1, NULL, 0);
  omb_attr br[2] = {omb_a_graph("then_branch", &t), omb_a_graph("else_branch", &e)};
  omb_node(&g, "branch", "If", (const char *[]){"c"}, 1, (const char *[]){"y"}, 1, br, 2);
  omb_node(&g, "sum", "ReduceSum", (const char *[]){"y"}, 1, (const char *[]){"total"}, 1, &kd, 1);
  omb_node(&g, "shape", "Shape", (const char *[]){"y"}, 1, (const char *[]){"shape"}, 1, NULL, 0);
  omb_node(&g, "flat", "Flatten", (const char *[]){"y"}, 1, (const char *[]){"flat"}, 1, &ax1, 1);
  omb_node(&g, "neg", "Neg", (const char *[]){"y"}, 1, (const char *[]){"neg"}, 1, NULL, 0);
  omb_node(&g, "max", "ReduceMax", (const char *[]){"neg"}, 1, (const char *[]){"negmax"}, 1, &kd, 1);
  omb_output(&g, "total", OMB_FLOAT, 0, NULL);
  omb_output(&g, "shape", OMB_INT64, 1, (const char *[]){""});
  omb_output(&g, "flat", OMB_FLOAT, 2, (const char *[]){"N", ""});
  omb_output(&g, "negmax", OMB_FLOAT, 0, NULL);
  if (rank3) {
    int64_t perm[] = {0, 2, 1};
    omb_attr p = omb_a_ints("perm", perm, 3);
    omb_node(&g, "tr", "Transpose", (const char *[]){"y"}, 1, (const char *[]){"yt"}, 1, &p, 1);
    omb_output(&g, "yt", OMB_FLOAT, 3, (const char *[]){"N", "", "4"});
  }
  ck_assert_int_eq(omb_write(&g, 13, path), 0);
}

enum { XN = 2, XF = 4, XT = 3 };

static void if_rank_input(float *x) {
  for (int i = 0; i < XN * XF * XT; i++) x[i] = ((float)i - 10.0f) * 0.5f;
}

/* y as the branch taken makes it: relu(x) [N, 4, T] (else) or the sum of x
 * over its last axis [N, 4] (then); returns the element count. */
static int if_rank_y(const float *x, int then, float *y) {
  if (!then) {
    for (int i = 0; i < XN * XF * XT; i++) y[i] = x[i] > 0 ? x[i] : 0;
    return XN * XF * XT;
  }
  for (int i = 0; i < XN * XF; i++) {
    y[i] = 0;
    for (int k = 0; k < XT; k++) y[i] += x[i * XT + k];
  }
  return XN * XF;
}

static void check_if_rank_outputs(const char *outdir, const float *x, int then) {
  float y[XN * XF * XT];
  int n = if_rank_y(x, then, y);
  float total = 0, negmax = -INFINITY;
  for (int i = 0; i < n; i++) {
    total += y[i];
    if (-y[i] > negmax) negmax = -y[i];
  }
  nimble_tensor_file_t o;
  read_output(outdir, "total", &o);
  ck_assert_int_eq(o.tensor.ndim, 0);
  ck_assert_float_eq_tol(*(const float *)o.tensor.data, total, 1e-4f);
  nimble_tensor_file_deinit(&o);
  read_output(outdir, "negmax", &o);
  ck_assert_float_eq_tol(*(const float *)o.tensor.data, negmax, 1e-6f);
  nimble_tensor_file_deinit(&o);
  read_output(outdir, "shape", &o);
  ck_assert_int_eq(o.tensor.shape[0], then ? 2 : 3);
  const int64_t *sh = (const int64_t *)o.tensor.data;
  ck_assert_int_eq(sh[0], XN);
  ck_assert_int_eq(sh[1], XF);
  if (!then) ck_assert_int_eq(sh[2], XT);
  nimble_tensor_file_deinit(&o);
  /* Flatten(axis=1): [N, 4] or [N, 12], the elements in order. */
  read_output(outdir, "flat", &o);
  ck_assert_int_eq(o.tensor.ndim, 2);
  ck_assert_int_eq(o.tensor.shape[0], XN);
  ck_assert_int_eq(o.tensor.shape[1], n / XN);
  for (int i = 0; i < n; i++) ck_assert_float_eq_tol(((const float *)o.tensor.data)[i], y[i], 1e-5f);
  nimble_tensor_file_deinit(&o);
}

START_TEST(test_an_if_giving_rank_2_or_3_runs_either_branch_through_nodes_that_take_both) {
  char *model = path_in(g_tmp, "if_rank.onnx"), *exe = path_in(g_tmp, "if_rank.nimble");
  write_if_rank_model(model, 0);
  compile_model(model, exe);
  float x[XN * XF * XT];
  if_rank_input(x);
  int64_t xd[3] = {XN, XF, XT};
  char *xin = npy_f32("x", x, 3, xd);
  for (int then = 0; then <= 1; then++) {
    float sv = then ? 1.0f : -1.0f;
    char *sin = npy_f32("s", &sv, 0, NULL);
    char *outdir = path_in(g_tmp, then ? "out_then" : "out_else"), *text = NULL;
    int rc = nimble_run(exe, outdir, &text, xin, sin, NULL);
    ck_assert_msg(rc == 0, "nimble-run (%s branch): exit %d:\n%s", then ? "then" : "else", rc, text);
    check_if_rank_outputs(outdir, x, then);
    free(text);
    free(outdir);
    free(sin);
  }
  free(xin);
  free(exe);
  free(model);
}
END_TEST

START_TEST(test_a_node_that_needs_rank_3_checks_it_at_run_time_and_names_itself) {
  char *model = path_in(g_tmp, "if_rank3.onnx"), *exe = path_in(g_tmp, "if_rank3.nimble");
  write_if_rank_model(model, 1);
  compile_model(model, exe);
  float x[XN * XF * XT];
  if_rank_input(x);
  int64_t xd[3] = {XN, XF, XT};
  char *xin = npy_f32("x", x, 3, xd);
  /* else: y = relu(x), rank 3, and yt = y transposed [N, T, 4]. */
  float sv = -1.0f;
  char *sin = npy_f32("s", &sv, 0, NULL);
  char *outdir = path_in(g_tmp, "out_else"), *text = NULL;
  int rc = nimble_run(exe, outdir, &text, xin, sin, NULL);
  ck_assert_msg(rc == 0, "nimble-run: exit %d:\n%s", rc, text);
  check_if_rank_outputs(outdir, x, 0);
  nimble_tensor_file_t o;
  read_output(outdir, "yt", &o);
  ck_assert_int_eq(o.tensor.ndim, 3);
  ck_assert_int_eq(o.tensor.shape[1], XT);
  ck_assert_int_eq(o.tensor.shape[2], XF);
  for (int b = 0; b < XN; b++)
    for (int t = 0; t < XT; t++)
      for (int f = 0; f < XF; f++) {
        float v = x[(b * XF + f) * XT + t];
        ck_assert_float_eq(((const float *)o.tensor.data)[(b * XT + t) * XF + f], v > 0 ? v : 0);
      }
  nimble_tensor_file_deinit(&o);
  free(text);
  free(outdir);
  free(sin);
  /* then: y has rank 2, which the Transpose cannot take. */
  sv = 1.0f;
  sin = npy_f32("s", &sv, 0, NULL);
  outdir = path_in(g_tmp, "out_then");
  rc = nimble_run(exe, outdir, &text, xin, sin, NULL);
  ck_assert_msg(rc != 0, "nimble-run succeeded where the Transpose gets rank 2:\n%s", text);
  ck_assert_msg(strstr(text, "input 0 ('y') of node 'tr' (Transpose) has rank 2, expected rank 3") != NULL,
                "nimble-run: %s", text);
  free(text);
  free(outdir);
  free(sin);
  free(xin);
  free(exe);
  free(model);
}
END_TEST

/* The voice-activity-detector pattern: x [N, 4, T]; y = If(T == 1,
 * Squeeze(x, [2]), x); u = Unsqueeze(y, [0]); an LSTM over u (hidden 3)
 * from the state input. T = 1 runs one LSTM step, checked against the
 * step computed here; T = 3 makes u rank 4, which the LSTM cannot take. */
enum { LH = 3 };
static float lstm_w[4 * LH * XF], lstm_r[4 * LH * LH], lstm_b[8 * LH];

static void write_lstm_model(const char *path) {
  for (int i = 0; i < 4 * LH * XF; i++) lstm_w[i] = 0.05f * (float)((i * 7) % 13) - 0.3f;
  for (int i = 0; i < 4 * LH * LH; i++) lstm_r[i] = 0.04f * (float)((i * 5) % 11) - 0.2f;
  for (int i = 0; i < 8 * LH; i++) lstm_b[i] = 0.01f * (float)(i % 5);
  omb_graph g = {{0}}, t = {{0}}, e = {{0}};
  omb_input(&g, "x", OMB_FLOAT, 3, DX);
  omb_input(&g, "state", OMB_FLOAT, 3, (const char *[]){"2", "N", "3"});
  int64_t wd[] = {1, 4 * LH, XF}, rd[] = {1, 4 * LH, LH}, bd[] = {1, 8 * LH}, one = 1, two = 2, zero = 0;
  omb_init_f32(&g, "W", 3, wd, lstm_w, 4 * LH * XF);
  omb_init_f32(&g, "R", 3, rd, lstm_r, 4 * LH * LH);
  omb_init_f32(&g, "B", 2, bd, lstm_b, 8 * LH);
  omb_init_i64(&g, "i0", 0, NULL, &zero, 1);
  omb_init_i64(&g, "i1", 0, NULL, &one, 1);
  omb_init_i64(&g, "i2", 0, NULL, &two, 1);
  omb_init_i64(&g, "one", 0, NULL, &one, 1);
  omb_init_i64(&g, "ax0", 1, &one, &zero, 1);
  omb_init_i64(&t, "ax2", 1, &one, &two, 1);
  omb_node(&t, "sq", "Squeeze", (const char *[]){"x", "ax2"}, 2, (const char *[]){"sq"}, 1, NULL, 0);
  omb_output(&t, "sq", OMB_FLOAT, -1, NULL);
  omb_node(&e, "id", "Identity", (const char *[]){"x"}, 1, (const char *[]){"id"}, 1, NULL, 0);
  omb_output(&e, "id", OMB_FLOAT, -1, NULL);
  omb_attr a0 = omb_a_int("axis", 0), hs = omb_a_int("hidden_size", LH);
  omb_node(&g, "shape", "Shape", (const char *[]){"x"}, 1, (const char *[]){"shp"}, 1, NULL, 0);
  omb_node(&g, "last", "Gather", (const char *[]){"shp", "i2"}, 2, (const char *[]){"last"}, 1, &a0, 1);
  omb_node(&g, "is1", "Equal", (const char *[]){"last", "one"}, 2, (const char *[]){"c"}, 1, NULL, 0);
  omb_attr br[2] = {omb_a_graph("then_branch", &t), omb_a_graph("else_branch", &e)};
  omb_node(&g, "squeeze_if", "If", (const char *[]){"c"}, 1, (const char *[]){"y"}, 1, br, 2);
  omb_node(&g, "unsq", "Unsqueeze", (const char *[]){"y", "ax0"}, 2, (const char *[]){"u"}, 1, NULL, 0);
  omb_node(&g, "h0", "Gather", (const char *[]){"state", "i0"}, 2, (const char *[]){"h0"}, 1, &a0, 1);
  omb_node(&g, "c0", "Gather", (const char *[]){"state", "i1"}, 2, (const char *[]){"c0"}, 1, &a0, 1);
  omb_node(&g, "h0u", "Unsqueeze", (const char *[]){"h0", "ax0"}, 2, (const char *[]){"h0u"}, 1, NULL, 0);
  omb_node(&g, "c0u", "Unsqueeze", (const char *[]){"c0", "ax0"}, 2, (const char *[]){"c0u"}, 1, NULL, 0);
  omb_node(&g, "lstm", "LSTM", (const char *[]){"u", "W", "R", "B", "", "h0u", "c0u"}, 7,
           (const char *[]){"Y", "Yh", "Yc"}, 3, &hs, 1);
  omb_node(&g, "cat", "Concat", (const char *[]){"Yh", "Yc"}, 2, (const char *[]){"new_state"}, 1, &a0, 1);
  omb_output(&g, "new_state", OMB_FLOAT, 3, (const char *[]){"2", "N", "3"});
  ck_assert_int_eq(omb_write(&g, 13, path), 0);
}

static float sigm(float v) { return 1.0f / (1.0f + expf(-v)); }

START_TEST(test_an_lstm_after_a_squeeze_if_runs_and_refuses_the_other_rank_by_name) {
  char *model = path_in(g_tmp, "vad.onnx"), *exe = path_in(g_tmp, "vad.nimble");
  write_lstm_model(model);
  compile_model(model, exe);
  float x1[XN * XF], st[2 * XN * LH], x3[XN * XF * XT];
  for (int i = 0; i < XN * XF; i++) x1[i] = 0.3f * (float)(i % 5) - 0.6f;
  for (int i = 0; i < 2 * XN * LH; i++) st[i] = 0.1f * (float)(i % 7) - 0.3f;
  for (int i = 0; i < XN * XF * XT; i++) x3[i] = 0.1f * (float)i;
  int64_t d1[3] = {XN, XF, 1}, d3[3] = {XN, XF, XT}, ds[3] = {2, XN, LH};
  char *xin = npy_f32("x", x1, 3, d1), *sin = npy_f32("state", st, 3, ds);
  char *outdir = path_in(g_tmp, "out1"), *text = NULL;
  int rc = nimble_run(exe, outdir, &text, xin, sin, NULL);
  ck_assert_msg(rc == 0, "nimble-run: exit %d:\n%s", rc, text);
  /* One LSTM step (ONNX gate order i, o, f, c; Wb + Rb). */
  float want[2 * XN * LH];
  for (int b = 0; b < XN; b++) {
    float gate[4 * LH];
    for (int j = 0; j < 4 * LH; j++) {
      float acc = lstm_b[j] + lstm_b[4 * LH + j];
      for (int k = 0; k < XF; k++) acc += lstm_w[j * XF + k] * x1[b * XF + k];
      for (int k = 0; k < LH; k++) acc += lstm_r[j * LH + k] * st[b * LH + k];
      gate[j] = acc;
    }
    for (int j = 0; j < LH; j++) {
      float i = sigm(gate[j]), o = sigm(gate[LH + j]), f = sigm(gate[2 * LH + j]), g = tanhf(gate[3 * LH + j]);
      float c = f * st[XN * LH + b * LH + j] + i * g;
      want[b * LH + j] = o * tanhf(c);
      want[XN * LH + b * LH + j] = c;
    }
  }
  nimble_tensor_file_t o;
  read_output(outdir, "new_state", &o);
  ck_assert_int_eq(o.tensor.ndim, 3);
  for (int i = 0; i < 2 * XN * LH; i++)
    ck_assert_msg(fabsf(((const float *)o.tensor.data)[i] - want[i]) <= 1e-5f, "new_state[%d] = %g, want %g", i,
                  ((const float *)o.tensor.data)[i], want[i]);
  nimble_tensor_file_deinit(&o);
  free(text);
  free(outdir);
  free(xin);
  /* T = 3: the If keeps x, Unsqueeze makes it rank 4. */
  xin = npy_f32("x", x3, 3, d3);
  outdir = path_in(g_tmp, "out3");
  rc = nimble_run(exe, outdir, &text, xin, sin, NULL);
  ck_assert_msg(rc != 0, "nimble-run succeeded with a rank-4 LSTM input:\n%s", text);
  ck_assert_msg(strstr(text, "input 0 ('u') of node 'lstm' (LSTM) has rank 4, expected rank 3") != NULL,
                "nimble-run: %s", text);
  free(text);
  free(outdir);
  free(xin);
  free(sin);
  free(exe);
  free(model);
}
END_TEST


/* ---- Loop carried values whose shape changes ------------------------------ */

/* Loop(m, "", carried) with body (it, cin, xin) -> (cout = cin, xout =
 * <op>(xin)); `op` builds xout from "xin" in the body graph. */
static void loop_body(omb_graph *body, void (*op)(omb_graph *)) {
  omb_input(body, "it", OMB_INT64, 0, NULL);
  omb_input(body, "cin", OMB_BOOL, 0, NULL);
  omb_input(body, "xin", OMB_FLOAT, -1, NULL);
  op(body);
  omb_node(body, "keep", "Identity", (const char *[]){"cin"}, 1, (const char *[]){"cout"}, 1, NULL, 0);
  omb_output(body, "cout", OMB_BOOL, 0, NULL);
  omb_output(body, "xout", OMB_FLOAT, -1, NULL);
}

static void append_outer_y(omb_graph *b) {
  omb_attr a0 = omb_a_int("axis", 0);
  omb_node(b, "grow", "Concat", (const char *[]){"xin", "y"}, 2, (const char *[]){"xout"}, 1, &a0, 1);
}

static void add_axis(omb_graph *b) {
  omb_node(b, "unsq", "Unsqueeze", (const char *[]){"xin", "ax0"}, 2, (const char *[]){"xout"}, 1, NULL, 0);
}

START_TEST(test_a_loop_carried_value_that_grows_by_a_symbolic_size_runs) {
  /* x starts as y ([N]) and y is appended each iteration: [N], [2N], ...
   * The body's Concat sees x and y: the parameter x must not keep y's
   * symbol N (a kernel would check them equal: "extent differs from dim
   * 'N'" on the second iteration, as before carried symbols widened). */
  char *model = path_in(g_tmp, "grow.onnx"), *exe = path_in(g_tmp, "grow.nimble");
  omb_graph g = {{0}}, body = {{0}};
  omb_input(&g, "y", OMB_FLOAT, 1, (const char *[]){"N"});
  omb_input(&g, "m", OMB_INT64, 0, NULL);
  loop_body(&body, append_outer_y);
  omb_attr ba = omb_a_graph("body", &body);
  omb_node(&g, "loop", "Loop", (const char *[]){"m", "", "y"}, 3, (const char *[]){"res"}, 1, &ba, 1);
  omb_output(&g, "res", OMB_FLOAT, 1, (const char *[]){""});
  ck_assert_int_eq(omb_write(&g, 13, model), 0);
  compile_model(model, exe);
  float y[3] = {1.5f, -2.0f, 4.0f};
  int64_t n = 3;
  char *yin = npy_f32("y", y, 1, &n), *min = npy_i64_scalar("m", 3);
  char *outdir = path_in(g_tmp, "out"), *text = NULL;
  int rc = nimble_run(exe, outdir, &text, yin, min, NULL);
  ck_assert_msg(rc == 0, "nimble-run: exit %d:\n%s", rc, text);
  nimble_tensor_file_t o;
  read_output(outdir, "res", &o);
  ck_assert_int_eq(o.tensor.ndim, 1);
  ck_assert_int_eq(o.tensor.shape[0], 12);
  for (int i = 0; i < 12; i++) ck_assert_float_eq(((const float *)o.tensor.data)[i], y[i % 3]);
  nimble_tensor_file_deinit(&o);
  free(text);
  free(outdir);
  free(min);
  free(yin);
  free(exe);
  free(model);
}
END_TEST

START_TEST(test_a_loop_carried_value_whose_rank_grows_runs_and_its_output_has_any_rank) {
  /* x: [3]; each iteration adds a leading axis: after m iterations the
   * rank is 1 + m. The model declares the output [1, 1, 3], but the loop
   * gives what it gives (as ONNX Runtime does): [1, 3] for m = 1,
   * [1, 1, 3] for m = 2. */
  char *model = path_in(g_tmp, "rank_grow.onnx"), *exe = path_in(g_tmp, "rank_grow.nimble");
  omb_graph g = {{0}}, body = {{0}};
  omb_input(&g, "x", OMB_FLOAT, 1, (const char *[]){"3"});
  omb_input(&g, "m", OMB_INT64, 0, NULL);
  int64_t one = 1, zero = 0;
  omb_init_i64(&g, "ax0", 1, &one, &zero, 1);
  loop_body(&body, add_axis);
  omb_attr ba = omb_a_graph("body", &body);
  omb_node(&g, "loop", "Loop", (const char *[]){"m", "", "x"}, 3, (const char *[]){"res"}, 1, &ba, 1);
  omb_output(&g, "res", OMB_FLOAT, 3, (const char *[]){"1", "1", "3"});
  ck_assert_int_eq(omb_write(&g, 13, model), 0);
  compile_model(model, exe);
  float x[3] = {0.25f, 7.0f, -1.0f};
  int64_t n = 3;
  char *xin = npy_f32("x", x, 1, &n);
  for (int m = 1; m <= 2; m++) {
    char *min = npy_i64_scalar("m", m), dir[16];
    snprintf(dir, sizeof dir, "out%d", m);
    char *outdir = path_in(g_tmp, dir), *text = NULL;
    int rc = nimble_run(exe, outdir, &text, xin, min, NULL);
    ck_assert_msg(rc == 0, "nimble-run (m = %d): exit %d:\n%s", m, rc, text);
    nimble_tensor_file_t o;
    read_output(outdir, "res", &o);
    ck_assert_int_eq(o.tensor.ndim, 1 + m);
    for (int d = 0; d < m; d++) ck_assert_int_eq(o.tensor.shape[d], 1);
    ck_assert_int_eq(o.tensor.shape[m], 3);
    for (int i = 0; i < 3; i++) ck_assert_float_eq(((const float *)o.tensor.data)[i], x[i]);
    nimble_tensor_file_deinit(&o);
    free(text);
    free(outdir);
    free(min);
  }
  free(xin);
  free(exe);
  free(model);
}
END_TEST

START_TEST(test_an_entry_returns_a_tensor_of_unknown_rank_and_refuses_to_take_one) {
  /* An output may have any rank: the runtime checks its dtype only. */
  char *src = path_in(g_tmp, "unranked_out.nir"), *exe = path_in(g_tmp, "unranked_out.nimble");
  write_text(src,
             "def @main(%c: Tensor[(), float32], %a: Tensor[(2,), float32], %b: Tensor[(2, 2), float32]) {\n"
             "  if (greater(%c, 0.0)) { %a } else { %b }\n"
             "}\n");
  compile_model(src, exe);
  float a[2] = {1, 2}, b[4] = {3, 4, 5, 6};
  int64_t da = 2, db[2] = {2, 2};
  char *ain = npy_f32("a", a, 1, &da), *bin = npy_f32("b", b, 2, db);
  for (int then = 0; then <= 1; then++) {
    float cv = then ? 1.0f : -1.0f;
    char *cin = npy_f32("c", &cv, 0, NULL), *outdir = path_in(g_tmp, then ? "o1" : "o0"), *text = NULL;
    int rc = nimble_run(exe, outdir, &text, cin, ain, bin, NULL);
    ck_assert_msg(rc == 0, "nimble-run: exit %d:\n%s", rc, text);
    nimble_tensor_file_t o;
    read_output(outdir, "output0", &o);
    ck_assert_int_eq(o.tensor.ndim, then ? 1 : 2);
    for (int i = 0; i < (then ? 2 : 4); i++) ck_assert_float_eq(((const float *)o.tensor.data)[i], then ? a[i] : b[i]);
    nimble_tensor_file_deinit(&o);
    free(text);
    free(outdir);
    free(cin);
  }
  free(ain);
  free(bin);
  /* An input must say what the caller gives. */
  char *src2 = path_in(g_tmp, "unranked_in.nir"), *exe2 = path_in(g_tmp, "unranked_in.nimble");
  write_text(src2, "def @main(%x: Tensor[*, float32]) { shape_of(%x) }\n");
  char *nimble = build_path("client/nimble");
  char *argv[] = {nimble, "compile", src2, "--target=x86", "-o", exe2, NULL};
  char *text = NULL;
  int rc = run_prog(argv, &text);
  ck_assert_msg(rc != 0, "nimble compile succeeded:\n%s", text);
  ck_assert_msg(strstr(text, "entry 'main': input 'x' has type Tensor[*, float32]: an entry's inputs have a known rank") !=
                    NULL,
                "nimble compile: %s", text);
  free(text);
  free(nimble);
  free(exe2);
  free(src2);
  free(exe);
  free(src);
}
END_TEST

START_TEST(test_an_if_with_a_constant_condition_compiles_though_the_other_ranks_check_is_dead) {
  /* c is a constant true: folding keeps then_branch (y = ReduceSum(x,
   * axes=[2]), rank 2), and the ReduceSum over y converted for rank 3 is
   * now a path that never runs, whose check_rank is statically wrong: it
   * must not fail the compile. total = sum(x). */
  char *model = path_in(g_tmp, "const_if.onnx"), *exe = path_in(g_tmp, "const_if.nimble");
  omb_graph g = {{0}}, t = {{0}}, e = {{0}};
  omb_input(&g, "x", OMB_FLOAT, 3, DX);
  uint8_t yes = 1;
  omb_init(&g, "c", OMB_BOOL, 0, NULL, &yes, 1);
  int64_t ax2 = 2, one = 1;
  omb_init_i64(&t, "ax2", 1, &one, &ax2, 1);
  omb_attr kd = omb_a_int("keepdims", 0);
  omb_node(&t, "rs", "ReduceSum", (const char *[]){"x", "ax2"}, 2, (const char *[]){"t_out"}, 1, &kd, 1);
  omb_output(&t, "t_out", OMB_FLOAT, -1, NULL);
  omb_node(&e, "relu", "Relu", (const char *[]){"x"}, 1, (const char *[]){"e_out"}, 1, NULL, 0);
  omb_output(&e, "e_out", OMB_FLOAT, -1, NULL);
  omb_attr br[2] = {omb_a_graph("then_branch", &t), omb_a_graph("else_branch", &e)};
  omb_node(&g, "branch", "If", (const char *[]){"c"}, 1, (const char *[]){"y"}, 1, br, 2);
  omb_node(&g, "sum", "ReduceSum", (const char *[]){"y"}, 1, (const char *[]){"total"}, 1, &kd, 1);
  omb_output(&g, "total", OMB_FLOAT, 0, NULL);
  ck_assert_int_eq(omb_write(&g, 13, model), 0);
  compile_model(model, exe);
  float x[XN * XF * XT], want = 0;
  if_rank_input(x);
  for (int i = 0; i < XN * XF * XT; i++) want += x[i];
  int64_t xd[3] = {XN, XF, XT};
  char *xin = npy_f32("x", x, 3, xd), *outdir = path_in(g_tmp, "out"), *text = NULL;
  int rc = nimble_run(exe, outdir, &text, xin, NULL);
  ck_assert_msg(rc == 0, "nimble-run: exit %d:\n%s", rc, text);
  nimble_tensor_file_t o;
  read_output(outdir, "total", &o);
  ck_assert_float_eq_tol(*(const float *)o.tensor.data, want, 1e-4f);
  nimble_tensor_file_deinit(&o);
  free(text);
  free(outdir);
  free(xin);
  free(exe);
  free(model);
}
END_TEST


START_TEST(test_an_lstm_inside_an_if_branch_runs_either_branch) {
  /* x [T, B, 4], s: then_branch runs LSTM(x) (hidden 3, zero initial
   * state, weights from the main graph) and gives Squeeze(Y_h, [0]) [B, 3];
   * else_branch gives ReduceMean(x, axes=[0]) @ P [B, 3]. */
  enum { T = 5, B = 2 };
  for (int i = 0; i < 4 * LH * XF; i++) lstm_w[i] = 0.05f * (float)((i * 7) % 13) - 0.3f;
  for (int i = 0; i < 4 * LH * LH; i++) lstm_r[i] = 0.04f * (float)((i * 5) % 11) - 0.2f;
  for (int i = 0; i < 8 * LH; i++) lstm_b[i] = 0.01f * (float)(i % 5);
  float p[XF * LH];
  for (int i = 0; i < XF * LH; i++) p[i] = 0.1f * (float)(i % 4) - 0.15f;
  char *model = path_in(g_tmp, "lstm_in_if.onnx"), *exe = path_in(g_tmp, "lstm_in_if.nimble");
  omb_graph g = {{0}}, t = {{0}}, e = {{0}};
  omb_input(&g, "x", OMB_FLOAT, 3, (const char *[]){"T", "B", "4"});
  omb_input(&g, "s", OMB_FLOAT, 0, NULL);
  int64_t wd[] = {1, 4 * LH, XF}, rd[] = {1, 4 * LH, LH}, bd[] = {1, 8 * LH}, pd[] = {XF, LH}, one = 1, zero = 0;
  float fzero = 0;
  omb_init_f32(&g, "W", 3, wd, lstm_w, 4 * LH * XF);
  omb_init_f32(&g, "R", 3, rd, lstm_r, 4 * LH * LH);
  omb_init_f32(&g, "B", 2, bd, lstm_b, 8 * LH);
  omb_init_f32(&g, "P", 2, pd, p, XF * LH);
  omb_init_f32(&g, "zero", 0, NULL, &fzero, 1);
  omb_init_i64(&g, "ax0", 1, &one, &zero, 1);
  omb_attr hs = omb_a_int("hidden_size", LH), kd = omb_a_int("keepdims", 0);
  omb_node(&t, "lstm", "LSTM", (const char *[]){"x", "W", "R", "B"}, 4, (const char *[]){"Y", "Yh"}, 2, &hs, 1);
  omb_node(&t, "sq", "Squeeze", (const char *[]){"Yh", "ax0"}, 2, (const char *[]){"t_out"}, 1, NULL, 0);
  omb_output(&t, "t_out", OMB_FLOAT, -1, NULL);
  int64_t axes0 = 0;
  omb_attr ax = omb_a_ints("axes", &axes0, 1);
  omb_attr mean_attrs[2] = {ax, kd};
  omb_node(&e, "mean", "ReduceMean", (const char *[]){"x"}, 1, (const char *[]){"m"}, 1, mean_attrs, 2);
  omb_node(&e, "proj", "MatMul", (const char *[]){"m", "P"}, 2, (const char *[]){"e_out"}, 1, NULL, 0);
  omb_output(&e, "e_out", OMB_FLOAT, -1, NULL);
  omb_node(&g, "gt", "Greater", (const char *[]){"s", "zero"}, 2, (const char *[]){"c"}, 1, NULL, 0);
  omb_attr br[2] = {omb_a_graph("then_branch", &t), omb_a_graph("else_branch", &e)};
  omb_node(&g, "branch", "If", (const char *[]){"c"}, 1, (const char *[]){"y"}, 1, br, 2);
  omb_output(&g, "y", OMB_FLOAT, 2, (const char *[]){"B", "3"});
  ck_assert_int_eq(omb_write(&g, 13, model), 0);
  compile_model(model, exe);
  float x[T * B * XF];
  for (int i = 0; i < T * B * XF; i++) x[i] = 0.07f * (float)((i * 3) % 17) - 0.5f;
  /* The two branches by hand. */
  float want_then[B * LH], want_else[B * LH];
  for (int b = 0; b < B; b++) {
    float h[LH] = {0}, cst[LH] = {0};
    for (int s = 0; s < T; s++) {
      const float *xs = &x[(s * B + b) * XF];
      float gate[4 * LH];
      for (int j = 0; j < 4 * LH; j++) {
        float acc = lstm_b[j] + lstm_b[4 * LH + j];
        for (int k = 0; k < XF; k++) acc += lstm_w[j * XF + k] * xs[k];
        for (int k = 0; k < LH; k++) acc += lstm_r[j * LH + k] * h[k];
        gate[j] = acc;
      }
      for (int j = 0; j < LH; j++) {
        float i = sigm(gate[j]), o = sigm(gate[LH + j]), f = sigm(gate[2 * LH + j]), gg = tanhf(gate[3 * LH + j]);
        cst[j] = f * cst[j] + i * gg;
        h[j] = o * tanhf(cst[j]);
      }
    }
    for (int j = 0; j < LH; j++) {
      want_then[b * LH + j] = h[j];
      float acc = 0;
      for (int k = 0; k < XF; k++) {
        float m = 0;
        for (int s = 0; s < T; s++) m += x[(s * B + b) * XF + k];
        acc += m / T * p[k * LH + j];
      }
      want_else[b * LH + j] = acc;
    }
  }
  int64_t xd[3] = {T, B, XF};
  char *xin = npy_f32("x", x, 3, xd);
  for (int then = 0; then <= 1; then++) {
    float sv = then ? 1.0f : -1.0f;
    char *sin = npy_f32("s", &sv, 0, NULL), *outdir = path_in(g_tmp, then ? "o1" : "o0"), *text = NULL;
    int rc = nimble_run(exe, outdir, &text, xin, sin, NULL);
    ck_assert_msg(rc == 0, "nimble-run: exit %d:\n%s", rc, text);
    nimble_tensor_file_t o;
    read_output(outdir, "y", &o);
    ck_assert_int_eq(o.tensor.ndim, 2);
    const float *want = then ? want_then : want_else;
    for (int i = 0; i < B * LH; i++)
      ck_assert_msg(fabsf(((const float *)o.tensor.data)[i] - want[i]) <= 1e-5f, "%s y[%d] = %g, want %g",
                    then ? "then" : "else", i, ((const float *)o.tensor.data)[i], want[i]);
    nimble_tensor_file_deinit(&o);
    free(text);
    free(outdir);
    free(sin);
  }
  free(xin);
  free(exe);
  free(model);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("nimble_run_processes");
  TCase *tc = tcase_create("processes");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_a_program_calling_log_and_pow_runs_in_nimble_run);
  tcase_add_test(tc, test_an_if_giving_rank_2_or_3_runs_either_branch_through_nodes_that_take_both);
  tcase_add_test(tc, test_a_node_that_needs_rank_3_checks_it_at_run_time_and_names_itself);
  tcase_add_test(tc, test_an_lstm_after_a_squeeze_if_runs_and_refuses_the_other_rank_by_name);
  tcase_add_test(tc, test_an_lstm_inside_an_if_branch_runs_either_branch);
  tcase_add_test(tc, test_a_loop_carried_value_that_grows_by_a_symbolic_size_runs);
  tcase_add_test(tc, test_a_loop_carried_value_whose_rank_grows_runs_and_its_output_has_any_rank);
  tcase_add_test(tc, test_an_entry_returns_a_tensor_of_unknown_rank_and_refuses_to_take_one);
  tcase_add_test(tc, test_an_if_with_a_constant_condition_compiles_though_the_other_ranks_check_is_dead);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
