/* Reductions over one axis: sum, mean, max.
 *
 * x is viewed as [outer, n, inner] around the reduced axis. When the axis
 * is the last one (inner == 1) each output is a scalar accumulator over a
 * vectorized loop (the vectorize hint lets LLVM reassociate the sum).
 * Otherwise the output row itself accumulates, so the loop over `inner`
 * is contiguous and vectorized. Mean divides in an epilogue; max over an
 * empty axis is an error (it has no value), sum over one is 0 and mean NaN
 * (as numpy).
 */
#include "op_common.h"

static nimble_ln_expr *combine(nimble_ln_arena *A, nimble_codegen_reduce_kind_t kind, nimble_ln_expr *acc,
                               nimble_ln_expr *v) {
  return kind == NIMBLE_CODEGEN_REDUCE_MAX ? OP_MAX(acc, v) : OP_ADD(acc, v);
}

static nimble_ln_expr *epilogue(nimble_ln_arena *A, nimble_codegen_reduce_kind_t kind, nimble_ln_expr *acc,
                                nimble_ln_expr *n) {
  if (kind != NIMBLE_CODEGEN_REDUCE_MEAN) return acc;
  return OP_DIV(acc, nimble_ln_cast(A, NIMBLE_LN_F32, n));
}

nimble_status_t nimble_codegen_build_reduce(nimble_ln_arena *A, const char *name, int rank, int axis,
                                            nimble_codegen_reduce_kind_t kind, nimble_ln_kernel **out) {
  *out = NULL;
  if (rank < 1 || rank > 6 || axis < 0 || axis >= rank || kind < NIMBLE_CODEGEN_REDUCE_SUM ||
      kind > NIMBLE_CODEGEN_REDUCE_MAX)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "reduce kernel '%s': rank %d, axis %d, kind %d (want rank 1..6, axis within it)",
                              name, rank, axis, (int)kind);
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, name);
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, rank, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, rank - 1, 1);
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_ln_arena_status(A), "building kernel '%s'", name);

  nimble_ln_var *vo = OP_VAR("o"), *vr = OP_VAR("r"), *vi = OP_VAR("i"), *vn = OP_VAR("n"),
                *vin = OP_VAR("inner"), *vout = OP_VAR("outer");
  nimble_ln_expr *n = OP_R(vn), *inner = OP_R(vin), *o = OP_R(vo), *r = OP_R(vr), *i = OP_R(vi);
  nimble_ln_expr *init = kind == NIMBLE_CODEGEN_REDUCE_MAX ? OP_F(-__builtin_inff()) : OP_F(0.0);
  nimble_ln_stmt *row;
  if (axis == rank - 1) {
    nimble_ln_var *acc = nimble_ln_var_create(A, "acc", NIMBLE_LN_F32);
    nimble_ln_expr *xv = nimble_ln_load(A, x, OP_ADD(OP_MUL(o, n), r));
    nimble_ln_stmt *loop = nimble_ln_for(A, vr, OP_I(0), n, NIMBLE_LN_VECTORIZED, NIMBLE_OP_VECTOR_WIDTH,
                                         nimble_ln_assign(A, acc, combine(A, kind, OP_R(acc), xv)));
    nimble_ln_stmt *store = nimble_ln_store(A, y, o, epilogue(A, kind, OP_R(acc), n));
    row = nimble_ln_decl(A, acc, init, nimble_ln_seq2(A, loop, store));
  } else {
    nimble_ln_expr *yi = OP_ADD(OP_MUL(o, inner), i);
    nimble_ln_expr *xi = OP_ADD(OP_MUL(OP_ADD(OP_MUL(o, n), r), inner), i);
    nimble_ln_stmt *zero = nimble_ln_for(A, vi, OP_I(0), inner, NIMBLE_LN_VECTORIZED, NIMBLE_OP_VECTOR_WIDTH,
                                         nimble_ln_store(A, y, yi, init));
    nimble_ln_stmt *accum = nimble_ln_for(
        A, vr, OP_I(0), n, NIMBLE_LN_SERIAL, 0,
        nimble_ln_for(A, vi, OP_I(0), inner, NIMBLE_LN_VECTORIZED, NIMBLE_OP_VECTOR_WIDTH,
                      nimble_ln_store(A, y, yi, combine(A, kind, nimble_ln_load(A, y, yi), nimble_ln_load(A, x, xi)))));
    nimble_ln_stmt *parts[3] = {zero, accum, NULL};
    int np = 2;
    if (kind == NIMBLE_CODEGEN_REDUCE_MEAN)
      parts[np++] = nimble_ln_for(A, vi, OP_I(0), inner, NIMBLE_LN_VECTORIZED, NIMBLE_OP_VECTOR_WIDTH,
                                  nimble_ln_store(A, y, yi, epilogue(A, kind, nimble_ln_load(A, y, yi), n)));
    row = nimble_ln_seq(A, parts, (size_t)np);
  }
  nimble_ln_stmt *outer_loop = nimble_ln_for(A, vo, OP_I(0), OP_R(vout), NIMBLE_LN_SERIAL, 0, row);
  nimble_ln_stmt *body =
      nimble_ln_chunk(A, outer_loop, nimble_op_rows_per_task(A, OP_R(vout), OP_MUL(n, inner)));

  /* Output extents are x's without the axis. */
  nimble_ln_stmt *stmts[8];
  int ns = 0;
  for (int a = 0, b = 0; a < rank; a++) {
    if (a == axis) continue;
    stmts[ns++] = nimble_ln_check(A, OP_EQ(OP_SHAPE(y, b), OP_SHAPE(x, a)),
                                  "output extents must be the input's without the reduced axis");
    b++;
  }
  if (kind == NIMBLE_CODEGEN_REDUCE_MAX)
    stmts[ns++] = nimble_ln_check(
        A, nimble_ln_binary(A, NIMBLE_LN_OR, nimble_ln_binary(A, NIMBLE_LN_GT, OP_SHAPE(x, axis), OP_I(0)),
                            OP_EQ(nimble_ln_extent_product(A, y, 0, rank - 1), OP_I(0))),
        "max over an empty axis has no value");
  stmts[ns++] = body;
  body = nimble_ln_seq(A, stmts, (size_t)ns);
  body = nimble_ln_let(A, vout, nimble_ln_extent_product(A, x, 0, axis), body);
  body = nimble_ln_let(A, vin, nimble_ln_extent_product(A, x, axis + 1, rank), body);
  body = nimble_ln_let(A, vn, OP_SHAPE(x, axis), body);
  nimble_ln_kernel_set_body(k, body);
  return nimble_op_finish(A, k, name, out);
}
