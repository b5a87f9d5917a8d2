/* The ONNX backend node suite run end to end: every case's model.onnx is
 * compiled for x86 in-process (nimble_compile_file), loaded into the
 * runtime, fed each test_data_set_<k>/input_<j>.pb, and every output is
 * compared with the case's output_<j>.pb, as ONNX's own backend test
 * runner does (rtol 1e-3, atol 1e-7, NaN equals NaN; exact for integers
 * and bools). The expected outputs come from ONNX's reference
 * implementations (scripts/gen_onnx_node_tests.py), never from Nimble.
 *
 * Each case ends as one of
 *   pass         every output of every data set matches;
 *   fail         wrong values, shapes or dtypes, a compile error outside
 *                the import (e.g. INTERNAL in codegen), a runtime error,
 *                a crash or a timeout (the message says which);
 *   unsupported  the import or type-checking fails, or the compiler
 *                answers UNIMPLEMENTED, or an input is not a tensor.
 * Every case runs in a forked child with an alarm
 * ($NIMBLE_NODE_RUN_CASE_TIMEOUT seconds, default 60), so a crash or a hang
 * costs that case only. Up to $NIMBLE_NODE_RUN_JOBS children run at once
 * (default 2).
 *
 * The per-case results go to $NIMBLE_NODE_RUN_OUT (TSV: case, result, op
 * types, message), from which scripts/onnx_run_coverage.py writes
 * docs/onnx-backend.md. The suite fails when fewer cases pass than the
 * committed floor in $NIMBLE_NODE_RUN_FLOOR. $NIMBLE_NODE_RUN_FILTER (a
 * substring) restricts the run to matching cases, for debugging; the floor
 * is then not enforced. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nimble/compile.h"
#include "nimble/onnx_model.h"
#include "nimble/runtime.h"
#include "nimble/tensor_io.h"
#include "nimble_test.h"

#define RESULT_MAX 900

/* ---- comparing one output ------------------------------------------------ */

static double half_to_double(uint16_t h) {
  int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  double v;
  if (exp == 0) v = ldexp((double)frac, -24);
  else if (exp == 31) v = frac ? NAN : INFINITY;
  else v = ldexp((double)(frac | 0x400), exp - 25);
  return sign ? -v : v;
}

static bool dtype_is_bool(DLDataType t) { return t.code == kDLUInt && t.bits == 1; }

/* The runtime keeps bools as one byte ({kDLUInt, 8}); tensor_io says
 * {kDLUInt, 1}. Same bytes, so these count as equal. */
static bool dtype_same(DLDataType got, DLDataType want) {
  if (dtype_is_bool(want)) return got.code == kDLUInt && (got.bits == 8 || got.bits == 1);
  /* bfloat16 results are stored as UINT16 bit patterns in ONNX's suite
   * (NumPy has no bfloat16); compared bit for bit. */
  if (got.code == kDLBfloat && got.bits == 16 && want.code == kDLUInt && want.bits == 16) return true;
  return got.code == want.code && got.bits == want.bits && got.lanes == want.lanes;
}

static double float_at(const void *p, DLDataType t, size_t i) {
  if (t.bits == 16) return half_to_double(((const uint16_t *)p)[i]);
  if (t.bits == 32) return (double)((const float *)p)[i];
  return ((const double *)p)[i];
}

/* ONNX's numpy.testing.assert_allclose(rtol, atol) with equal_nan: NaN
 * equals NaN, an infinity only the same infinity. */
static bool close_enough(double got, double want, double rtol, double atol) {
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
  if (isinf(want) || isinf(got)) return got == want;
  return fabs(got - want) <= atol + rtol * fabs(want);
}

/* Compares `got` with `want`; on mismatch writes the first difference into
 * msg and returns false. */
