/* LSTM, GRU and RNN as IR. A float32 LSTM, GRU or RNN is one lstm_scan,
 * gru_scan or rnn_scan (ops/recurrent.c) for all its directions, whose
 * kernel runs every step. Other float types are one
 * recursive global function per direction that walks
 * the time steps (the trip count is the sequence length read at run time
 * with shape_of), with the gates as dense (matrix products) and
 * element-wise operators, so later passes can fuse and plan them. The step
 * function is written as .nir text and parsed: it is fixed apart from its
 * dims, dtype and direction. Both take the input projection of every step
 * as one product before the steps. Outputs follow ONNX: Y [seq, dirs,
 * batch, hidden], Y_h and Y_c [dirs, batch, hidden]. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "import_internal.h"


typedef enum { CELL_LSTM, CELL_GRU, CELL_RNN } cell_kind;

static void dim_text(imp_ctx *c, nimble_dim_t d, char *buf, size_t size) {
  d = imp_resolve(c, d);
  if (d.kind == NIMBLE_DIM_CONST) snprintf(buf, size, "%" PRId64, d.value);
  else snprintf(buf, size, "?");
}

static nimble_status_t check_activations(const nimble_onnx_node *n, cell_kind k, int64_t dirs) {
  const nimble_onnx_attr_t *a = nimble_onnx_node_attr(n, "activations");
  static const char *lstm[] = {"Sigmoid", "Tanh", "Tanh"}, *gru[] = {"Sigmoid", "Tanh"}, *rnn[] = {"Tanh"};
  const char **want = k == CELL_LSTM ? lstm : k == CELL_GRU ? gru : rnn;
  size_t per = k == CELL_LSTM ? 3 : k == CELL_GRU ? 2 : 1;
  if (a) {
    if (a->n_strings != per * (size_t)dirs)
      return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute 'activations' has %zu entries, expected %zu", a->n_strings,
                     per * (size_t)dirs);
    for (size_t i = 0; i < a->n_strings; i++) {
      const char *w = want[i % per];
      if (a->strings[i].size != strlen(w) || strncasecmp((const char *)a->strings[i].data, w, strlen(w)) != 0)
        return imp_err(NIMBLE_UNIMPLEMENTED, "activation '%.*s' is not supported (only the defaults)",
                       (int)a->strings[i].size, (const char *)a->strings[i].data);
    }
  }
  if (nimble_onnx_node_attr(n, "clip")) return imp_err(NIMBLE_UNIMPLEMENTED, "attribute 'clip' is not supported");
  if (nimble_onnx_node_attr(n, "activation_alpha") || nimble_onnx_node_attr(n, "activation_beta"))
    return imp_err(NIMBLE_UNIMPLEMENTED, "activation_alpha/beta are not supported");
  return nimble_ok();
}

static nimble_status_t emit1a(imp_ctx *c, const char *op, imp_val *x, nimble_named_attr_t *at, size_t nat,
                              imp_val **out) {
  return imp_emit(c, op, 1, &x, at, nat, out);
}

static nimble_status_t take_dir(imp_ctx *c, imp_val *x, int64_t d, imp_val **out) {
  imp_val *idx;
  NIMBLE_RETURN_IF_ERROR(imp_scalar(c, NIMBLE_DTYPE_INT64, (double)d, &idx));
  nimble_named_attr_t a = imp_attr_int("axis", 0);
  imp_val *args[2] = {x, idx};
  return imp_emit(c, "take", 2, args, &a, 1, out);
}

static nimble_status_t slice_rows(imp_ctx *c, imp_val *x, int64_t b, int64_t e, imp_val **out) {
  int64_t ax = 0;
  nimble_named_attr_t at[3] = {imp_attr_ints("begin", &b, 1), imp_attr_ints("end", &e, 1), imp_attr_ints("axes", &ax, 1)};
  return emit1a(c, "strided_slice", x, at, 3, out);
}

/* Direction d of x [dirs, ...]: when x is a constant (an initializer), the
 * slice as a constant made here, so no run copies it (and the runtime can
 * pack a constant W for its products once); otherwise take(x, d). */
static nimble_status_t dir_of(imp_ctx *c, imp_val *x, int64_t d, imp_val **out) {
  const nimble_expr *e = x->expr;
  if (e->kind != NIMBLE_EXPR_CONSTANT || e->u.constant.rank < 1 || e->u.constant.dims[0] <= d)
    return take_dir(c, x, d, out);
  size_t per = e->u.constant.num_elements / (size_t)e->u.constant.dims[0];
  size_t es = nimble_dtype_size(e->u.constant.dtype);
  return imp_const(c, e->u.constant.dtype, e->u.constant.rank - 1, e->u.constant.dims + 1,
                   (const char *)e->u.constant.data + (size_t)d * per * es, out);
}

/* Whether the step multiplies h by a recurrent matrix of rows x cols
 * elements of es bytes stored transposed ([H, gates*H], B stored [k, n]):
 * the runtime's matrix-vector product then adds rows of it scaled by h's
 * elements, with no horizontal sum per output, which is faster while the
 * matrix stays in L2 (lstm, 128 x 512 floats: 6.5 -> 5.6 us a step); from
 * L3 the dot products over R's own rows are (lstm2, 2048 x 512 floats: 2-5%
 * faster). So matrices up to 1 MiB are transposed. */
static bool transpose_recurrent(int64_t rows, int64_t cols, size_t es) {
  return (double)rows * (double)cols * (double)es <= 1024.0 * 1024.0;
}

/* Rows [r0, r1) of direction d of R [dirs, G, H], transposed ([H, r1 - r0])
 * when `transpose`. When R is an initializer (the usual case) they are a
 * constant made here, so no run copies them; otherwise a take, slice and
 * transpose before the loop. */
static nimble_status_t recurrent_weights(imp_ctx *c, imp_val *R, int64_t d, int64_t r0, int64_t r1, bool transpose,
                                         imp_val **out) {
  const nimble_expr *e = R->expr;
  if (e->kind == NIMBLE_EXPR_CONSTANT && e->u.constant.rank == 3 && e->u.constant.dims[0] > d &&
      e->u.constant.dims[1] >= r1) {
    int64_t G = e->u.constant.dims[1], Hc = e->u.constant.dims[2], n = r1 - r0;
    size_t es = nimble_dtype_size(e->u.constant.dtype);
    size_t bytes;
    if (__builtin_mul_overflow((size_t)n * es, (size_t)Hc, &bytes))
      return imp_err(NIMBLE_OUT_OF_RANGE, "input 'R' is too large");
    char *t = malloc(bytes ? bytes : 1);
    if (!t) return NIMBLE_OOM_IN("importing");
    const char *src = (const char *)e->u.constant.data + (size_t)(d * G + r0) * (size_t)Hc * es;
    if (transpose) {
      for (int64_t j = 0; j < n; j++)
        for (int64_t p = 0; p < Hc; p++)
          memcpy(t + ((size_t)p * (size_t)n + (size_t)j) * es, src + ((size_t)j * (size_t)Hc + (size_t)p) * es, es);
    } else {
      memcpy(t, src, bytes);
    }
    int64_t dims[2] = {transpose ? Hc : n, transpose ? n : Hc};
    nimble_status_t st = imp_const(c, e->u.constant.dtype, 2, dims, t, out); /* copies t */
    free(t);
    return st;
  }
  imp_val *Rd, *rows;
  NIMBLE_RETURN_IF_ERROR(take_dir(c, R, d, &Rd));
  NIMBLE_RETURN_IF_ERROR(slice_rows(c, Rd, r0, r1, &rows));
  if (!transpose) {
    *out = rows;
    return nimble_ok();
  }
  int64_t perm[2] = {1, 0};
  nimble_named_attr_t pa = imp_attr_ints("axes", perm, 2);
  return emit1a(c, "transpose", rows, &pa, 1, out);
}

