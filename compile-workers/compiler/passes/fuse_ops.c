/* Operator fusion by pattern, after Relay's FuseOps, on the A-normal form
 * (every operator call bound by its own `let`).
 *
 * Within one `let` chain, a producer joins the group of its consumer when
 * its variable has exactly one use in the whole function (that consumer's
 * argument): a group is then a tree of calls computed where its root is,
 * and no value inside it is needed elsewhere. Whether the two may join
 * depends on the registry's fusion patterns (elemwise < broadcast <
 * injective < reduction < out-fusable < opaque):
 *   - an element-wise or broadcast consumer takes any producer group up to
 *     out-fusable (dense + bias + relu, sum + divide), as long as the merged
 *     group keeps at most one "anchor" (a reduction or an out-fusable op);
 *   - an injective consumer takes producers up to injective (chains of
 *     transposes, reshapes and element-wise ops);
 *   - a reduction takes injective producers (its input side);
 *   - out-fusable and opaque consumers take nothing, and opaque producers
 *     join nothing;
 *   - except a concatenation along the channels of convolutions (each a
 *     conv2d, or a Relu or Clip of one: conv_parts), which takes them all
 *     and then joins nothing: its kernel has each convolution write its
 *     channels of the output in place;
 *   - and except side outputs (side_outputs): an element-wise group used
 *     by a later element-wise group and after it joins that group as a
 *     second result, the primitive returning a tuple.
 * An operator whose shape function is data-dependent or upper-bound, or
 * that returns a tuple, counts as opaque: its output cannot be allocated
 * before its input is computed, so nothing fuses across it.
 *
 * Each group becomes a primitive global, `def @"fused.<ops>"(params) -> R
 * { nested calls }`, called once where the group's root was. Parameters are
 * the group's inputs (variables and non-scalar constants, in order of first
 * use), annotated with their inferred types; scalar constants stay inside.
 * shape_of and the memory operators stay as they are (they are VM
 * instructions, not kernels). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass_internal.h"

#define FUSE_MAX_GROUP 32

typedef struct fuse_ctx {
  nimble_module *m;
  nimble_arena *arena;
  const nimble_typing *types;
  pass_map uses; /* variable -> use count (as uintptr_t) */
  bool allow_groups;
  /* Base name -> next suffix, so that naming N groups alike costs O(N). */
  const char **base_keys;
  unsigned *base_next;
  size_t base_cap, base_count;
} fuse_ctx;

static size_t hash_name(const char *s, size_t cap) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return (size_t)h & (cap - 1);
}

/* The slot of `base` in the suffix table (added with 0 when new); NULL on
 * OOM. */
static unsigned *base_slot(fuse_ctx *c, const char *base) {
  if ((c->base_count + 1) * 2 > c->base_cap) {
    size_t ncap = c->base_cap ? c->base_cap * 2 : 64;
    const char **keys = calloc(ncap, sizeof *keys);
    unsigned *vals = calloc(ncap, sizeof *vals);
    if (!keys || !vals) {
      free(keys);
      free(vals);
      return NULL;
    }
    for (size_t i = 0; i < c->base_cap; i++) {
      if (!c->base_keys[i]) continue;
      size_t h = hash_name(c->base_keys[i], ncap);
      while (keys[h]) h = (h + 1) & (ncap - 1);
      keys[h] = c->base_keys[i];
      vals[h] = c->base_next[i];
    }
    free(c->base_keys);
    free(c->base_next);
    c->base_keys = keys;
    c->base_next = vals;
    c->base_cap = ncap;
  }
  size_t h = hash_name(base, c->base_cap);
  while (c->base_keys[h] && strcmp(c->base_keys[h], base) != 0) h = (h + 1) & (c->base_cap - 1);
  if (!c->base_keys[h]) {
    c->base_keys[h] = nimble_arena_strdup(c->arena, base);
    if (!c->base_keys[h]) return NULL;
    c->base_count++;
  }
  return &c->base_next[h];
}

