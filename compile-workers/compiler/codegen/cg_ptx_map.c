/* GPU thread mappings: the output loop nest of a kernel rewritten into one
 * PARALLEL loop (the nvptx64 emitter makes it a grid-stride loop over the
 * whole launch), per operator class:
 *   PER_OUTPUT  for v0 in [b0,e0): ... for vn in [bn,en): body
 *               -> for t in [0, prod(max(e_k - b_k, 0))) parallel:
 *                    vn = bn + t % En; ... v0 = b0 + (t / ...) ; body
 *               one thread per output element (element-wise, injective,
 *               conv and pooling windows, reductions and softmax rows
 *               computed inside the thread);
 *   TILED_2D    the last two axes (M, N) in 16x16 tiles, 256 consecutive
 *               threads per tile (lane = t % 256: row lane / 16, column
 *               lane % 16), tiles then batch outermost; threads outside
 *               the matrix do nothing.
 * Only a perfect nest of SERIAL loops is flattened (let bindings between
 * the loops are kept, after every loop variable is bound), and only when
 * loop bounds do not depend on the nest's own variables, so every
 * iteration is one thread's and the set of iterations is unchanged. */
#include <string.h>

#include "nimble/codegen.h"

#define MAP_MAX_LOOPS NIMBLE_LN_MAX_RANK
#define MAP_MAX_LETS 64
#define TILE 16

typedef struct var_list {
  const nimble_ln_var *v[MAP_MAX_LOOPS + MAP_MAX_LETS];
  int n;
} var_list;

static int uses_any(const nimble_ln_expr *e, const var_list *vs) {
  if (!e) return 0;
  if (e->kind == NIMBLE_LN_E_VAR)
    for (int i = 0; i < vs->n; i++)
      if (vs->v[i] == e->var) return 1;
  return uses_any(e->a, vs) || uses_any(e->b, vs) || uses_any(e->c, vs);
}

static int has_for(const nimble_ln_stmt *s) {
  if (!s) return 0;
  switch (s->kind) {
  case NIMBLE_LN_S_FOR: return 1;
  case NIMBLE_LN_S_SEQ:
    for (size_t i = 0; i < s->n_stmts; i++)
      if (has_for(s->stmts[i])) return 1;
    return 0;
  case NIMBLE_LN_S_LET:
  case NIMBLE_LN_S_DECL: return has_for(s->body);
  case NIMBLE_LN_S_IF: return has_for(s->body) || has_for(s->else_);
  default: return 0;
  }
}

/* Top-level loops: 2 stands for "more than one, or one we must not touch"
 * (inside an accumulator's scope or an if). */
static int count_top(const nimble_ln_stmt *s) {
  if (!s) return 0;
  switch (s->kind) {
  case NIMBLE_LN_S_FOR: return 1;
  case NIMBLE_LN_S_SEQ: {
    int n = 0;
    for (size_t i = 0; i < s->n_stmts; i++) n += count_top(s->stmts[i]);
    return n > 2 ? 2 : n;
  }
  case NIMBLE_LN_S_LET: return count_top(s->body);
  case NIMBLE_LN_S_DECL:
  case NIMBLE_LN_S_IF: return has_for(s) ? 2 : 0;
  default: return 0;
  }
}

typedef struct mapper {
  nimble_ln_arena *A;
  nimble_codegen_thread_mapping_t mapping;
} mapper;

static nimble_ln_expr *i64(mapper *m, int64_t v) { return nimble_ln_i64(m->A, v); }
static nimble_ln_expr *bin(mapper *m, nimble_ln_op_t op, nimble_ln_expr *a, nimble_ln_expr *b) {
  return nimble_ln_binary(m->A, op, a, b);
}
static nimble_ln_expr *ref(mapper *m, nimble_ln_var *v) { return nimble_ln_ref(m->A, v); }

static nimble_ln_var *fresh(mapper *m, const char *name) { return nimble_ln_var_create(m->A, name, NIMBLE_LN_I64); }

/* A list of bindings, outermost first, wrapped around a body at the end. */
typedef struct bindings {
  nimble_ln_var *var[3 * MAP_MAX_LOOPS + 16];
  nimble_ln_expr *val[3 * MAP_MAX_LOOPS + 16];
  int n;
} bindings;

static nimble_ln_var *bind(mapper *m, bindings *b, nimble_ln_var *var, nimble_ln_expr *val) {
  if (!var) var = fresh(m, "t");
  b->var[b->n] = var;
  b->val[b->n] = val;
  b->n++;
  return var;
}

static nimble_ln_stmt *wrap(mapper *m, const bindings *b, nimble_ln_stmt *body) {
  for (int i = b->n; i-- > 0;) body = nimble_ln_let(m->A, b->var[i], b->val[i], body);
  return body;
}

