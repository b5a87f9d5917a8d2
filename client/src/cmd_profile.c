/* `nimble profile`: how fast an artifact runs, and where its time and
 * memory go.
 *
 *   nimble profile MODEL --input x=4x784            here: MODEL is a .nimble
 *                                                   file or a directory of parts
 *   nimble profile team/mlp --target=x86 --input x=4x784
 *                                                   on a farm worker of that
 *                                                   target (a PROFILE job)
 *
 * Inputs are random (a fixed seed) with the shapes given and the entry's
 * dtypes. The model runs once untimed (warm-up: the memory pool fills),
 * then --runs times with the runtime's kernel timing off, for the latency
 * (median, min, max of set-inputs + invoke), then --runs times more with it
 * on, for the time of each kernel (nimble_vm_kernel_times); the peak is the
 * VM's pool's peak reserved bytes. A farm worker runs this same command on
 * the artifact's parts (docs/farm.md). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "farm_client.h"
#include "nimble/runtime.h"
#include "nimble/target.h"
#include "nimble/tensor_io.h"

#define PROFILE_DEFAULT_RUNS 20
#define PROFILE_REQUEST_MS 10000L
#define PROFILE_POLL_MS 1000L
/* The largest random input one profile allocates. */
#define PROFILE_MAX_INPUT_BYTES ((uint64_t)1 << 32)

static const nimble_cli_command *self(void);

typedef struct profile_input {
  const char *name; /* borrowed from argv */
  int32_t ndim;
  int64_t dims[32];
} profile_input;

typedef struct profile_args {
  const char *model;
  const char *target;
  const char *entry;
  const char *report;
  const char *events;
  profile_input inputs[NIMBLE_PROFILE_MAX_INPUTS];
  size_t ninputs;
  long runs, warmup, threads, timeout_s;
  int progress_fd;
  bool json;
} profile_args;

/* ---- arguments ---- */

/* "NAME=4x784" (also "4,784"; "NAME=" is a scalar). Splits at the last '='. */
static int parse_input(profile_args *a, const char *arg) {
  const char *eq = strrchr(arg, '=');
  if (!eq || eq == arg)
    return nimble_cli_usage_error(self(), "--input '%s' is not NAME=DIMS (e.g. x=4x784)", arg);
  if (a->ninputs == NIMBLE_PROFILE_MAX_INPUTS)
    return nimble_cli_usage_error(self(), "more than %d --input", NIMBLE_PROFILE_MAX_INPUTS);
  profile_input *in = &a->inputs[a->ninputs];
  memset(in, 0, sizeof *in);
  size_t name_len = (size_t)(eq - arg);
  if (name_len > 256) return nimble_cli_usage_error(self(), "--input: a name is at most 256 bytes");
  char *name = strndup(arg, name_len);
  if (!name) return nimble_cli_usage_error(self(), "out of memory");
  for (size_t i = 0; i < a->ninputs; i++)
    if (!strcmp(a->inputs[i].name, name)) {
      int rc = nimble_cli_usage_error(self(), "--input '%s' is given twice", name);
      free(name);
      return rc;
    }
  const char *p = eq + 1;
  while (*p) {
    if (in->ndim == 32) {
      free(name);
      return nimble_cli_usage_error(self(), "--input '%s': more than 32 dimensions", arg);
    }
    char *end;
    errno = 0;
    long long d = strtoll(p, &end, 10);
    if (end == p || errno || d < 0 || d > INT32_MAX || *p == '-' || *p == '+') {
      free(name);
      return nimble_cli_usage_error(self(), "--input '%s': '%s' is not a dimension (0 to 2147483647)",
                                    arg, p);
    }
    in->dims[in->ndim++] = d;
    if (*end == 'x' || *end == ',') {
      if (!end[1]) {
        free(name);
        return nimble_cli_usage_error(self(), "--input '%s' ends with '%c'", arg, *end);
      }
      end++;
    } else if (*end) {
      free(name);
      return nimble_cli_usage_error(self(), "--input '%s': unexpected '%c' (dims are 4x784)", arg,
                                    *end);
    }
    p = end;
  }
  in->name = name;
  a->ninputs++;
  return 0;
}