static nimble_status_t count_uses(void *user, const nimble_expr *e, const nimble_expr **out) {
  pass_map *uses = user;
  *out = e;
  while (e->kind == NIMBLE_EXPR_LET) {
    const nimble_expr *ignored;
    NIMBLE_RETURN_IF_ERROR(count_uses(user, e->u.let.value, &ignored));
    e = e->u.let.body;
  }
  if (e->kind == NIMBLE_EXPR_VAR) {
    uintptr_t n = (uintptr_t)pass_map_get(uses, e);
    return pass_map_put(uses, e, (void *)(n + 1)) ? nimble_ok() : NIMBLE_OOM();
  }
  /* pass_map_children rebuilds nothing here: the callback returns each
   * child unchanged. */
  const nimble_expr *same;
  return pass_map_children(NULL, e, count_uses, user, &same);
}

static int pattern_of(const nimble_op *op) {
  if (op->shape_kind != NIMBLE_SHAPE_DATA_INDEPENDENT || op->tuple_output) return NIMBLE_FUSE_OPAQUE;
  return (int)op->pattern;
}

/* Operators that stay calls: VM instructions rather than kernels. */
static bool stays_op(const nimble_op *op) { return pass_is_memory_op(op) || !strcmp(op->name, "shape_of"); }

#define FUSE_MAX_SIDE 3

typedef struct node {
  const nimble_op *op;  /* NULL: not a kernel call */
  size_t parent;        /* index + 1 of the group it joined (0: a root) */
  int gmax;             /* largest pattern in its group (roots) */
  size_t size;          /* calls in its group (roots) */
  size_t num_side;      /* roots: side outputs (side_outputs), their chain */
  size_t side_at[FUSE_MAX_SIDE]; /* indices in ascending order */
} node;

static bool is_anchor(int p) { return p == NIMBLE_FUSE_REDUCTION || p == NIMBLE_FUSE_OUT_FUSABLE; }

static bool can_join(int consumer, const node *cg, const node *pg) {
  if (consumer == NIMBLE_FUSE_OPAQUE || pg->gmax == NIMBLE_FUSE_OPAQUE) return false;
  if (cg->size + pg->size > FUSE_MAX_GROUP) return false;
  switch (consumer) {
    case NIMBLE_FUSE_ELEMWISE:
    case NIMBLE_FUSE_BROADCAST:
      return pg->gmax <= NIMBLE_FUSE_OUT_FUSABLE && !(is_anchor(pg->gmax) && is_anchor(cg->gmax));
    case NIMBLE_FUSE_INJECTIVE:
    case NIMBLE_FUSE_REDUCTION: return pg->gmax <= NIMBLE_FUSE_INJECTIVE;
    default: return false;
  }
}

/* Whether conv2d call `conv` needs an im2col copy (not a 1x1 at unit
 * strides without padding): a kernel has one scratch buffer, so a
 * concatenation of convolutions takes at most one such part. */
static bool needs_im2col(fuse_ctx *c, const nimble_expr *conv) {
  const nimble_op *op = pass_called_op(conv);
  const nimble_type *w = nimble_typing_type_of(c->types, conv->u.call.args[1]);
  if (!w || w->kind != NIMBLE_TYPE_TENSOR || w->u.tensor.rank != 4) return true;
  for (int a = 2; a < 4; a++)
    if (w->u.tensor.dims[a].kind != NIMBLE_DIM_CONST || w->u.tensor.dims[a].value != 1) return true;
  size_t n;
  const int64_t *v = nimble_attrs_ints(op, &conv->u.call.attrs, "strides", &n);
  for (size_t k = 0; k < n; k++)
    if (v[k] != 1) return true;
  v = nimble_attrs_ints(op, &conv->u.call.attrs, "pads", &n);
  for (size_t k = 0; k < n; k++)
    if (v[k] != 0) return true;
  return false;
}

