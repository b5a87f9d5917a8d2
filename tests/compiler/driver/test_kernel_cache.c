/* Parallel code generation and the kernel cache (docs/compile.md "Compile
 * time"): `nimble compile` run as a user would, with -j and the cache in a
 * temporary folder (NIMBLE_KERNEL_CACHE; never the user's home). The
 * executables are compared byte for byte with each other and run against
 * PyTorch's reference outputs; the local cache is also checked directly
 * (nimble/kernel_cache.h): round trip, and damaged entries never returned. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver_test_util.h"
#include "nimble/compile.h"
#include "nimble/kernel_cache.h"
#include "nimble/runtime.h"
#include "nimble_test.h"

static char g_tmp[256];
static char g_cache[320];

static char *path_in(const char *base, const char *rel) {
  char *p = NULL;
  ck_assert_int_ge(asprintf(&p, "%s/%s", base, rel), 0);
  return p;
}

static uint8_t *read_bytes(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc((size_t)n + 1);
  ck_assert_ptr_nonnull(buf);
  ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
  buf[n] = 0;
  fclose(f);
  *len = (size_t)n;
  return buf;
}

/* Runs `nimble ARGS...` (NULL-terminated) with stdout to /dev/null;
 * returns stderr (caller frees) and fails unless the exit status is want. */
static char *nimble_expect(int want, ...) {
  const char *b = getenv("NIMBLE_BUILD_DIR");
  ck_assert_ptr_nonnull(b);
  char *argv[32];
  int n = 0;
  argv[n++] = path_in(b, "client/nimble");
  va_list ap;
  va_start(ap, want);
  const char *a;
  while ((a = va_arg(ap, const char *)) && n < 31) argv[n++] = (char *)a;
  va_end(ap);
  argv[n] = NULL;
  char *err_path = path_in(g_tmp, "stderr.txt");
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int o = open("/dev/null", O_WRONLY);
    if (e < 0 || o < 0) _exit(120);
    dup2(o, 1);
    dup2(e, 2);
    execv(argv[0], argv);
    _exit(122);
  }
  int st = 0;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  size_t len;
  char *err = (char *)read_bytes(err_path, &len);
  int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
  ck_assert_msg(rc == want, "nimble %s %s: exit %d, expected %d; stderr:\n%s", argv[1], argv[2] ? argv[2] : "", rc,
                want, err);
  free(argv[0]);
  free(err_path);
  return err;
}

