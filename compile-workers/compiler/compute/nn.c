/* Neural-network compute definitions.
 *
 * Point anchors (one output element by a loop over inputs): dense (ONNX
 * Gemm: transA/transB, alpha, beta, optional C), matmul (NumPy, batch dims
 * broadcast), conv2d (NCHW/OIHW, strides, pads, dilations, groups, bias),
 * max/avg/global-average pooling. Padding reads clamp their index and
 * select the padding value, so no load leaves its tensor.
 *
 * Row anchors (the primitive's result; loops over all other axes, then
 * statistics along the axis, then the write): softmax, log_softmax,
 * layer_norm. batch_norm (inference) is element-wise given its statistics.
 *
 * Dense and matmul (any batch rank) over plain f32 parameters can also run
 * through env->sgemm (cp_gemm_sgemm): the kernel tests has_sgemm() at run
 * time and keeps its own loops otherwise. */
#include <math.h>
#include <string.h>

#include "compute_internal.h"

static nimble_ln_expr *clampi(cp_ctx *c, nimble_ln_expr *v, nimble_ln_expr *hi) {
  return cp_max(c, cp_min(c, v, hi), cp_i(c, 0));
}
static nimble_ln_expr *lt(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b) {
  return nimble_ln_binary(c->A, NIMBLE_LN_LT, a, b);
}
static nimble_ln_expr *band(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b) {
  return nimble_ln_binary(c->A, NIMBLE_LN_AND, a, b);
}

static void copy_type(cp_node *n, const cp_node *x) {
  n->type = x->type;
  n->dtype = x->dtype;
}

/* Products and sums (dense, matmul, conv2d) take numbers: floats of any
 * width, integers (wrapping like NumPy's), not bools. */
static bool numeric(nimble_ln_type_t t) { return nimble_ln_type_is_float(t) || nimble_ln_type_is_int(t); }

/* a * b in the accumulation type of the result. */
static nimble_ln_expr *acc_mul(cp_ctx *c, nimble_ln_type_t at, nimble_ln_expr *a, nimble_ln_expr *b) {
  return nimble_ln_binary(c->A, NIMBLE_LN_MUL, cp_convert(c, a, at), cp_convert(c, b, at));
}

/* ---- dense (Gemm) ---- */

static nimble_status_t shape_dense(cp_ctx *c, cp_node *n) {
  cp_node *a = n->in[0], *b = n->in[1];
  if (a->rank != 2 || b->rank != 2) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "dense takes matrices");
  if (!numeric(a->type) || b->type != a->type)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "dense on %s and %s", nimble_dtype_name(a->dtype),
                              nimble_dtype_name(b->dtype));
  bool ta = cp_attr_int(n, "transA") != 0, tb = cp_attr_int(n, "transB") != 0;
  copy_type(n, a);
  n->rank = 2;
  n->ext[0] = a->ext[ta ? 1 : 0];
  n->ext[1] = b->ext[tb ? 0 : 1];
  cp_check(c, cp_eq(c, a->ext[ta ? 0 : 1], b->ext[tb ? 1 : 0]), "dense: inner dimensions differ");
  if (n->n_in == 3) {
    cp_node *cc = n->in[2];
    if (cc->rank > 2) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "dense: C of rank %d", cc->rank);
    for (int i = 0; i < cc->rank; i++) {
      nimble_ln_expr *o = n->ext[2 - cc->rank + i];
      nimble_ln_expr *e = cp_broadcast_ext(c, o, cc->ext[i], "dense C");
      /* C broadcasts one way: the result keeps (M, N). */
      cp_check(c, cp_eq(c, e, o), "dense: C does not broadcast to the result");
    }
  }
  return nimble_ok();
}

static nimble_ln_stmt *emit_dense(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx, nimble_ln_var *result,
                                  nimble_ln_stmt *body) {
  cp_node *a = n->in[0], *b = n->in[1];
  bool ta = cp_attr_int(n, "transA") != 0, tb = cp_attr_int(n, "transB") != 0;
  nimble_ln_type_t at = cp_acc_type(n->type);
  nimble_ln_var *k = cp_var(c, "k", NIMBLE_LN_I64), *acc = cp_var(c, "acc", at);
  nimble_ln_expr *kr = nimble_ln_ref(c->A, k);
  nimble_ln_expr *ai[2] = {ta ? kr : idx[0], ta ? idx[0] : kr};
  nimble_ln_expr *bi[2] = {tb ? idx[1] : kr, tb ? kr : idx[1]};
  nimble_ln_expr *prod = acc_mul(c, at, cp_value(c, a, ai), cp_value(c, b, bi));
  nimble_ln_stmt *loop =
      cp_for(c, k, a->ext[ta ? 0 : 1], c->opt.vector_width > 1 ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL,
             c->opt.vector_width > 1 ? c->opt.vector_width : 0,
             nimble_ln_assign(c->A, acc, nimble_ln_binary(c->A, NIMBLE_LN_ADD, nimble_ln_ref(c->A, acc), prod)));
  double alpha = cp_attr_float(n, "alpha"), beta = cp_attr_float(n, "beta");
  nimble_ln_expr *fin = nimble_ln_ref(c->A, acc);
  if (alpha != 1.0) fin = nimble_ln_binary(c->A, NIMBLE_LN_MUL, fin, cp_const_of(c, at, alpha));
  if (n->n_in == 3) {
    nimble_ln_expr *ci[2];
    cp_broadcast_index(c, n->in[2], n, idx, ci);
    nimble_ln_expr *cv = cp_convert(c, cp_value(c, n->in[2], ci), at);
    if (beta != 1.0) cv = nimble_ln_binary(c->A, NIMBLE_LN_MUL, cv, cp_const_of(c, at, beta));
    fin = nimble_ln_binary(c->A, NIMBLE_LN_ADD, fin, cv);
  }
  return nimble_ln_decl(c->A, acc, cp_const_of(c, at, 0),
                        nimble_ln_seq2(c->A, loop, nimble_ln_let(c->A, result, cp_convert(c, fin, n->type), body)));
}

/* ---- matmul (NumPy) ---- */

typedef struct mm_dims {
  int ra, rb, batch; /* ranks after vector promotion; batch rank of the result */
  bool a_vec, b_vec;
} mm_dims;

static nimble_status_t shape_matmul(cp_ctx *c, cp_node *n) {
  cp_node *a = n->in[0], *b = n->in[1];
  if (a->rank < 1 || b->rank < 1) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "matmul of a scalar");
  if (!numeric(a->type) || b->type != a->type)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "matmul on %s and %s", nimble_dtype_name(a->dtype),
                              nimble_dtype_name(b->dtype));
  copy_type(n, a);
  nimble_ln_expr *ae[CP_MAX_RANK + 1] = {0}, *be[CP_MAX_RANK + 1] = {0};
  int ra = a->rank, rb = b->rank;
  if (ra == 1) { ae[0] = cp_i(c, 1); ae[1] = a->ext[0]; ra = 2; }
  else for (int i = 0; i < ra; i++) ae[i] = a->ext[i];
  if (rb == 1) { be[0] = b->ext[0]; be[1] = cp_i(c, 1); rb = 2; }
  else for (int i = 0; i < rb; i++) be[i] = b->ext[i];
  int batch = (ra > rb ? ra : rb) - 2;
  if (batch + 2 > CP_MAX_RANK) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "matmul of rank %d", batch + 2);
  cp_check(c, cp_eq(c, ae[ra - 1], be[rb - 2]), "matmul: inner dimensions differ");
  n->rank = 0;
  for (int i = 0; i < batch; i++) {
    int ia = i - (batch - (ra - 2)), ib = i - (batch - (rb - 2));
    nimble_ln_expr *x = ia >= 0 ? ae[ia] : NULL, *y = ib >= 0 ? be[ib] : NULL;
    n->ext[n->rank++] = x && y ? cp_broadcast_ext(c, x, y, "matmul batch") : x ? x : y;
  }
  if (a->rank != 1) n->ext[n->rank++] = ae[ra - 2];
  if (b->rank != 1) n->ext[n->rank++] = be[rb - 1];
  return nimble_ok();
}

/* Index of a batch axis of operand x (true rank xr, batch part xb axes)
 * for result batch index idx. */
static nimble_ln_expr *batch_index(cp_ctx *c, nimble_ln_expr *xe, nimble_ln_expr *oe, nimble_ln_expr *i) {
  int64_t v;
  if (cp_same(xe, oe)) return i;
  if (cp_const_i(xe, &v) && v == 1) return cp_i(c, 0);
  if (cp_const_i(xe, &v)) return i;
  return nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_EQ, xe, cp_i(c, 1)), cp_i(c, 0), i);
}