static bool compare_output(size_t k, const DLTensor *got, const DLTensor *want, double rtol, double atol, char *msg,
                           size_t size) {
  char gs[128], ws[128];
  nimble_tensor_io_format_shape(got, gs, sizeof gs);
  nimble_tensor_io_format_shape(want, ws, sizeof ws);
  bool same_shape = got->ndim == want->ndim;
  for (int d = 0; same_shape && d < want->ndim; d++) same_shape = got->shape[d] == want->shape[d];
  if (!same_shape) {
    snprintf(msg, size, "output %zu: shape %s, expected %s", k, gs, ws);
    return false;
  }
  if (!dtype_same(got->dtype, want->dtype)) {
    snprintf(msg, size, "output %zu: dtype code %d bits %d, expected %s", k, got->dtype.code, got->dtype.bits,
             nimble_tensor_io_dtype_name(want->dtype));
    return false;
  }
  size_t n = 1;
  for (int d = 0; d < want->ndim; d++) n *= (size_t)want->shape[d];
  const char *g = (const char *)got->data + got->byte_offset;
  const char *w = (const char *)want->data + want->byte_offset;
  if (want->dtype.code == kDLFloat) {
    for (size_t i = 0; i < n; i++) {
      double a = float_at(g, want->dtype, i), b = float_at(w, want->dtype, i);
      if (!close_enough(a, b, rtol, atol)) {
        snprintf(msg, size, "output %zu %s: element %zu is %.9g, expected %.9g", k, ws, i, a, b);
        return false;
      }
    }
    return true;
  }
  size_t es = dtype_is_bool(want->dtype) ? 1 : (size_t)want->dtype.bits / 8;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(g + i * es, w + i * es, es) != 0) {
      long long a = 0, b = 0;
      memcpy(&a, g + i * es, es < sizeof a ? es : sizeof a);
      memcpy(&b, w + i * es, es < sizeof b ? es : sizeof b);
      snprintf(msg, size, "output %zu %s: element %zu is %lld, expected %lld (%s)", k, ws, i, a, b,
               nimble_tensor_io_dtype_name(want->dtype));
      return false;
    }
  }
  return true;
}

/* ---- one case, in the child ---------------------------------------------- */

typedef struct {
  const char *phase;
} progress_t;

static void on_progress(void *user, const char *phase, int percent) {
  if (percent == 0) ((progress_t *)user)->phase = phase;
}

/* Runs every data set of the case in `dir` on `exe`. */
static const char *run_data_sets(const char *dir, const nimble_onnx_graph *g, nimble_executable *exe, char *msg,
                                 size_t size) {
  nimble_vm *vm = NULL;
  nimble_status_t s = nimble_vm_create(exe, NULL, &vm);
  if (s) {
    snprintf(msg, size, "vm: %s", nimble_status_message(s));
    nimble_status_free(s);
    return "fail";
  }
  const char *result = "pass";
  int sets = 0;
  for (int ds = 0; ds < 64 && !strcmp(result, "pass"); ds++) {
    char set_dir[1200];
    snprintf(set_dir, sizeof set_dir, "%s/test_data_set_%d", dir, ds);
    struct stat st;
    if (stat(set_dir, &st) != 0) break;
    sets++;
    nimble_tensor_file_t ins[64];
    size_t n_in = 0;
    memset(ins, 0, sizeof ins);
    for (size_t j = 0; j < 64; j++) {
      char path[1300];
      snprintf(path, sizeof path, "%s/input_%zu.pb", set_dir, j);
      if (stat(path, &st) != 0) break;
      s = nimble_tensor_io_read_pb(path, &ins[n_in]);
      if (s) {
        snprintf(msg, size, "input %zu is not a tensor (%s)", j, nimble_status_message(s));
        nimble_status_free(s);
        result = "unsupported";
        break;
      }
      n_in++;
      DLTensor *t = &ins[n_in - 1].tensor;
      if (dtype_is_bool(t->dtype)) t->dtype.bits = 8;
      const char *name = j < g->n_inputs ? g->inputs[j]->name : "";
      /* NumPy has no bfloat16: ONNX's suite stores bfloat16 data as UINT16
       * bit patterns. Where the model says BFLOAT16, they are that. */
      const nimble_onnx_type_t *it = j < g->n_inputs ? g->inputs[j]->type : NULL;
      if (it && it->kind == NIMBLE_ONNX_TYPE_TENSOR && it->elem_type == NIMBLE_ONNX_BFLOAT16 &&
          t->dtype.code == kDLUInt && t->dtype.bits == 16)
        t->dtype.code = kDLBfloat;
      s = nimble_vm_set_input_by_name(vm, "main", name, t);
      if (s && nimble_status_code(s) == NIMBLE_NOT_FOUND) {
        nimble_status_free(s);
        s = nimble_vm_set_input(vm, "main", (uint32_t)j, t);
      }
      if (s) {
        snprintf(msg, size, "data set %d: input %zu ('%s'): %s", ds, j, name, nimble_status_message(s));
        nimble_status_free(s);
        result = "fail";
        break;
      }
    }
    if (!strcmp(result, "pass")) {
      s = nimble_vm_invoke(vm, "main");
      if (s) {
        snprintf(msg, size, "data set %d: invoke: %s", ds, nimble_status_message(s));
        nimble_status_free(s);
        result = "fail";
      }
    }
    for (size_t k = 0; !strcmp(result, "pass"); k++) {
      char path[1300];
      snprintf(path, sizeof path, "%s/output_%zu.pb", set_dir, k);
      if (stat(path, &st) != 0) {
        if (k != nimble_vm_num_outputs(vm)) {
          snprintf(msg, size, "data set %d: %u outputs, expected %zu", ds, nimble_vm_num_outputs(vm), k);
          result = "fail";
        }
        break;
      }
      nimble_tensor_file_t want;
      s = nimble_tensor_io_read_pb(path, &want);
      if (s) {
        snprintf(msg, size, "expected output %zu is not a tensor (%s)", k, nimble_status_message(s));
        nimble_status_free(s);
        result = "unsupported";
        break;
      }
      DLManagedTensor *got = NULL;
      if (k >= nimble_vm_num_outputs(vm)) {
        snprintf(msg, size, "data set %d: %u outputs, expected more", ds, nimble_vm_num_outputs(vm));
        result = "fail";
      } else if ((s = nimble_vm_take_output(vm, (uint32_t)k, &got)) != NULL) {
        snprintf(msg, size, "data set %d: output %zu: %s", ds, k, nimble_status_message(s));
        nimble_status_free(s);
        result = "fail";
      } else {
        char why[600];
        if (!compare_output(k, &got->dl_tensor, &want.tensor, 1e-3, 1e-7, why, sizeof why)) {
          snprintf(msg, size, "data set %d: %s", ds, why);
          result = "fail";
        }
        got->deleter(got);
      }
      nimble_tensor_file_deinit(&want);
    }
    for (size_t j = 0; j < n_in; j++) nimble_tensor_file_deinit(&ins[j]);
  }
  if (!sets && !strcmp(result, "pass")) {
    snprintf(msg, size, "no test_data_set_0");
    result = "fail";
  }
  nimble_vm_destroy(vm);
  return result;
}

