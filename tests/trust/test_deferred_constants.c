/* Trust what you run, at the cost of what you use (issue #16): a compiled
 * executable whose constants span several 1 MiB chunks carries their chunk
 * digests (part kind 7), and a mapped load verifies the weights on first
 * use instead of all at load (docs/executable.md, "Chunk digests").
 *
 * The executable is the real user's path: `nimble compile` of a program
 * written here, y = x @ W with a 1024 x 1024 float32 constant W (4 MiB, so
 * the constants part has 5 chunks) of small integers, whose product with
 * small integer inputs is exact in float32 and computed here by hand.
 * Section offsets are read from the documented layout, chunk digests with
 * base's SHA-256 over the documented chunking; exit codes are nimble-run's
 * documented ones (0 ran, 1 refused). */
#include <check.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "format/layout.h"
#include "nimble/digest.h"
#include "nimble/runtime.h"
#include "nimble_test.h"

enum { ROWS = 2, K = 1024, M = 1024, MIB = 1 << 20 };

/* nimble-run MODEL with x from X, output 0 to Y, and one more option. */
#define RUN_CMD "'" NIMBLE_RUN_PATH "' '%s' --input x='%s' --output output0='%s' %s"

static char g_dir[256];
static float g_x[ROWS * K], g_want[ROWS * M];

static char *path_of(const char *name) {
  static char bufs[8][512];
  static int next;
  char *p = bufs[next++ % 8];
  if (snprintf(p, 512, "%s/%s", g_dir, name) >= 512) abort();
  return p;
}

static void die_unless(int cond, const char *what) {
  if (!cond) {
    fprintf(stderr, "set-up failed: %s\n", what);
    exit(1);
  }
}

