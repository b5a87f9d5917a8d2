/* nimble-run: load a compiled executable, run one entry on tensor files
 * (and JSON files for ADT inputs), write every output as NAME.npy.
 *
 *   nimble-run model.nimble --input x=x.npy --input mask=mask.pb \
 *              --output-dir out --repeat 20 --threads 4
 *   nimble-run treelstm.nimble --input tree=tree.json --input emb=emb.npy ...
 *
 * It depends on nothing but the runtime library and the tensor-file module,
 * so the same program runs wherever the runtime does (x86_64, aarch64). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "adt_json.h"
#include "nimble_run.h"
#include "nimble/runtime.h"
#include "nimble/tensor_io.h"
#ifdef NIMBLE_RUN_WITH_FETCH
#include "nimble/fetch.h"
#endif

enum { EXIT_RUN_ERROR = 1, EXIT_USAGE = 2 };

#define MAX_REPEAT 1000000L
#define MAX_THREADS 1024L

/* The program's name in messages: "nimble-run", or "nimble run" when the
 * CLI runs this (nimble_run_main). */
static const char *g_prog = "nimble-run";

static const char USAGE[] =
    "usage: %s MODEL.nimble --input NAME=FILE [--input NAME=FILE ...]\n"
    "       [--output-dir DIR] [--repeat N] [--threads N] [--entry NAME]\n";

static const char HELP[] =
    "\n"
    "Loads a compiled Nimble executable, runs one of its entries on the given\n"
    "inputs, writes each output to DIR/NAME.npy (NAME is the output's name in\n"
    "the entry's signature, the model's own output name; output_<i> when it\n"
    "has none) and prints every output's type and shape.\n"
    "\n"
    "  --input NAME=FILE  the entry's input NAME, from a NumPy .npy file or an\n"
    "                     ONNX TensorProto .pb file; an ADT input (a tree)\n"
    "                     from a JSON file: {\"Node\": [{\"Leaf\": 3}, {\"Leaf\": 7}]}\n"
    "                     (docs/cli.md); every input of the entry must be\n"
    "                     given exactly once\n"
    "  --output-dir DIR   where outputs are written (default: the current\n"
    "                     directory; it must exist)\n"
    "  --repeat N         run N times (1 to 1000000) and print the median and\n"
    "                     minimum latency of setting the inputs plus invoking;\n"
    "                     the outputs of the last run are written\n"
    "  --threads N        threads for the kernels' parallel loops (default 1:\n"
    "                     the calling thread only)\n"
    "  --entry NAME       the entry to run (default: main)\n"
#ifdef NIMBLE_RUN_WITH_FETCH
    "  MODEL may also be a store reference, http://HOST:PORT/NAME:TAG or\n"
    "  http://HOST:PORT/NAME@sha256:...: the artifact is fetched, verified and\n"
    "  cached ($NIMBLE_CACHE_DIR, else $XDG_CACHE_HOME/nimble, else\n"
    "  ~/.cache/nimble; bearer token from $NIMBLE_TOKEN), and loaded from the\n"
    "  cache when the store is unreachable (docs/fetch.md)\n"
#endif
    "  MODEL may be a directory of parts, as `nimble fetch -o DIR` writes it:\n"
    "  every file in it that starts with a part header is loaded as that part\n"
    "  (other files, such as manifest.json, are ignored)\n"
    "  --help             this text; --version: the runtime's version\n"
    "\n"
    "Exit status: 0 success; 1 a file could not be read or written, or the\n"
    "model failed to load or run; 2 a usage error: a malformed command line,\n"
    "or inputs or an entry that the model does not have.\n";

#ifdef NIMBLE_RUN_WITH_FETCH
/* Warnings from the fetcher (offline start, a damaged cache entry
 * replaced) go to stderr; the run goes on. */
static void on_fetch_event(void *user, const nimble_fetch_event_t *e) {
  if (e->kind == NIMBLE_FETCH_EVENT_WARNING) fprintf(stderr, "%s: warning: %s\n", g_prog, e->message);
}

