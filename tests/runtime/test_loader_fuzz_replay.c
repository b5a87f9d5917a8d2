/* The loader survives fuzzing: the committed corpus (seeds, and any input a
 * fuzzer ever crashed on) replays cleanly, and a deterministic mutation
 * loop over it and over freshly built executables gives only statuses,
 * never a crash, a hang or a leak (the ASan build checks the last two).
 *
 * NIMBLE_WRITE_CORPUS=DIR writes the seed executables into DIR (how the
 * committed seeds were made). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executable/fuzz_one.h"
#include "rt_test_util.h"

/* Seeds: executables exercising every part and most instructions, with a
 * small stand-in kernel blob (kernels are not loaded while fuzzing). */
static nimble_executable_builder *seed_builder(int which) {
  nimble_executable_builder *b;
  NIMBLE_ASSERT_OK(nimble_builder_create("x86_64-linux-gnu", &b));
  uint8_t elf[64] = {0x7f, 'E', 'L', 'F'};
  NIMBLE_ASSERT_OK(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CPU, elf, sizeof elf));
  int64_t k = rt_kernel(b, "vadd_f32");
  float w[6] = {1, 2, 3, 4, 5, 6};
  int64_t s23[2] = {2, 3};
  DLTensor cw = rt_tensor(w, RT_F32, 2, s23);
  uint32_t kw;
  NIMBLE_ASSERT_OK(nimble_builder_add_constant(b, &cw, &kw));
  uint32_t f = rt_function(b, "main", 2, 12);
  if (which == 0) {
    rt_emit_alloc(b, f, 2, 3, 4, RT_F32, 2, s23);
    RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 0, 1, 2);
    RT_EMIT(b, f, NIMBLE_OP_LOAD_CONST, 5, kw);
    RT_EMIT(b, f, NIMBLE_OP_SHAPE_OF, 6, 5);
    RT_EMIT(b, f, NIMBLE_OP_RESHAPE_TENSOR, 7, 2, 6);
    RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 8, 7, kDLCPU, 0);
    RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR_REG, 9, 3, 4, 6, kDLFloat, 32, 1);
    RT_EMIT(b, f, NIMBLE_OP_KILL_REGISTER, 9);
    RT_EMIT(b, f, NIMBLE_OP_RET, 8);
  } else {
    uint32_t g = rt_function(b, "helper", 1, 3);
    RT_EMIT(b, g, NIMBLE_OP_GET_TAG, 1, 0);
    RT_EMIT(b, g, NIMBLE_OP_LOAD_CONSTI, 2, 1);
    RT_EMIT(b, g, NIMBLE_OP_IF, 1, 2, 1, 2);
    RT_EMIT0(b, g, NIMBLE_OP_FATAL);
    RT_EMIT(b, g, NIMBLE_OP_GET_FIELD, 1, 0, 0);
    RT_EMIT(b, g, NIMBLE_OP_RET, 1);
    RT_EMIT(b, f, NIMBLE_OP_ALLOC_ADT, 2, 1, 0, 1);
    RT_EMIT(b, f, NIMBLE_OP_ALLOC_CLOSURE, 3, g);
    RT_EMIT(b, f, NIMBLE_OP_INVOKE_CLOSURE, 4, 3, 2);
    RT_EMIT(b, f, NIMBLE_OP_INVOKE, 5, g, 2);
    RT_EMIT(b, f, NIMBLE_OP_MOVE, 6, 5);
    RT_EMIT(b, f, NIMBLE_OP_GOTO, 1);
    RT_EMIT(b, f, NIMBLE_OP_RET, 6);
  }
  int64_t dims[2] = {2, -1};
  const char *sym[2] = {NULL, "n"};
  nimble_tensor_info_t in[2] = {rt_info("x", RT_F32, 2, dims, sym), rt_info("y", RT_F32, 2, s23, NULL)};
  nimble_tensor_info_t out = rt_info("z", RT_F32, 2, dims, sym);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 2, &out, 1));
  rt_info_free(&in[0]);
  rt_info_free(&in[1]);
  rt_info_free(&out);
  return b;
}

typedef struct blob {
  uint8_t *data;
  size_t size;
} blob;

/* Fresh seeds: two whole images and each part of the first alone. */
static int make_seeds(blob *out) {
  int n = 0;
  for (int which = 0; which < 2; which++) {
    nimble_executable_builder *b = seed_builder(which);
    void *d;
    NIMBLE_ASSERT_OK(nimble_builder_serialize(b, &d, &out[n].size));
    out[n++].data = d;
    if (which == 0)
      for (int k = NIMBLE_PART_METADATA; k <= NIMBLE_PART_KERNELS_CPU; k++) {
        NIMBLE_ASSERT_OK(nimble_builder_serialize_part(b, (nimble_part_kind_t)k, &d, &out[n].size));
        out[n++].data = d;
      }
    nimble_builder_destroy(b);
  }
  return n;
}