/* Runs a shell command; its exit code (-1 for a signal) and output. */
static int sh(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sh(char *out, size_t size, const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t n = fread(out, 1, size - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* 64-byte aligned, as a borrowed image must be for its constants to be
 * used in place (else the loader copies them, checking every byte). */
static uint8_t *read_all(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *d = aligned_alloc(64, ((size_t)n + 64) / 64 * 64);
  ck_assert(fread(d, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  *size = (size_t)n;
  return d;
}

static void write_all(const char *path, const void *d, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_msg(f != NULL, "cannot create %s", path);
  ck_assert(fwrite(d, 1, n, f) == n);
  fclose(f);
}

static float w_at(int k, int m) { return (float)((k * 7 + m * 3) % 17 - 8); }

/* The section of `kind` in an image: its offset and size (0 when absent). */
static size_t section_of(const uint8_t *img, uint32_t kind, size_t *size) {
  uint32_t count;
  memcpy(&count, img + 12, 4);
  for (uint32_t i = 0; i < count && i < 16; i++) {
    const uint8_t *e = img + 56 + 24 * (size_t)i;
    uint32_t k;
    uint64_t o, s;
    memcpy(&k, e, 4);
    memcpy(&o, e + 8, 8);
    memcpy(&s, e + 16, 8);
    if (k == kind) {
      *size = (size_t)s;
      return (size_t)o;
    }
  }
  *size = 0;
  return 0;
}

/* ---- Invoking in-process -------------------------------------------------- */

/* Invokes main on g_x; NULL and the output checked against the hand-computed
 * values, or the invoke's status (and then no output may be taken). */
static nimble_status_t invoke_checked(nimble_executable *exe) {
  nimble_vm *vm = NULL;
  nimble_status_t s = nimble_vm_create(exe, NULL, &vm);
  if (s) return s;
  int64_t xs[2] = {ROWS, K};
  DLTensor tx = {.data = g_x, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = xs};
  s = nimble_vm_set_input(vm, "main", 0, &tx);
  if (!s) s = nimble_vm_invoke(vm, "main");
  DLManagedTensor *y = NULL;
  if (s) {
    nimble_status_t t = nimble_vm_take_output(vm, 0, &y);
    ck_assert_msg(t != NULL, "a failed invoke gave an output");
    nimble_status_free(t);
  } else {
    NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &y));
    ck_assert_int_eq(y->dl_tensor.shape[0], ROWS);
    ck_assert_int_eq(y->dl_tensor.shape[1], M);
    const float *got = (const float *)((char *)y->dl_tensor.data + y->dl_tensor.byte_offset);
    for (int i = 0; i < ROWS * M; i++) ck_assert_msg(got[i] == g_want[i], "y[%d] = %g, want %g", i, got[i], g_want[i]);
    y->deleter(y);
  }
  nimble_vm_destroy(vm);
  return s;
}

/* The message a weight byte flipped at file offset `pos` fails with. */
static void chunk_message(const uint8_t *img, size_t pos, char *want, size_t n) {
  size_t csize, coff = section_of(img, NIMBLE_PART_CONSTANTS, &csize);
  size_t chunks = (csize - 32 + MIB - 1) / MIB, c = (pos - coff) / MIB;
  size_t end = (c + 1) * (size_t)MIB < csize - 32 ? (c + 1) * (size_t)MIB : csize - 32;
  snprintf(want, n, "constants section (offset %zu, %zu bytes): chunk %zu of %zu, bytes [%zu, %zu) of the section: "
           "digest mismatch", coff, csize, c, chunks, c * (size_t)MIB, end);
}

START_TEST(test_a_large_constants_part_carries_the_digests_of_its_chunks) {
  size_t size, csize, lsize;
  uint8_t *img = read_all(path_of("big.nimble"), &size);
  size_t coff = section_of(img, NIMBLE_PART_CONSTANTS, &csize);
  size_t loff = section_of(img, NIMBLE_PART_CHUNK_DIGESTS, &lsize);
  ck_assert_uint_gt(loff, 0);
  size_t chunks = (csize - 32 + MIB - 1) / MIB;
  ck_assert_uint_eq(chunks, 5); /* 4 MiB of W and the table */
  /* header, covered kind 3, flags, count, the list, the table's size and
   * digest, its own digest */
  ck_assert_uint_eq(lsize, 16 + 16 + 32 * chunks + 8 + 32 + 32);
  uint32_t kind, flags;
  uint64_t count, table_size, data_offset;
  memcpy(&kind, img + loff + 16, 4);
  memcpy(&flags, img + loff + 20, 4);
  memcpy(&count, img + loff + 24, 8);
  ck_assert_uint_eq(kind, 3);
  ck_assert_uint_eq(flags, 1); /* the table's digest follows the list */
  ck_assert_uint_eq(count, chunks);
  /* The table: the constants part up to its data area. */
  memcpy(&table_size, img + loff + 32 + 32 * chunks, 8);
  memcpy(&data_offset, img + coff + 24, 8);
  ck_assert_uint_eq(table_size, data_offset);
  ck_assert_uint_lt(table_size, 4096); /* one constant: a few bytes, not its chunk */
  nimble_digest_t td;
  nimble_digest_compute(img + coff, (size_t)table_size, &td);
  ck_assert_msg(memcmp(td.bytes, img + loff + 32 + 32 * chunks + 8, 32) == 0, "the table's digest");
  for (size_t c = 0; c < chunks; c++) {
    size_t len = c + 1 < chunks ? (size_t)MIB : csize - 32 - c * MIB;
    nimble_digest_t d;
    nimble_digest_compute(img + coff + c * MIB, len, &d);
    ck_assert_msg(memcmp(d.bytes, img + loff + 32 + 32 * c, 32) == 0, "chunk %zu's digest", c);
  }
  /* The list is not part of the executable digest: the parts directory
   * (which has no list) names the same executable. */
  nimble_executable *exe = NULL, *parts_exe = NULL;
  NIMBLE_ASSERT_OK(nimble_executable_load_file(path_of("big.nimble"), &exe));
  nimble_executable_part_t *ps;
  size_t np;
  NIMBLE_ASSERT_OK(nimble_executable_read_part_dir(path_of("parts"), &ps, &np));
  for (size_t i = 0; i < np; i++) ck_assert_int_ne(ps[i].kind, NIMBLE_PART_CHUNK_DIGESTS);
  NIMBLE_ASSERT_OK(nimble_executable_load_parts(ps, np, 0, &parts_exe));
  char a[72], b[72];
  nimble_executable_digest(exe, a);
  nimble_executable_digest(parts_exe, b);
  ck_assert_str_eq(a, b);
  nimble_executable_parts_free(ps, np);
  nimble_executable_release(parts_exe);
  nimble_executable_release(exe);
  free(img);
}
END_TEST

START_TEST(test_the_deferred_load_computes_the_hand_computed_values) {
  nimble_executable *exe = NULL;
  NIMBLE_ASSERT_OK(nimble_executable_load_file(path_of("big.nimble"), &exe));
  NIMBLE_ASSERT_OK(invoke_checked(exe));
  NIMBLE_ASSERT_OK(invoke_checked(exe)); /* verified chunks stay verified */
  nimble_executable_release(exe);
  NIMBLE_ASSERT_OK(nimble_executable_load_file_flags(path_of("big.nimble"), NIMBLE_LOAD_VERIFY_ALL, &exe));
  NIMBLE_ASSERT_OK(invoke_checked(exe));
  nimble_executable_release(exe);
}
END_TEST

/* File offsets of flipped weight bytes: the first byte of chunks 1 and 2,
 * the middle of chunk 3 and the last byte of W (in chunk 4, the short one). */
static size_t weight_positions(const uint8_t *img, size_t *pos) {
  size_t csize, coff = section_of(img, NIMBLE_PART_CONSTANTS, &csize);
  uint64_t data_offset;
  memcpy(&data_offset, img + coff + 24, 8);
  size_t w_end = coff + (size_t)data_offset + (size_t)K * M * 4;
  ck_assert_uint_le(w_end, coff + csize - 32);
  pos[0] = coff + MIB;
  pos[1] = coff + 2 * (size_t)MIB;
  pos[2] = coff + 3 * (size_t)MIB + MIB / 2;
  pos[3] = w_end - 1;
  return 4;
}

START_TEST(test_a_flipped_weight_byte_fails_the_invoke_naming_the_chunk_and_verify_all_refuses_the_load) {
  size_t size, pos[4];
  uint8_t *img = read_all(path_of("big.nimble"), &size);
  size_t n = weight_positions(img, pos), csize, coff = section_of(img, NIMBLE_PART_CONSTANTS, &csize);
  for (size_t i = 0; i < n; i++) {
    img[pos[i]] ^= 0x40;
    write_all(path_of("bad.nimble"), img, size);
    char want[300];
    chunk_message(img, pos[i], want, sizeof want);
    nimble_executable *exe = NULL;
    NIMBLE_ASSERT_OK(nimble_executable_load_file(path_of("bad.nimble"), &exe));
    NIMBLE_ASSERT_ERROR(invoke_checked(exe), NIMBLE_DATA_LOSS, want);
    NIMBLE_ASSERT_ERROR(invoke_checked(exe), NIMBLE_DATA_LOSS, want); /* and every time */
    nimble_executable_release(exe);
    /* The same bytes borrowed from memory. */
    NIMBLE_ASSERT_OK(nimble_executable_load_memory(img, size, NIMBLE_LOAD_BORROW, &exe));
    NIMBLE_ASSERT_ERROR(invoke_checked(exe), NIMBLE_DATA_LOSS, want);
    nimble_executable_release(exe);
    exe = NULL;
    /* Refused at load: asked to, or copying (the copy reads every byte). */
    char whole[200];
    snprintf(whole, sizeof whole, "constants section (offset %zu, %zu bytes): digest mismatch", coff, csize);
    NIMBLE_ASSERT_ERROR(nimble_executable_load_file_flags(path_of("bad.nimble"), NIMBLE_LOAD_VERIFY_ALL, &exe),
                        NIMBLE_DATA_LOSS, whole);
    NIMBLE_ASSERT_ERROR(nimble_executable_load_memory(img, size, 0, &exe), NIMBLE_DATA_LOSS, whole);
    uint8_t *shifted = aligned_alloc(64, (size + 127) / 64 * 64);
    memcpy(shifted + 16, img, size); /* borrowed, but misaligned: copied */
    NIMBLE_ASSERT_ERROR(nimble_executable_load_memory(shifted + 16, size, NIMBLE_LOAD_BORROW, &exe), NIMBLE_DATA_LOSS,
                        want);
    free(shifted);
    ck_assert_ptr_null(exe);
    img[pos[i]] ^= 0x40;
  }
  /* A byte of chunk 0's data, after the table, is a weight like the others:
   * it loads, and the invoke fails naming chunk 0. */
  uint64_t data_offset;
  memcpy(&data_offset, img + coff + 24, 8);
  size_t early = coff + (size_t)data_offset + 100;
  img[early] ^= 0x01;
  char want[300];
  chunk_message(img, early, want, sizeof want);
  ck_assert_msg(strstr(want, "chunk 0 of 5") != NULL, "%s", want);
  nimble_executable *exe = NULL;
  NIMBLE_ASSERT_OK(nimble_executable_load_memory(img, size, NIMBLE_LOAD_BORROW, &exe));
  NIMBLE_ASSERT_ERROR(invoke_checked(exe), NIMBLE_DATA_LOSS, want);
  nimble_executable_release(exe);
  exe = NULL;
  img[early] ^= 0x01;
  free(img);
}
END_TEST

/* The constants' table (their header and each constant's dtype, shape and
 * place) is read at load, so it is verified at load, alone, against the
 * table digest the chunk list carries. */
START_TEST(test_a_flipped_byte_in_the_constants_table_is_refused_at_load) {
  size_t size, csize;
  uint8_t *img = read_all(path_of("big.nimble"), &size);
  size_t coff = section_of(img, NIMBLE_PART_CONSTANTS, &csize);
  uint64_t data_offset;
  memcpy(&data_offset, img + coff + 24, 8);
  /* The constant count, the first constant's second dim and its byte
   * count, the last padding byte before the data area. */
  size_t pos[] = {coff + 16, coff + 40 + 16 + 8 + 1, coff + 40 + 16 + 16 + 8 + 2, coff + (size_t)data_offset - 1};
  char want[300];
  snprintf(want, sizeof want, "constants section (offset %zu, %zu bytes): its table, bytes [0, %llu) of the "
           "section: digest mismatch", coff, csize, (unsigned long long)data_offset);
  for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++) {
    img[pos[i]] ^= 0x04;
    nimble_executable *exe = NULL;
    NIMBLE_ASSERT_ERROR(nimble_executable_load_memory(img, size, NIMBLE_LOAD_BORROW, &exe), NIMBLE_DATA_LOSS, want);
    ck_assert_ptr_null(exe);
    img[pos[i]] ^= 0x04;
  }
  free(img);
}
END_TEST

/* A list written before the table's digest (flags 0, no table fields: the
 * files of before) still loads, deferring the weights: its table's chunk is
 * hashed at load, so a byte of chunk 0 is refused there. */
START_TEST(test_a_list_without_the_table_digest_still_loads_and_verifies_chunk_0_at_load) {
  size_t size, csize, lsize;
  uint8_t *img = read_all(path_of("big.nimble"), &size);
  size_t coff = section_of(img, NIMBLE_PART_CONSTANTS, &csize);
  size_t loff = section_of(img, NIMBLE_PART_CHUNK_DIGESTS, &lsize);
  ck_assert_uint_eq(loff + lsize, size); /* the last section: the old one is 40 bytes shorter */
  uint32_t count;
  memcpy(&count, img + 12, 4);
  for (uint32_t i = 0; i < count; i++) {
    uint32_t k;
    memcpy(&k, img + 56 + 24 * (size_t)i, 4);
    uint64_t old_size = lsize - 40;
    if (k == NIMBLE_PART_CHUNK_DIGESTS) memcpy(img + 56 + 24 * (size_t)i + 16, &old_size, 8);
  }
  size -= 40;
  uint64_t file_size = size;
  memcpy(img + 16, &file_size, 8);
  memset(img + loff + 20, 0, 4); /* flags */
  nimble_part_seal(img + loff, lsize - 40);
  nimble_image_reseal(img, size); /* the header digest */
  nimble_executable *exe = NULL;
  NIMBLE_ASSERT_OK(nimble_executable_load_memory(img, size, NIMBLE_LOAD_BORROW, &exe));
  NIMBLE_ASSERT_OK(invoke_checked(exe));
  nimble_executable_release(exe);
  exe = NULL;
  uint64_t data_offset;
  memcpy(&data_offset, img + coff + 24, 8);
  size_t early = coff + (size_t)data_offset + 100;
  img[early] ^= 0x01;
  char want[300];
  chunk_message(img, early, want, sizeof want);
  NIMBLE_ASSERT_ERROR(nimble_executable_load_memory(img, size, NIMBLE_LOAD_BORROW, &exe), NIMBLE_DATA_LOSS, want);
  ck_assert_msg(strstr(want, "chunk 0 of 5") != NULL, "%s", want);
  free(img);
}
END_TEST

/* The table's digest is in the list, which nothing but the table's chunks
 * ties to the constants' digest (and through it to the executable digest a
 * signature signs): a table changed together with that digest (the list
 * resealed) loads, but no constant is used before the chunks holding the
 * table have matched. */
START_TEST(test_a_table_changed_with_its_digest_fails_before_any_constant_is_used) {
  size_t size, csize, lsize;
  uint8_t *img = read_all(path_of("big.nimble"), &size);
  size_t coff = section_of(img, NIMBLE_PART_CONSTANTS, &csize);
  size_t loff = section_of(img, NIMBLE_PART_CHUNK_DIGESTS, &lsize);
  size_t chunks = (csize - 32 + MIB - 1) / MIB;
  uint64_t data_offset;
  memcpy(&data_offset, img + coff + 24, 8);
  img[coff + 20] ^= 0x01; /* the table header's reserved word: parses alike */
  nimble_digest_t td;
  nimble_digest_compute(img + coff, (size_t)data_offset, &td);
  memcpy(img + loff + 32 + 32 * chunks + 8, td.bytes, 32);
  nimble_part_seal(img + loff, lsize);
  char want[300];
  chunk_message(img, coff + 20, want, sizeof want);
  nimble_executable *exe = NULL;
  NIMBLE_ASSERT_OK(nimble_executable_load_memory(img, size, NIMBLE_LOAD_BORROW, &exe));
  nimble_status_t s = invoke_checked(exe);
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_DATA_LOSS);
  ck_assert_msg(strstr(nimble_status_message(s), want) != NULL, "'%s' lacks '%s'", nimble_status_message(s), want);
  ck_assert_msg(strstr(nimble_status_message(s), "(the table, before constant ") != NULL, "%s",
                nimble_status_message(s));
  nimble_status_free(s);
  nimble_executable_release(exe);
  exe = NULL;
  NIMBLE_ASSERT_ERROR(nimble_executable_load_memory(img, size, NIMBLE_LOAD_VERIFY_ALL, &exe), NIMBLE_DATA_LOSS,
                      "constants section (offset");
  free(img);
}
END_TEST

START_TEST(test_nimble_run_exits_1_naming_the_section_for_a_flipped_weight_byte) {
  size_t size, pos[4];
  uint8_t *img = read_all(path_of("big.nimble"), &size);
  weight_positions(img, pos);
  char out[8192];
  unlink(path_of("y.npy"));
  ck_assert_msg(sh(out, sizeof out, RUN_CMD, path_of("big.nimble"), path_of("x.npy"), path_of("y.npy"), "") == 0,
                "%s", out);
  size_t ny;
  uint8_t *y = read_all(path_of("y.npy"), &ny);
  ck_assert_uint_ge(ny, sizeof g_want);
  ck_assert_msg(memcmp(y + ny - sizeof g_want, g_want, sizeof g_want) == 0, "y.npy holds other values");
  free(y);
  img[pos[2]] ^= 0x10;
  write_all(path_of("bad.nimble"), img, size);
  char want[300];
  chunk_message(img, pos[2], want, sizeof want);
  for (int verify_all = 0; verify_all < 2; verify_all++) {
    unlink(path_of("y.npy"));
    int rc = sh(out, sizeof out, RUN_CMD, path_of("bad.nimble"), path_of("x.npy"), path_of("y.npy"),
                verify_all ? "--verify-all" : "");
    ck_assert_msg(rc == 1, "exit %d (want 1): %s", rc, out);
    ck_assert_msg(strstr(out, verify_all ? "constants section (offset" : want) != NULL, "'%s' lacks '%s'", out,
                  verify_all ? "constants section" : want);
    ck_assert_msg(strstr(out, "digest mismatch") != NULL, "%s", out);
    ck_assert_msg(access(path_of("y.npy"), F_OK) != 0, "an output was written");
  }
  free(img);
}
END_TEST

START_TEST(test_a_flipped_byte_in_the_chunk_list_or_metadata_is_refused_at_load) {
  size_t size, lsize, msize;
  uint8_t *img = read_all(path_of("big.nimble"), &size);
  size_t loff = section_of(img, NIMBLE_PART_CHUNK_DIGESTS, &lsize);
  size_t moff = section_of(img, NIMBLE_PART_METADATA, &msize);
  struct {
    size_t pos;
    const char *name;
    size_t off, size;
  } cases[] = {{loff + 32 + 32 * 3 + 5, "chunk digests", loff, lsize}, /* chunk 3's digest */
               {loff + lsize - 1, "chunk digests", loff, lsize},        /* its own digest */
               {loff + 24, "chunk digests", loff, lsize},               /* the count */
               {moff + msize / 2, "metadata", moff, msize}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    img[cases[i].pos] ^= 0x08;
    char want[200];
    snprintf(want, sizeof want, "%s section (offset %zu, %zu bytes): digest mismatch", cases[i].name, cases[i].off,
             cases[i].size);
    nimble_executable *exe = NULL;
    NIMBLE_ASSERT_ERROR(nimble_executable_load_memory(img, size, NIMBLE_LOAD_BORROW, &exe), NIMBLE_DATA_LOSS, want);
    img[cases[i].pos] ^= 0x08;
  }
  /* A list resealed after the change (its own digest recomputed) still
   * fails: it no longer hashes to the constants' digest. */
  img[loff + 32 + 32 * 2] ^= 0x01;
  nimble_part_seal(img + loff, lsize);
  char want[200];
  snprintf(want, sizeof want, "chunk digests section (offset %zu, %zu bytes): its chunk digests do not give the "
           "constants' digest", loff, lsize);
  nimble_executable *exe = NULL;
  NIMBLE_ASSERT_ERROR(nimble_executable_load_memory(img, size, NIMBLE_LOAD_BORROW, &exe), NIMBLE_DATA_LOSS, want);
  NIMBLE_ASSERT_ERROR(nimble_executable_load_memory(img, size, NIMBLE_LOAD_VERIFY_ALL, &exe), NIMBLE_DATA_LOSS, want);
  /* nimble_image_reseal (the fuzzer's) rewrites the list from the
   * constants: a resealed changed weight loads and runs, as it must for
   * the parsers behind the digests to be reached (only a signature tells). */
  size_t pos[4];
  weight_positions(img, pos);
  img[pos[1]] ^= 0x01;
  nimble_image_reseal(img, size);
  NIMBLE_ASSERT_OK(nimble_executable_load_memory(img, size, NIMBLE_LOAD_BORROW, &exe));
  nimble_vm *vm = NULL;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  int64_t xs[2] = {ROWS, K};
  DLTensor tx = {.data = g_x, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = xs};
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &tx));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
  free(img);
}
END_TEST

