/* nimble_compile_file: the phases in order, each timed and reported, each
 * error annotated with the phase and the model file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "compile_kernels.h"
#include "nimble/arena.h"
#include "nimble/nir.h"
#include "nimble/passes.h"
#include "nimble/typing.h"
#ifdef NIMBLE_DRIVER_HAVE_ONNX
#include "nimble/onnx_import.h"
#endif

#ifndef NIMBLE_VERSION_STRING
#define NIMBLE_VERSION_STRING "unknown"
#endif

/* Models are read whole (for the digest and the text frontend); this bounds
 * what a bad path (a huge file, /dev/zero) can make us allocate. */
#define MAX_MODEL_BYTES ((size_t)4 << 30)

void nimble_compile_options_init(nimble_compile_options_t *options) {
  memset(options, 0, sizeof *options);
  options->opt_level = 2;
}

double nimble_compile_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void nimble_compile_phase_begin(nimble_compile_phase_clock *c, const char *phase) {
  c->phase = phase;
  c->t0 = nimble_compile_now();
  if (c->o->progress) c->o->progress(c->o->progress_user, phase, 0);
}

void nimble_compile_phase_progress(nimble_compile_phase_clock *c, int percent) {
  if (c->o->progress) c->o->progress(c->o->progress_user, c->phase, percent);
}

void nimble_compile_phase_end(nimble_compile_phase_clock *c) {
  nimble_compile_result *r = c->r;
  if (r->num_phases < NIMBLE_COMPILE_MAX_PHASES) {
    r->phases[r->num_phases].phase = c->phase;
    r->phases[r->num_phases].seconds = nimble_compile_now() - c->t0;
    r->num_phases++;
  }
  if (c->o->progress) c->o->progress(c->o->progress_user, c->phase, 100);
}

typedef struct pipeline {
  const char *path;
  const nimble_compile_options_t *o;
  nimble_compile_result *r;
  nimble_compile_phase_clock clock;
  int dump_seq;
  char dumped[1024]; /* the names dump_module saw, for an error naming them */
} pipeline;

static void phase_begin(pipeline *p, const char *phase) { nimble_compile_phase_begin(&p->clock, phase); }
static void phase_end(pipeline *p) { nimble_compile_phase_end(&p->clock); }

static nimble_status_t read_file(const char *path, char **data, size_t *size) {
  *data = NULL;
  *size = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return nimble_status_make(err == ENOENT ? NIMBLE_NOT_FOUND : NIMBLE_IO_ERROR, "cannot open %s: %s",
                              path, strerror(err));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return nimble_status_make(NIMBLE_IO_ERROR, "cannot stat %s: %s", path, strerror(err));
  }
  if (S_ISDIR(st.st_mode) || !S_ISREG(st.st_mode)) {
    close(fd);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s is %s, not a model file", path,
                              S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
  }
  if (st.st_size < 0 || (uint64_t)st.st_size > MAX_MODEL_BYTES) {
    close(fd);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s: %lld bytes is more than the %zu a model may have",
                              path, (long long)st.st_size, MAX_MODEL_BYTES);
  }
  size_t n = (size_t)st.st_size;
  char *buf = malloc(n + 1);
  if (!buf) {
    close(fd);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s: out of memory reading %zu bytes", path, n);
  }
  size_t done = 0;
  while (done < n) {
    ssize_t got = read(fd, buf + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      int err = got < 0 ? errno : 0;
      free(buf);
      close(fd);
      return nimble_status_make(NIMBLE_IO_ERROR, "%s: read failed at byte %zu: %s", path, done,
                                err ? strerror(err) : "the file shrank");
    }
    done += (size_t)got;
  }
  close(fd);
  buf[n] = '\0';
  *data = buf;
  *size = n;
  return nimble_ok();
}

static bool has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

static nimble_status_t pick_format(const char *path, const char *format, const char **out) {
  if (format) {
    if (strcmp(format, "onnx") != 0 && strcmp(format, "nir") != 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "unknown model format '%s' (expected onnx or nir)",
                                format);
    *out = format;
    return nimble_ok();
  }
  if (has_suffix(path, ".onnx")) *out = "onnx";
  else if (has_suffix(path, ".nir")) *out = "nir";
  else
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s: unknown model format (expected a .onnx model or a .nir program)", path);
  return nimble_ok();
}

/* The comma-separated name at *c: its length; *c moves past it (NULL after
 * the last). */
static size_t next_name(const char **c, const char **name) {
  const char *end = strchr(*c, ',');
  size_t len = end ? (size_t)(end - *c) : strlen(*c);
  *name = *c;
  *c = end ? end + 1 : NULL;
  return len;
}

/* Whether the first n bytes of NAME are one of LIST's comma-separated names. */
static bool in_list(const char *list, const char *name, size_t n) {
  for (const char *c = list, *item; c;)
    if (next_name(&c, &item) == n && strncmp(item, name, n) == 0) return true;
  return false;
}

static bool dump_all(const nimble_compile_options_t *o) { return !o->dump_ir_passes || !*o->dump_ir_passes; }

