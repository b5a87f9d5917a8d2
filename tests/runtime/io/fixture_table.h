/* The fixtures make_fixtures.py writes with NumPy and ONNX, as the C tests
 * expect them: name, element type and shape, written down by hand. */
#ifndef NIMBLE_RTIO_FIXTURE_TABLE_H
#define NIMBLE_RTIO_FIXTURE_TABLE_H

#include <dlpack/dlpack.h>
#include <stdint.h>

typedef struct fixture_case {
  const char *name;
  DLDataType dtype;
  int ndim;
  int64_t shape[4];
} fixture_case;

static const fixture_case FIXTURES[] = {
    {"f4_2x3", {kDLFloat, 32, 1}, 2, {2, 3}},
    {"f8_4", {kDLFloat, 64, 1}, 1, {4}},
    {"f2_3", {kDLFloat, 16, 1}, 1, {3}},
    {"i1_5", {kDLInt, 8, 1}, 1, {5}},
    {"i2_2x2", {kDLInt, 16, 1}, 2, {2, 2}},
    {"i4_3", {kDLInt, 32, 1}, 1, {3}},
    {"i8_2x1x2", {kDLInt, 64, 1}, 3, {2, 1, 2}},
    {"u1_4", {kDLUInt, 8, 1}, 1, {4}},
    {"u2_2", {kDLUInt, 16, 1}, 1, {2}},
    {"u4_2", {kDLUInt, 32, 1}, 1, {2}},
    {"u8_2", {kDLUInt, 64, 1}, 1, {2}},
    {"b1_2x2", {kDLUInt, 1, 1}, 2, {2, 2}},
    {"f4_scalar", {kDLFloat, 32, 1}, 0, {0}},
    {"f4_0x3", {kDLFloat, 32, 1}, 2, {0, 3}},
    {"f4_special", {kDLFloat, 32, 1}, 1, {4}},
    {"f4_1x2x3x4", {kDLFloat, 32, 1}, 4, {1, 2, 3, 4}},
};
#define N_FIXTURES (sizeof(FIXTURES) / sizeof(FIXTURES[0]))

#endif
