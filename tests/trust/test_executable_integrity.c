/* Trust what you run (issue #16): a compiled `.nimble` file with any one
 * byte flipped is refused, never run and never a crash, with the place
 * named; so is a parts directory with one flipped part byte; and
 * `nimble compile --sign` / `nimble-run --require-signature` accept the
 * signed file only under its own key.
 *
 * The executable is the real user's path: `nimble compile` of
 * tests/compiler/driver/programs/dense_bias_relu.nir (relu(x @ w + b) with
 * the constant b = {1, -2, 0.5}), run in-process through the loader and as
 * a `nimble-run` process. Expectations are independent of the loader's
 * code: the section table is read here from the documented layout
 * (docs/executable.md), outputs are computed by hand, exit codes are
 * nimble-run's documented ones (0 ran, 1 refused, 2 usage). */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "format/layout.h"
#include "nimble/fetch.h"
#include "nimble/runtime.h"
#include "nimble_test.h"

static char g_dir[256];
static int g_in_setup; /* outside any test case: failures print and exit */

#define NEED(cond, ...)                                 \
  do {                                                  \
    if (!g_in_setup) {                                  \
      ck_assert_msg(cond, __VA_ARGS__);                 \
    } else if (!(cond)) {                               \
      fprintf(stderr, "set-up failed: " __VA_ARGS__);   \
      fprintf(stderr, "\n");                            \
      exit(1);                                          \
    }                                                   \
  } while (0)

static char *path_of(const char *name) {
  static char bufs[8][512];
  static int next;
  char *p = bufs[next++ % 8];
  if (snprintf(p, 512, "%s/%s", g_dir, name) >= 512) abort();
  return p;
}

/* Runs a shell command; returns its exit code (-1 when killed by a
 * signal, which the checks below treat as a failure) and its output. */