/* Fetches a store reference and says on stderr where it came from. */
static nimble_status_t load_reference(const char *ref, nimble_executable **out) {
  nimble_fetch_options_t o;
  nimble_fetch_options_init(&o);
  o.on_event = on_fetch_event;
  nimble_fetch_stats_t st;
  NIMBLE_RETURN_IF_ERROR(nimble_fetch_artifact_stats(&o, ref, out, &st));
  if (st.blobs_fetched)
    fprintf(stderr, "fetched %u blobs (%llu bytes) in %.0f ms\n", st.blobs_fetched,
            (unsigned long long)st.bytes_fetched, st.elapsed_ms);
  else
    fprintf(stderr, "loaded from cache (%s)\n", st.manifest_digest);
  return nimble_ok();
}
#endif

/* Loads every part file of directory `dir` (the loader copies what it
 * keeps, so the parts are freed before returning). */
static nimble_status_t load_part_dir(const char *dir, nimble_executable **out) {
  nimble_executable_part_t *parts;
  size_t n;
  NIMBLE_RETURN_IF_ERROR(nimble_executable_read_part_dir(dir, &parts, &n));
  nimble_status_t s = nimble_executable_load_parts(parts, n, 0, out);
  nimble_executable_parts_free(parts, n);
  return s;
}

/* One-line errors: "nimble-run: MESSAGE". Newlines inside a message (none
 * are expected) are flattened so a script can rely on one line. */
static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  for (char *p = msg; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
  if (code == EXIT_USAGE && strstr(msg, "--help") == NULL)
    fprintf(stderr, "%s: %s (see %s --help)\n", g_prog, msg, g_prog);
  else
    fprintf(stderr, "%s: %s\n", g_prog, msg);
  return code;
}

static int fail_status(int code, nimble_status_t s, const char *context) {
  int rc = context ? fail(code, "%s: %s", context, nimble_status_message(s))
                   : fail(code, "%s", nimble_status_message(s));
  nimble_status_free(s);
  return rc;
}

/* A strict positive integer in [1, max]; 0 on success. */
static int parse_count(const char *text, long max, long *out) {
  if (!text || !*text) return -1;
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || *end || v < 1 || v > max || text[0] == '+' || text[0] == ' ') return -1;
  *out = v;
  return 0;
}

typedef struct run_input {
  const char *name; /* points into argv */
  const char *path;
  nimble_tensor_file_t file;
  nimble_value *value; /* an ADT input, read from JSON; else NULL */
} run_input;

typedef struct run_args {
  const char *model;
  const char *entry;
  const char *output_dir;
  long repeat;
  int repeat_given;
  long threads;
  run_input *inputs;
  int num_inputs;
} run_args;

