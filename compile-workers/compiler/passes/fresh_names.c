/* Fresh variable names. The printer writes names as they are and the
 * parser resolves each use to the nearest binding, so a new variable must
 * not reuse a name of its function: printing then parsing gives back the
 * same program (the tests compare modules that way). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass_internal.h"

static size_t hash_str(const char *s, size_t cap) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return (size_t)h & (cap - 1);
}

static bool set_has(const pass_namer *n, const char *name) {
  if (!n->cap) return false;
  for (size_t h = hash_str(name, n->cap); n->names[h]; h = (h + 1) & (n->cap - 1))
    if (strcmp(n->names[h], name) == 0) return true;
  return false;
}

static bool set_add(pass_namer *n, const char *name) {
  if (set_has(n, name)) return true;
  if ((n->count + 1) * 2 > n->cap) {
    size_t ncap = n->cap ? n->cap * 2 : 64;
    char **names = calloc(ncap, sizeof *names);
    if (!names) return false;
    for (size_t i = 0; i < n->cap; i++) {
      if (!n->names[i]) continue;
      size_t h = hash_str(n->names[i], ncap);
      while (names[h]) h = (h + 1) & (ncap - 1);
      names[h] = n->names[i];
    }
    free(n->names);
    n->names = names;
    n->cap = ncap;
  }
  size_t h = hash_str(name, n->cap);
  while (n->names[h]) h = (h + 1) & (n->cap - 1);
  n->names[h] = (char *)name;
  n->count++;
  return true;
}

static bool collect_pattern(pass_namer *n, const nimble_pattern *p) {
  if (p->kind == NIMBLE_PATTERN_VAR) return set_add(n, p->var->u.var.name);
  for (size_t i = 0; i < p->num_subs; i++)
    if (!collect_pattern(n, p->subs[i])) return false;
  return true;
}

static bool collect(pass_namer *n, const nimble_expr *e) {
  while (e) {
    switch (e->kind) {
      case NIMBLE_EXPR_VAR: return set_add(n, e->u.var.name);
      case NIMBLE_EXPR_CALL:
        if (!collect(n, e->u.call.callee)) return false;
        for (size_t i = 0; i < e->u.call.num_args; i++)
          if (!collect(n, e->u.call.args[i])) return false;
        return true;
      case NIMBLE_EXPR_LET:
        if (!set_add(n, e->u.let.var->u.var.name) || !collect(n, e->u.let.value)) return false;
        e = e->u.let.body; /* long chains: a loop, not recursion */
        continue;
      case NIMBLE_EXPR_IF:
        if (!collect(n, e->u.if_.cond) || !collect(n, e->u.if_.then_branch)) return false;
        e = e->u.if_.else_branch;
        continue;
      case NIMBLE_EXPR_TUPLE:
        for (size_t i = 0; i < e->u.tuple.count; i++)
          if (!collect(n, e->u.tuple.fields[i])) return false;
        return true;
      case NIMBLE_EXPR_PROJ: e = e->u.proj.tuple; continue;
      case NIMBLE_EXPR_FUNC:
        for (size_t i = 0; i < e->u.func.num_params; i++)
          if (!set_add(n, e->u.func.params[i]->u.var.name)) return false;
        e = e->u.func.body;
        continue;
      case NIMBLE_EXPR_MATCH:
        if (!collect(n, e->u.match.scrutinee)) return false;
        for (size_t i = 0; i < e->u.match.num_clauses; i++)
          if (!collect_pattern(n, e->u.match.clauses[i].pattern) ||
              !collect(n, e->u.match.clauses[i].body))
            return false;
        return true;
      default: return true;
    }
  }
  return true;
}

nimble_status_t pass_namer_init(pass_namer *n, nimble_arena *arena, const nimble_expr *e) {
  memset(n, 0, sizeof *n);
  n->arena = arena;
  if (!collect(n, e)) {
    pass_namer_deinit(n);
    return NIMBLE_OOM();
  }
  return nimble_ok();
}

void pass_namer_deinit(pass_namer *n) {
  free(n->names);
  n->names = NULL;
  n->cap = n->count = 0;
}

const nimble_expr *pass_namer_var(pass_namer *n, const char *base, const nimble_type *annotation) {
  for (;;) {
    char *name = nimble_arena_sprintf(n->arena, "%s%u", base, n->counter++);
    if (!name) return NULL;
    if (set_has(n, name)) continue;
    if (!set_add(n, name)) return NULL;
    return nimble_ir_var(n->arena, name, annotation, NULL);
  }
}