static nimble_ln_stmt *emit_matmul(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx, nimble_ln_var *result,
                                   nimble_ln_stmt *body) {
  cp_node *a = n->in[0], *b = n->in[1];
  bool a_vec = a->rank == 1, b_vec = b->rank == 1;
  int ra = a_vec ? 2 : a->rank, rb = b_vec ? 2 : b->rank;
  int batch = (ra > rb ? ra : rb) - 2;
  nimble_ln_expr *i = a_vec ? cp_i(c, 0) : idx[batch];
  nimble_ln_expr *j = b_vec ? cp_i(c, 0) : idx[batch + (a_vec ? 0 : 1)];
  nimble_ln_type_t at = cp_acc_type(n->type);
  nimble_ln_var *k = cp_var(c, "k", NIMBLE_LN_I64), *acc = cp_var(c, "acc", at);
  nimble_ln_expr *kr = nimble_ln_ref(c->A, k);
  nimble_ln_expr *ai[CP_MAX_RANK], *bi[CP_MAX_RANK];
  if (a_vec) ai[0] = kr;
  else {
    for (int x = 0; x < ra - 2; x++) ai[x] = batch_index(c, a->ext[x], n->ext[x + batch - (ra - 2)], idx[x + batch - (ra - 2)]);
    ai[ra - 2] = i;
    ai[ra - 1] = kr;
  }
  if (b_vec) bi[0] = kr;
  else {
    for (int x = 0; x < rb - 2; x++) bi[x] = batch_index(c, b->ext[x], n->ext[x + batch - (rb - 2)], idx[x + batch - (rb - 2)]);
    bi[rb - 2] = kr;
    bi[rb - 1] = j;
  }
  nimble_ln_expr *prod = acc_mul(c, at, cp_value(c, a, ai), cp_value(c, b, bi));
  nimble_ln_stmt *loop =
      cp_for(c, k, a->ext[a->rank - 1], c->opt.vector_width > 1 ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL,
             c->opt.vector_width > 1 ? c->opt.vector_width : 0,
             nimble_ln_assign(c->A, acc, nimble_ln_binary(c->A, NIMBLE_LN_ADD, nimble_ln_ref(c->A, acc), prod)));
  return nimble_ln_decl(c->A, acc, cp_const_of(c, at, 0),
                        nimble_ln_seq2(c->A, loop, nimble_ln_let(c->A, result, cp_convert(c, nimble_ln_ref(c->A, acc), n->type), body)));
}


/* ---- einsum (ONNX Einsum, NumPy's einsum): a point anchor. Per output
 * element, loops over the letters summed away (and ellipsis dims the
 * output drops) accumulate the product of the inputs at their letters'
 * indices. A letter repeated within a term takes the diagonal; ellipsis
 * dims broadcast like NumPy's (right-aligned, extent 1 repeats). Without
 * "->" the output is the ellipsis dims, then the letters used once, in
 * alphabetical order (uppercase before lowercase, as in ASCII). ---- */

#define EIN_LETTERS 52
#define EIN_ELL(k) (EIN_LETTERS + (k)) /* ellipsis dim k (global, right-aligned) */

typedef struct ein_spec {
  int n_in;
  int dims[CP_MAX_IN][CP_MAX_RANK]; /* per input axis: a letter or EIN_ELL(k) */
  int ell_rank;
  int out[CP_MAX_RANK];
  int out_rank;
  bool used[EIN_LETTERS + CP_MAX_RANK];   /* appears in some input */
  bool in_out[EIN_LETTERS + CP_MAX_RANK]; /* appears in the output */
} ein_spec;

static int ein_letter(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  if (ch >= 'A' && ch <= 'Z') return 26 + ch - 'A';
  return -1;
}

/* Parses the equation against the inputs' ranks; false (with the error
 * recorded) when it does not fit. */
static bool ein_parse(cp_ctx *c, cp_node *n, ein_spec *sp) {
  memset(sp, 0, sizeof *sp);
  const char *eq = cp_attr_string(n, "equation");
  char e[256];
  size_t len = 0;
  for (const char *p = eq; *p; p++)
    if (*p != ' ' && len + 1 < sizeof e) e[len++] = *p;
  e[len] = 0;
  char *arrow = strstr(e, "->");
  if (arrow) *arrow = 0;
  int count[EIN_LETTERS] = {0};
  bool ell_seen = false;
  char *term = e;
  sp->n_in = n->n_in;
  for (int i = 0; i < n->n_in; i++) {
    char *comma = strchr(term, ',');
    if (comma) *comma = 0;
    int letters = 0;
    bool ell = false;
    for (const char *p = term; *p; p++) {
      if (*p == '.') {
        if (strncmp(p, "...", 3) || ell) goto bad;
        ell = true;
        p += 2;
      } else if (ein_letter(*p) >= 0) {
        letters++;
      } else {
        goto bad;
      }
    }
    int rank = n->in[i]->rank, er = rank - letters, d = 0;
    if (er < 0 || (!ell && er != 0)) goto bad;
    if (er > sp->ell_rank) sp->ell_rank = er;
    for (const char *p = term; *p; p++) {
      if (*p == '.') {
        for (int k = 0; k < er; k++) sp->dims[i][d++] = -1 - k; /* fixed below: needs ell_rank */
        ell_seen = true;
        p += 2;
        continue;
      }
      int li = ein_letter(*p);
      sp->dims[i][d++] = li;
      sp->used[li] = true;
      count[li]++;
    }
    if (!comma ? i != n->n_in - 1 : i == n->n_in - 1) goto bad;
    term = comma ? comma + 1 : term;
  }
  /* Ellipsis dims right-aligned against the longest one. */
  for (int i = 0; i < n->n_in; i++) {
    int letters = 0;
    for (int a = 0; a < n->in[i]->rank; a++) letters += sp->dims[i][a] >= 0;
    int er = n->in[i]->rank - letters;
    for (int a = 0; a < n->in[i]->rank; a++)
      if (sp->dims[i][a] < 0) sp->dims[i][a] = EIN_ELL(sp->ell_rank - er + (-1 - sp->dims[i][a]));
  }
  for (int k = 0; k < sp->ell_rank; k++) sp->used[EIN_ELL(k)] = true;
  if (arrow) {
    bool ell = false;
    for (const char *p = arrow + 2; *p; p++) {
      if (*p == '.') {
        if (strncmp(p, "...", 3) || ell) goto bad;
        ell = true;
        for (int k = 0; k < sp->ell_rank; k++) sp->out[sp->out_rank++] = EIN_ELL(k);
        p += 2;
        continue;
      }
      int li = ein_letter(*p);
      if (li < 0 || !sp->used[li] || sp->in_out[li] || sp->out_rank >= CP_MAX_RANK) goto bad;
      sp->out[sp->out_rank++] = li;
      sp->in_out[li] = true;
    }
  } else {
    if (ell_seen)
      for (int k = 0; k < sp->ell_rank; k++) sp->out[sp->out_rank++] = EIN_ELL(k);
    for (int li = 26; li < EIN_LETTERS; li++) /* 'A'..'Z' sort before 'a'..'z' */
      if (count[li] == 1 && sp->out_rank < CP_MAX_RANK) sp->out[sp->out_rank++] = li;
    for (int li = 0; li < 26; li++)
      if (count[li] == 1 && sp->out_rank < CP_MAX_RANK) sp->out[sp->out_rank++] = li;
  }
  for (int a = 0; a < sp->out_rank; a++) sp->in_out[sp->out[a]] = true;
  return true;
bad:
  cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: einsum equation '%s' does not fit its %d inputs", c->prim, eq, n->n_in);
  return false;
}

/* The extent of a letter or ellipsis dim: from its first input axis
 * (an ellipsis dim: broadcast over the inputs). */
static nimble_ln_expr *ein_extent(cp_ctx *c, cp_node *n, const ein_spec *sp, int sym) {
  nimble_ln_expr *e = NULL;
  for (int i = 0; i < sp->n_in; i++)
    for (int a = 0; a < n->in[i]->rank; a++) {
      if (sp->dims[i][a] != sym) continue;
      if (!e) e = n->in[i]->ext[a];
      else if (sym >= EIN_LETTERS) e = cp_broadcast_ext(c, e, n->in[i]->ext[a], "einsum ellipsis");
    }
  return e;
}

static nimble_status_t shape_einsum(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  copy_type(n, x);
  if (!numeric(x->type)) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "einsum on %s", nimble_dtype_name(x->dtype));
  for (int i = 1; i < n->n_in; i++)
    if (n->in[i]->type != x->type) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "einsum: inputs differ in dtype");
  ein_spec sp;
  if (!ein_parse(c, n, &sp)) return nimble_ok();
  n->rank = sp.out_rank;
  for (int a = 0; a < n->rank; a++) n->ext[a] = ein_extent(c, n, &sp, sp.out[a]);
  /* Every occurrence of a letter has the same extent. */
  for (int i = 0; i < n->n_in; i++)
    for (int a = 0; a < n->in[i]->rank; a++) {
      int sym = sp.dims[i][a];
      if (sym < EIN_LETTERS)
        cp_check(c, cp_eq(c, n->in[i]->ext[a], ein_extent(c, n, &sp, sym)), "einsum: input %d axis %d differs from "
                 "the other axes of its letter", i, a);
    }
  return nimble_ok();
}

