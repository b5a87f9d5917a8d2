/* The pointer map (base/src/ptr_map.c) against a plain array of pairs
 * searched linearly: random puts, replacements, adds and lookups, in both
 * storage modes (malloc and arena), with iteration visiting each entry
 * exactly once. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/arena.h"
#include "nimble/ptr_map.h"
#include "nimble_test.h"

enum { KEYS = 3000 };

/* The reference: key i (a pointer into `pool`) -> value, or absent. */
typedef struct reference {
  void *value[KEYS];
  bool present[KEYS];
} reference;

static uint64_t next_random(uint64_t *x) {
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

static void check_against(const nimble_ptr_map *m, const reference *ref, const char *pool) {
  size_t count = 0;
  for (size_t i = 0; i < KEYS; i++) {
    void *v = (void *)1;
    bool found = nimble_ptr_map_find(m, pool + i, &v);
    ck_assert_int_eq(found, ref->present[i]);
    ck_assert_int_eq(nimble_ptr_map_has(m, pool + i), ref->present[i]);
    if (found) {
      ck_assert_ptr_eq(v, ref->value[i]);
      ck_assert_ptr_eq(nimble_ptr_map_get(m, pool + i), ref->value[i]);
      count++;
    } else {
      ck_assert_ptr_null(nimble_ptr_map_get(m, pool + i));
    }
  }
  ck_assert_uint_eq(m->count, count);
  /* Iteration visits every entry once, with its value. */
  bool *seen = calloc(KEYS, 1);
  const void *k;
  void *v;
  size_t visited = 0;
  for (size_t pos = 0; nimble_ptr_map_next(m, &pos, &k, &v);) {
    size_t i = (size_t)((const char *)k - pool);
    ck_assert_uint_lt(i, KEYS);
    ck_assert(!seen[i]);
    seen[i] = true;
    ck_assert(ref->present[i]);
    ck_assert_ptr_eq(v, ref->value[i]);
    visited++;
  }
  ck_assert_uint_eq(visited, count);
  free(seen);
}

static void random_workout(nimble_arena *arena) {
  static char pool[KEYS];
  reference *ref = calloc(1, sizeof *ref);
  nimble_ptr_map m;
  nimble_ptr_map_init(&m, arena);
  uint64_t x = 0x243F6A8885A308D3ull;
  for (int step = 0; step < 20000; step++) {
    size_t i = (size_t)(next_random(&x) % KEYS);
    void *value = (void *)(uintptr_t)(next_random(&x) | 1);
    if (next_random(&x) % 3 == 0) {
      int added = nimble_ptr_map_add(&m, pool + i, value);
      ck_assert_int_eq(added, ref->present[i] ? 0 : 1);
      if (!ref->present[i]) ref->value[i] = value;
    } else {
      ck_assert(nimble_ptr_map_put(&m, pool + i, value));
      ref->value[i] = value;
    }
    ref->present[i] = true;
    if (step % 4000 == 0) check_against(&m, ref, pool);
  }
  check_against(&m, ref, pool);
  /* Replacing every value while iterating keeps the table as it is. */
  const void *k;
  size_t cap = m.cap;
  for (size_t pos = 0; nimble_ptr_map_next(&m, &pos, &k, NULL);) {
    size_t i = (size_t)((const char *)k - pool);
    ref->value[i] = (void *)(uintptr_t)(i + 1);
    ck_assert(nimble_ptr_map_put(&m, k, ref->value[i]));
  }
  ck_assert_uint_eq(m.cap, cap);
  check_against(&m, ref, pool);
  nimble_ptr_map_deinit(&m);
  ck_assert_uint_eq(m.count, 0);
  ck_assert_ptr_null(nimble_ptr_map_get(&m, pool));
  free(ref);
}

START_TEST(test_a_malloc_map_agrees_with_a_linear_search) { random_workout(NULL); }
END_TEST

START_TEST(test_an_arena_map_agrees_with_a_linear_search) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  random_workout(a);
  ck_assert_uint_gt(nimble_arena_bytes_used(a), 0);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_a_zeroed_map_is_empty_and_stores_null_values) {
  nimble_ptr_map m = {0};
  int key = 0;
  const void *k;
  size_t pos = 0;
  ck_assert(!nimble_ptr_map_has(&m, &key));
  ck_assert(!nimble_ptr_map_next(&m, &pos, &k, NULL));
  /* A NULL value is a value: present, and get() cannot tell it apart. */
  ck_assert(nimble_ptr_map_put(&m, &key, NULL));
  ck_assert(nimble_ptr_map_has(&m, &key));
  ck_assert_ptr_null(nimble_ptr_map_get(&m, &key));
  ck_assert_int_eq(nimble_ptr_map_add(&m, &key, &m), 0);
  ck_assert_ptr_null(nimble_ptr_map_get(&m, &key));
  ck_assert_uint_eq(m.count, 1);
  nimble_ptr_map_deinit(&m);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ptr_map");
  TCase *tc = tcase_create("ptr_map");
  tcase_add_test(tc, test_a_malloc_map_agrees_with_a_linear_search);
  tcase_add_test(tc, test_an_arena_map_agrees_with_a_linear_search);
  tcase_add_test(tc, test_a_zeroed_map_is_empty_and_stores_null_values);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