/* The whole case; writes "RESULT\tMESSAGE" to fd. */
static void run_case_child(const char *dir, int fd) {
  char msg[RESULT_MAX - 32] = "";
  const char *result;
  char path[1100];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  nimble_onnx_model *model = NULL;
  nimble_status_t s = nimble_onnx_model_load_file(path, &model);
  if (s) {
    snprintf(msg, sizeof msg, "load: %s", nimble_status_message(s));
    nimble_status_free(s);
    result = "unsupported";
  } else {
    nimble_compile_options_t o;
    nimble_compile_options_init(&o);
    o.target = "x86";
    progress_t prog = {"import"};
    o.progress = on_progress;
    o.progress_user = &prog;
    nimble_compile_result *r = NULL;
    s = nimble_compile_file(path, &o, &r);
    nimble_executable *exe = NULL;
    if (!s) {
      void *image = NULL;
      size_t size = 0;
      s = nimble_compile_result_serialize(r, &image, &size);
      nimble_compile_result_destroy(r);
      if (!s) s = nimble_executable_load_memory(image, size, 0, &exe);
      free(image);
      if (s) prog.phase = "load";
    }
    if (s) {
      bool unsupported = nimble_status_code(s) == NIMBLE_UNIMPLEMENTED || !strcmp(prog.phase, "import") ||
                         !strcmp(prog.phase, "typing");
      result = unsupported ? "unsupported" : "fail";
      snprintf(msg, sizeof msg, "%s: %s: %s", prog.phase, nimble_status_code_name(nimble_status_code(s)),
               nimble_status_message(s));
      nimble_status_free(s);
    } else {
      result = run_data_sets(dir, nimble_onnx_model_graph(model), exe, msg, sizeof msg);
      nimble_executable_release(exe);
    }
    nimble_onnx_model_destroy(model);
  }
  char line[RESULT_MAX];
  int n = snprintf(line, sizeof line, "%s\t%s", result, msg);
  if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
  ssize_t w = write(fd, line, (size_t)n);
  (void)w;
}

/* ---- the suite ----------------------------------------------------------- */

typedef struct {
  char *name;
  char ops[512];
  char result[RESULT_MAX];
  pid_t pid;
  int fd;
  double started;
} node_case_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The distinct op types of the main graph, comma-separated. */
static void op_list(const char *dir, char *buf, size_t size) {
  char path[1100];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  buf[0] = 0;
  nimble_onnx_model *model;
  nimble_status_t s = nimble_onnx_model_load_file(path, &model);
  if (s) {
    nimble_status_free(s);
    return;
  }
  const nimble_onnx_graph *g = nimble_onnx_model_graph(model);
  size_t len = 0;
  for (size_t i = 0; i < g->n_nodes; i++) {
    const char *op = g->nodes[i]->op_type;
    bool seen = false;
    for (size_t k = 0; k < i && !seen; k++) seen = strcmp(g->nodes[k]->op_type, op) == 0;
    if (seen) continue;
    int n = snprintf(buf + len, size - len, "%s%s", len ? "," : "", op);
    if (n < 0 || (size_t)n >= size - len) break;
    len += (size_t)n;
  }
  nimble_onnx_model_destroy(model);
}