/* Zeros shaped [batch, H] where batch is X's dim 1 (maybe only known at
 * run time). */
static nimble_status_t zeros_state(imp_ctx *c, imp_val *X, int64_t H, imp_val **out) {
  nimble_dim_t b = imp_resolve(c, X->sig.dims[1]);
  nimble_dtype_t dt = X->sig.dtype;
  if (b.kind == NIMBLE_DIM_CONST) {
    int64_t shape[2] = {b.value, H};
    nimble_named_attr_t at[2] = {imp_attr_ints("shape", shape, 2), imp_attr_str("dtype", nimble_dtype_name(dt))};
    return imp_emit(c, "zeros", 0, NULL, at, 2, out);
  }
  imp_val *sh, *bd, *hv, *shape;
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "shape_of", 1, &X, NULL, 0, &sh));
  NIMBLE_RETURN_IF_ERROR(slice_rows(c, sh, 1, 2, &bd));
  NIMBLE_RETURN_IF_ERROR(imp_const_i64(c, 1, &H, false, &hv));
  imp_val *parts[2] = {bd, hv};
  nimble_named_attr_t a0 = imp_attr_int("axis", 0);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "concatenate", 2, parts, &a0, 1, &shape));
  nimble_named_attr_t at[2] = {imp_attr_str("dtype", nimble_dtype_name(dt)), imp_attr_float("value", 0.0)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "constant_of_shape", 1, &shape, at, 2, out));
  (*out)->sig.dims[0] = b;
  return nimble_ok();
}

/* Appends to a text buffer; false when it is full. */
static bool put(char *buf, size_t size, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool put(char *buf, size_t size, size_t *len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *len, size - *len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= size - *len) return false;
  *len += (size_t)n;
  return true;
}

/* The step function's text:
 *
 *   def @lstm_0(%t, %T, %XW, <weights>, [%sl, %zs,] %h, [%c,] %Y) -> (Y, h[, c]) {
 *     if (less(%t, %T)) {
 *       <one step from row %ti of XW>;
 *       @lstm_0(add(%t, 1), ..., %hn, [%cn,] scatter_nd(%Y, [[%ti]], [%yr]))
 *     } else { (%Y, %h[, %c]) }
 *   }
 *
 * XW = X W^T (+ the biases that are not gated) for every step at once, one
 * matrix product before the loop; a step adds only h R^T. Y [T, batch, H]
 * is allocated before the loop and each step writes its row: the row write
 * goes in place (update_in_place), so a step costs the same at step 1 and
 * step T. The gates are slices of one [batch, gates*H] product, which
 * fuse into the element-wise kernels that read them. With sequence
 * lengths (%sl, int64 [batch]) a batch entry whose sequence has ended
 * keeps its state and contributes zeros (%zs) to Y. */
