/* Store tags for targets (target_tag.c). */
#include <string.h>

#include "nimble_test.h"

#include "nimble/target.h"

/* Digests from `printf '%s' x86:cpu=znver4 | sha256sum`. */
START_TEST(test_tags_are_the_kind_or_the_kind_and_a_hash_of_the_spec) {
  nimble_target_t t;
  char tag[NIMBLE_TARGET_TAG_MAX + 1];
  NIMBLE_ASSERT_OK(nimble_target_parse("x86:cpu=x86-64-v3", &t));
  nimble_target_tag(&t, tag);
  ck_assert_str_eq(tag, "x86");
  NIMBLE_ASSERT_OK(nimble_target_parse("cuda", &t));
  nimble_target_tag(&t, tag);
  ck_assert_str_eq(tag, "cuda");
  NIMBLE_ASSERT_OK(nimble_target_parse("x86:cpu=znver4", &t));
  nimble_target_tag(&t, tag);
  ck_assert_str_eq(tag, "x86-84a9ff0d0f0134a5");
  NIMBLE_ASSERT_OK(nimble_target_parse("cuda:cpu=x86-64-v3,arch=sm_90", &t));
  nimble_target_tag(&t, tag);
  ck_assert_str_eq(tag, "cuda-ef7e0cefea670896");
}
END_TEST

int main(void) {
  Suite *s = suite_create("target_tag");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_tags_are_the_kind_or_the_kind_and_a_hash_of_the_spec);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
