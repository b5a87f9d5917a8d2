/* A bump allocator over a list of chunks: big requests get a chunk of their
 * own so a huge constant does not waste the rest of a normal chunk. */
#include <assert.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/arena.h"

#define ARENA_CHUNK_SIZE (64u * 1024u)
#define ARENA_ALIGN 16u

typedef struct arena_chunk {
  struct arena_chunk *next;
  size_t size;
  size_t used;
  _Alignas(16) unsigned char data[];
} arena_chunk;

struct nimble_arena {
  arena_chunk *head;
  size_t bytes_used;
};

nimble_status_t nimble_arena_create(nimble_arena **out) {
  nimble_arena *a = calloc(1, sizeof(*a));
  if (!a) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory creating an arena");
  *out = a;
  return nimble_ok();
}

void nimble_arena_destroy(nimble_arena *arena) {
  if (!arena) return;
  arena_chunk *c = arena->head;
  while (c) {
    arena_chunk *next = c->next;
    free(c);
    c = next;
  }
  free(arena);
}

/* A big chunk comes zeroed from calloc: for a block that size the allocator
 * maps fresh pages, which the kernel zeroes as they are first touched, so a
 * model's 10 MB of weights is not written twice (zeros, then the data). */
static arena_chunk *arena_new_chunk(size_t size, int zeroed) {
  if (size > SIZE_MAX - sizeof(arena_chunk)) return NULL;
  arena_chunk *c = zeroed ? calloc(1, sizeof(arena_chunk) + size) : malloc(sizeof(arena_chunk) + size);
  if (!c) return NULL;
  c->next = NULL;
  c->size = size;
  c->used = 0;
  return c;
}

void *nimble_arena_alloc(nimble_arena *arena, size_t size) {
  if (size == 0) size = 1;
  if (size > SIZE_MAX - ARENA_ALIGN) return NULL;
  size_t rounded = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
  arena_chunk *c = arena->head;
  if (!c || c->size - c->used < rounded) {
    if (rounded > ARENA_CHUNK_SIZE / 4) {
      /* A big block gets its own chunk, kept behind the current one. */
      arena_chunk *big = arena_new_chunk(rounded, 1);
      if (!big) return NULL;
      big->used = rounded;
      if (c) {
        big->next = c->next;
        c->next = big;
      } else {
        arena->head = big;
      }
      arena->bytes_used += rounded;
      return big->data;
    }
    arena_chunk *fresh = arena_new_chunk(ARENA_CHUNK_SIZE, 0);
    if (!fresh) return NULL;
    fresh->next = c;
    arena->head = fresh;
    c = fresh;
  }
  assert(c->used % ARENA_ALIGN == 0 && c->size - c->used >= rounded);
  void *p = c->data + c->used;
  c->used += rounded;
  arena->bytes_used += rounded;
  memset(p, 0, rounded);
  return p;
}

void *nimble_arena_calloc(nimble_arena *arena, size_t count, size_t size) {
  if (size != 0 && count > SIZE_MAX / size) return NULL;
  return nimble_arena_alloc(arena, count * size);
}

char *nimble_arena_strndup(nimble_arena *arena, const char *s, size_t n) {
  if (n == SIZE_MAX) return NULL;
  char *p = nimble_arena_alloc(arena, n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *nimble_arena_strdup(nimble_arena *arena, const char *s) {
  return nimble_arena_strndup(arena, s, strlen(s));
}

char *nimble_arena_sprintf(nimble_arena *arena, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *p = nimble_arena_alloc(arena, (size_t)n + 1);
  if (!p) return NULL;
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

size_t nimble_arena_bytes_used(const nimble_arena *arena) { return arena->bytes_used; }