/* A concatenation along the channels (axis 1 of a float32 NCHW tensor)
 * whose every input is a convolution (groups 1), or a Relu or a Clip of
 * one, used only there: the convolutions can write straight into their
 * channels of its output (compute's emit_conv_parts), and the parts are
 * never stored apart and copied (squeezenet's fire modules: each pair of
 * expand convolutions, 0.75 ms of copies a run). Stores in prod[] the
 * chain indices of the parts' roots. */
static bool conv_parts(fuse_ctx *c, const pass_chain *chain, pass_map *index, const node *nodes, size_t i,
                       size_t *prod) {
  const nimble_expr *call = chain->values[i];
  const nimble_op *op = nodes[i].op;
  size_t n = call->u.call.num_args;
  if (strcmp(op->name, "concatenate") || n < 2 || n > 8) return false;
  const nimble_type *t = nimble_typing_type_of(c->types, chain->vars[i]);
  if (!t || t->kind != NIMBLE_TYPE_TENSOR || t->u.tensor.rank != 4 || t->u.tensor.dtype != NIMBLE_DTYPE_FLOAT32)
    return false;
  int64_t axis = nimble_attrs_int(op, &call->u.call.attrs, "axis");
  if (axis != 1 && axis != -3) return false;
  size_t im2col = 0, size = 1;
  for (size_t k = 0; k < n; k++) {
    const nimble_expr *arg = call->u.call.args[k];
    size_t j = (size_t)(uintptr_t)pass_map_get(index, arg);
    if (arg->kind != NIMBLE_EXPR_VAR || !j || !nodes[j - 1].op || nodes[j - 1].parent ||
        (uintptr_t)pass_map_get(&c->uses, arg) != 1)
      return false;
    const nimble_expr *conv = chain->values[j - 1];
    const char *name = nodes[j - 1].op->name;
    if (!strcmp(name, "relu") || !strcmp(name, "clip")) {
      if (nodes[j - 1].size != 2) return false;
      const nimble_expr *in = conv->u.call.args[0];
      size_t q = (size_t)(uintptr_t)pass_map_get(index, in);
      if (!q || nodes[q - 1].parent != j) return false;
      conv = chain->values[q - 1];
    } else if (nodes[j - 1].size != 1) {
      return false;
    }
    const nimble_op *cop = pass_called_op(conv);
    if (!cop || strcmp(cop->name, "conv2d") || nimble_attrs_int(cop, &conv->u.call.attrs, "groups") != 1) return false;
    im2col += needs_im2col(c, conv);
    size += nodes[j - 1].size;
    prod[k] = j - 1;
  }
  return im2col <= 1 && size <= FUSE_MAX_GROUP;
}

/* Sorts v[0..n) ascending (a handful of chain indices). */
static void sort_indices(size_t *v, size_t n) {
  for (size_t a = 1; a < n; a++)
    for (size_t b = a; b > 0 && v[b - 1] > v[b]; b--) {
      size_t t = v[b];
      v[b] = v[b - 1];
      v[b - 1] = t;
    }
}

/* Side outputs: an element-wise group P whose value a later element-wise
 * group R reads and that is needed after R as well (an LSTM step's new
 * cell state c2, read by h2 = o * tanh(c2) and passed on to the next
 * step) joins R's group as a second output instead of being a kernel of
 * its own: one kernel computes both and writes both, and R reads P from
 * what it wrote instead of a separate kernel's output. P moves to R's
 * place in the chain, so no use of P may come between them outside R's
 * group. Neither group may hold an anchor (a reduction or a product).
 * Looks at the arguments of chain entry m, a member of the group rooted
 * at root[m]; root[] (each entry's group root) follows the joins. */
