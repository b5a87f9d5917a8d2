/* `nimble compile` end to end: the binary run as a user and as the compile
 * worker would run it, its outputs loaded by the runtime and checked
 * against references computed here by hand, and its errors. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver_test_util.h"
#include "nimble/artifact_config.h"
#include "nimble/digest.h"
#include "nimble/kernel_abi.h"
#include "nimble/tensor_io.h"
#include "nimble_test.h"

static char g_tmp[256];

static char *path_in(const char *base, const char *rel) {
  char *p = NULL;
  ck_assert_int_ge(asprintf(&p, "%s/%s", base, rel), 0);
  return p;
}

static char *source_path(const char *rel) {
  const char *src = getenv("NIMBLE_SOURCE_DIR");
  ck_assert_ptr_nonnull(src);
  return path_in(src, rel);
}

static char *read_text(const char *path, size_t *len) {
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
  if (len) *len = (size_t)n;
  return buf;
}

/* Runs argv[0] (a path) with stdout to /dev/null, stderr captured into
 * *err (caller frees) and, when progress_path is set, fd 3 writing to that
 * file. Returns the exit status (-signal when killed). */
static int run_prog(char *const argv[], char **err, const char *progress_path) {
  char *err_path = path_in(g_tmp, "stderr.txt");
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int o = open("/dev/null", O_WRONLY);
    if (e < 0 || o < 0) _exit(120);
    dup2(o, 1);
    dup2(e, 2);
    if (progress_path) {
      int p = open(progress_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (p < 0 || dup2(p, 3) < 0) _exit(121);
    }
    execv(argv[0], argv);
    _exit(122);
  }
  int st = 0;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  *err = read_text(err_path, NULL);
  free(err_path);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

static char *nimble_bin(void) {
  const char *b = getenv("NIMBLE_BUILD_DIR");
  ck_assert_ptr_nonnull(b);
  return path_in(b, "client/nimble");
}

/* nimble ARGS... (NULL-terminated), expecting exit status `want`. */
static char *nimble_expect(int want, const char *progress, ...) {
  char *argv[32];
  int n = 0;
  argv[n++] = nimble_bin();
  va_list ap;
  va_start(ap, progress);
  const char *a;
  while ((a = va_arg(ap, const char *)) && n < 31) argv[n++] = (char *)a;
  va_end(ap);
  argv[n] = NULL;
  char *err = NULL;
  int rc = run_prog(argv, &err, progress);
  ck_assert_msg(rc == want, "nimble %s %s: exit %d, expected %d; stderr:\n%s", argv[1], argv[2] ? argv[2] : "", rc,
                want, err);
  free(argv[0]);
  return err;
}

static void setup(void) {
  snprintf(g_tmp, sizeof g_tmp, "/tmp/nimble-driver-test-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(g_tmp));
}

static void teardown(void) {
  char cmd[320];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
  ck_assert_int_eq(system(cmd), 0);
}

/* ---- dense_bias_relu.nir: relu(x @ w + b), b = {1, -2, 0.5} ---------------- */

static void check_dense_bias_relu(nimble_executable *exe) {
  enum { N = 5 };
  float x[N * 4], w[4 * 3], want[N * 3];
  for (int i = 0; i < N * 4; i++) x[i] = (float)((i * 7) % 11) * 0.25f - 1.0f;
  for (int i = 0; i < 12; i++) w[i] = (float)((i * 5) % 7) * 0.5f - 1.5f;
  const float b[3] = {1.0f, -2.0f, 0.5f};
  for (int r = 0; r < N; r++)
    for (int c = 0; c < 3; c++) {
      float acc = b[c];
      for (int k = 0; k < 4; k++) acc += x[r * 4 + k] * w[k * 3 + c];
      want[r * 3 + c] = acc > 0 ? acc : 0;
    }
  int64_t xs[2] = {N, 4}, ws[2] = {4, 3};
  DLTensor tx = {.data = x, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = xs};
  DLTensor tw = {.data = w, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = ws};
  nimble_vm *vm = NULL;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &tx));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &tw));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *y = NULL;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &y));
  ck_assert_int_eq(y->dl_tensor.ndim, 2);
  ck_assert_int_eq(y->dl_tensor.shape[0], N);
  ck_assert_int_eq(y->dl_tensor.shape[1], 3);
  const float *got = (const float *)((char *)y->dl_tensor.data + y->dl_tensor.byte_offset);
  int positives = 0;
  for (int i = 0; i < N * 3; i++) {
    ck_assert_msg(fabsf(got[i] - want[i]) <= 1e-5f, "y[%d] = %g, expected %g", i, got[i], want[i]);
    positives += want[i] > 0;
  }
  ck_assert_int_gt(positives, 0); /* the check is not all zeros */
  y->deleter(y);
  nimble_vm_destroy(vm);
}

