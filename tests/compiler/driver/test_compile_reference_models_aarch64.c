/* The reference models (docs/reference-models.md) compiled for aarch64
 * with nimble_compile_file, written as .nimble files and run by the
 * aarch64 build of nimble-run under qemu-aarch64 on the models' reference
 * inputs; every output is compared with PyTorch's within the model's
 * tolerance (NAME.json). The Tree-LSTM program (examples/treelstm.nir)
 * runs the same way on three reference trees given as JSON files.
 *
 * NIMBLE_AARCH64_NIMBLE_RUN names the aarch64 nimble-run (the CMake cache
 * variable of the same name; scripts/test.sh builds one with
 * scripts/test-cross.sh and sets it). Without it, or without
 * qemu-aarch64, the suite prints "skipped: ..." with the reason and exits
 * 77, which ctest reports as skipped (never as passed).
 *
 * Every case of every model runs: about two minutes on an idle
 * 2-core machine, most of it compiling; `max_cases` below can cut the
 * 224x224 image models down if qemu gets slower. A model listed in kNotYet may fail to
 * compile with UNIMPLEMENTED, as in test_compile_reference_models.c. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "driver_test_util.h"
#include "nimble/tensor_io.h"
#include "nimble_test.h"

#define QEMU "qemu-aarch64"
#define AARCH64_SYSROOT "/usr/aarch64-linux-gnu"
/* The cross toolchain's ld.so must load the cross libc beside it: without
 * this, its search falls through to /lib/aarch64-linux-gnu, where Debian's
 * libc6:arm64 (pulled in by check:arm64) is a different build of glibc, and
 * the mixed pair hangs in the first pthread_create. */
#define AARCH64_LIBS "LD_LIBRARY_PATH=" AARCH64_SYSROOT "/lib"
/* One run of one case takes seconds; a hung one fails the case, not the
 * suite's ctest timeout half an hour later. */
#define RUN_TIMEOUT "600"

/* Models whose compile is known to stop at a missing piece, NULL-terminated;
 * the same list as test_compile_reference_models.c's (none today). */
static const char *const kNotYet[] = {NULL};

static char g_tmp[256];

static bool not_yet_expected(const char *name) {
  for (size_t i = 0; kNotYet[i]; i++)
    if (strcmp(kNotYet[i], name) == 0) return true;
  return false;
}

/* The aarch64 nimble-run, or NULL (after printing why) when this machine
 * cannot run aarch64 code. */
static const char *aarch64_nimble_run(void) {
  const char *run = getenv("NIMBLE_AARCH64_NIMBLE_RUN");
  if (!run || !*run) {
    printf("skipped: no aarch64 nimble-run (NIMBLE_AARCH64_NIMBLE_RUN is empty; scripts/test.sh sets it from "
           "scripts/test-cross.sh's build)\n");
    return NULL;
  }
  if (access(run, X_OK) != 0) {
    printf("skipped: no aarch64 nimble-run (NIMBLE_AARCH64_NIMBLE_RUN=%s: %s)\n", run, strerror(errno));
    return NULL;
  }
  if (system("command -v " QEMU " > /dev/null") != 0) {
    printf("skipped: no aarch64 nimble-run can run: " QEMU " is not installed (Debian package qemu-user)\n");
    return NULL;
  }
  return run;
}

static char *path_in(const char *base, const char *fmt_rel) {
  char *p = NULL;
  ck_assert_int_ge(asprintf(&p, "%s/%s", base, fmt_rel), 0);
  return p;
}

static char *read_small_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return strdup("");
  char *buf = calloc(1, 8193);
  ck_assert_ptr_nonnull(buf);
  size_t n = fread(buf, 1, 8192, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* Runs argv (argv[0] found on PATH) with stdout and stderr into `log`;
 * returns the exit status, or -signal. */
static int run_logged(char *const argv[], const char *log) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    execvp(argv[0], argv);
    _exit(127);
  }
  int st = 0;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

