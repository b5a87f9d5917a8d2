/* The text frontend: parses a .nir program (the readable form of the IR,
 * documented in docs/ir.md) into a module.
 *
 *   nimble_module *m;
 *   NIMBLE_RETURN_IF_ERROR(nimble_nir_parse(arena, "model.nir", text, len, &m));
 *
 * A syntax error is NIMBLE_INVALID_ARGUMENT with the message
 * "FILE:LINE:COL: expected WHAT, found 'TOKEN'". Names are resolved while
 * parsing: unknown variables, globals, operators, constructors, types and
 * attributes are errors at their place. The module and everything in it
 * live in `arena`; `text` is borrowed for the call only.
 */
#ifndef NIMBLE_NIR_H
#define NIMBLE_NIR_H

#include <stddef.h>

#include "nimble/arena.h"
#include "nimble/ir.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

nimble_status_t nimble_nir_parse(nimble_arena *arena, const char *filename, const char *text,
                                 size_t len, nimble_module **out);

/* Reads and parses a file. */
nimble_status_t nimble_nir_parse_file(nimble_arena *arena, const char *path, nimble_module **out);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_NIR_H */