/* The CPU kernels of a default (borrowed or mapped) load are checked and
 * mapped for the first VM: a flipped kernel byte loads, and every VM
 * creation is refused naming the section, before any kernel byte is
 * mapped; --verify-all (NIMBLE_LOAD_VERIFY_ALL) refuses the load. */
START_TEST(test_a_flipped_kernel_byte_is_refused_before_the_first_vm_maps_the_kernels) {
  size_t size, ksize;
  uint8_t *img = read_all(path_of("big.nimble"), &size);
  size_t koff = section_of(img, NIMBLE_PART_KERNELS_CPU, &ksize);
  ck_assert_uint_gt(koff, 0);
  size_t at[] = {koff + 64 + 3, koff + ksize / 2, koff + ksize - 33, koff + ksize - 1};
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    img[at[i]] ^= 0x20;
    char want[200];
    snprintf(want, sizeof want, "cpu kernels section (offset %zu, %zu bytes): digest mismatch", koff, ksize);
    nimble_executable *exe = NULL;
    NIMBLE_ASSERT_OK(nimble_executable_load_memory(img, size, NIMBLE_LOAD_BORROW, &exe));
    nimble_vm *vm = NULL;
    for (int again = 0; again < 2; again++) /* refused every time, not once */
      NIMBLE_ASSERT_ERROR(nimble_vm_create(exe, NULL, &vm), NIMBLE_DATA_LOSS, want);
    ck_assert_ptr_null(vm);
    nimble_executable_release(exe);
    NIMBLE_ASSERT_ERROR(nimble_executable_load_memory(img, size, NIMBLE_LOAD_BORROW | NIMBLE_LOAD_VERIFY_ALL, &exe),
                        NIMBLE_DATA_LOSS, want);
    /* A copied load (no BORROW) checks everything at load. */
    NIMBLE_ASSERT_ERROR(nimble_executable_load_memory(img, size, 0, &exe), NIMBLE_DATA_LOSS, want);
    img[at[i]] ^= 0x20;
  }
  /* Restored, the same borrowed load runs and computes the values. */
  nimble_executable *exe = NULL;
  NIMBLE_ASSERT_OK(nimble_executable_load_memory(img, size, NIMBLE_LOAD_BORROW, &exe));
  NIMBLE_ASSERT_OK(invoke_checked(exe));
  NIMBLE_ASSERT_OK(invoke_checked(exe)); /* the second VM finds them mapped */
  nimble_executable_release(exe);
  /* nimble-run: exit 1 naming the file and the section, no output, with
   * and without --verify-all. */
  img[koff + ksize / 3] ^= 0x01;
  write_all(path_of("badk.nimble"), img, size);
  char out[4096], want[300];
  snprintf(want, sizeof want, "cpu kernels section (offset %zu, %zu bytes): digest mismatch", koff, ksize);
  for (int verify_all = 0; verify_all < 2; verify_all++) {
    unlink(path_of("y.npy"));
    int rc = sh(out, sizeof out, RUN_CMD, path_of("badk.nimble"), path_of("x.npy"), path_of("y.npy"),
                verify_all ? "--verify-all" : "");
    ck_assert_msg(rc == 1, "exit %d (want 1): %s", rc, out);
    ck_assert_msg(strstr(out, want) != NULL, "'%s' lacks '%s'", out, want);
    ck_assert_msg(strstr(out, path_of("badk.nimble")) != NULL, "'%s' does not name the file", out);
    ck_assert_msg(access(path_of("y.npy"), F_OK) != 0, "an output was written");
  }
  /* The file loads through the C API (its kernels wait) and its first VM
   * is refused. */
  NIMBLE_ASSERT_OK(nimble_executable_load_file(path_of("badk.nimble"), &exe));
  nimble_vm *vm = NULL;
  NIMBLE_ASSERT_ERROR(nimble_vm_create(exe, NULL, &vm), NIMBLE_DATA_LOSS, "its kernels, checked for the first VM: " 
                      "cpu kernels section");
  nimble_executable_release(exe);
  free(img);
}
END_TEST