/* Parses argv. Returns -1 to go on, or an exit code. */
static int parse_args(int argc, char **argv, run_args *a) {
  a->entry = "main";
  a->output_dir = ".";
  a->repeat = 1;
  a->threads = 1;
  a->inputs = calloc((size_t)argc, sizeof(run_input));
  if (!a->inputs) return fail(EXIT_RUN_ERROR, "out of memory");
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      printf(USAGE, g_prog);
      printf("%s", HELP);
      return 0;
    }
    if (strcmp(arg, "--version") == 0) {
      printf("%s %s\n", g_prog, nimble_runtime_version());
      return 0;
    }
    if (strncmp(arg, "--", 2) != 0 || strcmp(arg, "--") == 0) {
      if (strcmp(arg, "--") == 0) {
        if (i + 1 >= argc) return fail(EXIT_USAGE, "'--' must be followed by the model path");
        arg = argv[++i];
      } else if (arg[0] == '-' && arg[1] != '\0') {
        return fail(EXIT_USAGE, "unknown option '%s'", arg);
      }
      if (a->model) return fail(EXIT_USAGE, "more than one model given ('%s' and '%s')", a->model, arg);
      a->model = arg;
      continue;
    }
    /* --opt VALUE or --opt=VALUE */
    const char *eq = strchr(arg, '=');
    size_t optlen = eq ? (size_t)(eq - arg) : strlen(arg);
    const char *value = NULL;
    static const char *const known[] = {"--input", "--output-dir", "--repeat", "--threads",
                                        "--entry"};
    const char *opt = NULL;
    for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
      if (strlen(known[k]) == optlen && strncmp(arg, known[k], optlen) == 0) opt = known[k];
    if (!opt) return fail(EXIT_USAGE, "unknown option '%.*s'", (int)optlen, arg);
    if (eq) {
      value = eq + 1;
    } else {
      if (i + 1 >= argc) return fail(EXIT_USAGE, "%s needs a value", opt);
      value = argv[++i];
    }
    if (strcmp(opt, "--input") == 0) {
      const char *sep = strchr(value, '=');
      if (!sep) return fail(EXIT_USAGE, "--input '%s': expected NAME=FILE", value);
      if (sep == value) return fail(EXIT_USAGE, "--input '%s': the input NAME is empty", value);
      if (sep[1] == '\0') return fail(EXIT_USAGE, "--input '%s': the FILE is empty", value);
      size_t nlen = (size_t)(sep - value);
      char *name = strndup(value, nlen);
      if (!name) return fail(EXIT_RUN_ERROR, "out of memory");
      for (int k = 0; k < a->num_inputs; k++) {
        if (strcmp(a->inputs[k].name, name) == 0) {
          int rc = fail(EXIT_USAGE, "--input '%s': input '%s' is given twice", value, name);
          free(name);
          return rc;
        }
      }
      a->inputs[a->num_inputs].name = name;
      a->inputs[a->num_inputs].path = sep + 1;
      a->num_inputs++;
    } else if (strcmp(opt, "--output-dir") == 0) {
      if (!*value) return fail(EXIT_USAGE, "--output-dir is empty");
      a->output_dir = value;
    } else if (strcmp(opt, "--repeat") == 0) {
      if (parse_count(value, MAX_REPEAT, &a->repeat) != 0)
        return fail(EXIT_USAGE, "--repeat '%s': expected a whole number from 1 to %ld", value,
                    MAX_REPEAT);
      a->repeat_given = 1;
    } else if (strcmp(opt, "--threads") == 0) {
      if (parse_count(value, MAX_THREADS, &a->threads) != 0)
        return fail(EXIT_USAGE, "--threads '%s': expected a whole number from 1 to %ld", value,
                    MAX_THREADS);
    } else {
      if (!*value) return fail(EXIT_USAGE, "--entry is empty");
      a->entry = value;
    }
  }
  if (!a->model) return fail(EXIT_USAGE, "no model given");
  return -1;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* A file name for output `index`: its signature name with anything but
 * [A-Za-z0-9._-] replaced by '_' (names like "a/b" must not leave DIR),
 * "output_<index>" when it has no usable name. */
static void output_file_name(const char *name, uint32_t index, char *buf, size_t size) {
  if (!name || !*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
    snprintf(buf, size, "output_%u", index);
    return;
  }
  size_t n = 0;
  for (const char *p = name; *p && n + 1 < size - 4; p++) {
    char c = *p;
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == '-';
    buf[n++] = ok ? c : '_';
  }
  buf[n] = '\0';
}

static nimble_status_t set_value_by_name(nimble_vm *vm, const nimble_entry_info_t *entry, const char *name,
                                         nimble_value *value) {
  for (uint32_t j = 0; j < entry->num_inputs; j++)
    if (strcmp(entry->inputs[j].name, name) == 0) return nimble_vm_set_input_value(vm, entry->name, j, value);
  return nimble_status_make(NIMBLE_NOT_FOUND, "entry '%s' has no input '%s'", entry->name, name);
}

