/* The kernels of the lowering suites' programs, written by hand in C
 * against nimble/kernel_abi.h (the code generator's job in production).
 * Each program is lowered with its own symbol prefix, so a primitive named
 * "fused.add" is "branches_fused_add" (x + 1.0) in one program and
 * "list_sum_fused_add" (a + b) in another; each kernel below computes what
 * its primitive's body says (see the comment beside it). Every kernel
 * checks its argument count, dtypes and element counts. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "nimble/kernel_abi.h"

#define EXPORT __attribute__((visibility("default")))

static int64_t numel(const DLTensor *t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

static int is(const DLTensor *t, int code, int bits) {
  return t->dtype.code == code && t->dtype.bits == bits && t->dtype.lanes == 1;
}

static int fail(const nimble_kernel_env_t *env, const char *kernel, const char *what) {
  char msg[160];
  snprintf(msg, sizeof msg, "%s: %s", kernel, what);
  env->set_error(env, msg);
  return 1;
}

enum { F32 = kDLFloat, I64 = kDLInt, BOOL = kDLUInt };

/* Checks args: `n` of them with the given dtype codes (bits follow: f32
 * 32, i64 64, bool 1: the runtime's bool, {kDLUInt, 1, 1}, one byte per
 * element), and that every input has one element or as many as
 * the output (the last argument). */
static int check(DLTensor *const *args, int32_t num_args, const nimble_kernel_env_t *env,
                 const char *kernel, int n, const int *codes) {
  if (num_args != n) return fail(env, kernel, "wrong argument count");
  for (int i = 0; i < n; i++) {
    int bits = codes[i] == F32 ? 32 : codes[i] == I64 ? 64 : 1;
    if (!is(args[i], codes[i], bits)) return fail(env, kernel, "wrong dtype");
  }
  int64_t out = numel(args[n - 1]);
  for (int i = 0; i < n - 1; i++)
    if (numel(args[i]) != 1 && numel(args[i]) != out) return fail(env, kernel, "shape mismatch");
  return 0;
}

#define AT(t, T, i) (((const T *)(t)->data)[numel(t) == 1 ? 0 : (i)])