/* ---- Several VMs on one executable ----------------------------------------- */

typedef struct worker {
  nimble_executable *exe;
  nimble_status_t status;
} worker;

static void *run_worker(void *arg) {
  worker *w = arg;
  w->status = invoke_checked(w->exe);
  return NULL;
}

START_TEST(test_concurrent_vms_verify_the_same_chunks_and_compute_the_hand_computed_values) {
  enum { THREADS = 6 };
  for (int bad = 0; bad < 2; bad++) {
    size_t size, pos[4];
    uint8_t *img = read_all(path_of("big.nimble"), &size);
    weight_positions(img, pos);
    if (bad) img[pos[1]] ^= 0x02;
    nimble_executable *exe = NULL;
    NIMBLE_ASSERT_OK(nimble_executable_load_memory(img, size, NIMBLE_LOAD_BORROW, &exe));
    worker w[THREADS];
    pthread_t tid[THREADS];
    for (int t = 0; t < THREADS; t++) {
      w[t].exe = exe;
      w[t].status = NULL;
      ck_assert_int_eq(pthread_create(&tid[t], NULL, run_worker, &w[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(tid[t], NULL);
    char want[300];
    chunk_message(img, pos[1], want, sizeof want);
    for (int t = 0; t < THREADS; t++) {
      if (bad)
        NIMBLE_ASSERT_ERROR(w[t].status, NIMBLE_DATA_LOSS, want);
      else
        NIMBLE_ASSERT_OK(w[t].status);
    }
    nimble_executable_release(exe);
    free(img);
  }
}
END_TEST

/* ---- Split parts ------------------------------------------------------------ */

START_TEST(test_parts_without_the_list_are_verified_at_load_and_joined_with_it_on_first_use) {
  char path[600];
  snprintf(path, sizeof path, "%s/constants", path_of("parts"));
  size_t csize;
  uint8_t *c = read_all(path, &csize);
  c[csize / 2] ^= 0x04;
  write_all(path, c, csize);
  nimble_executable_part_t *ps;
  size_t np;
  NIMBLE_ASSERT_OK(nimble_executable_read_part_dir(path_of("parts"), &ps, &np));
  nimble_executable *exe = NULL;
  char want[200];
  snprintf(want, sizeof want, "constants part (offset 0, %zu bytes): digest mismatch", csize);
  NIMBLE_ASSERT_ERROR(nimble_executable_load_parts(ps, np, NIMBLE_LOAD_BORROW, &exe), NIMBLE_DATA_LOSS, want);
  /* Joined with the file's list: the list travels, the check is deferred. */
  size_t size, lsize;
  uint8_t *img = read_all(path_of("big.nimble"), &size);
  size_t loff = section_of(img, NIMBLE_PART_CHUNK_DIGESTS, &lsize);
  nimble_executable_part_t all[8];
  ck_assert_uint_lt(np, 8);
  memcpy(all, ps, np * sizeof *ps);
  all[np].kind = NIMBLE_PART_CHUNK_DIGESTS;
  all[np].data = img + loff;
  all[np].size = lsize;
  void *joined;
  size_t jsize;
  NIMBLE_ASSERT_OK(nimble_executable_join_parts(all, np + 1, &joined, &jsize));
  uint8_t *aligned = aligned_alloc(64, (jsize + 63) / 64 * 64);
  memcpy(aligned, joined, jsize);
  NIMBLE_ASSERT_OK(nimble_executable_load_memory(aligned, jsize, NIMBLE_LOAD_BORROW, &exe));
  NIMBLE_ASSERT_ERROR(invoke_checked(exe), NIMBLE_DATA_LOSS, "chunk 2 of 5");
  nimble_executable_release(exe);
  free(aligned);
  /* Loaded as parts with the list, borrowed in place: the same. */
  for (size_t i = 0; i < np; i++)
    if (all[i].kind == NIMBLE_PART_CONSTANTS) all[i].data = c;
  NIMBLE_ASSERT_OK(nimble_executable_load_parts(all, np + 1, NIMBLE_LOAD_BORROW, &exe));
  NIMBLE_ASSERT_ERROR(invoke_checked(exe), NIMBLE_DATA_LOSS, "constants part (offset 0");
  nimble_executable_release(exe);
  c[csize / 2] ^= 0x04;
  write_all(path, c, csize);
  nimble_executable_parts_free(ps, np);
  free(joined);
  free(img);
  free(c);
}
END_TEST

/* ---- Set-up: compile once ------------------------------------------------------ */

static void write_npy(const char *path, const float *v, int rows, int cols) {
  char header[128];
  int n = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows,
                   cols);
  int pad = (64 - (10 + n + 1) % 64) % 64;
  FILE *f = fopen(path, "wb");
  die_unless(f != NULL, path);
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

static void compile_all(void) {
  FILE *f = fopen(path_of("big.nir"), "w");
  die_unless(f != NULL, "big.nir");
  fprintf(f, "def @main(%%x: Tensor[(%d, %d), float32]) {\n  let %%w = const[(%d, %d), float32]{", ROWS, K, K, M);
  for (int k = 0; k < K; k++)
    for (int m = 0; m < M; m++) fprintf(f, "%s%d", k || m ? "," : "", (int)w_at(k, m));
  fprintf(f, "};\n  matmul(%%x, %%w)\n}\n");
  fclose(f);
  char out[65536];
  int rc = sh(out, sizeof out, "'%s' compile '%s' --target=x86 -o '%s' --emit-parts '%s'", NIMBLE_CLI_PATH,
              path_of("big.nir"), path_of("big.nimble"), path_of("parts"));
  if (rc != 0) fprintf(stderr, "%s", out);
  die_unless(rc == 0, "nimble compile");
  for (int i = 0; i < ROWS * K; i++) g_x[i] = (float)((i * 5) % 7 - 3);
  /* Integers below 2^24 throughout: exact in float32 in any order. */
  for (int r = 0; r < ROWS; r++)
    for (int m = 0; m < M; m++) {
      float acc = 0;
      for (int k = 0; k < K; k++) acc += g_x[r * K + k] * w_at(k, m);
      g_want[r * M + m] = acc;
    }
  write_npy(path_of("x.npy"), g_x, ROWS, K);
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "%s", "/tmp/nimble-deferred-XXXXXX");
  if (!mkdtemp(g_dir)) return 1;
  compile_all();
  Suite *s = suite_create("deferred_constants");
  TCase *tc = tcase_create("trust");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_a_large_constants_part_carries_the_digests_of_its_chunks);
  tcase_add_test(tc, test_the_deferred_load_computes_the_hand_computed_values);
  tcase_add_test(tc, test_a_flipped_weight_byte_fails_the_invoke_naming_the_chunk_and_verify_all_refuses_the_load);
  tcase_add_test(tc, test_nimble_run_exits_1_naming_the_section_for_a_flipped_weight_byte);
  tcase_add_test(tc, test_a_flipped_byte_in_the_chunk_list_or_metadata_is_refused_at_load);
  tcase_add_test(tc, test_a_flipped_kernel_byte_is_refused_before_the_first_vm_maps_the_kernels);
  tcase_add_test(tc, test_a_flipped_byte_in_the_constants_table_is_refused_at_load);
  tcase_add_test(tc, test_a_table_changed_with_its_digest_fails_before_any_constant_is_used);
  tcase_add_test(tc, test_a_list_without_the_table_digest_still_loads_and_verifies_chunk_0_at_load);
  tcase_add_test(tc, test_concurrent_vms_verify_the_same_chunks_and_compute_the_hand_computed_values);
  tcase_add_test(tc, test_parts_without_the_list_are_verified_at_load_and_joined_with_it_on_first_use);
  suite_add_tcase(s, tc);
  int rc = nimble_test_run(s);
  char out[256];
  sh(out, sizeof out, "rm -rf '%s'", g_dir);
  return rc;
}
