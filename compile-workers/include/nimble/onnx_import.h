/* ONNX → IR importer: turns a loaded ONNX model (nimble/onnx_model.h) into
 * a module of the compiler's IR (nimble/ir.h).
 *
 * The module's `@main` takes the graph's inputs as parameters (in order,
 * names preserved; inputs that only carry an initializer's default become
 * constants) and returns the graph's outputs (a tuple when there is more than
 * one). Its body is a `let` chain, one binding per operator.
 *
 *   - Graph input dims become constants, symbolic dims (one variable per
 *     dim_param name, e.g. `seq`) or `?` (unknown).
 *   - Initializers and Constant nodes become constants. Shape arithmetic on
 *     known values (Shape → Gather → Concat → Reshape, ...) is folded, so a
 *     symbolic dim survives a run-time reshape.
 *   - If becomes an IR `if`; Loop and Scan a recursive global function over
 *     their carried values (scan outputs accumulated by concatenation);
 *     LSTM and GRU a recursive global over time steps built from matmul and
 *     element-wise operators.
 *   - Every error names the node: "node 'lstm_0' (LSTM): ...".
 *
 * docs/onnx-import.md lists the mapping of each ONNX operator.
 */
#ifndef NIMBLE_ONNX_IMPORT_H
#define NIMBLE_ONNX_IMPORT_H

#include "nimble/arena.h"
#include "nimble/ir.h"
#include "nimble/onnx_model.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nimble_onnx_import_options {
  /* Name of the entry function; NULL gives "main". */
  const char *entry_name;
} nimble_onnx_import_options_t;

/* Imports `model` (borrowed; it may be destroyed once this returns: every
 * constant is copied) into a new module allocated in `arena`. `options` may
 * be NULL. On success *out is owned by the arena; on failure it is NULL
 * and the status names the node at fault (name and op type). */
nimble_status_t nimble_onnx_import_model(nimble_arena *arena, const nimble_onnx_model *model,
                                         const nimble_onnx_import_options_t *options,
                                         nimble_module **out);

/* Loads the file at `path` (nimble_onnx_model_load_file) and imports it;
 * the model is freed before returning. Errors are prefixed with the path. */
nimble_status_t nimble_onnx_import_file(const char *path, nimble_arena *arena,
                                        const nimble_onnx_import_options_t *options,
                                        nimble_module **out);

/* Whether the importer converts `op_type` of the default ONNX domain (for
 * coverage reports; a converter may still reject some attribute values). */
int nimble_onnx_import_supports(const char *op_type);

/* The i-th operator type the importer converts (default domain), in table
 * order; NULL past the end. Static strings. */
const char *nimble_onnx_import_supported_op(size_t i);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_ONNX_IMPORT_H */
