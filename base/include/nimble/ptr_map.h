/* Pointer-keyed hash map: the project's one (base/).
 *
 * Keys are pointers compared by identity (IR nodes, runtime objects: each
 * is unique, so its address is its name); values are pointers, or small
 * integers stored as pointers. Open addressing with linear probing, at most
 * half full. The slot arrays come from malloc, or from an arena when one is
 * given (then they live as long as it and deinit frees nothing).
 *
 *   nimble_ptr_map m;
 *   nimble_ptr_map_init(&m, NULL);          // or = {0}: the same
 *   if (!nimble_ptr_map_put(&m, var, value)) return out_of_memory();
 *   void *v = nimble_ptr_map_get(&m, var);  // NULL when absent
 *   nimble_ptr_map_deinit(&m);
 *
 * A NULL key is not allowed (it marks an empty slot). Caller-owned
 * storage: the struct is the caller's, its fields the map's.
 */
#ifndef NIMBLE_PTR_MAP_H
#define NIMBLE_PTR_MAP_H

#include <stdbool.h>
#include <stddef.h>

#include "nimble/arena.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nimble_ptr_map {
  const void **keys;
  void **vals;
  size_t cap, count;
  nimble_arena *arena; /* NULL: the slots are malloc'ed */
} nimble_ptr_map;

/* An empty map whose slots come from `arena` (borrowed; NULL: malloc). A
 * zeroed map is an empty malloc'ed one. */
void nimble_ptr_map_init(nimble_ptr_map *m, nimble_arena *arena);

/* Frees malloc'ed slots and empties the map (init again to reuse it). */
void nimble_ptr_map_deinit(nimble_ptr_map *m);

/* Maps `key` (not NULL) to `value`, replacing a present key's value. false
 * when memory runs out (the map is unchanged). Replacing never reallocates,
 * so it is safe while iterating. */
bool nimble_ptr_map_put(nimble_ptr_map *m, const void *key, void *value);

/* Adds `key` with `value` unless present: 1 when added, 0 when present (its
 * value unchanged), -1 when memory runs out. For sets. */
int nimble_ptr_map_add(nimble_ptr_map *m, const void *key, void *value);

/* The value of `key`, or NULL when absent. */
void *nimble_ptr_map_get(const nimble_ptr_map *m, const void *key);

/* Whether `key` is present; its value into *value (may be NULL) when so. */
bool nimble_ptr_map_find(const nimble_ptr_map *m, const void *key, void **value);

static inline bool nimble_ptr_map_has(const nimble_ptr_map *m, const void *key) {
  return nimble_ptr_map_find(m, key, NULL);
}

/* Iteration in slot order: start with *pos = 0; each call gives the next
 * entry (key and value into the pointers, each may be NULL) and false at
 * the end.
 *   for (size_t i = 0; nimble_ptr_map_next(m, &i, &k, &v);) ... */
bool nimble_ptr_map_next(const nimble_ptr_map *m, size_t *pos, const void **key, void **value);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_PTR_MAP_H */
