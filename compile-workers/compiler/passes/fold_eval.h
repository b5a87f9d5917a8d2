/* The constant folder's evaluator (private to the passes). */
#ifndef NIMBLE_PASSES_FOLD_EVAL_H
#define NIMBLE_PASSES_FOLD_EVAL_H

#include "passes/pass_internal.h"

/* Evaluates operator call `call` whose arguments are all constants. *out is
 * the result constant (in arena `a`), or NULL when the operator or its
 * inputs are not foldable (the call then stays as it is). */
nimble_status_t pass_fold_eval(nimble_arena *a, const nimble_expr *call, const nimble_expr **out);

#endif
