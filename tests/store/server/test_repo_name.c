/* Repository names and tags against the OCI distribution grammar. */
#include <string.h>

#include "nimble_test.h"

#include "nimble/store_fs.h"

START_TEST(test_names_from_the_grammar_are_accepted) {
  const char *good[] = {
      "a",   "nimble", "models/resnet",        "a.b",      "a_b", "a__b",
      "a-b", "a---b",  "library/ubuntu-22.04", "x0/y1/z2", "0",   "foo/bar.baz_qux--quux"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    NIMBLE_ASSERT_OK(nimble_store_name_check(good[i]));
}
END_TEST

START_TEST(test_path_traversal_names_are_rejected) {
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("../x"), NIMBLE_INVALID_ARGUMENT,
                      "character 0 ('.') cannot start");
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("a/../b"), NIMBLE_INVALID_ARGUMENT, "character 2");
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("a/./b"), NIMBLE_INVALID_ARGUMENT, "character 2");
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("/abs"), NIMBLE_INVALID_ARGUMENT, "character 0");
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("a//b"), NIMBLE_INVALID_ARGUMENT, "character 2");
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("%2e%2e"), NIMBLE_INVALID_ARGUMENT, "character 0");
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("a/"), NIMBLE_INVALID_ARGUMENT, "ends a path");
}
END_TEST

START_TEST(test_separators_must_sit_between_alphanumerics) {
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("a..b"), NIMBLE_INVALID_ARGUMENT,
                      "character 2 ('.') cannot follow a separator");
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("a___b"), NIMBLE_INVALID_ARGUMENT, "character 3");
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("a.-b"), NIMBLE_INVALID_ARGUMENT, "character 2");
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("a-"), NIMBLE_INVALID_ARGUMENT,
                      "separator that ends the name");
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("-a"), NIMBLE_INVALID_ARGUMENT, "character 0");
}
END_TEST

START_TEST(test_uppercase_and_other_characters_are_rejected) {
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("Foo"), NIMBLE_INVALID_ARGUMENT, "character 0 ('F')");
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("foo bar"), NIMBLE_INVALID_ARGUMENT,
                      "character 3 (' ') is not allowed");
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("foo\nbar"), NIMBLE_INVALID_ARGUMENT,
                      "character 3 (0x0a)");
  NIMBLE_ASSERT_ERROR(nimble_store_name_check("foo:bar"), NIMBLE_INVALID_ARGUMENT, "character 3");
  NIMBLE_ASSERT_ERROR(nimble_store_name_check(""), NIMBLE_INVALID_ARGUMENT, "empty");
}
END_TEST

START_TEST(test_names_longer_than_255_are_rejected) {
  char name[300];
  memset(name, 'a', sizeof name);
  name[255] = '\0';
  NIMBLE_ASSERT_OK(nimble_store_name_check(name));
  name[255] = 'a';
  name[256] = '\0';
  NIMBLE_ASSERT_ERROR(nimble_store_name_check(name), NIMBLE_INVALID_ARGUMENT,
                      "256 characters, at most 255");
}
END_TEST

START_TEST(test_tags_follow_their_grammar) {
  NIMBLE_ASSERT_OK(nimble_store_tag_check("latest"));
  NIMBLE_ASSERT_OK(nimble_store_tag_check("v1.2.3-rc_1"));
  NIMBLE_ASSERT_OK(nimble_store_tag_check("_x"));
  NIMBLE_ASSERT_OK(nimble_store_tag_check("X86"));
  NIMBLE_ASSERT_ERROR(nimble_store_tag_check(".hidden"), NIMBLE_INVALID_ARGUMENT, "cannot start");
  NIMBLE_ASSERT_ERROR(nimble_store_tag_check("-x"), NIMBLE_INVALID_ARGUMENT, "cannot start");
  NIMBLE_ASSERT_ERROR(nimble_store_tag_check("a/b"), NIMBLE_INVALID_ARGUMENT, "character 1 (0x2f)");
  NIMBLE_ASSERT_ERROR(nimble_store_tag_check(""), NIMBLE_INVALID_ARGUMENT, "empty");
  char tag[200];
  memset(tag, 't', sizeof tag);
  tag[128] = '\0';
  NIMBLE_ASSERT_OK(nimble_store_tag_check(tag));
  tag[128] = 't';
  tag[129] = '\0';
  NIMBLE_ASSERT_ERROR(nimble_store_tag_check(tag), NIMBLE_INVALID_ARGUMENT, "at most 128");
}
END_TEST

int main(void) {
  Suite *s = suite_create("store_repo_name");
  TCase *tc = tcase_create("grammar");
  tcase_add_test(tc, test_names_from_the_grammar_are_accepted);
  tcase_add_test(tc, test_path_traversal_names_are_rejected);
  tcase_add_test(tc, test_separators_must_sit_between_alphanumerics);
  tcase_add_test(tc, test_uppercase_and_other_characters_are_rejected);
  tcase_add_test(tc, test_names_longer_than_255_are_rejected);
  tcase_add_test(tc, test_tags_follow_their_grammar);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
