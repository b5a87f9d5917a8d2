/* Shape-function helpers for the operator suites. */
#ifndef NIMBLE_OPS_TEST_UTIL_H
#define NIMBLE_OPS_TEST_UTIL_H

#include <stddef.h>

#include "nimble/op.h"

/* A float32 input of shape "2x3x4" ("" is a scalar). */
nimble_shape_input_t in_shape(const char *dims);
/* An input with a dtype and (possibly NULL) values. */
nimble_shape_input_t in_values(nimble_dtype_t dtype, const char *dims, const void *data);
/* Runs op's shape function with attributes written as in .nir (parsed by
 * the real parser from a call) and returns "(2, 12)" per output, joined by
 * spaces, or "error: MESSAGE". The result lives until the next call. */
const char *shapes(const char *op, const char *attrs, size_t n, const nimble_shape_input_t *in);

#define IN(...) ((const nimble_shape_input_t[]){__VA_ARGS__})
#define SHAPES1(op, attrs, a) shapes(op, attrs, 1, IN(in_shape(a)))
#define SHAPES2(op, attrs, a, b) shapes(op, attrs, 2, IN(in_shape(a), in_shape(b)))

#endif
