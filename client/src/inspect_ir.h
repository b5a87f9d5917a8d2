/* What `nimble inspect` shows of a typed module: the IR with every binding
 * annotated by its inferred type, and a JSON summary (entry inputs and
 * outputs, operator counts, control flow, dynamic dims). Private to the
 * client. */
#ifndef NIMBLE_CLI_INSPECT_IR_H
#define NIMBLE_CLI_INSPECT_IR_H

#include <jansson.h>

#include "nimble/ir.h"
#include "nimble/status.h"
#include "nimble/typing.h"

/* Rebuilds every global function of `m` with its inferred types written
 * out: parameters and `let`, pattern and closure variables get their type
 * as annotation, functions their return type. `t` is the typing of `m`
 * (its results stay valid: the old expressions live on in the arena).
 * Constants of more than `elide_above` elements (0: none) are replaced by
 * a variable named like the constant without its elements,
 * %"const[(512, 784), float32]{...}", for display only: the result is no
 * longer a closed program. */
nimble_status_t nimble_cli_annotate_module(nimble_module *m, const nimble_typing *t,
                                           size_t elide_above);

/* The JSON summary of a typed module; *out is a new reference the caller
 * releases with json_decref. `source` (borrowed) names the file, `format`
 * its kind ("nir", "onnx"). `output_names` (borrowed, may be NULL) names
 * the entry's outputs when the source knows them (ONNX graphs do). */
nimble_status_t nimble_cli_summarize_module(const nimble_module *m, const nimble_typing *t,
                                            const char *source, const char *format,
                                            const char *const *output_names,
                                            size_t num_output_names, json_t **out);

#endif