/* Binds the variables of loops[from..to) from the row-major flat index q
 * (last axis fastest) over the extents ext[]. */
static void bind_flat(mapper *m, bindings *b, nimble_ln_stmt *const *loops, nimble_ln_var *const *ext, int from,
                      int to, nimble_ln_expr *q) {
  for (int k = to - 1; k >= from; k--) {
    nimble_ln_expr *pos = k == from ? q : bin(m, NIMBLE_LN_REM, q, ref(m, ext[k]));
    bind(m, b, loops[k]->var, bin(m, NIMBLE_LN_ADD, loops[k]->begin, pos));
    if (k > from) q = ref(m, bind(m, b, NULL, bin(m, NIMBLE_LN_DIV, q, ref(m, ext[k]))));
  }
}

/* The nest starting at `top` rewritten; NULL (and nothing changed) when it
 * is not a perfect nest of serial loops with fixed bounds. */
static nimble_ln_stmt *map_nest(mapper *m, nimble_ln_stmt *top) {
  if (top->loop_kind != NIMBLE_LN_SERIAL) return NULL;
  nimble_ln_stmt *loops[MAP_MAX_LOOPS];
  nimble_ln_stmt *mids[MAP_MAX_LETS]; /* let statements between loops, in order */
  int nl = 0, nm = 0;
  var_list bound = {.n = 0};
  loops[nl++] = top;
  bound.v[bound.n++] = top->var;
  nimble_ln_stmt *inner = top->body;
  for (;;) {
    nimble_ln_stmt *s = inner, *lets[MAP_MAX_LETS];
    int k = 0;
    while (s && s->kind == NIMBLE_LN_S_LET && k < MAP_MAX_LETS) {
      lets[k++] = s;
      s = s->body;
    }
    if (!s || s->kind != NIMBLE_LN_S_FOR || s->loop_kind != NIMBLE_LN_SERIAL || nl >= MAP_MAX_LOOPS ||
        nm + k > MAP_MAX_LETS || uses_any(s->begin, &bound) || uses_any(s->end, &bound))
      break;
    for (int i = 0; i < k; i++) {
      mids[nm++] = lets[i];
      bound.v[bound.n++] = lets[i]->var;
    }
    loops[nl++] = s;
    bound.v[bound.n++] = s->var;
    inner = s->body;
  }
  /* Extents, outside the threaded loop: max(end - begin, 0). */
  bindings outer = {.n = 0}, in = {.n = 0};
  nimble_ln_var *ext[MAP_MAX_LOOPS];
  for (int k = 0; k < nl; k++)
    ext[k] = bind(m, &outer, fresh(m, "extent"),
                  bin(m, NIMBLE_LN_MAX, bin(m, NIMBLE_LN_SUB, loops[k]->end, loops[k]->begin), i64(m, 0)));
  nimble_ln_var *t = fresh(m, "thread_task");
  nimble_ln_stmt *body = inner;
  for (int i = nm; i-- > 0;) body = nimble_ln_let(m->A, mids[i]->var, mids[i]->value, body);
  nimble_ln_expr *total;
  if (m->mapping == NIMBLE_CODEGEN_MAP_TILED_2D && nl >= 2) {
    nimble_ln_var *M = ext[nl - 2], *N = ext[nl - 1];
    nimble_ln_var *tiles_m = bind(m, &outer, fresh(m, "tiles_m"),
                                  bin(m, NIMBLE_LN_DIV, bin(m, NIMBLE_LN_ADD, ref(m, M), i64(m, TILE - 1)), i64(m, TILE)));
    nimble_ln_var *tiles_n = bind(m, &outer, fresh(m, "tiles_n"),
                                  bin(m, NIMBLE_LN_DIV, bin(m, NIMBLE_LN_ADD, ref(m, N), i64(m, TILE - 1)), i64(m, TILE)));
    nimble_ln_expr *batch = i64(m, 1);
    for (int k = 0; k < nl - 2; k++) batch = bin(m, NIMBLE_LN_MUL, batch, ref(m, ext[k]));
    total = bin(m, NIMBLE_LN_MUL, bin(m, NIMBLE_LN_MUL, batch, bin(m, NIMBLE_LN_MUL, ref(m, tiles_m), ref(m, tiles_n))),
                i64(m, TILE * TILE));
    nimble_ln_var *lane = bind(m, &in, fresh(m, "lane"), bin(m, NIMBLE_LN_REM, ref(m, t), i64(m, TILE * TILE)));
    nimble_ln_var *tile = bind(m, &in, fresh(m, "tile"), bin(m, NIMBLE_LN_DIV, ref(m, t), i64(m, TILE * TILE)));
    nimble_ln_var *tn = bind(m, &in, fresh(m, "tile_n"), bin(m, NIMBLE_LN_REM, ref(m, tile), ref(m, tiles_n)));
    nimble_ln_var *tmb = bind(m, &in, fresh(m, "tile_mb"), bin(m, NIMBLE_LN_DIV, ref(m, tile), ref(m, tiles_n)));
    nimble_ln_var *tm = bind(m, &in, fresh(m, "tile_m"), bin(m, NIMBLE_LN_REM, ref(m, tmb), ref(m, tiles_m)));
    nimble_ln_var *b = bind(m, &in, fresh(m, "batch"), bin(m, NIMBLE_LN_DIV, ref(m, tmb), ref(m, tiles_m)));
    nimble_ln_var *row = bind(m, &in, fresh(m, "row"),
                              bin(m, NIMBLE_LN_ADD, bin(m, NIMBLE_LN_MUL, ref(m, tm), i64(m, TILE)),
                                  bin(m, NIMBLE_LN_DIV, ref(m, lane), i64(m, TILE))));
    nimble_ln_var *col = bind(m, &in, fresh(m, "col"),
                              bin(m, NIMBLE_LN_ADD, bin(m, NIMBLE_LN_MUL, ref(m, tn), i64(m, TILE)),
                                  bin(m, NIMBLE_LN_REM, ref(m, lane), i64(m, TILE))));
    bindings vars = {.n = 0};
    bind(m, &vars, loops[nl - 2]->var, bin(m, NIMBLE_LN_ADD, loops[nl - 2]->begin, ref(m, row)));
    bind(m, &vars, loops[nl - 1]->var, bin(m, NIMBLE_LN_ADD, loops[nl - 1]->begin, ref(m, col)));
    if (nl > 2) bind_flat(m, &vars, loops, ext, 0, nl - 2, ref(m, b));
    body = wrap(m, &vars, body);
    nimble_ln_expr *inside = nimble_ln_binary(m->A, NIMBLE_LN_AND, bin(m, NIMBLE_LN_LT, ref(m, row), ref(m, M)),
                                              bin(m, NIMBLE_LN_LT, ref(m, col), ref(m, N)));
    body = nimble_ln_if(m->A, inside, body, NULL);
  } else {
    total = i64(m, 1);
    for (int k = 0; k < nl; k++) total = bin(m, NIMBLE_LN_MUL, total, ref(m, ext[k]));
    bind_flat(m, &in, loops, ext, 0, nl, ref(m, t));
  }
  body = wrap(m, &in, body);
  nimble_ln_stmt *par = nimble_ln_for(m->A, t, i64(m, 0), total, NIMBLE_LN_PARALLEL, 0, body);
  return wrap(m, &outer, par);
}

