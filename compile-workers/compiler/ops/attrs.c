/* Operator attributes: building a call's attribute list from named values,
 * defaults, and typed accessors. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "nimble/op.h"

static const char *kind_name(nimble_attr_kind_t k) {
  switch (k) {
    case NIMBLE_ATTR_INT: return "an int";
    case NIMBLE_ATTR_FLOAT: return "a float";
    case NIMBLE_ATTR_INTS: return "a list of ints";
    case NIMBLE_ATTR_STRING: return "a string";
  }
  return "?";
}

int nimble_op_attr_index(const nimble_op *op, const char *name) {
  for (size_t i = 0; i < op->num_attrs; i++)
    if (strcmp(op->attrs[i].name, name) == 0) return (int)i;
  return -1;
}

nimble_status_t nimble_attrs_make(nimble_arena *arena, const nimble_op *op,
                                  const nimble_named_attr_t *given, size_t num_given,
                                  nimble_attrs_t *out) {
  out->count = 0;
  out->values = NULL;
  if (op->num_attrs == 0) {
    if (num_given)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "operator '%s' has no attribute '%s'",
                                op->name, given[0].name);
    return nimble_ok();
  }
  nimble_attr_value_t *vals = nimble_arena_calloc(arena, op->num_attrs, sizeof(*vals));
  bool *set = nimble_arena_calloc(arena, op->num_attrs, sizeof(*set));
  if (!vals || !set)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory building attributes");
  for (size_t i = 0; i < op->num_attrs; i++) vals[i] = op->attrs[i].default_value;
  for (size_t g = 0; g < num_given; g++) {
    int idx = nimble_op_attr_index(op, given[g].name);
    if (idx < 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "operator '%s' has no attribute '%s'",
                                op->name, given[g].name);
    if (set[idx])
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "attribute '%s' of operator '%s' is given twice", given[g].name,
                                op->name);
    const nimble_attr_spec_t *spec = &op->attrs[idx];
    nimble_attr_value_t v = given[g].value;
    if (spec->kind == NIMBLE_ATTR_FLOAT && v.kind == NIMBLE_ATTR_INT) {
      v.kind = NIMBLE_ATTR_FLOAT;
      v.f = (double)v.i;
    }
    if (v.kind != spec->kind)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "attribute '%s' of operator '%s' must be %s, got %s", spec->name,
                                op->name, kind_name(spec->kind), kind_name(v.kind));
    /* Copy what the caller's value points to: frontends build values on
     * their stack. */
    if (v.kind == NIMBLE_ATTR_INTS && v.n) {
      int64_t *ints = nimble_arena_calloc(arena, v.n, sizeof(int64_t));
      if (!ints) return NIMBLE_OOM();
      memcpy(ints, v.ints, v.n * sizeof(int64_t));
      v.ints = ints;
    }
    if (v.kind == NIMBLE_ATTR_STRING) {
      v.s = nimble_arena_strdup(arena, v.s ? v.s : "");
      if (!v.s) return NIMBLE_OOM();
    }
    vals[idx] = v;
    set[idx] = true;
  }
  for (size_t i = 0; i < op->num_attrs; i++)
    if (op->attrs[i].required && !set[i])
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "operator '%s' needs attribute '%s' (%s)", op->name,
                                op->attrs[i].name, kind_name(op->attrs[i].kind));
  out->count = op->num_attrs;
  out->values = vals;
  return nimble_ok();
}

/* An empty attribute list means "all defaults": the accessors fall back to
 * each spec's default, so no memory is needed (shape functions at run time
 * have no arena). */
nimble_status_t nimble_attrs_defaults(const nimble_op *op, nimble_attrs_t *out) {
  for (size_t i = 0; i < op->num_attrs; i++)
    if (op->attrs[i].required)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "operator '%s' needs attribute '%s'",
                                op->name, op->attrs[i].name);
  out->count = 0;
  out->values = NULL;
  return nimble_ok();
}

static const nimble_attr_value_t *attr_lookup(const nimble_op *op, const nimble_attrs_t *attrs,
                                              const char *name, nimble_attr_kind_t kind) {
  int idx = nimble_op_attr_index(op, name);
  assert(idx >= 0 && "attribute not declared by the operator");
  assert(op->attrs[idx].kind == kind);
  (void)kind;
  if (idx < 0) return NULL;
  if (attrs && (size_t)idx < attrs->count) return &attrs->values[idx];
  return &op->attrs[idx].default_value;
}

int64_t nimble_attrs_int(const nimble_op *op, const nimble_attrs_t *attrs, const char *name) {
  const nimble_attr_value_t *v = attr_lookup(op, attrs, name, NIMBLE_ATTR_INT);
  return v ? v->i : 0;
}

double nimble_attrs_float(const nimble_op *op, const nimble_attrs_t *attrs, const char *name) {
  const nimble_attr_value_t *v = attr_lookup(op, attrs, name, NIMBLE_ATTR_FLOAT);
  return v ? v->f : 0.0;
}

const char *nimble_attrs_string(const nimble_op *op, const nimble_attrs_t *attrs,
                                const char *name) {
  const nimble_attr_value_t *v = attr_lookup(op, attrs, name, NIMBLE_ATTR_STRING);
  return v && v->s ? v->s : "";
}

const int64_t *nimble_attrs_ints(const nimble_op *op, const nimble_attrs_t *attrs,
                                 const char *name, size_t *n) {
  const nimble_attr_value_t *v = attr_lookup(op, attrs, name, NIMBLE_ATTR_INTS);
  *n = v ? v->n : 0;
  return v ? v->ints : NULL;
}

bool nimble_attr_value_equal(const nimble_attr_value_t *a, const nimble_attr_value_t *b) {
  if (a->kind != b->kind) return false;
  switch (a->kind) {
    case NIMBLE_ATTR_INT: return a->i == b->i;
    case NIMBLE_ATTR_FLOAT:
      return a->f == b->f || (isnan(a->f) && isnan(b->f));
    case NIMBLE_ATTR_INTS:
      return a->n == b->n && (a->n == 0 || memcmp(a->ints, b->ints, a->n * sizeof(int64_t)) == 0);
    case NIMBLE_ATTR_STRING: return strcmp(a->s ? a->s : "", b->s ? b->s : "") == 0;
  }
  return false;
}

bool nimble_attr_value_is_default(const nimble_attr_spec_t *spec, const nimble_attr_value_t *v) {
  return nimble_attr_value_equal(&spec->default_value, v);
}
