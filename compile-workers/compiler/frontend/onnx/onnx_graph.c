/* Graphs: nodes, names and scopes, attributes, and the topological order.
 *
 * A graph is built in three passes. The first registers every name the
 * graph defines (initializers, inputs, node outputs), refusing duplicates,
 * so that a subgraph built in the second pass can see all of them whatever
 * the node order. The second converts attributes (building subgraphs with
 * this graph as their outer scope), checks them against the operator table,
 * and resolves every input to a producer in this graph or an outer scope.
 * The third sorts the nodes: a depth-first walk that keeps the file's order
 * when it is already topological, and names the nodes of a cycle. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"
#include "op_table.h"

const char *nimble_onnx_node_describe(const nimble_onnx_node *node, char *buf, size_t size) {
  if (!size) return buf;
  if (node->name && node->name[0])
    snprintf(buf, size, "node '%s' (%s)", node->name, node->op_type);
  else
    snprintf(buf, size, "node #%zu (%s)", node->index, node->op_type);
  return buf;
}

nimble_status_t nimble_onnx_node_annotate(const nimble_onnx_node *node, nimble_status_t s) {
  if (!s || nimble_status_subject(s) == node) return s;
  if (node->name && node->name[0])
    s = nimble_status_annotate(s, "node '%s' (%s)", node->name, node->op_type);
  else
    s = nimble_status_annotate(s, "node #%zu (%s)", node->index, node->op_type);
  return nimble_status_set_subject(s, node);
}

/* ---- a set of strings (outer references, attribute names) ---- */

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* 1 when added, 0 when already there, -1 when out of memory. */
int nimble_onnx_name_set_add(onnx_name_set *set, const char *name) {
  if ((set->count + 1) * 2 > set->cap) {
    size_t cap = set->cap ? set->cap * 2 : 16;
    const char **slots = calloc(cap, sizeof(*slots));
    if (!slots) return -1;
    for (size_t i = 0; i < set->cap; i++) {
      if (!set->slots[i]) continue;
      size_t j = (size_t)hash_str(set->slots[i]) & (cap - 1);
      while (slots[j]) j = (j + 1) & (cap - 1);
      slots[j] = set->slots[i];
    }
    free(set->slots);
    set->slots = slots;
    set->cap = cap;
  }
  size_t j = (size_t)hash_str(name) & (set->cap - 1);
  while (set->slots[j]) {
    if (strcmp(set->slots[j], name) == 0) return 0;
    j = (j + 1) & (set->cap - 1);
  }
  set->slots[j] = name;
  set->count++;
  return 1;
}

/* Outer references of the graph being built, in first-use order. */
typedef struct outer_refs {
  onnx_name_set seen;
  const char **names;
  size_t count, cap;
} outer_refs;

static nimble_status_t outer_refs_add(outer_refs *r, const char *name) {
  int added = nimble_onnx_name_set_add(&r->seen, name);
  if (added < 0) return NIMBLE_OOM_IN("outer references");
  if (!added) return nimble_ok();
  if (r->count == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 8;
    const char **names = realloc(r->names, cap * sizeof(*names));
    if (!names) return NIMBLE_OOM_IN("outer references");
    r->names = names;
    r->cap = cap;
  }
  r->names[r->count++] = name;
  return nimble_ok();
}

static void outer_refs_free(outer_refs *r) {
  free(r->seen.slots);
  free(r->names);
}

/* ---- lookups ---- */
static const nimble_onnx_value_t *find_in_scopes(const onnx_graph_impl *g, const char *name) {
  for (; g; g = (const onnx_graph_impl *)g->pub.parent) {
    const nimble_onnx_value_t *v = nimble_onnx_table_find(&g->values, name);
    if (v) return v;
  }
  return NULL;
}

static const char *value_origin(const nimble_onnx_value_t *v, char *buf, size_t size) {
  switch (v->kind) {
    case NIMBLE_ONNX_VALUE_GRAPH_INPUT:
      return "a graph input";
    case NIMBLE_ONNX_VALUE_INITIALIZER:
      return "an initializer";
    case NIMBLE_ONNX_VALUE_SPARSE_INITIALIZER:
      return "a sparse initializer";
    case NIMBLE_ONNX_VALUE_NODE_OUTPUT:
      return nimble_onnx_node_describe(v->producer, buf, size);
  }
  return "?";
}

static nimble_status_t define(onnx_loader *ld, onnx_graph_impl *g, const char *name,
                              nimble_onnx_value_kind_t kind, nimble_onnx_value_t **out) {
  nimble_onnx_value_t *v = nimble_arena_alloc(ld->model->arena, sizeof(*v));
  if (!v) return NIMBLE_OOM_IN("a value");
  v->name = name;
  v->kind = kind;
  v->graph = &g->pub;
  nimble_onnx_table_insert(&g->values, v);
  *out = v;
  return nimble_ok();
}