static nimble_ln_stmt *emit_einsum(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx, nimble_ln_var *result,
                                   nimble_ln_stmt *body) {
  ein_spec sp;
  if (!ein_parse(c, n, &sp)) return NULL;
  if (sp.out_rank != n->rank) return cp_fail(c, NIMBLE_INTERNAL, "%s: einsum output rank changed", c->prim);
  nimble_ln_expr *at_sym[EIN_LETTERS + CP_MAX_RANK] = {0};
  for (int a = 0; a < n->rank; a++) at_sym[sp.out[a]] = idx[a];
  /* The summed symbols: loop variables, innermost last. */
  int summed[EIN_LETTERS + CP_MAX_RANK], n_sum = 0;
  nimble_ln_var *sv[EIN_LETTERS + CP_MAX_RANK];
  for (int sym = 0; sym < EIN_LETTERS + sp.ell_rank; sym++) {
    if (!sp.used[sym] || sp.in_out[sym]) continue;
    summed[n_sum] = sym;
    sv[n_sum] = cp_var(c, "s", NIMBLE_LN_I64);
    at_sym[sym] = nimble_ln_ref(c->A, sv[n_sum]);
    n_sum++;
  }
  nimble_ln_type_t at = cp_acc_type(n->type);
  nimble_ln_expr *prod = NULL;
  for (int i = 0; i < sp.n_in; i++) {
    cp_node *x = n->in[i];
    nimble_ln_expr *xi[CP_MAX_RANK];
    for (int a = 0; a < x->rank; a++) {
      int sym = sp.dims[i][a];
      xi[a] = at_sym[sym];
      if (sym >= EIN_LETTERS) {
        /* A broadcast ellipsis dim of extent 1 reads index 0. */
        nimble_ln_expr *full = ein_extent(c, n, &sp, sym);
        int64_t v;
        if (cp_const_i(x->ext[a], &v) && v == 1) xi[a] = cp_i(c, 0);
        else if (!cp_same(x->ext[a], full))
          xi[a] = nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_EQ, x->ext[a], cp_i(c, 1)), cp_i(c, 0), xi[a]);
      }
    }
    nimble_ln_expr *v = cp_convert(c, cp_value(c, x, xi), at);
    prod = prod ? nimble_ln_binary(c->A, NIMBLE_LN_MUL, prod, v) : v;
  }
  if (!prod) return NULL;
  nimble_ln_var *acc = cp_var(c, "acc", at);
  nimble_ln_stmt *loop = nimble_ln_assign(c->A, acc, nimble_ln_binary(c->A, NIMBLE_LN_ADD, nimble_ln_ref(c->A, acc), prod));
  for (int k = n_sum - 1; k >= 0; k--) {
    bool vec = k == n_sum - 1 && c->opt.vector_width > 1;
    loop = cp_for(c, sv[k], ein_extent(c, n, &sp, summed[k]), vec ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL,
                  vec ? c->opt.vector_width : 0, loop);
  }
  return nimble_ln_decl(c->A, acc, cp_const_of(c, at, 0),
                        nimble_ln_seq2(c->A, loop, nimble_ln_let(c->A, result, cp_convert(c, nimble_ln_ref(c->A, acc), n->type), body)));
}

/* Dense's C input added in place to alpha op(A) op(B) in the output:
 * out[i, j] += beta * C[broadcast (i, j)], rows in parallel tasks, the row
 * vectorized. */
static nimble_ln_stmt *gemm_add_c(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  nimble_ln_var *v[2] = {cp_var(c, "i", NIMBLE_LN_I64), cp_var(c, "j", NIMBLE_LN_I64)};
  nimble_ln_expr *idx[2] = {nimble_ln_ref(c->A, v[0]), nimble_ln_ref(c->A, v[1])}, *ci[2];
  cp_broadcast_index(c, n->in[2], n, idx, ci);
  nimble_ln_expr *cv = cp_value(c, n->in[2], ci);
  double beta = cp_attr_float(n, "beta");
  if (beta != 1.0) cv = nimble_ln_binary(c->A, NIMBLE_LN_MUL, cv, nimble_ln_f32(c->A, beta));
  nimble_ln_expr *at = nimble_ln_flat_index(c->A, o, idx);
  nimble_ln_stmt *st = nimble_ln_store(c->A, o, at, nimble_ln_binary(c->A, NIMBLE_LN_ADD, nimble_ln_load(c->A, o, at), cv));
  bool vec = c->opt.vector_width > 1;
  nimble_ln_stmt *row = cp_for(c, v[1], n->ext[1], vec ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vec ? c->opt.vector_width : 0, st);
  nimble_ln_stmt *all = cp_for(c, v[0], n->ext[0], NIMBLE_LN_SERIAL, 0, row);
  if (all && c->opt.parallel) all = nimble_ln_chunk(c->A, all, cp_rows_per_task(c, n->ext[0], n->ext[1]));
  return all;
}

/* C = op(A) op(B) through env->sgemm into the output, when both operands
 * are f32 parameters. NULL when not applicable.
 *
 * - dense, 2-D matmul: one call (dense's transA/transB become sgemm's);
 *   dense's C input (a bias) is then added in place (gemm_add_c).
 * - matmul with a 2-D B and an A of rank r > 2: A's leading axes fold into
 *   the rows (A is C-contiguous, so [b..., m, k] is [b*...*m, k]), one call.
 * - other batched matmuls (both operands of rank >= 2, batch axes equal or
 *   broadcast from 1): a loop over the result's batch axes, one call per
 *   batch matrix, with element offsets into A, B and the output; the loop is
 *   chunked into parallel tasks.
 * Vector operands (rank 1) keep the own loops. The caller guards the whole
 * statement with has_sgemm() and m, n, k > 0 (cp_gemm_desc gives them). */
nimble_ln_stmt *cp_gemm_sgemm(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  cp_node *a = n->in[0], *b = n->in[1];
  bool dense = strcmp(n->op->name, "dense") == 0;
  if (!dense && strcmp(n->op->name, "matmul") != 0) return NULL;
  if (a->kind != CP_PARAM || b->kind != CP_PARAM || a->rank < 2 || b->rank < 2) return NULL;
  if (dense ? a->rank != 2 || b->rank != 2 || n->n_in > 3 : n->n_in != 2) return NULL;
  if (o->rank != n->rank || o->dtype != NIMBLE_LN_F32 || a->type != NIMBLE_LN_F32 || b->type != NIMBLE_LN_F32)
    return NULL;
  int ra = a->rank, rb = b->rank, R = n->rank, batch = R - 2;
  bool ta = dense && cp_attr_int(n, "transA") != 0, tb = dense && cp_attr_int(n, "transB") != 0;
  nimble_ln_sgemm_desc_t d;
  memset(&d, 0, sizeof d);
  d.trans_a = ta;
  d.trans_b = tb;
  d.m = n->ext[R - 2];
  d.n = n->ext[R - 1];
  d.k = a->ext[ta ? ra - 2 : ra - 1];
  d.alpha = dense ? (float)cp_attr_float(n, "alpha") : 1.0f;
  d.beta = 0.0f;
  d.a = a->param;
  d.b = b->param;
  d.c = o;
  d.a_offset = d.b_offset = d.c_offset = cp_i(c, 0);
  d.lda = cp_max(c, a->ext[ra - 1], cp_i(c, 1));
  d.ldb = cp_max(c, b->ext[rb - 1], cp_i(c, 1));
  d.ldc = cp_max(c, n->ext[R - 1], cp_i(c, 1));
  if (rb == 2) {
    /* No batch in B (also dense): A's batch axes are more rows. */
    d.m = cp_product(c, n->ext, 0, R - 1);
    nimble_ln_stmt *call = nimble_ln_sgemm(c->A, &d);
    if (n->n_in == 3 && call) call = nimble_ln_seq2(c->A, call, gemm_add_c(c, n, o));
    return call;
  }
  /* One call per batch matrix: t runs over the result's batch matrices,
   * its index along batch axis x is (t / (extents after x)) % extent. */
  nimble_ln_var *t = cp_var(c, "bt", NIMBLE_LN_I64);
  nimble_ln_expr *tr = nimble_ln_ref(c->A, t);
  nimble_ln_expr *aoff = cp_i(c, 0), *boff = cp_i(c, 0);
  for (int x = 0; x < batch; x++) {
    nimble_ln_expr *ix = nimble_ln_binary(c->A, NIMBLE_LN_REM, cp_div(c, tr, cp_product(c, n->ext, x + 1, batch)), n->ext[x]);
    int xa = x - (batch - (ra - 2)), xb = x - (batch - (rb - 2));
    if (xa >= 0) aoff = cp_add(c, cp_mul(c, aoff, a->ext[xa]), batch_index(c, a->ext[xa], n->ext[x], ix));
    if (xb >= 0) boff = cp_add(c, cp_mul(c, boff, b->ext[xb]), batch_index(c, b->ext[xb], n->ext[x], ix));
  }
  d.a_offset = cp_mul(c, aoff, cp_mul(c, a->ext[ra - 2], a->ext[ra - 1]));
  d.b_offset = cp_mul(c, boff, cp_mul(c, b->ext[rb - 2], b->ext[rb - 1]));
  d.c_offset = cp_mul(c, tr, cp_mul(c, n->ext[R - 2], n->ext[R - 1]));
  nimble_ln_expr *count = cp_product(c, n->ext, 0, batch);
  nimble_ln_stmt *body = cp_for(c, t, count, NIMBLE_LN_SERIAL, 0, nimble_ln_sgemm(c->A, &d));
  if (body && c->opt.parallel)
    body = nimble_ln_chunk(c->A, body, cp_rows_per_task(c, count, cp_mul(c, cp_mul(c, d.m, d.n), d.k)));
  return body;
}