static nimble_status_t side_outputs(fuse_ctx *c, const pass_chain *chain, pass_map *index, node *nodes,
                                    size_t *root, size_t m) {
  size_t r = root[m];
  const nimble_expr *call = chain->values[m];
  for (size_t k = 0; k < call->u.call.num_args; k++) {
    const nimble_expr *arg = call->u.call.args[k];
    size_t j = (size_t)(uintptr_t)pass_map_get(index, arg);
    if (arg->kind != NIMBLE_EXPR_VAR || !j || j - 1 >= r || !nodes[j - 1].op) continue;
    size_t p = j - 1;
    if (nodes[p].parent || nodes[p].num_side || nodes[r].num_side >= FUSE_MAX_SIDE) continue;
    if (nodes[p].gmax > NIMBLE_FUSE_INJECTIVE || nodes[r].gmax > NIMBLE_FUSE_INJECTIVE) continue;
    if (nodes[r].size + nodes[p].size > FUSE_MAX_GROUP) continue;
    if (!can_join(pattern_of(nodes[m].op), &nodes[r], &nodes[p])) continue;
    size_t uses = (size_t)(uintptr_t)pass_map_get(&c->uses, arg), inside = 0, between = 0;
    if (uses < 2) continue;
    for (size_t e = p + 1; e <= r; e++) {
      size_t n = 0;
      NIMBLE_RETURN_IF_ERROR(pass_count_var(chain->values[e], arg, &n));
      if (nodes[e].op && root[e] == r) inside += n;
      else between += n;
    }
    if (between || inside >= uses) continue;
    nodes[p].parent = m + 1;
    nodes[r].side_at[nodes[r].num_side++] = p;
    sort_indices(nodes[r].side_at, nodes[r].num_side); /* chain order: a later one may read an earlier one */
    nodes[r].size += nodes[p].size;
    for (size_t e = 0; e <= p; e++) /* P's group is R's now */
      if (root[e] == p) root[e] = r;
  }
  return nimble_ok();
}

/* Scalars (one element) are inlined into the kernel; every other constant,
 * an empty one included (Concat with an empty shape piece, as exporters
 * write), is passed in as a tensor. */
static bool inline_const(const nimble_expr *e) {
  return e->kind == NIMBLE_EXPR_CONSTANT && e->u.constant.num_elements == 1;
}

typedef struct group_build {
  const pass_chain *chain;
  const node *nodes;
  pass_map *index;  /* variable -> chain index + 1 */
  size_t root;
  const nimble_expr **params, **inputs;
  size_t num_params;
  size_t members[FUSE_MAX_GROUP];
  size_t num_members;
  /* The root's side outputs (chain indices, node.side_at) and the
   * variables their values are bound to inside the primitive (NULL until
   * bound). */
  const size_t *side_at;
  const nimble_expr *side_var[FUSE_MAX_SIDE];
  size_t num_side;
} group_build;

/* The nested expression computing chain entry i inside the primitive. */
static nimble_status_t build_body(fuse_ctx *c, group_build *g, size_t i, const nimble_expr **out) {
  const nimble_expr *call = g->chain->values[i];
  if (g->num_members < FUSE_MAX_GROUP) g->members[g->num_members++] = i;
  size_t n = call->u.call.num_args;
  const nimble_expr **args = nimble_arena_calloc(c->arena, n ? n : 1, sizeof *args);
  if (!args) return NIMBLE_OOM();
  for (size_t k = 0; k < n; k++) {
    const nimble_expr *arg = call->u.call.args[k];
    size_t j = (size_t)(uintptr_t)pass_map_get(g->index, arg);
    /* A side output: its value, bound once. */
    size_t q = 0;
    while (j && q < g->num_side && (g->side_at[q] != j - 1 || !g->side_var[q])) q++;
    if (j && q < g->num_side) {
      args[k] = g->side_var[q];
      continue;
    }
    /* A producer joined exactly the consumer that took it. */
    if (arg->kind == NIMBLE_EXPR_VAR && j && g->nodes[j - 1].parent == i + 1) {
      NIMBLE_RETURN_IF_ERROR(build_body(c, g, j - 1, &args[k]));
      continue;
    }
    if (inline_const(arg)) {
      args[k] = arg;
      continue;
    }
    size_t p = 0;
    while (p < g->num_params && g->inputs[p] != arg) p++;
    if (p == g->num_params) {
      if (p >= 256) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "a fused group with over 256 inputs");
      const nimble_type *t = nimble_typing_type_of(c->types, arg);
      if (!t) return nimble_status_make(NIMBLE_INTERNAL, "an input of '%s' has no type",
                                        g->nodes[i].op->name);
      char pname[16];
      snprintf(pname, sizeof pname, "p%zu", p);
      g->params[p] = nimble_ir_var(c->arena, nimble_arena_strdup(c->arena, pname), t, NULL);
      if (!g->params[p]) return NIMBLE_OOM();
      g->inputs[p] = arg;
      g->num_params++;
    }
    args[k] = g->params[p];
  }
  /* The name lists the operators in program order. */
  *out = pass_call_with_args(c->arena, call, call->u.call.callee, args);
  return *out ? nimble_ok() : NIMBLE_OOM();
}

