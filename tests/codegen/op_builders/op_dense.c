/* Dense / matmul: y[M,N] = x[M,K] @ w[K,N], optionally + bias[N] and relu,
 * the epilogue fused into the kernel (the `relu(add(matmul(x, w), b))`
 * chain of a fully connected layer becomes one kernel).
 *
 * Two paths, picked at run time inside the kernel: when the runtime
 * provides env->sgemm (OpenBLAS in the standard runtime) the product goes
 * there and the epilogue is one vectorized pass over y; otherwise the
 * kernel's own loops run. Those are tiled for the caches (NC columns of y
 * and KC rows of w at a time, so a KC x NC panel of w is reused across the
 * rows of a task), step through k four at a time so each load and store of
 * y carries four multiply-adds, and vectorize along the row of y. Rows are
 * chunked into parallel tasks. Measurements are in docs/codegen.md.
 */
#include "op_common.h"

enum { DENSE_NC = 256, DENSE_KC = 128, DENSE_KU = 4 };

nimble_status_t nimble_codegen_build_dense(nimble_ln_arena *A, const char *name, nimble_codegen_epilogue_t ep,
                                           nimble_ln_kernel **out) {
  *out = NULL;
  if (ep < NIMBLE_CODEGEN_EPILOGUE_NONE || ep > NIMBLE_CODEGEN_EPILOGUE_BIAS_RELU)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "dense kernel '%s': unknown epilogue %d", name, (int)ep);
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, name);
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 2, 0);
  nimble_ln_param *w = nimble_ln_kernel_add_param(k, "w", NIMBLE_LN_F32, 2, 0);
  nimble_ln_param *b = ep != NIMBLE_CODEGEN_EPILOGUE_NONE ? nimble_ln_kernel_add_param(k, "bias", NIMBLE_LN_F32, 1, 0) : NULL;
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 2, 1);
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_ln_arena_status(A), "building kernel '%s'", name);
  const int W = NIMBLE_OP_VECTOR_WIDTH;
  const nimble_ln_loop_kind_t V = NIMBLE_LN_VECTORIZED;

  nimble_ln_var *vM = OP_VAR("M"), *vN = OP_VAR("N"), *vK = OP_VAR("K");
  nimble_ln_expr *M = OP_R(vM), *N = OP_R(vN), *K = OP_R(vK);
  nimble_ln_var *vi = OP_VAR("i"), *vj = OP_VAR("j");
  nimble_ln_expr *i = OP_R(vi), *j = OP_R(vj);
  nimble_ln_expr *yij = OP_ADD(OP_MUL(i, N), j);

  nimble_ln_var *vc = OP_VAR("c"), *vrows = OP_VAR("rows_per_task"), *vlo = OP_VAR("lo"), *vhi = OP_VAR("hi");
  nimble_ln_expr *lo = OP_R(vlo), *hi = OP_R(vhi);
  nimble_ln_expr *rows_per_task = nimble_op_rows_per_task(A, M, OP_MUL(N, K));
  nimble_ln_expr *n_tasks = OP_DIV(OP_SUB(OP_ADD(M, OP_R(vrows)), OP_I(1)), OP_R(vrows));