/* The statement with its one top-level loop nest mapped. */
static nimble_ln_stmt *map_top(mapper *m, nimble_ln_stmt *s) {
  switch (s->kind) {
  case NIMBLE_LN_S_FOR: return map_nest(m, s);
  case NIMBLE_LN_S_LET: {
    nimble_ln_stmt *b = map_top(m, s->body);
    return b ? nimble_ln_let(m->A, s->var, s->value, b) : NULL;
  }
  case NIMBLE_LN_S_SEQ: {
    nimble_ln_stmt **kids = nimble_ln_arena_alloc(m->A, (s->n_stmts ? s->n_stmts : 1) * sizeof *kids);
    if (!kids) return NULL;
    int changed = 0;
    for (size_t i = 0; i < s->n_stmts; i++) {
      kids[i] = s->stmts[i];
      if (!changed && count_top(s->stmts[i]) == 1) {
        kids[i] = map_top(m, s->stmts[i]);
        if (!kids[i]) return NULL;
        changed = 1;
      }
    }
    return changed ? nimble_ln_seq(m->A, kids, s->n_stmts) : NULL;
  }
  default: return NULL;
  }
}

nimble_status_t nimble_codegen_map_threads(nimble_ln_arena *arena, nimble_ln_kernel *k,
                                           nimble_codegen_thread_mapping_t mapping) {
  if (!arena || !k || !k->body)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "map_threads: NULL argument or a kernel without a body");
  if (mapping != NIMBLE_CODEGEN_MAP_PER_OUTPUT && mapping != NIMBLE_CODEGEN_MAP_TILED_2D)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "map_threads: unknown mapping %d", (int)mapping);
  if (count_top(k->body) != 1) return nimble_ok();
  mapper m = {.A = arena, .mapping = mapping};
  nimble_ln_stmt *body = map_top(&m, k->body);
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_ln_arena_status(arena), "kernel '%s': thread mapping", k->name);
  if (body) nimble_ln_kernel_set_body(k, body);
  return nimble_ok();
}