static void args_free(profile_args *a) {
  for (size_t i = 0; i < a->ninputs; i++) free((char *)a->inputs[i].name);
}

static int parse_long_opt(const char *opt, const char *v, long min, long max, long *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (!*v || *end || errno || x < min || x > max)
    return nimble_cli_usage_error(self(), "%s '%s': expected an integer from %ld to %ld", opt, v,
                                  min, max);
  *out = x;
  return 0;
}

static int parse_args(int argc, char **argv, profile_args *a) {
  memset(a, 0, sizeof *a);
  a->runs = PROFILE_DEFAULT_RUNS;
  a->warmup = 1;
  a->threads = 1;
  a->timeout_s = 600;
  a->progress_fd = -1;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *v;
    int r;
    long fd;
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      nimble_cli_print_command_help(self(), stdout);
      return -1;
    } else if (!strcmp(arg, "--json")) {
      a->json = true;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--input", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self(), "--input needs NAME=DIMS");
      if ((r = parse_input(a, v))) return r;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--target", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self(), "--target needs a target");
      a->target = v;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--runs", &v)) != 0) {
      if (r < 0 || (r = parse_long_opt("--runs", v, 1, NIMBLE_PROFILE_MAX_RUNS, &a->runs)))
        return r < 0 ? nimble_cli_usage_error(self(), "--runs needs a number") : r;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--warmup", &v)) != 0) {
      if (r < 0 || (r = parse_long_opt("--warmup", v, 0, 1000, &a->warmup)))
        return r < 0 ? nimble_cli_usage_error(self(), "--warmup needs a number") : r;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--threads", &v)) != 0) {
      if (r < 0 || (r = parse_long_opt("--threads", v, 1, 1024, &a->threads)))
        return r < 0 ? nimble_cli_usage_error(self(), "--threads needs a number") : r;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--timeout", &v)) != 0) {
      if (r < 0 || (r = parse_long_opt("--timeout", v, 1, 86400, &a->timeout_s)))
        return r < 0 ? nimble_cli_usage_error(self(), "--timeout needs seconds") : r;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--entry", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self(), "--entry needs a name");
      a->entry = v;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--report", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self(), "--report needs a file");
      a->report = v;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--events", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self(), "--events needs an endpoint");
      a->events = v;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--progress-fd", &v)) != 0) {
      if (r < 0 || (r = parse_long_opt("--progress-fd", v, 0, 1023, &fd)))
        return r < 0 ? nimble_cli_usage_error(self(), "--progress-fd needs a number") : r;
      a->progress_fd = (int)fd;
    } else if (arg[0] == '-' && arg[1]) {
      return nimble_cli_usage_error(self(), "unknown option '%s'", arg);
    } else if (a->model) {
      return nimble_cli_usage_error(self(), "expected one model, got '%s' and '%s'", a->model, arg);
    } else {
      a->model = arg;
    }
  }
  if (!a->model) return nimble_cli_usage_error(self(), "no model given");
  if (!a->ninputs) return nimble_cli_usage_error(self(), "no --input NAME=DIMS given");
  return 0;
}

/* ---- the report ---- */

static int cmp_i64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

static int cmp_kernel_time(const void *x, const void *y) {
  json_int_t a = json_integer_value(json_object_get(*(json_t *const *)x, "total_ns"));
  json_int_t b = json_integer_value(json_object_get(*(json_t *const *)y, "total_ns"));
  return (a < b) - (a > b);
}

static void print_bytes(uint64_t n) {
  if (n < 1024) printf("%" PRIu64 " B", n);
  else if (n < ((uint64_t)1 << 20)) printf("%.1f KiB", (double)n / 1024.0);
  else printf("%.1f MiB", (double)n / 1048576.0);
}

/* The text report: latency, memory, then kernels by total time. */

/* The kernel table's names: whole up to LABEL_MAX characters, else the
 * start and the end around "..." (fused kernels of one kind differ only in
 * their last characters: _2, _6). */
enum { LABEL_MAX = 72 };