static nimble_status_t step_text(imp_ctx *c, cell_kind k, const char *name, bool reverse, bool peep, bool lbr,
                                 bool seqlen, bool rt, const char *dt, const char *B, int64_t H, char *buf,
                                 size_t size) {
  (void)c;
  char hb[96], seq[96], xw[96], hh[96], hv[96];
  int64_t G = k == CELL_LSTM ? 4 * H : k == CELL_GRU ? 3 * H : H;
  snprintf(hb, sizeof hb, "Tensor[(%s, %" PRId64 "), %s]", B, H, dt);
  snprintf(seq, sizeof seq, "Tensor[(?, %s, %" PRId64 "), %s]", B, H, dt);
  snprintf(xw, sizeof xw, "Tensor[(?, %s, %" PRId64 "), %s]", B, G, dt);
  /* R's direction, transposed ([H, gates*H]) when rt; a product with it: */
  int64_t RG = k == CELL_LSTM ? 4 * H : H;
  snprintf(hh, sizeof hh, "Tensor[(%" PRId64 ", %" PRId64 "), %s]", rt ? H : RG, rt ? RG : H, dt);
  const char *tb = rt ? "" : ", transB=1";
  snprintf(hv, sizeof hv, "Tensor[(%" PRId64 ",), %s]", H, dt);
  bool ok = true;
  size_t len = 0;
  /* Gate j of a [batch, n*H] value: columns [j*H, (j+1)*H). */
#define GATE(v, j) "strided_slice(" v ", begin=[%" PRId64 "], end=[%" PRId64 "], axes=[1])"
#define GATE_ARGS(j) (int64_t)(j) * H, (int64_t)((j) + 1) * H
  const char *weights;
  ok = ok && put(buf, size, &len, "def @%s(%%t: Tensor[(), int64], %%T: Tensor[(), int64], %%XW: %s, ", name, xw);
  if (k == CELL_LSTM) {
    ok = ok && put(buf, size, &len, "%%R: %s, ", hh);
    if (peep) ok = ok && put(buf, size, &len, "%%pi: %s, %%po: %s, %%pf: %s, ", hv, hv, hv);
    weights = peep ? "%R, %pi, %po, %pf" : "%R";
  } else if (k == CELL_GRU) {
    char rm[96];
    snprintf(rm, sizeof rm, "Tensor[(%" PRId64 ", %" PRId64 "), %s]", H, H, dt);
    ok = ok && put(buf, size, &len, "%%Rz: %s, %%Rr: %s, %%Rh: %s, %%bz: %s, %%br: %s, %%bh: %s, ", rm, rm, rm, hv,
                   hv, hv);
    weights = "%Rz, %Rr, %Rh, %bz, %br, %bh";
  } else {
    ok = ok && put(buf, size, &len, "%%R: %s, ", hh);
    weights = "%R";
  }
  if (seqlen) ok = ok && put(buf, size, &len, "%%sl: Tensor[(%s,), int64], %%zs: %s, ", B, hb);
  ok = ok && put(buf, size, &len, "%%h: %s, ", hb);
  if (k == CELL_LSTM) ok = ok && put(buf, size, &len, "%%c: %s, ", hb);
  ok = ok && put(buf, size, &len, "%%Y: %s) -> (%s, %s%s%s) {\n", seq, seq, hb, k == CELL_LSTM ? ", " : "",
                 k == CELL_LSTM ? hb : "");
  ok = ok && put(buf, size, &len, "  if (less(%%t, %%T)) {\n    let %%ti = %s;\n",
                 reverse ? "subtract(subtract(%T, 1), %t)" : "%t");
  ok = ok && put(buf, size, &len, "    let %%xw = take(%%XW, %%ti, axis=0);\n");
  /* One step: %h2 (and %c2). ONNX's gate order: LSTM i, o, f, c; GRU z, r, h. */
  if (k == CELL_LSTM) {
    ok = ok && put(buf, size, &len, "    let %%g = add(%%xw, dense(%%h, %%R%s));\n", tb);
    if (peep)
      ok = ok && put(buf, size, &len,
                     "    let %%i = sigmoid(add(" GATE("%%g", 0) ", multiply(%%pi, %%c)));\n"
                     "    let %%f = sigmoid(add(" GATE("%%g", 2) ", multiply(%%pf, %%c)));\n",
                     GATE_ARGS(0), GATE_ARGS(2));
    else
      ok = ok && put(buf, size, &len,
                     "    let %%i = sigmoid(" GATE("%%g", 0) ");\n"
                     "    let %%f = sigmoid(" GATE("%%g", 2) ");\n",
                     GATE_ARGS(0), GATE_ARGS(2));
    ok = ok && put(buf, size, &len,
                   "    let %%u = tanh(" GATE("%%g", 3) ");\n"
                   "    let %%c2 = add(multiply(%%f, %%c), multiply(%%i, %%u));\n",
                   GATE_ARGS(3));
    if (peep)
      ok = ok && put(buf, size, &len, "    let %%o = sigmoid(add(" GATE("%%g", 1) ", multiply(%%po, %%c2)));\n",
                     GATE_ARGS(1));
    else
      ok = ok && put(buf, size, &len, "    let %%o = sigmoid(" GATE("%%g", 1) ");\n", GATE_ARGS(1));
    ok = ok && put(buf, size, &len, "    let %%h2 = multiply(%%o, tanh(%%c2));\n");
  } else if (k == CELL_GRU) {
    ok = ok && put(buf, size, &len,
                   "    let %%z = sigmoid(add(" GATE("%%xw", 0) ", dense(%%h, %%Rz, %%bz%s)));\n"
                   "    let %%r = sigmoid(add(" GATE("%%xw", 1) ", dense(%%h, %%Rr, %%br%s)));\n",
                   GATE_ARGS(0), tb, GATE_ARGS(1), tb);
    if (lbr)
      ok = ok && put(buf, size, &len,
                     "    let %%hh = tanh(add(" GATE("%%xw", 2) ", multiply(%%r, dense(%%h, %%Rh, %%bh%s))));\n",
                     GATE_ARGS(2), tb);
    else
      ok = ok && put(buf, size, &len,
                     "    let %%hh = tanh(add(" GATE("%%xw", 2) ", dense(multiply(%%r, %%h), %%Rh, %%bh%s)));\n",
                     GATE_ARGS(2), tb);
    ok = ok && put(buf, size, &len, "    let %%h2 = add(%%hh, multiply(%%z, subtract(%%h, %%hh)));\n");
  } else {
    ok = ok && put(buf, size, &len, "    let %%h2 = tanh(add(%%xw, dense(%%h, %%R%s)));\n", tb);
  }
#undef GATE
#undef GATE_ARGS
  /* Masking by sequence length. */
  if (seqlen) {
    ok = ok && put(buf, size, &len,
                   "    let %%m = expand_dims(less(%%t, %%sl), axis=1);\n"
                   "    let %%hn = where(%%m, %%h2, %%h);\n"
                   "    let %%yr = where(%%m, %%h2, %%zs);\n");
    if (k == CELL_LSTM) ok = ok && put(buf, size, &len, "    let %%cn = where(%%m, %%c2, %%c);\n");
  }
  const char *hn = seqlen ? "%hn" : "%h2", *cn = seqlen ? "%cn" : "%c2", *yr = seqlen ? "%yr" : "%h2";
  ok = ok && put(buf, size, &len,
                 "    let %%Y2 = scatter_nd(%%Y, reshape(%%ti, newshape=[1, 1]), expand_dims(%s, axis=0));\n", yr);
  ok = ok && put(buf, size, &len, "    @%s(add(%%t, 1), %%T, %%XW, %s%s, ", name, weights, seqlen ? ", %sl, %zs" : "");
  ok = ok && put(buf, size, &len, "%s, ", hn);
  if (k == CELL_LSTM) ok = ok && put(buf, size, &len, "%s, ", cn);
  ok = ok && put(buf, size, &len, "%%Y2)\n");
  ok = ok && put(buf, size, &len, "  } else {\n    (%%Y, %%h%s)\n  }\n}\n", k == CELL_LSTM ? ", %c" : "");
  if (!ok) return imp_err(NIMBLE_INTERNAL, "step function text too long");
  return nimble_ok();
}

/* A [T, batch, n] shape for X [T, batch, I]: X's first two dims, then n. */
static nimble_status_t seq_shape(imp_ctx *c, imp_val *X, int64_t n, imp_val **out) {
  imp_val *sh, *lead, *nv;
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "shape_of", 1, &X, NULL, 0, &sh));
  NIMBLE_RETURN_IF_ERROR(slice_rows(c, sh, 0, 2, &lead));
  NIMBLE_RETURN_IF_ERROR(imp_const_i64(c, 1, &n, false, &nv));
  imp_val *parts[2] = {lead, nv};
  nimble_named_attr_t a0 = imp_attr_int("axis", 0);
  return imp_emit(c, "concatenate", 2, parts, &a0, 1, out);
}

/* X W^T + b for every step: [T, batch, G] from X [T, batch, I] and W [G, I]
 * as one matrix product over T * batch rows. */
static nimble_status_t input_projection(imp_ctx *c, imp_val *X, imp_val *W, imp_val *b, int64_t G, imp_val **out) {
  nimble_dim_t I = imp_resolve(c, X->sig.dims[2]);
  if (I.kind != NIMBLE_DIM_CONST) return imp_err(NIMBLE_UNIMPLEMENTED, "X's input size must be known");
  int64_t flat[2] = {-1, I.value};
  nimble_named_attr_t fa = imp_attr_ints("newshape", flat, 2);
  imp_val *x2, *p;
  NIMBLE_RETURN_IF_ERROR(emit1a(c, "reshape", X, &fa, 1, &x2));
  nimble_named_attr_t tb = imp_attr_int("transB", 1);
  imp_val *args[3] = {x2, W, b};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "dense", 3, args, &tb, 1, &p));
  nimble_dim_t bd = imp_resolve(c, X->sig.dims[1]);
  if (bd.kind == NIMBLE_DIM_CONST) {
    int64_t back[3] = {-1, bd.value, G};
    nimble_named_attr_t ba = imp_attr_ints("newshape", back, 3);
    return emit1a(c, "reshape", p, &ba, 1, out);
  }
  imp_val *shape;
  NIMBLE_RETURN_IF_ERROR(seq_shape(c, X, G, &shape));
  imp_val *r[2] = {p, shape};
  return imp_emit(c, "dyn_reshape", 2, r, NULL, 0, out);
}