/* ---- operators and attributes ---- */
static int compare_op(const void *key, const void *elem) {
  const nimble_onnx_op_spec_t *k = key, *e = elem;
  int c = strcmp(k->domain, e->domain);
  return c ? c : strcmp(k->op_type, e->op_type);
}

static const nimble_onnx_op_spec_t *find_op(const char *domain, const char *op_type) {
  nimble_onnx_op_spec_t key = {domain, op_type, 0, NULL, 0};
  return bsearch(&key, nimble_onnx_op_table, nimble_onnx_op_table_size,
                 sizeof(nimble_onnx_op_spec_t), compare_op);
}

static const nimble_onnx_attr_spec_t *find_attr_spec(const nimble_onnx_op_spec_t *op,
                                                     const char *name) {
  for (unsigned i = 0; i < op->n_attrs; i++)
    if (strcmp(op->attrs[i].name, name) == 0) return &op->attrs[i];
  return NULL;
}

static int has_local_function(const onnx_loader *ld, const char *domain, const char *op_type) {
  const Onnx__ModelProto *m = ld->model->proto;
  for (size_t i = 0; i < m->n_functions; i++) {
    const Onnx__FunctionProto *f = m->functions[i];
    if (!f) continue;
    const char *fd = onnx_str(f->domain);
    if (strcmp(fd, "ai.onnx") == 0) fd = "";
    if (strcmp(fd, domain) == 0 && strcmp(onnx_str(f->name), op_type) == 0) return 1;
  }
  return 0;
}

/* "INTS" or "INT or STRING" for a type mask. */
static void mask_names(unsigned mask, char *buf, size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (int t = 0; t < 32 && len + 1 < size; t++) {
    if (!(mask & (1u << t))) continue;
    int n =
        snprintf(buf + len, size - len, "%s%s", len ? " or " : "", nimble_onnx_attr_type_name(t));
    if (n < 0) break;
    len += (size_t)n;
    if (len >= size) len = size - 1;
  }
}

/* The type an attribute without a `type` field has, from the one field it
 * sets (IR version 1 files); UNDEFINED when none or several are set. */
static int infer_attr_type(const Onnx__AttributeProto *ap) {
  int found = 0, n = 0;
#define SEEN(cond, t) \
  if (cond) {         \
    found = t;        \
    n++;              \
  }
  SEEN(ap->has_f, NIMBLE_ONNX_ATTR_FLOAT)
  SEEN(ap->has_i, NIMBLE_ONNX_ATTR_INT)
  SEEN(ap->has_s, NIMBLE_ONNX_ATTR_STRING)
  SEEN(ap->t, NIMBLE_ONNX_ATTR_TENSOR)
  SEEN(ap->g, NIMBLE_ONNX_ATTR_GRAPH)
  SEEN(ap->sparse_tensor, NIMBLE_ONNX_ATTR_SPARSE_TENSOR)
  SEEN(ap->tp, NIMBLE_ONNX_ATTR_TYPE_PROTO)
  SEEN(ap->n_floats, NIMBLE_ONNX_ATTR_FLOATS)
  SEEN(ap->n_ints, NIMBLE_ONNX_ATTR_INTS)
  SEEN(ap->n_strings, NIMBLE_ONNX_ATTR_STRINGS)
  SEEN(ap->n_tensors, NIMBLE_ONNX_ATTR_TENSORS)
  SEEN(ap->n_graphs, NIMBLE_ONNX_ATTR_GRAPHS)
  SEEN(ap->n_sparse_tensors, NIMBLE_ONNX_ATTR_SPARSE_TENSORS)
  SEEN(ap->n_type_protos, NIMBLE_ONNX_ATTR_TYPE_PROTOS)
#undef SEEN
  return n == 1 ? found : NIMBLE_ONNX_ATTR_UNDEFINED;
}

/* Builds the subgraph `gp` of node `node` and folds its outer references
 * into `deps` (producers in g) or g's own outer references. */
static nimble_status_t build_subgraph(onnx_loader *ld, onnx_graph_impl *g, nimble_onnx_node *node,
                                      const char *attr_name, const Onnx__GraphProto *gp,
                                      outer_refs *refs, const nimble_onnx_graph **out) {
  onnx_graph_impl *sub;
  NIMBLE_RETURN_IF_ERROR(
      nimble_onnx_build_graph(ld, gp, g, node, attr_name, g->pub.depth + 1, &sub));
  for (size_t i = 0; i < sub->pub.n_outer_refs; i++) {
    const char *name = sub->pub.outer_refs[i];
    if (!nimble_onnx_table_find(&g->values, name))
      NIMBLE_RETURN_IF_ERROR(outer_refs_add(refs, name));
  }
  *out = &sub->pub;
  return nimble_ok();
}