START_TEST(test_a_nir_program_compiles_to_a_file_the_runtime_runs) {
  char *src = source_path("tests/compiler/driver/programs/dense_bias_relu.nir");
  char *out = path_in(g_tmp, "dense.nimble");
  free(nimble_expect(0, NULL, "compile", src, "--target=x86", "-o", out, NULL));
  nimble_executable *exe = NULL;
  NIMBLE_ASSERT_OK(nimble_executable_load_file(out, &exe));
  ck_assert_str_eq(nimble_executable_target(exe), "x86_64-linux-gnu");
  /* The source digest is the program's sha256. */
  size_t len;
  char *text = read_text(src, &len);
  nimble_digest_t d;
  nimble_digest_compute(text, len, &d);
  char ds[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&d, ds);
  ck_assert_str_eq(nimble_executable_source_digest(exe), ds);
  check_dense_bias_relu(exe);
  nimble_executable_release(exe);
  free(text);
  free(src);
  free(out);
}
END_TEST

static float run_branch(nimble_executable *exe, float t, float *x, int n, float *out) {
  int64_t xs[1] = {n};
  DLTensor tx = {.data = x, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = xs};
  DLTensor tt = {.data = &t, .device = {kDLCPU, 0}, .ndim = 0, .dtype = {kDLFloat, 32, 1}, .shape = NULL};
  nimble_vm *vm = NULL;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &tx));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &tt));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *y = NULL;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &y));
  ck_assert_int_eq(y->dl_tensor.ndim, 1);
  ck_assert_int_eq(y->dl_tensor.shape[0], n);
  memcpy(out, (char *)y->dl_tensor.data + y->dl_tensor.byte_offset, (size_t)n * sizeof(float));
  y->deleter(y);
  nimble_vm_destroy(vm);
  return 0;
}

START_TEST(test_a_nir_program_with_control_flow_takes_both_branches) {
  char *src = source_path("tests/compiler/driver/programs/branch.nir");
  nimble_executable *exe = NULL;
  NIMBLE_ASSERT_OK(dt_compile_and_load(src, "x86", &exe));
  float x[6] = {1, -2, 3.5f, 0, -0.25f, 8}, y[6];
  run_branch(exe, 2.0f, x, 6, y);
  for (int i = 0; i < 6; i++) ck_assert_float_eq(y[i], x[i] * 2.0f);
  run_branch(exe, -1.0f, x, 6, y);
  for (int i = 0; i < 6; i++) ck_assert_float_eq(y[i], -x[i]);
  nimble_executable_release(exe);
  free(src);
}
END_TEST

/* `nimble inspect m.nimble` disassembles, also an artifact for another
 * target (its kernels are not loaded). */
START_TEST(test_inspect_disassembles_an_executable_of_any_target) {
  char *src = source_path("tests/compiler/driver/programs/branch.nir");
  char *out = path_in(g_tmp, "branch-a64.nimble");
  free(nimble_expect(0, NULL, "compile", src, "--target=aarch64", "-o", out, NULL));
  char *bin = nimble_bin(), *cmd = NULL;
  ck_assert_int_ge(asprintf(&cmd, "'%s' inspect '%s'", bin, out), 0);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  char text[65536];
  size_t n = fread(text, 1, sizeof text - 1, p);
  text[n] = 0;
  ck_assert_int_eq(pclose(p), 0);
  ck_assert_msg(strncmp(text, "target aarch64-linux-gnu, format version 2, ", 44) == 0, "%s", text);
  ck_assert_msg(strstr(text, "\nentry main -> @main\n") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "\nkernel #0 cpu ") != NULL, "%s", text);
  /* the program's if: a conditional jump with both targets spelled out */
  ck_assert_msg(strstr(text, "  If             test=r") != NULL && strstr(text, " (pc ") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "  InvokePacked   kernel=#") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "  Ret            src=r") != NULL, "%s", text);
  /* --json is for models */
  free(nimble_expect(2, NULL, "inspect", "--json", out, NULL));
  free(cmd);
  free(bin);
  free(out);
  free(src);
}
END_TEST

/* ---- the worker's contract: --emit-parts DIR --progress-fd 3 -------------- */

/* The progress contract (docs/farm.md §4): "PHASE PERCENT" lines, code
 * generation's with "DONE/TOTAL CACHED" kernels (DONE counting up to
 * TOTAL), then one "kcache-new KEY" per kernel built and stored, each an
 * entry of the kernel cache folder, as many as the kernels not found in
 * the cache. */