/* root = multiply(n, s) or multiply(s, n) for a finite, nonzero f32
 * scalar constant s, or divide(n, s) for a power of two s (whose inverse
 * is exact): *scale gets the factor C is multiplied by. */
static bool scalar_factor(const cp_node *n, const cp_node *root, float *scale) {
  if (!root || root->kind != CP_CALL || root->n_in != 2 || root->type != NIMBLE_LN_F32) return false;
  bool mul = !strcmp(root->op->name, "multiply"), div = !strcmp(root->op->name, "divide");
  if (!mul && !div) return false;
  const cp_node *k = root->in[0] == n ? root->in[1] : mul && root->in[1] == n ? root->in[0] : NULL;
  if (!k || k == n || k->kind != CP_CONST || k->type != NIMBLE_LN_F32 || !k->cval ||
      k->cval->kind != NIMBLE_LN_E_CONST_F)
    return false;
  double v = k->cval->f;
  if (!isfinite(v) || v == 0.0) return false;
  if (div) {
    int e;
    if (frexp(fabs(v), &e) != 0.5) return false; /* not a power of two */
    v = 1.0 / v;
  }
  if ((double)(float)v != v || !isfinite((float)v)) return false;
  *scale = (float)v;
  return true;
}

nimble_ln_stmt *cp_gemm_sgemm_scaled(cp_ctx *c, cp_node *n, cp_node *root, nimble_ln_param *o) {
  float scale;
  if (!scalar_factor(n, root, &scale)) return NULL;
  nimble_ln_stmt *s = cp_gemm_sgemm(c, n, o);
  /* The statement is this call's own, so its descriptor may be changed. */
  nimble_ln_sgemm_desc_t *d = (nimble_ln_sgemm_desc_t *)cp_gemm_desc(s);
  /* Only a lone product (no bias added after it) with alpha 1. */
  if (!d || s->kind == NIMBLE_LN_S_SEQ || d->alpha != 1.0f) return NULL;
  d->alpha = scale;
  return s;
}

/* A 1-D f32 parameter (a bias over C's columns), or NULL. */
static cp_node *col_bias_param(cp_node *x) {
  return x && x->kind == CP_PARAM && x->param && x->type == NIMBLE_LN_F32 && x->rank == 1 ? x : NULL;
}

nimble_ln_stmt *cp_gemm_sgemm_epilogue(cp_ctx *c, cp_node *n, cp_node *root, nimble_ln_param *o,
                                       const nimble_ln_sgemm_desc_t *base, nimble_ln_expr **cond) {
  /* One call over all of C (B 2-D: cp_gemm_sgemm's single-call form),
   * alpha 1, and something to fold. */
  if (!root || root == n || !base || n->in[1]->rank != 2 || base->alpha != 1.0f) return NULL;
  cp_node *cb = NULL, *res = NULL;
  if (n->n_in == 3) { /* dense's C input: a column bias when 1-D and beta 1 */
    cb = col_bias_param(n->in[2]);
    if (!cb || cp_attr_float(n, "beta") != 1.0) return NULL;
  }
  float lo, hi;
  cp_node *mid = cp_clamp_operand(root, &lo, &hi);
  /* add(add(n, bias), residual), add(n, bias), add(n, residual): the
   * bias 1-D over the columns, the residual a parameter of C's shape. */
  for (int depth = 0; depth < 2 && mid && mid != n; depth++) {
    if (mid->kind != CP_CALL || strcmp(mid->op->name, "add") || mid->n_in != 2 || mid->type != NIMBLE_LN_F32)
      return NULL;
    cp_node *x = mid->in[0], *y = mid->in[1];
    cp_node *inner = NULL, *other = NULL;
    if (x == n || (x->kind == CP_CALL && y->kind == CP_PARAM)) inner = x, other = y;
    else if (y == n || (y->kind == CP_CALL && x->kind == CP_PARAM)) inner = y, other = x;
    if (!inner || other == n) return NULL;
    if (inner == n && !cb && col_bias_param(other)) cb = other;
    else if (!res && cp_is_residual(other, o)) res = other;
    else return NULL;
    mid = inner;
  }
  if (mid != n) return NULL;
  nimble_ln_sgemm_desc_t d = *base;
  d.epilogue = 1;
  d.lo = lo;
  d.hi = hi;
  /* Run-time conditions beyond the caller's: the bias as long as a row of
   * C, the residual of C's shape (else broadcasting: the other path). */
  nimble_ln_expr *ok = nimble_ln_has_sgemm_epilogue(c->A);
  if (cb) {
    d.col_bias = cb->param;
    d.col_bias_offset = cp_i(c, 0);
    ok = nimble_ln_binary(c->A, NIMBLE_LN_AND, ok,
                          nimble_ln_binary(c->A, NIMBLE_LN_EQ, nimble_ln_shape(c->A, cb->param, 0), d.n));
  }
  if (res) {
    d.residual = res->param;
    d.residual_offset = cp_i(c, 0);
    d.ldr = d.ldc;
    ok = cp_same_shape(c, ok, res->param, o, o->rank);
  }
  nimble_ln_stmt *call = nimble_ln_sgemm(c->A, &d);
  if (call) *cond = ok;
  return call;
}

/* The own loops for what cp_gemm_sgemm covers when B is stored [k, n]
 * (dense without transposes, matmul with a 2-D B) on a vectorizing target:
 * per row r of C, C[r, :] = 0, then for each p, C[r, :] += alpha A[r, p]
 * B[p, :], the row vectorized. The generic nest computes each C[r, j] as
 * a dot product down a column of B, a stride of n floats per step (~100x
 * slower at [128, 128] x [128, 512], docs/codegen.md). Rows go to parallel
 * tasks; dense's C input is added in place after. NULL when not
 * applicable (also on the GPU, whose thread mapping wants the generic
 * nest's one thread per element). */
nimble_ln_stmt *cp_gemm_rows(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  int vw = c->opt.vector_width > 1 ? c->opt.vector_width : 0;
  if (!vw) return NULL;
  cp_node *a = n->in[0], *b = n->in[1];
  bool dense = strcmp(n->op->name, "dense") == 0;
  if (!dense && strcmp(n->op->name, "matmul") != 0) return NULL;
  if (a->kind != CP_PARAM || b->kind != CP_PARAM || a->rank < 2 || b->rank != 2) return NULL;
  if (dense ? a->rank != 2 || n->n_in > 3 : n->n_in != 2) return NULL;
  if (dense && (cp_attr_int(n, "transA") != 0 || cp_attr_int(n, "transB") != 0)) return NULL;
  if (o->rank != n->rank || o->dtype != NIMBLE_LN_F32 || a->type != NIMBLE_LN_F32 || b->type != NIMBLE_LN_F32)
    return NULL;
  int R = n->rank, ra = a->rank;
  nimble_ln_expr *M = cp_product(c, n->ext, 0, R - 1), *N = n->ext[R - 1], *K = a->ext[ra - 1];
  double alpha = dense ? cp_attr_float(n, "alpha") : 1.0;
  nimble_ln_var *r = cp_var(c, "r", NIMBLE_LN_I64), *j = cp_var(c, "j", NIMBLE_LN_I64),
                *p = cp_var(c, "p", NIMBLE_LN_I64), *j2 = cp_var(c, "j", NIMBLE_LN_I64),
                *av = cp_var(c, "av", NIMBLE_LN_F32);
  nimble_ln_expr *crow = cp_mul(c, nimble_ln_ref(c->A, r), N);
  nimble_ln_stmt *zero = cp_for(c, j, N, NIMBLE_LN_VECTORIZED, vw,
                                nimble_ln_store(c->A, o, cp_add(c, crow, nimble_ln_ref(c->A, j)), nimble_ln_f32(c->A, 0)));
  nimble_ln_expr *at = cp_add(c, crow, nimble_ln_ref(c->A, j2));
  nimble_ln_expr *bv = nimble_ln_load(c->A, b->param, cp_add(c, cp_mul(c, nimble_ln_ref(c->A, p), N), nimble_ln_ref(c->A, j2)));
  nimble_ln_stmt *axpy = cp_for(
      c, j2, N, NIMBLE_LN_VECTORIZED, vw,
      nimble_ln_store(c->A, o, at,
                      nimble_ln_binary(c->A, NIMBLE_LN_ADD, nimble_ln_load(c->A, o, at),
                                       nimble_ln_binary(c->A, NIMBLE_LN_MUL, nimble_ln_ref(c->A, av), bv))));
  nimble_ln_expr *aval = nimble_ln_load(c->A, a->param, cp_add(c, cp_mul(c, nimble_ln_ref(c->A, r), K), nimble_ln_ref(c->A, p)));
  if (alpha != 1.0) aval = nimble_ln_binary(c->A, NIMBLE_LN_MUL, aval, nimble_ln_f32(c->A, alpha));
  nimble_ln_stmt *acc = cp_for(c, p, K, NIMBLE_LN_SERIAL, 0, nimble_ln_let(c->A, av, aval, axpy));
  nimble_ln_stmt *rows = cp_for(c, r, M, NIMBLE_LN_SERIAL, 0, nimble_ln_seq2(c->A, zero, acc));
  if (rows && c->opt.parallel) rows = nimble_ln_chunk(c->A, rows, cp_rows_per_task(c, M, cp_mul(c, N, K)));
  if (rows && n->n_in == 3) rows = nimble_ln_seq2(c->A, rows, gemm_add_c(c, n, o));
  return rows;
}

