/* Helpers of the pass suites: parse .nir text, run a pass, re-check types
 * and compare with the expected program (parsed too), printing both on a
 * mismatch so a failure reads as a diff. */
#ifndef NIMBLE_PASSES_TEST_UTIL_H
#define NIMBLE_PASSES_TEST_UTIL_H

#include <stddef.h>

#include "nimble/arena.h"
#include "nimble/ir.h"
#include "nimble/nir.h"
#include "nimble/passes.h"
#include "nimble/typing.h"

typedef nimble_status_t (*pt_pass_fn)(nimble_module *m);

/* Parses and type-checks text (fails the test on error). */
nimble_module *pt_parse(nimble_arena *a, const char *text);
/* Reads tests/compiler/passes/programs/<name> (malloc'ed: caller frees). */
char *pt_load(const char *name);
/* Runs passes[0..n) on a parsed `input`, type-checking after each. */
nimble_module *pt_run(nimble_arena *a, const char *input, const pt_pass_fn *passes, size_t n);
/* Fails unless m equals the parsed `expected` (up to variable names). */
void pt_assert_equal(const nimble_module *m, const char *expected);
/* pt_run with one pass, then pt_assert_equal. */
void pt_expect(pt_pass_fn pass, const char *input, const char *expected);
/* Calls of operator `op` in every function of m (walking all nesting). */
size_t pt_count_op(const nimble_module *m, const char *op);
/* Calls of globals whose name starts with `prefix`. */
size_t pt_count_global_calls(const nimble_module *m, const char *prefix);

/* Operator calls outside primitive functions other than shape_of and the
 * memory operators: what lowering could not turn into VM instructions
 * (0 after manifest_memory). */
size_t pt_count_kernel_ops_outside_primitives(const nimble_module *m);

#endif
