/* `nimble compile`: the compiler driver (nimble/compile.h) on the command
 * line, for a person (progress on a terminal, -v timings) and for the
 * compile worker (--emit-parts DIR --progress-fd N, docs/farm.md §4). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "nimble/cli_progress.h"
#include "nimble/codegen.h"
#include "nimble/compile.h"
#include "nimble/kernel_cache.h"
#include "nimble/target.h"
#ifdef NIMBLE_CLI_HAVE_SIGN
#include "nimble/fetch.h"
#endif

extern const nimble_cli_command nimble_cmd_compile;

typedef struct compile_args {
  const char *model, *target, *out, *emit_parts, *dump_ir, *dump_ir_passes, *format;
  const char *sign_key; /* --sign KEYFILE */
  const char *kernel_cache; /* --kernel-cache DIR; NULL: the default folder */
  int opt_level;
  int progress_fd; /* -1: none */
  int jobs;        /* 0: the CPUs available */
  bool verbose;
  bool time_passes;
  bool no_kernel_cache;
  bool tune;                /* --option tune=true */
  long tune_budget_s;       /* --option tune_budget_s=N; 0: the default */
  long tune_threads;        /* --option tune_threads=N; 0: the CPUs available */
  const char *tune_inputs;  /* --option tune_inputs=x=1x3x224x224;... */
  const char *tune_records; /* --tune-records FILE */
  const char *tune_records_out; /* --tune-records-out FILE */
} compile_args;

/* What the progress callback feeds: the worker's fd, the terminal line,
 * and the phase reached (which decides the exit code of a failure). */
typedef struct progress_sink {
  int fd;
  nimble_cli_progress *tty;
  size_t tty_index;
  const char *phase;
  bool fd_failed;
  const char *fd_phase; /* the last line written: phase and percent */
  int fd_percent;
} progress_sink;

static void on_progress(void *user, const char *phase, int percent) {
  progress_sink *p = user;
  p->phase = phase;
  /* Code generation's steps go to the fd with their kernel counts
   * (on_codegen_progress); a percent already written is not repeated. */
  bool codegen_step = strcmp(phase, "codegen") == 0 && percent > 0 && percent < 100;
  bool repeat = p->fd_phase && strcmp(p->fd_phase, phase) == 0 && p->fd_percent == percent;
  if (p->fd >= 0 && !p->fd_failed && !repeat && !codegen_step) {
    p->fd_phase = phase;
    p->fd_percent = percent;
    char line[64];
    int n = snprintf(line, sizeof line, "%s %d\n", phase, percent);
    /* A reader that went away must not kill the compile (SIGPIPE is
     * ignored below); progress is advisory. */
    if (n > 0 && write(p->fd, line, (size_t)n) != n) p->fd_failed = true;
  }
  if (p->tty && !codegen_step)
    nimble_status_free(nimble_cli_progress_update(p->tty, p->tty_index, phase, percent, NULL));
}

/* Code generation's kernels: the terminal line says how far it is, e.g.
 * "codegen 40% (28/71 kernels, 12 cached)". */
static void on_codegen_progress(void *user, size_t done, size_t total, size_t cached) {
  progress_sink *p = user;
  int percent = (int)(done * 100 / (total ? total : 1));
  if (percent > 99) percent = 99;
  /* The worker's line: "codegen PERCENT DONE/TOTAL CACHED" (docs/farm.md §4),
   * one per kernel, so the farm shows the kernels as a local compile does. */
  if (p->fd >= 0 && !p->fd_failed) {
    p->fd_phase = "codegen";
    p->fd_percent = percent;
    char line[96];
    int n = snprintf(line, sizeof line, "codegen %d %zu/%zu %zu\n", percent, done, total, cached);
    if (n > 0 && (size_t)n < sizeof line && write(p->fd, line, (size_t)n) != n) p->fd_failed = true;
  }
  if (!p->tty) return;
  char detail[96];
  snprintf(detail, sizeof detail, "%zu/%zu kernels, %zu cached", done, total, cached);
  nimble_status_free(nimble_cli_progress_update(p->tty, p->tty_index, "codegen", percent, detail));
}

