/* Arena: bump allocation freed all at once, the project's one (base/).
 *
 * The compiler allocates from arenas: every type, expression, pattern and
 * module of one compilation lives in one arena and is freed with it, all at
 * once (IR nodes are shared freely: expressions are immutable DAGs, so
 * nothing tracks individual lifetimes); the ONNX loader keeps a model in one,
 * the kernel code generator a loop nest.
 *
 *   nimble_arena *a;
 *   NIMBLE_RETURN_IF_ERROR(nimble_arena_create(&a));
 *   ... build, parse, type-check ...
 *   nimble_arena_destroy(a);
 *
 * Allocation functions return NULL only when memory runs out; IR builders pass
 * that on as NULL and the parser and type checker turn it into a
 * NIMBLE_RESOURCE_EXHAUSTED status.
 */
#ifndef NIMBLE_ARENA_H
#define NIMBLE_ARENA_H

#include <stddef.h>

#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nimble_arena nimble_arena;

/* Creates an empty arena. Caller frees with nimble_arena_destroy. */
nimble_status_t nimble_arena_create(nimble_arena **out);

/* Frees the arena and everything allocated from it. NULL is fine. */
void nimble_arena_destroy(nimble_arena *arena);

/* Zeroed, max-aligned memory owned by the arena; NULL when out of memory or
 * when count * size overflows. */
void *nimble_arena_alloc(nimble_arena *arena, size_t size);
void *nimble_arena_calloc(nimble_arena *arena, size_t count, size_t size);

/* A copy of the first n bytes of s, NUL-terminated, owned by the arena. */
char *nimble_arena_strndup(nimble_arena *arena, const char *s, size_t n);
char *nimble_arena_strdup(nimble_arena *arena, const char *s);

/* A printf-style string owned by the arena. */
char *nimble_arena_sprintf(nimble_arena *arena, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Bytes handed out so far (for statistics and tests). */
size_t nimble_arena_bytes_used(const nimble_arena *arena);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_ARENA_H */