/* X W^T + Wb + Rb for every step, for LSTM and RNN, whose both biases add
 * to every gate. Bd: direction d's [2 * gates * H] biases. */
static nimble_status_t gated_projection(imp_ctx *c, imp_val *X, imp_val *Wd, imp_val *Bd, int64_t gates, int64_t H,
                                        imp_val **out) {
  imp_val *wb, *rb, *b;
  const nimble_expr *be = Bd->expr;
  if (be->kind == NIMBLE_EXPR_CONSTANT && be->u.constant.dtype == NIMBLE_DTYPE_FLOAT32 && be->u.constant.rank == 1 &&
      be->u.constant.dims[0] == 2 * gates * H) {
    /* Wb + Rb of an initializer, summed here (in float, as the add
     * would). */
    float *sum = malloc((size_t)(gates * H) * sizeof *sum);
    if (!sum) return NIMBLE_OOM_IN("importing");
    const float *bv = be->u.constant.data;
    for (int64_t j = 0; j < gates * H; j++) sum[j] = bv[j] + bv[gates * H + j];
    int64_t n = gates * H;
    nimble_status_t st = imp_const(c, NIMBLE_DTYPE_FLOAT32, 1, &n, sum, &b);
    free(sum);
    NIMBLE_RETURN_IF_ERROR(st);
  } else {
    NIMBLE_RETURN_IF_ERROR(slice_rows(c, Bd, 0, gates * H, &wb));
    NIMBLE_RETURN_IF_ERROR(slice_rows(c, Bd, gates * H, 2 * gates * H, &rb));
    imp_val *pair[2] = {wb, rb};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "add", 2, pair, NULL, 0, &b));
  }
  return input_projection(c, X, Wd, b, gates * H, out);
}

/* ---- The scans: every float32 LSTM, GRU and RNN -------------------------------- */

/* Zeros [D, batch, H], batch X's dim 1 (maybe known only at run time). */
static nimble_status_t zeros_states(imp_ctx *c, imp_val *X, int64_t D, int64_t H, imp_val **out) {
  nimble_dim_t b = imp_resolve(c, X->sig.dims[1]);
  nimble_dtype_t dt = X->sig.dtype;
  if (b.kind == NIMBLE_DIM_CONST) {
    int64_t shape[3] = {D, b.value, H};
    nimble_named_attr_t at[2] = {imp_attr_ints("shape", shape, 3), imp_attr_str("dtype", nimble_dtype_name(dt))};
    return imp_emit(c, "zeros", 0, NULL, at, 2, out);
  }
  imp_val *sh, *bd, *dv, *hv, *shape;
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "shape_of", 1, &X, NULL, 0, &sh));
  NIMBLE_RETURN_IF_ERROR(slice_rows(c, sh, 1, 2, &bd));
  NIMBLE_RETURN_IF_ERROR(imp_const_i64(c, 1, &D, false, &dv));
  NIMBLE_RETURN_IF_ERROR(imp_const_i64(c, 1, &H, false, &hv));
  imp_val *parts[3] = {dv, bd, hv};
  nimble_named_attr_t a0 = imp_attr_int("axis", 0);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "concatenate", 3, parts, &a0, 1, &shape));
  nimble_named_attr_t at[2] = {imp_attr_str("dtype", nimble_dtype_name(dt)), imp_attr_float("value", 0.0)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "constant_of_shape", 1, &shape, at, 2, out));
  (*out)->sig.dims[1] = b;
  return nimble_ok();
}

static bool f32_const(const imp_val *v, size_t rank, int64_t d0, int64_t d1) {
  const nimble_expr *e = v->expr;
  return e->kind == NIMBLE_EXPR_CONSTANT && e->u.constant.dtype == NIMBLE_DTYPE_FLOAT32 &&
         e->u.constant.rank == rank && e->u.constant.dims[0] == d0 && (rank < 2 || e->u.constant.dims[1] == d1);
}

/* The projections' bias [D * G] and, for a GRU, rbh [D, H] from B [D, 2G]:
 * LSTM and RNN add Wb + Rb to every gate; a GRU adds R's biases of z and
 * r only (R's h bias goes inside the reset gate when linear_before_reset
 * is set, so gru_scan adds it). An initializer's are summed here. */
static nimble_status_t scan_biases(imp_ctx *c, imp_val *B, cell_kind k, int64_t D, int64_t G, int64_t H,
                                   imp_val **bias, imp_val **rbh) {
  int64_t zr = k == CELL_GRU ? 2 * H : G; /* R's bias columns added to the projection */
  if (f32_const(B, 2, D, 2 * G)) {
    const float *bv = B->expr->u.constant.data;
    float *sum = malloc((size_t)(D * G) * sizeof *sum), *rh = k == CELL_GRU ? malloc((size_t)(D * H) * sizeof *rh) : NULL;
    if (!sum || (k == CELL_GRU && !rh)) {
      free(sum);
      free(rh);
      return NIMBLE_OOM_IN("importing");
    }
    for (int64_t d = 0; d < D; d++) {
      const float *row = bv + d * 2 * G;
      for (int64_t j = 0; j < G; j++) sum[d * G + j] = row[j] + (j < zr ? row[G + j] : 0.0f);
      for (int64_t j = 0; j < H && k == CELL_GRU; j++) rh[d * H + j] = row[G + 2 * H + j];
    }
    int64_t n = D * G, dims[2] = {D, H};
    nimble_status_t st = imp_const(c, NIMBLE_DTYPE_FLOAT32, 1, &n, sum, bias);
    if (!st && k == CELL_GRU) st = imp_const(c, NIMBLE_DTYPE_FLOAT32, 2, dims, rh, rbh);
    free(sum);
    free(rh);
    return st;
  }
  /* Wb + [Rb's first zr columns, zeros], then flattened. */
  int64_t one = 1, b0 = 0, e0 = G, b1 = G, e1 = G + zr, flat = -1;
  nimble_named_attr_t s0[3] = {imp_attr_ints("begin", &b0, 1), imp_attr_ints("end", &e0, 1), imp_attr_ints("axes", &one, 1)};
  nimble_named_attr_t s1[3] = {imp_attr_ints("begin", &b1, 1), imp_attr_ints("end", &e1, 1), imp_attr_ints("axes", &one, 1)};
  imp_val *wb, *rb, *sum;
  NIMBLE_RETURN_IF_ERROR(emit1a(c, "strided_slice", B, s0, 3, &wb));
  NIMBLE_RETURN_IF_ERROR(emit1a(c, "strided_slice", B, s1, 3, &rb));
  if (zr < G) {
    imp_val *zs;
    int64_t shape[2] = {D, G - zr};
    nimble_named_attr_t at[2] = {imp_attr_ints("shape", shape, 2), imp_attr_str("dtype", nimble_dtype_name(B->sig.dtype))};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "zeros", 0, NULL, at, 2, &zs));
    imp_val *parts[2] = {rb, zs};
    nimble_named_attr_t a1 = imp_attr_int("axis", 1);
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "concatenate", 2, parts, &a1, 1, &rb));
  }
  imp_val *pair[2] = {wb, rb};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "add", 2, pair, NULL, 0, &sum));
  nimble_named_attr_t fa = imp_attr_ints("newshape", &flat, 1);
  NIMBLE_RETURN_IF_ERROR(emit1a(c, "reshape", sum, &fa, 1, bias));
  if (k == CELL_GRU) {
    int64_t b2 = G + 2 * H, e2 = 2 * G;
    nimble_named_attr_t s2[3] = {imp_attr_ints("begin", &b2, 1), imp_attr_ints("end", &e2, 1), imp_attr_ints("axes", &one, 1)};
    NIMBLE_RETURN_IF_ERROR(emit1a(c, "strided_slice", B, s2, 3, rbh));
  }
  return nimble_ok();
}