static void check_progress(const char *path) {
  char *text = read_text(path, NULL);
  int lines = 0, new_entries = 0;
  long last_done = 0, total = -1, cached = -1;
  bool codegen_done = false;
  const char *last = NULL;
  const char *cache_dir = getenv("NIMBLE_KERNEL_CACHE");
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char phase[40], key[80];
    int pct = -1, used = 0;
    long done = -1, tot = -1, hits = -1;
    if (sscanf(line, "kcache-new %79[0-9a-f]%n", key, &used) == 1 && line[used] == '\0') {
      ck_assert_msg(strlen(key) == 64, "progress line '%s': not a 64-digit key", line);
      if (cache_dir && *cache_dir) {
        char entry[4300];
        snprintf(entry, sizeof entry, "%s/%.2s/%s", cache_dir, key, key);
        ck_assert_msg(access(entry, R_OK) == 0, "kcache-new %s: no %s", key, entry);
      }
      new_entries++;
      last = line;
      continue;
    }
    if (sscanf(line, "codegen %d %ld/%ld %ld%n", &pct, &done, &tot, &hits, &used) == 4 && line[used] == '\0') {
      ck_assert_msg(done == last_done + 1 && hits <= done && done <= tot, "progress line '%s' after %ld done",
                    line, last_done);
      ck_assert_msg(pct == (done * 100 / tot > 99 ? 99 : done * 100 / tot), "progress line '%s': percent", line);
      last_done = done;
      total = tot;
      cached = hits;
      lines++;
      last = line;
      continue;
    }
    ck_assert_msg(sscanf(line, "%32[a-z0-9_-] %d%n", phase, &pct, &used) == 2 && line[used] == '\0',
                  "progress line '%s' is not 'PHASE PERCENT'", line);
    ck_assert_msg(pct >= 0 && pct <= 100, "progress line '%s': percent out of range", line);
    if (strcmp(phase, "codegen") == 0 && pct == 100) codegen_done = true;
    last = line;
    lines++;
  }
  ck_assert_int_ge(lines, 10);
  ck_assert_msg(codegen_done, "no 'codegen 100' line");
  ck_assert_msg(total > 0 && last_done == total, "code generation's kernels ended at %ld of %ld", last_done, total);
  ck_assert_int_eq(new_entries, total - cached);
  ck_assert_str_eq(last, "package 100");
  free(text);
}

static void *load_part_file(const char *dir, const char *file, size_t *size) { 
  char *p = path_in(dir, file);
  void *d = read_text(p, size);
  free(p);
  return d;
}

