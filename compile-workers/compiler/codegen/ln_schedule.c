/* Schedules: loop rewrites that keep the meaning of a loop nest and change
 * how it runs (split for vector width, chunking for parallel tasks). */
#include <stdio.h>

#include "ln_internal.h"

static nimble_ln_expr *add(nimble_ln_arena *a, nimble_ln_expr *x, nimble_ln_expr *y) {
  if (x && x->kind == NIMBLE_LN_E_CONST_I && x->i == 0) return y;
  return nimble_ln_binary(a, NIMBLE_LN_ADD, x, y);
}
static nimble_ln_expr *sub(nimble_ln_arena *a, nimble_ln_expr *x, nimble_ln_expr *y) {
  if (y && y->kind == NIMBLE_LN_E_CONST_I && y->i == 0) return x;
  return nimble_ln_binary(a, NIMBLE_LN_SUB, x, y);
}
static nimble_ln_expr *mul(nimble_ln_arena *a, nimble_ln_expr *x, nimble_ln_expr *y) {
  return nimble_ln_binary(a, NIMBLE_LN_MUL, x, y);
}

static nimble_ln_var *derived_var(nimble_ln_arena *arena, const nimble_ln_var *v, const char *suffix) {
  char name[128];
  snprintf(name, sizeof name, "%s%s", v->name, suffix);
  return nimble_ln_var_create(arena, name, NIMBLE_LN_I64);
}

static int is_loop(nimble_ln_arena *arena, const nimble_ln_stmt *loop, const char *what) {
  if (loop && loop->kind == NIMBLE_LN_S_FOR) return 1;
  if (loop) nimble_ln_arena_fail(arena, "%s: statement is not a loop", what);
  return 0;
}

/* for v' in [0, f) kind: let v = base + v': body, one block of a split
 * loop (v' named after v with `suffix`). */
static nimble_ln_stmt *one_block(nimble_ln_arena *arena, const nimble_ln_stmt *loop, nimble_ln_expr *base,
                                 nimble_ln_expr *f, nimble_ln_loop_kind_t kind, int factor, const char *suffix) {
  nimble_ln_var *vi = derived_var(arena, loop->var, suffix);
  return nimble_ln_for(arena, vi, nimble_ln_i64(arena, 0), f, kind, factor,
                       nimble_ln_let(arena, loop->var, add(arena, base, nimble_ln_ref(arena, vi)), loop->body));
}

/* for vo in [0, (e-b)/f): the block at b + vo*f (one_block); the whole
 * blocks of both splits. */
static nimble_ln_stmt *whole_blocks(nimble_ln_arena *arena, const nimble_ln_stmt *loop, nimble_ln_expr *f,
                                    nimble_ln_expr *n_outer, nimble_ln_loop_kind_t kind, int factor) {
  nimble_ln_var *vo = derived_var(arena, loop->var, "o");
  nimble_ln_expr *base = add(arena, loop->begin, mul(arena, nimble_ln_ref(arena, vo), f));
  nimble_ln_stmt *inner = one_block(arena, loop, base, f, kind, factor, "i");
  return nimble_ln_for(arena, vo, nimble_ln_i64(arena, 0), n_outer, NIMBLE_LN_SERIAL, 0, inner);
}

/* Whether a split's factor is in [lo, 4096]; records the error if not. */
static bool factor_in(nimble_ln_arena *arena, const nimble_ln_stmt *loop, const char *what, int64_t factor,
                      int64_t lo) {
  if (factor >= lo && factor <= 4096) return true;
  nimble_ln_arena_fail(arena, "%s of '%s': factor %lld outside [%lld, 4096]", what, loop->var->name,
                       (long long)factor, (long long)lo);
  return false;
}

nimble_ln_stmt *nimble_ln_split(nimble_ln_arena *arena, const nimble_ln_stmt *loop, int64_t factor,
                                nimble_ln_loop_kind_t inner_kind, int inner_factor) {
  if (!is_loop(arena, loop, "split") || !factor_in(arena, loop, "split", factor, 1)) return NULL;
  nimble_ln_expr *f = nimble_ln_i64(arena, factor);
  nimble_ln_expr *n_outer = nimble_ln_binary(arena, NIMBLE_LN_DIV, sub(arena, loop->end, loop->begin), f);
  nimble_ln_stmt *outer = whole_blocks(arena, loop, f, n_outer, inner_kind, inner_factor);
  nimble_ln_expr *tail_begin = add(arena, loop->begin, mul(arena, n_outer, f));
  nimble_ln_stmt *tail = nimble_ln_for(arena, loop->var, tail_begin, loop->end, loop->loop_kind,
                                       loop->factor, loop->body);
  if (!outer || !tail) return NULL;
  const nimble_ln_expr *b = loop->begin, *e = loop->end;
  if (b->kind == NIMBLE_LN_E_CONST_I && b->i == 0 && e->kind == NIMBLE_LN_E_SHAPE) {
    tail->tail_param = e->param;
    tail->tail_axis = e->axis;
    tail->tail_factor = factor;
  }
  return nimble_ln_seq2(arena, outer, tail);
}

