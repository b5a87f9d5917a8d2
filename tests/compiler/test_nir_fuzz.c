/* Drives the parser's fuzz target (frontend/text/fuzz_nir_parse.c) over
 * every test program and thousands of deterministic mutations of them:
 * byte flips, deletions, duplications and token swaps. The target aborts on
 * a round-trip mismatch; the sanitizers catch the rest. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rng(void) {
  /* xorshift64*: deterministic, so a failure reproduces. */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545f4914f6cdd1dULL;
}

static const char *kTokens[] = {"(", ")", "{", "}", "[", "]", ",", ";", "=", "=>", "->", ".", "?", "%x", "@main",
                                "let", "if", "else", "match", "fn", "type", "def", "_", "0", "-1", "1.5",
                                "Tensor", "%\"a.b\"", "float32", "const", "add", "Cons", "\"s\"", "/*", "//", "\n"};

static void mutate(const char *src, size_t n, char *out, size_t *out_n, size_t cap) {
  size_t k = 0;
  size_t edits = 1 + rng() % 4;
  memcpy(out, src, n);
  k = n;
  for (size_t e = 0; e < edits && k > 0; e++) {
    size_t at = rng() % k;
    switch (rng() % 4) {
      case 0: out[at] = (char)(rng() % 256); break;              /* flip */
      case 1: {                                                  /* delete a span */
        size_t len = 1 + rng() % 8;
        if (at + len > k) len = k - at;
        memmove(out + at, out + at + len, k - at - len);
        k -= len;
        break;
      }
      case 2: {                                                  /* insert a token */
        const char *t = kTokens[rng() % (sizeof kTokens / sizeof kTokens[0])];
        size_t len = strlen(t);
        if (k + len > cap) break;
        memmove(out + at + len, out + at, k - at);
        memcpy(out + at, t, len);
        k += len;
        break;
      }
      default: {                                                 /* duplicate a span */
        size_t len = 1 + rng() % 32;
        if (at + len > k) len = k - at;
        if (k + len > cap) break;
        memmove(out + at + len, out + at, k - at);
        k += len;
        break;
      }
    }
  }
  *out_n = k;
}

/* Mutants that parse: the round-trip check ran on them. */
static int parsed;

static void run_target(const char *data, size_t n) {
  nimble_arena *a;
  nimble_module *m;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_status_t st = nimble_nir_parse(a, "mutant.nir", data, n, &m);
  if (!st) parsed++;
  nimble_status_free(st);
  nimble_arena_destroy(a);
  LLVMFuzzerTestOneInput((const uint8_t *)data, n);
}

static char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  char *buf = malloc(1 << 16);
  *n = fread(buf, 1, (1 << 16) - 1, f);
  fclose(f);
  return buf;
}

static void fuzz_file(const char *path, int rounds) {
  size_t n;
  char *src = read_file(path, &n);
  size_t cap = n + 4096;
  char *buf = malloc(cap);
  run_target(src, n);
  for (int r = 0; r < rounds; r++) {
    size_t m;
    mutate(src, n, buf, &m, cap);
    run_target(buf, m);
  }
  free(buf);
  free(src);
}

START_TEST(test_mutated_programs_never_crash_and_round_trip_when_they_parse) {
  /* NIMBLE_FUZZ_ROUNDS raises the mutations per program for a longer run. */
  const char *env = getenv("NIMBLE_FUZZ_ROUNDS");
  int rounds = env ? atoi(env) : 400;
  char *dir = test_source_path("tests/compiler/programs");
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  struct dirent *ent;
  while ((ent = readdir(d))) {
    size_t len = strlen(ent->d_name);
    if (len < 5 || strcmp(ent->d_name + len - 4, ".nir") != 0) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
    fuzz_file(path, rounds);
  }
  closedir(d);
  free(dir);
  char *tree = test_source_path("examples/treelstm.nir");
  fuzz_file(tree, rounds);
  free(tree);
  /* Some mutants (a changed digit or name, a dropped comment) still parse. */
  ck_assert_int_gt(parsed, 7 * rounds / 50);
}
END_TEST

int main(void) {
  Suite *s = suite_create("nir_fuzz");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_mutated_programs_never_crash_and_round_trip_when_they_parse);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