/* The sgemm call inside what cp_gemm_sgemm returned (its m, n and k do not
 * depend on the batch loops). */
const nimble_ln_sgemm_desc_t *cp_gemm_desc(const nimble_ln_stmt *s) {
  while (s && s->kind != NIMBLE_LN_S_SGEMM)
    s = s->kind == NIMBLE_LN_S_FOR || s->kind == NIMBLE_LN_S_LET ? s->body
        : s->kind == NIMBLE_LN_S_SEQ && s->n_stmts > 0 ? s->stmts[0]
                                                      : NULL;
  return s ? &s->sgemm : NULL;
}

/* ---- conv2d and pooling ---- */

typedef struct window {
  int64_t k[2], s[2], d[2], p[4];
} window;

static bool ints2(cp_ctx *c, cp_node *n, const char *name, size_t want, int64_t dflt, int64_t *out) {
  size_t got;
  const int64_t *v = cp_attr_ints(n, name, &got);
  if (got == 0) {
    for (size_t i = 0; i < want; i++) out[i] = dflt;
    return true;
  }
  if (got != want) {
    cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: '%s' needs %zu values, got %zu", n->op->name, name, want, got);
    return false;
  }
  memcpy(out, v, want * sizeof *out);
  return true;
}

static bool window_of(cp_ctx *c, cp_node *n, bool pool, window *w) {
  if (pool && !ints2(c, n, "kernel_shape", 2, 1, w->k)) return false;
  if (!ints2(c, n, "strides", 2, 1, w->s) || !ints2(c, n, "dilations", 2, 1, w->d) ||
      !ints2(c, n, "pads", 4, 0, w->p))
    return false;
  for (int i = 0; i < 2; i++)
    if (w->s[i] <= 0 || w->d[i] <= 0 || w->p[i] < 0 || w->p[i + 2] < 0) {
      cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: strides and dilations must be positive, pads non-negative",
              n->op->name);
      return false;
    }
  return true;
}

static nimble_ln_expr *out_extent(cp_ctx *c, nimble_ln_expr *in, nimble_ln_expr *k, const window *w, int i,
                                  bool ceil_mode, const char *what) {
  nimble_ln_expr *span = cp_sub(c, cp_add(c, in, cp_i(c, w->p[i] + w->p[i + 2] - 1)),
                                cp_mul(c, cp_i(c, w->d[i]), cp_sub(c, k, cp_i(c, 1))));
  cp_check(c, nimble_ln_cast(c->A, NIMBLE_LN_I64, nimble_ln_binary(c->A, NIMBLE_LN_GE, span, cp_i(c, 0))),
           "%s: the window does not fit spatial axis %d", what, i);
  if (ceil_mode) span = cp_add(c, span, cp_i(c, w->s[i] - 1));
  return cp_add(c, cp_div(c, span, cp_i(c, w->s[i])), cp_i(c, 1));
}

static nimble_status_t shape_conv2d(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0], *wt = n->in[1];
  window w;
  if (x->rank != 4 || wt->rank != 4) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "conv2d takes rank-4 tensors");
  if (!numeric(x->type) || wt->type != x->type)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "conv2d on %s and %s", nimble_dtype_name(x->dtype),
                              nimble_dtype_name(wt->dtype));
  copy_type(n, x);
  n->rank = 4;
  if (!window_of(c, n, false, &w)) return nimble_ok();
  int64_t g = cp_attr_int(n, "groups");
  if (g < 1) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "conv2d: groups %lld", (long long)g);
  cp_check(c, cp_eq(c, x->ext[1], cp_mul(c, wt->ext[1], cp_i(c, g))), "conv2d: input channels != weight channels * groups");
  cp_check(c, cp_eq(c, cp_rem(c, wt->ext[0], cp_i(c, g)), cp_i(c, 0)), "conv2d: output channels not divisible by groups");
  n->ext[0] = x->ext[0];
  n->ext[1] = wt->ext[0];
  for (int i = 0; i < 2; i++) n->ext[2 + i] = out_extent(c, x->ext[2 + i], wt->ext[2 + i], &w, i, false, "conv2d");
  if (n->n_in == 3) {
    if (n->in[2]->rank != 1) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "conv2d: bias must be 1-D");
    cp_check(c, cp_eq(c, n->in[2]->ext[0], wt->ext[0]), "conv2d: bias length != output channels");
  }
  return nimble_ok();
}

static nimble_ln_stmt *emit_conv2d(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx, nimble_ln_var *result,
                                   nimble_ln_stmt *body) {
  cp_node *x = n->in[0], *wt = n->in[1];
  window w;
  if (!window_of(c, n, false, &w)) return NULL;
  int64_t g = cp_attr_int(n, "groups");
  nimble_ln_expr *cg = wt->ext[1];                           /* input channels per group */
  nimble_ln_expr *og = cp_div(c, wt->ext[0], cp_i(c, g));    /* output channels per group */
  nimble_ln_expr *grp = g == 1 ? cp_i(c, 0) : cp_div(c, idx[1], cp_max(c, og, cp_i(c, 1)));
  nimble_ln_var *ci = cp_var(c, "ci", NIMBLE_LN_I64), *kh = cp_var(c, "kh", NIMBLE_LN_I64),
                *kw = cp_var(c, "kw", NIMBLE_LN_I64), *acc = cp_var(c, "acc", cp_acc_type(n->type));
  nimble_ln_type_t at = cp_acc_type(n->type);
  nimble_ln_expr *pos[2];
  nimble_ln_expr *kk[2] = {nimble_ln_ref(c->A, kh), nimble_ln_ref(c->A, kw)};
  nimble_ln_expr *inside = NULL;
  for (int i = 0; i < 2; i++) {
    pos[i] = cp_add(c, cp_sub(c, cp_mul(c, idx[2 + i], cp_i(c, w.s[i])), cp_i(c, w.p[i])),
                    cp_mul(c, kk[i], cp_i(c, w.d[i])));
    nimble_ln_expr *in = band(c, nimble_ln_binary(c->A, NIMBLE_LN_GE, pos[i], cp_i(c, 0)), lt(c, pos[i], x->ext[2 + i]));
    if (w.p[i] || w.p[i + 2]) inside = inside ? band(c, inside, in) : in;
    pos[i] = clampi(c, pos[i], cp_sub(c, x->ext[2 + i], cp_i(c, 1)));
  }
  nimble_ln_expr *xi[4] = {idx[0], cp_add(c, cp_mul(c, grp, cg), nimble_ln_ref(c->A, ci)), pos[0], pos[1]};
  nimble_ln_expr *wi[4] = {idx[1], nimble_ln_ref(c->A, ci), kk[0], kk[1]};
  nimble_ln_expr *xv = cp_value(c, x, xi);
  if (inside && xv) xv = nimble_ln_select(c->A, inside, xv, cp_const_of(c, xv->type, 0));
  nimble_ln_expr *prod = acc_mul(c, at, xv, cp_value(c, wt, wi));
  nimble_ln_stmt *loop =
      nimble_ln_assign(c->A, acc, nimble_ln_binary(c->A, NIMBLE_LN_ADD, nimble_ln_ref(c->A, acc), prod));
  loop = cp_for(c, kw, wt->ext[3], NIMBLE_LN_SERIAL, 0, loop);
  loop = cp_for(c, kh, wt->ext[2], NIMBLE_LN_SERIAL, 0, loop);
  loop = cp_for(c, ci, cg, NIMBLE_LN_SERIAL, 0, loop);
  nimble_ln_expr *fin = nimble_ln_ref(c->A, acc);
  if (n->n_in == 3) {
    nimble_ln_expr *bi[1] = {idx[1]};
    fin = nimble_ln_binary(c->A, NIMBLE_LN_ADD, fin, cp_convert(c, cp_value(c, n->in[2], bi), at));
  }
  return nimble_ln_decl(c->A, acc, cp_const_of(c, at, 0),
                        nimble_ln_seq2(c->A, loop, nimble_ln_let(c->A, result, cp_convert(c, fin, n->type), body)));
}

