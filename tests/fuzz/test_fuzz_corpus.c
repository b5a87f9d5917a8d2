/* Replays one fuzz target's kept corpus (tests/fuzz/<target>/corpus: the
 * seeds, what bench/fuzz/run.sh merged back, and every input a fuzzer ever
 * failed on) through the target's own entry point, LLVMFuzzerTestOneInput
 * of the fuzz_*.c this suite is built with (tests/fuzz/CMakeLists.txt), so
 * the corpus runs in every build without libFuzzer: the harness's oracles
 * abort on a wrong answer, and the ASan build checks memory and leaks.
 * The inputs that found bugs are also checked for the error they now give.
 * docs/reliability.md, "Fuzzing". */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"

#if defined(NIMBLE_FUZZ_MESSAGE)
#include <jansson.h>

#include "nimble/message.h"
#endif
#if defined(NIMBLE_FUZZ_REFERENCE)
#include "nimble/fetch.h"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *corpus_dir(void) {
  const char *dir = getenv("NIMBLE_FUZZ_CORPUS");
  ck_assert_msg(dir != NULL, "NIMBLE_FUZZ_CORPUS is not set");
  return dir;
}

/* The bytes of corpus file `name` in an exact-size buffer (reads past the
 * end are caught), or NULL when it cannot be read. */
static uint8_t *read_corpus_file(const char *name, size_t *size) {
  char path[2048];
  snprintf(path, sizeof path, "%s/%s", corpus_dir(), name);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
  if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *size = n > 0 ? (size_t)n : 0;
  return buf;
}

START_TEST(test_every_corpus_file_passes_the_fuzz_target_s_checks) {
  DIR *d = opendir(corpus_dir());
  ck_assert_msg(d != NULL, "cannot open %s", corpus_dir());
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    size_t size;
    uint8_t *bytes = read_corpus_file(e->d_name, &size);
    ck_assert_msg(bytes != NULL, "cannot read %s/%s", corpus_dir(), e->d_name);
    ck_assert_int_eq(LLVMFuzzerTestOneInput(bytes, size), 0);
    free(bytes);
    n++;
  }
  closedir(d);
  printf("replayed %zu corpus files from %s\n", n, corpus_dir());
  ck_assert_uint_ge(n, 5);
}
END_TEST

#if defined(NIMBLE_FUZZ_REFERENCE)
/* Parses corpus file `name` as a reference: it must be refused with
 * INVALID_ARGUMENT whose message holds `expected`. */
static void expect_refused(const char *name, const char *expected) {
  size_t size;
  uint8_t *bytes = read_corpus_file(name, &size);
  ck_assert_msg(bytes != NULL, "cannot read %s", name);
  char *text = malloc(size + 1);
  ck_assert_ptr_nonnull(text);
  memcpy(text, bytes, size);
  text[size] = '\0';
  nimble_fetch_reference_t ref;
  nimble_status_t s = nimble_fetch_parse_reference(text, &ref);
  ck_assert_msg(s != NULL, "%s: '%s' was accepted", name, text);
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_INVALID_ARGUMENT);
  ck_assert_msg(strstr(nimble_status_message(s), expected), "%s: %s", name, nimble_status_message(s));
  ck_assert_ptr_null(ref.name);
  nimble_status_free(s);
  free(text);
  free(bytes);
}

/* "repo/name/:tag": the name check ran off its end at the empty last
 * component and reported success, so the name "repo/name/" was accepted. */
START_TEST(test_a_name_ending_in_a_slash_is_refused_at_the_tag) {
  expect_refused("crash-name-trailing-slash",
                 "at byte 32: a name component must start with a lowercase letter or digit");
}
END_TEST

/* "http://[]:5000/...": brackets with no address were a host. */
START_TEST(test_an_empty_ipv6_host_is_refused) {
  expect_refused("crash-empty-ipv6-host", "at byte 8: empty IPv6 address in the host");
}
END_TEST

/* NAME:TAG@DIGEST checked its tag's characters only: a tag starting with
 * '-' (or longer than 128 bytes) passed, outside the tag grammar. */
START_TEST(test_a_pinned_reference_s_tag_follows_the_tag_grammar) {
  expect_refused("crash-pinned-tag-starts-with-dash",
                 "at byte 20: a tag must start with a letter, digit or '_'");
  char text[400];
  char tag[130];
  memset(tag, 'a', 129);
  tag[129] = '\0';
  snprintf(text, sizeof text,
           "http://h:5000/n:%s@sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
           tag);
  nimble_fetch_reference_t ref;
  nimble_status_t s = nimble_fetch_parse_reference(text, &ref);
  ck_assert_ptr_nonnull(s);
  ck_assert_msg(strstr(nimble_status_message(s), "at byte 16: tag longer than 128 bytes"), "%s",
                nimble_status_message(s));
  nimble_status_free(s);
  tag[128] = '\0'; /* 128 bytes: allowed */
  snprintf(text, sizeof text,
           "http://h:5000/n:%s@sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
           tag);
  NIMBLE_ASSERT_OK(nimble_fetch_parse_reference(text, &ref));
  ck_assert_str_eq(ref.tag, tag);
  nimble_fetch_reference_deinit(&ref);
}
END_TEST
#endif

#if defined(NIMBLE_FUZZ_MESSAGE)
/* A message whose syntax error jansson reports by quoting the bytes near it,
 * here not UTF-8: the refusal could not be sent back (encoding the ERROR
 * failed), so a peer got no answer. The quoted bytes are now written \xNN. */
START_TEST(test_a_refusal_quoting_bytes_that_are_not_utf8_can_be_sent_back) {
  size_t size;
  uint8_t *bytes = read_corpus_file("crash-invalid-utf8-in-decode-error", &size);
  ck_assert_ptr_nonnull(bytes);
  nimble_msg_type_t type;
  json_t *body = NULL;
  nimble_status_t s = nimble_message_decode(bytes, size, &type, &body);
  ck_assert_ptr_nonnull(s);
  char *out = NULL;
  size_t out_size = 0;
  NIMBLE_ASSERT_OK(nimble_message_encode_error(s, NULL, &out, &out_size));
  json_t *back = NULL;
  NIMBLE_ASSERT_OK(nimble_message_decode(out, out_size, &type, &back));
  ck_assert_int_eq(type, NIMBLE_MSG_ERROR);
  nimble_status_t again = nimble_message_body_to_status(back);
  ck_assert_int_eq(nimble_status_code(again), nimble_status_code(s));
  ck_assert_msg(strstr(nimble_status_message(again), "\\x"), "%s", nimble_status_message(again));
  nimble_status_free(again);
  json_decref(back);
  free(out);
  nimble_status_free(s);
  free(bytes);
}
END_TEST
#endif

static Suite *suite(void) {
  Suite *s = suite_create("fuzz_corpus");
  TCase *tc = tcase_create("corpus");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_every_corpus_file_passes_the_fuzz_target_s_checks);
#if defined(NIMBLE_FUZZ_MESSAGE)
  tcase_add_test(tc, test_a_refusal_quoting_bytes_that_are_not_utf8_can_be_sent_back);
#endif
#if defined(NIMBLE_FUZZ_REFERENCE)
  tcase_add_test(tc, test_a_name_ending_in_a_slash_is_refused_at_the_tag);
  tcase_add_test(tc, test_an_empty_ipv6_host_is_refused);
  tcase_add_test(tc, test_a_pinned_reference_s_tag_follows_the_tag_grammar);
#endif
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
