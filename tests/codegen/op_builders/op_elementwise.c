/* Element-wise kernels with numpy broadcasting.
 *
 * Compute: out[d0..dR) = combine(in_i[...]) where input i of rank r_i is
 * aligned to the output's last r_i axes and an axis of extent 1 repeats.
 * Broadcasting becomes strides: input i's stride for an axis is 0 when the
 * extent is 1, else the row-major stride, bound once before the loops, so
 * the innermost index stays affine in the loop variable (and LLVM
 * versions the loop on a unit stride).
 *
 * When every input runs along the output's innermost axis (no broadcast
 * there) a second copy of the nest indexes that axis with unit stride, so
 * the vector code loads contiguously; a run-time test picks the copy.
 *
 * Schedule: the innermost axis is split by the vector width (inner loop
 * of exactly one vector, scalar tail; the kernel is specialised for an
 * innermost output extent divisible by the width, which drops the tail),
 * and the outermost loop is chunked into parallel tasks.
 */
#include <stdio.h>

#include "op_common.h"

nimble_ln_expr *nimble_codegen_combine_unary(nimble_ln_arena *A, nimble_ln_expr *const *in, void *op) {
  return nimble_ln_unary(A, *(const nimble_ln_op_t *)op, in[0]);
}

nimble_ln_expr *nimble_codegen_combine_binary(nimble_ln_arena *A, nimble_ln_expr *const *in, void *op) {
  return nimble_ln_binary(A, *(const nimble_ln_op_t *)op, in[0], in[1]);
}

enum { EW_MAX_RANK = 6, EW_MAX_INPUTS = 8 };