static nimble_status_t make_primitive(fuse_ctx *c, group_build *g, const nimble_expr **call_out) {
  const nimble_expr *params[256], *inputs[256];
  g->params = params;
  g->inputs = inputs;
  g->num_params = 0;
  g->num_members = 0;
  const nimble_expr *body;
  /* Side outputs first (in chain order, so a later one may read an earlier
   * one), each bound to a variable: let %s0 = P0; ... (R, %s0, ...). */
  const node *rn = &g->nodes[g->root];
  const nimble_expr *side_values[FUSE_MAX_SIDE];
  g->side_at = rn->side_at;
  g->num_side = rn->num_side;
  for (size_t q = 0; q < g->num_side; q++) g->side_var[q] = NULL;
  for (size_t q = 0; q < g->num_side; q++) {
    NIMBLE_RETURN_IF_ERROR(build_body(c, g, g->side_at[q], &side_values[q]));
    const nimble_type *t = nimble_typing_type_of(c->types, g->chain->vars[g->side_at[q]]);
    g->side_var[q] = nimble_ir_var(c->arena, nimble_arena_sprintf(c->arena, "s%zu", q), t, NULL);
    if (!g->side_var[q]) return NIMBLE_OOM();
  }
  NIMBLE_RETURN_IF_ERROR(build_body(c, g, g->root, &body));
  const nimble_type *ret = nimble_typing_type_of(c->types, g->chain->vars[g->root]);
  if (g->num_side) {
    const nimble_expr *fields[FUSE_MAX_SIDE + 1] = {body};
    const nimble_type *ftypes[FUSE_MAX_SIDE + 1] = {ret};
    for (size_t q = 0; q < g->num_side; q++) {
      fields[q + 1] = g->side_var[q];
      ftypes[q + 1] = nimble_typing_type_of(c->types, g->chain->vars[g->side_at[q]]);
    }
    body = nimble_ir_tuple(c->arena, g->num_side + 1, fields, NULL);
    for (size_t q = g->num_side; body && q-- > 0;) body = nimble_ir_let(c->arena, g->side_var[q], side_values[q], body, NULL);
    ret = nimble_type_tuple(c->arena, g->num_side + 1, ftypes);
    if (!body || !ret) return NIMBLE_OOM();
  }
  /* fused.<op>_<op>... in program order, then a number if taken. */
  char base[80] = NIMBLE_PRIMITIVE_PREFIX;
  sort_indices(g->members, g->num_members); /* program order */
  for (size_t k = 0; k < g->num_members; k++) {
    const char *opname = g->nodes[g->members[k]].op->name;
    size_t len = strlen(base);
    if (len + strlen(opname) + 2 >= sizeof base) break;
    snprintf(base + len, sizeof base - len, "%s%s", base[len - 1] == '.' ? "" : "_", opname);
  }
  unsigned *next = base_slot(c, base);
  if (!next) return NIMBLE_OOM();
  const char *name = *next ? nimble_arena_sprintf(c->arena, "%s.%u", base, *next)
                           : nimble_arena_strdup(c->arena, base);
  while (name && nimble_module_find_func(c->m, name)) { /* taken before this pass */
    ++*next;
    name = nimble_arena_sprintf(c->arena, "%s.%u", base, *next);
  }
  if (!name) return NIMBLE_OOM();
  ++*next;
  const nimble_expr *f = nimble_ir_func(c->arena, 0, NULL, g->num_params, params, ret, body, NULL);
  if (!f) return NIMBLE_OOM();
  NIMBLE_RETURN_IF_ERROR(nimble_module_add_func(c->m, name, f));
  const nimble_expr *callee = nimble_ir_global(c->arena, name, &g->chain->values[g->root]->loc);
  if (!callee) return NIMBLE_OOM();
  *call_out = nimble_ir_call(c->arena, callee, g->num_params, inputs, NULL,
                             &g->chain->values[g->root]->loc);
  return *call_out ? nimble_ok() : NIMBLE_OOM();
}