/* R [D, G, H] transposed to [D, H, G] (h r[d] is a step's product): at
 * import for an initializer, else a transpose before the scan. */
static nimble_status_t scan_recurrent(imp_ctx *c, imp_val *R, int64_t D, int64_t G, int64_t H, imp_val **out) {
  if (!f32_const(R, 3, D, G) || R->expr->u.constant.dims[2] != H) {
    int64_t perm[3] = {0, 2, 1};
    nimble_named_attr_t pa = imp_attr_ints("axes", perm, 3);
    return emit1a(c, "transpose", R, &pa, 1, out);
  }
  const float *src = R->expr->u.constant.data;
  float *t = malloc((size_t)(D * G * H) * sizeof *t);
  if (!t) return NIMBLE_OOM_IN("importing");
  for (int64_t d = 0; d < D; d++)
    for (int64_t j = 0; j < G; j++)
      for (int64_t p = 0; p < H; p++) t[(d * H + p) * G + j] = src[(d * G + j) * H + p];
  int64_t dims[3] = {D, H, G};
  nimble_status_t st = imp_const(c, NIMBLE_DTYPE_FLOAT32, 3, dims, t, out);
  free(t);
  return st;
}

/* xw [T, batch, D, G] = X W^T + bias for every step and direction, one
 * product over the T * batch rows with W [D, G, I] as [D * G, I]. */
static nimble_status_t scan_projection(imp_ctx *c, imp_val *X, imp_val *W, imp_val *bias, int64_t D, int64_t G,
                                       imp_val **out) {
  nimble_dim_t I = imp_resolve(c, X->sig.dims[2]);
  if (I.kind != NIMBLE_DIM_CONST) return imp_err(NIMBLE_UNIMPLEMENTED, "X's input size must be known");
  imp_val *w2, *x2, *p;
  int64_t wflat[2] = {D * G, I.value};
  if (f32_const(W, 3, D, G) && W->expr->u.constant.dims[2] == I.value) {
    NIMBLE_RETURN_IF_ERROR(imp_const(c, NIMBLE_DTYPE_FLOAT32, 2, wflat, W->expr->u.constant.data, &w2));
  } else {
    nimble_named_attr_t wa = imp_attr_ints("newshape", wflat, 2);
    NIMBLE_RETURN_IF_ERROR(emit1a(c, "reshape", W, &wa, 1, &w2));
  }
  int64_t flat[2] = {-1, I.value};
  nimble_named_attr_t fa = imp_attr_ints("newshape", flat, 2);
  NIMBLE_RETURN_IF_ERROR(emit1a(c, "reshape", X, &fa, 1, &x2));
  nimble_named_attr_t tb = imp_attr_int("transB", 1);
  imp_val *args[3] = {x2, w2, bias};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "dense", 3, args, &tb, 1, &p));
  nimble_dim_t bd = imp_resolve(c, X->sig.dims[1]);
  if (bd.kind == NIMBLE_DIM_CONST) {
    int64_t back[4] = {-1, bd.value, D, G};
    nimble_named_attr_t ba = imp_attr_ints("newshape", back, 4);
    return emit1a(c, "reshape", p, &ba, 1, out);
  }
  imp_val *sh, *lead, *tail, *shape;
  int64_t dg[2] = {D, G};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "shape_of", 1, &X, NULL, 0, &sh));
  NIMBLE_RETURN_IF_ERROR(slice_rows(c, sh, 0, 2, &lead));
  NIMBLE_RETURN_IF_ERROR(imp_const_i64(c, 2, dg, false, &tail));
  imp_val *parts[2] = {lead, tail};
  nimble_named_attr_t a0 = imp_attr_int("axis", 0);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "concatenate", 2, parts, &a0, 1, &shape));
  imp_val *r[2] = {p, shape};
  return imp_emit(c, "dyn_reshape", 2, r, NULL, 0, out);
}

/* A float32 LSTM, GRU or RNN as one lstm_scan, gru_scan or rnn_scan for
 * all its directions: Y [T, D, batch, H], Y_h (and Y_c) [D, batch, H] as
 * ONNX lays them out (layout 0; X, h0 and c0 already transposed for 1). */
