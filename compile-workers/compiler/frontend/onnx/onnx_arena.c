/* The model's arena and its name table. A model is built once and freed as
 * a whole, so nothing inside it is freed on its own. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

struct onnx_arena_chunk {
  onnx_arena_chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
};

enum { ARENA_CHUNK = 64 * 1024 };

void *nimble_onnx_arena_alloc(onnx_arena *arena, size_t size) {
  size = (size + 15) & ~(size_t)15;
  if (size == 0) size = 16;
  onnx_arena_chunk *c = arena->head;
  if (!c || c->cap - c->used < size) {
    /* Big requests get a chunk of their own so the current chunk's free
     * space is not thrown away. */
    size_t cap = size > ARENA_CHUNK / 4 ? size : ARENA_CHUNK;
    if (cap > SIZE_MAX - sizeof(onnx_arena_chunk)) return NULL;
    onnx_arena_chunk *n = malloc(sizeof(onnx_arena_chunk) + cap);
    if (!n) return NULL;
    n->used = 0;
    n->cap = cap;
    if (c && cap != ARENA_CHUNK) {
      n->next = c->next; /* keep allocating from the current chunk */
      c->next = n;
    } else {
      n->next = c;
      arena->head = n;
    }
    c = n;
  }
  void *p = c->data + c->used;
  c->used += size;
  memset(p, 0, size);
  return p;
}

void *nimble_onnx_arena_array(onnx_arena *arena, size_t n, size_t elem) {
  size_t bytes;
  if (__builtin_mul_overflow(n, elem, &bytes) || bytes > SIZE_MAX - 16) return NULL;
  return nimble_onnx_arena_alloc(arena, bytes);
}

void nimble_onnx_arena_free(onnx_arena *arena) {
  onnx_arena_chunk *c = arena->head;
  while (c) {
    onnx_arena_chunk *next = c->next;
    free(c);
    c = next;
  }
  arena->head = NULL;
}

static uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

nimble_status_t nimble_onnx_table_init(onnx_arena *arena, onnx_value_table *t, size_t expected) {
  size_t cap = 16;
  while (cap / 2 < expected) {
    if (cap > SIZE_MAX / 4)
      return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "too many values (%zu)", expected);
    cap *= 2;
  }
  t->slots = nimble_onnx_arena_array(arena, cap, sizeof(*t->slots));
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