static int sh(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sh(char *out, size_t size, const char *fmt, ...) {
  char cmd[16384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
  FILE *p = popen(cmd, "r");
  NEED(p != NULL, "popen");
  size_t n = fread(out, 1, size - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static uint8_t *read_all(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  NEED(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *d = malloc((size_t)n + 1);
  NEED(fread(d, 1, (size_t)n, f) == (size_t)n, "cannot read %s", path);
  fclose(f);
  *size = (size_t)n;
  return d;
}

static void write_all(const char *path, const void *d, size_t n) {
  FILE *f = fopen(path, "wb");
  NEED(f != NULL, "cannot create %s", path);
  NEED(fwrite(d, 1, n, f) == n, "cannot write %s", path);
  fclose(f);
}

/* A little-endian float32 .npy of `shape`. */
static void write_npy(const char *path, const float *v, int rows, int cols) {
  char header[128];
  int n = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows,
                   cols);
  int total = 10 + n + 1;
  int pad = (64 - total % 64) % 64;
  FILE *f = fopen(path, "wb");
  NEED(f != NULL, "cannot create %s", path);
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  uint16_t hl = (uint16_t)(n + pad + 1);
  fputc(hl & 0xff, f);
  fputc(hl >> 8, f);
  fwrite(header, 1, (size_t)n, f);
  for (int i = 0; i < pad; i++) fputc(' ', f);
  fputc('\n', f);
  fwrite(v, sizeof(float), (size_t)(rows * cols), f);
  fclose(f);
}

/* The inputs and the hand-computed relu(x @ w + b). */
enum { N = 5 };
static float g_x[N * 4], g_w[4 * 3], g_want[N * 3];

static void make_inputs(void) {
  for (int i = 0; i < N * 4; i++) g_x[i] = (float)((i * 7) % 11) * 0.25f - 1.0f;
  for (int i = 0; i < 12; i++) g_w[i] = (float)((i * 5) % 7) * 0.5f - 1.5f;
  const float b[3] = {1.0f, -2.0f, 0.5f};
  for (int r = 0; r < N; r++)
    for (int c = 0; c < 3; c++) {
      float acc = b[c];
      for (int k = 0; k < 4; k++) acc += g_x[r * 4 + k] * g_w[k * 3 + c];
      g_want[r * 3 + c] = acc > 0 ? acc : 0;
    }
  write_npy(path_of("x.npy"), g_x, N, 4);
  write_npy(path_of("w.npy"), g_w, 4, 3);
}

/* nimble-run on `model` with the inputs, the output to y.npy (removed
 * first); `extra` is more arguments. */
static int run_model(const char *model, const char *extra, char *out, size_t size) {
  unlink(path_of("y.npy"));
  return sh(out, size, "'%s' '%s' --input x='%s' --input w='%s' --output output0='%s' %s", NIMBLE_RUN_PATH, model,
            path_of("x.npy"), path_of("w.npy"), path_of("y.npy"), extra ? extra : "");
}

/* y.npy holds the hand-computed values. */
static void expect_output_right(void) {
  size_t n;
  uint8_t *d = read_all(path_of("y.npy"), &n);
  ck_assert_int_ge(n, 10 + sizeof g_want);
  uint16_t hl = (uint16_t)(d[8] | d[9] << 8);
  ck_assert_msg(strstr((char *)d + 10, "(5, 3)") != NULL, "y.npy shape");
  ck_assert_int_eq(n, 10 + hl + sizeof g_want);
  float got[N * 3];
  memcpy(got, d + 10 + hl, sizeof got);
  for (int i = 0; i < N * 3; i++) ck_assert_float_eq_tol(got[i], g_want[i], 1e-5f);
  free(d);
}

/* ---- The section table, read from the documented layout ------------------ */

typedef struct section {
  uint32_t kind;
  size_t offset, size;
} section;

static const char *kind_name(uint32_t kind) {
  static const char *names[] = {"?", "metadata", "bytecode", "constants", "cpu kernels", "cuda kernels",
                                "signature"};
  return kind < 7 ? names[kind] : "?";
}

static uint32_t read_table(const uint8_t *img, section *out) {
  uint32_t count;
  memcpy(&count, img + 12, 4);
  ck_assert_uint_le(count, 16);
  for (uint32_t i = 0; i < count; i++) {
    const uint8_t *e = img + 56 + 24 * (size_t)i;
    uint64_t o, s;
    memcpy(&out[i].kind, e, 4);
    memcpy(&o, e + 8, 8);
    memcpy(&s, e + 16, 8);
    out[i].offset = (size_t)o;
    out[i].size = (size_t)s;
  }
  return count;
}

/* What a flipped byte at `pos` must be refused with. */
static void expected_refusal(const section *secs, uint32_t count, size_t pos, char *want, size_t n) {
  size_t table_end = 56 + 24 * (size_t)count;
  if (pos < 8) snprintf(want, n, "bad magic");
  else if (pos < 12) snprintf(want, n, "format version");
  else if (pos < 16) snprintf(want, n, "%s", ""); /* the section count: any refusal */
  else if (pos < 24) snprintf(want, n, "the header says");
  else if (pos < table_end)
    snprintf(want, n, "executable header and section table (offset 0, %zu bytes): digest mismatch", table_end);
  else {
    snprintf(want, n, "padding between sections");
    for (uint32_t i = 0; i < count; i++) {
      if (pos < secs[i].offset || pos >= secs[i].offset + secs[i].size) continue;
      if (pos - secs[i].offset < 16) /* the part header: its fields are named */
        snprintf(want, n, "%s at offset", kind_name(secs[i].kind));
      else
        snprintf(want, n, "%s section (offset %zu, %zu bytes): digest mismatch", kind_name(secs[i].kind),
                 secs[i].offset, secs[i].size);
    }
  }
}

/* ---- In-process: every byte ---------------------------------------------- */

START_TEST(test_the_compiled_file_loads_and_computes_the_hand_computed_values) {
  nimble_executable *exe = NULL;
  NIMBLE_ASSERT_OK(nimble_executable_load_file(path_of("plain.nimble"), &exe));
  ck_assert_uint_eq(nimble_executable_format_version(exe), 2);
  nimble_vm *vm = NULL;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  int64_t xs[2] = {N, 4}, ws[2] = {4, 3};
  DLTensor tx = {.data = g_x, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = xs};
  DLTensor tw = {.data = g_w, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = ws};
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &tx));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &tw));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *y = NULL;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &y));
  const float *got = (const float *)((char *)y->dl_tensor.data + y->dl_tensor.byte_offset);
  for (int i = 0; i < N * 3; i++) ck_assert_float_eq_tol(got[i], g_want[i], 1e-5f);
  y->deleter(y);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_every_flipped_byte_of_a_compiled_file_is_refused_naming_its_place) {
  size_t size;
  uint8_t *img = read_all(path_of("plain.nimble"), &size);
  section secs[16];
  uint32_t count = read_table(img, secs);
  ck_assert_uint_ge(count, 4); /* metadata, bytecode, constants, cpu kernels */
  int seen[7] = {0};
  uint8_t *bad = malloc(size);
  for (size_t pos = 0; pos < size; pos++) {
    /* Every byte with all its bits flipped, and every 7th with its low bit
     * only (the smallest change). */
    for (int round = 0; round < (pos % 7 == 0 ? 2 : 1); round++) {
      memcpy(bad, img, size);
      bad[pos] ^= round ? 0x01 : 0xFF;
      nimble_executable *exe = NULL;
      nimble_status_t s = nimble_executable_load_memory(bad, size, 0, &exe);
      ck_assert_msg(s != NULL, "byte %zu flipped (^0x%02x): the file loaded", pos, round ? 1 : 0xff);
      char want[160];
      expected_refusal(secs, count, pos, want, sizeof want);
      ck_assert_msg(strstr(nimble_status_message(s), want) != NULL, "byte %zu: '%s' lacks '%s'", pos,
                    nimble_status_message(s), want);
      nimble_status_free(s);
    }
    for (uint32_t i = 0; i < count; i++)
      if (pos >= secs[i].offset && pos < secs[i].offset + secs[i].size && secs[i].kind < 7) seen[secs[i].kind]++;
  }
  /* The sweep covered every section the compiler writes. */
  for (int k = 1; k <= 4; k++) ck_assert_msg(seen[k] > 0, "no byte of the %s section", kind_name((uint32_t)k));
  free(bad);
  free(img);
}
END_TEST