static void clean(char *s) {
  for (; *s; s++)
    if (*s == '\t' || *s == '\n' || *s == '\r') *s = ' ';
}

/* Collects the child of c: its line, or how it died. */
static void finish_case(node_case_t *c, int status) {
  char buf[RESULT_MAX];
  ssize_t got = 0, r;
  while (got < (ssize_t)sizeof buf - 1 && (r = read(c->fd, buf + got, sizeof buf - 1 - (size_t)got)) > 0) got += r;
  buf[got > 0 ? got : 0] = 0;
  close(c->fd);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
    snprintf(c->result, sizeof c->result, "fail\ttimed out after %.0f s", now_s() - c->started);
  else if (WIFSIGNALED(status))
    snprintf(c->result, sizeof c->result, "fail\tcrashed with signal %d (%s)", WTERMSIG(status),
             strsignal(WTERMSIG(status)));
  else if (got <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    snprintf(c->result, sizeof c->result, "fail\tthe case's child exited with status %d and no result",
             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  else
    snprintf(c->result, sizeof c->result, "%s", buf);
  char *tab = strchr(c->result, '\t');
  if (tab) clean(tab + 1);
}

static long env_long(const char *name, long dflt) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : dflt;
}

START_TEST(test_node_suite_runs_and_passes_at_least_the_committed_floor) {
  const char *root = getenv("NIMBLE_ONNX_NODE_TESTS");
  ck_assert_msg(root && root[0], "NIMBLE_ONNX_NODE_TESTS is not set");
  const char *filter = getenv("NIMBLE_NODE_RUN_FILTER");
  if (filter && !*filter) filter = NULL;
  long jobs = env_long("NIMBLE_NODE_RUN_JOBS", 2);
  long case_timeout = env_long("NIMBLE_NODE_RUN_CASE_TIMEOUT", 60);
  if (jobs < 1) jobs = 1;
  DIR *d = opendir(root);
  ck_assert_msg(d != NULL, "cannot open %s: %s", root, strerror(errno));
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "test_", 5) != 0) continue;
    if (filter && !strstr(e->d_name, filter)) continue;
    if (n == cap) {
      names = realloc(names, (cap = cap ? cap * 2 : 1024) * sizeof(*names));
      ck_assert_ptr_nonnull(names);
    }
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  ck_assert_msg(n > 0, "no cases under %s", root);
  qsort(names, n, sizeof(*names), compare_names);
  node_case_t *cases = calloc(n, sizeof *cases);
  ck_assert_ptr_nonnull(cases);
  double t0 = now_s();
  size_t next = 0, running = 0;
  fflush(stdout);
  fflush(stderr);
  while (next < n || running > 0) {
    while (next < n && running < (size_t)jobs) {
      node_case_t *c = &cases[next];
      c->name = names[next];
      char dir[1024];
      snprintf(dir, sizeof dir, "%s/%s", root, c->name);
      op_list(dir, c->ops, sizeof c->ops);
      int fds[2];
      ck_assert_int_eq(pipe(fds), 0);
      c->started = now_s();
      pid_t pid = fork();
      ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
      if (pid == 0) {
        close(fds[0]);
        alarm((unsigned)case_timeout);
        run_case_child(dir, fds[1]);
        close(fds[1]);
        /* _exit: no atexit handlers (Check's, the sanitizers' leak scan of
         * a child that is about to vanish) run twice. */
        _exit(0);
      }
      close(fds[1]);
      c->pid = pid;
      c->fd = fds[0];
      next++;
      running++;
    }
    int status;
    pid_t done = waitpid(-1, &status, 0);
    if (done < 0 && errno == EINTR) continue;
    ck_assert_msg(done > 0, "waitpid: %s", strerror(errno));
    for (size_t i = 0; i < next; i++) {
      if (cases[i].pid == done) {
        finish_case(&cases[i], status);
        cases[i].pid = 0;
        running--;
        break;
      }
    }
  }
  double elapsed = now_s() - t0;

  size_t pass = 0, fail = 0, unsupported = 0;
  const char *out_path = getenv("NIMBLE_NODE_RUN_OUT");
  FILE *out = out_path && !filter ? fopen(out_path, "w") : NULL;
  for (size_t i = 0; i < n; i++) {
    node_case_t *c = &cases[i];
    const char *res = c->result;
    const char *tab = strchr(res, '\t');
    size_t rl = tab ? (size_t)(tab - res) : strlen(res);
    if (rl == 4 && !strncmp(res, "pass", 4)) pass++;
    else if (rl == 11 && !strncmp(res, "unsupported", 11)) unsupported++;
    else fail++;
    if (out) fprintf(out, "%s\t%.*s\t%s\t%s\n", c->name, (int)rl, res, c->ops, tab ? tab + 1 : "");
    if (filter) printf("%s\t%s\n", c->name, res);
    free(c->name);
  }
  free(cases);
  free(names);
  if (out) fclose(out);
  printf("ONNX node suite run: %zu of %zu cases pass, %zu fail, %zu unsupported (%.1f s, %ld jobs)\n", pass, n,
         fail, unsupported, elapsed, jobs);
  if (filter) return;
  long floor_count = 0;
  const char *floor_path = getenv("NIMBLE_NODE_RUN_FLOOR");
  FILE *ff = floor_path ? fopen(floor_path, "r") : NULL;
  ck_assert_msg(ff != NULL, "cannot read the pass floor (NIMBLE_NODE_RUN_FLOOR)");
  ck_assert_int_eq(fscanf(ff, "%ld", &floor_count), 1);
  fclose(ff);
  ck_assert_msg((long)pass >= floor_count, "node suite passes dropped: %zu cases pass, the floor is %ld", pass,
                floor_count);
}
END_TEST

