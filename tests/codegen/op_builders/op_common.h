/* Small helpers the test operator builders (op_builders.h) share: terse constructors and the
 * default schedule constants. */
#ifndef NIMBLE_OP_COMMON_H
#define NIMBLE_OP_COMMON_H

#include "op_builders.h"

/* f32 lanes of the widest vector the default x86 target (x86-64-v3) has. */
#define NIMBLE_OP_VECTOR_WIDTH 8
/* A parallel task gets at least this many elements of work. */
#define NIMBLE_OP_MIN_TASK_WORK 16384
/* At most this many tasks per parallel loop. */
#define NIMBLE_OP_MAX_TASKS 64

#define OP_I(v) nimble_ln_i64(A, (v))
#define OP_F(v) nimble_ln_f32(A, (v))
#define OP_R(v) nimble_ln_ref(A, (v))
#define OP_ADD(x, y) nimble_ln_binary(A, NIMBLE_LN_ADD, (x), (y))
#define OP_SUB(x, y) nimble_ln_binary(A, NIMBLE_LN_SUB, (x), (y))
#define OP_MUL(x, y) nimble_ln_binary(A, NIMBLE_LN_MUL, (x), (y))
#define OP_DIV(x, y) nimble_ln_binary(A, NIMBLE_LN_DIV, (x), (y))
#define OP_MAX(x, y) nimble_ln_binary(A, NIMBLE_LN_MAX, (x), (y))
#define OP_MIN(x, y) nimble_ln_binary(A, NIMBLE_LN_MIN, (x), (y))
#define OP_EQ(x, y) nimble_ln_binary(A, NIMBLE_LN_EQ, (x), (y))
#define OP_SHAPE(p, a) nimble_ln_shape(A, (p), (a))
#define OP_VAR(name) nimble_ln_var_create(A, (name), NIMBLE_LN_I64)

/* Number of rows per parallel task so that there are at most
 * NIMBLE_OP_MAX_TASKS tasks and each does at least NIMBLE_OP_MIN_TASK_WORK
 * elements, given the work of one row. */
static inline nimble_ln_expr *nimble_op_rows_per_task(nimble_ln_arena *A, nimble_ln_expr *rows,
                                                      nimble_ln_expr *row_work) {
  nimble_ln_expr *by_count = OP_DIV(OP_ADD(rows, OP_I(NIMBLE_OP_MAX_TASKS - 1)), OP_I(NIMBLE_OP_MAX_TASKS));
  nimble_ln_expr *work = OP_MAX(row_work, OP_I(1));
  nimble_ln_expr *by_work = OP_DIV(OP_ADD(OP_I(NIMBLE_OP_MIN_TASK_WORK - 1), work), work);
  return OP_MAX(OP_MAX(by_count, by_work), OP_I(1));
}

/* The finished kernel or the arena's first error, annotated. */
static inline nimble_status_t nimble_op_finish(nimble_ln_arena *A, nimble_ln_kernel *k, const char *name,
                                               nimble_ln_kernel **out) {
  nimble_status_t s = nimble_ln_arena_status(A);
  if (s) return nimble_status_annotate(s, "building kernel '%s'", name);
  if (!k || !k->body)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "building kernel '%s': out of memory", name);
  *out = k;
  return nimble_ok();
}

#endif