static nimble_status_t shape_pool(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  window w;
  if (x->rank != 4) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s takes a rank-4 tensor", n->op->name);
  /* max pooling orders any numbers; averages need floats. */
  bool ok = !strcmp(n->op->name, "max_pool2d") ? numeric(x->type) : nimble_ln_type_is_float(x->type);
  if (!ok) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "%s on %s", n->op->name, nimble_dtype_name(x->dtype));
  copy_type(n, x);
  n->rank = 4;
  n->ext[0] = x->ext[0];
  n->ext[1] = x->ext[1];
  if (!strcmp(n->op->name, "global_avg_pool2d")) {
    n->ext[2] = n->ext[3] = cp_i(c, 1);
    return nimble_ok();
  }
  if (!window_of(c, n, true, &w)) return nimble_ok();
  bool ceil_mode = cp_attr_int(n, "ceil_mode") != 0;
  for (int i = 0; i < 2; i++)
    n->ext[2 + i] = out_extent(c, x->ext[2 + i], cp_i(c, w.k[i]), &w, i, ceil_mode, n->op->name);
  return nimble_ok();
}

/* Global average pooling of an input held in memory: the plane's sum over
 * one flat run of H*W values, as `mean` sums (a vectorized loop, which
 * lets LLVM keep partial sums per lane), over H*W. The window form below
 * summed the plane in one dependent chain of scalar adds with a count
 * beside it (squeezenet's 1000 planes of 13x13: 65 us, ORT 22); it stays
 * for an input computed inline. */
static nimble_ln_stmt *emit_global_avg(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx, nimble_ln_var *result,
                                       nimble_ln_stmt *body) {
  cp_node *x = n->in[0];
  nimble_ln_type_t at = cp_acc_type(n->type);
  nimble_ln_var *acc = cp_var(c, "acc", at), *p = cp_var(c, "p", NIMBLE_LN_I64);
  nimble_ln_expr *ra = nimble_ln_ref(c->A, acc);
  int vw = c->opt.vector_width > 1 ? c->opt.vector_width : 0;
  nimble_ln_expr *HW = cp_mul(c, x->ext[2], x->ext[3]);
  nimble_ln_expr *plane = cp_mul(c, cp_add(c, cp_mul(c, idx[0], x->ext[1]), idx[1]), HW);
  nimble_ln_expr *xv = cp_convert(c, cp_value_flat(c, x, cp_add(c, plane, nimble_ln_ref(c->A, p))), at);
  nimble_ln_stmt *loop = cp_for(c, p, HW, vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw,
                                nimble_ln_assign(c->A, acc, nimble_ln_binary(c->A, NIMBLE_LN_ADD, ra, xv)));
  /* An empty plane averages to 0, as the window form's max(count, 1). */
  nimble_ln_expr *den = nimble_ln_binary(c->A, NIMBLE_LN_MAX, cp_convert(c, HW, at), cp_const_of(c, at, 1));
  nimble_ln_expr *fin = cp_convert(c, nimble_ln_binary(c->A, NIMBLE_LN_DIV, ra, den), n->type);
  return nimble_ln_decl(c->A, acc, cp_const_of(c, at, 0),
                        nimble_ln_seq2(c->A, loop, nimble_ln_let(c->A, result, fin, body)));
}

static nimble_ln_stmt *emit_pool(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx, nimble_ln_var *result,
                                 nimble_ln_stmt *body) {
  cp_node *x = n->in[0];
  bool global = !strcmp(n->op->name, "global_avg_pool2d"), is_max = !strcmp(n->op->name, "max_pool2d");
  window w;
  memset(&w, 0, sizeof w);
  if (global) {
    w.s[0] = w.s[1] = w.d[0] = w.d[1] = 1;
  } else if (!window_of(c, n, true, &w)) {
    return NULL;
  }
  if (global && x->kind == CP_PARAM && x->param) return emit_global_avg(c, n, idx, result, body);
  bool include_pad = !global && !is_max && cp_attr_int(n, "count_include_pad") != 0;
  nimble_ln_var *kh = cp_var(c, "kh", NIMBLE_LN_I64), *kw = cp_var(c, "kw", NIMBLE_LN_I64);
  /* max: in the input's type (exact, NaN propagates); averages: sums and
   * counts in the accumulation type. */
  nimble_ln_type_t at = is_max ? n->type : cp_acc_type(n->type);
  nimble_ln_var *acc = cp_var(c, "acc", at), *cnt = cp_var(c, "cnt", at);
  nimble_ln_expr *kk[2] = {nimble_ln_ref(c->A, kh), nimble_ln_ref(c->A, kw)};
  nimble_ln_expr *pos[2], *inside = NULL, *counted = NULL;
  for (int i = 0; i < 2; i++) {
    pos[i] = cp_add(c, cp_sub(c, cp_mul(c, idx[2 + i], cp_i(c, w.s[i])), cp_i(c, w.p[i])),
                    cp_mul(c, kk[i], cp_i(c, w.d[i])));
    nimble_ln_expr *in = band(c, nimble_ln_binary(c->A, NIMBLE_LN_GE, pos[i], cp_i(c, 0)), lt(c, pos[i], x->ext[2 + i]));
    inside = inside ? band(c, inside, in) : in;
    /* count_include_pad counts the padded area, not what ceil_mode adds. */
    nimble_ln_expr *inp = band(c, nimble_ln_binary(c->A, NIMBLE_LN_GE, pos[i], cp_i(c, -w.p[i])),
                               lt(c, pos[i], cp_add(c, x->ext[2 + i], cp_i(c, w.p[i + 2]))));
    counted = counted ? band(c, counted, inp) : inp;
    pos[i] = clampi(c, pos[i], cp_sub(c, x->ext[2 + i], cp_i(c, 1)));
  }
  nimble_ln_expr *xi[4] = {idx[0], idx[1], pos[0], pos[1]};
  nimble_ln_expr *xv = cp_convert(c, cp_value(c, x, xi), at);
  nimble_ln_expr *ra = nimble_ln_ref(c->A, acc);
  nimble_ln_stmt *upd;
  if (is_max) {
    upd = nimble_ln_assign(c->A, acc, nimble_ln_select(c->A, inside, nimble_ln_binary(c->A, NIMBLE_LN_MAX, ra, xv), ra));
  } else {
    upd = nimble_ln_seq2(
        c->A,
        nimble_ln_assign(c->A, acc, nimble_ln_binary(c->A, NIMBLE_LN_ADD, ra,
                                                      nimble_ln_select(c->A, inside, xv, cp_const_of(c, at, 0)))),
        nimble_ln_assign(c->A, cnt,
                         nimble_ln_binary(c->A, NIMBLE_LN_ADD, nimble_ln_ref(c->A, cnt),
                                          nimble_ln_select(c->A, include_pad ? counted : inside,
                                                           cp_const_of(c, at, 1), cp_const_of(c, at, 0)))));
  }
  nimble_ln_expr *k0 = global ? x->ext[2] : cp_i(c, w.k[0]), *k1 = global ? x->ext[3] : cp_i(c, w.k[1]);
  nimble_ln_stmt *loop = cp_for(c, kw, k1, NIMBLE_LN_SERIAL, 0, upd);
  loop = cp_for(c, kh, k0, NIMBLE_LN_SERIAL, 0, loop);
  nimble_ln_expr *fin = is_max ? ra : nimble_ln_binary(c->A, NIMBLE_LN_DIV, ra,
                                                       nimble_ln_binary(c->A, NIMBLE_LN_MAX, nimble_ln_ref(c->A, cnt),
                                                                        cp_const_of(c, at, 1)));
  nimble_ln_stmt *s = nimble_ln_seq2(c->A, loop, nimble_ln_let(c->A, result, cp_convert(c, fin, n->type), body));
  s = nimble_ln_decl(c->A, cnt, cp_const_of(c, at, 0), s);
  return nimble_ln_decl(c->A, acc, is_max ? cp_type_lowest(c, at) : cp_const_of(c, at, 0), s);
}

/* ---- softmax, log_softmax, layer_norm: row anchors ---- */

static nimble_status_t shape_same_f32(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  if (!nimble_ln_type_is_float(x->type)) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "%s on %s", n->op->name, nimble_dtype_name(x->dtype));
  copy_type(n, x);
  n->rank = x->rank;
  for (int a = 0; a < x->rank; a++) n->ext[a] = x->ext[a];
  if (!strcmp(n->op->name, "layer_norm"))
    for (int i = 1; i < n->n_in; i++)
      if (n->in[i]->rank > n->rank) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "layer_norm: gamma/beta rank");
  return nimble_ok();
}

/* Loops over the axes not in [from, to) around body, outermost chunked
 * (cp_parallel_outer: a leading batch of 1 is not what gets split). */
static nimble_ln_stmt *outer_loops(cp_ctx *c, cp_node *n, nimble_ln_var **v, int from, int to,
                                   nimble_ln_expr *row_work, nimble_ln_stmt *body) {
  nimble_ln_var *ov[CP_MAX_RANK];
  nimble_ln_expr *oe[CP_MAX_RANK];
  int k = 0;
  for (int a = 0; a < n->rank; a++) {
    if (a >= from && a < to) continue;
    ov[k] = v[a];
    oe[k++] = n->ext[a];
  }
  return cp_parallel_outer(c, ov, oe, k, row_work, body);
}