nimble_status_t nimble_codegen_build_elementwise(nimble_ln_arena *A, const char *name, int n_inputs,
                                                 const int *input_ranks, int R,
                                                 nimble_codegen_combine_fn combine, void *user,
                                                 nimble_ln_kernel **out) {
  *out = NULL;
  if (n_inputs < 1 || n_inputs > EW_MAX_INPUTS || R < 0 || R > EW_MAX_RANK || !combine)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "elementwise kernel '%s': %d inputs and output rank %d (want 1..%d inputs, "
                              "rank 0..%d)", name, n_inputs, R, EW_MAX_INPUTS, EW_MAX_RANK);
  for (int i = 0; i < n_inputs; i++)
    if (input_ranks[i] < 0 || input_ranks[i] > R)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "elementwise kernel '%s': input %d has rank %d, above the output's %d", name, i,
                                input_ranks[i], R);
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, name);
  nimble_ln_param *in[EW_MAX_INPUTS];
  char pname[32];
  for (int i = 0; i < n_inputs; i++) {
    snprintf(pname, sizeof pname, "in%d", i);
    in[i] = nimble_ln_kernel_add_param(k, pname, NIMBLE_LN_F32, input_ranks[i], 0);
  }
  nimble_ln_param *o = nimble_ln_kernel_add_param(k, "out", NIMBLE_LN_F32, R, 1);
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_ln_arena_status(A), "building kernel '%s'", name);

  nimble_ln_var *d[EW_MAX_RANK];
  nimble_ln_expr *dref[EW_MAX_RANK];
  for (int a = 0; a < R; a++) {
    snprintf(pname, sizeof pname, "d%d", a);
    d[a] = OP_VAR(pname);
    dref[a] = OP_R(d[a]);
  }
  nimble_ln_var *stride[EW_MAX_INPUTS][EW_MAX_RANK];
  for (int i = 0; i < n_inputs; i++)
    for (int a = 0; a < input_ranks[i]; a++) {
      snprintf(pname, sizeof pname, "s%d_%d", i, a);
      stride[i][a] = OP_VAR(pname);
    }
  /* Two nests: one where every input runs along the output's innermost
   * axis (unit stride there, so the vector loop's loads are contiguous),
   * and the general one with the innermost broadcast strides as well. */
  nimble_ln_stmt *nests[2];
  for (int contiguous = 1; contiguous >= 0; contiguous--) {
    nimble_ln_expr *loaded[EW_MAX_INPUTS];
    for (int i = 0; i < n_inputs; i++) {
      int off = R - input_ranks[i];
      nimble_ln_expr *idx = OP_I(0);
      for (int a = 0; a < input_ranks[i]; a++) {
        int unit = contiguous && a == input_ranks[i] - 1;
        idx = OP_ADD(idx, unit ? dref[a + off] : OP_MUL(dref[a + off], OP_R(stride[i][a])));
      }
      loaded[i] = nimble_ln_load(A, in[i], idx);
    }
    nimble_ln_expr *value = combine(A, loaded, user);
    if (value && value->type != NIMBLE_LN_F32)
      nimble_ln_arena_fail(A, "combine returned %s, expected f32", nimble_ln_type_name(value->type));
    nimble_ln_stmt *body = nimble_ln_store(A, o, nimble_ln_flat_index(A, o, dref), value);
    if (R > 0) {
      /* Innermost axis: split by the vector width. */
      nimble_ln_stmt *inner =
          nimble_ln_for(A, d[R - 1], OP_I(0), OP_SHAPE(o, R - 1), NIMBLE_LN_SERIAL, 0, body);
      nimble_ln_stmt *split = nimble_ln_split(A, inner, NIMBLE_OP_VECTOR_WIDTH, NIMBLE_LN_VECTORIZED,
                                              NIMBLE_OP_VECTOR_WIDTH);
      if (!split) return nimble_op_finish(A, NULL, name, out);
      if (R == 1) {
        /* The split's outer loop (over vector-width blocks) is the one to
         * chunk; the tail stays serial after it. */
        nimble_ln_stmt *blocks = split->stmts[0];
        nimble_ln_stmt *par = nimble_ln_chunk(
            A, blocks, nimble_op_rows_per_task(A, blocks->end, OP_I(NIMBLE_OP_VECTOR_WIDTH)));
        body = nimble_ln_seq2(A, par, split->stmts[1]);
      } else {
        body = split;
        for (int a = R - 2; a >= 1; a--)
          body = nimble_ln_for(A, d[a], OP_I(0), OP_SHAPE(o, a), NIMBLE_LN_SERIAL, 0, body);
        nimble_ln_stmt *outer = nimble_ln_for(A, d[0], OP_I(0), OP_SHAPE(o, 0), NIMBLE_LN_SERIAL, 0, body);
        body = nimble_ln_chunk(A, outer,
                               nimble_op_rows_per_task(A, OP_SHAPE(o, 0), nimble_ln_extent_product(A, o, 1, R)));
      }
    }
    nests[contiguous] = body;
  }
  nimble_ln_stmt *body = nests[1];
  if (R > 0) {
    nimble_ln_expr *all_unit = NULL;
    for (int i = 0; i < n_inputs; i++) {
      if (input_ranks[i] == 0) continue;
      nimble_ln_expr *c = OP_EQ(OP_SHAPE(in[i], input_ranks[i] - 1), OP_SHAPE(o, R - 1));
      all_unit = all_unit ? nimble_ln_binary(A, NIMBLE_LN_AND, all_unit, c) : c;
    }
    if (all_unit) body = nimble_ln_if(A, all_unit, nests[1], nests[0]);
    nimble_ln_kernel_specialize(k, o, R - 1, NIMBLE_OP_VECTOR_WIDTH);
  }
  /* Bind strides outside the nest, innermost axis first. */
  for (int i = n_inputs - 1; i >= 0; i--) {
    for (int a = input_ranks[i] - 1; a >= 0; a--) {
      nimble_ln_expr *ext = OP_SHAPE(in[i], a);
      nimble_ln_expr *rm = nimble_ln_extent_product(A, in[i], a + 1, input_ranks[i]);
      nimble_ln_expr *s = nimble_ln_select(A, OP_EQ(ext, OP_I(1)), OP_I(0), rm);
      body = nimble_ln_let(A, stride[i][a], s, body);
    }
  }
  /* Shape checks first: every input axis is 1 or the output's extent. */
  nimble_ln_stmt *checks[EW_MAX_INPUTS * EW_MAX_RANK + 1];
  int n_checks = 0;
  char msg[160];
  for (int i = 0; i < n_inputs; i++) {
    int off = R - input_ranks[i];
    for (int a = 0; a < input_ranks[i]; a++) {
      nimble_ln_expr *ext = OP_SHAPE(in[i], a);
      nimble_ln_expr *ok = nimble_ln_binary(A, NIMBLE_LN_OR, OP_EQ(ext, OP_SHAPE(o, a + off)), OP_EQ(ext, OP_I(1)));
      snprintf(msg, sizeof msg, "input %d axis %d: extent is neither 1 nor the output's axis %d extent", i, a,
               a + off);
      checks[n_checks++] = nimble_ln_check(A, ok, msg);
    }
  }
  checks[n_checks++] = body;
  nimble_ln_kernel_set_body(k, nimble_ln_seq(A, checks, (size_t)n_checks));
  return nimble_op_finish(A, k, name, out);
}