/* After a compile, for the worker: "kcache-new KEY" on the progress fd for
 * each kernel this compile built and put into the cache, so that the
 * worker can share those entries with the farm (docs/farm.md, "The farm's
 * kernel cache"). Hits and the linked object's entry are not listed. */
static void report_new_entries(progress_sink *p, const nimble_codegen_stats_t *cs) {
  if (p->fd < 0 || p->fd_failed || !cs || !cs->kernels) return;
  for (size_t i = 0; i < cs->n_kernels && !p->fd_failed; i++) {
    const nimble_codegen_kernel_time_t *k = &cs->kernels[i];
    if (!k->stored || strlen(k->key) != NIMBLE_KERNEL_KEY_LEN) continue;
    char line[96];
    int n = snprintf(line, sizeof line, "kcache-new %s\n", k->key);
    if (n > 0 && (size_t)n < sizeof line && write(p->fd, line, (size_t)n) != n) p->fd_failed = true;
  }
}

static void on_tune_progress(void *user, int percent) { on_progress(user, "tune", percent); }

/* A schedule's knobs as `nimble compile -v` lists them. */
static void format_schedule(const nimble_tune_schedule_t *sc, char *buf, size_t size) {
  char vw[16] = "target", il[16] = "llvm";
  if (sc->vector_width) snprintf(vw, sizeof vw, "%d", (int)sc->vector_width);
  if (sc->interleave) snprintf(il, sizeof il, "%d", (int)sc->interleave);
  snprintf(buf, size, "parallel=%d min_task_work=%-6lld conv_block=%-7lld avx512_clone=%-4s vector_width=%-6s "
                      "interleave=%-4s",
           (int)sc->parallel, (long long)sc->min_task_work, (long long)sc->conv_block,
           nimble_tune_clone_name(sc->avx512_clone), vw, il);
}

/* One line always (what tuning did), and with -v each new record: its
 * schedule (for outputs larger than its buckets') and under it those of
 * its size buckets. */
static void print_tune_report(const nimble_tune_report_t *t, bool verbose) {
  size_t picked = 0;
  for (size_t i = 0; i < t->num_records; i++) picked += nimble_tune_record_rescheduled(&t->records[i]);
  char sizes[48] = "", bucketed[64] = "";
  if (t->sizes > 1) snprintf(sizes, sizeof sizes, " at %zu input sizes", t->sizes);
  if (t->bucketed) snprintf(bucketed, sizeof bucketed, " (%zu of them one per output size)", t->bucketed);
  fprintf(stderr, "tuned: %zu kernels, %zu with records given, %zu new records (%zu points compiled, %zu kernel "
                  "variants timed over %zu rounds%s, %.1f s), %zu took a schedule of their own%s%s%s\n",
          t->kernels, t->kernels_recorded, t->num_records, t->points, t->measured, t->rounds, sizes, t->seconds,
          picked, bucketed, t->skipped[0] ? "; " : "", t->skipped);
  for (size_t i = 0; verbose && i < t->num_records; i++) {
    const nimble_tune_record_t *r = &t->records[i];
    char sc[192];
    format_schedule(&r->schedule, sc, sizeof sc);
    fprintf(stderr, "  %-40s %s %9.1f -> %9.1f us\n", r->kernel, sc, r->default_us, r->tuned_us);
    for (int32_t b = 0; b < r->num_buckets; b++) {
      char label[64];
      snprintf(label, sizeof label, "outputs of <= %lld elements:", (long long)r->buckets[b].max_elements);
      format_schedule(&r->buckets[b].schedule, sc, sizeof sc);
      fprintf(stderr, "    %-38s %s\n", label, sc);
    }
  }
}