/* Nested loops over axes [from, to) around body; the innermost vectorized
 * when it is the last axis. */
static nimble_ln_stmt *inner_loops(cp_ctx *c, cp_node *n, nimble_ln_var **v, int from, int to, bool vec,
                                   nimble_ln_stmt *body) {
  for (int a = to - 1; a >= from; a--) {
    bool vv = vec && a == n->rank - 1 && c->opt.vector_width > 1;
    body = cp_for(c, v[a], n->ext[a], vv ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vv ? c->opt.vector_width : 0, body);
  }
  return body;
}

/* m = maxnum over axis ax of n's input (the last axis). Four groups of
 * eight lanes over blocks of 32 elements (lane g*8 + l takes element
 * j*32 + g*8 + l), then blocks of 8 in the first group, the lanes folded
 * into m, then the tail: the SLP vectorizer turns each group into one
 * vector maximum, and four of them are independent chains (one chain of
 * 8 lanes waited on its own maximum, compare and blend every step: a
 * third of a 128-wide softmax row). */
static nimble_ln_stmt *row_max_lanes(cp_ctx *c, cp_node *n, nimble_ln_var **v, nimble_ln_expr **idx, int ax,
                                     nimble_ln_var *m, nimble_ln_type_t ft) {
  enum { L = 8, G = 4 };
  nimble_ln_expr *ext = n->ext[ax], *big = cp_div(c, ext, cp_i(c, G * L));
  nimble_ln_expr *small_lo = cp_mul(c, big, cp_i(c, G)), *small_hi = cp_div(c, ext, cp_i(c, L));
  nimble_ln_var *j = cp_var(c, "j", NIMBLE_LN_I64), *j2 = cp_var(c, "j", NIMBLE_LN_I64), *lane[G * L];
  nimble_ln_stmt *upd[G * L], *upd8[L];
  nimble_ln_expr *saved = idx[ax];
  for (int l = 0; l < G * L; l++) {
    lane[l] = cp_var(c, "mx", ft);
    idx[ax] = cp_add(c, cp_mul(c, nimble_ln_ref(c->A, j), cp_i(c, G * L)), cp_i(c, l));
    nimble_ln_expr *xl = cp_convert(c, cp_value(c, n->in[0], idx), ft);
    upd[l] = nimble_ln_assign(c->A, lane[l], nimble_ln_binary(c->A, NIMBLE_LN_MAXNUM, nimble_ln_ref(c->A, lane[l]), xl));
  }
  for (int l = 0; l < L; l++) {
    idx[ax] = cp_add(c, cp_mul(c, nimble_ln_ref(c->A, j2), cp_i(c, L)), cp_i(c, l));
    nimble_ln_expr *xl = cp_convert(c, cp_value(c, n->in[0], idx), ft);
    upd8[l] = nimble_ln_assign(c->A, lane[l], nimble_ln_binary(c->A, NIMBLE_LN_MAXNUM, nimble_ln_ref(c->A, lane[l]), xl));
  }
  idx[ax] = saved;
  nimble_ln_stmt *blocks = cp_for(c, j, big, NIMBLE_LN_SERIAL, 0, nimble_ln_seq(c->A, upd, G * L));
  nimble_ln_stmt *blocks8 = nimble_ln_for(c->A, j2, small_lo, small_hi, NIMBLE_LN_SERIAL, 0, nimble_ln_seq(c->A, upd8, L));
  /* The fold as a tree (the groups lane by lane, then halves of the first
   * group, then m): seven dependent maxima where a chain was 32 long.
   * maxnum ignores NaNs and its order: the same m either way. */
  nimble_ln_stmt *fold[(G - 1) * L + L];
  int nf = 0;
  for (int g = 1; g < G; g++)
    for (int l = 0; l < L; l++)
      fold[nf++] = nimble_ln_assign(c->A, lane[l], nimble_ln_binary(c->A, NIMBLE_LN_MAXNUM, nimble_ln_ref(c->A, lane[l]),
                                                                     nimble_ln_ref(c->A, lane[g * L + l])));
  for (int h = L / 2; h >= 1; h /= 2)
    for (int l = 0; l < h; l++)
      fold[nf++] = nimble_ln_assign(c->A, lane[l], nimble_ln_binary(c->A, NIMBLE_LN_MAXNUM, nimble_ln_ref(c->A, lane[l]),
                                                                     nimble_ln_ref(c->A, lane[l + h])));
  fold[nf++] = nimble_ln_assign(c->A, m, nimble_ln_binary(c->A, NIMBLE_LN_MAXNUM, nimble_ln_ref(c->A, m), nimble_ln_ref(c->A, lane[0])));
  nimble_ln_stmt *steps[3] = {blocks, blocks8, nimble_ln_seq(c->A, fold, (size_t)nf)};
  nimble_ln_stmt *body = nimble_ln_seq(c->A, steps, 3);
  for (int l = G * L - 1; l >= 0; l--) body = nimble_ln_decl(c->A, lane[l], cp_type_lowest(c, ft), body);
  /* The last ext % 8 elements. */
  nimble_ln_expr *x = cp_convert(c, cp_value(c, n->in[0], idx), ft);
  nimble_ln_stmt *tail = nimble_ln_for(c->A, v[ax], cp_mul(c, small_hi, cp_i(c, L)), ext, NIMBLE_LN_SERIAL, 0,
                                       nimble_ln_assign(c->A, m, nimble_ln_binary(c->A, NIMBLE_LN_MAXNUM, nimble_ln_ref(c->A, m), x)));
  return nimble_ln_seq2(c->A, body, tail);
}

static nimble_ln_stmt *emit_softmax(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  int ax;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), n->rank, &ax)) return NULL;
  bool lg = !strcmp(n->op->name, "log_softmax");
  nimble_ln_var *v[CP_MAX_RANK];
  nimble_ln_expr *idx[CP_MAX_RANK];
  for (int a = 0; a < n->rank; a++) {
    v[a] = cp_var(c, "i", NIMBLE_LN_I64);
    idx[a] = nimble_ln_ref(c->A, v[a]);
  }
  /* f64 rows in f64; f16/bf16 ones in f32, rounded when stored. */
  nimble_ln_type_t ft = cp_acc_type(n->type);
  nimble_ln_var *m = cp_var(c, "max", ft), *s = cp_var(c, "sum", ft);
  nimble_ln_expr *x = cp_convert(c, cp_value(c, n->in[0], idx), ft);
  nimble_ln_expr *sh = nimble_ln_binary(c->A, NIMBLE_LN_SUB, x, nimble_ln_ref(c->A, m));
  nimble_ln_expr *e = nimble_ln_unary(c->A, NIMBLE_LN_EXP, sh);
  /* The row's maximum ignores NaNs (maxnum, a vectorized reduction; the
   * NaN-propagating max was a serial compare-and-select chain, 3.7 ns per
   * element): a NaN still makes exp(x - max) NaN, so the row's sum and
   * every output of the row are NaN as before. */
  nimble_ln_stmt *maxl = inner_loops(c, n, v, ax, ax + 1, true,
      nimble_ln_assign(c->A, m, nimble_ln_binary(c->A, NIMBLE_LN_MAXNUM, nimble_ln_ref(c->A, m), x)));
  /* Over the last axis, running maxima over consecutive elements
   * (row_max_lanes): independent chains the SLP vectorizer turns into
   * vector maxima (LLVM 16 vectorizes no floating-point max reduction
   * without no-NaN flags, which the C API cannot set on a call), folded
   * into m after, then the tail. */
  if (ax == n->rank - 1 && c->opt.vector_width > 1) maxl = row_max_lanes(c, n, v, idx, ax, m, ft);
  nimble_ln_expr *at = nimble_ln_flat_index(c->A, o, idx);
  nimble_ln_stmt *acc = nimble_ln_assign(c->A, s, nimble_ln_binary(c->A, NIMBLE_LN_ADD, nimble_ln_ref(c->A, s), e));
  nimble_ln_stmt *suml, *wr;
  if (lg) {
    suml = inner_loops(c, n, v, ax, ax + 1, true, acc);
    nimble_ln_expr *val = nimble_ln_binary(c->A, NIMBLE_LN_SUB, sh, nimble_ln_unary(c->A, NIMBLE_LN_LOG, nimble_ln_ref(c->A, s)));
    wr = inner_loops(c, n, v, ax, ax + 1, true, nimble_ln_store(c->A, o, at, cp_convert(c, val, n->type)));
  } else {
    /* exp once: the sum pass stores e into the output, the last pass
     * scales it by 1/sum. The output is written only after the input's
     * row has been read: the max pass reads x alone, and the sum pass
     * reads x[i] before it writes out[i]; an output that is the input
     * itself (the aliased variant) still sees each x[i] before it is
     * overwritten. */
    nimble_ln_stmt *scale;
    nimble_ln_var *r = cp_var(c, "rcp", ft);
    if (ft == n->type) {
      suml = inner_loops(c, n, v, ax, ax + 1, true, nimble_ln_seq2(c->A, nimble_ln_store(c->A, o, at, e), acc));
      scale = inner_loops(c, n, v, ax, ax + 1, true,
          nimble_ln_store(c->A, o, at, nimble_ln_binary(c->A, NIMBLE_LN_MUL, nimble_ln_load(c->A, o, at), nimble_ln_ref(c->A, r))));
    } else {
      /* A half-precision output would round e before the scaling: the
       * last pass computes exp again from x. Each x[i] is still read
       * before out[i] is written, so an aliased output is fine too. */
      suml = inner_loops(c, n, v, ax, ax + 1, true, acc);
      scale = inner_loops(c, n, v, ax, ax + 1, true,
          nimble_ln_store(c->A, o, at, cp_convert(c, nimble_ln_binary(c->A, NIMBLE_LN_MUL, e, nimble_ln_ref(c->A, r)), n->type)));
    }
    wr = nimble_ln_let(c->A, r, nimble_ln_binary(c->A, NIMBLE_LN_DIV, cp_const_of(c, ft, 1), nimble_ln_ref(c->A, s)), scale);
  }
  nimble_ln_stmt *row = nimble_ln_decl(
      c->A, m, cp_type_lowest(c, ft),
      nimble_ln_seq2(c->A, maxl, nimble_ln_decl(c->A, s, cp_const_of(c, ft, 0), nimble_ln_seq2(c->A, suml, wr))));
  return outer_loops(c, n, v, ax, ax + 1, cp_mul(c, n->ext[ax], cp_i(c, 3)), row);
}

