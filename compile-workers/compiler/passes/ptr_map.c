/* Pointer-keyed hash map with open addressing (linear probing). Passes key
 * it by IR node: variables are unique nodes, so identity is the key. */
#include <assert.h>
#include <stdlib.h>

#include "passes/pass_internal.h"

static size_t hash_ptr(const void *p, size_t cap) {
  assert(cap && (cap & (cap - 1)) == 0); /* the mask below needs a power of two */
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x & (cap - 1);
}

static bool grow(pass_map *m) {
  size_t ncap = m->cap ? m->cap * 2 : 64;
  const void **keys = calloc(ncap, sizeof *keys);
  void **vals = calloc(ncap, sizeof *vals);
  if (!keys || !vals) {
    free(keys);
    free(vals);
    return false;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t h = hash_ptr(m->keys[i], ncap);
    while (keys[h]) h = (h + 1) & (ncap - 1);
    keys[h] = m->keys[i];
    vals[h] = m->vals[i];
  }
  free(m->keys);
  free(m->vals);
  m->keys = keys;
  m->vals = vals;
  m->cap = ncap;
  return true;
}

bool pass_map_put(pass_map *m, const void *key, void *val) {
  assert(key); /* NULL marks an empty slot */
  if ((m->count + 1) * 2 > m->cap && !grow(m)) return false;
  assert((m->count + 1) * 2 <= m->cap); /* probing ends: there is always a free slot */
  size_t h = hash_ptr(key, m->cap);
  while (m->keys[h] && m->keys[h] != key) h = (h + 1) & (m->cap - 1);
  if (!m->keys[h]) {
    m->keys[h] = key;
    m->count++;
  }
  m->vals[h] = val;
  return true;
}

static size_t find(const pass_map *m, const void *key, bool *found) {
  *found = false;
  if (!m->cap) return 0;
  size_t h = hash_ptr(key, m->cap);
  while (m->keys[h]) {
    if (m->keys[h] == key) {
      *found = true;
      return h;
    }
    h = (h + 1) & (m->cap - 1);
  }
  return h;
}

void *pass_map_get(const pass_map *m, const void *key) {
  bool found;
  size_t h = find(m, key, &found);
  return found ? m->vals[h] : NULL;
}

bool pass_map_has(const pass_map *m, const void *key) {
  bool found;
  find(m, key, &found);
  return found;
}

void pass_map_free(pass_map *m) {
  free(m->keys);
  free(m->vals);
  m->keys = NULL;
  m->vals = NULL;
  m->cap = m->count = 0;
}