/* The comparison against hand-made tensors: ONNX's tolerance, NaN, bool. */
START_TEST(test_compare_follows_onnx_tolerances) {
  int64_t shape[1] = {3};
  float want_f[3] = {1.0f, NAN, -2.0f};
  float got_f[3] = {1.0009f, NAN, -2.0f};
  DLTensor want = {want_f, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
  DLTensor got = want;
  got.data = got_f;
  char msg[256];
  ck_assert(compare_output(0, &got, &want, 1e-3, 1e-7, msg, sizeof msg));
  got_f[0] = 1.0011f; /* 1.1e-3 > 1e-7 + 1e-3 * 1 */
  ck_assert(!compare_output(0, &got, &want, 1e-3, 1e-7, msg, sizeof msg));
  ck_assert_msg(strstr(msg, "element 0") != NULL, "%s", msg);
  got_f[0] = 1.0f;
  got_f[1] = 0.0f; /* NaN only equals NaN */
  ck_assert(!compare_output(0, &got, &want, 1e-3, 1e-7, msg, sizeof msg));
  uint8_t wb[3] = {1, 0, 1}, gb[3] = {1, 0, 1};
  DLTensor wbool = {wb, {kDLCPU, 0}, 1, {kDLUInt, 1, 1}, shape, NULL, 0};
  DLTensor gbool = {gb, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, shape, NULL, 0};
  ck_assert(compare_output(0, &gbool, &wbool, 1e-3, 1e-7, msg, sizeof msg));
  gb[2] = 0;
  ck_assert(!compare_output(0, &gbool, &wbool, 1e-3, 1e-7, msg, sizeof msg));
  int64_t other[1] = {2};
  gbool.shape = other;
  ck_assert(!compare_output(0, &gbool, &wbool, 1e-3, 1e-7, msg, sizeof msg));
  ck_assert_msg(strstr(msg, "shape [2], expected [3]") != NULL, "%s", msg);
  /* 0x3c00 is 1.0 and 0x3e00 1.5 in IEEE half precision. */
  uint16_t wh[1] = {0x3c00}, gh[1] = {0x3e00};
  DLTensor whalf = {wh, {kDLCPU, 0}, 1, {kDLFloat, 16, 1}, shape, NULL, 0};
  DLTensor ghalf = whalf;
  ghalf.data = gh;
  shape[0] = 1;
  ck_assert(!compare_output(0, &ghalf, &whalf, 1e-3, 1e-7, msg, sizeof msg));
  ck_assert_msg(strstr(msg, "is 1.5, expected 1") != NULL, "%s", msg);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("onnx_node_run");
  TCase *tc = tcase_create("run");
  tcase_set_timeout(tc, 1500);
  tcase_add_test(tc, test_compare_follows_onnx_tolerances);
  tcase_add_test(tc, test_node_suite_runs_and_passes_at_least_the_committed_floor);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