static nimble_ln_stmt *emit_layer_norm(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  int ax;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), n->rank, &ax)) return NULL;
  double eps = cp_attr_float(n, "epsilon");
  nimble_ln_var *v[CP_MAX_RANK];
  nimble_ln_expr *idx[CP_MAX_RANK];
  for (int a = 0; a < n->rank; a++) {
    v[a] = cp_var(c, "i", NIMBLE_LN_I64);
    idx[a] = nimble_ln_ref(c->A, v[a]);
  }
  nimble_ln_type_t ft = cp_acc_type(n->type);
  nimble_ln_expr *count = cp_convert(c, cp_product(c, n->ext, ax, n->rank), ft);
  nimble_ln_var *s = cp_var(c, "sum", ft), *q = cp_var(c, "sq", ft);
  nimble_ln_var *mean = cp_var(c, "mean", ft), *rstd = cp_var(c, "rstd", ft);
  nimble_ln_expr *x = cp_convert(c, cp_value(c, n->in[0], idx), ft);
  nimble_ln_stmt *suml = inner_loops(c, n, v, ax, n->rank, true,
      nimble_ln_assign(c->A, s, nimble_ln_binary(c->A, NIMBLE_LN_ADD, nimble_ln_ref(c->A, s), x)));
  nimble_ln_expr *dx = nimble_ln_binary(c->A, NIMBLE_LN_SUB, x, nimble_ln_ref(c->A, mean));
  nimble_ln_stmt *sql = inner_loops(c, n, v, ax, n->rank, true,
      nimble_ln_assign(c->A, q, nimble_ln_binary(c->A, NIMBLE_LN_ADD, nimble_ln_ref(c->A, q),
                                                 nimble_ln_binary(c->A, NIMBLE_LN_MUL, dx, dx))));
  nimble_ln_expr *val = nimble_ln_binary(c->A, NIMBLE_LN_MUL, dx, nimble_ln_ref(c->A, rstd));
  for (int i = 1; i < n->n_in; i++) {
    nimble_ln_expr *gi[CP_MAX_RANK];
    cp_broadcast_index(c, n->in[i], n, idx, gi);
    nimble_ln_expr *gv = cp_convert(c, cp_value(c, n->in[i], gi), ft);
    val = nimble_ln_binary(c->A, i == 1 ? NIMBLE_LN_MUL : NIMBLE_LN_ADD, val, gv);
  }
  for (int i = 1; i < n->n_in; i++)
    for (int a = 0; a < n->in[i]->rank; a++)
      cp_check(c, cp_eq(c, n->in[i]->ext[a], n->ext[n->rank - n->in[i]->rank + a]),
               "layer_norm: %s axis %d differs from the input's", i == 1 ? "gamma" : "beta", a);
  nimble_ln_stmt *wr = inner_loops(c, n, v, ax, n->rank, true,
                                   nimble_ln_store(c->A, o, nimble_ln_flat_index(c->A, o, idx), cp_convert(c, val, n->type)));
  nimble_ln_expr *one = cp_const_of(c, ft, 1);
  nimble_ln_expr *var = nimble_ln_binary(c->A, NIMBLE_LN_DIV, nimble_ln_ref(c->A, q), nimble_ln_binary(c->A, NIMBLE_LN_MAX, count, one));
  nimble_ln_stmt *after_sq = nimble_ln_let(
      c->A, rstd,
      nimble_ln_binary(c->A, NIMBLE_LN_DIV, one,
                       nimble_ln_unary(c->A, NIMBLE_LN_SQRT, nimble_ln_binary(c->A, NIMBLE_LN_ADD, var, cp_const_of(c, ft, eps)))),
      wr);
  nimble_ln_stmt *after_sum = nimble_ln_let(
      c->A, mean,
      nimble_ln_binary(c->A, NIMBLE_LN_DIV, nimble_ln_ref(c->A, s), nimble_ln_binary(c->A, NIMBLE_LN_MAX, count, one)),
      nimble_ln_decl(c->A, q, cp_const_of(c, ft, 0), nimble_ln_seq2(c->A, sql, after_sq)));
  nimble_ln_stmt *row = nimble_ln_decl(c->A, s, cp_const_of(c, ft, 0), nimble_ln_seq2(c->A, suml, after_sum));
  return outer_loops(c, n, v, ax, n->rank, cp_mul(c, cp_product(c, n->ext, ax, n->rank), cp_i(c, 3)), row);
}

/* ---- batch_norm (inference): element-wise given the statistics ---- */

static nimble_status_t shape_batch_norm(cp_ctx *c, cp_node *n) {
  NIMBLE_RETURN_IF_ERROR(shape_same_f32(c, n));
  int ax;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), n->rank, &ax)) return nimble_ok();
  for (int i = 1; i < 5; i++) {
    if (n->in[i]->rank != 1) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "batch_norm: input %d must be 1-D", i);
    cp_check(c, cp_eq(c, n->in[i]->ext[0], n->ext[ax]), "batch_norm: input %d length != channels", i);
  }
  return nimble_ok();
}

static nimble_ln_expr *value_batch_norm(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  int ax;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), n->rank, &ax)) return NULL;
  nimble_ln_expr *ci[1] = {idx[ax]};
  nimble_ln_expr *x = cp_value(c, n->in[0], idx);
  nimble_ln_expr *scale = cp_value(c, n->in[1], ci), *bias = cp_value(c, n->in[2], ci);
  nimble_ln_expr *mean = cp_value(c, n->in[3], ci), *var = cp_value(c, n->in[4], ci);
  nimble_ln_expr *den = nimble_ln_unary(c->A, NIMBLE_LN_SQRT,
                                        nimble_ln_binary(c->A, NIMBLE_LN_ADD, var, cp_const_of(c, var ? var->type : NIMBLE_LN_F32, cp_attr_float(n, "epsilon"))));
  nimble_ln_expr *y = nimble_ln_binary(c->A, NIMBLE_LN_DIV, nimble_ln_binary(c->A, NIMBLE_LN_SUB, x, mean), den);
  return nimble_ln_binary(c->A, NIMBLE_LN_ADD, nimble_ln_binary(c->A, NIMBLE_LN_MUL, y, scale), bias);
}

const cp_def cp_defs_nn[] = {
    {"dense", CP_ANCHOR_POINT, shape_dense, NULL, emit_dense, NULL},
    {"matmul", CP_ANCHOR_POINT, shape_matmul, NULL, emit_matmul, NULL},
    {"einsum", CP_ANCHOR_POINT, shape_einsum, NULL, emit_einsum, NULL},
    {"conv2d", CP_ANCHOR_POINT, shape_conv2d, NULL, emit_conv2d, NULL},
    {"max_pool2d", CP_ANCHOR_POINT, shape_pool, NULL, emit_pool, NULL},
    {"avg_pool2d", CP_ANCHOR_POINT, shape_pool, NULL, emit_pool, NULL},
    {"global_avg_pool2d", CP_ANCHOR_POINT, shape_pool, NULL, emit_pool, NULL},
    {"softmax", CP_ANCHOR_ROW, shape_same_f32, NULL, NULL, emit_softmax},
    {"log_softmax", CP_ANCHOR_ROW, shape_same_f32, NULL, NULL, emit_softmax},
    {"layer_norm", CP_ANCHOR_ROW, shape_same_f32, NULL, NULL, emit_layer_norm},
    {"batch_norm", CP_INJECTIVE, shape_batch_norm, value_batch_norm, NULL, NULL},
};
const int cp_defs_nn_count = (int)(sizeof cp_defs_nn / sizeof cp_defs_nn[0]);