static void setup(void) {
  snprintf(g_tmp, sizeof g_tmp, "/tmp/nimble-kcache-test-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(g_tmp));
  snprintf(g_cache, sizeof g_cache, "%s/cache", g_tmp);
  /* Every nimble this test runs uses this cache (each test runs in its
   * own process, so the setting stays here). */
  ck_assert_int_eq(setenv("NIMBLE_KERNEL_CACHE", g_cache, 1), 0);
}

static void teardown(void) {
  char cmd[320];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
  ck_assert_int_eq(system(cmd), 0);
}

static void assert_same_file(const char *a, const char *b) {
  size_t na, nb;
  uint8_t *da = read_bytes(a, &na), *db = read_bytes(b, &nb);
  ck_assert_msg(na == nb && memcmp(da, db, na) == 0, "%s (%zu bytes) and %s (%zu bytes) differ", a, na, b, nb);
  free(da);
  free(db);
}

/* "N hits, M misses" from -v's codegen line; fails when absent. */
static void cache_counts(const char *err, long *hits, long *misses) {
  const char *p = strstr(err, "kernel cache: ");
  ck_assert_msg(p != NULL, "no kernel cache line in:\n%s", err);
  ck_assert_msg(sscanf(p, "kernel cache: %ld hits, %ld misses", hits, misses) == 2, "bad cache line in:\n%s", err);
}

static long kernel_count(const char *err) {
  const char *p = strstr(err, "codegen: ");
  ck_assert_msg(p != NULL, "no codegen line in:\n%s", err);
  long n = -1;
  ck_assert_int_eq(sscanf(p, "codegen: %ld CPU kernels", &n), 1);
  return n;
}

static int cmp_path(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* The cache's entry files (DIR/XX/KEY), sorted; returns their count. */
static int entries(char paths[][512], int max) {
  _Static_assert(sizeof g_cache < 400, "short cache paths");
  int n = 0;
  DIR *d = opendir(g_cache);
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char sub[1024];
    snprintf(sub, sizeof sub, "%.300s/%.200s", g_cache, e->d_name);
    DIR *s = opendir(sub);
    ck_assert_ptr_nonnull(s);
    struct dirent *f;
    while ((f = readdir(s))) {
      if (f->d_name[0] == '.') continue;
      ck_assert_int_lt(n, max);
      ck_assert_int_lt((int)(strlen(sub) + strlen(f->d_name)), 510);
      snprintf(paths[n++], 512, "%.300s/%.200s", sub, f->d_name);
    }
    closedir(s);
  }
  closedir(d);
  qsort(paths, (size_t)n, 512, cmp_path);
  return n;
}

static const char *kKey1 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
static const char *kKey2 = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

/* Whether an entry holds a linked shared object (the compile's link,
 * cached under a key over the kernels' keys) rather than one kernel's
 * relocatable object: its payload's ELF e_type (at byte 16) is ET_DYN. */
static bool is_linked_entry(const char *path) {
  size_t len;
  uint8_t *d = read_bytes(path, &len);
  bool dyn = false;
  for (size_t i = 0; i + 18 <= len && !dyn; i++)
    if (memcmp(d + i, "\x7f" "ELF", 4) == 0) {
      dyn = d[i + 16] == 3 && d[i + 17] == 0;
      break;
    }
  free(d);
  return dyn;
}

/* The kernels' entries only (linked objects left out), sorted. */
static int kernel_entries(char paths[][512], int max) {
  int n = entries(paths, max), k = 0;
  for (int i = 0; i < n; i++)
    if (!is_linked_entry(paths[i])) memmove(paths[k++], paths[i], 512);
  return k;
}

START_TEST(test_the_local_cache_returns_what_was_put_and_misses_other_keys) {
  nimble_kernel_cache_t *c = NULL;
  ck_assert_ptr_null(nimble_kernel_cache_open_local(g_cache, &c));
  const uint8_t obj[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 42};
  ck_assert_ptr_null(c->put(c, kKey1, obj, sizeof obj));
  uint8_t *data = NULL;
  size_t size = 0;
  bool found = false, corrupt = true;
  ck_assert_ptr_null(c->get(c, kKey1, &data, &size, &found, &corrupt));
  ck_assert(found);
  ck_assert(!corrupt);
  ck_assert_uint_eq(size, sizeof obj);
  ck_assert_mem_eq(data, obj, sizeof obj);
  free(data);
  ck_assert_ptr_null(c->get(c, kKey2, &data, &size, &found, &corrupt));
  ck_assert(!found);
  ck_assert(!corrupt);
  /* A key that is not 64 lowercase hex digits names no file. */
  nimble_status_t s = c->put(c, "../escape", obj, sizeof obj);
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_INVALID_ARGUMENT);
  nimble_status_free(s);
  nimble_kernel_cache_destroy(c);
}
END_TEST

START_TEST(test_a_damaged_entry_is_a_miss_and_never_returned) {
  nimble_kernel_cache_t *c = NULL;
  ck_assert_ptr_null(nimble_kernel_cache_open_local(g_cache, &c));
  uint8_t obj[1000];
  for (int i = 0; i < 1000; i++) obj[i] = (uint8_t)(i * 7);
  ck_assert_ptr_null(c->put(c, kKey1, obj, sizeof obj));
  char paths[4][512];
  ck_assert_int_eq(entries(paths, 4), 1);
  size_t len;
  uint8_t *file = read_bytes(paths[0], &len);
  ck_assert_uint_eq(len, 112 + sizeof obj); /* header: magic, key, size, sha256 */
  uint8_t *data = NULL;
  size_t size = 0;
  bool found = true, corrupt = false;
  /* One payload bit flipped: the digest no longer matches. */
  file[len - 10] ^= 1;
  FILE *f = fopen(paths[0], "wb");
  fwrite(file, 1, len, f);
  fclose(f);
  ck_assert_ptr_null(c->get(c, kKey1, &data, &size, &found, &corrupt));
  ck_assert(!found);
  ck_assert(corrupt);
  ck_assert_ptr_null(data);
  /* Truncated (a writer killed mid-way would leave only a temporary
   * file, but a damaged disk might do this). */
  file[len - 10] ^= 1;
  f = fopen(paths[0], "wb");
  fwrite(file, 1, len - 100, f);
  fclose(f);
  ck_assert_ptr_null(c->get(c, kKey1, &data, &size, &found, &corrupt));
  ck_assert(!found);
  ck_assert(corrupt);
  /* The entry of another key copied under this one's name. */
  ck_assert_ptr_null(c->put(c, kKey2, obj, sizeof obj));
  char p2[4][512];
  ck_assert_int_eq(entries(p2, 4), 2);
  ck_assert_int_eq(rename(strstr(p2[0], kKey2) ? p2[0] : p2[1], paths[0]), 0);
  ck_assert_ptr_null(c->get(c, kKey1, &data, &size, &found, &corrupt));
  ck_assert(!found);
  ck_assert(corrupt);
  /* Stored again, it is whole again. */
  ck_assert_ptr_null(c->put(c, kKey1, obj, sizeof obj));
  ck_assert_ptr_null(c->get(c, kKey1, &data, &size, &found, &corrupt));
  ck_assert(found);
  ck_assert_mem_eq(data, obj, sizeof obj);
  free(data);
  free(file);
  nimble_kernel_cache_destroy(c);
}
END_TEST

