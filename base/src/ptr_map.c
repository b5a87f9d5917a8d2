/* The pointer map (nimble/ptr_map.h): open addressing, linear probing,
 * grown by doubling when it would be more than half full. */
#include "nimble/ptr_map.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The 64-bit finalizer of MurmurHash3: allocators hand out addresses with
 * the low bits equal, which this spreads over the whole word. */
static size_t hash_ptr(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x;
}

void nimble_ptr_map_init(nimble_ptr_map *m, nimble_arena *arena) {
  memset(m, 0, sizeof *m);
  m->arena = arena;
}

void nimble_ptr_map_deinit(nimble_ptr_map *m) {
  nimble_arena *arena = m->arena;
  if (!arena) {
    free(m->keys);
    free(m->vals);
  }
  nimble_ptr_map_init(m, arena);
}

/* The slot holding `key`, or the empty slot where it would go. */
static size_t slot_of(const nimble_ptr_map *m, const void *key) {
  assert(m->cap && (m->cap & (m->cap - 1)) == 0); /* the mask below needs a power of two */
  assert(key);                                    /* NULL marks an empty slot */
  size_t mask = m->cap - 1, i = hash_ptr(key) & mask;
  while (m->keys[i] && m->keys[i] != key) i = (i + 1) & mask;
  return i;
}

static void *alloc_zeroed(nimble_ptr_map *m, size_t n, size_t size) {
  return m->arena ? nimble_arena_calloc(m->arena, n, size) : calloc(n, size);
}

static bool grow(nimble_ptr_map *m) {
  if (m->cap > SIZE_MAX / 2 / sizeof(void *)) return false;
  nimble_ptr_map bigger = *m;
  bigger.cap = m->cap ? m->cap * 2 : 64;
  bigger.keys = alloc_zeroed(m, bigger.cap, sizeof *bigger.keys);
  bigger.vals = alloc_zeroed(m, bigger.cap, sizeof *bigger.vals);
  if (!bigger.keys || !bigger.vals) {
    if (!m->arena) {
      free(bigger.keys);
      free(bigger.vals);
    }
    return false;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = slot_of(&bigger, m->keys[i]);
    bigger.keys[j] = m->keys[i];
    bigger.vals[j] = m->vals[i];
  }
  if (!m->arena) {
    free(m->keys);
    free(m->vals);
  }
  *m = bigger;
  return true;
}

int nimble_ptr_map_add(nimble_ptr_map *m, const void *key, void *value) {
  if (m->cap && m->keys[slot_of(m, key)]) return 0;
  if ((m->count + 1) * 2 > m->cap && !grow(m)) return -1;
  assert((m->count + 1) * 2 <= m->cap); /* probing ends: there is always a free slot */
  size_t i = slot_of(m, key);
  m->keys[i] = key;
  m->vals[i] = value;
  m->count++;
  return 1;
}

bool nimble_ptr_map_put(nimble_ptr_map *m, const void *key, void *value) {
  if (m->cap) {
    size_t i = slot_of(m, key);
    if (m->keys[i]) {
      m->vals[i] = value;
      return true;
    }
  }
  return nimble_ptr_map_add(m, key, value) >= 0;
}

bool nimble_ptr_map_find(const nimble_ptr_map *m, const void *key, void **value) {
  if (!m->cap) return false;
  size_t i = slot_of(m, key);
  if (!m->keys[i]) return false;
  if (value) *value = m->vals[i];
  return true;
}

void *nimble_ptr_map_get(const nimble_ptr_map *m, const void *key) {
  void *v = NULL;
  return nimble_ptr_map_find(m, key, &v) ? v : NULL;
}

bool nimble_ptr_map_next(const nimble_ptr_map *m, size_t *pos, const void **key, void **value) {
  for (size_t i = *pos; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    if (key) *key = m->keys[i];
    if (value) *value = m->vals[i];
    *pos = i + 1;
    return true;
  }
  *pos = m->cap;
  return false;
}
