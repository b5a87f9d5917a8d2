/* Helpers of the driver's suites: compile with nimble_compile_file, load
 * the result into the runtime, run reference-model cases from .npy files
 * and compare within the model's tolerance. */
#ifndef NIMBLE_DRIVER_TEST_UTIL_H
#define NIMBLE_DRIVER_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "nimble/compile.h"
#include "nimble/runtime.h"

/* The compile options the suites use: the defaults for `target`, with the
 * suite's kernel cache (tests/support/nimble_test_kernel_cache.h). */
nimble_compile_options_t dt_compile_options(const char *target);

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

/* One case of a reference model, as NAME.json lists it: input and output
 * names (the model's, in the json's order: outputs in the model's output
 * order) with the absolute paths of their .npy files. */
typedef struct dt_ref_case {
  int id;
  const char *note; /* may be NULL */
  size_t num_inputs;
  const char **input_names;
  char **input_paths;
  size_t num_outputs;
  const char **output_names;
  char **output_paths;
} dt_ref_case_t;

/* A reference model's cases and tolerance, loaded from NAME.json in the
 * models folder. Names and notes point into the loaded json and live as
 * long as the model; dt_ref_model_deinit frees everything. */
typedef struct dt_ref_model {
  double rtol, atol;
  size_t num_cases;
  dt_ref_case_t *cases;
  void *json_; /* the parsed json (json_t *), owned */
} dt_ref_model_t;

/* Loads NAME.json (fails the test when it is unreadable or has no
 * tolerance, outputs or cases). */
void dt_ref_model_load(const char *name, dt_ref_model_t *m);
void dt_ref_model_deinit(dt_ref_model_t *m);

#endif
