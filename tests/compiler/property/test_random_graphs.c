/* Property test of the compiler: random graphs of element-wise, broadcast
 * and reduction operators over tensors with dynamic shapes, written as
 * .nir text, compiled for x86 in-process (nimble_compile_file) and run by
 * the runtime on random inputs of several concrete shapes with the same
 * executable. Every output is compared with a plain C interpreter of the
 * same graph written here (double arithmetic, NumPy broadcasting), within
 * |got - want| <= 1e-5 + 1e-4 * |want|.
 *
 * The generator keeps every value inside a magnitude budget and a
 * first-order estimate of float32 rounding error below the tolerance
 * (see `admit`), so a mismatch is a compiler or runtime fault, not
 * numerics.
 *
 *   NIMBLE_PROPTEST_SEED=S    the first case's seed (default kDefaultSeed);
 *                             case i uses seed S + i
 *   NIMBLE_PROPTEST_CASES=N   how many cases (default kDefaultCases)
 *   NIMBLE_PROPTEST_VERBOSE=1 print each graph's .nir text and input shapes
 *
 * A failing case prints its seed, the .nir program, the input shapes and
 * the first differing element; `NIMBLE_PROPTEST_SEED=<seed>
 * NIMBLE_PROPTEST_CASES=1` replays it alone. Seeds of faults that were
 * found and fixed stay in kRegressionSeeds. */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nimble/compile.h"
#include "nimble/runtime.h"
#include "nimble_test.h"
#include "nimble_test_kernel_cache.h"

enum { kDefaultCases = 100 };
static const uint64_t kDefaultSeed = 20261202;

/* Seeds of cases that once failed and were fixed in the compiler; they run
 * before the random cases. (None yet.) */
static const uint64_t kRegressionSeeds[] = {0};
static const size_t kNumRegressionSeeds = 0;

#define MAX_RANK 4
#define MAX_NODES 48
#define MAX_INPUTS 3
#define RUNS_PER_GRAPH 3
#define EPS32 5.96e-8 /* float32 unit roundoff, 2^-24 */
#define MAG_BUDGET 64.0
#define ERR_BUDGET 3e-6
#define RTOL 1e-4
#define ATOL 1e-5
#define MAX_EXTENT 4 /* run-time extents of symbolic and Any dims: 1..4 */
/* The innermost dim is sometimes long, so vectorized loop bodies and their
 * remainders both run (AVX-512 has 16 float lanes). */
static const int kLongExtents[] = {7, 16, 17, 33, 40};

/* ---- random numbers: splitmix64 ---------------------------------------- */

typedef struct {
  uint64_t s;
} rng_t;