static int run(run_args *a) {
  nimble_executable *exe = NULL;
  nimble_vm *vm = NULL;
  DLManagedTensor **outs = NULL;
  uint32_t num_outs = 0;
  double *times = NULL;
  int rc = 0;
  nimble_status_t s;

#ifdef NIMBLE_RUN_WITH_FETCH
  if (nimble_fetch_looks_like_reference(a->model))
    s = load_reference(a->model, &exe);
  else
#endif
  {
    struct stat st;
    if (stat(a->model, &st) == 0 && S_ISDIR(st.st_mode))
      s = load_part_dir(a->model, &exe);
    else
      s = nimble_executable_load_file(a->model, &exe);
  }
  if (s) {
    const char *m = nimble_status_message(s);
    return fail_status(EXIT_RUN_ERROR, s, strstr(m, a->model) ? NULL : a->model);
  }
  const nimble_entry_info_t *entry;
  s = nimble_executable_find_entry(exe, a->entry, &entry);
  if (s) {
    rc = fail_status(EXIT_USAGE, s, a->model);
    goto done;
  }

  /* Every given input must exist, and every declared input be given. */
  for (int k = 0; k < a->num_inputs; k++) {
    uint32_t j;
    for (j = 0; j < entry->num_inputs; j++)
      if (strcmp(entry->inputs[j].name, a->inputs[k].name) == 0) break;
    if (j == entry->num_inputs) {
      char names[1024] = "";
      size_t used = 0;
      for (uint32_t q = 0; q < entry->num_inputs && used < sizeof(names); q++) {
        int n = snprintf(names + used, sizeof(names) - used, "%s%s", q ? ", " : "",
                         entry->inputs[q].name);
        if (n > 0) used += (size_t)n;
      }
      rc = fail(EXIT_USAGE, "--input %s=%s: entry '%s' of %s has no input '%s' (its inputs: %s)",
                a->inputs[k].name, a->inputs[k].path, a->entry, a->model, a->inputs[k].name,
                entry->num_inputs ? names : "none");
      goto done;
    }
  }
  for (uint32_t j = 0; j < entry->num_inputs; j++) {
    int given = 0;
    for (int k = 0; k < a->num_inputs; k++) given |= strcmp(entry->inputs[j].name, a->inputs[k].name) == 0;
    if (!given) {
      rc = fail(EXIT_USAGE, "input '%s' of entry '%s' is not given (use --input %s=FILE)",
                entry->inputs[j].name, a->entry, entry->inputs[j].name);
      goto done;
    }
  }
  for (int k = 0; k < a->num_inputs; k++) {
    uint32_t j = 0;
    while (strcmp(entry->inputs[j].name, a->inputs[k].name) != 0) j++; /* checked above */
    if (nimble_tensor_info_is_adt(&entry->inputs[j]))
      s = nimble_run_read_adt_file(a->inputs[k].path, entry, j, &a->inputs[k].value);
    else
      s = nimble_tensor_io_read_auto(a->inputs[k].path, &a->inputs[k].file);
    if (s) {
      char ctx[512];
      snprintf(ctx, sizeof(ctx), "input '%s'", a->inputs[k].name);
      rc = fail_status(EXIT_RUN_ERROR, s, ctx);
      goto done;
    }
  }

  nimble_vm_options_t options;
  nimble_vm_options_init(&options);
  options.num_threads = (uint32_t)a->threads;
  s = nimble_vm_create(exe, &options, &vm);
  if (s) {
    rc = fail_status(EXIT_RUN_ERROR, s, a->model);
    goto done;
  }

  times = calloc((size_t)a->repeat, sizeof(double));
  if (!times) {
    rc = fail(EXIT_RUN_ERROR, "out of memory");
    goto done;
  }
  for (long r = 0; r < a->repeat; r++) {
    double t0 = now_ms();
    for (int k = 0; k < a->num_inputs && !s; k++)
      s = a->inputs[k].value ? set_value_by_name(vm, entry, a->inputs[k].name, a->inputs[k].value)
                             : nimble_vm_set_input_by_name(vm, a->entry, a->inputs[k].name, &a->inputs[k].file.tensor);
    if (!s) s = nimble_vm_invoke(vm, a->entry);
    times[r] = now_ms() - t0;
    if (s) {
      rc = fail_status(EXIT_RUN_ERROR, s, a->model);
      goto done;
    }
    if (r + 1 < a->repeat) continue;
    num_outs = nimble_vm_num_outputs(vm);
    outs = calloc(num_outs ? num_outs : 1, sizeof(*outs));
    if (!outs) {
      rc = fail(EXIT_RUN_ERROR, "out of memory");
      goto done;
    }
    for (uint32_t o = 0; o < num_outs; o++) {
      s = nimble_vm_take_output(vm, o, &outs[o]);
      if (s) {
        rc = fail_status(EXIT_RUN_ERROR, s, a->model);
        goto done;
      }
    }
  }

  for (uint32_t o = 0; o < num_outs; o++) {
    const char *name = o < entry->num_outputs ? entry->outputs[o].name : NULL;
    char file[256], path[4096 + 300], shape[512];
    output_file_name(name, o, file, sizeof(file));
    /* Two outputs that sanitize to one name must not overwrite each other. */
    for (uint32_t p = 0; p < o; p++) {
      char other[256];
      output_file_name(p < entry->num_outputs ? entry->outputs[p].name : NULL, p, other,
                       sizeof(other));
      if (strcmp(other, file) == 0) {
        snprintf(file, sizeof(file), "output_%u", o);
        break;
      }
    }
    int plen = snprintf(path, sizeof(path), "%s/%s.npy", a->output_dir, file);
    if (plen < 0 || (size_t)plen >= sizeof(path)) {
      rc = fail(EXIT_USAGE, "--output-dir '%.64s...': the path is too long", a->output_dir);
      goto done;
    }
    const DLTensor *t = &outs[o]->dl_tensor;
    s = nimble_tensor_io_write_npy(path, t);
    if (s) {
      char ctx[512];
      snprintf(ctx, sizeof(ctx), "output '%s'", name ? name : file);
      rc = fail_status(EXIT_RUN_ERROR, s, ctx);
      goto done;
    }
    printf("%s: %s %s -> %s\n", name && *name ? name : file, nimble_tensor_io_dtype_name(t->dtype),
           nimble_tensor_io_format_shape(t, shape, sizeof(shape)), path);
  }
  if (a->repeat_given) {
    qsort(times, (size_t)a->repeat, sizeof(double), cmp_double);
    double median = a->repeat % 2 ? times[a->repeat / 2]
                                  : (times[a->repeat / 2 - 1] + times[a->repeat / 2]) / 2;
    printf("latency over %ld runs (%ld thread%s): median %.3f ms, min %.3f ms\n", a->repeat,
           a->threads, a->threads == 1 ? "" : "s", median, times[0]);
  }

done:
  if (outs) {
    for (uint32_t o = 0; o < num_outs; o++)
      if (outs[o] && outs[o]->deleter) outs[o]->deleter(outs[o]);
    free(outs);
  }
  free(times);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
  return rc;
}

int nimble_run_main(int argc, char **argv, const char *prog) {
  if (prog) g_prog = prog;
  run_args a;
  memset(&a, 0, sizeof(a));
  int rc = parse_args(argc, argv, &a);
  if (rc < 0) rc = run(&a);
  for (int k = 0; k < a.num_inputs; k++) {
    free((char *)a.inputs[k].name);
    nimble_tensor_file_deinit(&a.inputs[k].file);
    nimble_value_release(a.inputs[k].value);
  }
  free(a.inputs);
  if (fflush(stdout) != 0 && rc == 0) rc = fail(EXIT_RUN_ERROR, "cannot write to stdout");
  return rc;
}