/* The passes' dump hook: one file per pass, numbered in pipeline order
 * (the numbers of a full dump, whatever dump_ir_passes leaves out). Big
 * models print millions of constants a pass: a filter is much faster. */
static nimble_status_t dump_module(pipeline *p, const char *name, const nimble_module *m) {
  if (!p->o->dump_ir_dir) return nimble_ok();
  int seq = p->dump_seq++;
  if (!dump_all(p->o)) {
    size_t used = strlen(p->dumped), n = strlen(name);
    if (!in_list(p->dumped, name, n))
      snprintf(p->dumped + used, sizeof p->dumped - used, "%s%s", used ? "," : "", name);
    if (!in_list(p->o->dump_ir_passes, name, n)) return nimble_ok();
  }
  char *text = NULL;
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_ir_print_module(m, &text), "printing the IR after %s", name);
  char path[4096];
  int len = snprintf(path, sizeof path, "%s/%02d-%s.nir", p->o->dump_ir_dir, seq, name);
  if (len < 0 || (size_t)len >= sizeof path) {
    free(text);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--dump-ir folder name is too long");
  }
  FILE *f = fopen(path, "w");
  if (!f) {
    int err = errno;
    free(text);
    return nimble_status_make(NIMBLE_IO_ERROR, "cannot write %s: %s", path, strerror(err));
  }
  size_t n = strlen(text);
  bool ok = fwrite(text, 1, n, f) == n;
  ok = (fclose(f) == 0) && ok;
  free(text);
  if (!ok) return nimble_status_make(NIMBLE_IO_ERROR, "cannot write %s", path);
  return nimble_ok();
}

static nimble_status_t dump_hook(void *user, const char *pass_name, const nimble_module *m) {
  return dump_module(user, pass_name, m);
}

#ifdef NIMBLE_DRIVER_HAVE_ONNX
/* Imports an ONNX model from its bytes and keeps the graph's output names
 * (arena copies): they name the entry's outputs in the executable. */
static nimble_status_t import_onnx(const char *path, const char *bytes, size_t size, nimble_arena *arena,
                                   nimble_module **m, const char ***names, size_t *num_names) {
  nimble_onnx_model *model = NULL;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_model_load_memory(bytes, size, path, &model));
  nimble_status_t s = nimble_onnx_import_model(arena, model, NULL, m);
  if (s) s = nimble_status_annotate(s, "while importing %s", path);
  const nimble_onnx_graph *g = nimble_onnx_model_graph(model);
  if (!s && g->n_outputs) {
    *names = nimble_arena_calloc(arena, g->n_outputs, sizeof **names);
    for (size_t i = 0; *names && i < g->n_outputs; i++) {
      (*names)[i] = nimble_arena_strdup(arena, g->outputs[i]->name ? g->outputs[i]->name : "");
      if (!(*names)[i]) *names = NULL;
    }
    if (!*names) s = NIMBLE_OOM();
    *num_names = g->n_outputs;
  }
  nimble_onnx_model_destroy(model);
  return s;
}
#endif

static nimble_status_t run(pipeline *p, nimble_arena *arena) {
  const nimble_compile_options_t *o = p->o;
  nimble_compile_result *r = p->r;

  /* Target first: a bad spec should not cost an import. */
  NIMBLE_RETURN_IF_ERROR(nimble_target_parse_local(o->target ? o->target : "x86", &r->target));
  nimble_target_format(&r->target, r->target_spec);
  if (o->opt_level < 0 || o->opt_level > 3)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "opt level %d is out of range (0 to 3)", o->opt_level);
  const char *format;
  NIMBLE_RETURN_IF_ERROR(pick_format(p->path, o->format, &format));

  phase_begin(p, "import");
  char *bytes = NULL;
  size_t size = 0;
  NIMBLE_RETURN_IF_ERROR(read_file(p->path, &bytes, &size));
  nimble_digest_compute(bytes, size, &r->model_digest);
  nimble_module *m = NULL;
  const char **output_names = NULL; /* the ONNX graph's, for the entry's signature */
  size_t num_output_names = 0;
  nimble_status_t s;
  if (strcmp(format, "nir") == 0) {
    s = nimble_nir_parse(arena, p->path, bytes, size, &m);
  } else {
#ifdef NIMBLE_DRIVER_HAVE_ONNX
    s = import_onnx(p->path, bytes, size, arena, &m, &output_names, &num_output_names);
#else
    s = nimble_status_make(NIMBLE_UNIMPLEMENTED, "%s: this build has no ONNX importer (NIMBLE_WITH_ONNX=OFF)",
                           p->path);
#endif
  }
  free(bytes);
  NIMBLE_RETURN_IF_ERROR(s);
  NIMBLE_RETURN_IF_ERROR(dump_module(p, "import", m));
  phase_end(p);

  phase_begin(p, "typing");
  nimble_typing *typing = NULL;
  NIMBLE_RETURN_IF_ERROR(nimble_typing_infer_module(m, &typing));
  phase_end(p);

  phase_begin(p, "passes");
  /* cuda: place_devices decides which invokes run on the GPU. */
  NIMBLE_RETURN_IF_ERROR(nimble_passes_run_for_target(m, o->opt_level, false, r->target.kind == NIMBLE_TARGET_CUDA,
                                                      o->dump_ir_dir ? dump_hook : NULL, p));
  phase_end(p);
  /* A name to dump that no pass has is a typo: say which names there are. */
  for (const char *c = o->dump_ir_dir && !dump_all(o) ? o->dump_ir_passes : NULL, *name; c;) {
    size_t len = next_name(&c, &name);
    if (!in_list(p->dumped, name, len))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--dump-ir: no pass is named '%.*s' (the names: %s)",
                                (int)len, name, p->dumped);
  }

  phase_begin(p, "lower");
  /* The executable's target: the host triple, plus "+<device triple>" for
   * a target with a device ("x86_64-linux-gnu+nvptx64-nvidia-cuda";
   * docs/executable.md). */
  char exe_target[128];
  const char *device_triple = nimble_target_device_triple(&r->target);
  snprintf(exe_target, sizeof exe_target, "%s%s%s", nimble_target_host_triple(&r->target),
           device_triple ? "+" : "", device_triple ? device_triple : "");
  NIMBLE_RETURN_IF_ERROR(nimble_builder_create(exe_target, &r->builder));
  char producer[64];
  snprintf(producer, sizeof producer, "nimble %s", r->compiler_version);
  NIMBLE_RETURN_IF_ERROR(nimble_builder_set_producer(r->builder, producer));
  char digest[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&r->model_digest, digest);
  NIMBLE_RETURN_IF_ERROR(nimble_builder_set_source_digest(r->builder, digest));
  const nimble_lower_result *lr = NULL;
  nimble_lower_options_t lower_options;
  nimble_lower_options_init(&lower_options);
  lower_options.output_names = output_names;
  lower_options.num_output_names = num_output_names;
  lower_options.borrow_constants = true; /* r->arena outlives r->builder */
  NIMBLE_RETURN_IF_ERROR(nimble_lower_module(m, &lower_options, r->builder, &lr));
  phase_end(p);

  /* compute, codegen (with link) report their own phases. */
  NIMBLE_RETURN_IF_ERROR(nimble_compile_kernels(m, lr, &p->clock));
  return nimble_ok();
}

