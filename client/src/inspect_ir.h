/* What `nimble inspect --json` prints of a typed module: the compiler's
 * summary (nimble/typed_module.h: entry inputs and outputs, operator
 * counts, control flow, dynamic dims) as JSON. The typed IR itself is the
 * compiler's nimble_typed_module_annotate, printed by the IR printer.
 * Private to the client. */
#ifndef NIMBLE_CLI_INSPECT_IR_H
#define NIMBLE_CLI_INSPECT_IR_H

#include <jansson.h>

#include "nimble/ir.h"
#include "nimble/status.h"
#include "nimble/typing.h"

/* The JSON summary of a typed module; *out is a new reference the caller
 * releases with json_decref. `source` (borrowed) names the file, `format`
 * its kind ("nir", "onnx"). `output_names` (borrowed, may be NULL) names
 * the entry's outputs when the source knows them (ONNX graphs do). */
nimble_status_t nimble_cli_summarize_module(const nimble_module *m, const nimble_typing *t,
                                            const char *source, const char *format,
                                            const char *const *output_names,
                                            size_t num_output_names, json_t **out);

#endif