static nimble_status_t convert_attr(onnx_loader *ld, onnx_graph_impl *g, nimble_onnx_node *node,
                                    const Onnx__AttributeProto *ap, outer_refs *refs,
                                    nimble_onnx_attr_t *a) {
  nimble_arena *arena = ld->model->arena;
  a->name = onnx_str(ap->name);
  if (!a->name[0]) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "an attribute has no name");
  if (ap->ref_attr_name)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "attribute '%s' refers to function attribute '%s' outside a "
                              "function",
                              a->name, ap->ref_attr_name);
  int type = ap->has_type ? (int)ap->type : NIMBLE_ONNX_ATTR_UNDEFINED;
  if (type == NIMBLE_ONNX_ATTR_UNDEFINED) type = infer_attr_type(ap);
  if (type > NIMBLE_ONNX_ATTR_TYPE_PROTOS || type < 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "attribute '%s' has unknown type %d",
                              a->name, type);
  if (type == NIMBLE_ONNX_ATTR_UNDEFINED)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "attribute '%s' has no type, and it does not set exactly one value "
                              "field to tell it",
                              a->name);
  a->type = (nimble_onnx_attr_type_t)type;
  a->f = ap->f;
  a->i = ap->i;
  /* A NUL-terminated copy, so a STRING attribute can be handed out as a C
   * string. */
  uint8_t *s_copy = nimble_arena_alloc(arena, ap->s.len + 1);
  if (!s_copy) return NIMBLE_OOM_IN("an attribute string");
  if (ap->s.len) memcpy(s_copy, ap->s.data, ap->s.len);
  a->s.data = s_copy;
  a->s.size = ap->s.len;
  a->n_floats = ap->n_floats;
  a->floats = ap->floats;
  a->n_ints = ap->n_ints;
  a->ints = ap->ints;
  if (ap->n_strings) {
    nimble_onnx_bytes_t *strings = nimble_arena_calloc(arena, ap->n_strings, sizeof(*strings));
    if (!strings) return NIMBLE_OOM_IN("attribute strings");
    for (size_t i = 0; i < ap->n_strings; i++) {
      strings[i].data = ap->strings[i].data;
      strings[i].size = ap->strings[i].len;
    }
    a->strings = strings;
    a->n_strings = ap->n_strings;
  }
  switch (type) {
    case NIMBLE_ONNX_ATTR_TENSOR: {
      if (!ap->t)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "attribute '%s' is TENSOR but has no t",
                                  a->name);
      nimble_onnx_tensor_t *t;
      NIMBLE_RETURN_IF_ERROR_CTX(nimble_onnx_convert_tensor(ld, ap->t, &t), "attribute '%s'",
                                 a->name);
      a->t = t;
      break;
    }
    case NIMBLE_ONNX_ATTR_TENSORS: {
      nimble_onnx_tensor_t **ts = nimble_arena_calloc(arena, ap->n_tensors, sizeof(*ts));
      if (!ts) return NIMBLE_OOM_IN("attribute tensors");
      for (size_t i = 0; i < ap->n_tensors; i++)
        NIMBLE_RETURN_IF_ERROR_CTX(nimble_onnx_convert_tensor(ld, ap->tensors[i], &ts[i]),
                                   "attribute '%s' tensor %zu", a->name, i);
      a->tensors = (const nimble_onnx_tensor_t *const *)ts;
      a->n_tensors = ap->n_tensors;
      break;
    }
    case NIMBLE_ONNX_ATTR_SPARSE_TENSOR: {
      if (!ap->sparse_tensor)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "attribute '%s' is SPARSE_TENSOR but has no sparse_tensor",
                                  a->name);
      nimble_onnx_sparse_tensor_t *s;
      NIMBLE_RETURN_IF_ERROR_CTX(nimble_onnx_convert_sparse(ld, ap->sparse_tensor, &s),
                                 "attribute '%s'", a->name);
      a->sparse_tensor = s;
      break;
    }
    case NIMBLE_ONNX_ATTR_SPARSE_TENSORS: {
      nimble_onnx_sparse_tensor_t **ss =
          nimble_arena_calloc(arena, ap->n_sparse_tensors, sizeof(*ss));
      if (!ss) return NIMBLE_OOM_IN("attribute sparse tensors");
      for (size_t i = 0; i < ap->n_sparse_tensors; i++)
        NIMBLE_RETURN_IF_ERROR_CTX(nimble_onnx_convert_sparse(ld, ap->sparse_tensors[i], &ss[i]),
                                   "attribute '%s' sparse tensor %zu", a->name, i);
      a->sparse_tensors = (const nimble_onnx_sparse_tensor_t *const *)ss;
      a->n_sparse_tensors = ap->n_sparse_tensors;
      break;
    }
    case NIMBLE_ONNX_ATTR_GRAPH:
      if (!ap->g)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "attribute '%s' is GRAPH but has no g",
                                  a->name);
      NIMBLE_RETURN_IF_ERROR_CTX(build_subgraph(ld, g, node, a->name, ap->g, refs, &a->g),
                                 "attribute '%s'", a->name);
      break;
    case NIMBLE_ONNX_ATTR_GRAPHS: {
      const nimble_onnx_graph **gs = nimble_arena_calloc(arena, ap->n_graphs, sizeof(*gs));
      if (!gs) return NIMBLE_OOM_IN("attribute graphs");
      for (size_t i = 0; i < ap->n_graphs; i++)
        NIMBLE_RETURN_IF_ERROR_CTX(
            build_subgraph(ld, g, node, a->name, ap->graphs[i], refs, &gs[i]),
            "attribute '%s' graph %zu", a->name, i);
      a->graphs = (const nimble_onnx_graph *const *)gs;
      a->n_graphs = ap->n_graphs;
      break;
    }
    case NIMBLE_ONNX_ATTR_TYPE_PROTO: {
      nimble_onnx_type_t *t;
      NIMBLE_RETURN_IF_ERROR_CTX(nimble_onnx_convert_type(ld, ap->tp, &t), "attribute '%s'",
                                 a->name);
      if (!t)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "attribute '%s' is TYPE_PROTO but has no tp", a->name);
      a->tp = t;
      break;
    }
    case NIMBLE_ONNX_ATTR_TYPE_PROTOS: {
      nimble_onnx_type_t **ts = nimble_arena_calloc(arena, ap->n_type_protos, sizeof(*ts));
      if (!ts) return NIMBLE_OOM_IN("attribute types");
      for (size_t i = 0; i < ap->n_type_protos; i++) {
        NIMBLE_RETURN_IF_ERROR_CTX(nimble_onnx_convert_type(ld, ap->type_protos[i], &ts[i]),
                                   "attribute '%s' type %zu", a->name, i);
        if (!ts[i])
          return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "attribute '%s': type %zu is empty",
                                    a->name, i);
      }
      a->type_protos = (const nimble_onnx_type_t *const *)ts;
      a->n_type_protos = ap->n_type_protos;
      break;
    }
    default:
      break;
  }
  return nimble_ok();
}