static bool parse_int(const char *s, long lo, long hi, long *out) {
  if (!s || !*s) return false;
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

/* --option KEY=VALUE: the job options the farm passes (docs/protocol.md). */
static int apply_option(compile_args *a, const char *kv) {
  const char *eq = strchr(kv, '=');
  if (!eq || eq == kv)
    return nimble_cli_usage_error(&nimble_cmd_compile, "--option '%s': expected KEY=VALUE", kv);
  size_t klen = (size_t)(eq - kv);
  const char *v = eq + 1;
  if (klen == 9 && strncmp(kv, "opt_level", 9) == 0) {
    long lv;
    if (!parse_int(v, 0, 3, &lv))
      return nimble_cli_usage_error(&nimble_cmd_compile, "--option opt_level='%s': expected 0 to 3", v);
    a->opt_level = (int)lv;
    return NIMBLE_EXIT_OK;
  }
  if (klen == 4 && strncmp(kv, "tune", 4) == 0) {
    if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
      return nimble_cli_usage_error(&nimble_cmd_compile, "--option tune='%s': expected true or false", v);
    a->tune = strcmp(v, "true") == 0;
    return NIMBLE_EXIT_OK;
  }
  if (klen == 13 && strncmp(kv, "tune_budget_s", 13) == 0) {
    if (!parse_int(v, 1, 86400, &a->tune_budget_s))
      return nimble_cli_usage_error(&nimble_cmd_compile, "--option tune_budget_s='%s': expected 1 to 86400 seconds", v);
    return NIMBLE_EXIT_OK;
  }
  if (klen == 12 && strncmp(kv, "tune_threads", 12) == 0) {
    if (!parse_int(v, 1, 1024, &a->tune_threads))
      return nimble_cli_usage_error(&nimble_cmd_compile, "--option tune_threads='%s': expected 1 to 1024", v);
    return NIMBLE_EXIT_OK;
  }
  if (klen == 11 && strncmp(kv, "tune_inputs", 11) == 0) {
    if (!*v) return nimble_cli_usage_error(&nimble_cmd_compile, "--option tune_inputs needs NAME=DIMS[;NAME=DIMS]");
    a->tune_inputs = v;
    return NIMBLE_EXIT_OK;
  }
  return nimble_cli_usage_error(&nimble_cmd_compile,
                                "--option '%.*s': unknown option (known: opt_level, tune, tune_budget_s, tune_threads, "
                                "tune_inputs)",
                                (int)klen, kv);
}

/* Takes the value of option `name` at argv[*i] ("--name V" or "--name=V");
 * returns NULL when argv[*i] is not that option, and sets *missing when it
 * is but has no value. */
static const char *take_value(int argc, char **argv, int *i, const char *name, bool *missing) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0) return NULL;
  if (a[n] == '=') return a + n + 1;
  if (a[n] != '\0') return NULL;
  if (*i + 1 >= argc) {
    *missing = true;
    return NULL;
  }
  return argv[++*i];
}

