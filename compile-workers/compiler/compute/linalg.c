/* det (ONNX Det): the determinant of each [n, n] matrix in the last two
 * axes, by Gaussian elimination with partial pivoting (the row of the
 * largest magnitude in the column; a zero column gives 0) on an f32 copy
 * in a scratch buffer, matrix by matrix (serial: the scratch is one
 * matrix). A 0 x 0 matrix has determinant 1, as NumPy's. */
#include "compute_internal.h"

#define A_ c->A
#define BIN(op, a, b) nimble_ln_binary(A_, NIMBLE_LN_##op, (a), (b))
#define SEL(c_, a, b) nimble_ln_select(A_, (c_), (a), (b))
#define F(v) nimble_ln_f32(A_, (v))
#define REF(v) nimble_ln_ref(A_, (v))
#define LD(p, i) nimble_ln_load(A_, (p), (i))
#define ST(p, i, v) nimble_ln_store(A_, (p), (i), (v))
#define SET(v, e) nimble_ln_assign(A_, (v), (e))

static nimble_status_t shape_det(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  if (x->rank < 2 || x->type != NIMBLE_LN_F32)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "det of rank %d %s (float32 matrices only)", x->rank,
                              nimble_dtype_name(x->dtype));
  cp_check(c, cp_eq(c, x->ext[x->rank - 2], x->ext[x->rank - 1]), "det: the matrices are not square");
  n->type = x->type;
  n->dtype = x->dtype;
  n->rank = x->rank - 2;
  for (int a = 0; a < n->rank; a++) n->ext[a] = x->ext[a];
  return nimble_ok();
}

static nimble_ln_stmt *emit_det(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  cp_node *x = n->in[0];
  nimble_ln_expr *N = x->ext[x->rank - 1], *NN = cp_mul(c, N, N);
  nimble_ln_expr *batch = cp_product(c, x->ext, 0, x->rank - 2);
  nimble_ln_param *m = nimble_ln_kernel_add_scratch(c->k, "det_lu", NIMBLE_LN_F32, cp_max(c, NN, cp_i(c, 1)));
  if (!m) return NULL;
  nimble_ln_var *b = cp_var(c, "b", NIMBLE_LN_I64), *e = cp_var(c, "e", NIMBLE_LN_I64);
  nimble_ln_var *k = cp_var(c, "k", NIMBLE_LN_I64), *i = cp_var(c, "i", NIMBLE_LN_I64),
                *j = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_var *i2 = cp_var(c, "i", NIMBLE_LN_I64), *j2 = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_var *det = cp_var(c, "det", NIMBLE_LN_F32), *piv = cp_var(c, "piv", NIMBLE_LN_I64);
  nimble_ln_var *big = cp_var(c, "big", NIMBLE_LN_F32), *f = cp_var(c, "f", NIMBLE_LN_F32);
  nimble_ln_var *tmp = cp_var(c, "tmp", NIMBLE_LN_F32);
#define AT(r, col) cp_add(c, cp_mul(c, (r), N), (col))
  nimble_ln_stmt *s[6];
  /* Copy matrix b. */
  s[0] = cp_for(c, e, NN, NIMBLE_LN_SERIAL, 0,
                ST(m, REF(e), cp_value_flat(c, x, cp_add(c, cp_mul(c, REF(b), NN), REF(e)))));
  /* Column k: the pivot row. */
  nimble_ln_expr *a_ik = nimble_ln_unary(A_, NIMBLE_LN_ABS, LD(m, AT(REF(i), REF(k))));
  nimble_ln_stmt *find = nimble_ln_for(A_, i, cp_add(c, REF(k), cp_i(c, 1)), N, NIMBLE_LN_SERIAL, 0,
                                       nimble_ln_if(A_, BIN(GT, a_ik, REF(big)),
                                                    nimble_ln_seq2(A_, SET(big, a_ik), SET(piv, REF(i))), NULL));
  /* Swap rows k and piv (the determinant changes sign). */
  nimble_ln_stmt *sw3[3] = {SET(tmp, LD(m, AT(REF(k), REF(j)))), ST(m, AT(REF(k), REF(j)), LD(m, AT(REF(piv), REF(j)))),
                            ST(m, AT(REF(piv), REF(j)), REF(tmp))};
  nimble_ln_stmt *swap =
      nimble_ln_if(A_, BIN(NE, REF(piv), REF(k)),
                   nimble_ln_seq2(A_, cp_for(c, j, N, NIMBLE_LN_SERIAL, 0, nimble_ln_seq(A_, sw3, 3)),
                                  SET(det, nimble_ln_unary(A_, NIMBLE_LN_NEG, REF(det)))),
                   NULL);
  /* Eliminate below the pivot. */
  nimble_ln_expr *pk = LD(m, AT(REF(k), REF(k)));
  nimble_ln_stmt *row = nimble_ln_for(
      A_, j2, cp_add(c, REF(k), cp_i(c, 1)), N, NIMBLE_LN_SERIAL, 0,
      ST(m, AT(REF(i2), REF(j2)), BIN(SUB, LD(m, AT(REF(i2), REF(j2))), BIN(MUL, REF(f), LD(m, AT(REF(k), REF(j2)))))));
  nimble_ln_stmt *elim = nimble_ln_for(A_, i2, cp_add(c, REF(k), cp_i(c, 1)), N, NIMBLE_LN_SERIAL, 0,
                                       nimble_ln_let(A_, f, BIN(DIV, LD(m, AT(REF(i2), REF(k))), pk), row));
  nimble_ln_stmt *step3[3] = {swap, SET(det, BIN(MUL, REF(det), pk)), elim};
  /* A zero pivot column: the determinant is 0 (nothing more to do). */
  nimble_ln_stmt *col = nimble_ln_seq2(A_, find, nimble_ln_if(A_, BIN(EQ, REF(big), F(0)), SET(det, F(0)),
                                                              nimble_ln_seq(A_, step3, 3)));
  col = nimble_ln_decl(A_, piv, REF(k),
                       nimble_ln_decl(A_, big, nimble_ln_unary(A_, NIMBLE_LN_ABS, LD(m, AT(REF(k), REF(k)))), col));
  col = nimble_ln_if(A_, BIN(NE, REF(det), F(0)), col, NULL);
  s[1] = cp_for(c, k, N, NIMBLE_LN_SERIAL, 0, col);
  s[2] = ST(o, REF(b), REF(det));
#undef AT
  nimble_ln_stmt *one = nimble_ln_decl(A_, det, F(1), nimble_ln_decl(A_, tmp, F(0), nimble_ln_seq(A_, s, 3)));
  return cp_for(c, b, batch, NIMBLE_LN_SERIAL, 0, one);
}

const cp_def cp_defs_linalg[] = {
    {"det", CP_ANCHOR_ROW, shape_det, NULL, NULL, emit_det, NULL, NULL},
};
const int cp_defs_linalg_count = (int)(sizeof cp_defs_linalg / sizeof cp_defs_linalg[0]);
