/* The loop-nest arena: bump allocation in chunks, freed as a whole, and the
 * first construction error. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ln_internal.h"

typedef struct ln_chunk {
  struct ln_chunk *next;
  size_t used, size;
  _Alignas(16) unsigned char data[];
} ln_chunk;

struct nimble_ln_arena {
  ln_chunk *head;
  char error[512];
  int failed;
  int next_var_id;
};

enum { LN_CHUNK_BYTES = 64 * 1024 };

nimble_status_t nimble_ln_arena_create(nimble_ln_arena **out) {
  *out = calloc(1, sizeof(nimble_ln_arena));
  if (!*out) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory for a loop-nest arena");
  return nimble_ok();
}

void nimble_ln_arena_destroy(nimble_ln_arena *arena) {
  if (!arena) return;
  ln_chunk *c = arena->head;
  while (c) {
    ln_chunk *next = c->next;
    free(c);
    c = next;
  }
  free(arena);
}

void nimble_ln_arena_fail(nimble_ln_arena *arena, const char *fmt, ...) {
  if (arena->failed) return;
  arena->failed = 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(arena->error, sizeof arena->error, fmt, ap);
  va_end(ap);
}

nimble_status_t nimble_ln_arena_status(const nimble_ln_arena *arena) {
  if (!arena->failed) return nimble_ok();
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s", arena->error);
}

void *nimble_ln_arena_alloc(nimble_ln_arena *arena, size_t bytes) {
  if (bytes > ((size_t)1 << 30)) {
    nimble_ln_arena_fail(arena, "loop-nest arena: request of %zu bytes is too large", bytes);
    return NULL;
  }
  bytes = (bytes + 15) & ~(size_t)15;
  ln_chunk *c = arena->head;
  if (!c || c->size - c->used < bytes) {
    size_t size = bytes > LN_CHUNK_BYTES ? bytes : LN_CHUNK_BYTES;
    c = malloc(sizeof(ln_chunk) + size);
    if (!c) {
      nimble_ln_arena_fail(arena, "loop-nest arena: out of memory");
      return NULL;
    }
    c->size = size;
    c->used = 0;
    c->next = arena->head;
    arena->head = c;
  }
  void *p = c->data + c->used;
  c->used += bytes;
  memset(p, 0, bytes);
  return p;
}

char *nimble_ln_arena_strdup(nimble_ln_arena *arena, const char *s) {
  if (!s) s = "";
  size_t n = strlen(s);
  char *p = nimble_ln_arena_alloc(arena, n + 1);
  if (p) memcpy(p, s, n + 1);
  return p;
}

/* Variable ids key the emitter's table of current values. */
int nimble_ln_arena_next_var_id(nimble_ln_arena *arena) { return arena->next_var_id++; }