static nimble_status_t convert_scan(imp_ctx *c, cell_kind k, imp_val *X, imp_val *W, imp_val *R, imp_val *B,
                                    imp_val *seqlens, imp_val *h0, imp_val *c0, imp_val *P, int64_t D, bool rev_only,
                                    bool lbr, int64_t H, imp_val **Y, imp_val **Yh, imp_val **Yc) {
  int64_t gates = k == CELL_LSTM ? 4 : k == CELL_GRU ? 3 : 1, G = gates * H;
  const char *dt = nimble_dtype_name(X->sig.dtype);
  if (!B) {
    int64_t shape[2] = {D, 2 * G};
    nimble_named_attr_t at[2] = {imp_attr_ints("shape", shape, 2), imp_attr_str("dtype", dt)};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "zeros", 0, NULL, at, 2, &B));
  }
  imp_val *bias, *rbh = NULL, *xw, *rt;
  NIMBLE_RETURN_IF_ERROR(scan_biases(c, B, k, D, G, H, &bias, &rbh));
  NIMBLE_RETURN_IF_ERROR(scan_projection(c, X, W, bias, D, G, &xw));
  NIMBLE_RETURN_IF_ERROR(scan_recurrent(c, R, D, G, H, &rt));
  if (!h0) NIMBLE_RETURN_IF_ERROR(zeros_states(c, X, D, H, &h0));
  if (k == CELL_LSTM && !c0) NIMBLE_RETURN_IF_ERROR(zeros_states(c, X, D, H, &c0));
  if (k == CELL_LSTM && !P && seqlens) { /* zeros: no peepholes, as ONNX defines them */
    int64_t shape[2] = {D, 3 * H};
    nimble_named_attr_t at[2] = {imp_attr_ints("shape", shape, 2), imp_attr_str("dtype", dt)};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "zeros", 0, NULL, at, 2, &P));
  }
  imp_val *args[6];
  size_t na = 0;
  args[na++] = xw;
  args[na++] = rt;
  args[na++] = h0;
  if (k == CELL_LSTM) {
    args[na++] = c0;
    if (P) args[na++] = P;
  }
  if (k == CELL_GRU) args[na++] = rbh;
  if (seqlens) args[na++] = seqlens;
  nimble_named_attr_t at[2] = {imp_attr_int("reverse", rev_only ? 1 : 0), imp_attr_int("linear_before_reset", lbr)};
  imp_val *outs[3];
  size_t nout;
  const char *op = k == CELL_LSTM ? "lstm_scan" : k == CELL_GRU ? "gru_scan" : "rnn_scan";
  NIMBLE_RETURN_IF_ERROR(imp_emit_multi(c, op, na, args, at, k == CELL_GRU ? 2 : 1, outs, &nout));
  /* where(true, Y, X[:, :1, :1] as [T, 1, 1, 1]) is Y with X's time dim
   * in its type (a symbolic `seq` stays `seq`). */
  imp_val *yes, *probe;
  int64_t b[2] = {0, 0}, e[2] = {1, 1}, ax[2] = {1, 2};
  nimble_named_attr_t sl[3] = {imp_attr_ints("begin", b, 2), imp_attr_ints("end", e, 2), imp_attr_ints("axes", ax, 2)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "strided_slice", 1, &X, sl, 3, &probe));
  nimble_named_attr_t a1 = imp_attr_int("axis", 1);
  NIMBLE_RETURN_IF_ERROR(emit1a(c, "expand_dims", probe, &a1, 1, &probe));
  NIMBLE_RETURN_IF_ERROR(imp_scalar(c, NIMBLE_DTYPE_BOOL, 1, &yes));
  imp_val *wargs[3] = {yes, outs[0], probe};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, wargs, NULL, 0, Y));
  *Yh = outs[1];
  *Yc = k == CELL_LSTM ? outs[2] : NULL;
  return nimble_ok();
}

/* The node's outputs: Y [T, D, batch, H], Y_h (and Y_c) [D, batch, H],
 * transposed to ONNX's layout 1 (batch first) when asked. */
static nimble_status_t define_outputs(imp_ctx *c, const nimble_onnx_node *n, bool layout, imp_val *Y, imp_val *Yh,
                                      imp_val *Yc) {
  if (layout) {
    int64_t py[4] = {2, 0, 1, 3}, ph[3] = {1, 0, 2};
    nimble_named_attr_t ay = imp_attr_ints("axes", py, 4), ah = imp_attr_ints("axes", ph, 3);
    NIMBLE_RETURN_IF_ERROR(emit1a(c, "transpose", Y, &ay, 1, &Y));
    NIMBLE_RETURN_IF_ERROR(emit1a(c, "transpose", Yh, &ah, 1, &Yh));
    if (Yc) NIMBLE_RETURN_IF_ERROR(emit1a(c, "transpose", Yc, &ah, 1, &Yc));
  }
  NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 0, Y));
  NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 1, Yh));
  if (Yc) NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 2, Yc));
  return nimble_ok();
}

/* "3, ?, 5" for n dims (-1: not known) into buf (always terminated). */
static void dims_text(const int64_t *v, size_t n, char *buf, size_t size) {
  size_t l = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < n && l < size; i++)
    l += (size_t)(v[i] >= 0 ? snprintf(buf + l, size - l, "%s%" PRId64, i ? ", " : "", v[i])
                            : snprintf(buf + l, size - l, "%s?", i ? ", " : ""));
}

/* Whether input v (named `name`) has the shape `want` (rank n; -1: any)
 * where its dims are known; an error naming both shapes otherwise. */
static nimble_status_t expect_dims(imp_ctx *c, const imp_val *v, const char *name, size_t n, const int64_t *want,
                                   const char *why) {
  if (!v) return nimble_ok();
  int64_t got[NIMBLE_MAX_RANK];
  bool bad = v->sig.rank != n;
  for (size_t i = 0; i < v->sig.rank; i++) {
    nimble_dim_t d = imp_resolve(c, v->sig.dims[i]);
    got[i] = d.kind == NIMBLE_DIM_CONST ? d.value : -1;
    if (i < n && got[i] >= 0 && want[i] >= 0 && got[i] != want[i]) bad = true;
  }
  if (!bad) return nimble_ok();
  char gt[96], et[96];
  dims_text(got, v->sig.rank, gt, sizeof gt);
  dims_text(want, n, et, sizeof et);
  return imp_err(NIMBLE_INVALID_ARGUMENT, "input '%s' has shape (%s), expected (%s) %s", name, gt, et, why);
}