/* ---- nimble-run processes: a sample in every section ---------------------- */

START_TEST(test_nimble_run_exits_1_naming_the_section_for_a_flipped_byte_anywhere) {
  char out[8192];
  ck_assert_int_eq(run_model(path_of("plain.nimble"), NULL, out, sizeof out), 0);
  expect_output_right();
  size_t size;
  uint8_t *img = read_all(path_of("plain.nimble"), &size);
  section secs[16];
  uint32_t count = read_table(img, secs);
  size_t positions[128], n = 0;
  positions[n++] = 2;                      /* magic */
  positions[n++] = 30;                     /* header digest */
  positions[n++] = 56 + 24 + 9;            /* a section offset in the table */
  positions[n++] = 56 + 24 * count;        /* padding after the table */
  for (uint32_t i = 0; i < count; i++) {
    positions[n++] = secs[i].offset + 5;                 /* part header */
    positions[n++] = secs[i].offset + 16;                /* first byte after it */
    positions[n++] = secs[i].offset + secs[i].size / 2;  /* the middle */
    positions[n++] = secs[i].offset + secs[i].size - 33; /* last content byte */
    positions[n++] = secs[i].offset + secs[i].size - 1;  /* its digest */
  }
  uint8_t *bad = malloc(size);
  for (size_t k = 0; k < n; k++) {
    memcpy(bad, img, size);
    bad[positions[k]] ^= 0x20;
    write_all(path_of("bad.nimble"), bad, size);
    int rc = run_model(path_of("bad.nimble"), NULL, out, sizeof out);
    char want[160];
    expected_refusal(secs, count, positions[k], want, sizeof want);
    ck_assert_msg(rc == 1, "byte %zu: exit %d (want 1: refused; -1 is a signal): %s", positions[k], rc, out);
    ck_assert_msg(strncmp(out, "nimble-run: ", 12) == 0 && strstr(out, want) != NULL,
                  "byte %zu: '%s' lacks '%s'", positions[k], out, want);
    ck_assert_msg(access(path_of("y.npy"), F_OK) != 0, "byte %zu: an output was written", positions[k]);
  }
  free(bad);
  free(img);
}
END_TEST

/* ---- A parts directory ----------------------------------------------------- */

START_TEST(test_a_parts_directory_with_one_flipped_part_byte_is_refused) {
  char out[8192], dir[512];
  snprintf(dir, sizeof dir, "%s", path_of("parts"));
  ck_assert_int_eq(run_model(dir, NULL, out, sizeof out), 0);
  expect_output_right();
  static const struct {
    const char *file, *name;
  } parts[] = {{"metadata", "metadata"}, {"bytecode", "bytecode"}, {"constants", "constants"},
               {"kernels", "cpu kernels"}};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, parts[i].file);
    size_t size;
    uint8_t *d = read_all(path, &size);
    size_t positions[3] = {20, size / 2, size - 1};
    for (int k = 0; k < 3; k++) {
      d[positions[k]] ^= 0x01;
      write_all(path, d, size);
      int rc = run_model(dir, NULL, out, sizeof out);
      char want[160];
      snprintf(want, sizeof want, "%s part (offset 0, %zu bytes): digest mismatch", parts[i].name, size);
      ck_assert_msg(rc == 1 && strstr(out, want) != NULL, "%s byte %zu: exit %d, '%s' lacks '%s'", parts[i].file,
                    positions[k], rc, out, want);
      /* The same through the API. */
      nimble_executable_part_t *ps;
      size_t np;
      nimble_executable *exe = NULL;
      NIMBLE_ASSERT_OK(nimble_executable_read_part_dir(dir, &ps, &np));
      NIMBLE_ASSERT_ERROR(nimble_executable_load_parts(ps, np, 0, &exe), NIMBLE_DATA_LOSS, want);
      nimble_executable_parts_free(ps, np);
      d[positions[k]] ^= 0x01;
      write_all(path, d, size);
    }
    free(d);
  }
  ck_assert_int_eq(run_model(dir, NULL, out, sizeof out), 0);
  expect_output_right();
}
END_TEST

