/* The ONNX backend node suite run end to end on the user's path: for
 * every case, `nimble compile model.onnx --target=T -o m.nimble` and then,
 * per test_data_set_<k>, `nimble-run m.nimble --input NAME=input_<j>.pb ...
 * --output NAME=out_<j>.npy ...`, each its own process (for aarch64 the
 * aarch64 nimble-run under $NIMBLE_RUN_EMULATOR, qemu-aarch64), exactly
 * as a user runs them. Every written output is compared with the case's
 * output_<j>.pb as ONNX's own backend test runner does (rtol 1e-3, atol
 * 1e-7, NaN equals NaN; exact for integers and bools; the dtype must be
 * the ONNX one: a BOOL output must come back as NumPy bool). The expected
 * outputs come from ONNX's reference implementations
 * (scripts/gen_onnx_node_tests.py), never from Nimble.
 *
 * Each case ends as one of
 *   pass         every output of every data set matches;
 *   fail         wrong values, shapes or dtypes, a compile error that is
 *                not "unsupported", an executable that nimble-run cannot
 *                load or run, a crash or a timeout (the message says which);
 *   unsupported  `nimble compile` says the model is not importable or
 *                typable (exit 3) or that it asks for something the
 *                compiler does not cover ("unsupported" in its message),
 *                or an input is not a tensor.
 * Every case runs in a forked child (its own process group) with a time
 * limit ($NIMBLE_NODE_RUN_CASE_TIMEOUT seconds, default 120), so a crash or
 * a hang costs that case only. Up to $NIMBLE_NODE_RUN_JOBS cases run at
 * once (default 2).
 *
 *   NIMBLE_CLI                  the `nimble` program
 *   NIMBLE_RUN_BIN              the nimble-run to run the executables with
 *   NIMBLE_NODE_RUN_TARGET      the compile target (default x86)
 *   NIMBLE_RUN_EMULATOR         a command prefix for nimble-run (qemu)
 *   NIMBLE_NODE_RUN_CASES       a file listing the case names to run (one
 *                               per line, # comments); default: all
 *
 * The per-case results go to $NIMBLE_NODE_RUN_OUT (TSV: case, result, op
 * types, message), from which scripts/onnx_run_coverage.py writes
 * docs/onnx-backend.md. The suite fails when fewer cases pass than the
 * committed floor in $NIMBLE_NODE_RUN_FLOOR. $NIMBLE_NODE_RUN_FILTER (a
 * substring) restricts the run to matching cases, for debugging; the floor
 * is then not enforced. When NIMBLE_RUN_BIN is empty (no aarch64
 * nimble-run was built) the suite exits 77: ctest reports it skipped. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
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

#include "nimble/onnx_model.h"
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

/* The runtime's bool and tensor_io's are both {kDLUInt, 1, 1} (NumPy bool,
 * ONNX BOOL): a bool that comes back as uint8 is a wrong dtype. */
