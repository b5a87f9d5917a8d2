/* Replays the importer fuzzer's crash-regression corpus
 * (tests/compiler/onnx_import/corpus, made by scripts/fuzz-onnx-import.sh)
 * through the fuzz target's own entry point (load, import, type inference,
 * print): each file must give a module or an error, never a crash, and the
 * ASan build checks memory too. The files that crashed the importer are
 * also checked for the error they now give. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_test_util.h"
#include "nimble/nir.h"
#include "nimble_test.h"
#include "onnx_test_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *corpus_file(const char *name, char *buf, size_t size) {
  const char *p = import_test_path("NIMBLE_ONNX_IMPORT_CORPUS", name, buf, size);
  ck_assert_msg(p != NULL, "NIMBLE_ONNX_IMPORT_CORPUS is not set");
  return p;
}

START_TEST(test_every_corpus_file_gives_a_module_or_an_error) {
  char dir[1024];
  corpus_file("", dir, sizeof dir);
  DIR *d = opendir(dir);
  ck_assert_msg(d != NULL, "cannot open %s", dir);
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    size_t size;
    uint8_t *bytes = onnx_test_read_file(path, &size);
    ck_assert_msg(bytes != NULL, "cannot read %s", path);
    /* An exact-size copy, so reads past the end are caught. */
    uint8_t *copy = malloc(size ? size : 1);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, bytes, size);
    free(bytes);
    ck_assert_int_eq(LLVMFuzzerTestOneInput(copy, size), 0);
    free(copy);
    n++;
  }
  closedir(d);
  printf("replayed %zu importer corpus files\n", n);
  ck_assert_uint_ge(n, 2);
}
END_TEST

/* Imports a corpus file; the status (NULL when it imported). */
static nimble_status_t import_corpus_file(const char *name) {
  char path[1024];
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m;
  nimble_status_t s = nimble_onnx_import_file(corpus_file(name, path, sizeof path), arena, NULL, &m);
  nimble_arena_destroy(arena);
  return s;
}

/* A Loop whose body graph lists fewer inputs than (iteration, condition,
 * carried values...): the importer named its parameters after inputs past
 * the end of the list. */
START_TEST(test_a_loop_body_with_too_few_inputs_is_an_error_naming_the_node) {
  nimble_status_t s = import_corpus_file("crash-loop-body-short-inputs");
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_INVALID_ARGUMENT);
  ck_assert_msg(strstr(nimble_status_message(s), "(Loop)") && strstr(nimble_status_message(s), "body has "),
                "%s", nimble_status_message(s));
  nimble_status_free(s);
}
END_TEST

/* Slice of opset < 10 (attributes) with none of starts, ends or axes: the
 * absent lists (NULL, 0) were passed to memcpy, and the node imported as a
 * slice of nothing; Slice-1 requires starts and ends. */
START_TEST(test_an_old_slice_without_starts_and_ends_is_an_error_naming_the_node) {
  nimble_status_t s = import_corpus_file("crash-slice-opset9-no-axes");
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_INVALID_ARGUMENT);
  ck_assert_msg(strstr(nimble_status_message(s), "(Slice): attributes 'starts' and 'ends' are required"),
                "%s", nimble_status_message(s));
  nimble_status_free(s);
}
END_TEST

/* Imports corpus file `name` (it must type-check), prints it, checks the
 * text holds `needle`, parses it back and checks the module is the same. */
static void expect_round_trip(const char *name, const char *needle) {
  char path[1024];
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m, *m2;
  nimble_typing *t;
  NIMBLE_ASSERT_OK(import_test_check_file(arena, corpus_file(name, path, sizeof path), &m, &t));
  char *text;
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &text));
  ck_assert_msg(strstr(text, needle) != NULL, "%s", text);
  NIMBLE_ASSERT_OK(nimble_nir_parse(arena, "corpus.nir", text, strlen(text), &m2));
  ck_assert_msg(nimble_ir_module_equal(m, m2), "%s: the parsed module differs:\n%s", name, text);
  free(text);
  nimble_arena_destroy(arena);
}

/* A float constant holding a NaN with the sign bit set (or a payload):
 * the text form has one `nan`, so the printed module read back as a
 * different one. The importer now stores the one NaN the parser makes. */
START_TEST(test_a_nan_constant_prints_and_reads_back_as_the_same_module) {
  expect_round_trip("crash-nan-constant-roundtrip", "{nan, ");
}
END_TEST

/* A BOOL constant whose raw byte is 0x55: true to ONNX, but kept as 85 it
 * printed as `true` and read back as 1, a different module. The loader now
 * stores 0 or 1. */
START_TEST(test_a_bool_constant_byte_other_than_one_reads_back_as_the_same_module) {
  expect_round_trip("crash-bool-constant-byte-85", "true");
}
END_TEST

/* Pad of opset < 11 without its pads attribute: the absent list (NULL, 0)
 * went to memcpy (UndefinedBehaviorSanitizer's find). It is an error
 * naming the node and the count. */
START_TEST(test_an_old_pad_without_pads_is_an_error_naming_the_node) {
  for (int i = 1; i <= 3; i++) {
    char name[64];
    snprintf(name, sizeof name, "crash-pad-without-pads-%d", i);
    nimble_status_t s = import_corpus_file(name);
    ck_assert_ptr_nonnull(s);
    ck_assert_msg(strstr(nimble_status_message(s), "(Pad): 0 pads for rank"), "%s: %s", name, nimble_status_message(s));
    nimble_status_free(s);
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("onnx_import_corpus");
  TCase *tc = tcase_create("corpus");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_every_corpus_file_gives_a_module_or_an_error);
  tcase_add_test(tc, test_a_loop_body_with_too_few_inputs_is_an_error_naming_the_node);
  tcase_add_test(tc, test_an_old_slice_without_starts_and_ends_is_an_error_naming_the_node);
  tcase_add_test(tc, test_a_nan_constant_prints_and_reads_back_as_the_same_module);
  tcase_add_test(tc, test_a_bool_constant_byte_other_than_one_reads_back_as_the_same_module);
  tcase_add_test(tc, test_an_old_pad_without_pads_is_an_error_naming_the_node);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