static int parse_args(int argc, char **argv, compile_args *a, bool *help) {
  memset(a, 0, sizeof *a);
  a->opt_level = 2;
  a->progress_fd = -1;
  bool operands_only = false;
  static const char *const kValued[] = {"--target", "-o", "--output", "--opt-level", "--dump-ir", "--dump-ir-passes",
                                        "--emit-parts", "--progress-fd", "--option", "--format",
                                        "--jobs", "-j", "--sign", "--kernel-cache",
                                        "--tune-records-out", "--tune-records"};
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (!operands_only && strcmp(arg, "--") == 0) {
      operands_only = true;
      continue;
    }
    if (operands_only || arg[0] != '-' || arg[1] == '\0') {
      if (a->model)
        return nimble_cli_usage_error(&nimble_cmd_compile, "expected one model file, got '%s' and '%s'", a->model,
                                      arg);
      a->model = arg;
      continue;
    }
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      *help = true;
      return NIMBLE_EXIT_OK;
    }
    if (strcmp(arg, "-v") == 0 || strcmp(arg, "--verbose") == 0) {
      a->verbose = true;
      continue;
    }
    if (strcmp(arg, "--time-passes") == 0) {
      a->verbose = a->time_passes = true;
      continue;
    }
    if (strcmp(arg, "--no-kernel-cache") == 0) {
      a->no_kernel_cache = true;
      continue;
    }
    /* -jN as well as -j N. */
    if (strncmp(arg, "-j", 2) == 0 && arg[2] >= '0' && arg[2] <= '9') {
      long j;
      if (!parse_int(arg + 2, 1, 256, &j))
        return nimble_cli_usage_error(&nimble_cmd_compile, "-j '%s': expected 1 to 256 threads", arg + 2);
      a->jobs = (int)j;
      continue;
    }
    const char *v = NULL, *opt = NULL;
    bool missing = false;
    for (size_t k = 0; k < sizeof kValued / sizeof kValued[0] && !v && !missing; k++) {
      v = take_value(argc, argv, &i, kValued[k], &missing);
      opt = kValued[k];
    }
    if (missing) return nimble_cli_usage_error(&nimble_cmd_compile, "option %s needs a value", opt);
    if (!v) return nimble_cli_usage_error(&nimble_cmd_compile, "unknown option '%s'", arg);
    if (strcmp(opt, "--target") == 0) {
      a->target = v;
    } else if (strcmp(opt, "-o") == 0 || strcmp(opt, "--output") == 0) {
      if (!*v) return nimble_cli_usage_error(&nimble_cmd_compile, "-o needs a file name");
      a->out = v;
    } else if (strcmp(opt, "--opt-level") == 0) {
      long lv;
      if (!parse_int(v, 0, 3, &lv))
        return nimble_cli_usage_error(&nimble_cmd_compile, "--opt-level '%s': expected 0, 1, 2 or 3", v);
      a->opt_level = (int)lv;
    } else if (strcmp(opt, "--dump-ir") == 0) {
      if (!*v) return nimble_cli_usage_error(&nimble_cmd_compile, "--dump-ir needs a folder");
      a->dump_ir = v;
    } else if (strcmp(opt, "--dump-ir-passes") == 0) {
      if (!*v) return nimble_cli_usage_error(&nimble_cmd_compile, "--dump-ir-passes needs pass names");
      a->dump_ir_passes = v;
    } else if (strcmp(opt, "--emit-parts") == 0) {
      if (!*v) return nimble_cli_usage_error(&nimble_cmd_compile, "--emit-parts needs a folder");
      a->emit_parts = v;
    } else if (strcmp(opt, "--progress-fd") == 0) {
      long fd;
      if (!parse_int(v, 0, INT_MAX, &fd))
        return nimble_cli_usage_error(&nimble_cmd_compile, "--progress-fd '%s': expected a file descriptor number", v);
      if (fcntl((int)fd, F_GETFD) < 0)
        return nimble_cli_usage_error(&nimble_cmd_compile, "--progress-fd %ld: the descriptor is not open", fd);
      a->progress_fd = (int)fd;
    } else if (strcmp(opt, "--format") == 0) {
      if (strcmp(v, "onnx") != 0 && strcmp(v, "nir") != 0)
        return nimble_cli_usage_error(&nimble_cmd_compile, "--format '%s': expected onnx or nir", v);
      a->format = v;
    } else if (strcmp(opt, "--jobs") == 0 || strcmp(opt, "-j") == 0) {
      long j;
      if (!parse_int(v, 1, 256, &j))
        return nimble_cli_usage_error(&nimble_cmd_compile, "%s '%s': expected 1 to 256 threads", opt, v);
      a->jobs = (int)j;
    } else if (strcmp(opt, "--option") == 0) {
      int rc = apply_option(a, v);
      if (rc) return rc;
    } else if (strcmp(opt, "--tune-records") == 0) {
      if (!*v) return nimble_cli_usage_error(&nimble_cmd_compile, "--tune-records needs a file");
      a->tune_records = v;
    } else if (strcmp(opt, "--tune-records-out") == 0) {
      if (!*v) return nimble_cli_usage_error(&nimble_cmd_compile, "--tune-records-out needs a file");
      a->tune_records_out = v;
    } else if (strcmp(opt, "--kernel-cache") == 0) {
      if (!*v) return nimble_cli_usage_error(&nimble_cmd_compile, "--kernel-cache needs a folder");
      a->kernel_cache = v;
    } else if (strcmp(opt, "--sign") == 0) {
#ifdef NIMBLE_CLI_HAVE_SIGN
      if (!*v) return nimble_cli_usage_error(&nimble_cmd_compile, "--sign needs a key file");
      a->sign_key = v;
#else
      return nimble_cli_usage_error(&nimble_cmd_compile, "--sign: this nimble was built without libsodium");
#endif
    }
  }
  if (!a->model) return nimble_cli_usage_error(&nimble_cmd_compile, "no model file given");
  if (!a->out && !a->emit_parts)
    return nimble_cli_usage_error(&nimble_cmd_compile, "no output: give -o FILE.nimble or --emit-parts DIR");
  if (a->dump_ir_passes && !a->dump_ir)
    return nimble_cli_usage_error(&nimble_cmd_compile, "--dump-ir-passes needs --dump-ir DIR");
  if (a->kernel_cache && a->no_kernel_cache)
    return nimble_cli_usage_error(&nimble_cmd_compile, "--kernel-cache and --no-kernel-cache exclude each other");
  if ((a->tune_records_out || a->tune_records) && !a->tune)
    return nimble_cli_usage_error(&nimble_cmd_compile, "%s needs --option tune=true",
                                  a->tune_records ? "--tune-records" : "--tune-records-out");
  if (!a->target) a->target = "x86";
  nimble_target_t t;
  nimble_status_t s = nimble_target_parse_local(a->target, &t);
  if (s) {
    int rc = nimble_cli_usage_error(&nimble_cmd_compile, "--target: %s", nimble_status_message(s));
    nimble_status_free(s);
    return rc;
  }
  return NIMBLE_EXIT_OK;
}