START_TEST(test_fresh_seeds_load) {
  blob seeds[8];
  int n = make_seeds(seeds);
  /* Whole images load (kernels aside); single parts fail cleanly for the
   * parts they lack. */
  ck_assert_int_eq(nimble_fuzz_one(seeds[0].data, seeds[0].size), NIMBLE_OK);
  ck_assert_int_eq(nimble_fuzz_one(seeds[5].data, seeds[5].size), NIMBLE_OK);
  ck_assert_int_eq(nimble_fuzz_one(seeds[1].data, seeds[1].size), NIMBLE_INVALID_ARGUMENT);
  const char *dir = getenv("NIMBLE_WRITE_CORPUS");
  for (int i = 0; i < n; i++) {
    if (dir) {
      char path[4096];
      snprintf(path, sizeof path, "%s/seed-%d.bin", dir, i);
      FILE *f = fopen(path, "wb");
      ck_assert(f != NULL);
      ck_assert(fwrite(seeds[i].data, 1, seeds[i].size, f) == seeds[i].size);
      fclose(f);
    }
    free(seeds[i].data);
  }
}
END_TEST

START_TEST(test_the_committed_corpus_replays_without_crashing) {
  DIR *d = opendir(NIMBLE_FUZZ_CORPUS_DIR);
  ck_assert_msg(d != NULL, "no corpus at %s", NIMBLE_FUZZ_CORPUS_DIR);
  struct dirent *e;
  int files = 0;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", NIMBLE_FUZZ_CORPUS_DIR, e->d_name);
    size_t size;
    void *data = rt_read_file(path, &size);
    /* An exact-size copy, so ASan catches any read past the end. */
    void *exact = malloc(size ? size : 1);
    memcpy(exact, data, size);
    free(data);
    nimble_fuzz_one(exact, size);
    free(exact);
    files++;
  }
  closedir(d);
  ck_assert_int_ge(files, 6);
}
END_TEST

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}

/* One mutation of `in` into a fresh buffer of *size bytes. */
static uint8_t *mutate(const blob *in, size_t *size) {
  static const uint64_t interesting[] = {0, 1, 2, 0x7f, 0x80, 0xff, 0xffff, 0x7fffffff, 0xffffffff,
                                         0x80000000ull, 0xffffffffffffffffull, 64, 4096};
  size_t n = in->size;
  uint8_t *out = malloc(n + 16);
  memcpy(out, in->data, n);
  int rounds = 1 + (int)(rng() % 3);
  for (int r = 0; r < rounds && n > 0; r++) {
    size_t at = (size_t)(rng() % n);
    switch (rng() % 6) {
      case 0: out[at] ^= (uint8_t)(1u << (rng() % 8)); break;
      case 1: out[at] = (uint8_t)interesting[rng() % 6]; break;
      case 2: { /* a little-endian u32 or u64 */
        uint64_t v = interesting[rng() % (sizeof interesting / sizeof interesting[0])];
        size_t w = rng() % 2 ? 4 : 8;
        if (at + w <= n) memcpy(out + at, &v, w);
        break;
      }
      case 3: n = at; break; /* truncate */
      case 4: out[at] = (uint8_t)rng(); break;
      case 5: { /* grow by up to 16 bytes */
        size_t add = 1 + rng() % 16;
        for (size_t i = 0; i < add; i++) out[n + i] = (uint8_t)rng();
        n += add;
        r = rounds; /* at most once */
        break;
      }
    }
  }
  *size = n;
  return out;
}

START_TEST(test_a_deterministic_mutation_loop_gives_only_statuses) {
  blob seeds[8];
  int n = make_seeds(seeds);
  int loaded = 0, refused = 0, changed_images = 0;
  for (int iter = 0; iter < 30000; iter++) {
    const blob *src = &seeds[iter % n];
    size_t size;
    uint8_t *m = mutate(src, &size);
    uint8_t *exact = malloc(size ? size : 1);
    memcpy(exact, m, size);
    free(m);
    /* As it is, a changed image is refused (its digests no longer match);
     * nimble_fuzz_one then reseals it to reach the parsers. */
    if (memcmp(src->data, NIMBLE_FILE_MAGIC, NIMBLE_FILE_MAGIC_LEN) == 0 &&
        (size != src->size || memcmp(exact, src->data, size) != 0)) {
      ck_assert_msg(nimble_fuzz_load(exact, size) != NIMBLE_OK, "iteration %d: a changed image loaded", iter);
      changed_images++;
    }
    if (nimble_fuzz_one(exact, size) == NIMBLE_OK)
      loaded++;
    else
      refused++;
    free(exact);
  }
  for (int i = 0; i < n; i++) free(seeds[i].data);
  /* Most mutations break something the loader checks; a few are harmless
   * (a changed float in the constants, a renamed entry). */
  ck_assert_int_gt(changed_images, 5000);
  ck_assert_int_gt(refused, 20000);
  ck_assert_int_gt(loaded, 0);
}
END_TEST

Suite *fuzz_suite(void) {
  Suite *s = suite_create("loader_fuzz_replay");
  TCase *tc = tcase_create("fuzz");
  tcase_set_timeout(tc, 500);
  tcase_add_test(tc, test_fresh_seeds_load);
  tcase_add_test(tc, test_the_committed_corpus_replays_without_crashing);
  tcase_add_test(tc, test_a_deterministic_mutation_loop_gives_only_statuses);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(fuzz_suite()); }