static void kernel_label(const char *sym, char out[LABEL_MAX + 1]) {
  if (!sym) sym = "?";
  size_t len = strlen(sym);
  if (len <= LABEL_MAX) {
    memcpy(out, sym, len + 1);
    return;
  }
  size_t tail = (LABEL_MAX - 3) / 2, head = LABEL_MAX - 3 - tail;
  memcpy(out, sym, head);
  memcpy(out + head, "...", 3);
  memcpy(out + head + 3, sym + len - tail, tail + 1);
}

static void print_report(const char *what, const json_t *r) {
  long long runs = json_integer_value(json_object_get(r, "runs"));
  const char *entry = json_string_value(json_object_get(r, "entry"));
  long long threads = json_integer_value(json_object_get(r, "threads"));
  printf("%s", what);
  if (entry) printf(" (entry %s, %lld thread%s)", entry, threads ? threads : 1, threads > 1 ? "s" : "");
  printf(": %lld runs, median %.3f ms (min %.3f, max %.3f)\n", runs,
         (double)json_integer_value(json_object_get(r, "median_ns")) / 1e6,
         (double)json_integer_value(json_object_get(r, "min_ns")) / 1e6,
         (double)json_integer_value(json_object_get(r, "max_ns")) / 1e6);
  printf("peak memory ");
  print_bytes((uint64_t)json_integer_value(json_object_get(r, "peak_bytes")));
  if (json_object_get(r, "device_peak_bytes")) {
    printf(", device ");
    print_bytes((uint64_t)json_integer_value(json_object_get(r, "device_peak_bytes")));
  }
  printf(" (the pool's peak reserved bytes)\n");
  json_t *kernels = json_object_get(r, "kernels");
  size_t n = json_array_size(kernels);
  json_t **sorted = calloc(n ? n : 1, sizeof *sorted);
  if (!sorted) return;
  json_int_t all = 0;
  for (size_t i = 0; i < n; i++) {
    sorted[i] = json_array_get(kernels, i);
    all += json_integer_value(json_object_get(sorted[i], "total_ns"));
  }
  qsort(sorted, n, sizeof *sorted, cmp_kernel_time);
  /* The name column fits the longest name, up to LABEL_MAX. */
  int width = 40;
  for (size_t i = 0; i < n; i++) {
    const char *sym = json_string_value(json_object_get(sorted[i], "symbol"));
    size_t len = sym ? strlen(sym) : 0;
    if ((int)len > width) width = len < LABEL_MAX ? (int)len : LABEL_MAX;
  }
  printf("%-*s %8s %12s %12s %7s\n", width, "kernel", "calls", "ms/run", "us/call", "share");
  for (size_t i = 0; i < n; i++) {
    json_int_t calls = json_integer_value(json_object_get(sorted[i], "calls"));
    json_int_t ns = json_integer_value(json_object_get(sorted[i], "total_ns"));
    if (!calls) continue;
    char label[LABEL_MAX + 1];
    kernel_label(json_string_value(json_object_get(sorted[i], "symbol")), label);
    printf("%-*s %8lld %12.4f %12.2f %6.1f%%\n", width, label, (long long)calls,
           runs ? (double)ns / 1e6 / (double)runs : 0.0, calls ? (double)ns / 1e3 / (double)calls : 0.0,
           all ? 100.0 * (double)ns / (double)all : 0.0);
  }
  free(sorted);
}

/* ---- running here ---- */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void progress(int fd, const char *phase, int percent) {
  if (fd < 0) return;
  char line[64];
  int n = snprintf(line, sizeof line, "%s %d\n", phase, percent);
  if (write(fd, line, (size_t)n) < 0) { /* a reader that went away costs nothing */
  }
}

static nimble_status_t load(const char *path, nimble_executable **exe) {
  struct stat st;
  if (stat(path, &st) != 0) return nimble_status_make(NIMBLE_NOT_FOUND, "%s", strerror(errno));
  if (!S_ISDIR(st.st_mode)) return nimble_executable_load_file(path, exe);
  nimble_executable_part_t *parts;
  size_t n;
  NIMBLE_RETURN_IF_ERROR(nimble_executable_read_part_dir(path, &parts, &n));
  nimble_status_t s = nimble_executable_load_parts(parts, n, 0, exe);
  nimble_executable_parts_free(parts, n);
  return s;
}