#ifdef NIMBLE_CLI_HAVE_SIGN
/* Writes `size` bytes to `path` through PATH.tmp-PID renamed into place. */
static nimble_status_t write_whole(const char *path, const void *data, size_t size) {
  char tmp[4096];
  int len = snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid());
  if (len < 0 || (size_t)len >= sizeof tmp)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "output path is too long: %.64s...", path);
  FILE *f = fopen(tmp, "wb");
  if (!f) return nimble_status_make(NIMBLE_IO_ERROR, "cannot create %s: %s", tmp, strerror(errno));
  size_t done = fwrite(data, 1, size, f);
  int closed = fclose(f);
  if (done != size || closed != 0) {
    unlink(tmp);
    return nimble_status_make(NIMBLE_IO_ERROR, "cannot write %s", path);
  }
  if (rename(tmp, path) != 0) {
    int err = errno;
    unlink(tmp);
    return nimble_status_make(NIMBLE_IO_ERROR, "cannot rename %s to %s: %s", tmp, path, strerror(err));
  }
  return nimble_ok();
}

/* --sign: the executable with its signature part (docs/executable.md,
 * "Signatures") to -o, and the signature part into --emit-parts' folder. */
static nimble_status_t write_signed(const nimble_compile_result *r, const compile_args *a) {
  void *image = NULL, *out = NULL;
  size_t size = 0, out_size = 0;
  NIMBLE_RETURN_IF_ERROR(nimble_compile_result_serialize(r, &image, &size));
  nimble_status_t s = nimble_ok();
  if (a->out) {
    s = nimble_executable_sign_image(image, size, a->sign_key, &out, &out_size);
    if (!s) s = write_whole(a->out, out, out_size);
    free(out);
    out = NULL;
  }
  if (!s && a->emit_parts) {
    s = nimble_executable_sign_part(image, size, a->sign_key, &out, &out_size);
    char path[4096];
    if (!s && snprintf(path, sizeof path, "%s/signature", a->emit_parts) >= (int)sizeof path)
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--emit-parts folder name is too long");
    if (!s) s = write_whole(path, out, out_size);
    free(out);
  }
  free(image);
  return s ? nimble_status_annotate(s, "--sign %s", a->sign_key) : s;
}
#endif

/* -v: where code generation went; --time-passes: per kernel as well. */
static void print_codegen_stats(const nimble_codegen_stats_t *cs, const char *cache_dir, bool per_kernel) {
  fprintf(stderr, "codegen: %zu CPU kernels (%zu light, %zu sharing another's code) on %d thread%s; kernel cache: ",
          cs->n_kernels, cs->n_light, cs->n_shared, cs->jobs, cs->jobs == 1 ? "" : "s");
  if (cache_dir)
    fprintf(stderr, "%zu hits, %zu misses (%s)\n", cs->hits, cs->misses, cache_dir);
  else
    fprintf(stderr, "off\n");
  if (cs->corrupt) fprintf(stderr, "  %zu corrupt cache entries ignored and rebuilt\n", cs->corrupt);
  if (cs->put_errors) fprintf(stderr, "  %zu objects could not be stored in the cache\n", cs->put_errors);
  fprintf(stderr, "  thread CPU seconds: IR build %.3f, optimise %.3f, isel+emit %.3f, cache %.3f; "
                  "elapsed: compile %.3f, link %.3f%s\n",
          cs->emit_s, cs->opt_s, cs->obj_s, cs->cache_s, cs->compile_s, cs->link_s,
          cs->link_cached ? " (cached)" : "");
  if (!per_kernel || !cs->kernels) return;
  fprintf(stderr, "  %-40s %8s %8s %8s %8s\n", "kernel", "ir", "opt", "emit", "cache");
  for (size_t i = 0; i < cs->n_kernels; i++) {
    const nimble_codegen_kernel_time_t *k = &cs->kernels[i];
    fprintf(stderr, "  %-40.40s %8.4f %8.4f %8.4f %8.4f%s%s%s\n", k->name, k->emit_s, k->opt_s, k->obj_s, k->cache_s,
            k->cached ? " hit" : "", k->light ? " light" : "",
            k->shared == 1 ? " shared" : k->shared == 2 ? " forwarder" : "");
  }
}