START_TEST(test_emit_parts_writes_the_worker_contract_files_and_the_parts_load) {
  char *src = source_path("tests/compiler/driver/programs/dense_bias_relu.nir");
  char *dir = path_in(g_tmp, "parts");
  char *progress = path_in(g_tmp, "progress.txt");
  free(nimble_expect(0, progress, "compile", src, "--target=x86", "--format=nir", "--emit-parts", dir,
                     "--progress-fd", "3", "--option", "opt_level=3", "--option", "tune=false", NULL));
  check_progress(progress);

  char *index_path = path_in(dir, "parts.json");
  json_error_t jerr;
  json_t *index = json_load_file(index_path, 0, &jerr);
  ck_assert_msg(index != NULL, "parts.json: %s", jerr.text);
  json_t *layers = json_object_get(index, "layers");
  ck_assert_uint_eq(json_array_size(layers), 4);
  nimble_executable_part_t parts[4];
  void *datas[4];
  bool seen[6] = {false};
  for (size_t i = 0; i < 4; i++) {
    json_t *l = json_array_get(layers, i);
    const char *file = json_string_value(json_object_get(l, "file"));
    const char *media = json_string_value(json_object_get(l, "mediaType"));
    ck_assert_ptr_nonnull(file);
    ck_assert_ptr_nonnull(media);
    nimble_part_kind_t kind = nimble_part_kind_from_media_type(media);
    ck_assert_msg(kind != 0, "layer %s: unknown media type %s", file, media);
    ck_assert_str_eq(media, nimble_part_media_type_for_target(kind, "x86_64-linux-gnu"));
    ck_assert(!seen[kind]);
    seen[kind] = true;
    datas[i] = load_part_file(dir, file, &parts[i].size);
    parts[i].kind = kind;
    parts[i].data = datas[i];
  }
  /* Any order loads: reverse them. */
  nimble_executable_part_t rev[4] = {parts[3], parts[2], parts[1], parts[0]};
  nimble_executable *exe = NULL;
  NIMBLE_ASSERT_OK(nimble_executable_load_parts(rev, 4, 0, &exe));
  check_dense_bias_relu(exe);
  nimble_executable_release(exe);
  for (int i = 0; i < 4; i++) free(datas[i]);
  json_decref(index);

  /* config.json decodes with protocol's strict decoder and says what was
   * compiled: the target, the program's digest and the signature. */
  char *config = path_in(dir, "config.json");
  size_t clen;
  char *ctext = read_text(config, &clen);
  nimble_artifact_config_t cfg;
  NIMBLE_ASSERT_OK(nimble_artifact_config_decode(ctext, clen, &cfg));
  ck_assert_str_eq(cfg.target, "x86");
  ck_assert_str_eq(cfg.compiler_version, NIMBLE_VERSION_STRING);
  size_t len;
  char *text = read_text(src, &len);
  nimble_digest_t d;
  nimble_digest_compute(text, len, &d);
  ck_assert(nimble_digest_equal(&cfg.model, &d));
  ck_assert_uint_eq(cfg.entry_count, 1);
  const nimble_entry_sig_t *e = &cfg.entries[0];
  ck_assert_str_eq(e->name, "main");
  ck_assert_uint_eq(e->input_count, 2);
  ck_assert_uint_eq(e->output_count, 1);
  /* x: [n, 4] float32 (n symbolic), w: [4, 3], output0: [n, 3]. */
  ck_assert_str_eq(e->inputs[0].name, "x");
  ck_assert_int_eq(e->inputs[0].dtype, NIMBLE_CONFIG_DTYPE_FLOAT32);
  ck_assert_uint_eq(e->inputs[0].rank, 2);
  ck_assert_str_eq(e->inputs[0].dims[0].symbol, "n");
  ck_assert_ptr_null(e->inputs[0].dims[1].symbol);
  ck_assert_int_eq(e->inputs[0].dims[1].value, 4);
  ck_assert_str_eq(e->inputs[1].name, "w");
  ck_assert_int_eq(e->inputs[1].dims[0].value, 4);
  ck_assert_int_eq(e->inputs[1].dims[1].value, 3);
  ck_assert_uint_eq(e->outputs[0].rank, 2);
  ck_assert_str_eq(e->outputs[0].dims[0].symbol, "n");
  ck_assert_int_eq(e->outputs[0].dims[1].value, 3);
  nimble_artifact_config_deinit(&cfg);
  free(ctext);
  free(text);
  free(config);
  free(index_path);
  free(progress);
  free(dir);
  free(src);
}
END_TEST

/* ---- aarch64 ------------------------------------------------------------- */

START_TEST(test_mlp_compiled_for_aarch64_has_an_aarch64_kernel_library) {
  char *src = dt_models_path("mlp.onnx");
  char *dir = path_in(g_tmp, "a64");
  free(nimble_expect(0, NULL, "compile", src, "--target=aarch64", "--emit-parts", dir, NULL));
  size_t size = 0;
  unsigned char *so = load_part_file(dir, "kernels", &size);
  ck_assert_uint_gt(size, 128);
  /* A part: the 16-byte part header (magic, kind 4: CPU kernels), then the
   * ELF shared object after the part's own small header. */
  ck_assert(memcmp(so, "NMBP", 4) == 0);
  ck_assert_int_eq(so[4], NIMBLE_PART_KERNELS_CPU);
  const unsigned char *elf = memmem(so, 64, "\x7f" "ELF", 4);
  ck_assert_ptr_nonnull(elf);
  ck_assert_int_eq(elf[4], 2); /* ELFCLASS64 */
  ck_assert_int_eq(elf[16] | elf[17] << 8, 3); /* ET_DYN: a shared object */
  ck_assert_int_eq(elf[18] | elf[19] << 8, 183); /* EM_AARCH64 (x86-64 would be 62) */
  free(so);
  char *index = load_part_file(dir, "parts.json", NULL);
  ck_assert_ptr_nonnull(strstr(index, nimble_part_media_type_for_target(NIMBLE_PART_KERNELS_CPU, "aarch64-linux-gnu")));
  free(index);
  free(dir);
  free(src);
}
END_TEST


/* The CPU kernels of `dir` (--emit-parts) written out as an ELF file and
 * opened; the kernels' symbols of `exe` (from `nimble inspect`) in
 * names[0..*n). */
