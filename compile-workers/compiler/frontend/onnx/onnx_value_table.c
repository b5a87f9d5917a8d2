/* A graph's name -> value table, in the model's arena: a model is built
 * once and freed as a whole, so nothing inside it is freed on its own. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

static uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

nimble_status_t nimble_onnx_table_init(nimble_arena *arena, onnx_value_table *t, size_t expected) {
  size_t cap = 16;
  while (cap / 2 < expected) {
    if (cap > SIZE_MAX / 4)
      return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "too many values (%zu)", expected);
    cap *= 2;
  }
  t->slots = nimble_arena_calloc(arena, cap, sizeof(*t->slots));
  if (!t->slots)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory for %zu values", expected);
  t->cap = cap;
  t->count = 0;
  return nimble_ok();
}

nimble_onnx_value_t *nimble_onnx_table_find(const onnx_value_table *t, const char *name) {
  if (!t->cap || !name) return NULL;
  size_t mask = t->cap - 1;
  for (size_t i = (size_t)hash_name(name) & mask;; i = (i + 1) & mask) {
    nimble_onnx_value_t *v = t->slots[i];
    if (!v) return NULL;
    if (strcmp(v->name, name) == 0) return v;
  }
}

void nimble_onnx_table_insert(onnx_value_table *t, nimble_onnx_value_t *v) {
  size_t mask = t->cap - 1;
  size_t i = (size_t)hash_name(v->name) & mask;
  while (t->slots[i]) i = (i + 1) & mask;
  t->slots[i] = v;
  t->count++;
}