static nimble_status_t convert_rnn(imp_ctx *c, const nimble_onnx_node *n, cell_kind k) {
  imp_val *X, *W, *R, *B, *seqlens, *h0in, *c0in = NULL, *P = NULL;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &X));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &W));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 2, &R));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 3, &B));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 4, &seqlens));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 5, &h0in));
  if (k == CELL_LSTM) {
    NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 6, &c0in));
    NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 7, &P));
  }
  const char *direction;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "direction", "forward", &direction));
  int64_t dirs = strcmp(direction, "bidirectional") == 0 ? 2 : 1;
  bool rev_only = strcmp(direction, "reverse") == 0;
  if (dirs == 1 && !rev_only && strcmp(direction, "forward") != 0)
    return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute 'direction' has unknown value '%s'", direction);
  /* Per-sequence lengths: forward only (a reversed sequence of its own
   * length starts at a different step per batch entry). */
  if (seqlens && (dirs != 1 || rev_only))
    return imp_err(NIMBLE_UNIMPLEMENTED, "input 'sequence_lens' is supported for the forward direction only");
  if (seqlens && (seqlens->sig.rank != 1 || !nimble_dtype_is_int(seqlens->sig.dtype)))
    return imp_err(NIMBLE_INVALID_ARGUMENT, "input 'sequence_lens' must be a 1-D integer tensor");
  if (seqlens && seqlens->sig.dtype != NIMBLE_DTYPE_INT64) {
    nimble_named_attr_t ca = imp_attr_str("dtype", "int64");
    NIMBLE_RETURN_IF_ERROR(emit1a(c, "cast", seqlens, &ca, 1, &seqlens));
  }
  NIMBLE_RETURN_IF_ERROR(check_activations(n, k, dirs));
  int64_t layout = 0, input_forget = 0, lbr = 0, H;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "layout", 0, &layout));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "input_forget", 0, &input_forget));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "linear_before_reset", 0, &lbr));
  if (input_forget) return imp_err(NIMBLE_UNIMPLEMENTED, "input_forget=1 is not supported");
  if (X->sig.rank != 3 || W->sig.rank != 3 || R->sig.rank != 3)
    return imp_err(NIMBLE_INVALID_ARGUMENT, "X, W and R must have rank 3");
  if (!nimble_dtype_is_float(X->sig.dtype)) return imp_err(NIMBLE_INVALID_ARGUMENT, "X must be a float tensor");
  nimble_dim_t hd = imp_resolve(c, R->sig.dims[2]);
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "hidden_size", hd.kind == NIMBLE_DIM_CONST ? hd.value : -1, &H));
  if (H <= 0 || H > (1 << 24)) return imp_err(NIMBLE_INVALID_ARGUMENT, "hidden_size is unknown or out of range");
  int64_t gates = k == CELL_LSTM ? 4 : k == CELL_GRU ? 3 : 1;
  {
    /* The weights' shapes against hidden_size, the directions and X's
     * input size, named here: a mismatch found later reads as a failed
     * reshape or product. */
    nimble_dim_t Id = imp_resolve(c, X->sig.dims[2]);
    int64_t I = Id.kind == NIMBLE_DIM_CONST ? Id.value : -1, G = gates * H;
    char why[128];
    int wl = snprintf(why, sizeof why, "for hidden_size %" PRId64 " and %" PRId64 " direction(s)", H, dirs);
    if (I >= 0 && wl > 0) snprintf(why + wl, sizeof why - (size_t)wl, " (X's input size %" PRId64 ")", I);
    int64_t w[3] = {dirs, G, I}, r[3] = {dirs, G, H}, b[2] = {dirs, 2 * G}, p[2] = {dirs, 3 * H};
    NIMBLE_RETURN_IF_ERROR(expect_dims(c, W, "W", 3, w, why));
    NIMBLE_RETURN_IF_ERROR(expect_dims(c, R, "R", 3, r, why));
    NIMBLE_RETURN_IF_ERROR(expect_dims(c, B, "B", 2, b, why));
    if (P) NIMBLE_RETURN_IF_ERROR(expect_dims(c, P, "P", 2, p, why));
  }
  if (layout) {
    int64_t perm[3] = {1, 0, 2};
    nimble_named_attr_t pa = imp_attr_ints("axes", perm, 3);
    NIMBLE_RETURN_IF_ERROR(emit1a(c, "transpose", X, &pa, 1, &X));
    if (h0in) NIMBLE_RETURN_IF_ERROR(emit1a(c, "transpose", h0in, &pa, 1, &h0in));
    if (c0in) NIMBLE_RETURN_IF_ERROR(emit1a(c, "transpose", c0in, &pa, 1, &c0in));
  }
  /* A float32 LSTM, GRU or RNN is one lstm_scan, gru_scan or rnn_scan for
   * all its directions (ops/recurrent.c): its steps run inside one
   * kernel, each direction a parallel task. */
  if (X->sig.dtype == NIMBLE_DTYPE_FLOAT32) {
    imp_val *Y, *Yh, *Yc;
    NIMBLE_RETURN_IF_ERROR(convert_scan(c, k, X, W, R, B, seqlens, h0in, c0in, P, dirs, rev_only, lbr != 0, H, &Y, &Yh, &Yc));
    return define_outputs(c, n, layout != 0, Y, Yh, Yc);
  }
  char Bt[32];
  dim_text(c, X->sig.dims[1], Bt, sizeof Bt);
  const char *dt = nimble_dtype_name(X->sig.dtype);
  /* The recursion's trip count T = shape_of(X)[0], from step 0. */
  imp_val *sh, *zero = NULL, *T = NULL;
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "shape_of", 1, &X, NULL, 0, &sh));
  NIMBLE_RETURN_IF_ERROR(imp_scalar(c, NIMBLE_DTYPE_INT64, 0, &zero));
  {
    nimble_named_attr_t a = imp_attr_int("axis", 0);
    imp_val *args[2] = {sh, zero};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "take", 2, args, &a, 1, &T));
  }
  /* R's per-step product: GRU's three [H, H] matrices, LSTM's and RNN's
   * one [gates*H, H]. */
  bool rt = transpose_recurrent(k == CELL_GRU ? H : gates * H, H, nimble_dtype_size(X->sig.dtype));
  imp_val *Ys[2], *Hs[2], *Cs[2];
  for (int64_t d = 0; d < dirs; d++) {
    bool reverse = rev_only || d == 1;
    imp_val *Wd, *Bd = NULL, *hi, *ci = NULL, *Y0;
    NIMBLE_RETURN_IF_ERROR(dir_of(c, W, d, &Wd));
    if (B) NIMBLE_RETURN_IF_ERROR(dir_of(c, B, d, &Bd));
    if (h0in) NIMBLE_RETURN_IF_ERROR(take_dir(c, h0in, d, &hi));
    else NIMBLE_RETURN_IF_ERROR(zeros_state(c, X, H, &hi));
    if (k == CELL_LSTM) {
      if (c0in) NIMBLE_RETURN_IF_ERROR(take_dir(c, c0in, d, &ci));
      else NIMBLE_RETURN_IF_ERROR(zeros_state(c, X, H, &ci));
    }
    if (!Bd) {
      int64_t shape = 2 * gates * H;
      nimble_named_attr_t at[2] = {imp_attr_ints("shape", &shape, 1), imp_attr_str("dtype", dt)};
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "zeros", 0, NULL, at, 2, &Bd));
    }
    {
      /* Y, written row by row by the steps: zeros [T, batch, H]. */
      imp_val *shape;
      NIMBLE_RETURN_IF_ERROR(seq_shape(c, X, H, &shape));
      nimble_named_attr_t at[2] = {imp_attr_str("dtype", nimble_dtype_name(X->sig.dtype)), imp_attr_float("value", 0.0)};
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "constant_of_shape", 1, &shape, at, 2, &Y0));
    }
    const char *name = imp_fresh_global(c, k == CELL_LSTM ? "lstm" : k == CELL_GRU ? "gru" : "rnn");
    if (!name) return NIMBLE_OOM_IN("importing");
    char text[4096];
    NIMBLE_RETURN_IF_ERROR(
        step_text(c, k, name, reverse, P != NULL, lbr != 0, seqlens != NULL, rt, dt, Bt, H, text, sizeof text));
    NIMBLE_RETURN_IF_ERROR(imp_add_nir_func(c, name, text));
    const nimble_expr *args[20];
    size_t na = 0;
    args[na++] = zero->expr;
    args[na++] = T->expr;
    if (k == CELL_GRU) {
      /* The input projection carries W's bias; R's biases stay per gate
       * (r gates R h + b_r in the candidate). */
      imp_val *wb, *rz, *rr, *rh, *bz, *br, *bh, *XW;
      NIMBLE_RETURN_IF_ERROR(slice_rows(c, Bd, 0, 3 * H, &wb));
      NIMBLE_RETURN_IF_ERROR(input_projection(c, X, Wd, wb, 3 * H, &XW));
      NIMBLE_RETURN_IF_ERROR(recurrent_weights(c, R, d, 0, H, rt, &rz));
      NIMBLE_RETURN_IF_ERROR(recurrent_weights(c, R, d, H, 2 * H, rt, &rr));
      NIMBLE_RETURN_IF_ERROR(recurrent_weights(c, R, d, 2 * H, 3 * H, rt, &rh));
      NIMBLE_RETURN_IF_ERROR(slice_rows(c, Bd, 3 * H, 4 * H, &bz));
      NIMBLE_RETURN_IF_ERROR(slice_rows(c, Bd, 4 * H, 5 * H, &br));
      NIMBLE_RETURN_IF_ERROR(slice_rows(c, Bd, 5 * H, 6 * H, &bh));
      imp_val *v[7] = {XW, rz, rr, rh, bz, br, bh};
      for (int i = 0; i < 7; i++) args[na++] = v[i]->expr;
    } else {
      /* Both biases add to every gate: both go into the projection. */
      imp_val *XW;
      NIMBLE_RETURN_IF_ERROR(gated_projection(c, X, Wd, Bd, gates, H, &XW));
      imp_val *Rt;
      NIMBLE_RETURN_IF_ERROR(recurrent_weights(c, R, d, 0, gates * H, rt, &Rt));
      args[na++] = XW->expr;
      args[na++] = Rt->expr;
      if (P) {
        imp_val *Pd, *pi, *po, *pf;
        NIMBLE_RETURN_IF_ERROR(take_dir(c, P, d, &Pd));
        NIMBLE_RETURN_IF_ERROR(slice_rows(c, Pd, 0, H, &pi));
        NIMBLE_RETURN_IF_ERROR(slice_rows(c, Pd, H, 2 * H, &po));
        NIMBLE_RETURN_IF_ERROR(slice_rows(c, Pd, 2 * H, 3 * H, &pf));
        args[na++] = pi->expr;
        args[na++] = po->expr;
        args[na++] = pf->expr;
      }
    }
    if (seqlens) {
      imp_val *zs;
      NIMBLE_RETURN_IF_ERROR(zeros_state(c, X, H, &zs));
      args[na++] = seqlens->expr;
      args[na++] = zs->expr;
    }
    args[na++] = hi->expr;
    if (k == CELL_LSTM) args[na++] = ci->expr;
    args[na++] = Y0->expr;
    const nimble_expr *callee = nimble_ir_global(c->arena, name, NULL);
    const nimble_expr *call = callee ? nimble_ir_call(c->arena, callee, na, args, NULL, NULL) : NULL;
    if (!call) return NIMBLE_OOM_IN("importing");
    imp_val *r;
    NIMBLE_RETURN_IF_ERROR(imp_bind(c, name, call, NULL, &r));
    nimble_tensor_sig_t ysig, hsig;
    memset(&ysig, 0, sizeof ysig);
    ysig.dtype = X->sig.dtype;
    ysig.rank = 3;
    ysig.dims[0] = nimble_dim_any();
    ysig.dims[1] = imp_resolve(c, X->sig.dims[1]);
    ysig.dims[2] = nimble_dim_const(H);
    hsig = ysig;
    hsig.rank = 2;
    hsig.dims[0] = ysig.dims[1];
    hsig.dims[1] = ysig.dims[2];
    const nimble_expr *p0 = nimble_ir_proj(c->arena, r->expr, 0, NULL), *p1 = nimble_ir_proj(c->arena, r->expr, 1, NULL);
    const nimble_expr *p2 = k == CELL_LSTM ? nimble_ir_proj(c->arena, r->expr, 2, NULL) : p1;
    if (!p0 || !p1 || !p2) return NIMBLE_OOM_IN("importing");
    NIMBLE_RETURN_IF_ERROR(imp_bind(c, "y", p0, &ysig, &Ys[d]));
    NIMBLE_RETURN_IF_ERROR(imp_bind(c, "h", p1, &hsig, &Hs[d]));
    if (k == CELL_LSTM) NIMBLE_RETURN_IF_ERROR(imp_bind(c, "c", p2, &hsig, &Cs[d]));
  }
  /* The accumulated Y has a time dim of `?` (it grows through the
   * recursion) though it always has X's. where(true, Y, X[:, :1, :1])
   * is Y itself, and broadcasting `?` with X's time dim gives that dim, so
   * the type keeps it (symbolic `seq` stays `seq`). */
  {
    imp_val *yes, *probe;
    int64_t b[2] = {0, 0}, e[2] = {1, 1}, ax[2] = {1, 2};
    nimble_named_attr_t sl[3] = {imp_attr_ints("begin", b, 2), imp_attr_ints("end", e, 2), imp_attr_ints("axes", ax, 2)};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "strided_slice", 1, &X, sl, 3, &probe));
    NIMBLE_RETURN_IF_ERROR(imp_scalar(c, NIMBLE_DTYPE_BOOL, 1, &yes));
    for (int64_t d = 0; d < dirs; d++) {
      imp_val *args[3] = {yes, Ys[d], probe};
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, args, NULL, 0, &Ys[d]));
    }
  }
  /* Stack directions. */
  imp_val *Y, *Yh, *Yc = NULL;
  nimble_named_attr_t a1 = imp_attr_int("axis", 1), a0 = imp_attr_int("axis", 0);
  for (int64_t d = 0; d < dirs; d++) {
    NIMBLE_RETURN_IF_ERROR(emit1a(c, "expand_dims", Ys[d], &a1, 1, &Ys[d]));
    NIMBLE_RETURN_IF_ERROR(emit1a(c, "expand_dims", Hs[d], &a0, 1, &Hs[d]));
    if (k == CELL_LSTM) NIMBLE_RETURN_IF_ERROR(emit1a(c, "expand_dims", Cs[d], &a0, 1, &Cs[d]));
  }
  if (dirs == 2) {
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "concatenate", 2, Ys, &a1, 1, &Y));
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "concatenate", 2, Hs, &a0, 1, &Yh));
    if (k == CELL_LSTM) NIMBLE_RETURN_IF_ERROR(imp_emit(c, "concatenate", 2, Cs, &a0, 1, &Yc));
  } else {
    Y = Ys[0];
    Yh = Hs[0];
    if (k == CELL_LSTM) Yc = Cs[0];
  }
  return define_outputs(c, n, layout != 0, Y, Yh, Yc);
}

static nimble_status_t cv_lstm(imp_ctx *c, const nimble_onnx_node *n) { return convert_rnn(c, n, CELL_LSTM); }
static nimble_status_t cv_gru(imp_ctx *c, const nimble_onnx_node *n) { return convert_rnn(c, n, CELL_GRU); }
static nimble_status_t cv_rnn(imp_ctx *c, const nimble_onnx_node *n) { return convert_rnn(c, n, CELL_RNN); }

const imp_converter imp_converters_rnn[] = {
    {"LSTM", cv_lstm},
    {"GRU", cv_gru},
    {"RNN", cv_rnn},
};
const size_t imp_converters_rnn_count = sizeof imp_converters_rnn / sizeof imp_converters_rnn[0];