static void *open_kernels(const char *dir, const char *exe, char names[][160], int *n) {
  size_t size = 0;
  unsigned char *part = load_part_file(dir, "kernels", &size);
  const unsigned char *elf = memmem(part, 64, "\x7f" "ELF", 4);
  ck_assert_ptr_nonnull(elf);
  char *so = path_in(dir, "kernels.so");
  FILE *f = fopen(so, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(elf, 1, size - (size_t)(elf - part), f), size - (size_t)(elf - part));
  fclose(f);
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(h != NULL, "dlopen %s: %s", so, dlerror());
  /* `nimble inspect` lists them on stdout. */
  char *cmd = NULL, *out = path_in(dir, "inspect.txt"), *bin = nimble_bin();
  ck_assert_int_ge(asprintf(&cmd, "'%s' inspect '%s' > '%s'", bin, exe, out), 0);
  free(bin);
  ck_assert_int_eq(system(cmd), 0);
  FILE *in = fopen(out, "r");
  ck_assert_ptr_nonnull(in);
  char line[512];
  *n = 0;
  while (fgets(line, sizeof line, in) && *n < 64)
    if (sscanf(line, "kernel #%*d cpu %159s", names[*n]) == 1) ++*n;
  fclose(in);
  free(cmd);
  free(out);
  free(so);
  free(part);
  return h;
}

/* On x86 (default CPU) a kernel whose vector loops evaluate exp, tanh,
 * sigmoid or erf is also exported for x86-64-v4 (NAME__avx512), which the
 * runtime calls where the CPU has AVX-512; an explicit CPU gets no clone.
 * The lstm's recurrence (lstm_scan: its gates' sigmoid and tanh) is the
 * one such kernel; its outputs match PyTorch with the clone (on an
 * AVX-512 machine) and with NIMBLE_AVX512=0. */
START_TEST(test_x86_kernels_with_transcendentals_get_avx512_clones_that_match) {
  char *src = dt_models_path("lstm.onnx");
  char *exe = path_in(g_tmp, "lstm.nimble"), *dir = path_in(g_tmp, "lstm-parts");
  free(nimble_expect(0, NULL, "compile", src, "--target=x86", "-o", exe, "--emit-parts", dir, NULL));
  char names[64][160];
  int n = 0, clones = 0;
  void *h = open_kernels(dir, exe, names, &n);
  ck_assert_int_gt(n, 4);
  for (int i = 0; i < n; i++) {
    char wide[200];
    snprintf(wide, sizeof wide, "%.159s%s", names[i], NIMBLE_KERNEL_AVX512_SUFFIX);
    ck_assert_msg(dlsym(h, names[i]) != NULL, "%s is not exported", names[i]);
    bool gates = strstr(names[i], "lstm_scan") && !strstr(names[i], "shape");
    ck_assert_msg((dlsym(h, wide) != NULL) == gates, "%s: clone %s", names[i], gates ? "missing" : "unexpected");
    clones += gates;
  }
  ck_assert_int_eq(clones, 1);
  dlclose(h);
  /* An explicit CPU: that CPU's code only. */
  char *exe2 = path_in(g_tmp, "lstm-haswell.nimble"), *dir2 = path_in(g_tmp, "lstm-haswell-parts");
  free(nimble_expect(0, NULL, "compile", src, "--target=x86:cpu=haswell", "-o", exe2, "--emit-parts", dir2, NULL));
  h = open_kernels(dir2, exe2, names, &n);
  for (int i = 0; i < n; i++) {
    char wide[200];
    snprintf(wide, sizeof wide, "%.159s%s", names[i], NIMBLE_KERNEL_AVX512_SUFFIX);
    ck_assert_msg(dlsym(h, wide) == NULL, "%s has a clone under cpu=haswell", names[i]);
  }
  dlclose(h);
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("x86-64-v4"))
    printf("skipped: the AVX-512 clone's run (this CPU has no x86-64-v4); the AVX2 kernels' run follows\n");
  char *outdir = path_in(g_tmp, "lstm-out");
  mkdir(outdir, 0755);
  for (int pass = 0; pass < 2; pass++) {
    if (pass) setenv("NIMBLE_AVX512", "0", 1);
    for (int c = 0; c < 2; c++) {
      char rel[64], *x, *input = NULL;
      snprintf(rel, sizeof rel, "lstm.ref/%d/x.npy", c);
      x = dt_models_path(rel);
      ck_assert_int_ge(asprintf(&input, "x=%s", x), 0);
      free(nimble_expect(0, NULL, "run", exe, "--input", input, "--output-dir", outdir, NULL));
      const char *outs[3] = {"y", "h", "c"};
      for (int o = 0; o < 3; o++) {
        char file[16];
        snprintf(file, sizeof file, "%s.npy", outs[o]);
        snprintf(rel, sizeof rel, "lstm.ref/%d/%s", c, file);
        char *want_path = dt_models_path(rel), *got_path = path_in(outdir, file);
        nimble_tensor_file_t got, want;
        NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(got_path, &got));
        NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(want_path, &want));
        dt_compare(pass ? "lstm (NIMBLE_AVX512=0)" : "lstm", c, outs[o], &got.tensor, &want.tensor, 1e-4, 1e-5);
        nimble_tensor_file_deinit(&got);
        nimble_tensor_file_deinit(&want);
        free(want_path);
        free(got_path);
      }
      free(input);
      free(x);
    }
  }
  unsetenv("NIMBLE_AVX512");
  free(outdir);
  free(exe2);
  free(dir2);
  free(exe);
  free(dir);
  free(src);
}
END_TEST