typedef struct local_run {
  nimble_executable *exe;
  nimble_vm *vm;
  const nimble_entry_info_t *entry;
  DLTensor tensors[NIMBLE_PROFILE_MAX_INPUTS];
  void *data[NIMBLE_PROFILE_MAX_INPUTS];
} local_run;

static void local_free(local_run *lr) {
  for (size_t i = 0; i < NIMBLE_PROFILE_MAX_INPUTS; i++) free(lr->data[i]);
  nimble_vm_destroy(lr->vm);
  nimble_executable_release(lr->exe);
}

/* Makes the entry's inputs from the shapes given; every input needs one,
 * and every shape must name an input. */
static nimble_status_t make_inputs(local_run *lr, profile_args *a) {
  const nimble_entry_info_t *e = lr->entry;
  if (e->num_inputs > NIMBLE_PROFILE_MAX_INPUTS)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "entry '%s' has %u inputs; profile takes at most %d",
                              e->name, e->num_inputs, NIMBLE_PROFILE_MAX_INPUTS);
  for (size_t g = 0; g < a->ninputs; g++) {
    uint32_t i = 0;
    while (i < e->num_inputs && strcmp(e->inputs[i].name, a->inputs[g].name)) i++;
    if (i == e->num_inputs) {
      char names[512] = "";
      for (uint32_t k = 0; k < e->num_inputs; k++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "",
                 e->inputs[k].name);
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--input '%s': entry '%s' has no such input (its inputs: %s)",
                                a->inputs[g].name, e->name, names);
    }
  }
  uint64_t seed = 0x9E3779B97F4A7C15ULL;
  for (uint32_t i = 0; i < e->num_inputs; i++) {
    const nimble_tensor_info_t *info = &e->inputs[i];
    char declared[256];
    nimble_format_declared_shape(info, declared, sizeof declared);
    if (nimble_tensor_info_is_adt(info))
      return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                                "input '%s' is a value of an algebraic data type; profile makes "
                                "random tensors only",
                                info->name);
    const profile_input *in = NULL;
    for (size_t g = 0; g < a->ninputs; g++)
      if (!strcmp(a->inputs[g].name, info->name)) in = &a->inputs[g];
    if (!in)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "input '%s' (declared %s) needs a shape: --input %s=DIMS",
                                info->name, declared, info->name);
    uint64_t n = 1, elem = (uint64_t)((info->dtype.bits + 7) / 8) * info->dtype.lanes;
    for (int32_t d = 0; d < in->ndim; d++) {
      if (in->dims[d] && n > PROFILE_MAX_INPUT_BYTES / (uint64_t)in->dims[d])
        return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "input '%s': too many elements", info->name);
      n *= (uint64_t)in->dims[d];
    }
    if (!elem || n > PROFILE_MAX_INPUT_BYTES / elem)
      return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "input '%s': over %" PRIu64 " bytes",
                                info->name, PROFILE_MAX_INPUT_BYTES);
    lr->data[i] = aligned_alloc(64, ((n * elem + 63) / 64) * 64 + 64);
    if (!lr->data[i]) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "input '%s': out of memory", info->name);
    NIMBLE_RETURN_IF_ERROR(nimble_tensor_io_fill_random(lr->data[i], n, info->dtype, &seed, info->name));
    DLTensor *t = &lr->tensors[i];
    memset(t, 0, sizeof *t);
    t->data = lr->data[i];
    t->device = (DLDevice){kDLCPU, 0};
    t->ndim = in->ndim;
    t->dtype = info->dtype;
    t->shape = (int64_t *)in->dims;
  }
  return nimble_ok();
}

