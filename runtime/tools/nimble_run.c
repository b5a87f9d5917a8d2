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
    "       [--output NAME=FILE ...] [--output-dir DIR] [--repeat N] [--threads N]\n"
    "       [--entry NAME] [--trusted-keys FILE] [--require-signature] [--verify-all]\n";

static const char HELP[] =
    "\n"
    "Loads a compiled Nimble executable, runs one of its entries on the given\n"
    "inputs, writes every output to a file and prints, per output, its name,\n"
    "type and shape and the file it went to.\n"
    "\n"
    "  --input NAME=FILE  the entry's input NAME, from a NumPy .npy file or an\n"
    "                     ONNX TensorProto .pb file; an ADT input (a tree)\n"
    "                     from a JSON file: {\"Node\": [{\"Leaf\": 3}, {\"Leaf\": 7}]}\n"
    "                     (docs/cli.md); every input of the entry must be\n"
    "                     given exactly once. NAME is the input's name as the\n"
    "                     model spells it, even when it contains '='. NumPy\n"
    "                     has no bfloat16: a bfloat16 input may come from a\n"
    "                     uint16 file holding its bits\n"
    "  --output NAME=FILE write output NAME (its name in the model, or its\n"
    "                     position from 0 when no output has that name) to\n"
    "                     FILE: an ONNX TensorProto when FILE ends in .pb,\n"
    "                     else NumPy .npy\n"
    "  --output-dir DIR   where the other outputs are written (default: the\n"
    "                     current directory; it must exist), as DIR/NAME.npy:\n"
    "                     NAME is the output's name with every character but\n"
    "                     [A-Za-z0-9._-] replaced by '_' (output_<i> when it\n"
    "                     has none, or when two names would collide); .pb for\n"
    "                     bfloat16, which NumPy lacks\n"
    "  --repeat N         run N times (1 to 1000000) and print the median and\n"
    "                     minimum latency of setting the inputs plus invoking;\n"
    "                     the outputs of the last run are written\n"
    "  --warmup N         first run N times untimed (0 to 1000000, default 0):\n"
    "                     what a long-lived process has done before (memory\n"
    "                     touched, constants checked on first use, threads\n"
    "                     settled on their cores)\n"
    "  --threads N        threads for the kernels' parallel loops (default 1:\n"
    "                     the calling thread only). With N > 1 the first 21\n"
    "                     runs after 40 ms measure whether each kernel gains\n"
    "                     from them, and keep the fastest way (docs/vm.md,\n"
    "                     \"Threads by measurement\"; NIMBLE_ADAPTIVE_THREADS=0:\n"
    "                     always all N)\n"
    "  --entry NAME       the entry to run (default: main)\n"
#ifdef NIMBLE_RUN_WITH_FETCH
    "  MODEL may also be a store reference, http://HOST:PORT/NAME:TAG or\n"
    "  http://HOST:PORT/NAME@sha256:...: the artifact is fetched, verified and\n"
    "  cached ($NIMBLE_CACHE_DIR, else $XDG_CACHE_HOME/nimble, else\n"
    "  ~/.cache/nimble; bearer token from $NIMBLE_TOKEN), and loaded from the\n"
    "  cache when the store is unreachable (docs/fetch.md)\n"
    "  --trusted-keys FILE  for a store reference: load only artifacts signed\n"
    "                     by one of these keys (\"ed25519 <hex>\" lines; default\n"
    "                     $NIMBLE_TRUSTED_KEYS; neither: a warning that the\n"
    "                     publisher is not verified)\n"