static int run_compile(nimble_cli_ctx *ctx, int argc, char **argv) {
  compile_args a;
  bool help = false;
  int rc = parse_args(argc, argv, &a, &help);
  if (rc) return rc;
  if (help) {
    nimble_cli_print_command_help(&nimble_cmd_compile, stdout);
    return NIMBLE_EXIT_OK;
  }
  if (a.dump_ir && mkdir(a.dump_ir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "nimble: cannot create %s: %s\n", a.dump_ir, strerror(errno));
    return NIMBLE_EXIT_FAILURE;
  }
  progress_sink sink = {.fd = a.progress_fd, .phase = "setup"};
  if (a.progress_fd >= 0) signal(SIGPIPE, SIG_IGN);
  if (nimble_cli_progress_mode_for(stderr, false) == NIMBLE_CLI_PROGRESS_TTY) {
    if (nimble_cli_progress_create(stderr, NIMBLE_CLI_PROGRESS_TTY, 0, &sink.tty) == NULL) {
      nimble_status_t s = nimble_cli_progress_add(sink.tty, a.target, &sink.tty_index);
      if (s) {
        nimble_status_free(s);
        nimble_cli_progress_destroy(sink.tty);
        sink.tty = NULL;
      }
    } else {
      sink.tty = NULL;
    }
  }

  /* The local kernel cache, unless turned off; one that cannot be opened
   * only costs speed, so the compile goes on without it (said with -v). */
  nimble_kernel_cache_t *cache = NULL;
  char cache_dir[4096] = "";
  if (!a.no_kernel_cache) {
    nimble_status_t cs = nimble_ok();
    if (a.kernel_cache) {
      if (snprintf(cache_dir, sizeof cache_dir, "%s", a.kernel_cache) >= (int)sizeof cache_dir)
        cs = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--kernel-cache: folder name too long");
    } else {
      cs = nimble_kernel_cache_default_dir(cache_dir, sizeof cache_dir);
    }
    if (!cs) cs = nimble_kernel_cache_open_local(cache_dir, &cache);
    if (cs && a.verbose) fprintf(stderr, "nimble: no kernel cache: %s\n", nimble_status_message(cs));
    nimble_status_free(cs);
  }

  nimble_compile_options_t o;
  nimble_compile_options_init(&o);
  o.jobs = a.jobs;
  o.kernel_cache = cache;
  o.target = a.target;
  o.format = a.format;
  o.opt_level = a.opt_level;
  o.dump_ir_dir = a.dump_ir;
  o.dump_ir_passes = a.dump_ir_passes;
  o.progress = on_progress;
  o.progress_user = &sink;
  o.codegen_progress = on_codegen_progress;
  nimble_compile_result *r = NULL;
  nimble_status_t s = nimble_ok();
  nimble_tune_record_t *given = NULL;
  size_t ngiven = 0;
  nimble_tune_report_t tr;
  memset(&tr, 0, sizeof tr);
  if (a.tune) {
    if (a.tune_records) s = nimble_tune_records_read_file(a.tune_records, &given, &ngiven);
    o.tune_records = given;
    o.num_tune_records = ngiven;
    nimble_tune_options_t to = {.budget_s = (double)a.tune_budget_s,
                                .threads = (uint32_t)a.tune_threads,
                                .inputs = a.tune_inputs,
                                .progress = on_tune_progress};
    if (!s) s = nimble_compile_tune(a.model, &o, &to, &tr, &r);
    if (!s && a.tune_records_out) s = nimble_tune_records_write_file(a.tune_records_out, tr.records, tr.num_records);
  } else {
    s = nimble_compile_file(a.model, &o, &r);
  }
  if (!s) {
    report_new_entries(&sink, nimble_compile_result_codegen_stats(r));
    sink.phase = "package";
    on_progress(&sink, "package", 0);
    if (a.emit_parts) s = nimble_compile_result_emit_parts(r, a.emit_parts);
#ifdef NIMBLE_CLI_HAVE_SIGN
    if (!s && a.sign_key) s = write_signed(r, &a);
    else
#endif
    if (!s && a.out) s = nimble_compile_result_write_file(r, a.out);
    if (!s) on_progress(&sink, "package", 100);
  }
  if (sink.tty) {
    nimble_status_free(nimble_cli_progress_update(sink.tty, sink.tty_index, s ? "failed" : "done", s ? -1 : 100,
                                                  s ? sink.phase : NULL));
    nimble_cli_progress_destroy(sink.tty);
  }
  if (s) {
    /* The model's own faults (unreadable, unparsable, ill-typed) are input
     * errors; anything later is the compile failing. */
    bool input = strcmp(sink.phase, "import") == 0 || strcmp(sink.phase, "typing") == 0 ||
                 (strcmp(sink.phase, "setup") == 0 && nimble_status_code(s) != NIMBLE_UNIMPLEMENTED);
    nimble_cli_report(s);
    free(tr.records);
    free(given);
    nimble_compile_result_destroy(r);
    nimble_kernel_cache_destroy(cache);
    return input ? NIMBLE_EXIT_INPUT : NIMBLE_EXIT_FAILURE;
  }
  if (a.verbose) {
    char spec[NIMBLE_TARGET_SPEC_MAX + 1];
    nimble_target_format(nimble_compile_result_target(r), spec);
    fprintf(stderr, "compiled %s for %s: %zu kernels\n", a.model, spec, nimble_compile_result_num_kernels(r));
    double total = 0;
    for (size_t i = 0; i < nimble_compile_result_num_phases(r); i++) {
      const nimble_compile_phase_time_t *t = nimble_compile_result_phase_at(r, i);
      fprintf(stderr, "  %-8s %8.3f s\n", t->phase, t->seconds);
      total += t->seconds;
    }
    fprintf(stderr, "  %-8s %8.3f s\n", "total", total);
    const nimble_codegen_stats_t *cs = nimble_compile_result_codegen_stats(r);
    if (cs) print_codegen_stats(cs, cache ? cache_dir : NULL, a.time_passes);
  }
  if (a.tune) print_tune_report(&tr, a.verbose);
  free(tr.records);
  free(given);
  nimble_compile_result_destroy(r);
  nimble_kernel_cache_destroy(cache);
  return NIMBLE_EXIT_OK;
}