static bool dtype_same(DLDataType got, DLDataType want) {
  /* ONNX 1.12's suite stores bfloat16 results as UINT16 bit patterns
   * (NumPy has no bfloat16); those are compared bit for bit. */
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

extern char **environ;

typedef struct {
  const char *cli, *run, *target;
  char *emulator[8]; /* the prefix words, NULL-terminated */
} tools_t;

static tools_t g_tools;

/* Runs argv with stdout and stderr to `log` (appended); returns the exit
 * status as waitpid gives it, or -1 when it could not start. */
static int spawn_wait(char *const *argv, const char *log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return status;
}

/* The first line of `path` that says something (the tools print one line
 * per error), or "" . */
static void first_line(const char *path, char *buf, size_t size) {
  buf[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    if (!line[0] || strncmp(line, "compiling", 9) == 0) continue; /* a progress line */
    snprintf(buf, size, "%.1500s", line);
    break;
  }
  fclose(f);
}

static bool file_has(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  char line[8192];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

/* Compiles the case with `nimble compile`. Returns NULL on success, else
 * the result ("fail" / "unsupported") with msg set. */
static const char *compile_case(const char *dir, const char *work, char *msg, size_t size) {
  char model[1200], exe[1200], log[1200], line[2048];
  snprintf(model, sizeof model, "%s/model.onnx", dir);
  snprintf(exe, sizeof exe, "%s/m.nimble", work);
  snprintf(log, sizeof log, "%s/compile.log", work);
  char target[64];
  snprintf(target, sizeof target, "--target=%s", g_tools.target);
  char *argv[] = {(char *)g_tools.cli, "compile", model, target, "-o", exe, NULL};
  int st = spawn_wait(argv, log);
  if (st == -1) {
    snprintf(msg, size, "cannot run %s", g_tools.cli);
    return "fail";
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return NULL;
  first_line(log, line, sizeof line);
  if (WIFSIGNALED(st)) {
    snprintf(msg, size, "nimble compile crashed with signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    return "fail";
  }
  snprintf(msg, size, "compile (exit %d): %.700s", WEXITSTATUS(st), line);
  /* Exit 3: the model could not be imported or typed; "unsupported": the
   * compiler does not cover it yet. Anything else is the compiler failing. */
  return WEXITSTATUS(st) == 3 || file_has(log, ", unsupported)") ? "unsupported" : "fail";
}

/* Whether the graph declares `v` BFLOAT16: NumPy has no such type, so the
 * suite stores its data as UINT16 bit patterns, and nimble-run writes it
 * to a .pb (an ONNX BFLOAT16 tensor). */
static bool declared_bf16(const nimble_onnx_value_t *v) {
  return v->type && v->type->kind == NIMBLE_ONNX_TYPE_TENSOR && v->type->elem_type == NIMBLE_ONNX_BFLOAT16;
}

/* Runs data set `set_dir` through nimble-run and compares its outputs.
 * Returns "pass", "fail" or "unsupported" with msg set. */
static const char *run_data_set(const char *set_dir, int ds, const nimble_onnx_graph *g, const char *work,
                                char *msg, size_t size) {
  enum { MAX_ARGS = 300 };
  char *argv[MAX_ARGS];
  char *owned[MAX_ARGS];
  int n = 0, n_owned = 0;
  char exe[1200], log[1200], line[2048];
  snprintf(exe, sizeof exe, "%s/m.nimble", work);
  snprintf(log, sizeof log, "%s/run%d.log", work, ds);
  for (int e = 0; g_tools.emulator[e]; e++) argv[n++] = g_tools.emulator[e];
  argv[n++] = (char *)g_tools.run;
  argv[n++] = exe;
  struct stat st;
  size_t n_in = 0;
  for (; n_in < 64; n_in++) {
    char path[1300];
    snprintf(path, sizeof path, "%s/input_%zu.pb", set_dir, n_in);
    if (stat(path, &st) != 0) break;
    nimble_tensor_file_t t;
    nimble_status_t s = nimble_tensor_io_read_pb(path, &t);
    if (s) {
      snprintf(msg, size, "input %zu is not a tensor (%s)", n_in, nimble_status_message(s));
      nimble_status_free(s);
      for (int k = 0; k < n_owned; k++) free(owned[k]);
      return "unsupported";
    }
    nimble_tensor_file_deinit(&t);
    if (n_in >= g->n_inputs) {
      snprintf(msg, size, "input_%zu.pb has no graph input", n_in);
      for (int k = 0; k < n_owned; k++) free(owned[k]);
      return "fail";
    }
    char *arg;
    if (asprintf(&arg, "--input=%s=%s", g->inputs[n_in]->name, path) < 0) abort();
    argv[n++] = owned[n_owned++] = arg;
  }
  size_t n_out = 0;
  for (; n_out < 64 && n_out < g->n_outputs; n_out++) {
    char path[1300];
    snprintf(path, sizeof path, "%s/output_%zu.pb", set_dir, n_out);
    if (stat(path, &st) != 0) break;
    char *arg;
    bool pb = declared_bf16(g->outputs[n_out]);
    if (asprintf(&arg, "--output=%s=%s/out%d_%zu.%s", g->outputs[n_out]->name, work, ds, n_out,
                 pb ? "pb" : "npy") < 0)
      abort();
    argv[n++] = owned[n_owned++] = arg;
  }
  argv[n] = NULL;
  int status = spawn_wait(argv, log);
  for (int k = 0; k < n_owned; k++) free(owned[k]);
  if (status == -1) {
    snprintf(msg, size, "cannot run %s", g_tools.run);
    return "fail";
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    first_line(log, line, sizeof line);
    if (WIFSIGNALED(status))
      snprintf(msg, size, "data set %d: nimble-run crashed with signal %d (%s)", ds, WTERMSIG(status),
               strsignal(WTERMSIG(status)));
    else
      snprintf(msg, size, "data set %d: nimble-run (exit %d): %.700s", ds, WEXITSTATUS(status), line);
    return "fail";
  }
  for (size_t k = 0; k < n_out; k++) {
    char want_path[1300], got_path[1300];
    snprintf(want_path, sizeof want_path, "%s/output_%zu.pb", set_dir, k);
    nimble_tensor_file_t want, got;
    nimble_status_t s = nimble_tensor_io_read_pb(want_path, &want);
    if (s) {
      snprintf(msg, size, "expected output %zu is not a tensor (%s)", k, nimble_status_message(s));
      nimble_status_free(s);
      return "unsupported";
    }
    bool pb = declared_bf16(g->outputs[k]);
    snprintf(got_path, sizeof got_path, "%s/out%d_%zu.%s", work, ds, k, pb ? "pb" : "npy");
    s = pb ? nimble_tensor_io_read_pb(got_path, &got) : nimble_tensor_io_read_npy(got_path, &got);
    if (s) {
      snprintf(msg, size, "data set %d: output %zu ('%s'): %s", ds, k, g->outputs[k]->name, nimble_status_message(s));
      nimble_status_free(s);
      nimble_tensor_file_deinit(&want);
      return "fail";
    }
    char why[600];
    bool ok = compare_output(k, &got.tensor, &want.tensor, 1e-3, 1e-7, why, sizeof why);
    nimble_tensor_file_deinit(&want);
    nimble_tensor_file_deinit(&got);
    if (!ok) {
      snprintf(msg, size, "data set %d: %s", ds, why);
      return "fail";
    }
  }
  return "pass";
}

/* Drops every "WORK/" from msg: the scratch directory's name differs on
 * every run and says nothing. */
static void drop_work_dir(char *msg, const char *work) {
  size_t wl = strlen(work);
  char *p;
  while ((p = strstr(msg, work)) != NULL) {
    size_t cut = wl + (p[wl] == '/');
    memmove(p, p + cut, strlen(p + cut) + 1);
  }
}

/* Removes the case's scratch directory (flat). */
static void remove_work(const char *work) {
  DIR *d = opendir(work);
  if (!d) return;
  struct dirent *e;
  char path[1300];
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(path, sizeof path, "%s/%s", work, e->d_name);
      unlink(path);
    }
  closedir(d);
  rmdir(work);
}

/* The whole case; writes "RESULT\tMESSAGE" to fd. */
static void run_case_child(const char *dir, int fd) {
  char msg[RESULT_MAX - 32] = "";
  const char *result = NULL;
  char path[1100];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  const char *tmp = getenv("TMPDIR");
  char work[1024];
  snprintf(work, sizeof work, "%s/nimble-node-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(work)) {
    snprintf(msg, sizeof msg, "mkdtemp %.600s: %s", work, strerror(errno));
    result = "fail";
  }
  nimble_onnx_model *model = NULL;
  if (!result) {
    nimble_status_t s = nimble_onnx_model_load_file(path, &model);
    if (s) {
      snprintf(msg, sizeof msg, "load: %s", nimble_status_message(s));
      nimble_status_free(s);
      result = "unsupported";
    }
  }
  if (!result) result = compile_case(dir, work, msg, sizeof msg);
  if (!result) {
    const nimble_onnx_graph *g = nimble_onnx_model_graph(model);
    int sets = 0;
    result = "pass";
    for (int ds = 0; ds < 64 && !strcmp(result, "pass"); ds++) {
      char set_dir[1200];
      struct stat st;
      snprintf(set_dir, sizeof set_dir, "%s/test_data_set_%d", dir, ds);
      if (stat(set_dir, &st) != 0) break;
      sets++;
      result = run_data_set(set_dir, ds, g, work, msg, sizeof msg);
    }
    if (!sets) {
      snprintf(msg, sizeof msg, "no test_data_set_0");
      result = "fail";
    }
  }
  nimble_onnx_model_destroy(model);
  drop_work_dir(msg, work);
  remove_work(work);
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
  bool tensor_only;
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

/* Collects the child of c: its line, or how it died. A child that ran out
 * of time wrote its own "timed out" line before killing its group. */
static void finish_case(node_case_t *c, int status) {
  char buf[RESULT_MAX];
  ssize_t got = 0, r;
  while (got < (ssize_t)sizeof buf - 1 && (r = read(c->fd, buf + got, sizeof buf - 1 - (size_t)got)) > 0) got += r;
  buf[got > 0 ? got : 0] = 0;
  close(c->fd);
  if (got > 0 && strchr(buf, '\t'))
    snprintf(c->result, sizeof c->result, "%s", buf);
  else if (WIFSIGNALED(status))
    snprintf(c->result, sizeof c->result, "fail\tcrashed with signal %d (%s)", WTERMSIG(status),
             strsignal(WTERMSIG(status)));
  else
    snprintf(c->result, sizeof c->result, "fail\tthe case's child exited with status %d and no result",
             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  char *tab = strchr(c->result, '\t');
  if (tab) clean(tab + 1);
}

/* In the case's child: on SIGALRM, report the timeout and kill the whole
 * process group (the child and the nimble compile / nimble-run it waits
 * for). Only async-signal-safe calls. */
static int g_result_fd = -1;
static char g_timeout_line[64];
static void on_case_timeout(int sig) {
  (void)sig;
  ssize_t w = write(g_result_fd, g_timeout_line, strlen(g_timeout_line));
  (void)w;
  kill(0, SIGKILL);
}

/* Whether every input and output of the case's main graph is a tensor (the
 * suite's "tensor-only" cases, which the floor counts). */
static bool tensor_only(const char *dir) {
  char path[1100];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  nimble_onnx_model *model;
  nimble_status_t s = nimble_onnx_model_load_file(path, &model);
  if (s) {
    nimble_status_free(s);
    return true; /* a model that does not load counts against us */
  }
  const nimble_onnx_graph *g = nimble_onnx_model_graph(model);
  bool only = true;
  for (size_t i = 0; i < g->n_inputs && only; i++)
    only = !g->inputs[i]->type || g->inputs[i]->type->kind == NIMBLE_ONNX_TYPE_TENSOR;
  for (size_t i = 0; i < g->n_outputs && only; i++)
    only = !g->outputs[i]->type || g->outputs[i]->type->kind == NIMBLE_ONNX_TYPE_TENSOR;
  nimble_onnx_model_destroy(model);
  return only;
}

/* Splits $NIMBLE_RUN_EMULATOR into words (no quoting: paths without spaces). */
static void split_words(const char *text, char **words, int max) {
  int n = 0;
  char *copy = text ? strdup(text) : NULL, *save = NULL;
  for (char *w = copy ? strtok_r(copy, " ", &save) : NULL; w && n < max - 1; w = strtok_r(NULL, " ", &save))
    words[n++] = w;
  words[n] = NULL;
}

/* Whether `name` is listed in the cases file (one name a line, # comments). */
static bool listed(char *const *list, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(list[i], name) == 0) return true;
  return false;
}

static char **read_case_list(const char *path, size_t *count) {
  *count = 0;
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot read the case list %s: %s", path, strerror(errno));
  char **list = NULL, line[512];
  size_t cap = 0;
  while (fgets(line, sizeof line, f)) {
    char *h = strchr(line, '#');
    if (h) *h = 0;
    char *b = line + strspn(line, " \t");
    b[strcspn(b, " \t\r\n")] = 0;
    if (!*b) continue;
    if (*count == cap) list = realloc(list, (cap = cap ? cap * 2 : 256) * sizeof *list);
    ck_assert_ptr_nonnull(list);
    list[(*count)++] = strdup(b);
  }
  fclose(f);
  return list;
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
  long case_timeout = env_long("NIMBLE_NODE_RUN_CASE_TIMEOUT", 120);
  if (jobs < 1) jobs = 1;
  g_tools.cli = getenv("NIMBLE_CLI");
  g_tools.run = getenv("NIMBLE_RUN_BIN");
  g_tools.target = getenv("NIMBLE_NODE_RUN_TARGET");
  if (!g_tools.target || !*g_tools.target) g_tools.target = "x86";
  split_words(getenv("NIMBLE_RUN_EMULATOR"), g_tools.emulator, 8);
  ck_assert_msg(g_tools.cli && access(g_tools.cli, X_OK) == 0, "NIMBLE_CLI ('%s') is not a program",
                g_tools.cli ? g_tools.cli : "");
  ck_assert_msg(access(g_tools.run, X_OK) == 0, "NIMBLE_RUN_BIN ('%s') is not a program", g_tools.run);
  char **only = NULL;
  size_t n_only = 0;
  const char *cases_file = getenv("NIMBLE_NODE_RUN_CASES");
  if (cases_file && *cases_file) only = read_case_list(cases_file, &n_only);
  DIR *d = opendir(root);
  ck_assert_msg(d != NULL, "cannot open %s: %s", root, strerror(errno));
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "test_", 5) != 0) continue;
    if (filter && !strstr(e->d_name, filter)) continue;
    if (only && !listed(only, n_only, e->d_name)) continue;
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
      c->tensor_only = tensor_only(dir);
      int fds[2];
      ck_assert_int_eq(pipe(fds), 0);
      c->started = now_s();
      pid_t pid = fork();
      ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
      if (pid == 0) {
        close(fds[0]);
        setpgid(0, 0);
        g_result_fd = fds[1];
        snprintf(g_timeout_line, sizeof g_timeout_line, "fail\ttimed out after %ld s", case_timeout);
        signal(SIGALRM, on_case_timeout);
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

  size_t pass = 0, fail = 0, unsupported = 0, tensor_cases = 0;
  const char *out_path = getenv("NIMBLE_NODE_RUN_OUT");
  FILE *out = out_path && !filter ? fopen(out_path, "w") : NULL;
  for (size_t i = 0; i < n; i++) {
    node_case_t *c = &cases[i];
    const char *res = c->result;
    const char *tab = strchr(res, '\t');
    size_t rl = tab ? (size_t)(tab - res) : strlen(res);
    tensor_cases += c->tensor_only;
    if (rl == 4 && !strncmp(res, "pass", 4)) pass++;
    else if (rl == 11 && !strncmp(res, "unsupported", 11)) unsupported++;
    else fail++;
    if (out)
      fprintf(out, "%s\t%.*s\t%s\t%s\t%s\n", c->name, (int)rl, res, c->ops, tab ? tab + 1 : "",
              c->tensor_only ? "tensor" : "non-tensor");
    if (filter) printf("%s\t%s\n", c->name, res);
    free(c->name);
  }
  free(cases);
  free(names);
  for (size_t i = 0; i < n_only; i++) free(only[i]);
  free(only);
  if (out) fclose(out);
  /* Only tensor-only cases can pass: sequences and optionals never reach
   * the compiler, so `pass` counts tensor-only cases. */
  printf("ONNX node suite on the user's path (nimble compile --target=%s, %s%snimble-run): %zu of %zu tensor-only "
         "cases pass (%zu cases in all: %zu fail, %zu unsupported; %.1f s, %ld jobs)\n",
         g_tools.target, g_tools.emulator[0] ? g_tools.emulator[0] : "", g_tools.emulator[0] ? " " : "", pass,
         tensor_cases, n, fail, unsupported, elapsed, jobs);
  if (filter) return;
  ck_assert_msg(n > 0, "no case ran");
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
  /* uint8 for bool is a wrong dtype, whatever the bytes */
  ck_assert(!compare_output(0, &gbool, &wbool, 1e-3, 1e-7, msg, sizeof msg));
  ck_assert_msg(strstr(msg, "dtype") != NULL, "%s", msg);
  gbool.dtype.bits = 1;
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

int main(void) {
  const char *run = getenv("NIMBLE_RUN_BIN");
  if (!run || !*run) {
    printf("skipped: no nimble-run for target %s (NIMBLE_RUN_BIN is empty; scripts/test-cross.sh builds the "
           "aarch64 one)\n", getenv("NIMBLE_NODE_RUN_TARGET") ? getenv("NIMBLE_NODE_RUN_TARGET") : "x86");
    return 77;
  }
  const char *emu = getenv("NIMBLE_RUN_EMULATOR");
  if (emu && *emu) {
    char probe[600];
    snprintf(probe, sizeof probe, "command -v %.*s > /dev/null", (int)strcspn(emu, " "), emu);
    if (system(probe) != 0) {
      printf("skipped: the emulator '%s' is not installed (qemu-user)\n", emu);
      return 77;
    }
  }
  return nimble_test_run(suite());
}