/* Running aarch64 artifacts under qemu is test_compile_reference_models_aarch64's
 * (every reference model; ctest reports it skipped without qemu). */

/* `nimble run` is nimble-run inside the CLI: the mlp compiled and run
 * through it matches PyTorch on every case; a NAME:TAG with no store
 * configured is a usage error saying so. */
START_TEST(test_nimble_run_runs_the_compiled_mlp_and_matches_pytorch) {
  char *src = dt_models_path("mlp.onnx");
  char *exe_path = path_in(g_tmp, "mlp-run.nimble");
  free(nimble_expect(0, NULL, "compile", src, "-o", exe_path, NULL));
  char *outdir = path_in(g_tmp, "run-out");
  mkdir(outdir, 0755);
  for (int c = 0; c < 3; c++) {
    char rel[64];
    snprintf(rel, sizeof rel, "mlp.ref/%d/x.npy", c);
    char *x = dt_models_path(rel);
    snprintf(rel, sizeof rel, "mlp.ref/%d/y.npy", c);
    char *y = dt_models_path(rel);
    char *input = NULL;
    ck_assert_int_ge(asprintf(&input, "x=%s", x), 0);
    char *err = nimble_expect(0, NULL, "run", exe_path, "--input", input, "--output-dir", outdir, NULL);
    free(err);
    char *got_path = path_in(outdir, "y.npy");
    nimble_tensor_file_t got, want;
    NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(got_path, &got));
    NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(y, &want));
    dt_compare("mlp (nimble run)", c, "y", &got.tensor, &want.tensor, 1e-4, 1e-5);
    nimble_tensor_file_deinit(&got);
    nimble_tensor_file_deinit(&want);
    free(got_path);
    free(input);
    free(y);
    free(x);
  }
  /* NAME:TAG is fetched from the configured store (here one that is down,
   * with an empty cache): the error names the reference it built. */
  char *cache = path_in(g_tmp, "run-cache");
  setenv("NIMBLE_CACHE_DIR", cache, 1);
  char *err = nimble_expect(1, NULL, "run", "team/mlp:x86", "--store", "http://127.0.0.1:1", "--input", "x=x.npy", NULL);
  ck_assert_msg(strstr(err, "http://127.0.0.1:1/team/mlp:x86") != NULL && strstr(err, "has no record of this tag"),
                "stderr: %s", err);
  free(err);
  unsetenv("NIMBLE_CACHE_DIR");
  free(cache);
  err = nimble_expect(2, NULL, "run", exe_path, "--input", "nope=x.npy", NULL);
  ck_assert_msg(strstr(err, "nimble run: ") != NULL && strstr(err, "no input 'nope'") != NULL, "stderr: %s", err);
  free(err);
  free(outdir);
  free(exe_path);
  free(src);
}
END_TEST

/* ---- errors ---------------------------------------------------------------- */

START_TEST(test_a_missing_model_is_an_input_error_naming_the_file) {
  char *missing = path_in(g_tmp, "nope.onnx");
  char *out = path_in(g_tmp, "x.nimble");
  char *err = nimble_expect(3, NULL, "compile", missing, "-o", out, NULL);
  ck_assert_ptr_nonnull(strstr(err, missing));
  ck_assert(access(out, F_OK) != 0);
  free(err);
  free(out);
  free(missing);
}
END_TEST

START_TEST(test_a_syntax_error_is_an_input_error_with_its_place) {
  char *bad = path_in(g_tmp, "bad.nir");
  FILE *f = fopen(bad, "w");
  fputs("def @main(%x: Tensor[(2,), float32]) {\n  relu(%x\n}\n", f);
  fclose(f);
  char *out = path_in(g_tmp, "x.nimble");
  char *err = nimble_expect(3, NULL, "compile", bad, "-o", out, NULL);
  ck_assert_msg(strstr(err, "bad.nir:3:1") != NULL, "stderr: %s", err);
  ck_assert(access(out, F_OK) != 0);
  free(err);
  free(out);
  free(bad);
}
END_TEST

