#include "ops_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"

/* A float32 input of shape "2x3x4" ("" is a scalar). */
nimble_shape_input_t in_shape(const char *dims) {
  nimble_shape_input_t in;
  memset(&in, 0, sizeof in);
  in.dtype = NIMBLE_DTYPE_FLOAT32;
  const char *p = dims;
  while (*p) {
    char *end;
    in.shape.dims[in.shape.rank++] = strtoll(p, &end, 10);
    p = *end == 'x' ? end + 1 : end;
  }
  return in;
}

nimble_shape_input_t in_values(nimble_dtype_t dtype, const char *dims, const void *data) {
  nimble_shape_input_t in = in_shape(dims);
  in.dtype = dtype;
  in.data = data;
  return in;
}

/* Runs op's shape function with attributes written as in .nir (parsed by
 * the real parser from a call) and returns "(2, 12)" per output, joined by
 * spaces, or "error: MESSAGE". */
const char *shapes(const char *op, const char *attrs, size_t n, const nimble_shape_input_t *in) {
  static char result[1024];
  nimble_arena *a;
  nimble_module *m;
  char text[1024];
  size_t k = (size_t)snprintf(text, sizeof text, "def @f(");
  for (size_t i = 0; i < n; i++) k += (size_t)snprintf(text + k, sizeof text - k, "%s%%a%zu", i ? ", " : "", i);
  k += (size_t)snprintf(text + k, sizeof text - k, ") { %s(", op);
  for (size_t i = 0; i < n; i++) k += (size_t)snprintf(text + k, sizeof text - k, "%s%%a%zu", i ? ", " : "", i);
  snprintf(text + k, sizeof text - k, "%s%s) }", attrs[0] && n ? ", " : "", attrs);
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  NIMBLE_ASSERT_OK(nimble_nir_parse(a, "attrs.nir", text, strlen(text), &m));
  const nimble_expr *call = nimble_module_find_func(m, "f")->u.func.body;
  nimble_shape_t out[NIMBLE_MAX_OUTPUTS];
  size_t nout = 0;
  nimble_status_t s = nimble_op_compute_shapes(nimble_op_find(op), &call->u.call.attrs, in, n, out, &nout);
  if (s) {
    snprintf(result, sizeof result, "error: %s", nimble_status_message(s));
    nimble_status_free(s);
  } else {
    size_t r = 0;
    result[0] = '\0';
    for (size_t o = 0; o < nout; o++) {
      r += (size_t)snprintf(result + r, sizeof result - r, "%s(", o ? " " : "");
      for (size_t d = 0; d < out[o].rank; d++)
        r += (size_t)snprintf(result + r, sizeof result - r, "%s%lld", d ? ", " : "", (long long)out[o].dims[d]);
      r += (size_t)snprintf(result + r, sizeof result - r, ")");
    }
  }
  nimble_arena_destroy(a);
  return result;
}