static nimble_status_t fuse_expr(void *user, const nimble_expr *e, const nimble_expr **out);

static nimble_status_t fuse_chain(fuse_ctx *c, const nimble_expr *e, const nimble_expr **out) {
  pass_chain chain, res = {0};
  NIMBLE_RETURN_IF_ERROR(pass_chain_collect(e, &chain));
  pass_map index = {0};
  node *nodes = calloc(chain.n ? chain.n : 1, sizeof *nodes);
  nimble_status_t st = nodes ? nimble_ok() : NIMBLE_OOM();
  for (size_t i = 0; !st && i < chain.n; i++) {
    if (!pass_map_put(&index, chain.vars[i], (void *)(uintptr_t)(i + 1))) st = NIMBLE_OOM();
    const nimble_op *op = pass_called_op(chain.values[i]);
    if (!st && op && !stays_op(op)) {
      nodes[i].op = op;
      nodes[i].gmax = pattern_of(op);
      nodes[i].size = 1;
    }
  }
  /* Grouping: each consumer, in order, takes its single-use producers. */
  for (size_t i = 0; !st && c->allow_groups && i < chain.n; i++) {
    if (!nodes[i].op) continue;
    const nimble_expr *call = chain.values[i];
    int pc = pattern_of(nodes[i].op);
    size_t prod[8];
    if (conv_parts(c, &chain, &index, nodes, i, prod)) {
      for (size_t k = 0; k < call->u.call.num_args; k++) {
        nodes[prod[k]].parent = i + 1;
        nodes[i].size += nodes[prod[k]].size;
      }
      nodes[i].gmax = NIMBLE_FUSE_OPAQUE; /* a group of its own: nothing joins it */
      continue;
    }
    for (size_t k = 0; k < call->u.call.num_args; k++) {
      const nimble_expr *arg = call->u.call.args[k];
      size_t j = (size_t)(uintptr_t)pass_map_get(&index, arg);
      if (arg->kind != NIMBLE_EXPR_VAR || !j || !nodes[j - 1].op || nodes[j - 1].parent) continue;
      if ((uintptr_t)pass_map_get(&c->uses, arg) != 1) continue;
      if (!can_join(pc, &nodes[i], &nodes[j - 1])) continue;
      nodes[j - 1].parent = i + 1;
      nodes[i].size += nodes[j - 1].size;
      if (nodes[j - 1].gmax > nodes[i].gmax) nodes[i].gmax = nodes[j - 1].gmax;
    }
  }
  if (!st && c->allow_groups && chain.n) {
    /* Each entry's group root (consumers come later: from the end back). */
    size_t *root = malloc(chain.n * sizeof *root);
    if (!root) st = NIMBLE_OOM();
    for (size_t i = chain.n; !st && i-- > 0;) root[i] = nodes[i].parent ? root[nodes[i].parent - 1] : i;
    for (size_t m = 0; !st && m < chain.n; m++)
      if (nodes[m].op) st = side_outputs(c, &chain, &index, nodes, root, m);
    free(root);
  }
  /* Rebuild: members vanish, each root calls its primitive. */
  group_build g;
  memset(&g, 0, sizeof g);
  g.chain = &chain;
  g.nodes = nodes;
  g.index = &index;
  for (size_t i = 0; !st && i < chain.n; i++) {
    if (nodes[i].op && nodes[i].parent) continue;
    const nimble_expr *v = chain.values[i];
    if (nodes[i].op) {
      g.root = i;
      st = make_primitive(c, &g, &v);
      if (!st && nodes[i].num_side) {
        /* let %t = @fused(...); let %r = %t.0; let %p = %t.1; ... */
        const nimble_expr *t = nimble_ir_var(
            c->arena, nimble_arena_sprintf(c->arena, "%s_outs", chain.vars[i]->u.var.name), NULL, NULL);
        st = t ? pass_chain_push(&res, t, v) : NIMBLE_OOM();
        for (size_t q = 0; !st && q < g.num_side; q++) {
          const nimble_expr *pj = nimble_ir_proj(c->arena, t, q + 1, NULL);
          st = pj ? pass_chain_push(&res, chain.vars[g.side_at[q]], pj) : NIMBLE_OOM();
        }
        v = st ? NULL : nimble_ir_proj(c->arena, t, 0, NULL);
        if (!st && !v) st = NIMBLE_OOM();
      }
    } else {
      /* Nested blocks (branches, arms, closures), in program order so
       * that primitives are defined in the order they are called. */
      st = fuse_expr(c, v, &v);
    }
    if (!st) st = pass_chain_push(&res, chain.vars[i], v);
  }
  const nimble_expr *tail = NULL;
  if (!st) st = fuse_expr(c, chain.tail, &tail);
  if (!st) {
    *out = pass_chain_build(c->arena, &res, tail);
    if (!*out) st = NIMBLE_OOM();
  }
  free(nodes);
  pass_map_free(&index);
  pass_chain_free(&chain);
  pass_chain_free(&res);
  return st;
}