/* ---- Signatures ------------------------------------------------------------ */

static char g_pub1[65], g_pub2[65];

START_TEST(test_require_signature_runs_the_file_signed_by_a_trusted_key_only) {
  char out[8192], extra[8400];
  snprintf(extra, sizeof extra, "--require-signature --trusted-keys '%s'", path_of("pub1.txt"));
  /* Signed by key 1, trusted: runs and computes. */
  ck_assert_msg(run_model(path_of("signed1.nimble"), extra, out, sizeof out) == 0, "%s", out);
  expect_output_right();
  /* The same from $NIMBLE_TRUSTED_KEYS. */
  char env_run[9000];
  snprintf(env_run, sizeof env_run, "NIMBLE_TRUSTED_KEYS='%s' '%s' '%s' --require-signature --input x='%s' --input w='%s'",
           path_of("pub1.txt"), NIMBLE_RUN_PATH, path_of("signed1.nimble"), path_of("x.npy"), path_of("w.npy"));
  ck_assert_msg(sh(out, sizeof out, "cd '%s' && %s", g_dir, env_run) == 0, "%s", out);
  /* Unsigned: refused, naming the file and the trusted keys. */
  int rc = run_model(path_of("plain.nimble"), extra, out, sizeof out);
  ck_assert_msg(rc == 1 && strstr(out, "plain.nimble") && strstr(out, "not signed") && strstr(out, "pub1.txt"),
                "exit %d: %s", rc, out);
  /* Signed by key 2, not trusted: refused naming key 2. */
  rc = run_model(path_of("signed2.nimble"), extra, out, sizeof out);
  char want[200];
  snprintf(want, sizeof want, "signed by key %s, which is not one of the trusted keys", g_pub2);
  ck_assert_msg(rc == 1 && strstr(out, "signed2.nimble") && strstr(out, want), "exit %d: %s", rc, out);
  /* Without --require-signature a signed file runs like any other. */
  ck_assert_msg(run_model(path_of("signed2.nimble"), NULL, out, sizeof out) == 0, "%s", out);
  expect_output_right();
  /* --require-signature without trusted keys is a usage error. */
  rc = sh(out, sizeof out, "env -u NIMBLE_TRUSTED_KEYS '%s' '%s' --require-signature --input x='%s' --input w='%s'",
          NIMBLE_RUN_PATH, path_of("signed1.nimble"), path_of("x.npy"), path_of("w.npy"));
  ck_assert_msg(rc == 2 && strstr(out, "trusted keys"), "exit %d: %s", rc, out);
  /* A signed parts directory: the signature part travels with the parts. */
  ck_assert_msg(run_model(path_of("parts"), extra, out, sizeof out) == 0, "%s", out);
  expect_output_right();
  ck_assert_int_ne(strcmp(g_pub1, g_pub2), 0);
}
END_TEST

