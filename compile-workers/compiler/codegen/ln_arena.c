/* The loop-nest arena: nimble_base's arena for the nodes, and the first
 * construction error. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ln_internal.h"
#include "nimble/arena.h"

struct nimble_ln_arena {
  nimble_arena *mem; /* the nodes */
  char error[512];
  int failed;
  int next_var_id;
};

nimble_status_t nimble_ln_arena_create(nimble_ln_arena **out) {
  *out = calloc(1, sizeof(nimble_ln_arena));
  if (!*out) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory for a loop-nest arena");
  nimble_status_t s = nimble_arena_create(&(*out)->mem);
  if (s) {
    free(*out);
    *out = NULL;
    return nimble_status_annotate(s, "loop-nest arena");
  }
  return nimble_ok();
}

void nimble_ln_arena_destroy(nimble_ln_arena *arena) {
  if (!arena) return;
  nimble_arena_destroy(arena->mem);
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
  void *p = nimble_arena_alloc(arena->mem, bytes);
  if (!p) nimble_ln_arena_fail(arena, "loop-nest arena: out of memory");
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