START_TEST(test_an_unknown_extension_is_an_input_error) {
  char *weird = path_in(g_tmp, "model.txt");
  FILE *f = fopen(weird, "w");
  fputs("hello\n", f);
  fclose(f);
  char *out = path_in(g_tmp, "x.nimble");
  char *err = nimble_expect(3, NULL, "compile", weird, "-o", out, NULL);
  ck_assert_msg(strstr(err, "unknown model format") != NULL, "stderr: %s", err);
  free(err);
  free(out);
  free(weird);
}
END_TEST

START_TEST(test_cpu_native_builds_for_this_machine_and_other_arches_are_refused) {
  char *src = source_path("tests/compiler/driver/programs/dense_bias_relu.nir");
  char *out = path_in(g_tmp, "native.nimble");
  char *err = nimble_expect(0, NULL, "compile", src, "--target=x86:cpu=native", "-o", out, NULL);
  ck_assert_msg(access(out, F_OK) == 0, "stderr: %s", err);
  free(err);
  free(out);
  out = path_in(g_tmp, "x.nimble");
  /* This machine is x86_64: its CPU is no aarch64 CPU. */
  err = nimble_expect(2, NULL, "compile", src, "--target=aarch64:cpu=native", "-o", out, NULL);
  ck_assert_msg(strstr(err, "cpu=native means this machine's CPU, which is not a aarch64 CPU") != NULL, "stderr: %s",
                err);
  free(err);
  err = nimble_expect(2, NULL, "compile", src, "--target=sparc", "-o", out, NULL);
  ck_assert_msg(strstr(err, "sparc") != NULL, "stderr: %s", err);
  free(err);
  ck_assert(access(out, F_OK) != 0);
  free(out);
  free(src);
}
END_TEST

START_TEST(test_cuda_compiles_host_code_and_ptx_into_one_executable) {
  /* The cuda target (issue 6): the dense kernel becomes PTX, the
   * storage-size kernel host code; tests/compiler/cuda checks the parts. */
  char *src = source_path("tests/compiler/driver/programs/dense_bias_relu.nir");
  char *out = path_in(g_tmp, "x.nimble");
  char *err = nimble_expect(0, NULL, "compile", src, "--target=cuda", "-o", out, NULL);
  ck_assert_msg(access(out, F_OK) == 0, "stderr: %s", err);
  free(err);
  free(out);
  free(src);
}
END_TEST

START_TEST(test_usage_errors_exit_2) {
  char *src = source_path("tests/compiler/driver/programs/dense_bias_relu.nir");
  char *out = path_in(g_tmp, "x.nimble");
  free(nimble_expect(2, NULL, "compile", src, NULL)); /* no output */
  free(nimble_expect(2, NULL, "compile", "-o", out, NULL)); /* no model */
  free(nimble_expect(2, NULL, "compile", src, "-o", out, "--opt-level", "4", NULL));
  free(nimble_expect(2, NULL, "compile", src, "-o", out, "--option", "color=blue", NULL));
  free(nimble_expect(2, NULL, "compile", src, "-o", out, "--option", "opt_level=x", NULL));
  free(nimble_expect(2, NULL, "compile", src, "-o", out, "--progress-fd", "97", NULL)); /* not open */
  free(nimble_expect(2, NULL, "compile", src, "-o", out, "--format", "tflite", NULL));
  free(nimble_expect(2, NULL, "compile", src, "-o", out, "--bogus", NULL));
  ck_assert(access(out, F_OK) != 0);
  free(out);
  free(src);
}
END_TEST

START_TEST(test_help_tells_the_options_and_the_native_rule) {
  char *argv[] = {nimble_bin(), "compile", "--help", NULL};
  char *help_path = path_in(g_tmp, "help.txt");
  char *cmd = NULL;
  ck_assert_int_ge(asprintf(&cmd, "'%s' compile --help > '%s'", argv[0], help_path), 0);
  ck_assert_int_eq(system(cmd), 0);
  char *help = read_text(help_path, NULL);
  const char *must[] = {"--target", "-o FILE", "--opt-level", "--dump-ir", "--dump-ir-passes", "-v", "--emit-parts",
                        "--progress-fd", "--option", "cpu=native", "x86-64-v3"};
  for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
    ck_assert_msg(strstr(help, must[i]) != NULL, "help lacks '%s'", must[i]);
  free(help);
  free(cmd);
  free(help_path);
  free(argv[0]);
}
END_TEST

