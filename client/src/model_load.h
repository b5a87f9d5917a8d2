/* Loading a model for the client's commands: a .nir program through the
 * text frontend, a .onnx model through the ONNX importer (when the build
 * has it). Private to the client. */
#ifndef NIMBLE_CLI_MODEL_LOAD_H
#define NIMBLE_CLI_MODEL_LOAD_H

#include <stddef.h>

#include "nimble/arena.h"
#include "nimble/ir.h"
#include "nimble/status.h"

typedef struct nimble_cli_model {
  nimble_module *module;    /* in the arena */
  const char *format;       /* "nir" or "onnx" (static) */
  /* The entry's output names when the source has them (ONNX graph
   * outputs); arena strings, NULL/0 otherwise. */
  const char *const *output_names;
  size_t num_output_names;
} nimble_cli_model;

/* Loads `path` into `arena`. Errors name the file: "cannot open PATH: ...",
 * "PATH:LINE:COL: ...", "PATH: unknown model format ...". */
nimble_status_t nimble_cli_model_load(nimble_arena *arena, const char *path,
                                      nimble_cli_model *out);

#endif
