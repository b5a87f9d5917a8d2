/* Loop nests for the compute definitions that write their kernel body
 * themselves (row anchors and multi-output kernels: resize, dyn_pad,
 * dyn_split, detection, ...): serial loops over an output's indices, the
 * outermost chunked into parallel tasks. */
#include "compute_internal.h"

nimble_ln_stmt *cp_loops(cp_ctx *c, nimble_ln_var *const *v, nimble_ln_expr *const *ext, int rank, int64_t work,
                         nimble_ln_stmt *body) {
  if (!body) return NULL;
  if (rank == 0) return body;
  nimble_ln_stmt *nest = body;
  for (int a = rank - 1; a >= 0; a--) nest = cp_for(c, v[a], ext[a], NIMBLE_LN_SERIAL, 0, nest);
  if (!nest || !c->opt.parallel) return nest;
  nimble_ln_expr *row_work = cp_mul(c, cp_product(c, ext, 1, rank), cp_i(c, work < 1 ? 1 : work));
  return nimble_ln_chunk(c->A, nest, cp_rows_per_task(c, ext[0], row_work));
}

nimble_ln_stmt *cp_store_nest(cp_ctx *c, cp_node *value_of, nimble_ln_param *out, int64_t work) {
  int R = value_of->rank;
  nimble_ln_var *v[CP_MAX_RANK] = {NULL};
  nimble_ln_expr *idx[CP_MAX_RANK] = {NULL};
  for (int a = 0; a < R; a++) {
    v[a] = cp_var(c, "i", NIMBLE_LN_I64);
    idx[a] = nimble_ln_ref(c->A, v[a]);
  }
  nimble_ln_expr *val = cp_convert(c, cp_value(c, value_of, idx), value_of->type);
  if (!val) return NULL;
  nimble_ln_stmt *st = nimble_ln_store(c->A, out, R ? nimble_ln_flat_index(c->A, out, idx) : cp_i(c, 0), val);
  return cp_loops(c, v, value_of->ext, R, work, st);
}

void cp_check_numel(cp_ctx *c, nimble_ln_expr *const *ext, int rank, const char *op) {
  /* Each extent is checked non-negative first; the product is then bounded
   * in f32 (which cannot overflow into UB, unlike i64 arithmetic), so the
   * exact element count the runtime computes afterwards fits easily. */
  nimble_ln_expr *p = NULL;
  for (int a = 0; a < rank; a++) {
    cp_check(c, nimble_ln_binary(c->A, NIMBLE_LN_GE, ext[a], cp_i(c, 0)), "%s: output axis %d would be negative", op,
             a);
    nimble_ln_expr *f = nimble_ln_cast(c->A, NIMBLE_LN_F32, ext[a]);
    p = p ? nimble_ln_binary(c->A, NIMBLE_LN_MUL, p, f) : f;
  }
  if (p)
    cp_check(c, nimble_ln_binary(c->A, NIMBLE_LN_LE, p, nimble_ln_f32(c->A, (double)CP_MAX_DYN_ELEMENTS)),
             "%s: the result would have more than 2^40 elements", op);
}