/* A Constant node's value as a tensor, from whichever attribute holds it. */
static nimble_status_t constant_value(onnx_loader *ld, nimble_onnx_node *node) {
  static const char *const names[] = {"value",         "value_float", "value_floats",
                                      "value_int",     "value_ints",  "value_string",
                                      "value_strings", "sparse_value"};
  const nimble_onnx_attr_t *found = NULL;
  for (size_t i = 0; i < node->n_attrs; i++) {
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
      if (strcmp(node->attrs[i].name, names[k]) != 0) continue;
      if (found)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "Constant has both '%s' and '%s'; it needs exactly one",
                                  found->name, node->attrs[i].name);
      found = &node->attrs[i];
    }
  }
  if (!found)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "Constant has none of value, value_float(s), value_int(s), "
                              "value_string(s), sparse_value");
  if (node->n_outputs != 1 || node->n_inputs != 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "Constant takes no inputs and gives one output, got %zu and %zu",
                              node->n_inputs, node->n_outputs);
  if (found->type == NIMBLE_ONNX_ATTR_TENSOR) {
    node->constant = found->t;
    return nimble_ok();
  }
  if (found->type == NIMBLE_ONNX_ATTR_SPARSE_TENSOR) return nimble_ok();
  nimble_arena *arena = ld->model->arena;
  nimble_onnx_tensor_t *t = nimble_arena_alloc(arena, sizeof(*t));
  int64_t *dims = nimble_arena_alloc(arena, sizeof(int64_t));
  if (!t || !dims) return NIMBLE_OOM_IN("a constant");
  t->name = node->outputs[0];
  t->dims = dims;
  /* Scalars are rank 0; lists are rank 1. The attribute types were checked
   * against the op table before we get here. */
  switch (found->type) {
    case NIMBLE_ONNX_ATTR_FLOAT:
      t->dtype = NIMBLE_ONNX_FLOAT;
      t->count = 1;
      t->size = 4;
      t->data = &found->f;
      break;
    case NIMBLE_ONNX_ATTR_INT:
      t->dtype = NIMBLE_ONNX_INT64;
      t->count = 1;
      t->size = 8;
      t->data = &found->i;
      break;
    case NIMBLE_ONNX_ATTR_STRING:
      t->dtype = NIMBLE_ONNX_STRING;
      t->count = 1;
      t->strings = &found->s;
      break;
    case NIMBLE_ONNX_ATTR_FLOATS:
      t->dtype = NIMBLE_ONNX_FLOAT;
      t->rank = 1;
      dims[0] = (int64_t)found->n_floats;
      t->count = found->n_floats;
      t->size = found->n_floats * 4;
      t->data = found->n_floats ? found->floats : NULL;
      break;
    case NIMBLE_ONNX_ATTR_INTS:
      t->dtype = NIMBLE_ONNX_INT64;
      t->rank = 1;
      dims[0] = (int64_t)found->n_ints;
      t->count = found->n_ints;
      t->size = found->n_ints * 8;
      t->data = found->n_ints ? found->ints : NULL;
      break;
    case NIMBLE_ONNX_ATTR_STRINGS:
      t->dtype = NIMBLE_ONNX_STRING;
      t->rank = 1;
      dims[0] = (int64_t)found->n_strings;
      t->count = found->n_strings;
      t->strings = found->strings;
      break;
    default:
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "attribute '%s' must be %s, got %s",
                                found->name, "a tensor, number or string",
                                nimble_onnx_attr_type_name(found->type));
  }
  node->constant = t;
  return nimble_ok();
}