static nimble_status_t run_once(local_run *lr, uint64_t *ns) {
  uint64_t t0 = now_ns();
  for (uint32_t i = 0; i < lr->entry->num_inputs; i++)
    NIMBLE_RETURN_IF_ERROR(nimble_vm_set_input(lr->vm, lr->entry->name, i, &lr->tensors[i]));
  NIMBLE_RETURN_IF_ERROR(nimble_vm_invoke(lr->vm, lr->entry->name));
  if (ns) *ns = now_ns() - t0;
  /* Outputs go back at once, as an application that consumed them would. */
  for (uint32_t i = 0; i < nimble_vm_num_outputs(lr->vm); i++) {
    DLManagedTensor *out;
    NIMBLE_RETURN_IF_ERROR(nimble_vm_take_output(lr->vm, i, &out));
    if (out->deleter) out->deleter(out);
  }
  return nimble_ok();
}

/* Runs the profile here and builds the report (a new JSON object). */
static nimble_status_t profile_here(profile_args *a, json_t **out_report) {
  *out_report = NULL;
  local_run lr;
  memset(&lr, 0, sizeof lr);
  progress(a->progress_fd, "load", 0);
  nimble_status_t s = load(a->model, &lr.exe);
  if (s) return nimble_status_annotate(s, "loading '%s'", a->model);
  if (a->entry) {
    s = nimble_executable_find_entry(lr.exe, a->entry, &lr.entry);
  } else {
    s = nimble_executable_find_entry(lr.exe, "main", &lr.entry);
    if (s && nimble_executable_num_entries(lr.exe) > 0) {
      nimble_status_free(s);
      s = nimble_ok();
      lr.entry = nimble_executable_entry_at(lr.exe, 0);
    }
  }
  nimble_vm_options_t opts;
  nimble_vm_options_init(&opts);
  opts.num_threads = (uint32_t)a->threads;
  if (!s) s = nimble_vm_create(lr.exe, &opts, &lr.vm);
  if (!s) s = make_inputs(&lr, a);
  for (long i = 0; !s && i < a->warmup; i++) s = run_once(&lr, NULL);
  /* With more than one thread, also past the VM's measuring runs
   * (docs/vm.md, "Threads by measurement"), so that the timed runs are the
   * mode it keeps. */
  while (!s && !nimble_vm_threads_settled(lr.vm)) s = run_once(&lr, NULL);
  int64_t *times = s ? NULL : calloc((size_t)a->runs, sizeof *times);
  if (!s && !times) s = NIMBLE_OOM();
  progress(a->progress_fd, "run", 0);
  for (long i = 0; !s && i < a->runs; i++) {
    uint64_t ns;
    s = run_once(&lr, &ns);
    times[i] = (int64_t)ns;
    if (!s && (i + 1) % 8 == 0) progress(a->progress_fd, "run", (int)(50 * (i + 1) / a->runs));
  }
  /* The same runs again with the kernel timing on. */
  uint32_t nk = 0;
  nimble_kernel_time_t *kt = NULL;
  if (!s) s = nimble_vm_kernel_times(lr.vm, 1, NULL, 0, &nk);
  if (!s && !(kt = calloc(nk ? nk : 1, sizeof *kt)))
    s = NIMBLE_OOM();
  for (long i = 0; !s && i < a->runs; i++) {
    s = run_once(&lr, NULL);
    if (!s && (i + 1) % 8 == 0) progress(a->progress_fd, "kernels", (int)(50 + 50 * (i + 1) / a->runs));
  }
  if (!s) s = nimble_vm_kernel_times(lr.vm, 0, kt, nk, NULL);
  nimble_memory_stats_t mem, dev;
  if (!s) s = nimble_vm_memory_stats(lr.vm, kDLCPU, &mem);
  nimble_status_t ds = s ? NULL : nimble_vm_memory_stats(lr.vm, kDLCUDA, &dev);
  if (!s) {
    qsort(times, (size_t)a->runs, sizeof *times, cmp_i64);
    json_t *kernels = json_array();
    for (uint32_t i = 0; i < nk; i++)
      json_array_append_new(kernels, json_pack("{s:s,s:I,s:I}", "symbol", kt[i].symbol, "calls",
                                               (json_int_t)kt[i].calls, "total_ns",
                                               (json_int_t)kt[i].total_ns));
    *out_report = json_pack("{s:I,s:I,s:I,s:I,s:I,s:s,s:I,s:o}", "runs", (json_int_t)a->runs,
                            "median_ns", (json_int_t)times[a->runs / 2], "min_ns",
                            (json_int_t)times[0], "max_ns", (json_int_t)times[a->runs - 1],
                            "peak_bytes", (json_int_t)mem.peak_bytes_reserved, "entry",
                            lr.entry->name, "threads", (json_int_t)a->threads, "kernels", kernels);
    if (*out_report && !ds)
      json_object_set_new(*out_report, "device_peak_bytes", json_integer((json_int_t)dev.peak_bytes_reserved));
    if (!*out_report) s = NIMBLE_OOM();
  }
  nimble_status_free(ds);
  progress(a->progress_fd, "kernels", 100);
  free(kt);
  free(times);
  local_free(&lr);
  return s;
}