START_TEST(test_dump_ir_writes_the_module_after_import_and_each_pass) {
  char *src = source_path("tests/compiler/driver/programs/dense_bias_relu.nir");
  char *out = path_in(g_tmp, "x.nimble");
  char *dump = path_in(g_tmp, "ir");
  char *err = nimble_expect(0, NULL, "compile", src, "-o", out, "--dump-ir", dump, "-v", NULL);
  /* -v prints the phases with their times. */
  ck_assert_msg(strstr(err, "codegen") && strstr(err, "total"), "stderr: %s", err);
  char *first = path_in(dump, "00-import.nir");
  char *text = read_text(first, NULL);
  ck_assert_ptr_nonnull(strstr(text, "def @main"));
  free(text);
  /* fuse_ops names primitives "fused.*"; some dump after it shows them. */
  char *cmd = NULL;
  ck_assert_int_ge(asprintf(&cmd, "grep -l 'fused\\.' '%s'/*fuse*.nir > /dev/null", dump), 0);
  ck_assert_int_eq(system(cmd), 0);
  free(cmd);
  free(first);
  free(err);
  free(dump);
  free(out);
  free(src);
}
END_TEST

/* --dump-ir-passes writes only the passes named, numbered as in a full
 * dump; a name no pass has fails naming the names there are. */
START_TEST(test_dump_ir_passes_writes_only_those_named) {
  char *src = source_path("tests/compiler/driver/programs/dense_bias_relu.nir");
  char *out = path_in(g_tmp, "x.nimble");
  char *all = path_in(g_tmp, "all"), *some = path_in(g_tmp, "some");
  free(nimble_expect(0, NULL, "compile", src, "-o", out, "--dump-ir", all, NULL));
  free(nimble_expect(0, NULL, "compile", src, "-o", out, "--dump-ir", some, "--dump-ir-passes", "import,fuse_ops",
                     NULL));
  char *cmd = NULL, listing[4096] = "";
  ck_assert_int_ge(asprintf(&cmd, "cd '%s' && ls | tr '\\n' ' '", some), 0);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  size_t n = fread(listing, 1, sizeof listing - 1, p);
  listing[n] = '\0';
  pclose(p);
  free(cmd);
  ck_assert_msg(strncmp(listing, "00-import.nir ", 14) == 0 && strstr(listing, "-fuse_ops.nir ") &&
                    strlen(listing) == strlen("00-import.nir NN-fuse_ops.nir "),
                "files: '%s'", listing);
  /* The full dump's number and text. */
  ck_assert_int_ge(asprintf(&cmd, "cd '%s' && for f in *.nir; do cmp -s \"$f\" '%s'/\"$f\" || exit 1; done", some, all),
                   0);
  ck_assert_int_eq(system(cmd), 0);
  free(cmd);
  char *err = nimble_expect(1, NULL, "compile", src, "-o", out, "--dump-ir", some, "--dump-ir-passes", "fuse_op", NULL);
  ck_assert_msg(strstr(err, "no pass is named 'fuse_op'") && strstr(err, "fuse_ops"), "stderr: %s", err);
  free(err);
  err = nimble_expect(2, NULL, "compile", src, "-o", out, "--dump-ir-passes", "fuse_ops", NULL);
  ck_assert_msg(strstr(err, "--dump-ir-passes needs --dump-ir"), "stderr: %s", err);
  free(err);
  free(all);
  free(some);
  free(out);
  free(src);
}
END_TEST

int main(void) {
  Suite *s = suite_create("compile_command");
  TCase *tc = tcase_create("command");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_a_nir_program_compiles_to_a_file_the_runtime_runs);
  tcase_add_test(tc, test_a_nir_program_with_control_flow_takes_both_branches);
  tcase_add_test(tc, test_inspect_disassembles_an_executable_of_any_target);
  tcase_add_test(tc, test_emit_parts_writes_the_worker_contract_files_and_the_parts_load);
  tcase_add_test(tc, test_mlp_compiled_for_aarch64_has_an_aarch64_kernel_library);
  tcase_add_test(tc, test_nimble_run_runs_the_compiled_mlp_and_matches_pytorch);
  tcase_add_test(tc, test_x86_kernels_with_transcendentals_get_avx512_clones_that_match);
  tcase_add_test(tc, test_a_missing_model_is_an_input_error_naming_the_file);
  tcase_add_test(tc, test_a_syntax_error_is_an_input_error_with_its_place);
  tcase_add_test(tc, test_an_unknown_extension_is_an_input_error);
  tcase_add_test(tc, test_cpu_native_builds_for_this_machine_and_other_arches_are_refused);
  tcase_add_test(tc, test_cuda_compiles_host_code_and_ptx_into_one_executable);
  tcase_add_test(tc, test_usage_errors_exit_2);
  tcase_add_test(tc, test_help_tells_the_options_and_the_native_rule);
  tcase_add_test(tc, test_dump_ir_writes_the_module_after_import_and_each_pass);
  tcase_add_test(tc, test_dump_ir_passes_writes_only_those_named);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