const nimble_cli_command nimble_cmd_compile = {
    "compile",
    "Compile a model (.onnx) or program (.nir) into an executable, locally.",
    "compile MODEL --target=SPEC -o OUT.nimble [--opt-level N] [-v] [--time-passes]\n"
    "       [--dump-ir DIR [--dump-ir-passes NAMES]] [-j N] [--kernel-cache DIR | --no-kernel-cache]\n"
    "       [--emit-parts DIR] [--progress-fd N] [--format onnx|nir] [--option KEY=VALUE]\n"
    "       [--sign KEYFILE] [--tune-records F] [--tune-records-out F]",
    "Runs the whole compiler on this machine: import, type inference, the\n"
    "optimisation passes, lowering to VM bytecode, one kernel per fused\n"
    "primitive, code generation with LLVM and linking with the target's GNU\n"
    "ld (x86_64-linux-gnu-ld.bfd, aarch64-linux-gnu-ld.bfd; ld.lld-16 where\n"
    "that is missing), then writes one .nimble file that nimble-run and the\n"
    "runtime load.\n"
    "\n"
    "Options:\n"
    "  --target SPEC      what to compile for (default x86): x86[:cpu=C,features=F],\n"
    "                     aarch64[:cpu=C,...] or cuda[:arch=sm_XX] (x86_64 host\n"
    "                     code plus PTX for the GPU, default sm_80, which newer\n"
    "                     drivers JIT for their GPU). The default CPUs give\n"
    "                     portable artifacts (x86-64-v3: AVX2/FMA; aarch64\n"
    "                     generic with NEON). cpu=native builds for this\n"
    "                     machine's CPU and all its features: the artifact may\n"
    "                     not run elsewhere, and the farm refuses it.\n"
    "  -o FILE            the executable to write (.nimble)\n"
    "  --opt-level N      0 to 3 (default 2): 0 runs only what lowering needs,\n"
    "                     1 adds folding and clean-ups, 2 fuses operators and\n"
    "                     plans memory; LLVM optimises at the same level\n"
    "  --dump-ir DIR      write the IR after import and after each pass to\n"
    "                     DIR/NN-PASS.nir\n"
    "  --dump-ir-passes NAMES  only these (comma-separated: import, fuse_ops,\n"
    "                     ...; NN as in a full dump). Constants print in full:\n"
    "                     on a big model, one pass is much faster than all\n"
    "  -v, --verbose      print the time spent in each phase, and code\n"
    "                     generation's threads, kernel cache hits and misses and\n"
    "                     seconds per LLVM phase\n"
    "  --time-passes      -v, and the seconds per kernel and LLVM phase\n"
    "  -j, --jobs N       compile the CPU kernels on N threads (default: the CPUs\n"
    "                     this process may use); the output is the same bytes\n"
    "                     whatever N is\n"
    "  --no-kernel-cache  build every kernel with LLVM; by default compiled\n"
    "                     kernels are kept in and reused from $NIMBLE_KERNEL_CACHE,\n"
    "                     else $XDG_CACHE_HOME/nimble/kernels, else\n"
    "                     ~/.cache/nimble/kernels\n"
    "  --kernel-cache DIR keep and reuse compiled kernels in DIR instead\n"
    "  --format F         onnx or nir (default: from the file's extension)\n"
    "  --emit-parts DIR   write the artifact's parts (metadata, bytecode,\n"
    "                     constants, kernels, kernels-cuda), config.json and\n"
    "                     parts.json into DIR, as the compile worker expects\n"
    "  --progress-fd N    write 'PHASE PERCENT' lines to descriptor N (code\n"
    "                     generation's with 'DONE/TOTAL CACHED' kernels after\n"
    "                     them), then 'kcache-new KEY' for each kernel built\n"
    "                     and stored in the kernel cache\n"
    "  --sign KEYFILE     sign the executable with the Ed25519 secret key in\n"
    "                     KEYFILE (`nimble keys generate`): a signature part\n"
    "                     that `nimble-run --require-signature` checks against\n"
    "                     its trusted keys (with --emit-parts: DIR/signature)\n"
    "  --option K=V       a farm job option: opt_level=0..3 (as --opt-level);\n"
    "                     tune=true|false: measure each CPU kernel's schedule\n"
    "                     points on this machine and build with the fastest\n"
    "                     (docs/tuning.md; the target must run here; results\n"
    "                     are the same, only speed changes); tune_budget_s=N\n"
    "                     (default 60), tune_threads=N (default: the CPUs this\n"
    "                     process may use), tune_inputs=NAME=DIMS[;NAME=DIMS]\n"
    "                     (the shapes measured at; symbolic dims not given: 1;\n"
    "                     up to 4 sizes separated by '|', each kernel's\n"
    "                     schedule the best over all of them, or one per\n"
    "                     range of its output's size where their best ones\n"
    "                     differ)\n"
    "  --tune-records F   with tune=true: records to reuse (kernels with one for\n"
    "                     this target and CPU are not measured again)\n"
    "  --tune-records-out F  with tune=true: write the records this compile\n"
    "                     measured (nimble.tune-records.v1 JSON)\n"
    "\n"
    "On a terminal a progress line shows the current phase.\n"
    "Exit status: 0 success, 1 the compile failed (an operator or shape\n"
    "the compiler does not cover yet, a code generation or write error),\n"
    "2 usage error, 3 the model could not be read, parsed, imported or typed\n"
    "(or the --tune-records file could not be read or holds a bad record).\n",
    run_compile,
};