#define PER_TASK(stmt)                                                                                   \
  nimble_ln_let(A, vrows, rows_per_task,                                                                 \
                nimble_ln_for(A, vc, OP_I(0), n_tasks, NIMBLE_LN_PARALLEL, 0,                           \
                              nimble_ln_let(A, vlo, OP_MUL(OP_R(vc), OP_R(vrows)),                      \
                                            nimble_ln_let(A, vhi, OP_MIN(M, OP_ADD(lo, OP_R(vrows))), (stmt)))))

  /* --- sgemm path --- */
  nimble_ln_sgemm_desc_t d = {0};
  d.m = M;
  d.n = N;
  d.k = K;
  d.alpha = 1.0f;
  d.beta = 0.0f;
  d.a = x;
  d.b = w;
  d.c = y;
  d.a_offset = d.b_offset = d.c_offset = OP_I(0);
  /* BLAS insists on leading dimensions of at least 1, even for empty
   * matrices. */
  d.lda = OP_MAX(K, OP_I(1));
  d.ldb = OP_MAX(N, OP_I(1));
  d.ldc = OP_MAX(N, OP_I(1));
  nimble_ln_stmt *blas = nimble_ln_sgemm(A, &d);
  if (b) {
    nimble_ln_expr *v = OP_ADD(nimble_ln_load(A, y, yij), nimble_ln_load(A, b, j));
    if (ep == NIMBLE_CODEGEN_EPILOGUE_BIAS_RELU) v = OP_MAX(v, OP_F(0.0));
    nimble_ln_stmt *pass = nimble_ln_for(A, vi, lo, hi, NIMBLE_LN_SERIAL, 0,
                                         nimble_ln_for(A, vj, OP_I(0), N, V, W, nimble_ln_store(A, y, yij, v)));
    blas = nimble_ln_seq2(A, blas, PER_TASK(pass));
  }

  /* --- own loops --- */
  nimble_ln_var *vjt = OP_VAR("jt"), *vj0 = OP_VAR("j0"), *vj1 = OP_VAR("j1");
  nimble_ln_var *vkt = OP_VAR("kt"), *vk0 = OP_VAR("k0"), *vk1 = OP_VAR("k1"), *vkq = OP_VAR("kq"),
                *vkk = OP_VAR("kk"), *vk = OP_VAR("k");
  nimble_ln_expr *j0 = OP_R(vj0), *j1 = OP_R(vj1), *k0 = OP_R(vk0), *k1 = OP_R(vk1), *kk = OP_R(vkk);
  nimble_ln_stmt *init = nimble_ln_for(
      A, vi, lo, hi, NIMBLE_LN_SERIAL, 0,
      nimble_ln_for(A, vj, j0, j1, V, W, nimble_ln_store(A, y, yij, b ? nimble_ln_load(A, b, j) : OP_F(0.0))));
  /* Four k at a time. */
  nimble_ln_var *va[DENSE_KU];
  nimble_ln_expr *sum = nimble_ln_load(A, y, yij);
  for (int q = 0; q < DENSE_KU; q++) {
    va[q] = nimble_ln_var_create(A, q == 0 ? "a0" : q == 1 ? "a1" : q == 2 ? "a2" : "a3", NIMBLE_LN_F32);
    nimble_ln_expr *wq = nimble_ln_load(A, w, OP_ADD(OP_MUL(OP_ADD(kk, OP_I(q)), N), j));
    sum = OP_ADD(sum, OP_MUL(OP_R(va[q]), wq));
  }
  nimble_ln_stmt *quad = nimble_ln_for(A, vj, j0, j1, V, W, nimble_ln_store(A, y, yij, sum));
  for (int q = DENSE_KU - 1; q >= 0; q--)
    quad = nimble_ln_let(A, va[q], nimble_ln_load(A, x, OP_ADD(OP_ADD(OP_MUL(i, K), kk), OP_I(q))), quad);
  nimble_ln_expr *n_quads = OP_DIV(OP_SUB(k1, k0), OP_I(DENSE_KU));
  nimble_ln_stmt *quads = nimble_ln_for(A, vkq, OP_I(0), n_quads, NIMBLE_LN_SERIAL, 0,
                                        nimble_ln_let(A, vkk, OP_ADD(k0, OP_MUL(OP_R(vkq), OP_I(DENSE_KU))), quad));
  nimble_ln_var *vs = nimble_ln_var_create(A, "a", NIMBLE_LN_F32);
  nimble_ln_stmt *single = nimble_ln_let(
      A, vs, nimble_ln_load(A, x, OP_ADD(OP_MUL(i, K), OP_R(vk))),
      nimble_ln_for(A, vj, j0, j1, V, W,
                    nimble_ln_store(A, y, yij,
                                    OP_ADD(nimble_ln_load(A, y, yij),
                                           OP_MUL(OP_R(vs), nimble_ln_load(A, w, OP_ADD(OP_MUL(OP_R(vk), N), j)))))));
  nimble_ln_stmt *rest = nimble_ln_for(A, vk, OP_ADD(k0, OP_MUL(n_quads, OP_I(DENSE_KU))), k1, NIMBLE_LN_SERIAL, 0, single);
  nimble_ln_stmt *ktile = nimble_ln_for(A, vi, lo, hi, NIMBLE_LN_SERIAL, 0, nimble_ln_seq2(A, quads, rest));
  nimble_ln_stmt *klook = nimble_ln_for(
      A, vkt, OP_I(0), OP_DIV(OP_ADD(K, OP_I(DENSE_KC - 1)), OP_I(DENSE_KC)), NIMBLE_LN_SERIAL, 0,
      nimble_ln_let(A, vk0, OP_MUL(OP_R(vkt), OP_I(DENSE_KC)),
                    nimble_ln_let(A, vk1, OP_MIN(K, OP_ADD(k0, OP_I(DENSE_KC))), ktile)));
  nimble_ln_stmt *tile_parts[3] = {init, klook, NULL};
  int n_parts = 2;
  if (ep == NIMBLE_CODEGEN_EPILOGUE_BIAS_RELU)
    tile_parts[n_parts++] = nimble_ln_for(
        A, vi, lo, hi, NIMBLE_LN_SERIAL, 0,
        nimble_ln_for(A, vj, j0, j1, V, W, nimble_ln_store(A, y, yij, OP_MAX(nimble_ln_load(A, y, yij), OP_F(0.0)))));
  nimble_ln_stmt *jloop = nimble_ln_for(
      A, vjt, OP_I(0), OP_DIV(OP_ADD(N, OP_I(DENSE_NC - 1)), OP_I(DENSE_NC)), NIMBLE_LN_SERIAL, 0,
      nimble_ln_let(A, vj0, OP_MUL(OP_R(vjt), OP_I(DENSE_NC)),
                    nimble_ln_let(A, vj1, OP_MIN(N, OP_ADD(j0, OP_I(DENSE_NC))),
                                  nimble_ln_seq(A, tile_parts, (size_t)n_parts))));
  nimble_ln_stmt *own = PER_TASK(jloop);
#undef PER_TASK

  nimble_ln_stmt *stmts[6];
  int ns = 0;
  stmts[ns++] = nimble_ln_check(A, OP_EQ(OP_SHAPE(w, 0), K), "w's rows must equal x's columns");
  stmts[ns++] = nimble_ln_check(A, nimble_ln_binary(A, NIMBLE_LN_AND, OP_EQ(OP_SHAPE(y, 0), M), OP_EQ(OP_SHAPE(y, 1), N)),
                                "y must be [rows of x, columns of w]");
  if (b) stmts[ns++] = nimble_ln_check(A, OP_EQ(OP_SHAPE(b, 0), N), "bias length must equal the columns of w");
  stmts[ns++] = nimble_ln_if(A, nimble_ln_has_sgemm(A), blas, own);
  nimble_ln_stmt *body = nimble_ln_seq(A, stmts, (size_t)ns);
  body = nimble_ln_let(A, vK, OP_SHAPE(x, 1), body);
  body = nimble_ln_let(A, vN, OP_SHAPE(w, 1), body);
  body = nimble_ln_let(A, vM, OP_SHAPE(x, 0), body);
  nimble_ln_kernel_set_body(k, body);
  return nimble_op_finish(A, k, name, out);
}