nimble_status_t nimble_compile_file(const char *path, const nimble_compile_options_t *options,
                                    nimble_compile_result **out) {
  if (!path || !out) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "nimble_compile_file: NULL argument");
  *out = NULL;
  nimble_compile_options_t defaults;
  nimble_compile_options_init(&defaults);
  const nimble_compile_options_t *o = options ? options : &defaults;
  nimble_compile_result *r = calloc(1, sizeof *r);
  if (!r) return NIMBLE_OOM();
  r->compiler_version = strdup(o->compiler_version ? o->compiler_version : NIMBLE_VERSION_STRING);
  nimble_arena *arena = NULL;
  nimble_status_t s = r->compiler_version ? nimble_arena_create(&arena)
                                          : NIMBLE_OOM();
  pipeline p = {.path = path, .o = o, .r = r, .clock = {.o = o, .r = r, .phase = "setup"}};
  if (!s) s = run(&p, arena);
  r->arena = arena;
  if (s) {
    nimble_compile_result_destroy(r);
    /* "unsupported" tells a user (and the node-suite runner) that the
     * compiler does not cover this yet, rather than that it broke. */
    return nimble_status_annotate(s, "compiling %s (%s%s)", path, p.clock.phase,
                                  nimble_status_code(s) == NIMBLE_UNIMPLEMENTED ? ", unsupported" : "");
  }
  *out = r;
  return nimble_ok();
}

void nimble_compile_result_destroy(nimble_compile_result *r) {
  if (!r) return;
  nimble_builder_destroy(r->builder);
  nimble_arena_destroy(r->arena); /* after the builder, which borrows from it */
  free(r->compiler_version);
  free(r->codegen_stats.kernels);
  free(r->workloads);
  free(r);
}

const nimble_target_t *nimble_compile_result_target(const nimble_compile_result *r) { return &r->target; }
const nimble_digest_t *nimble_compile_result_model_digest(const nimble_compile_result *r) {
  return &r->model_digest;
}
size_t nimble_compile_result_num_kernels(const nimble_compile_result *r) { return r->num_kernels; }
size_t nimble_compile_result_num_phases(const nimble_compile_result *r) { return r->num_phases; }
size_t nimble_compile_result_num_workloads(const nimble_compile_result *r) { return r->num_workloads; }
const nimble_compile_workload_t *nimble_compile_result_workload_at(const nimble_compile_result *r, size_t i) {
  return i < r->num_workloads ? &r->workloads[i] : NULL;
}
void nimble_compile_host_cpu_key(char *buf, size_t size) { nimble_codegen_host_cpu_key(buf, size); }
const struct nimble_codegen_stats *nimble_compile_result_codegen_stats(const nimble_compile_result *r) {
  return r->has_codegen_stats ? &r->codegen_stats : NULL;
}
const nimble_compile_phase_time_t *nimble_compile_result_phase_at(const nimble_compile_result *r, size_t i) {
  return i < r->num_phases ? &r->phases[i] : NULL;
}