nimble_ln_stmt *nimble_ln_split_overlap(nimble_ln_arena *arena, const nimble_ln_stmt *loop, int64_t factor) {
  if (!is_loop(arena, loop, "split_overlap") || !factor_in(arena, loop, "split_overlap", factor, 2)) return NULL;
  nimble_ln_expr *f = nimble_ln_i64(arena, factor);
  nimble_ln_expr *n = sub(arena, loop->end, loop->begin);
  nimble_ln_expr *n_outer = nimble_ln_binary(arena, NIMBLE_LN_DIV, n, f);
  nimble_ln_stmt *outer = whole_blocks(arena, loop, f, n_outer, NIMBLE_LN_VECTORIZED, (int)factor);
  /* The last whole vector, ending at e; only when n is not a multiple of f. */
  nimble_ln_stmt *last = one_block(arena, loop, sub(arena, loop->end, f), f, NIMBLE_LN_VECTORIZED, (int)factor, "l");
  nimble_ln_expr *ragged = nimble_ln_binary(arena, NIMBLE_LN_NE, nimble_ln_binary(arena, NIMBLE_LN_REM, n, f),
                                            nimble_ln_i64(arena, 0));
  nimble_ln_stmt *short_loop =
      nimble_ln_for(arena, loop->var, loop->begin, loop->end, NIMBLE_LN_SERIAL, 0, loop->body);
  if (!outer || !outer->body || !last || !short_loop || !ragged) return NULL;
  /* Unrolled first, a constant 8-step loop is never vectorized. */
  outer->body->no_unroll = last->no_unroll = true;
  nimble_ln_stmt *tail = nimble_ln_if(arena, nimble_ln_binary(arena, NIMBLE_LN_GE, n, f),
                                      nimble_ln_if(arena, ragged, last, NULL), short_loop);
  return nimble_ln_seq2(arena, outer, tail);
}

nimble_ln_stmt *nimble_ln_chunk(nimble_ln_arena *arena, const nimble_ln_stmt *loop,
                                nimble_ln_expr *chunk) {
  if (!is_loop(arena, loop, "chunk") || !chunk) return NULL;
  nimble_ln_var *c = derived_var(arena, loop->var, "_chunk");
  nimble_ln_var *cs = derived_var(arena, loop->var, "_chunk_size");
  nimble_ln_expr *size = nimble_ln_ref(arena, cs);
  nimble_ln_expr *n = sub(arena, loop->end, loop->begin);
  nimble_ln_expr *one = nimble_ln_i64(arena, 1);
  nimble_ln_expr *n_chunks =
      nimble_ln_binary(arena, NIMBLE_LN_DIV, sub(arena, add(arena, n, size), one), size);
  nimble_ln_expr *lo = add(arena, loop->begin, mul(arena, nimble_ln_ref(arena, c), size));
  nimble_ln_expr *hi = nimble_ln_binary(arena, NIMBLE_LN_MIN, loop->end, add(arena, lo, size));
  nimble_ln_stmt *inner =
      nimble_ln_for(arena, loop->var, lo, hi, loop->loop_kind, loop->factor, loop->body);
  nimble_ln_stmt *outer =
      nimble_ln_for(arena, c, nimble_ln_i64(arena, 0), n_chunks, NIMBLE_LN_PARALLEL, 0, inner);
  /* The chunk size is clamped to at least 1 so a bad expression cannot
   * divide by zero at run time. */
  nimble_ln_expr *clamped = nimble_ln_binary(arena, NIMBLE_LN_MAX, chunk, one);
  return nimble_ln_let(arena, cs, clamped, outer);
}

nimble_ln_stmt *nimble_ln_with_kind(nimble_ln_arena *arena, const nimble_ln_stmt *loop,
                                    nimble_ln_loop_kind_t kind, int factor) {
  if (!is_loop(arena, loop, "with_kind")) return NULL;
  nimble_ln_stmt *s =
      nimble_ln_for(arena, loop->var, loop->begin, loop->end, kind, factor, loop->body);
  if (s) {
    s->tail_param = loop->tail_param;
    s->tail_axis = loop->tail_axis;
    s->tail_factor = loop->tail_factor;
  }
  return s;
}