/* Pass 2 for one node: attributes, op table checks, input resolution. */
static nimble_status_t finish_node(onnx_loader *ld, onnx_graph_impl *g, nimble_onnx_node *node,
                                   const Onnx__NodeProto *np, outer_refs *refs, size_t **out_deps,
                                   size_t *out_n_deps) {
  nimble_arena *arena = ld->model->arena;
  /* The op table knows the default and ML domains up to its opset. */
  const nimble_onnx_op_spec_t *spec = NULL;
  int checked = (node->domain[0] == '\0' || strcmp(node->domain, "ai.onnx.ml") == 0 ||
                 strcmp(node->domain, "ai.onnx.preview.training") == 0) &&
                node->opset <= nimble_onnx_op_table_max_opset;
  if (checked) {
    spec = find_op(node->domain, node->op_type);
    if (!spec && !has_local_function(ld, node->domain, node->op_type))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "operator '%s' is not defined in domain '%s' (opset %" PRId64 ")",
                                node->op_type, node->domain[0] ? node->domain : "ai.onnx",
                                node->opset);
    if (spec && spec->since_version > node->opset)
      return nimble_status_make(
          NIMBLE_INVALID_ARGUMENT,
          "operator '%s' needs opset %d of domain '%s', the model imports %" PRId64, node->op_type,
          spec->since_version, node->domain[0] ? node->domain : "ai.onnx", node->opset);
  }

  nimble_onnx_attr_t *attrs = nimble_arena_calloc(arena, np->n_attribute, sizeof(*attrs));
  if (!attrs) return NIMBLE_OOM_IN("attributes");
  node->attrs = attrs;
  /* Duplicate names: a set, since a hostile file can hold thousands of
   * attributes on one node and pairwise comparison would be quadratic. */
  onnx_name_set seen = {0};
  nimble_status_t s = nimble_ok();
  for (size_t i = 0; i < np->n_attribute && !s; i++) {
    s = convert_attr(ld, g, node, np->attribute[i], refs, &attrs[i]);
    if (s) break;
    node->n_attrs = i + 1;
    int added = nimble_onnx_name_set_add(&seen, attrs[i].name);
    if (added <= 0) {
      s = added < 0 ? NIMBLE_OOM_IN("attribute names")
                    : nimble_status_make(NIMBLE_INVALID_ARGUMENT, "attribute '%s' is given twice",
                                         attrs[i].name);
      break;
    }
    if (spec) {
      const nimble_onnx_attr_spec_t *as = find_attr_spec(spec, attrs[i].name);
      if (!as) {
        s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "attribute '%s' is not an attribute of %s",
                               attrs[i].name, node->op_type);
      } else if (!(as->type_mask & (1u << attrs[i].type))) {
        char want[96];
        mask_names(as->type_mask, want, sizeof(want));
        s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "attribute '%s' must be %s, got %s",
                               attrs[i].name, want, nimble_onnx_attr_type_name(attrs[i].type));
      }
    }
  }
  free(seen.slots);
  if (s) return s;
  node->n_attrs = np->n_attribute;
  if (node->domain[0] == '\0' && strcmp(node->op_type, "Constant") == 0)
    NIMBLE_RETURN_IF_ERROR(constant_value(ld, node));

  /* Dependencies: producers of the inputs, and of the names the node's
   * subgraphs use from this graph (their implicit inputs). */
  size_t n_sub_refs = 0;
  for (size_t i = 0; i < node->n_attrs; i++) {
    if (attrs[i].g) n_sub_refs += attrs[i].g->n_outer_refs;
    for (size_t k = 0; k < attrs[i].n_graphs; k++) n_sub_refs += attrs[i].graphs[k]->n_outer_refs;
  }
  size_t cap;
  if (__builtin_add_overflow(node->n_inputs, n_sub_refs, &cap)) return NIMBLE_OOM_IN("dependencies");
  size_t *deps = nimble_arena_calloc(arena, cap, sizeof(*deps));
  if (!deps) return NIMBLE_OOM_IN("dependencies");
  size_t n_deps = 0;
  for (size_t i = 0; i < node->n_inputs; i++) {
    const char *name = node->inputs[i];
    if (!name[0]) continue; /* an omitted optional input */
    const nimble_onnx_value_t *v = nimble_onnx_table_find(&g->values, name);
    if (v) {
      if (v->kind == NIMBLE_ONNX_VALUE_NODE_OUTPUT) deps[n_deps++] = v->producer->index;
      continue;
    }
    if (g->pub.parent && find_in_scopes((const onnx_graph_impl *)g->pub.parent, name)) {
      NIMBLE_RETURN_IF_ERROR(outer_refs_add(refs, name));
      continue;
    }
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "input %zu '%s' is not defined (no graph input, initializer or "
                              "node output has that name%s)",
                              i, name, g->pub.parent ? ", in this graph or an outer scope" : "");
  }
  for (size_t i = 0; i < node->n_attrs; i++) {
    size_t n_graphs = attrs[i].g ? 1 : attrs[i].n_graphs;
    for (size_t k = 0; k < n_graphs; k++) {
      const nimble_onnx_graph *sub = attrs[i].g ? attrs[i].g : attrs[i].graphs[k];
      for (size_t r = 0; r < sub->n_outer_refs; r++) {
        const nimble_onnx_value_t *v = nimble_onnx_table_find(&g->values, sub->outer_refs[r]);
        if (v && v->kind == NIMBLE_ONNX_VALUE_NODE_OUTPUT) deps[n_deps++] = v->producer->index;
      }
    }
  }
  *out_deps = deps;
  *out_n_deps = n_deps;
  return nimble_ok();
}