/* Both checks below run on lstm (23 kernels) everywhere, and on bert_tiny
 * (71) in a case tagged NIMBLE_TAG_LARGE, which the sanitizer stage leaves
 * to the release stage. */
static void check_threads_give_the_same_bytes(const char *name) {
  char file[64];
  snprintf(file, sizeof file, "%s.onnx", name);
  char *model = dt_models_path(file);
  char *a = path_in(g_tmp, "j1.nimble"), *b = path_in(g_tmp, "j2.nimble"), *c = path_in(g_tmp, "j2b.nimble");
  char *err = nimble_expect(0, "compile", model, "--no-kernel-cache", "-j1", "-v", "-o", a, NULL);
  ck_assert_msg(strstr(err, "on 1 thread;") != NULL, "%s", err);
  free(err);
  err = nimble_expect(0, "compile", model, "--no-kernel-cache", "-j", "2", "-v", "-o", b, NULL);
  ck_assert_msg(strstr(err, "on 2 threads;") != NULL, "%s", err);
  free(err);
  free(nimble_expect(0, "compile", model, "--no-kernel-cache", "--jobs=2", "-o", c, NULL));
  assert_same_file(a, b);
  assert_same_file(b, c);
  nimble_executable *exe = NULL;
  ck_assert_ptr_null(nimble_executable_load_file(b, &exe));
  ck_assert_int_gt(dt_run_reference_cases(exe, name), 0);
  nimble_executable_release(exe);
  free(model);
  free(a);
  free(b);
  free(c);
}

START_TEST(test_one_or_two_threads_and_a_second_run_give_the_same_bytes) {
  check_threads_give_the_same_bytes("lstm");
}
END_TEST

START_TEST(test_one_or_two_threads_and_a_second_run_give_the_same_bytes_for_bert) {
  check_threads_give_the_same_bytes("bert_tiny");
}
END_TEST

static void check_warm_cache(const char *name) {
  char file[64];
  snprintf(file, sizeof file, "%s.onnx", name);
  char *model = dt_models_path(file);
  char *fresh = path_in(g_tmp, "fresh.nimble"), *cold = path_in(g_tmp, "cold.nimble"),
       *warm = path_in(g_tmp, "warm.nimble");
  free(nimble_expect(0, "compile", model, "--no-kernel-cache", "-o", fresh, NULL));
  char paths[1][512];
  ck_assert_int_eq(entries(paths, 1), 0);
  char *err = nimble_expect(0, "compile", model, "-v", "-o", cold, NULL);
  long n = kernel_count(err), hits, misses;
  cache_counts(err, &hits, &misses);
  ck_assert_int_gt(n, 10);
  ck_assert_int_eq(hits, 0);
  ck_assert_int_eq(misses, n);
  ck_assert_msg(strstr(err, g_cache) != NULL, "the cache folder is not named:\n%s", err);
  free(err);
  err = nimble_expect(0, "compile", model, "-v", "-o", warm, NULL);
  cache_counts(err, &hits, &misses);
  ck_assert_int_eq(hits, n);
  ck_assert_int_eq(misses, 0);
  free(err);
  assert_same_file(fresh, cold);
  assert_same_file(fresh, warm);
  nimble_executable *exe = NULL;
  ck_assert_ptr_null(nimble_executable_load_file(warm, &exe));
  ck_assert_int_gt(dt_run_reference_cases(exe, name), 0);
  nimble_executable_release(exe);
  free(model);
  free(fresh);
  free(cold);
  free(warm);
}