static nimble_status_t fuse_expr(void *user, const nimble_expr *e, const nimble_expr **out) {
  fuse_ctx *c = user;
  if (e->kind == NIMBLE_EXPR_LET) return fuse_chain(c, e, out);
  if (e->kind == NIMBLE_EXPR_CALL && pass_called_op(e) && !stays_op(pass_called_op(e))) {
    /* A call outside a chain (not in A-normal form): left as it is. */
    *out = e;
    return nimble_ok();
  }
  return pass_map_children(c->arena, e, fuse_expr, c, out);
}

nimble_status_t pass_fuse_ops(nimble_module *m, bool allow_groups) {
  NIMBLE_RETURN_IF_ERROR(nimble_passes_to_anf(m));
  fuse_ctx c;
  memset(&c, 0, sizeof c);
  c.m = m;
  c.arena = nimble_module_arena(m);
  c.allow_groups = allow_groups;
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_typing_infer_module(m, (nimble_typing **)&c.types),
                             "the input does not type-check");
  /* Only the functions present now: the primitives added below are
   * already fused. */
  size_t n = nimble_module_num_funcs(m);
  nimble_status_t st = nimble_ok();
  for (size_t i = 0; !st && i < n; i++) {
    const nimble_global_func_t *gf = nimble_module_func_at(m, i);
    if (nimble_passes_is_primitive(gf->name)) continue;
    const char *name = gf->name;
    const nimble_expr *f = gf->func, *nf;
    pass_map_free(&c.uses);
    const nimble_expr *ignored;
    st = count_uses(&c.uses, f, &ignored);
    if (!st) st = fuse_expr(&c, f, &nf);
    if (!st && nf != f) st = nimble_module_replace_func(m, name, nf);
    if (st) st = nimble_status_annotate(st, "in @%s", name);
  }
  pass_map_free(&c.uses);
  free(c.base_keys);
  free(c.base_next);
  return st;
}

nimble_status_t nimble_passes_fuse_ops(nimble_module *m) { return pass_fuse_ops(m, true); }

bool nimble_passes_is_primitive(const char *name) {
  return name && strncmp(name, NIMBLE_PRIMITIVE_PREFIX, strlen(NIMBLE_PRIMITIVE_PREFIX)) == 0;
}