/* Depth-first topological sort. Visiting roots in file order and emitting
 * in post-order keeps an already sorted graph in its order. */
static nimble_status_t sort_nodes(onnx_loader *ld, onnx_graph_impl *g, nimble_onnx_node **nodes,
                                  size_t n, size_t **deps, const size_t *n_deps) {
  nimble_status_t status = nimble_ok();
  unsigned char *state = calloc(n ? n : 1, 1); /* 0 new, 1 on the stack, 2 done */
  size_t *stack = malloc((n ? n : 1) * sizeof(size_t));
  size_t *next = calloc(n ? n : 1, sizeof(size_t));
  const nimble_onnx_node **order = nimble_arena_calloc(ld->model->arena, n, sizeof(*order));
  if (!state || !stack || !next || !order) {
    status = NIMBLE_OOM_IN("sorting nodes");
    goto done;
  }
  size_t emitted = 0;
  for (size_t root = 0; root < n; root++) {
    if (state[root]) continue;
    size_t top = 0;
    stack[top++] = root;
    state[root] = 1;
    while (top) {
      size_t cur = stack[top - 1];
      if (next[cur] < n_deps[cur]) {
        size_t d = deps[cur][next[cur]++];
        if (state[d] == 2) continue;
        if (state[d] == 0) {
          state[d] = 1;
          stack[top++] = d;
          continue;
        }
        /* d is on the stack: stack[j..top-1] each need the next, and the
         * top needs d again. */
        size_t j = top - 1;
        while (stack[j] != d) j--;
        char msg[1024], buf[320];
        size_t len = 0, shown = 0;
        msg[0] = '\0';
        for (size_t k = j; k < top && len + 1 < sizeof(msg); k++) {
          if (++shown > 6) {
            len += (size_t)snprintf(msg + len, sizeof(msg) - len, " -> ...");
            break;
          }
          int w = snprintf(msg + len, sizeof(msg) - len, "%s%s", k > j ? " -> " : "",
                           nimble_onnx_node_describe(nodes[stack[k]], buf, sizeof(buf)));
          if (w < 0) break;
          len += (size_t)w;
          if (len >= sizeof(msg)) len = sizeof(msg) - 1;
        }
        status = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                    "%s is on a cycle: %s -> %s (each needs an output of the next)",
                                    nimble_onnx_node_describe(nodes[d], buf, sizeof(buf)), msg,
                                    nimble_onnx_node_describe(nodes[d], buf, sizeof(buf)));
        goto done;
      }
      state[cur] = 2;
      order[emitted++] = nodes[cur];
      top--;
    }
  }
  g->pub.nodes = order;
  g->pub.n_nodes = n;
done:
  free(state);
  free(stack);
  free(next);
  return status;
}