#endif
    "  --require-signature  load MODEL (a file or a directory of parts) only\n"
    "                     when it is signed (`nimble compile --sign KEY`) by\n"
    "                     one of the trusted keys (--trusted-keys FILE, else\n"
    "                     $NIMBLE_TRUSTED_KEYS), checked before any kernel is\n"
    "                     mapped\n"
    "  --verify-all       check every byte of MODEL at load, its weights\n"
    "                     and kernels included (by default the weights of\n"
    "                     a file with chunk digests are checked on first\n"
    "                     use, a corrupted weight failing the run, not the\n"
    "                     load; and the kernels when the VM is created)\n"
    "  Every executable is checked against its digests before any of it is\n"
    "  used: a corrupted or modified file is refused, naming the section\n"
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
static nimble_status_t load_reference(const char *ref, const char *trusted_keys,
                                      nimble_executable **out) {
  nimble_fetch_options_t o;
  nimble_fetch_options_init(&o);
  o.on_event = on_fetch_event;
  o.trusted_keys = trusted_keys;
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
static nimble_status_t load_part_dir(const char *dir, uint32_t flags, nimble_executable_check_fn check, void *user,
                                     nimble_executable **out) {
  nimble_executable_part_t *parts;
  size_t n;
  NIMBLE_RETURN_IF_ERROR(nimble_executable_read_part_dir(dir, &parts, &n));
  nimble_status_t s = nimble_executable_load_parts_checked(parts, n, flags, check, user, out);
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
static int parse_count(const char *text, long min, long max, long *out) {
  if (!text || !*text) return -1;
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || *end || v < min || v > max || text[0] == '+' || text[0] == ' ') return -1;
  *out = v;
  return 0;
}

/* An --input or --output argument, NAME=FILE. The split is made once the
 * entry is known (resolve_spec), so that a NAME containing '=' still
 * matches the model's own spelling. */
typedef struct run_input {
  const char *spec; /* NAME=FILE, points into argv */
  const char *name; /* resolved: owned copy of NAME */
  const char *path; /* resolved: points into spec */
  uint32_t index;   /* resolved: the entry's input (or output) index */
  nimble_tensor_file_t file;
  nimble_value *value; /* an ADT input, read from JSON; else NULL */
} run_input;

typedef struct run_args {
  const char *model;
  const char *entry;
  const char *output_dir;
  long repeat;
  int repeat_given;
  long warmup; /* --warmup: untimed runs before the timed ones */
  long threads;
  run_input *inputs;
  int num_inputs;
  run_input *outputs; /* --output; `file` and `value` unused */
  int num_outputs;
  const char *trusted_keys; /* --trusted-keys FILE, or NULL ($NIMBLE_TRUSTED_KEYS) */
  int require_signature;    /* --require-signature */
  uint32_t load_flags;      /* NIMBLE_LOAD_VERIFY_ALL with --verify-all */
} run_args;

/* Checks the shape of a NAME=FILE argument; 0 when it will do. */
static int check_spec(const char *opt, const char *value) {
  const char *sep = strchr(value, '=');
  if (!sep) return fail(EXIT_USAGE, "%s '%s': expected NAME=FILE", opt, value);
  if (sep == value) return fail(EXIT_USAGE, "%s '%s': the NAME is empty", opt, value);
  if (value[strlen(value) - 1] == '=') return fail(EXIT_USAGE, "%s '%s': the FILE is empty", opt, value);
  return 0;
}

/* Splits spec at the '=' after the longest of `names` it starts with; at
 * its first '=' when none fits (*index is then UINT32_MAX). */
static int resolve_spec(run_input *in, const nimble_tensor_info_t *vals, uint32_t n) {
  size_t best = 0;
  in->index = UINT32_MAX;
  for (uint32_t j = 0; j < n; j++) {
    size_t len = strlen(vals[j].name);
    if (len > best && strncmp(in->spec, vals[j].name, len) == 0 && in->spec[len] == '=' && in->spec[len + 1]) {
      best = len;
      in->index = j;
    }
  }
  if (!best) best = (size_t)(strchr(in->spec, '=') - in->spec);
  free((char *)in->name);
  in->name = strndup(in->spec, best);
  in->path = in->spec + best + 1;
  return in->name ? 0 : fail(EXIT_RUN_ERROR, "out of memory");
}

/* Names of `vals`, comma-separated, for messages. */
static void name_list(const nimble_tensor_info_t *vals, uint32_t n, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (uint32_t q = 0; q < n && used < size; q++) {
    int k = snprintf(buf + used, size - used, "%s%s", q ? ", " : "", vals[q].name);
    if (k > 0) used += (size_t)k;
  }
  if (!n) snprintf(buf, size, "none");
}

/* Parses argv. Returns -1 to go on, or an exit code. */
static int parse_args(int argc, char **argv, run_args *a) {
  a->entry = "main";
  a->output_dir = ".";
  a->repeat = 1;
  a->threads = 1;
  a->inputs = calloc((size_t)argc, sizeof(run_input));
  a->outputs = calloc((size_t)argc, sizeof(run_input));
  if (!a->inputs || !a->outputs) return fail(EXIT_RUN_ERROR, "out of memory");
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
    if (strcmp(arg, "--require-signature") == 0) {
      a->require_signature = 1;
      continue;
    }
    if (strcmp(arg, "--verify-all") == 0) {
      a->load_flags |= NIMBLE_LOAD_VERIFY_ALL;
      continue;
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
    static const char *const known[] = {"--input", "--output", "--output-dir", "--repeat",
                                        "--warmup", "--threads", "--entry", "--trusted-keys"};
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
    if (strcmp(opt, "--input") == 0 || strcmp(opt, "--output") == 0) {
      int rc = check_spec(opt, value);
      if (rc) return rc;
      if (opt[2] == 'i') a->inputs[a->num_inputs++].spec = value;
      else a->outputs[a->num_outputs++].spec = value;
    } else if (strcmp(opt, "--output-dir") == 0) {
      if (!*value) return fail(EXIT_USAGE, "--output-dir is empty");
      a->output_dir = value;
    } else if (strcmp(opt, "--repeat") == 0) {
      if (parse_count(value, 1, MAX_REPEAT, &a->repeat) != 0)
        return fail(EXIT_USAGE, "--repeat '%s': expected a whole number from 1 to %ld", value,
                    MAX_REPEAT);
      a->repeat_given = 1;
    } else if (strcmp(opt, "--warmup") == 0) {
      if (parse_count(value, 0, MAX_REPEAT, &a->warmup) != 0)
        return fail(EXIT_USAGE, "--warmup '%s': expected a whole number from 0 to %ld", value, MAX_REPEAT);
    } else if (strcmp(opt, "--threads") == 0) {
      if (parse_count(value, 1, MAX_THREADS, &a->threads) != 0)
        return fail(EXIT_USAGE, "--threads '%s': expected a whole number from 1 to %ld", value,
                    MAX_THREADS);
    } else if (strcmp(opt, "--trusted-keys") == 0) {
      if (!*value) return fail(EXIT_USAGE, "--trusted-keys is empty");
      a->trusted_keys = value;
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

/* One run: the inputs set (an ADT value is checked each time), then the
 * entry invoked. */
static nimble_status_t run_once(const run_args *a, nimble_vm *vm, const nimble_entry_info_t *entry) {
  nimble_status_t s = nimble_ok();
  for (int k = 0; k < a->num_inputs && !s; k++)
    s = a->inputs[k].value ? nimble_vm_set_input_value(vm, entry->name, a->inputs[k].index, a->inputs[k].value)
                           : nimble_vm_set_input(vm, a->entry, a->inputs[k].index, &a->inputs[k].file.tensor);
  return s ? s : nimble_vm_invoke(vm, a->entry);
}

static int run(run_args *a) {
  nimble_executable *exe = NULL;
  nimble_vm *vm = NULL;
  DLManagedTensor **outs = NULL;
  uint32_t num_outs = 0;
  double *times = NULL;
  int rc = 0;
  nimble_status_t s;

  nimble_executable_check_fn check = NULL;
  void *policy = NULL;
#ifdef NIMBLE_RUN_WITH_FETCH
  if (nimble_fetch_looks_like_reference(a->model)) {
    if (a->require_signature && !a->trusted_keys && !getenv("NIMBLE_TRUSTED_KEYS"))
      return fail(EXIT_USAGE, "--require-signature needs trusted keys (--trusted-keys FILE or "
                              "$NIMBLE_TRUSTED_KEYS)");
    s = load_reference(a->model, a->trusted_keys, &exe);
  } else
#endif
  if (a->trusted_keys && !a->require_signature) {
    /* Trusting keys for a local file without requiring its signature
     * would promise a check that does not happen. */
    return fail(EXIT_USAGE,
                "--trusted-keys checks artifacts fetched from a store; '%s' is a local file (add "
                "--require-signature to require its signature)",
                a->model);
  } else {
    if (a->require_signature) {
#ifdef NIMBLE_RUN_WITH_FETCH
      nimble_signature_policy *p = NULL;
      s = nimble_signature_policy_create(a->trusted_keys, NULL, &p);
      if (s) return fail_status(EXIT_USAGE, s, NULL);
      check = nimble_signature_policy_check;
      policy = p;
#else
      return fail(EXIT_USAGE, "--require-signature: this %s was built without signature checks (no "
                              "libsodium for this target)", g_prog);
#endif
    }
    struct stat st;
    if (stat(a->model, &st) == 0 && S_ISDIR(st.st_mode))
      s = load_part_dir(a->model, a->load_flags, check, policy, &exe);
    else
      s = nimble_executable_load_file_checked(a->model, a->load_flags, check, policy, &exe);
#ifdef NIMBLE_RUN_WITH_FETCH
    nimble_signature_policy_destroy(policy);
#endif
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

  /* Every given input must exist, once, and every declared input be given. */
  for (int k = 0; k < a->num_inputs; k++) {
    run_input *in = &a->inputs[k];
    if ((rc = resolve_spec(in, entry->inputs, entry->num_inputs)) != 0) goto done;
    if (in->index == UINT32_MAX) {
      char names[1024];
      name_list(entry->inputs, entry->num_inputs, names, sizeof names);
      rc = fail(EXIT_USAGE, "--input %s: entry '%s' of %s has no input '%s' (its inputs: %s)", in->spec,
                a->entry, a->model, in->name, names);
      goto done;
    }
    for (int q = 0; q < k; q++) {
      if (a->inputs[q].index == in->index) {
        rc = fail(EXIT_USAGE, "--input '%s': input '%s' is given twice", in->spec, in->name);
        goto done;
      }
    }
  }
  for (uint32_t j = 0; j < entry->num_inputs; j++) {
    int given = 0;
    for (int k = 0; k < a->num_inputs; k++) given |= a->inputs[k].index == j;
    if (!given) {
      rc = fail(EXIT_USAGE, "input '%s' of entry '%s' is not given (use --input %s=FILE)",
                entry->inputs[j].name, a->entry, entry->inputs[j].name);
      goto done;
    }
  }
  /* --output NAME=FILE: a name of the entry's outputs, else a position. */
  for (int k = 0; k < a->num_outputs; k++) {
    run_input *o = &a->outputs[k];
    if ((rc = resolve_spec(o, entry->outputs, entry->num_outputs)) != 0) goto done;
    if (o->index == UINT32_MAX) {
      char *end;
      errno = 0;
      unsigned long pos = strtoul(o->name, &end, 10);
      if (!errno && !*end && o->name[0] >= '0' && o->name[0] <= '9' && pos < entry->num_outputs)
        o->index = (uint32_t)pos;
    }
    if (o->index == UINT32_MAX) {
      char names[1024];
      name_list(entry->outputs, entry->num_outputs, names, sizeof names);
      rc = fail(EXIT_USAGE, "--output %s: entry '%s' of %s has no output '%s' (its outputs: %s; or give a "
                "position from 0)", o->spec, a->entry, a->model, o->name, names);
      goto done;
    }
    for (int q = 0; q < k; q++) {
      if (a->outputs[q].index == o->index) {
        rc = fail(EXIT_USAGE, "--output '%s': output '%s' is given twice", o->spec,
                  entry->outputs[o->index].name);
        goto done;
      }
    }
  }
  for (int k = 0; k < a->num_inputs; k++) {
    uint32_t j = a->inputs[k].index;
    if (nimble_tensor_info_is_adt(&entry->inputs[j]))
      s = nimble_run_read_adt_file(a->inputs[k].path, entry, j, &a->inputs[k].value);
    else
      s = nimble_tensor_io_read_auto(a->inputs[k].path, &a->inputs[k].file);
    /* NumPy has no bfloat16: its bits in a uint16 file are taken as such. */
    DLDataType *fd = &a->inputs[k].file.tensor.dtype;
    if (!s && !a->inputs[k].value && entry->inputs[j].dtype.code == kDLBfloat && entry->inputs[j].dtype.bits == 16 &&
        fd->code == kDLUInt && fd->bits == 16)
      fd->code = kDLBfloat;
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
  /* Untimed runs first (--warmup): what a long-lived process has done
   * before the runs that count: memory touched, constants checked on first
   * use, the pool's threads settled on their cores. */
  for (long w = 0; w < a->warmup && !s; w++) s = run_once(a, vm, entry);
  if (s) {
    rc = fail_status(EXIT_RUN_ERROR, s, a->model);
    goto done;
  }
  for (long r = 0; r < a->repeat; r++) {
    double t0 = now_ms();
    s = run_once(a, vm, entry);
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
    const DLTensor *t = &outs[o]->dl_tensor;
    char file[256], path[4096 + 300], shape[512];
    const char *dest = NULL;
    for (int k = 0; k < a->num_outputs && !dest; k++)
      if (a->outputs[k].index == o) dest = a->outputs[k].path;
    if (!dest) {
      output_file_name(name, o, file, sizeof(file));
      /* Two outputs that sanitize to one name must not overwrite each other. */
      for (uint32_t p = 0; p < o; p++) {
        char other[256];
        output_file_name(p < entry->num_outputs ? entry->outputs[p].name : NULL, p, other, sizeof(other));
        if (strcmp(other, file) == 0) {
          snprintf(file, sizeof(file), "output_%u", o);
          break;
        }
      }
      /* NumPy has no bfloat16: such an output goes to an ONNX TensorProto. */
      const char *ext = t->dtype.code == kDLBfloat ? "pb" : "npy";
      int plen = snprintf(path, sizeof(path), "%s/%s.%s", a->output_dir, file, ext);
      if (plen < 0 || (size_t)plen >= sizeof(path)) {
        rc = fail(EXIT_USAGE, "--output-dir '%.64s...': the path is too long", a->output_dir);
        goto done;
      }
      dest = path;
    }
    size_t dl = strlen(dest);
    if (dl > 3 && strcmp(dest + dl - 3, ".pb") == 0)
      s = nimble_tensor_io_write_pb(dest, name ? name : "", t);
    else
      s = nimble_tensor_io_write_npy(dest, t);
    if (s) {
      char ctx[512];
      snprintf(ctx, sizeof(ctx), "output '%s'", name && *name ? name : "?");
      rc = fail_status(EXIT_RUN_ERROR, s, ctx);
      goto done;
    }
    printf("%s: %s %s -> %s\n", name && *name ? name : "(unnamed)", nimble_tensor_io_dtype_name(t->dtype),
           nimble_tensor_io_format_shape(t, shape, sizeof(shape)), dest);
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
  for (int k = 0; k < a.num_outputs; k++) free((char *)a.outputs[k].name);
  free(a.inputs);
  free(a.outputs);
  if (fflush(stdout) != 0 && rc == 0) rc = fail(EXIT_RUN_ERROR, "cannot write to stdout");
  return rc;
}