START_TEST(test_a_warm_cache_gives_the_same_executable_and_the_reference_outputs) {
  check_warm_cache("lstm");
}
END_TEST

START_TEST(test_a_warm_cache_gives_the_same_executable_and_the_reference_outputs_for_bert) {
  check_warm_cache("bert_tiny");
}
END_TEST

START_TEST(test_corrupt_cache_entries_are_ignored_rebuilt_and_healed) {
  char *model = dt_models_path("cnn.onnx");
  char *cold = path_in(g_tmp, "cold.nimble"), *again = path_in(g_tmp, "again.nimble");
  char *err = nimble_expect(0, "compile", model, "-v", "-o", cold, NULL);
  long n = kernel_count(err), hits, misses;
  free(err);
  char paths[256][512];
  /* One entry per kernel and one for the linked object. */
  ck_assert_int_eq(entries(paths, 256), n + 1);
  int ne = kernel_entries(paths, 256);
  ck_assert_int_eq(ne, n);
  ck_assert_int_ge(ne, 2);
  /* One entry with a flipped byte, one cut short. */
  size_t len;
  uint8_t *file = read_bytes(paths[0], &len);
  file[len / 2] ^= 0x40;
  FILE *f = fopen(paths[0], "wb");
  fwrite(file, 1, len, f);
  fclose(f);
  free(file);
  ck_assert_int_eq(truncate(paths[1], 200), 0);
  err = nimble_expect(0, "compile", model, "-v", "-o", again, NULL);
  cache_counts(err, &hits, &misses);
  ck_assert_int_eq(hits, n - 2);
  ck_assert_int_eq(misses, 2);
  ck_assert_msg(strstr(err, "2 corrupt cache entries ignored") != NULL, "%s", err);
  free(err);
  assert_same_file(cold, again);
  err = nimble_expect(0, "compile", model, "-v", "-o", again, NULL);
  cache_counts(err, &hits, &misses);
  ck_assert_int_eq(hits, n);
  ck_assert_ptr_null(strstr(err, "corrupt"));
  /* Every kernel a hit, so the link was found in the cache too. */
  ck_assert_msg(strstr(err, "link ") && strstr(err, "(cached)"), "%s", err);
  free(err);
  assert_same_file(cold, again);
  nimble_executable *exe = NULL;
  ck_assert_ptr_null(nimble_executable_load_file(again, &exe));
  ck_assert_int_gt(dt_run_reference_cases(exe, "cnn"), 0);
  nimble_executable_release(exe);
  free(model);
  free(cold);
  free(again);
}
END_TEST

START_TEST(test_no_kernel_cache_neither_reads_nor_writes_the_cache) {
  char *model = dt_models_path("mlp.onnx");
  char *out = path_in(g_tmp, "m.nimble");
  char *err = nimble_expect(0, "compile", model, "--no-kernel-cache", "-v", "-o", out, NULL);
  ck_assert_msg(strstr(err, "kernel cache: off") != NULL, "%s", err);
  free(err);
  struct stat st;
  ck_assert_int_ne(stat(g_cache, &st), 0);
  /* A warm cache is not read either: every kernel is built. */
  free(nimble_expect(0, "compile", model, "-o", out, NULL));
  char paths[64][512];
  ck_assert_int_gt(entries(paths, 64), 0);
  err = nimble_expect(0, "compile", model, "--no-kernel-cache", "-v", "-o", out, NULL);
  ck_assert_msg(strstr(err, "kernel cache: off") != NULL, "%s", err);
  free(err);
  free(model);
  free(out);
}
END_TEST

/* What a compile reported: the "codegen" percents through the progress
 * function and every codegen_progress call. */
typedef struct progress_log {
  int percents[512];
  int n_percents;
  size_t done[512], total[512], cached[512];
  int n_calls;
} progress_log;

static void log_phase(void *user, const char *phase, int percent) {
  progress_log *l = user;
  if (strcmp(phase, "codegen") == 0 && l->n_percents < 512) l->percents[l->n_percents++] = percent;
}

static void log_kernel(void *user, size_t done, size_t total, size_t cached) {
  progress_log *l = user;
  if (l->n_calls >= 512) return;
  l->done[l->n_calls] = done;
  l->total[l->n_calls] = total;
  l->cached[l->n_calls] = cached;
  l->n_calls++;
}

/* Compiles cnn with the cache and two threads; checks the log against the
 * kernel count: one call per kernel, done counting 1..n, cached never
 * falling and ending at want_cached(n), and the codegen percents 0, then
 * done * 100 / n capped at 99 for each kernel, then 100. */