/* nimble-run's file for output `index` named `name`: NAME.npy with
 * characters outside [A-Za-z0-9._-] made '_', or output_N.npy when the
 * entry has no name for it (runtime/tools/nimble_run.c); older builds
 * wrote outputN.npy. The first that exists; NULL when none does. */
static char *find_output_file(const char *dir, const char *name, size_t index) {
  char sanitized[256];
  size_t n = 0;
  for (const char *p = name; *p && n + 1 < sizeof sanitized; p++) {
    char c = *p;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-';
    sanitized[n++] = ok ? c : '_';
  }
  sanitized[n] = '\0';
  char cand[3][300];
  snprintf(cand[0], sizeof cand[0], "%s.npy", sanitized);
  snprintf(cand[1], sizeof cand[1], "output_%zu.npy", index);
  snprintf(cand[2], sizeof cand[2], "output%zu.npy", index);
  for (int i = 0; i < 3; i++) {
    char *p = path_in(dir, cand[i]);
    if (access(p, R_OK) == 0) return p;
    free(p);
  }
  return NULL;
}

/* Runs the aarch64 nimble-run under qemu on executable `exe_path` with
 * inputs names[i]=paths[i], outputs into the fresh folder `outdir`; fails
 * the test (naming `what`) unless it exits 0. Returns what it printed
 * (caller frees). */
static char *run_under_qemu(const char *run, const char *exe_path, size_t n, const char *const *names,
                            char *const *paths, const char *outdir, const char *what) {
  ck_assert_msg(mkdir(outdir, 0755) == 0, "mkdir %s: %s", outdir, strerror(errno));
  char *log = NULL;
  ck_assert_int_ge(asprintf(&log, "%s.log", outdir), 0);
  size_t argc = 0;
  char **argv = calloc(12 + 2 * n, sizeof *argv);
  ck_assert_ptr_nonnull(argv);
  argv[argc++] = strdup("timeout");
  argv[argc++] = strdup(RUN_TIMEOUT);
  argv[argc++] = strdup(QEMU);
  argv[argc++] = strdup("-L");
  argv[argc++] = strdup(AARCH64_SYSROOT);
  argv[argc++] = strdup("-E");
  argv[argc++] = strdup(AARCH64_LIBS);
  argv[argc++] = strdup(run);
  argv[argc++] = strdup(exe_path);
  for (size_t k = 0; k < n; k++) {
    argv[argc++] = strdup("--input");
    ck_assert_int_ge(asprintf(&argv[argc++], "%s=%s", names[k], paths[k]), 0);
  }
  argv[argc++] = strdup("--output-dir");
  argv[argc++] = strdup(outdir);
  int rc = run_logged(argv, log);
  char *text = read_small_file(log);
  ck_assert_msg(rc == 0, "%s: %s %s %s ... %s %d:\n%s", what, QEMU, run, exe_path,
                rc == 124 ? "ran past " RUN_TIMEOUT " s (timeout's status)" : "exited with", rc, text);
  for (size_t i = 0; i < argc; i++) free(argv[i]);
  free(argv);
  unlink(log);
  free(log);
  return text;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void check_model(const char *name, size_t max_cases) {
  const char *run = aarch64_nimble_run();
  ck_assert_msg(run != NULL, "main() checked the aarch64 nimble-run");
  double t0 = now_s();
  char rel[128];
  snprintf(rel, sizeof rel, "%s.onnx", name);
  char *src = dt_models_path(rel);
  nimble_compile_options_t o = dt_compile_options("aarch64");
  nimble_compile_result *r = NULL;
  nimble_status_t s = nimble_compile_file(src, &o, &r);
  free(src);
  if (s && not_yet_expected(name) && nimble_status_code(s) == NIMBLE_UNIMPLEMENTED) {
    printf("%s (aarch64): not yet: %s\n", name, nimble_status_message(s));
    nimble_status_free(s);
    return;
  }
  ck_assert_msg(s == NULL, "%s (aarch64): %s", name, s ? nimble_status_message(s) : "");
  snprintf(rel, sizeof rel, "%s-aarch64.nimble", name);
  char *exe_path = path_in(g_tmp, rel);
  NIMBLE_ASSERT_OK(nimble_compile_result_write_file(r, exe_path));
  nimble_compile_result_destroy(r);
  double t_compile = now_s() - t0;

  dt_ref_model_t m;
  dt_ref_model_load(name, &m);
  size_t cases = m.num_cases < max_cases ? m.num_cases : max_cases;
  char label[160];
  snprintf(label, sizeof label, "%s (aarch64 under qemu)", name);
  for (size_t ci = 0; ci < cases; ci++) {
    const dt_ref_case_t *c = &m.cases[ci];
    snprintf(rel, sizeof rel, "%s-out-%d", name, c->id);
    char *outdir = path_in(g_tmp, rel);
    char what[256];
    snprintf(what, sizeof what, "%s case %d (%s)", label, c->id, c->note ? c->note : "");
    char *log_text = run_under_qemu(run, exe_path, c->num_inputs, c->input_names, c->input_paths, outdir, what);
    for (size_t o = 0; o < c->num_outputs; o++) {
      char *got_path = find_output_file(outdir, c->output_names[o], o);
      ck_assert_msg(got_path != NULL, "%s case %d: nimble-run wrote no file for output %zu '%s' into %s; it said:\n%s",
                    label, c->id, o, c->output_names[o], outdir, log_text);
      nimble_tensor_file_t got, want;
      NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(got_path, &got));
      NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(c->output_paths[o], &want));
      dt_compare(label, c->id, c->output_names[o], &got.tensor, &want.tensor, m.rtol, m.atol);
      nimble_tensor_file_deinit(&got);
      nimble_tensor_file_deinit(&want);
      unlink(got_path);
      free(got_path);
    }
    free(log_text);
    rmdir(outdir);
    free(outdir);
  }
  printf("%s: ran %zu of its %zu cases, all match (compile %.1f s, all %.1f s)%s\n", label, cases, m.num_cases,
         t_compile, now_s() - t0,
         not_yet_expected(name) ? " (it compiles now: remove it from kNotYet here and in the x86 suite)" : "");
  dt_ref_model_deinit(&m);
  unlink(exe_path);
  free(exe_path);
}