/* Writes JSON atomically (temporary file, then rename). */
static nimble_status_t write_json(const char *path, const json_t *j) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  if (json_dump_file(j, tmp, JSON_COMPACT | JSON_SORT_KEYS) != 0 || rename(tmp, path) != 0) {
    nimble_status_t s = nimble_status_make(NIMBLE_IO_ERROR, "--report '%s': %s", path, strerror(errno));
    unlink(tmp);
    return s;
  }
  return nimble_ok();
}

static int run_here(profile_args *a) {
  json_t *report;
  nimble_status_t s = profile_here(a, &report);
  if (s) {
    nimble_status_code_t code = nimble_status_code(s);
    nimble_cli_report(s);
    return code == NIMBLE_NOT_FOUND || code == NIMBLE_IO_ERROR ? NIMBLE_EXIT_INPUT : NIMBLE_EXIT_FAILURE;
  }
  if (a->report) s = write_json(a->report, report);
  if (!s) {
    if (a->json) {
      char *text = json_dumps(report, JSON_INDENT(2) | JSON_SORT_KEYS);
      if (text) printf("%s\n", text);
      free(text);
    } else if (!a->report) {
      print_report(a->model, report);
    }
  }
  json_decref(report);
  if (s) {
    nimble_cli_report(s);
    return NIMBLE_EXIT_FAILURE;
  }
  return NIMBLE_EXIT_OK;
}

/* ---- on a farm ---- */

static int fail(nimble_status_t s, nimble_farm_peer_t peer) {
  int rc = nimble_farm_exit_code(s, peer);
  nimble_cli_report(s);
  return rc;
}