static void check_codegen_progress(nimble_kernel_cache_t *cache, bool warm) {
  char *model = dt_models_path("cnn.onnx");
  progress_log l;
  memset(&l, 0, sizeof l);
  nimble_compile_options_t o;
  nimble_compile_options_init(&o);
  o.kernel_cache = cache;
  o.jobs = 2;
  o.progress = log_phase;
  o.codegen_progress = log_kernel;
  o.progress_user = &l;
  nimble_compile_result *r = NULL;
  ck_assert_ptr_null(nimble_compile_file(model, &o, &r));
  size_t n = nimble_compile_result_num_kernels(r);
  nimble_compile_result_destroy(r);
  ck_assert_uint_ge(n, 2);
  ck_assert_int_eq(l.n_calls, (int)n);
  for (int i = 0; i < l.n_calls; i++) {
    ck_assert_uint_eq(l.done[i], (size_t)i + 1);
    ck_assert_uint_eq(l.total[i], n);
    if (i) ck_assert_uint_ge(l.cached[i], l.cached[i - 1]);
    ck_assert_uint_le(l.cached[i], l.done[i]);
  }
  ck_assert_uint_eq(l.cached[n - 1], warm ? n : 0);
  ck_assert_int_eq(l.n_percents, (int)n + 2);
  ck_assert_int_eq(l.percents[0], 0);
  for (size_t i = 1; i <= n; i++) {
    int want = (int)(i * 100 / n);
    ck_assert_int_eq(l.percents[i], want > 99 ? 99 : want);
  }
  ck_assert_int_eq(l.percents[n + 1], 100);
  free(model);
}

START_TEST(test_codegen_progress_counts_kernels_as_they_finish_and_cache_hits) {
  nimble_kernel_cache_t *cache = NULL;
  ck_assert_ptr_null(nimble_kernel_cache_open_local(g_cache, &cache));
  check_codegen_progress(cache, false); /* cold: every kernel compiled */
  check_codegen_progress(cache, true);  /* warm: every kernel a hit */
  nimble_kernel_cache_destroy(cache);
}
END_TEST

START_TEST(test_bad_job_counts_are_usage_errors) {
  char *model = dt_models_path("mlp.onnx");
  char *out = path_in(g_tmp, "m.nimble");
  char *err = nimble_expect(2, "compile", model, "-j0", "-o", out, NULL);
  ck_assert_msg(strstr(err, "-j '0': expected 1 to 256 threads") != NULL, "%s", err);
  free(err);
  err = nimble_expect(2, "compile", model, "--jobs", "many", "-o", out, NULL);
  ck_assert_msg(strstr(err, "--jobs 'many'") != NULL, "%s", err);
  free(err);
  err = nimble_expect(2, "compile", model, "-o", out, "-j", NULL);
  ck_assert_msg(strstr(err, "needs a value") != NULL, "%s", err);
  free(err);
  free(model);
  free(out);
}
END_TEST

int main(void) {
  Suite *s = suite_create("kernel_cache");
  TCase *tc = tcase_create("cache");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_the_local_cache_returns_what_was_put_and_misses_other_keys);
  tcase_add_test(tc, test_a_damaged_entry_is_a_miss_and_never_returned);
  tcase_add_test(tc, test_one_or_two_threads_and_a_second_run_give_the_same_bytes);
  tcase_add_test(tc, test_a_warm_cache_gives_the_same_executable_and_the_reference_outputs);
  tcase_add_test(tc, test_corrupt_cache_entries_are_ignored_rebuilt_and_healed);
  tcase_add_test(tc, test_no_kernel_cache_neither_reads_nor_writes_the_cache);
  tcase_add_test(tc, test_bad_job_counts_are_usage_errors);
  tcase_add_test(tc, test_codegen_progress_counts_kernels_as_they_finish_and_cache_hits);
  suite_add_tcase(s, tc);
  TCase *large = tcase_create("cache_large");
  tcase_set_tags(large, NIMBLE_TAG_LARGE);
  tcase_add_checked_fixture(large, setup, teardown);
  tcase_set_timeout(large, 600);
  tcase_add_test(large, test_one_or_two_threads_and_a_second_run_give_the_same_bytes_for_bert);
  tcase_add_test(large, test_a_warm_cache_gives_the_same_executable_and_the_reference_outputs_for_bert);
  suite_add_tcase(s, large);
  return nimble_test_run(s);
}