/* At most `max_cases` cases of the model run under qemu (today: all). */
#define MODEL_TEST(n, max_cases)                                                     \
  START_TEST(test_##n##_compiled_for_aarch64_matches_pytorch_under_qemu) {          \
    check_model(#n, max_cases);                                                     \
  }                                                                                 \
  END_TEST

MODEL_TEST(mlp, 3)
MODEL_TEST(cnn, 2)
MODEL_TEST(bert_tiny, 5)
MODEL_TEST(bert_tiny_emb, 4)
MODEL_TEST(lstm, 4)
MODEL_TEST(gru, 4)
MODEL_TEST(loop_if, 5)
MODEL_TEST(while_loop, 3)
MODEL_TEST(dyn_ops, 5)
MODEL_TEST(squeezenet1_0, 2)
MODEL_TEST(mobilenet_v2, 2)
MODEL_TEST(lstm2, 4)

/* ---- the Tree-LSTM program ------------------------------------------------ */

/* {"Node": [l, r]} / {"Leaf": w} (nimble-run's JSON for ADT inputs) from
 * the reference's nested lists. */
static void write_tree_json(FILE *f, const json_t *t) {
  if (json_is_integer(t)) {
    fprintf(f, "{\"Leaf\": %lld}", (long long)json_integer_value(t));
    return;
  }
  ck_assert_msg(json_is_array(t) && json_array_size(t) == 2, "treelstm.json: a tree node is not [left, right]");
  fputs("{\"Node\": [", f);
  write_tree_json(f, json_array_get(t, 0));
  fputs(", ", f);
  write_tree_json(f, json_array_get(t, 1));
  fputs("]}", f);
}

/* examples/treelstm.nir compiled for aarch64 and run by nimble-run under
 * qemu on three of the 20 reference trees (a JSON file each, the weights
 * as .npy); the root h and c are compared with PyTorch's rows. */
START_TEST(test_treelstm_compiled_for_aarch64_matches_pytorch_under_qemu) {
  const char *run = aarch64_nimble_run();
  ck_assert_msg(run != NULL, "main() checked the aarch64 nimble-run");
  double t0 = now_s();
  const char *src_dir = getenv("NIMBLE_SOURCE_DIR");
  ck_assert_msg(src_dir && *src_dir, "NIMBLE_SOURCE_DIR is not set");
  char *nir = path_in(src_dir, "examples/treelstm.nir");
  nimble_compile_options_t o = dt_compile_options("aarch64");
  nimble_compile_result *r = NULL;
  nimble_status_t s = nimble_compile_file(nir, &o, &r);
  ck_assert_msg(s == NULL, "treelstm (aarch64): %s", s ? nimble_status_message(s) : "");
  free(nir);
  char *exe_path = path_in(g_tmp, "treelstm-aarch64.nimble");
  NIMBLE_ASSERT_OK(nimble_compile_result_write_file(r, exe_path));
  nimble_compile_result_destroy(r);

  char *meta_path = dt_models_path("treelstm.json");
  json_error_t err;
  json_t *meta = json_load_file(meta_path, 0, &err);
  ck_assert_msg(meta != NULL, "%s: %s", meta_path, err.text);
  free(meta_path);
  double rtol = json_number_value(json_object_get(json_object_get(meta, "tolerance"), "rtol"));
  double atol = json_number_value(json_object_get(json_object_get(meta, "tolerance"), "atol"));
  ck_assert_msg(rtol > 0 && atol > 0, "treelstm.json has no tolerance");
  const json_t *trees = json_object_get(meta, "trees");
  ck_assert_msg(json_array_size(trees) == 20, "treelstm.json has %zu trees, expected 20", json_array_size(trees));

  /* The entry's parameters: the tree, then the weights. */
  static const char *const kNames[6] = {"tree", "emb", "leaf_w", "leaf_b", "node_w", "node_b"};
  static const char *const kFiles[5] = {"emb.weight", "leaf.weight", "leaf.bias", "node.weight", "node.bias"};
  char *paths[6];
  paths[0] = path_in(g_tmp, "tree.json");
  for (int w = 0; w < 5; w++) {
    char rel[64];
    snprintf(rel, sizeof rel, "treelstm/%s.npy", kFiles[w]);
    paths[1 + w] = dt_models_path(rel);
  }
  static const char *const kOutputs[2] = {"root_h", "root_c"};
  nimble_tensor_file_t refs[2];
  for (int k = 0; k < 2; k++) {
    char rel[64];
    snprintf(rel, sizeof rel, "treelstm/%s.npy", kOutputs[k]);
    char *p = dt_models_path(rel);
    NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(p, &refs[k]));
    free(p);
    ck_assert_int_eq(refs[k].tensor.ndim, 2);
    ck_assert_int_eq(refs[k].tensor.shape[0], 20);
  }

  static const int kPicks[3] = {0, 1, 19};
  for (int k = 0; k < 3; k++) {
    int i = kPicks[k];
    FILE *f = fopen(paths[0], "w");
    ck_assert_msg(f != NULL, "%s: %s", paths[0], strerror(errno));
    write_tree_json(f, json_array_get(trees, (size_t)i));
    fputc('\n', f);
    fclose(f);
    char rel[64], what[64];
    snprintf(rel, sizeof rel, "treelstm-out-%d", i);
    snprintf(what, sizeof what, "treelstm (aarch64 under qemu) tree %d", i);
    char *outdir = path_in(g_tmp, rel);
    char *log_text = run_under_qemu(run, exe_path, 6, kNames, paths, outdir, what);
    for (int out = 0; out < 2; out++) {
      char *got_path = find_output_file(outdir, kOutputs[out], (size_t)out);
      ck_assert_msg(got_path != NULL, "%s: nimble-run wrote no file for output %d into %s; it said:\n%s", what, out,
                    outdir, log_text);
      nimble_tensor_file_t got;
      NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(got_path, &got));
      /* Row i of the reference, as a 1-D view. */
      DLTensor want = refs[out].tensor;
      int64_t shape[1] = {want.shape[1]};
      want.ndim = 1;
      want.shape = shape;
      want.byte_offset += (uint64_t)(i * shape[0]) * sizeof(float);
      dt_compare("treelstm (aarch64 under qemu)", i, kOutputs[out], &got.tensor, &want, rtol, atol);
      nimble_tensor_file_deinit(&got);
      unlink(got_path);
      free(got_path);
    }
    free(log_text);
    rmdir(outdir);
    free(outdir);
  }
  printf("treelstm (aarch64 under qemu): trees 0, 1, 19 match (all %.1f s)\n", now_s() - t0);
  unlink(paths[0]);
  for (int k = 0; k < 6; k++) free(paths[k]);
  for (int k = 0; k < 2; k++) nimble_tensor_file_deinit(&refs[k]);
  json_decref(meta);
  unlink(exe_path);
  free(exe_path);
}
END_TEST

