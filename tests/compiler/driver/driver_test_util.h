/* Helpers of the driver's suites: compile with nimble_compile_file, load
 * the result into the runtime, run reference-model cases from .npy files
 * and compare within the model's tolerance. */
#ifndef NIMBLE_DRIVER_TEST_UTIL_H
#define NIMBLE_DRIVER_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "nimble/compile.h"
#include "nimble/runtime.h"

/* Compiles `path` for `target` (opt level 2) into a loaded executable;
 * returns the status of the compile (the caller owns it); on success
 * *exe is the caller's. */
nimble_status_t dt_compile_and_load(const char *path, const char *target, nimble_executable **exe);

/* $NIMBLE_MODELS_DIR/<rel>, or NULL (test aborted) when the env is unset.
 * Caller frees. */
char *dt_models_path(const char *rel);

/* Runs every case of reference model `name` (NAME.json in the models
 * folder) on `exe` and checks each output: |got - want| <= atol + rtol *
 * |want| for floats, equality for integers, shapes equal. Fails the test
 * on any mismatch with the case, output, index and values. Returns the
 * number of cases run. */
int dt_run_reference_cases(nimble_executable *exe, const char *name);

/* Fails the test unless `got` matches `want` (shape, dtype, values within
 * atol + rtol * |want| for float32, equal otherwise); messages name the
 * model, case and output. */
void dt_compare(const char *model, int case_id, const char *out_name, const DLTensor *got, const DLTensor *want,
                double rtol, double atol);

#endif
