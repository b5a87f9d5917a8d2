/* Modules: type definitions and global functions, kept in definition order
 * in arena arrays that double when full. Lookups are linear: modules hold
 * tens of definitions, not thousands. */
#include <string.h>

#include "nimble/ir.h"

struct nimble_module {
  nimble_arena *arena;
  const nimble_typedef **typedefs;
  size_t num_typedefs, cap_typedefs;
  nimble_global_func_t *funcs;
  size_t num_funcs, cap_funcs;
  uint32_t next_var_id;
};

nimble_status_t nimble_module_create(nimble_arena *arena, nimble_module **out) {
  nimble_module *m = nimble_arena_alloc(arena, sizeof(*m));
  if (!m) return NIMBLE_OOM_IN("building a module");
  m->arena = arena;
  m->next_var_id = 1;
  *out = m;
  return nimble_ok();
}

nimble_arena *nimble_module_arena(const nimble_module *m) { return m->arena; }

uint32_t nimble_module_fresh_var_id(nimble_module *m) { return m->next_var_id++; }
uint32_t nimble_module_next_var_id(const nimble_module *m) { return m->next_var_id; }

static bool grow(nimble_arena *a, void **items, size_t *cap, size_t count, size_t size) {
  if (count < *cap) return true;
  size_t ncap = *cap ? *cap * 2 : 8;
  void *p = nimble_arena_calloc(a, ncap, size);
  if (!p) return false;
  if (count) memcpy(p, *items, count * size);
  *items = p;
  *cap = ncap;
  return true;
}

nimble_status_t nimble_module_add_typedef(nimble_module *m, const char *name, size_t num_params,
                                          const nimble_type *const *params, size_t num_ctors,
                                          const char *const *ctor_names,
                                          const size_t *ctor_num_fields,
                                          const nimble_type *const *const *ctor_fields,
                                          const nimble_src_loc_t *loc,
                                          const nimble_typedef **out) {
  if (nimble_module_find_typedef(m, name))
    return nimble_status_make(NIMBLE_ALREADY_EXISTS, "type '%s' is defined twice", name);
  for (size_t i = 0; i < num_ctors; i++) {
    if (nimble_module_find_ctor(m, ctor_names[i]))
      return nimble_status_make(NIMBLE_ALREADY_EXISTS,
                                "constructor '%s' of type '%s' is already defined", ctor_names[i],
                                name);
    for (size_t j = 0; j < i; j++)
      if (strcmp(ctor_names[i], ctor_names[j]) == 0)
        return nimble_status_make(NIMBLE_ALREADY_EXISTS,
                                  "constructor '%s' appears twice in type '%s'", ctor_names[i],
                                  name);
  }
  nimble_arena *a = m->arena;
  nimble_typedef *td = nimble_arena_alloc(a, sizeof(*td));
  const nimble_type **ps = num_params ? nimble_arena_calloc(a, num_params, sizeof(*ps)) : NULL;
  nimble_constructor **cs = num_ctors ? nimble_arena_calloc(a, num_ctors, sizeof(*cs)) : NULL;
  if (!td || (num_params && !ps) || (num_ctors && !cs)) return NIMBLE_OOM_IN("building a module");
  td->name = nimble_arena_strdup(a, name);
  if (!td->name) return NIMBLE_OOM_IN("building a module");
  if (num_params) memcpy(ps, params, num_params * sizeof(*ps));
  td->num_params = num_params;
  td->params = ps;
  if (loc) td->loc = *loc;
  for (size_t i = 0; i < num_ctors; i++) {
    nimble_constructor *c = nimble_arena_alloc(a, sizeof(*c));
    if (!c) return NIMBLE_OOM_IN("building a module");
    c->name = nimble_arena_strdup(a, ctor_names[i]);
    c->owner = td;
    c->tag = (uint32_t)i;
    c->num_fields = ctor_num_fields[i];
    if (c->num_fields) {
      const nimble_type **fs = nimble_arena_calloc(a, c->num_fields, sizeof(*fs));
      if (!fs) return NIMBLE_OOM_IN("building a module");
      memcpy(fs, ctor_fields[i], c->num_fields * sizeof(*fs));
      c->fields = fs;
    }
    if (!c->name) return NIMBLE_OOM_IN("building a module");
    cs[i] = c;
  }
  td->num_ctors = num_ctors;
  td->ctors = (const nimble_constructor *const *)cs;
  if (!grow(a, (void **)&m->typedefs, &m->cap_typedefs, m->num_typedefs, sizeof(*m->typedefs)))
    return NIMBLE_OOM_IN("building a module");
  m->typedefs[m->num_typedefs++] = td;
  if (out) *out = td;
  return nimble_ok();
}

nimble_status_t nimble_module_add_func(nimble_module *m, const char *name,
                                       const nimble_expr *func) {
  if (!func || func->kind != NIMBLE_EXPR_FUNC)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "global '@%s' must be a function", name);
  if (nimble_module_find_func(m, name))
    return nimble_status_make(NIMBLE_ALREADY_EXISTS, "global function '@%s' is defined twice",
                              name);
  if (!grow(m->arena, (void **)&m->funcs, &m->cap_funcs, m->num_funcs, sizeof(*m->funcs)))
    return NIMBLE_OOM_IN("building a module");
  const char *n = nimble_arena_strdup(m->arena, name);
  if (!n) return NIMBLE_OOM_IN("building a module");
  m->funcs[m->num_funcs].name = n;
  m->funcs[m->num_funcs].func = func;
  m->num_funcs++;
  return nimble_ok();
}

nimble_status_t nimble_module_replace_func(nimble_module *m, const char *name,
                                           const nimble_expr *func) {
  if (!func || func->kind != NIMBLE_EXPR_FUNC)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "global '@%s' must be a function", name);
  for (size_t i = 0; i < m->num_funcs; i++) {
    if (strcmp(m->funcs[i].name, name) == 0) {
      m->funcs[i].func = func;
      return nimble_ok();
    }
  }
  return nimble_status_make(NIMBLE_NOT_FOUND, "no global function '@%s'", name);
}

void nimble_module_truncate_funcs(nimble_module *m, size_t n) {
  if (n < m->num_funcs) m->num_funcs = n;
}

size_t nimble_module_num_typedefs(const nimble_module *m) { return m->num_typedefs; }
const nimble_typedef *nimble_module_typedef_at(const nimble_module *m, size_t i) {
  return i < m->num_typedefs ? m->typedefs[i] : NULL;
}
size_t nimble_module_num_funcs(const nimble_module *m) { return m->num_funcs; }
const nimble_global_func_t *nimble_module_func_at(const nimble_module *m, size_t i) {
  return i < m->num_funcs ? &m->funcs[i] : NULL;
}

const nimble_typedef *nimble_module_find_typedef(const nimble_module *m, const char *name) {
  for (size_t i = 0; i < m->num_typedefs; i++)
    if (strcmp(m->typedefs[i]->name, name) == 0) return m->typedefs[i];
  return NULL;
}

const nimble_constructor *nimble_module_find_ctor(const nimble_module *m, const char *name) {
  for (size_t i = 0; i < m->num_typedefs; i++) {
    const nimble_typedef *td = m->typedefs[i];
    for (size_t j = 0; j < td->num_ctors; j++)
      if (strcmp(td->ctors[j]->name, name) == 0) return td->ctors[j];
  }
  return NULL;
}

const nimble_expr *nimble_module_find_func(const nimble_module *m, const char *name) {
  for (size_t i = 0; i < m->num_funcs; i++)
    if (strcmp(m->funcs[i].name, name) == 0) return m->funcs[i].func;
  return NULL;
}