static void setup(void) {
  const char *base = getenv("TMPDIR");
  snprintf(g_tmp, sizeof g_tmp, "%s/nimble-a64-models-XXXXXX", base && *base ? base : "/tmp");
  ck_assert_msg(mkdtemp(g_tmp) != NULL, "mkdtemp %s: %s", g_tmp, strerror(errno));
}

static void teardown(void) { rmdir(g_tmp); }

int main(void) {
  if (!aarch64_nimble_run()) return 77; /* it printed why */
  Suite *s = suite_create("compile_reference_models_aarch64");
  TCase *tc = tcase_create("models");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 900);
  tcase_add_test(tc, test_mlp_compiled_for_aarch64_matches_pytorch_under_qemu);
  tcase_add_test(tc, test_cnn_compiled_for_aarch64_matches_pytorch_under_qemu);
  tcase_add_test(tc, test_lstm_compiled_for_aarch64_matches_pytorch_under_qemu);
  tcase_add_test(tc, test_gru_compiled_for_aarch64_matches_pytorch_under_qemu);
  tcase_add_test(tc, test_loop_if_compiled_for_aarch64_matches_pytorch_under_qemu);
  tcase_add_test(tc, test_while_loop_compiled_for_aarch64_matches_pytorch_under_qemu);
  tcase_add_test(tc, test_dyn_ops_compiled_for_aarch64_matches_pytorch_under_qemu);
  suite_add_tcase(s, tc);
  /* The big models: left out by the sanitizer stage (NIMBLE_TAG_LARGE). */
  TCase *large = tcase_create("models_large");
  tcase_set_tags(large, NIMBLE_TAG_LARGE);
  tcase_add_checked_fixture(large, setup, teardown);
  tcase_set_timeout(large, 900);
  tcase_add_test(large, test_bert_tiny_compiled_for_aarch64_matches_pytorch_under_qemu);
  tcase_add_test(large, test_bert_tiny_emb_compiled_for_aarch64_matches_pytorch_under_qemu);
  tcase_add_test(large, test_squeezenet1_0_compiled_for_aarch64_matches_pytorch_under_qemu);
  tcase_add_test(large, test_mobilenet_v2_compiled_for_aarch64_matches_pytorch_under_qemu);
  tcase_add_test(large, test_lstm2_compiled_for_aarch64_matches_pytorch_under_qemu);
  suite_add_tcase(s, large);
  /* Its own case, so CK_RUN_CASE=treelstm runs it alone. */
  TCase *tree = tcase_create("treelstm");
  tcase_add_checked_fixture(tree, setup, teardown);
  tcase_set_timeout(tree, 900);
  tcase_add_test(tree, test_treelstm_compiled_for_aarch64_matches_pytorch_under_qemu);
  suite_add_tcase(s, tree);
  return nimble_test_run(s);
}