static int run_on_farm(nimble_cli_ctx *ctx, profile_args *a) {
  /* NAME or NAME@sha256:...: the tag comes from the target. */
  char name[300];
  const char *at = strchr(a->model, '@');
  size_t nlen = at ? (size_t)(at - a->model) : strlen(a->model);
  if (nlen >= sizeof name) return nimble_cli_usage_error(self(), "'%s': name too long", a->model);
  memcpy(name, a->model, nlen);
  name[nlen] = '\0';
  if (strchr(name, ':'))
    return nimble_cli_usage_error(self(),
                                  "'%s': give the repository (team/model), with @sha256:... to pin a "
                                  "manifest; the tag comes from --target",
                                  a->model);
  char canon[NIMBLE_TARGET_SPEC_MAX + 1];
  nimble_status_t s = nimble_target_canonicalize(a->target, canon);
  if (s) {
    int rc = nimble_cli_usage_error(self(), "--target: %s", nimble_status_message(s));
    nimble_status_free(s);
    return rc;
  }
  json_t *inputs = json_object();
  for (size_t i = 0; i < a->ninputs; i++) {
    json_t *dims = json_array();
    for (int32_t d = 0; d < a->inputs[i].ndim; d++)
      json_array_append_new(dims, json_integer(a->inputs[i].dims[d]));
    json_object_set_new(inputs, a->inputs[i].name, dims);
  }
  json_t *body = json_pack("{s:s,s:s,s:o,s:I}", "name", name, "target", canon, "inputs", inputs,
                           "runs", (json_int_t)a->runs);
  if (body && at) json_object_set_new(body, "manifest", json_string(at + 1));
  s = body ? nimble_message_validate_body(NIMBLE_MSG_PROFILE, body)
           : NIMBLE_OOM();
  if (s) {
    json_decref(body);
    int rc = nimble_cli_usage_error(self(), "%s", nimble_status_message(s));
    nimble_status_free(s);
    return rc;
  }
  int rc = nimble_cli_load_config(ctx);
  if (rc) {
    json_decref(body);
    return rc;
  }
  const char *scheduler = nimble_cli_config_get(&ctx->config, NIMBLE_CLI_KEY_SCHEDULER);
  const char *token = nimble_cli_config_get(&ctx->config, NIMBLE_CLI_KEY_TOKEN);
  if (!scheduler) scheduler = NIMBLE_CLI_DEFAULT_SCHEDULER;
  char events[300];
  s = nimble_farm_events_endpoint(a->events, scheduler, events, sizeof events);
  if (s) {
    json_decref(body);
    return fail(s, NIMBLE_FARM_PEER_SCHEDULER);
  }
  nimble_farm_conn conn;
  s = nimble_farm_connect(scheduler, token, &conn);
  if (s) {
    json_decref(body);
    return fail(s, NIMBLE_FARM_PEER_SCHEDULER);
  }
  nimble_msg_type_t type;
  json_t *reply = NULL;
  s = nimble_farm_request(&conn, NIMBLE_MSG_PROFILE, body, PROFILE_REQUEST_MS, &type, &reply);
  if (!s && type != NIMBLE_MSG_ACCEPTED)
    s = nimble_status_make(NIMBLE_INTERNAL, "the scheduler answered PROFILE with %s",
                           nimble_message_type_name(type));
  char job[160] = "";
  if (!s) snprintf(job, sizeof job, "%s", json_string_value(json_object_get(reply, "job")));
  json_decref(reply);
  if (!s) s = nimble_farm_subscribe(&conn, events, job);
  if (s) {
    nimble_farm_close(&conn);
    return fail(s, NIMBLE_FARM_PEER_SCHEDULER);
  }
  if (!a->json) fprintf(stderr, "nimble profile: job %s: %s on %s\n", job, a->model, canon);
  long long deadline = nimble_farm_now_ms() + a->timeout_s * 1000LL, next_poll = 0;
  json_t *status = NULL;
  char shown[64] = "";
  for (;;) {
    long long now = nimble_farm_now_ms();
    if (now >= deadline) {
      s = nimble_status_make(NIMBLE_DEADLINE_EXCEEDED,
                             "job %s did not finish within %ld s (--timeout); see 'nimble status %s'",
                             job, a->timeout_s, job);
      break;
    }
    json_t *b = NULL;
    if (now >= next_poll) {
      s = nimble_farm_request(&conn, NIMBLE_MSG_STATUS, json_pack("{s:s}", "job", job),
                              PROFILE_REQUEST_MS, &type, &b);
      if (s) break;
      next_poll = nimble_farm_now_ms() + PROFILE_POLL_MS;
    } else {
      s = nimble_farm_next_event(&conn, (long)(next_poll - now), &type, &b);
      if (s) break;
      if (!b) continue;
    }
    if (type == NIMBLE_MSG_JOB_STATUS) {
      json_decref(status);
      status = b;
      const char *state = json_string_value(json_object_get(status, "state"));
      json_t *t = json_array_get(json_object_get(status, "tasks"), 0);
      char line[64];
      snprintf(line, sizeof line, "%s %s", state ? state : "?",
               json_string_value(json_object_get(t, "phase")) ? json_string_value(json_object_get(t, "phase")) : "");
      if (!a->json && strcmp(line, shown)) {
        json_t *w = json_object_get(t, "workers");
        fprintf(stderr, "nimble profile: %s%s\n", line,
                state && !strcmp(state, "queued") && json_is_integer(w) && json_integer_value(w) == 0
                    ? " (no connected worker can run this target)"
                    : "");
        snprintf(shown, sizeof shown, "%s", line);
      }
      if (state && (!strcmp(state, "done") || !strcmp(state, "failed") || !strcmp(state, "cancelled")))
        break;
    } else {
      json_decref(b);
    }
  }
  nimble_farm_close(&conn);
  if (s) {
    json_decref(status);
    return fail(s, NIMBLE_FARM_PEER_SCHEDULER);
  }
  json_t *t = json_array_get(json_object_get(status, "tasks"), 0);
  const char *state = json_string_value(json_object_get(status, "state"));
  json_t *report = json_object_get(t, "profile");
  if (strcmp(state, "done") || !report) {
    const char *error = json_string_value(json_object_get(t, "error"));
    fprintf(stderr, "nimble: profile job %s %s%s%s\n", job, state, error ? ": " : "",
            error ? error : "");
    json_decref(status);
    return NIMBLE_EXIT_FAILURE;
  }
  const char *manifest = json_string_value(json_object_get(t, "manifest"));
  if (a->report) s = write_json(a->report, report);
  if (!s && a->json) {
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:O}", "job", job, "name", name, "target", canon,
                          "manifest", manifest ? manifest : "", "report", report);
    char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    if (text) printf("%s\n", text);
    free(text);
    json_decref(o);
  } else if (!s) {
    char what[600];
    snprintf(what, sizeof what, "%s@%s on %s", name, manifest ? manifest : "?", canon);
    print_report(what, report);
  }
  json_decref(status);
  if (s) return fail(s, NIMBLE_FARM_PEER_SCHEDULER);
  return NIMBLE_EXIT_OK;
}

