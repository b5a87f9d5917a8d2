/* Replays the fuzzer's crash-regression corpus (tests/compiler/onnx/corpus,
 * committed) and the fixture models through the fuzz target's entry point:
 * each must give a model or an error, never a crash (the ASan build checks
 * memory too). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"
#include "onnx_test_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t replay_dir(const char *dir, const char *suffix) {
  DIR *d = opendir(dir);
  ck_assert_msg(d != NULL, "cannot open %s", dir);
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    size_t len = strlen(e->d_name), sl = strlen(suffix);
    if (len < sl || strcmp(e->d_name + len - sl, suffix) != 0) continue;
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    size_t size;
    uint8_t *bytes = onnx_test_read_file(path, &size);
    if (!bytes) continue; /* a subfolder */
    /* An exact-size copy, so reads past the end are caught. */
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, bytes, size);
    free(bytes);
    ck_assert_int_eq(LLVMFuzzerTestOneInput(copy, size), 0);
    free(copy);
    n++;
  }
  closedir(d);
  return n;
}

START_TEST(test_every_corpus_file_gives_a_model_or_an_error) {
  const char *corpus = getenv("NIMBLE_ONNX_CORPUS");
  ck_assert_msg(corpus && corpus[0], "NIMBLE_ONNX_CORPUS is not set");
  size_t n = replay_dir(corpus, "");
  printf("replayed %zu corpus files\n", n);
  ck_assert_uint_gt(n, 0);
}
END_TEST

START_TEST(test_every_fixture_walks_cleanly) {
  const char *dir = getenv("NIMBLE_ONNX_FIXTURES");
  ck_assert_msg(dir && dir[0], "NIMBLE_ONNX_FIXTURES is not set");
  ck_assert_uint_eq(replay_dir(dir, ".onnx"), 12);
}
END_TEST

int main(void) {
  Suite *s = suite_create("onnx_corpus");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_every_corpus_file_gives_a_model_or_an_error);
  tcase_add_test(tc, test_every_fixture_walks_cleanly);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
