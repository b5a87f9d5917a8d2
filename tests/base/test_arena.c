/* The arena (base/src/arena.c): alignment, zeroing, big blocks, strings and
 * overflowing requests. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "nimble/arena.h"
#include "nimble_test.h"

START_TEST(test_allocations_are_aligned_zeroed_and_distinct) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  unsigned char *prev = NULL;
  for (size_t i = 1; i < 2000; i += 7) {
    unsigned char *p = nimble_arena_alloc(a, i);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % 16, 0);
    bool zero = true;
    for (size_t k = 0; k < i; k++) zero = zero && p[k] == 0;
    ck_assert(zero);
    memset(p, 0xab, i); /* ASan flags an overlap or overrun */
    ck_assert_ptr_ne(p, prev);
    prev = p;
  }
  ck_assert_uint_ge(nimble_arena_bytes_used(a), 2000u * 2000u / 14u);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_big_blocks_get_their_own_chunk_and_small_ones_continue) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  char *small1 = nimble_arena_alloc(a, 32);
  char *big = nimble_arena_alloc(a, 10u << 20);
  char *small2 = nimble_arena_alloc(a, 32);
  ck_assert_ptr_nonnull(big);
  memset(big, 1, 10u << 20);
  /* The small allocations share a chunk: the big one did not end it. */
  ck_assert_int_eq((int)(small2 - small1), 32);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_overflowing_requests_return_null) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  ck_assert_ptr_null(nimble_arena_calloc(a, SIZE_MAX / 2, 4));
  ck_assert_ptr_null(nimble_arena_alloc(a, SIZE_MAX - 4));
  ck_assert_ptr_nonnull(nimble_arena_calloc(a, 0, 8));
  nimble_arena_destroy(a);
  nimble_arena_destroy(NULL);
}
END_TEST

START_TEST(test_strings_are_copied) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  char src[] = "hello.world";
  char *s = nimble_arena_strdup(a, src);
  char *t = nimble_arena_strndup(a, src, 5);
  src[0] = 'j';
  ck_assert_str_eq(s, "hello.world");
  ck_assert_str_eq(t, "hello");
  ck_assert_str_eq(nimble_arena_sprintf(a, "%s-%d", "x", 42), "x-42");
  nimble_arena_destroy(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("arena");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_allocations_are_aligned_zeroed_and_distinct);
  tcase_add_test(tc, test_big_blocks_get_their_own_chunk_and_small_ones_continue);
  tcase_add_test(tc, test_overflowing_requests_return_null);
  tcase_add_test(tc, test_strings_are_copied);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