static int run_profile(nimble_cli_ctx *ctx, int argc, char **argv) {
  profile_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) {
    args_free(&a);
    return rc < 0 ? NIMBLE_EXIT_OK : rc;
  }
  rc = a.target ? run_on_farm(ctx, &a) : run_here(&a);
  args_free(&a);
  return rc;
}

const nimble_cli_command nimble_cmd_profile = {
    "profile",
    "Measure a compiled model: latency, time per kernel, peak memory.",
    "profile MODEL|NAME[@DIGEST] --input NAME=DIMS... [--target=T] [--runs N] [--json]",
    "Runs the model on random inputs of the shapes given (DIMS like 4x784;\n"
    "'NAME=' for a scalar) with the entry's dtypes, once to warm up, then\n"
    "N times for the latency and N times more with the runtime's kernel timing\n"
    "on, and reports the median, min and max latency, each kernel's calls and\n"
    "time, and the VM's peak pool memory.\n"
    "\n"
    "Without --target, MODEL is a .nimble file or a directory of parts and runs\n"
    "here. With --target, NAME is an artifact in the farm's store (its tag comes\n"
    "from the target; @sha256:... pins a manifest): the scheduler sends a\n"
    "PROFILE job to a worker that can run the target, and the report is that\n"
    "worker's.\n"
    "\n"
    "Options:\n"
    "  --input NAME=DIMS  an input's shape (every input needs one)\n"
    "  --target T         profile on a farm worker of target T\n"
    "  --runs N           timed runs (default 20)\n"
    "  --warmup N         untimed runs first (default 1; here only); with\n"
    "                     --threads above 1 also the VM's runs that choose\n"
    "                     how its kernels use the threads\n"
    "  --threads N        kernel threads (default 1; here only)\n"
    "  --entry NAME       the entry to run (default main, else the first)\n"
    "  --json             print the report as JSON (integers: ns, bytes)\n"
    "  --report FILE      also write the report's JSON to FILE\n"
    "  --timeout S        give up waiting for the farm after S seconds (default 600)\n"
    "  --events EP        the scheduler's events endpoint (default: its port + 2)\n"
    "\n"
    "Exit status: 0 the report was printed; 1 the model failed to load or run,\n"
    "or the job failed; 2 usage error; 3 MODEL could not be read; 4 bad\n"
    "configuration; 5 the scheduler cannot be reached; 7 the token was refused.\n",
    run_profile,
};

static const nimble_cli_command *self(void) { return &nimble_cmd_profile; }