START_TEST(test_a_signed_file_with_a_flipped_byte_is_refused) {
  char out[8192], extra[8400];
  snprintf(extra, sizeof extra, "--require-signature --trusted-keys '%s'", path_of("pub1.txt"));
  size_t size;
  uint8_t *img = read_all(path_of("signed1.nimble"), &size);
  section secs[16];
  uint32_t count = read_table(img, secs);
  ck_assert_uint_eq(secs[count - 1].kind, NIMBLE_PART_SIGNATURE);
  uint8_t *bad = malloc(size);
  for (uint32_t i = 0; i < count; i++) {
    memcpy(bad, img, size);
    size_t pos = secs[i].offset + secs[i].size / 2;
    bad[pos] ^= 0x04;
    write_all(path_of("bad-signed.nimble"), bad, size);
    int rc = run_model(path_of("bad-signed.nimble"), extra, out, sizeof out);
    char want[160];
    expected_refusal(secs, count, pos, want, sizeof want);
    ck_assert_msg(rc == 1 && strstr(out, want), "%s byte %zu: exit %d, '%s' lacks '%s'", kind_name(secs[i].kind),
                  pos, rc, out, want);
  }
  /* A forger who recomputes every digest after changing a constant still
   * fails: the signature no longer verifies. The constants' data area is
   * the last 64-byte block before the part's digest here (b is 12 bytes). */
  nimble_signature_policy *policy;
  NIMBLE_ASSERT_OK(nimble_signature_policy_create(path_of("pub1.txt"), NULL, &policy));
  for (uint32_t i = 0; i < count; i++) {
    if (secs[i].kind != NIMBLE_PART_CONSTANTS) continue;
    memcpy(bad, img, size);
    bad[secs[i].offset + secs[i].size - 32 - 64 + 3] ^= 0x80; /* the sign of b[0] = 1.0f */
    nimble_image_reseal(bad, size);
    nimble_executable *exe = NULL;
    /* Without a policy the resealed file loads: only the signature tells. */
    NIMBLE_ASSERT_OK(nimble_executable_load_memory(bad, size, NIMBLE_LOAD_NO_KERNELS, &exe));
    nimble_executable_release(exe);
    exe = NULL;
    char want[200];
    snprintf(want, sizeof want, "the signature by key %s does not verify", g_pub1);
    NIMBLE_ASSERT_ERROR(nimble_executable_load_memory_checked(bad, size, 0, nimble_signature_policy_check, policy, &exe),
                        NIMBLE_PERMISSION_DENIED, want);
    ck_assert_ptr_null(exe);
  }
  nimble_signature_policy_destroy(policy);
  free(bad);
  free(img);
}
END_TEST

/* ---- Set-up: compile once ---------------------------------------------------- */

static void read_pub(const char *file, char out[65]) {
  size_t n;
  uint8_t *d = read_all(path_of(file), &n);
  NEED(n > 8 + 64 && memcmp(d, "ed25519 ", 8) == 0, "%s: %.*s", file, (int)n, d);
  memcpy(out, d + 8, 64);
  out[64] = 0;
  free(d);
}

static void compile_all(void) {
  char out[65536];
  const char *src = NIMBLE_SOURCE_DIR_PATH "/tests/compiler/driver/programs/dense_bias_relu.nir";
  NEED(sh(out, sizeof out, "'%s' keys generate '%s' one > '%s'", NIMBLE_CLI_PATH, path_of("k1.key"),
                   path_of("pub1.txt")) == 0, "%s", out);
  NEED(sh(out, sizeof out, "'%s' keys generate '%s' two > '%s'", NIMBLE_CLI_PATH, path_of("k2.key"),
                   path_of("pub2.txt")) == 0, "%s", out);
  read_pub("pub1.txt", g_pub1);
  read_pub("pub2.txt", g_pub2);
  NEED(sh(out, sizeof out, "'%s' compile '%s' --target=x86 -o '%s'", NIMBLE_CLI_PATH, src,
                   path_of("plain.nimble")) == 0, "%s", out);
  NEED(sh(out, sizeof out, "'%s' compile '%s' --target=x86 -o '%s' --emit-parts '%s' --sign '%s'",
                   NIMBLE_CLI_PATH, src, path_of("signed1.nimble"), path_of("parts"), path_of("k1.key")) == 0,
                "%s", out);
  NEED(sh(out, sizeof out, "'%s' compile '%s' --target=x86 -o '%s' --sign '%s'", NIMBLE_CLI_PATH, src,
                   path_of("signed2.nimble"), path_of("k2.key")) == 0, "%s", out);
  make_inputs();
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "%s", "/tmp/nimble-trust-XXXXXX");
  if (!mkdtemp(g_dir)) return 1;
  Suite *s = suite_create("executable_integrity");
  TCase *tc = tcase_create("trust");
  tcase_set_timeout(tc, 600);
  /* The compiles run once, before the (forked) cases that use them. */
  g_in_setup = 1;
  compile_all();
  g_in_setup = 0;
  tcase_add_test(tc, test_the_compiled_file_loads_and_computes_the_hand_computed_values);
  tcase_add_test(tc, test_every_flipped_byte_of_a_compiled_file_is_refused_naming_its_place);
  tcase_add_test(tc, test_nimble_run_exits_1_naming_the_section_for_a_flipped_byte_anywhere);
  tcase_add_test(tc, test_a_parts_directory_with_one_flipped_part_byte_is_refused);
  tcase_add_test(tc, test_require_signature_runs_the_file_signed_by_a_trusted_key_only);
  tcase_add_test(tc, test_a_signed_file_with_a_flipped_byte_is_refused);
  suite_add_tcase(s, tc);
  int rc = nimble_test_run(s);
  char out[256];
  g_in_setup = 1;
  sh(out, sizeof out, "rm -rf '%s'", g_dir);
  return rc;
}