static uint64_t rng_next(rng_t *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static int rng_int(rng_t *r, int lo, int hi) { return lo + (int)(rng_next(r) % (uint64_t)(hi - lo + 1)); }
static bool rng_chance(rng_t *r, int percent) { return rng_int(r, 0, 99) < percent; }
static double rng_unit(rng_t *r) { return (double)(rng_next(r) >> 11) / 9007199254740992.0; }

/* ---- the graph ----------------------------------------------------------- */

/* The dims of the graph's "full" shape; each value's dims refer to them. */
typedef enum { DIM_CONST, DIM_SYM, DIM_ANY } dim_kind_t;
typedef struct {
  dim_kind_t kind;
  int value; /* DIM_CONST */
  int max;   /* DIM_SYM, DIM_ANY: largest run-time extent */
} full_dim_t;

typedef enum {
  OP_INPUT,
  /* unary */
  OP_NEG,
  OP_ABS,
  OP_RELU,
  OP_EXP,
  OP_TANH,
  OP_SIGMOID,
  OP_SQRT,
  OP_ERF,
  OP_LOG,
  OP_CLIP, /* clip(x, min=lo, max=hi) */
  /* binary, NumPy broadcasting */
  OP_ADD,
  OP_SUB,
  OP_MUL,
  OP_DIV,
  OP_MAX,
  OP_MIN,
  /* with a scalar literal: v op c, or c op v when `c_left` */
  OP_ADD_C,
  OP_SUB_C,
  OP_MUL_C,
  OP_MAX_C,
  /* reductions over `axes` (a bit mask), keepdims or not */
  OP_SUM,
  OP_MEAN,
  OP_RMAX,
  OP_RMIN,
  OP_COUNT
} op_t;

static const char *const kOpName[OP_COUNT] = {
    [OP_INPUT] = "input",   [OP_NEG] = "negative", [OP_ABS] = "abs",       [OP_RELU] = "relu",
    [OP_EXP] = "exp",       [OP_TANH] = "tanh",    [OP_SIGMOID] = "sigmoid", [OP_SQRT] = "sqrt",
    [OP_ADD] = "add",       [OP_SUB] = "subtract", [OP_MUL] = "multiply",  [OP_DIV] = "divide",
    [OP_MAX] = "maximum",   [OP_MIN] = "minimum",  [OP_ADD_C] = "add",     [OP_SUB_C] = "subtract",
    [OP_MUL_C] = "multiply", [OP_MAX_C] = "maximum", [OP_SUM] = "sum",     [OP_MEAN] = "mean",
    [OP_RMAX] = "max",      [OP_RMIN] = "min",     [OP_ERF] = "erf",       [OP_LOG] = "log",
    [OP_CLIP] = "clip",
};

#define SLOT_ONE (-1) /* a dim that is the constant 1 */

typedef struct {
  op_t op;
  int a, b;       /* operands (node indices) */
  double c;       /* scalar literal of the *_C ops */
  double lo, hi;  /* OP_CLIP's bounds */
  bool c_left;    /* the literal is the first operand */
  unsigned axes;  /* reductions: bit i = axis i of the operand */
  bool keepdims;
  int rank;
  int slot[MAX_RANK]; /* full-dim index or SLOT_ONE, left to right */
  double mag, err;    /* bound on |value|; estimate of float32 error */
} node_t;

typedef struct {
  int rank; /* of the full shape */
  full_dim_t full[MAX_RANK];
  int num_inputs;
  int num_nodes;
  node_t node[MAX_NODES];
  int outputs[2];
  int num_outputs;
  bool any_dyn1; /* Any dims may be 1 at run time in one input only */
  int opt_level; /* passes and LLVM, 0..3 */
} graph_t;

static bool is_unary(op_t op) { return op >= OP_NEG && op <= OP_CLIP; }
static bool is_binary(op_t op) { return op >= OP_ADD && op <= OP_MIN; }
static bool is_scalar_c(op_t op) { return op >= OP_ADD_C && op <= OP_MAX_C; }

/* Largest run-time extent of a dim slot. */
static int slot_max_extent(const graph_t *g, int slot) {
  if (slot == SLOT_ONE) return 1;
  return g->full[slot].kind == DIM_CONST ? g->full[slot].value : g->full[slot].max;
}

/* Broadcast of two slot lists (right-aligned); false when two different
 * full dims meet (their run-time extents may differ). */
static bool broadcast_slots(const node_t *x, const node_t *y, int *rank, int *slot) {
  int r = x->rank > y->rank ? x->rank : y->rank;
  for (int i = 0; i < r; i++) {
    int xi = i - (r - x->rank), yi = i - (r - y->rank);
    int xs = xi >= 0 ? x->slot[xi] : SLOT_ONE, ys = yi >= 0 ? y->slot[yi] : SLOT_ONE;
    if (xs == SLOT_ONE) slot[i] = ys;
    else if (ys == SLOT_ONE || ys == xs) slot[i] = xs;
    else return false;
  }
  *rank = r;
  return true;
}

/* Appends `n` when its magnitude and error estimates stay inside the
 * budget; returns its index or -1. */
static int admit(graph_t *g, const node_t *n) {
  if (g->num_nodes >= MAX_NODES) return -1;
  if (!(n->mag <= MAG_BUDGET) || !(n->err <= ERR_BUDGET)) return -1;
  g->node[g->num_nodes] = *n;
  return g->num_nodes++;
}

static int add_unary(graph_t *g, op_t op, int a) {
  const node_t *x = &g->node[a];
  node_t n = *x;
  n.op = op;
  n.a = a;
  n.b = -1;
  switch (op) {
    case OP_NEG: case OP_ABS: case OP_RELU: break;
    case OP_EXP:
      if (x->mag > 3) return -1;
      n.mag = exp(x->mag);
      n.err = n.mag * (x->err + 4 * EPS32);
      break;
    case OP_TANH: n.mag = fmin(x->mag, 1); n.err = x->err + 4 * EPS32; break;
    case OP_SIGMOID: n.mag = 1; n.err = x->err / 4 + 4 * EPS32; break;
    case OP_SQRT: /* only of abs(..) + c with c > 0, or of an exact value */
      n.mag = sqrt(x->mag);
      n.err = x->err / (2 * sqrt(x->c > 0 ? x->c : 1)) + 2 * EPS32 * n.mag;
      break;
    case OP_ERF: n.mag = fmin(x->mag, 1); n.err = 1.13 * x->err + 4 * EPS32; break;
    case OP_LOG: /* only of abs(..) + 1: the derivative is at most 1 */
      n.mag = log(x->mag);
      n.err = x->err + 4 * EPS32 * (n.mag > 1 ? n.mag : 1);
      break;

    default: return -1;
  }
  return admit(g, &n);
}

static int add_binary(graph_t *g, op_t op, int a, int b) {
  const node_t *x = &g->node[a], *y = &g->node[b];
  node_t n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.a = a;
  n.b = b;
  if (!broadcast_slots(x, y, &n.rank, n.slot)) return -1;
  switch (op) {
    case OP_ADD: case OP_SUB:
      n.mag = x->mag + y->mag;
      n.err = x->err + y->err + EPS32 * n.mag;
      break;
    case OP_MUL:
      n.mag = x->mag * y->mag;
      n.err = x->err * y->mag + y->err * x->mag + EPS32 * n.mag;
      break;
    case OP_DIV: /* y >= 1 by construction: abs(..) + 1 */
      n.mag = x->mag;
      n.err = x->err + x->mag * y->err + 2 * EPS32 * n.mag;
      break;
    case OP_MAX: case OP_MIN:
      n.mag = fmax(x->mag, y->mag);
      n.err = fmax(x->err, y->err);
      break;
    default: return -1;
  }
  return admit(g, &n);
}

static int add_scalar(graph_t *g, op_t op, int a, double c, bool left) {
  const node_t *x = &g->node[a];
  node_t n = *x;
  n.op = op;
  n.a = a;
  n.b = -1;
  n.c = c;
  n.c_left = left;
  switch (op) {
    case OP_ADD_C: case OP_SUB_C: n.mag = x->mag + c; n.err = x->err + EPS32 * n.mag; break;
    case OP_MUL_C: n.mag = x->mag * c; n.err = x->err * c + EPS32 * n.mag; break;
    case OP_MAX_C: n.mag = fmax(x->mag, fabs(c)); break;
    default: return -1;
  }
  return admit(g, &n);
}

static int add_reduce(graph_t *g, op_t op, int a, unsigned axes, bool keepdims) {
  const node_t *x = &g->node[a];
  node_t n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.a = a;
  n.b = -1;
  n.axes = axes;
  n.keepdims = keepdims;
  double count = 1;
  for (int i = 0; i < x->rank; i++) {
    if (axes & (1u << i)) {
      count *= slot_max_extent(g, x->slot[i]);
      if (keepdims) n.slot[n.rank++] = SLOT_ONE;
    } else {
      n.slot[n.rank++] = x->slot[i];
    }
  }
  switch (op) {
    case OP_SUM:
      n.mag = x->mag * count;
      n.err = count * x->err + EPS32 * n.mag * (count > 4 ? count / 4 : 1);
      break;
    case OP_MEAN:
      n.mag = x->mag;
      n.err = x->err + EPS32 * x->mag * (count > 4 ? count / 4 : 1) + EPS32 * n.mag;
      break;
    case OP_RMAX: case OP_RMIN: n.mag = x->mag; n.err = x->err; break;
    default: return -1;
  }
  return admit(g, &n);
}

/* A node among the graph's: the newest, one nothing uses yet, or any (so
 * graphs grow deep and wide, and most values reach the output). */
static int pick_node(rng_t *r, const graph_t *g) {
  int k = rng_int(r, 0, 99);
  if (k < 40) return g->num_nodes - 1;
  if (k < 75) {
    bool used[MAX_NODES] = {false};
    for (int i = 0; i < g->num_nodes; i++) {
      if (g->node[i].a >= 0) used[g->node[i].a] = true;
      if (g->node[i].b >= 0) used[g->node[i].b] = true;
    }
    int cand[MAX_NODES], nc = 0;
    for (int i = 0; i < g->num_nodes; i++)
      if (!used[i]) cand[nc++] = i;
    if (nc > 0) return cand[rng_int(r, 0, nc - 1)];
  }
  return rng_int(r, 0, g->num_nodes - 1);
}

static void generate(uint64_t seed, graph_t *g) {
  rng_t r = {seed};
  memset(g, 0, sizeof *g);
  g->rank = rng_int(&r, 1, MAX_RANK);
  for (int i = 0; i < g->rank; i++) {
    int k = rng_int(&r, 0, 9);
    g->full[i].kind = k < 4 ? DIM_SYM : k < 7 ? DIM_ANY : DIM_CONST;
    g->full[i].value = rng_int(&r, 2, MAX_EXTENT);
    g->full[i].max = MAX_EXTENT;
  }
  if (rng_chance(&r, 40)) {
    full_dim_t *last = &g->full[g->rank - 1];
    last->max = kLongExtents[rng_int(&r, 0, (int)(sizeof kLongExtents / sizeof kLongExtents[0]) - 1)];
    last->value = last->max;
  }
  g->any_dyn1 = rng_chance(&r, 25);
  g->opt_level = rng_chance(&r, 60) ? 2 : rng_int(&r, 0, 3);
  g->num_inputs = rng_int(&r, 1, MAX_INPUTS);
  for (int i = 0; i < g->num_inputs; i++) {
    node_t *n = &g->node[g->num_nodes++];
    n->op = OP_INPUT;
    n->a = n->b = -1;
    n->rank = rng_chance(&r, 5) ? 0 : rng_int(&r, 1, g->rank);
    for (int d = 0; d < n->rank; d++) {
      int full = g->rank - n->rank + d;
      n->slot[d] = rng_chance(&r, 25) ? SLOT_ONE : full;
    }
    n->mag = 2; /* inputs are uniform in [-2, 2] */
    n->err = 0;
  }
  int want_ops = rng_int(&r, 2, 10);
  int made = 0;
  static const double kLits[] = {0.5, 1.5, 2.0, 0.25, -1.0};
  for (int attempt = 0; made < want_ops && attempt < 200; attempt++) {
    int kind = rng_int(&r, 0, 99);
    int a = pick_node(&r, g);
    int res = -1;
    if (kind < 30) {
      op_t op = (op_t)rng_int(&r, OP_NEG, OP_CLIP);
      if (op == OP_SQRT || op == OP_LOG) {
        /* sqrt(abs(x)) of an exact value; sqrt(abs(x) + 1) otherwise, where
         * the derivative is bounded; log(abs(x) + 1) always. */
        int ab = add_unary(g, OP_ABS, a);
        if (ab < 0) continue;
        int arg = ab;
        if (op == OP_LOG || g->node[a].err > 0) {
          arg = add_scalar(g, OP_ADD_C, ab, 1.0, false);
          if (arg < 0) continue;
        }
        res = add_unary(g, op, arg);
      } else if (op == OP_CLIP) {
        static const double kBounds[] = {-1.5, -0.5, 0.0, 0.25, 1.0};
        int i = rng_int(&r, 0, 3), j = rng_int(&r, i + 1, 4);
        node_t n = g->node[a];
        n.op = OP_CLIP;
        n.a = a;
        n.b = -1;
        n.lo = kBounds[i];
        n.hi = kBounds[j];
        n.mag = fmin(n.mag, fmax(fabs(n.lo), fabs(n.hi)));
        res = admit(g, &n);
      } else {
        res = add_unary(g, op, a);
      }
    } else if (kind < 62) {
      op_t op = (op_t)rng_int(&r, OP_ADD, OP_MIN);
      /* A partner that broadcasts with `a`. */
      int cand[MAX_NODES], nc = 0;
      for (int b = 0; b < g->num_nodes; b++) {
        int rk, sl[MAX_RANK];
        if (broadcast_slots(&g->node[a], &g->node[b], &rk, sl)) cand[nc++] = b;
      }
      int b = cand[rng_int(&r, 0, nc - 1)]; /* a itself always qualifies */
      if (op == OP_DIV) {
        int ab = add_unary(g, OP_ABS, b);
        int den = ab < 0 ? -1 : add_scalar(g, OP_ADD_C, ab, 1.0, false);
        if (den < 0) continue;
        b = den;
      }
      if (op != OP_DIV && rng_chance(&r, 50)) {
        int t = a;
        a = b;
        b = t;
      }
      res = add_binary(g, op, a, b);
    } else if (kind < 75) {
      op_t op = (op_t)rng_int(&r, OP_ADD_C, OP_MAX_C);
      double c = kLits[rng_int(&r, 0, (int)(sizeof kLits / sizeof kLits[0]) - 1)];
      if (op == OP_MUL_C || op == OP_ADD_C || op == OP_SUB_C) c = fabs(c);
      res = add_scalar(g, op, a, c, rng_chance(&r, 30));
    } else {
      const node_t *x = &g->node[a];
      if (x->rank == 0) continue;
      op_t op = (op_t)rng_int(&r, OP_SUM, OP_RMIN);
      unsigned axes = 0;
      while (axes == 0) axes = (unsigned)rng_int(&r, 0, (1 << x->rank) - 1);
      res = add_reduce(g, op, a, axes, rng_chance(&r, 50));
    }
    if (res >= 0) made++;
  }
  if (made == 0) add_unary(g, OP_NEG, 0);
  g->outputs[0] = g->num_nodes - 1;
  g->num_outputs = 1;
  /* A second output now and then: another value, the same one again, or
   * an input returned as it came. */
  if (rng_chance(&r, 25)) {
    g->outputs[1] = rng_int(&r, 0, g->num_nodes - 1);
    g->num_outputs = 2;
  }
}

/* ---- .nir text ------------------------------------------------------------ */

typedef struct {
  char *buf;
  size_t len, cap;
} text_t;

static void tprintf(text_t *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  ck_assert_int_ge(n, 0);
  if (t->len + (size_t)n + 1 > t->cap) {
    t->cap = (t->len + (size_t)n + 1) * 2;
    t->buf = realloc(t->buf, t->cap);
    ck_assert_ptr_nonnull(t->buf);
  }
  va_start(ap, fmt);
  vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
  va_end(ap);
  t->len += (size_t)n;
}

/* Which inputs some node or output uses: only those are parameters (nodes
 * that no output needs stay in the program, for dead-code elimination). */
static void mark_used(const graph_t *g, bool *used) {
  for (int i = g->num_inputs; i < g->num_nodes; i++) {
    used[g->node[i].a] = true;
    if (g->node[i].b >= 0) used[g->node[i].b] = true;
  }
  for (int o = 0; o < g->num_outputs; o++) used[g->outputs[o]] = true;
}

static void print_dim(text_t *t, const graph_t *g, int slot) {
  if (slot == SLOT_ONE) tprintf(t, "1");
  else if (g->full[slot].kind == DIM_CONST) tprintf(t, "%d", g->full[slot].value);
  else if (g->full[slot].kind == DIM_SYM) tprintf(t, "n%d", slot);
  else tprintf(t, "?");
}

static char *graph_to_nir(const graph_t *g, const bool *used) {
  text_t t = {0};
  tprintf(&t, "def @main(");
  bool first = true;
  for (int i = 0; i < g->num_inputs; i++) {
    if (!used[i]) continue;
    const node_t *n = &g->node[i];
    tprintf(&t, "%s%%x%d: Tensor[(", first ? "" : ", ", i);
    for (int d = 0; d < n->rank; d++) {
      if (d) tprintf(&t, ", ");
      print_dim(&t, g, n->slot[d]);
    }
    tprintf(&t, "%s), float32]", n->rank == 1 ? "," : "");
    first = false;
  }
  tprintf(&t, ") {\n");
  for (int i = g->num_inputs; i < g->num_nodes; i++) {
    const node_t *n = &g->node[i];
    tprintf(&t, "  let %%v%d = %s(", i, kOpName[n->op]);
    const char *pa = n->a < g->num_inputs ? "x" : "v";
    if (n->op == OP_CLIP) {
      tprintf(&t, "%%%s%d, min=%.4f, max=%.4f)", pa, n->a, n->lo, n->hi);
    } else if (is_unary(n->op)) {
      tprintf(&t, "%%%s%d)", pa, n->a);
    } else if (is_binary(n->op)) {
      tprintf(&t, "%%%s%d, %%%s%d)", pa, n->a, n->b < g->num_inputs ? "x" : "v", n->b);
    } else if (is_scalar_c(n->op)) {
      /* "%.4f": a float32 literal (an integer would be int64); the
       * literals are exact in four decimals. */
      if (n->c_left) tprintf(&t, "%.4f, %%%s%d)", n->c, pa, n->a);
      else tprintf(&t, "%%%s%d, %.4f)", pa, n->a, n->c);
    } else {
      tprintf(&t, "%%%s%d, axes=[", pa, n->a);
      bool f = true;
      for (int d = 0; d < MAX_RANK; d++)
        if (n->axes & (1u << d)) {
          tprintf(&t, "%s%d", f ? "" : ", ", d);
          f = false;
        }
      tprintf(&t, "], keepdims=%d)", n->keepdims ? 1 : 0);
    }
    tprintf(&t, ";\n");
  }
  const char *p0 = g->outputs[0] < g->num_inputs ? "x" : "v";
  if (g->num_outputs == 1) {
    tprintf(&t, "  %%%s%d\n}\n", p0, g->outputs[0]);
  } else {
    tprintf(&t, "  (%%%s%d, %%%s%d)\n}\n", p0, g->outputs[0], g->outputs[1] < g->num_inputs ? "x" : "v",
            g->outputs[1]);
  }
  return t.buf;
}

/* ---- the reference interpreter ------------------------------------------- */

typedef struct {
  int rank;
  int64_t dim[MAX_RANK];
  size_t count;
  double *v;
} ref_t;

static size_t shape_count(int rank, const int64_t *dim) {
  size_t n = 1;
  for (int i = 0; i < rank; i++) n *= (size_t)dim[i];
  return n;
}

/* The flat index into `x` (right-aligned broadcast into `out_rank`) of the
 * output element at multi-index `idx`. */
static size_t bcast_offset(const ref_t *x, int out_rank, const int64_t *idx) {
  size_t off = 0;
  for (int i = 0; i < x->rank; i++) {
    int oi = out_rank - x->rank + i;
    off = off * (size_t)x->dim[i] + (size_t)(x->dim[i] == 1 ? 0 : idx[oi]);
  }
  return off;
}

static void next_index(int rank, const int64_t *dim, int64_t *idx) {
  for (int i = rank - 1; i >= 0; i--) {
    if (++idx[i] < dim[i]) return;
    idx[i] = 0;
  }
}

static double apply_unary(op_t op, double x) {
  switch (op) {
    case OP_NEG: return -x;
    case OP_ABS: return fabs(x);
    case OP_RELU: return x > 0 ? x : 0;
    case OP_EXP: return exp(x);
    case OP_TANH: return tanh(x);
    case OP_SIGMOID: return 1 / (1 + exp(-x));
    case OP_SQRT: return sqrt(x);
    case OP_ERF: return erf(x);
    case OP_LOG: return log(x);
    default: abort();
  }
}

static double apply_binary(op_t op, double x, double y) {
  switch (op) {
    case OP_ADD: case OP_ADD_C: return x + y;
    case OP_SUB: case OP_SUB_C: return x - y;
    case OP_MUL: case OP_MUL_C: return x * y;
    case OP_DIV: return x / y;
    case OP_MAX: case OP_MAX_C: return x > y ? x : y;
    case OP_MIN: return x < y ? x : y;
    default: abort();
  }
}

/* Evaluates node `i` from its operands' values (already in `val`). Returns
 * false with `why` when the run-time shapes do not broadcast (the caller
 * generated a bad input shape: a test bug). */
static bool ref_eval(const graph_t *g, int i, ref_t *val, char *why, size_t why_size) {
  const node_t *n = &g->node[i];
  ref_t *o = &val[i];
  const ref_t *x = &val[n->a];
  if (is_unary(n->op) || is_scalar_c(n->op)) {
    o->rank = x->rank;
    memcpy(o->dim, x->dim, sizeof o->dim);
    o->count = x->count;
    o->v = malloc((o->count ? o->count : 1) * sizeof(double));
    ck_assert_ptr_nonnull(o->v);
    for (size_t k = 0; k < o->count; k++) {
      if (n->op == OP_CLIP) o->v[k] = fmin(fmax(x->v[k], n->lo), n->hi);
      else if (is_unary(n->op)) o->v[k] = apply_unary(n->op, x->v[k]);
      else o->v[k] = n->c_left ? apply_binary(n->op, n->c, x->v[k]) : apply_binary(n->op, x->v[k], n->c);
    }
    return true;
  }
  if (is_binary(n->op)) {
    const ref_t *y = &val[n->b];
    o->rank = x->rank > y->rank ? x->rank : y->rank;
    for (int d = 0; d < o->rank; d++) {
      int xi = d - (o->rank - x->rank), yi = d - (o->rank - y->rank);
      int64_t xd = xi >= 0 ? x->dim[xi] : 1, yd = yi >= 0 ? y->dim[yi] : 1;
      if (xd != yd && xd != 1 && yd != 1) {
        snprintf(why, why_size, "node %d: dims %lld and %lld do not broadcast", i, (long long)xd, (long long)yd);
        return false;
      }
      o->dim[d] = xd == 1 ? yd : xd;
    }
    o->count = shape_count(o->rank, o->dim);
    o->v = malloc((o->count ? o->count : 1) * sizeof(double));
    ck_assert_ptr_nonnull(o->v);
    int64_t idx[MAX_RANK] = {0};
    for (size_t k = 0; k < o->count; k++) {
      o->v[k] = apply_binary(n->op, x->v[bcast_offset(x, o->rank, idx)], y->v[bcast_offset(y, o->rank, idx)]);
      next_index(o->rank, o->dim, idx);
    }
    return true;
  }
  /* A reduction: the output's multi-index is the input's with reduced
   * axes dropped (or kept at 0). */
  o->rank = 0;
  for (int d = 0; d < x->rank; d++) {
    if (!(n->axes & (1u << d))) o->dim[o->rank++] = x->dim[d];
    else if (n->keepdims) o->dim[o->rank++] = 1;
  }
  o->count = shape_count(o->rank, o->dim);
  o->v = malloc((o->count ? o->count : 1) * sizeof(double));
  ck_assert_ptr_nonnull(o->v);
  size_t *seen = calloc(o->count ? o->count : 1, sizeof(size_t));
  ck_assert_ptr_nonnull(seen);
  for (size_t k = 0; k < o->count; k++) o->v[k] = n->op == OP_RMAX ? -INFINITY : n->op == OP_RMIN ? INFINITY : 0;
  int64_t idx[MAX_RANK] = {0};
  for (size_t k = 0; k < x->count; k++) {
    size_t off = 0;
    for (int d = 0; d < x->rank; d++) {
      if (!(n->axes & (1u << d))) off = off * (size_t)x->dim[d] + (size_t)idx[d];
    }
    if (n->op == OP_RMAX) o->v[off] = fmax(o->v[off], x->v[k]);
    else if (n->op == OP_RMIN) o->v[off] = fmin(o->v[off], x->v[k]);
    else o->v[off] += x->v[k];
    seen[off]++;
    next_index(x->rank, x->dim, idx);
  }
  if (n->op == OP_MEAN)
    for (size_t k = 0; k < o->count; k++) o->v[k] /= (double)seen[k];
  free(seen);
  return true;
}

/* ---- one case ------------------------------------------------------------ */

typedef struct {
  int failures;
  char *report; /* one paragraph per failing case */
  size_t report_len;
  double compile_s, run_s;
} summary_t;

static void append_report(summary_t *s, const char *text) {
  size_t n = strlen(text);
  s->report = realloc(s->report, s->report_len + n + 1);
  ck_assert_ptr_nonnull(s->report);
  memcpy(s->report + s->report_len, text, n + 1);
  s->report_len += n;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void format_shape(char *buf, size_t size, int rank, const int64_t *dim) {
  size_t off = (size_t)snprintf(buf, size, "(");
  for (int d = 0; d < rank && off < size; d++)
    off += (size_t)snprintf(buf + off, size - off, "%s%lld", d ? ", " : "", (long long)dim[d]);
  if (off < size) snprintf(buf + off, size - off, ")");
}

/* Runs one graph: compile once, run RUNS_PER_GRAPH input shapes. Returns
 * NULL or a description of the first fault (caller frees). */
static char *run_case(uint64_t seed, const char *tmpdir, summary_t *sum, int *ops_out) {
  graph_t *g = malloc(sizeof *g);
  ck_assert_ptr_nonnull(g);
  generate(seed, g);
  *ops_out = g->num_nodes - g->num_inputs;
  bool used[MAX_NODES] = {false};
  mark_used(g, used);
  char *nir = graph_to_nir(g, used);
  if (getenv("NIMBLE_PROPTEST_VERBOSE"))
    printf("seed %llu, opt level %d:\n%s", (unsigned long long)seed, g->opt_level, nir);

  char path[600];
  snprintf(path, sizeof path, "%s/g%llu.nir", tmpdir, (unsigned long long)seed);
  FILE *f = fopen(path, "w");
  ck_assert_msg(f != NULL, "cannot write %s", path);
  fputs(nir, f);
  fclose(f);

  char *fault = NULL;
  text_t msg = {0};
  nimble_compile_options_t co;
  nimble_compile_options_init(&co);
  co.target = "x86";
  co.opt_level = g->opt_level;
  co.kernel_cache = nimble_test_kernel_cache();
  nimble_compile_result *cr = NULL;
  double t0 = now_s();
  nimble_status_t s = nimble_compile_file(path, &co, &cr);
  void *image = NULL;
  size_t image_size = 0;
  nimble_executable *exe = NULL;
  if (!s) s = nimble_compile_result_serialize(cr, &image, &image_size);
  if (!s) s = nimble_executable_load_memory(image, image_size, 0, &exe);
  nimble_compile_result_destroy(cr);
  free(image);
  sum->compile_s += now_s() - t0;
  unlink(path);
  if (s) {
    tprintf(&msg, "compile failed: %s: %s", nimble_status_code_name(nimble_status_code(s)),
            nimble_status_message(s));
    nimble_status_free(s);
    goto done;
  }
  nimble_vm_options_t vo;
  nimble_vm_options_init(&vo);
  nimble_vm *vm = NULL;
  s = nimble_vm_create(exe, &vo, &vm);
  if (s) {
    tprintf(&msg, "vm create failed: %s", nimble_status_message(s));
    nimble_status_free(s);
    goto done;
  }
  rng_t r = {seed ^ 0xa5a5a5a5a5a5a5a5ull};
  for (int run = 0; run < RUNS_PER_GRAPH && msg.len == 0; run++) {
    int64_t extent[MAX_RANK];
    for (int d = 0; d < g->rank; d++)
      extent[d] = g->full[d].kind == DIM_CONST ? g->full[d].value
                  : run == 0                   ? g->full[d].max
                                               : rng_int(&r, 1, g->full[d].max);
    ref_t val[MAX_NODES];
    memset(val, 0, sizeof val);
    float *in_data[MAX_INPUTS] = {NULL};
    char shapes[256] = "";
    size_t shapes_len = 0;
    t0 = now_s();
    for (int i = 0; i < g->num_inputs; i++) {
      const node_t *n = &g->node[i];
      ref_t *v = &val[i];
      v->rank = n->rank;
      for (int d = 0; d < n->rank; d++) {
        int slot = n->slot[d];
        v->dim[d] = slot == SLOT_ONE ? 1 : extent[slot];
        /* An Any dim may be 1 in one input while it is larger elsewhere:
         * broadcasting decided at run time. */
        if (slot != SLOT_ONE && g->any_dyn1 && g->full[slot].kind == DIM_ANY && rng_chance(&r, 30)) v->dim[d] = 1;
      }
      v->count = shape_count(v->rank, v->dim);
      v->v = malloc(v->count * sizeof(double));
      in_data[i] = malloc(v->count * sizeof(float));
      ck_assert(v->v && in_data[i]);
      for (size_t k = 0; k < v->count; k++) {
        in_data[i][k] = (float)(rng_unit(&r) * 4 - 2);
        v->v[k] = in_data[i][k];
      }
      if (used[i]) {
        char sh[64];
        format_shape(sh, sizeof sh, v->rank, v->dim);
        shapes_len += (size_t)snprintf(shapes + shapes_len, sizeof shapes - shapes_len, "%sx%d %s",
                                       shapes_len ? ", " : "", i, sh);
        DLTensor t;
        memset(&t, 0, sizeof t);
        t.data = in_data[i];
        t.device.device_type = kDLCPU;
        t.ndim = v->rank;
        t.dtype.code = kDLFloat;
        t.dtype.bits = 32;
        t.dtype.lanes = 1;
        t.shape = v->dim;
        char name[16];
        snprintf(name, sizeof name, "x%d", i);
        s = nimble_vm_set_input_by_name(vm, "main", name, &t);
        if (s && msg.len == 0) {
          tprintf(&msg, "run %d (%s): set input %s: %s", run, shapes, name, nimble_status_message(s));
        }
        nimble_status_free(s);
      }
    }
    if (getenv("NIMBLE_PROPTEST_VERBOSE")) printf("  run %d: %s\n", run, shapes);
    char why[256] = "";
    bool shapes_ok = true;
    for (int i = g->num_inputs; i < g->num_nodes && shapes_ok; i++)
      shapes_ok = ref_eval(g, i, val, why, sizeof why);
    ck_assert_msg(shapes_ok, "seed %llu: generator made shapes that do not broadcast: %s",
                  (unsigned long long)seed, why);
    if (msg.len == 0) {
      s = nimble_vm_invoke(vm, "main");
      if (s) {
        tprintf(&msg, "run %d (%s): invoke failed: %s: %s", run, shapes,
                nimble_status_code_name(nimble_status_code(s)), nimble_status_message(s));
        nimble_status_free(s);
      }
    }
    if (msg.len == 0 && nimble_vm_num_outputs(vm) != (uint32_t)g->num_outputs)
      tprintf(&msg, "run %d (%s): %u outputs, expected %d", run, shapes, nimble_vm_num_outputs(vm), g->num_outputs);
    for (int o = 0; o < g->num_outputs && msg.len == 0; o++) {
      const ref_t *want = &val[g->outputs[o]];
      DLManagedTensor *got = NULL;
      s = nimble_vm_take_output(vm, (uint32_t)o, &got);
      if (s) {
        tprintf(&msg, "run %d (%s): output %d: %s", run, shapes, o, nimble_status_message(s));
        nimble_status_free(s);
        break;
      }
      const DLTensor *t = &got->dl_tensor;
      char gs[64], ws[64];
      format_shape(gs, sizeof gs, t->ndim, t->shape);
      format_shape(ws, sizeof ws, want->rank, want->dim);
      if (strcmp(gs, ws) != 0 || t->dtype.code != kDLFloat || t->dtype.bits != 32) {
        tprintf(&msg, "run %d (%s): output %d (value %d) has shape %s dtype %d/%d, expected %s float32", run, shapes,
                o, g->outputs[o], gs, t->dtype.code, t->dtype.bits, ws);
      } else {
        const float *gv = (const float *)((const char *)t->data + t->byte_offset);
        int64_t idx[MAX_RANK] = {0};
        for (size_t k = 0; k < want->count; k++) {
          double diff = fabs((double)gv[k] - want->v[k]);
          if (!(diff <= ATOL + RTOL * fabs(want->v[k])) && (double)gv[k] != want->v[k]) {
            char at[64];
            format_shape(at, sizeof at, want->rank, idx);
            tprintf(&msg, "run %d (%s): output %d (value %d) of shape %s at index %s: got %.9g, expected %.9g", run,
                    shapes, o, g->outputs[o], ws, at, gv[k], want->v[k]);
            break;
          }
          next_index(want->rank, want->dim, idx);
        }
      }
      got->deleter(got);
    }
    for (int i = 0; i < g->num_nodes; i++) free(val[i].v);
    for (int i = 0; i < g->num_inputs; i++) free(in_data[i]);
    sum->run_s += now_s() - t0;
  }
  nimble_vm_destroy(vm);

done:
  if (exe) nimble_executable_release(exe);
  if (msg.len) {
    text_t t = {0};
    tprintf(&t,
            "seed %llu (replay: NIMBLE_PROPTEST_SEED=%llu NIMBLE_PROPTEST_CASES=1), opt level %d: %s\n%s\n",
            (unsigned long long)seed, (unsigned long long)seed, g->opt_level, msg.buf, nir);
    fault = t.buf;
  }
  free(msg.buf);
  free(nir);
  free(g);
  return fault;
}

static uint64_t env_u64(const char *name, uint64_t dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end = NULL;
  unsigned long long x = strtoull(v, &end, 0);
  ck_assert_msg(end && *end == '\0', "%s='%s' is not a number", name, v);
  return (uint64_t)x;
}

static void run_seed(uint64_t seed, const char *tmpdir, summary_t *sum, int *ran) {
  int ops = 0;
  char *fault = run_case(seed, tmpdir, sum, &ops);
  (*ran)++;
  if (fault) {
    sum->failures++;
    printf("FAIL %s", fault);
    append_report(sum, fault);
    free(fault);
  }
}

START_TEST(test_random_graphs_compiled_for_x86_match_a_plain_c_interpreter) {
  uint64_t base = env_u64("NIMBLE_PROPTEST_SEED", kDefaultSeed);
  uint64_t cases = env_u64("NIMBLE_PROPTEST_CASES", kDefaultCases);
  const char *tmp = getenv("TMPDIR");
  char tmpdir[512];
  snprintf(tmpdir, sizeof tmpdir, "%s/nimble-proptest-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  ck_assert_msg(mkdtemp(tmpdir) != NULL, "mkdtemp %s failed", tmpdir);

  summary_t sum = {0};
  int ran = 0;
  double t0 = now_s();
  for (size_t i = 0; i < kNumRegressionSeeds; i++) run_seed(kRegressionSeeds[i], tmpdir, &sum, &ran);
  for (uint64_t i = 0; i < cases; i++) run_seed(base + i, tmpdir, &sum, &ran);
  rmdir(tmpdir);
  printf("random graphs: %d cases (seeds %llu..%llu and %zu regression seeds), %d failed; "
         "%.1f s compiling, %.2f s running and checking, %.1f s in all\n",
         ran, (unsigned long long)base, (unsigned long long)(base + cases - 1), kNumRegressionSeeds, sum.failures,
         sum.compile_s, sum.run_s, now_s() - t0);
  fflush(stdout);
  ck_assert_msg(sum.failures == 0, "%d of %d random graphs differ from the C interpreter:\n%s", sum.failures, ran,
                sum.report);
  free(sum.report);
}
END_TEST

int main(void) {
  Suite *s = suite_create("random_graphs");
  TCase *tc = tcase_create("x86");
  /* About a minute on an idle machine; the margin is for a loaded one and
   * the sanitizer build. */
  tcase_set_timeout(tc, 1800);
  tcase_add_test(tc, test_random_graphs_compiled_for_x86_match_a_plain_c_interpreter);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
