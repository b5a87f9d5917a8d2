/* Helpers shared by the compiler suites. */
#ifndef NIMBLE_COMPILER_TEST_UTIL_H
#define NIMBLE_COMPILER_TEST_UTIL_H

#include <stddef.h>

#include "nimble/arena.h"
#include "nimble/ir.h"
#include "nimble/nir.h"
#include "nimble/typing.h"

/* $NIMBLE_SOURCE_DIR/rel (falls back to the path this file was built
 * from). Caller frees. */
char *test_source_path(const char *rel);

/* Parses text, failing the test with the message on error. */
nimble_module *test_parse(nimble_arena *a, const char *text);
/* Parses and type-checks text, failing the test on error. */
nimble_typing *test_check(nimble_arena *a, const char *text, nimble_module **m_out);
/* The status of parsing + type-checking text (for error tests). */
nimble_status_t test_check_status(nimble_arena *a, const char *text);
/* The inferred type of global `name` as text, into buf. */
const char *test_global_type(nimble_typing *t, const char *name, char *buf, size_t size);

#endif
