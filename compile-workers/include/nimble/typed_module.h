/* Views of a typed module, for readers (`nimble inspect`, tools): the IR
 * with every binding annotated by its inferred type, and a summary of the
 * entry function's signature, the operators called and the control flow.
 * These are analyses; printing them (text, JSON) is the caller's business.
 *
 * Both take a module and its typing (nimble_typing_infer_module) and
 * allocate in the module's arena: results live as long as it.
 */
#ifndef NIMBLE_TYPED_MODULE_H
#define NIMBLE_TYPED_MODULE_H

#include <stdbool.h>
#include <stddef.h>

#include "nimble/ir.h"
#include "nimble/status.h"
#include "nimble/typing.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rebuilds every global function of `m` with its inferred types written
 * out: parameters and `let`, pattern and closure variables get their type
 * as annotation, functions their return type, and a binding whose name is
 * already bound in its function gets the first free "NAME_K", so the
 * printed text means what the IR means. `t` is the typing of `m` (its
 * results stay valid: the old expressions live on in the arena).
 * Constants of more than `elide_above` elements (0: none) are replaced by
 * a variable named like the constant without its elements,
 * %"const[(512, 784), float32]{...}", for display only: the result is no
 * longer a closed program. */
nimble_status_t nimble_typed_module_annotate(nimble_module *m, const nimble_typing *t,
                                             size_t elide_above);

/* An operator and how many calls of it the module makes. */
typedef struct nimble_op_calls_t {
  const char *op; /* the operator's registered name */
  size_t calls;
} nimble_op_calls_t;

/* Above this many globals the recursion check (n^2 bytes, n^3 steps) is
 * skipped and reported as unknown: 512 keeps it under a second. */
#define NIMBLE_SUMMARY_MAX_GLOBALS_FOR_RECURSION 512

typedef struct nimble_module_summary_t {
  /* The entry point: @main when there is one, else the last definition;
   * NULL for a module without functions (everything below is then empty). */
  const nimble_global_func_t *entry;
  /* The entry's parameters (their variables) and types: the inferred type,
   * else the signature's; NULL when neither is known. */
  size_t num_inputs;
  const nimble_expr *const *input_vars;
  const nimble_type *const *input_types;
  /* The entry's results: a tuple result is its fields (ONNX outputs), any
   * other result one output; none when the return type is not known. */
  size_t num_outputs;
  const nimble_type *const *output_types;
  /* Operator calls in every global, by operator, in the order first met. */
  size_t num_ops;
  const nimble_op_calls_t *ops;
  size_t num_op_calls;
  /* Control flow: ifs, matches and closures in every global, and the
   * globals that reach themselves through references (direct or mutual
   * recursion; recursion_known is false when the module has more than
   * NIMBLE_SUMMARY_MAX_GLOBALS_FOR_RECURSION globals). */
  size_t num_ifs, num_matches, num_closures;
  bool recursion_known;
  size_t num_recursive;
  const char *const *recursive;
  bool has_control_flow; /* ifs, matches or recursion */
  /* The names of the symbolic dims of the entry's signature (first met
   * first), whether Any (or a tensor of unknown rank) occurs in it, and
   * whether anything of it is dynamic: a dim that is not a constant. */
  size_t num_symbolic_dims;
  const char *const *symbolic_dims;
  bool has_any_dim;
  bool dynamic;
} nimble_module_summary_t;

/* Summarizes `m` typed by `t` into *out (arrays in the module's arena).
 * Errors only when memory runs out. */
nimble_status_t nimble_typed_module_summarize(const nimble_module *m, const nimble_typing *t,
                                              nimble_module_summary_t *out);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_TYPED_MODULE_H */
