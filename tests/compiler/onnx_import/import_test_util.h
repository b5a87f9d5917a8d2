/* Helpers for the importer's suites: import + type-check a file, format
 * the types of @main's parameters and results, and read the dims of an
 * ONNX TensorProto file (the node suite's expected outputs) with a small
 * independent protobuf reader. */
#ifndef NIMBLE_IMPORT_TEST_UTIL_H
#define NIMBLE_IMPORT_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/arena.h"
#include "nimble/ir.h"
#include "nimble/onnx_import.h"
#include "nimble/typing.h"

/* Imports `path` into a module in `arena` and type-checks it. */
nimble_status_t import_test_check_file(nimble_arena *arena, const char *path, nimble_module **m,
                                       nimble_typing **t);

/* The inferred result type of @main as text ("Tensor[(1, seq, 128), float32]"
 * or a tuple) into buf; returns buf. */
const char *import_test_main_result(const nimble_typing *t, char *buf, size_t size);

/* The inferred type of @main's result field i (or the result when it is not
 * a tuple and i == 0); NULL when absent. */
const nimble_type *import_test_main_output(const nimble_typing *t, size_t i);

/* Reads dims and data_type (fields 1 and 2) of a serialized TensorProto.
 * 0 on success, -1 on a malformed or non-tensor file. */
int import_test_tensor_dims(const char *path, int64_t *dims, size_t cap, size_t *rank, int *dtype);

/* "$env/rel" into buf; NULL when env is unset. */
const char *import_test_path(const char *env, const char *rel, char *buf, size_t size);

#endif