static nimble_status_t build_graph(onnx_loader *ld, const Onnx__GraphProto *gp, onnx_graph_impl *g,
                                   outer_refs *refs) {
  nimble_arena *arena = ld->model->arena;
  int is_main = g->pub.parent == NULL;

  /* Size the name table for everything this graph can define. */
  size_t expected = gp->n_input, total_outputs = 0;
  for (size_t i = 0; i < gp->n_node; i++) {
    if (!gp->node[i]) continue;
    if (__builtin_add_overflow(total_outputs, gp->node[i]->n_output, &total_outputs))
      return NIMBLE_OOM_IN("node outputs");
  }
  if (__builtin_add_overflow(expected, gp->n_initializer, &expected) ||
      __builtin_add_overflow(expected, gp->n_sparse_initializer, &expected) ||
      __builtin_add_overflow(expected, total_outputs, &expected))
    return NIMBLE_OOM_IN("values");
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_table_init(arena, &g->values, expected));

  /* Initializers, then inputs (an input may share an initializer's name:
   * the initializer is then its default). */
  nimble_onnx_tensor_t **inits = nimble_arena_calloc(arena, gp->n_initializer, sizeof(*inits));
  if (!inits) return NIMBLE_OOM_IN("initializers");
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *tp = gp->initializer[i];
    const char *name = tp ? onnx_str(tp->name) : "";
    if (!name[0])
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "initializer %zu has no name", i);
    NIMBLE_RETURN_IF_ERROR_CTX(nimble_onnx_convert_tensor(ld, tp, &inits[i]), "initializer %zu", i);
    if (nimble_onnx_table_find(&g->values, name))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "initializer '%s' is defined twice", name);
    nimble_onnx_value_t *v = NULL;
    NIMBLE_RETURN_IF_ERROR(define(ld, g, name, NIMBLE_ONNX_VALUE_INITIALIZER, &v));
    v->initializer = inits[i];
    nimble_onnx_type_t *type;
    NIMBLE_RETURN_IF_ERROR(nimble_onnx_tensor_type(ld, inits[i], &type));
    v->type = type;
  }
  g->pub.initializers = (const nimble_onnx_tensor_t *const *)inits;
  g->pub.n_initializers = gp->n_initializer;

  for (size_t i = 0; i < gp->n_sparse_initializer; i++) {
    nimble_onnx_sparse_tensor_t *s;
    if (!gp->sparse_initializer[i])
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "sparse initializer %zu is empty", i);
    NIMBLE_RETURN_IF_ERROR_CTX(nimble_onnx_convert_sparse(ld, gp->sparse_initializer[i], &s),
                               "sparse initializer %zu", i);
    const char *name = s->values->name;
    if (!name[0])
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "sparse initializer %zu has no name", i);
    if (nimble_onnx_table_find(&g->values, name))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "initializer '%s' is defined twice", name);
    nimble_onnx_value_t *v = NULL;
    NIMBLE_RETURN_IF_ERROR(define(ld, g, name, NIMBLE_ONNX_VALUE_SPARSE_INITIALIZER, &v));
    v->sparse_initializer = s;
  }

  nimble_onnx_value_t **inputs = nimble_arena_calloc(arena, gp->n_input, sizeof(*inputs));
  if (!inputs) return NIMBLE_OOM_IN("graph inputs");
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    const char *name = vi ? onnx_str(vi->name) : "";
    if (!name[0])
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "graph input %zu has no name", i);
    nimble_onnx_type_t *type;
    NIMBLE_RETURN_IF_ERROR_CTX(nimble_onnx_convert_type(ld, vi->type, &type), "graph input '%s'",
                               name);
    if (!type && is_main)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "graph input '%s' has no type", name);
    nimble_onnx_value_t *v = nimble_onnx_table_find(&g->values, name);
    if (v && v->kind == NIMBLE_ONNX_VALUE_INITIALIZER) {
      v->kind = NIMBLE_ONNX_VALUE_GRAPH_INPUT;
      if (type) v->type = type;
    } else if (v) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "graph input '%s' is listed twice", name);
    } else {
      NIMBLE_RETURN_IF_ERROR(define(ld, g, name, NIMBLE_ONNX_VALUE_GRAPH_INPUT, &v));
      v->type = type;
    }
    inputs[i] = v;
  }
  g->pub.inputs = (const nimble_onnx_value_t *const *)inputs;
  g->pub.n_inputs = gp->n_input;

  /* Pass 1: nodes and their outputs. */
  size_t n = gp->n_node;
  nimble_onnx_node **nodes = nimble_arena_calloc(arena, n, sizeof(*nodes));
  if (!nodes) return NIMBLE_OOM_IN("nodes");
  for (size_t i = 0; i < n; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    nimble_onnx_node *node = nimble_arena_alloc(arena, sizeof(*node));
    if (!node) return NIMBLE_OOM_IN("a node");
    nodes[i] = node;
    node->index = i;
    node->graph = &g->pub;
    node->name = np ? onnx_str(np->name) : "";
    node->op_type = np ? onnx_str(np->op_type) : "";
    if (!node->op_type[0])
      return nimble_onnx_node_annotate(node, nimble_status_make(NIMBLE_INVALID_ARGUMENT, "has no op_type"));
    const char *domain = onnx_str(np->domain);
    node->domain = strcmp(domain, "ai.onnx") == 0 ? "" : domain;
    node->opset = nimble_onnx_model_opset(ld->model, node->domain);
    if (node->opset == 0 && !has_local_function(ld, node->domain, node->op_type))
      return nimble_onnx_node_annotate(node, nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                              "the model imports no opset for domain '%s'",
                                              node->domain[0] ? node->domain : "ai.onnx"));
    const char **ins = nimble_arena_calloc(arena, np->n_input, sizeof(*ins));
    const char **outs = nimble_arena_calloc(arena, np->n_output, sizeof(*outs));
    if (!ins || !outs) return NIMBLE_OOM_IN("node inputs");
    for (size_t k = 0; k < np->n_input; k++) ins[k] = onnx_str(np->input[k]);
    for (size_t k = 0; k < np->n_output; k++) outs[k] = onnx_str(np->output[k]);
    node->inputs = ins;
    node->n_inputs = np->n_input;
    node->outputs = outs;
    node->n_outputs = np->n_output;
    for (size_t k = 0; k < np->n_output; k++) {
      if (!outs[k][0]) continue; /* an omitted optional output */
      const nimble_onnx_value_t *prev = nimble_onnx_table_find(&g->values, outs[k]);
      if (prev) {
        char buf[320];
        return nimble_onnx_node_annotate(node, nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                                "output '%s' is already defined by %s", outs[k],
                                                value_origin(prev, buf, sizeof(buf))));
      }
      nimble_onnx_value_t *v = NULL;
      NIMBLE_RETURN_IF_ERROR(define(ld, g, outs[k], NIMBLE_ONNX_VALUE_NODE_OUTPUT, &v));
      v->producer = node;
      v->output_index = k;
    }
  }

  /* Pass 2: attributes and subgraphs, then inputs. */
  size_t **deps = nimble_arena_calloc(arena, n, sizeof(*deps));
  size_t *n_deps = nimble_arena_calloc(arena, n, sizeof(*n_deps));
  if (!deps || !n_deps) return NIMBLE_OOM_IN("dependencies");
  for (size_t i = 0; i < n; i++)
    NIMBLE_RETURN_IF_ERROR(
        nimble_onnx_node_annotate(nodes[i], finish_node(ld, g, nodes[i], gp->node[i], refs, &deps[i], &n_deps[i])));

  /* Types the file states for intermediate values. */
  for (size_t i = 0; i < gp->n_value_info; i++) {
    const Onnx__ValueInfoProto *vi = gp->value_info[i];
    if (!vi) continue;
    nimble_onnx_value_t *v = nimble_onnx_table_find(&g->values, onnx_str(vi->name));
    if (!v || v->type) continue;
    nimble_onnx_type_t *type;
    NIMBLE_RETURN_IF_ERROR_CTX(nimble_onnx_convert_type(ld, vi->type, &type), "value_info '%s'",
                               onnx_str(vi->name));
    v->type = type;
  }

  const nimble_onnx_value_t **outputs =
      nimble_arena_calloc(arena, gp->n_output, sizeof(*outputs));
  if (!outputs) return NIMBLE_OOM_IN("graph outputs");
  for (size_t i = 0; i < gp->n_output; i++) {
    const Onnx__ValueInfoProto *vi = gp->output[i];
    const char *name = vi ? onnx_str(vi->name) : "";
    if (!name[0])
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "graph output %zu has no name", i);
    nimble_onnx_type_t *type;
    NIMBLE_RETURN_IF_ERROR_CTX(nimble_onnx_convert_type(ld, vi->type, &type), "graph output '%s'",
                               name);
    if (!type && is_main)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "graph output '%s' has no type", name);
    nimble_onnx_value_t *v = nimble_onnx_table_find(&g->values, name);
    if (v) {
      if (type) v->type = type; /* the output's declared type is the one callers see */
    } else {
      const nimble_onnx_value_t *outer =
          g->pub.parent ? find_in_scopes((const onnx_graph_impl *)g->pub.parent, name) : NULL;
      if (!outer)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "graph output '%s' is not defined (no graph input, initializer "
                                  "or node output has that name)",
                                  name);
      NIMBLE_RETURN_IF_ERROR(outer_refs_add(refs, name));
      v = (nimble_onnx_value_t *)outer;
    }
    outputs[i] = v;
  }
  g->pub.outputs = outputs;
  g->pub.n_outputs = gp->n_output;

  /* Pass 3: the order. */
  NIMBLE_RETURN_IF_ERROR(sort_nodes(ld, g, nodes, n, deps, n_deps));

  const char **names = nimble_arena_calloc(arena, refs->count, sizeof(*names));
  if (!names) return NIMBLE_OOM_IN("outer references");
  if (refs->count) memcpy(names, refs->names, refs->count * sizeof(*names));
  g->pub.outer_refs = names;
  g->pub.n_outer_refs = refs->count;
  return nimble_ok();
}

nimble_status_t nimble_onnx_build_graph(onnx_loader *ld, const Onnx__GraphProto *gp,
                                        onnx_graph_impl *parent, const nimble_onnx_node *owner,
                                        const char *owner_attr, size_t depth,
                                        onnx_graph_impl **out) {
  *out = NULL;
  if (depth > NIMBLE_ONNX_MAX_GRAPH_DEPTH)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "subgraphs nested deeper than %d",
                              NIMBLE_ONNX_MAX_GRAPH_DEPTH);
  onnx_graph_impl *g = nimble_arena_alloc(ld->model->arena, sizeof(*g));
  if (!g) return NIMBLE_OOM_IN("a graph");
  g->pub.name = onnx_str(gp->name);
  g->pub.parent = parent ? &parent->pub : NULL;
  g->pub.owner = owner;
  g->pub.owner_attr = owner_attr;
  g->pub.depth = depth;
  outer_refs refs;
  memset(&refs, 0, sizeof(refs));
  nimble_status_t s = build_graph(ld, gp, g, &refs);
  outer_refs_free(&refs);
  if (s) return s;
  *out = g;
  return nimble_ok();
}
