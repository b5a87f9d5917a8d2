/* Softmax over the last axis: y = exp(x - max(x)) / sum(exp(x - max(x)))
 * per row. Three passes over a row, each a vectorized loop: the maximum,
 * the exponentials (stored into y) with their sum, and the scaling. Rows
 * are chunked into parallel tasks. */
#include "op_common.h"

nimble_status_t nimble_codegen_build_softmax(nimble_ln_arena *A, const char *name, int rank,
                                             nimble_ln_kernel **out) {
  *out = NULL;
  if (rank < 1 || rank > 6)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "softmax kernel '%s': rank %d outside 1..6", name, rank);
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, name);
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, rank, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, rank, 1);
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_ln_arena_status(A), "building kernel '%s'", name);

  nimble_ln_var *vr = OP_VAR("row"), *vj = OP_VAR("j"), *vn = OP_VAR("n"), *vrows = OP_VAR("rows");
  nimble_ln_var *m = nimble_ln_var_create(A, "m", NIMBLE_LN_F32), *s = nimble_ln_var_create(A, "s", NIMBLE_LN_F32);
  nimble_ln_var *inv = nimble_ln_var_create(A, "inv", NIMBLE_LN_F32);
  nimble_ln_expr *n = OP_R(vn);
  nimble_ln_expr *at = OP_ADD(OP_MUL(OP_R(vr), n), OP_R(vj));
  const nimble_ln_loop_kind_t V = NIMBLE_LN_VECTORIZED;
  const int W = NIMBLE_OP_VECTOR_WIDTH;
  nimble_ln_stmt *max_loop =
      nimble_ln_for(A, vj, OP_I(0), n, V, W, nimble_ln_assign(A, m, OP_MAX(OP_R(m), nimble_ln_load(A, x, at))));
  nimble_ln_expr *e = nimble_ln_unary(A, NIMBLE_LN_EXP, OP_SUB(nimble_ln_load(A, x, at), OP_R(m)));
  nimble_ln_stmt *exp_loop = nimble_ln_for(A, vj, OP_I(0), n, V, W, nimble_ln_store(A, y, at, e));
  nimble_ln_stmt *sum_loop =
      nimble_ln_for(A, vj, OP_I(0), n, V, W, nimble_ln_assign(A, s, OP_ADD(OP_R(s), nimble_ln_load(A, y, at))));
  nimble_ln_stmt *scale_loop =
      nimble_ln_for(A, vj, OP_I(0), n, V, W, nimble_ln_store(A, y, at, nimble_ln_binary(A, NIMBLE_LN_MUL,
                                                                                       nimble_ln_load(A, y, at), OP_R(inv))));
  nimble_ln_stmt *after_max[3] = {exp_loop, nimble_ln_decl(A, s, OP_F(0.0), nimble_ln_seq2(A, sum_loop,
      nimble_ln_let(A, inv, OP_DIV(OP_F(1.0), OP_R(s)), scale_loop))), NULL};
  nimble_ln_stmt *row = nimble_ln_decl(A, m, OP_F(-__builtin_inff()),
                                       nimble_ln_seq2(A, max_loop, nimble_ln_seq(A, after_max, 2)));
  nimble_ln_stmt *rows = nimble_ln_for(A, vr, OP_I(0), OP_R(vrows), NIMBLE_LN_SERIAL, 0, row);
  nimble_ln_stmt *body = nimble_ln_chunk(A, rows, nimble_op_rows_per_task(A, OP_R(vrows), OP_MUL(n, OP_I(4))));
  nimble_ln_stmt *stmts[8];
  int ns = 0;
  for (int a = 0; a < rank; a++)
    stmts[ns++] = nimble_ln_check(A, OP_EQ(OP_SHAPE(y, a), OP_SHAPE(x, a)), "y must have x's shape");
  stmts[ns++] = body;
  body = nimble_ln_seq(A, stmts, (size_t)ns);
  body = nimble_ln_let(A, vrows, nimble_ln_extent_product(A, x, 0, rank - 1), body);
  body = nimble_ln_let(A, vn, OP_SHAPE(x, rank - 1), body);
  nimble_ln_kernel_set_body(k, body);
  return nimble_op_finish(A, k, name, out);
}