/* out = EXPR over x (input 0) */
#define UNARY(sym, TIN, CIN, TOUT, COUT, EXPR)                                                      \
  EXPORT int32_t sym(DLTensor *const *args, int32_t num_args, const nimble_kernel_env_t *env) {     \
    static const int codes[] = {CIN, COUT};                                                         \
    if (check(args, num_args, env, #sym, 2, codes)) return 1;                                      \
    int64_t n = numel(args[1]);                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                               \
      TIN x = AT(args[0], TIN, i);                                                                  \
      ((TOUT *)args[1]->data)[i] = (TOUT)(EXPR);                                                    \
    }                                                                                               \
    return 0;                                                                                       \
  }

/* out = EXPR over a, b (inputs 0 and 1, broadcast from one element) */
#define BINARY(sym, TIN, CIN, TOUT, COUT, EXPR)                                                     \
  EXPORT int32_t sym(DLTensor *const *args, int32_t num_args, const nimble_kernel_env_t *env) {     \
    static const int codes[] = {CIN, CIN, COUT};                                                    \
    if (check(args, num_args, env, #sym, 3, codes)) return 1;                                      \
    int64_t n = numel(args[2]);                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                               \
      TIN a = AT(args[0], TIN, i), b = AT(args[1], TIN, i);                                         \
      ((TOUT *)args[2]->data)[i] = (TOUT)(EXPR);                                                    \
    }                                                                                               \
    return 0;                                                                                       \
  }

/* branches.nir */
UNARY(branches_fused_greater, float, F32, uint8_t, BOOL, x > 0.0f)     /* greater(p0, 0.0) */
UNARY(branches_fused_multiply, float, F32, float, F32, x * 2.0f)       /* multiply(p0, 2.0) */
UNARY(branches_fused_negative, float, F32, float, F32, -x)             /* negative(p0) */
UNARY(branches_fused_add, float, F32, float, F32, x + 1.0f)            /* add(p0, 1.0) */
UNARY(branches_fused_less, float, F32, uint8_t, BOOL, x < 10.0f)       /* less(p0, 10.0) */

/* closures.nir */
UNARY(closures_fused_add, float, F32, float, F32, x + x)               /* add(p0, p0) */
BINARY(closures_fused_multiply, float, F32, float, F32, a * b)         /* multiply(p0, p1) */
BINARY(closures_fused_add_1, float, F32, float, F32, a + b)            /* add(p0, p1) */

/* list_sum.nir */
UNARY(list_sum_fused_less_equal, float, F32, uint8_t, BOOL, x <= 0.0f) /* less_equal(p0, 0.0) */
UNARY(list_sum_fused_subtract, float, F32, float, F32, x - 1.0f)       /* subtract(p0, 1.0) */
BINARY(list_sum_fused_add, float, F32, float, F32, a + b)              /* add(p0, p1) */

/* loop.nir */
BINARY(loop_fused_greater_equal, int64_t, I64, uint8_t, BOOL, a >= b)  /* greater_equal(p0, p1) */
UNARY(loop_fused_add, int64_t, I64, int64_t, I64, x + 1)               /* add(p0, 1) */
UNARY(loop_fused_add_1, float, F32, float, F32, x + 0.5f)              /* add(p0, 0.5) */

/* nested_match.nir */
UNARY(nested_match_fused_multiply, float, F32, float, F32, x * 10.0f)  /* multiply(p0, 10.0) */

/* partial_match.nir */
UNARY(partial_match_fused_greater, float, F32, uint8_t, BOOL, x > 0.0f) /* greater(p0, 0.0) */

/* recursion.nir */
UNARY(recursion_fused_less_equal, int64_t, I64, uint8_t, BOOL, x <= 1) /* less_equal(p0, 1) */
UNARY(recursion_fused_subtract, int64_t, I64, int64_t, I64, x - 1)     /* subtract(p0, 1) */
BINARY(recursion_fused_multiply, int64_t, I64, int64_t, I64, a * b)    /* multiply(p0, p1) */
UNARY(recursion_fused_less, int64_t, I64, uint8_t, BOOL, x < 2)        /* less(p0, 2) */
UNARY(recursion_fused_subtract_1, int64_t, I64, int64_t, I64, x - 1)   /* subtract(p0, 1) */
UNARY(recursion_fused_subtract_2, int64_t, I64, int64_t, I64, x - 2)   /* subtract(p0, 2) */
BINARY(recursion_fused_add, int64_t, I64, int64_t, I64, a + b)         /* add(p0, p1) */

/* tree_fold.nir */
BINARY(tree_fold_fused_add, float, F32, float, F32, a + b)             /* add(p0, p1) */
BINARY(tree_fold_fused_multiply, float, F32, float, F32, a * b)        /* multiply(p0, p1) */

/* swap.nir */
UNARY(swap_fused_equal, int64_t, I64, uint8_t, BOOL, x == 0)           /* equal(p0, 0) */
BINARY(swap_fused_mod, int64_t, I64, int64_t, I64, b ? a % b : 0)      /* mod(p0, p1), positive here */
UNARY(swap_fused_less_equal, int64_t, I64, uint8_t, BOOL, x <= 0)      /* less_equal(p0, 0) */
UNARY(swap_fused_subtract, int64_t, I64, int64_t, I64, x - 1)          /* subtract(p0, 1) */

/* list_map.nir */
UNARY(list_map_fused_less_equal, float, F32, uint8_t, BOOL, x <= 0.0f) /* less_equal(p0, 0.0) */
UNARY(list_map_fused_subtract, float, F32, float, F32, x - 1.0f)       /* subtract(p0, 1.0) */
BINARY(list_map_fused_add, float, F32, float, F32, a + b)              /* add(p0, p1) */
UNARY(list_map_fused_multiply, float, F32, float, F32, x * 1.0f)       /* multiply(p0, 1.0) */
UNARY(list_map_fused_add_1, int64_t, I64, int64_t, I64, x + 1)         /* add(p0, 1) */
BINARY(list_map_fused_multiply_1, float, F32, float, F32, a * b)       /* multiply(p0, p1) */

/* chain (a long let chain of calls to @inc, built by the suite) */
UNARY(chain_fused_add, float, F32, float, F32, x + 1.0f)               /* add(p0, 1.0) */

/* mlp.nir: y[i, j] = sum_k x[i, k] * w[j, k] (+ b[j], relu) */
static int dense(DLTensor *const *args, int32_t num_args, const nimble_kernel_env_t *env,
                 const char *sym, int bias_relu) {
  int n = bias_relu ? 4 : 3;
  if (num_args != n) return fail(env, sym, "wrong argument count");
  for (int i = 0; i < n; i++)
    if (!is(args[i], F32, 32)) return fail(env, sym, "wrong dtype");
  const DLTensor *x = args[0], *w = args[1], *y = args[n - 1];
  if (x->ndim != 2 || w->ndim != 2 || y->ndim != 2 || x->shape[1] != w->shape[1] ||
      y->shape[0] != x->shape[0] || y->shape[1] != w->shape[0] ||
      (bias_relu && (args[2]->ndim != 1 || args[2]->shape[0] != w->shape[0])))
    return fail(env, sym, "shape mismatch");
  const float *xd = x->data, *wd = w->data;
  float *yd = y->data;
  int64_t rows = x->shape[0], cols = w->shape[0], depth = x->shape[1];
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      float acc = 0.0f;
      for (int64_t k = 0; k < depth; k++) acc += xd[i * depth + k] * wd[j * depth + k];
      if (bias_relu) {
        acc += ((const float *)args[2]->data)[j];
        if (acc < 0.0f) acc = 0.0f;
      }
      yd[i * cols + j] = acc;
    }
  return 0;
}

EXPORT int32_t mlp_fused_dense_add_relu(DLTensor *const *args, int32_t num_args,
                                        const nimble_kernel_env_t *env) {
  return dense(args, num_args, env, "mlp_fused_dense_add_relu", 1);
}

EXPORT int32_t mlp_fused_dense(DLTensor *const *args, int32_t num_args, const nimble_kernel_env_t *env) {
  return dense(args, num_args, env, "mlp_fused_dense", 0);
}

/* The shape function of fused.dense_add_relu (data independent): from the
 * shapes of x [n, 2], w [3, 2] and b [3], the output shape [n, 3]. */
static int dense_shape(DLTensor *const *args, int32_t num_args, const nimble_kernel_env_t *env,
                       const char *sym, int inputs) {
  if (num_args != inputs + 1) return fail(env, sym, "wrong argument count");
  for (int i = 0; i <= inputs; i++)
    if (!is(args[i], I64, 64) || args[i]->ndim != 1) return fail(env, sym, "shapes are 1-D int64");
  if (args[0]->shape[0] != 2 || args[1]->shape[0] != 2 || args[inputs]->shape[0] != 2)
    return fail(env, sym, "rank mismatch");
  const int64_t *xs = args[0]->data, *ws = args[1]->data;
  if (xs[1] != ws[1]) return fail(env, sym, "inner dims differ");
  int64_t *out = args[inputs]->data;
  out[0] = xs[0];
  out[1] = ws[0];
  return 0;
}

EXPORT int32_t mlp_fused_dense_add_relu_shape(DLTensor *const *args, int32_t num_args,
                                              const nimble_kernel_env_t *env) {
  return dense_shape(args, num_args, env, "mlp_fused_dense_add_relu_shape", 3);
}

EXPORT int32_t mlp_fused_dense_shape(DLTensor *const *args, int32_t num_args,
                                     const nimble_kernel_env_t *env) {
  return dense_shape(args, num_args, env, "mlp_fused_dense_shape", 2);
}

/* storage_size_r2_e4: prod(shape) * 4 */
EXPORT int32_t mlp_fused_storage_size_r2_e4(DLTensor *const *args, int32_t num_args,
                                            const nimble_kernel_env_t *env) {
  const char *sym = "mlp_fused_storage_size_r2_e4";
  if (num_args != 2 || !is(args[0], I64, 64) || !is(args[1], I64, 64) || args[0]->ndim != 1 ||
      args[0]->shape[0] != 2 || numel(args[1]) != 1)
    return fail(env, sym, "takes a [2] int64 shape and an int64 scalar");
  const int64_t *s = args[0]->data;
  *(int64_t *)args[1]->data = s[0] * s[1] * 4;
  return 0;
}

/* dynamic.nir: unique(x) is upper-bound: its shape function gives the
 * bound (as many values as x has), the kernel writes the sorted distinct
 * values and their real count as an extra int64 [1] output. */
EXPORT int32_t dynamic_fused_unique_shape(DLTensor *const *args, int32_t num_args,
                                          const nimble_kernel_env_t *env) {
  const char *sym = "dynamic_fused_unique_shape";
  if (num_args != 2 || !is(args[0], I64, 64) || !is(args[1], I64, 64) || args[1]->ndim != 1 ||
      args[1]->shape[0] != 1)
    return fail(env, sym, "takes x (int64) and an int64 [1] shape");
  *(int64_t *)args[1]->data = numel(args[0]);
  return 0;
}

EXPORT int32_t dynamic_fused_storage_size_r1_e8(DLTensor *const *args, int32_t num_args,
                                                const nimble_kernel_env_t *env) {
  const char *sym = "dynamic_fused_storage_size_r1_e8";
  if (num_args != 2 || !is(args[0], I64, 64) || !is(args[1], I64, 64) || args[0]->ndim != 1 ||
      args[0]->shape[0] != 1 || numel(args[1]) != 1)
    return fail(env, sym, "takes a [1] int64 shape and an int64 scalar");
  *(int64_t *)args[1]->data = *(const int64_t *)args[0]->data * 8;
  return 0;
}

EXPORT int32_t dynamic_fused_unique(DLTensor *const *args, int32_t num_args,
                                    const nimble_kernel_env_t *env) {
  const char *sym = "dynamic_fused_unique";
  if (num_args != 3 || !is(args[0], I64, 64) || !is(args[1], I64, 64) || !is(args[2], I64, 64) ||
      numel(args[1]) != numel(args[0]) || numel(args[2]) != 1)
    return fail(env, sym, "takes x, values at the bound and an int64 [1] count");
  const int64_t *x = args[0]->data;
  int64_t *v = args[1]->data, n = 0;
  for (int64_t i = 0; i < numel(args[0]); i++) {
    int64_t k = 0;
    while (k < n && v[k] < x[i]) k++;
    if (k < n && v[k] == x[i]) continue;
    for (int64_t j = n; j > k; j--) v[j] = v[j - 1];
    v[k] = x[i];
    n++;
  }
  *(int64_t *)args[2]->data = n;
  return 0;
}

/* dyn_reshape(f, s) is data-dependent: the shape is s's values, with one
 * -1 standing for what is left. */
EXPORT int32_t dynamic_fused_dyn_reshape_shape(DLTensor *const *args, int32_t num_args,
                                               const nimble_kernel_env_t *env) {
  const char *sym = "dynamic_fused_dyn_reshape_shape";
  if (num_args != 3 || !is(args[0], F32, 32) || !is(args[1], I64, 64) || !is(args[2], I64, 64) ||
      numel(args[1]) != 2 || numel(args[2]) != 2)
    return fail(env, sym, "takes f, a [2] int64 shape and an int64 [2] output");
  const int64_t *s = args[1]->data;
  int64_t *o = args[2]->data, n = numel(args[0]);
  o[0] = s[0];
  o[1] = s[1];
  if (o[0] == -1 && o[1] > 0) o[0] = n / o[1];
  if (o[1] == -1 && o[0] > 0) o[1] = n / o[0];
  if (o[0] < 0 || o[1] < 0 || o[0] * o[1] != n) return fail(env, sym, "the shape does not fit");
  return 0;
}

/* The suite's hand-written explicit-memory program: two primitives whose
 * names mangle alike ("fused.a_b" and "fused.a.b"). */
UNARY(hand_fused_a_b, float, F32, float, F32, -x)                      /* negative(p0) */
UNARY(hand_fused_a_b_2, float, F32, float, F32, x * 2.0f)              /* multiply(p0, 2.0) */
