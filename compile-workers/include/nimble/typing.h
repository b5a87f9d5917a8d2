/* Type inference with Any: unification of types and dims, and inference of
 * a whole module.
 *
 * Unification follows the Nimble paper: equal constants unify; a symbolic
 * variable binds to a constant or to another variable; Any against anything
 * stays Any (a wrong static guess is caught at run time by the operator's
 * shape function); broadcasting Any with d gives d. Type variables bind to
 * types (with an occurs check). A tensor of unknown rank (Tensor[*, dt])
 * unifies with any tensor of its dtype and stays of unknown rank.
 *
 * Inference walks every global function: operator calls go through the
 * operator's type relation (nimble/op.h), the branches of an `if` and the
 * arms of a `match` join (nimble_type_join), constructors instantiate
 * their type's parameters, and calls to global functions instantiate the
 * callee's annotated
 * signature (type parameters and symbolic dims afresh at each call), which
 * is what lets recursive functions check. Let-polymorphism is not provided:
 * a local closure has one type.
 *
 * Everything is allocated in the module's arena; results live as long as it.
 */
#ifndef NIMBLE_TYPING_H
#define NIMBLE_TYPING_H

#include <stdbool.h>
#include <stdint.h>

#include "nimble/arena.h"
#include "nimble/ir.h"
#include "nimble/op.h"
#include "nimble/status.h"
#include "nimble/type.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Substitutions -------------------------------------------------------- */

/* Bindings of type variables and dim variables (nimble_subst is declared in
 * nimble/op.h, where relations see it through nimble_dim_ctx). */

/* Creates an empty substitution in `arena`; fresh variables get ids from
 * `first_fresh_id` up (pick one above every id already in use, e.g.
 * nimble_module_next_var_id()). */
nimble_status_t nimble_subst_create(nimble_arena *arena, uint32_t first_fresh_id,
                                    nimble_subst **out);
/* A new variable id, distinct from every id handed out before. */
uint32_t nimble_subst_fresh_id(nimble_subst *s);
/* A fresh type variable / dim variable named `name` (for messages). */
const nimble_type *nimble_subst_fresh_type_var(nimble_subst *s, const char *name);
nimble_dim_t nimble_subst_fresh_dim_var(nimble_subst *s, const char *name);
/* Marks a type variable rigid (a type parameter while its function's body
 * is checked): it unifies only with itself or an unbound variable. */
nimble_status_t nimble_subst_set_rigid(nimble_subst *s, uint32_t type_var_id, bool rigid);
/* Follows bindings (dims: to a constant, Any or an unbound variable). */
nimble_dim_t nimble_subst_resolve_dim(nimble_subst *s, nimble_dim_t d);
/* The type with every bound variable replaced, deeply; NULL on OOM. */
const nimble_type *nimble_subst_apply(nimble_subst *s, const nimble_type *t);
/* Binds an unbound dim variable; fails when it is bound already. */
nimble_status_t nimble_subst_bind_dim(nimble_subst *s, uint32_t var_id, nimble_dim_t value);

/* A point in the life of a substitution, to scope dim bindings to the
 * branch of an `if` or the arm of a `match`: what a branch learns about a
 * dim (a squeeze there proves `t` is 1) holds only where that branch runs. */
typedef struct nimble_subst_mark {
  size_t trail;     /* bindings made before */
  uint32_t next_id; /* variables made before have smaller ids */
} nimble_subst_mark_t;
nimble_subst_mark_t nimble_subst_mark(const nimble_subst *s);
/* Unbinds every dim variable older than the mark that was bound since it
 * (variables made since keep their bindings). Type variables stay bound. */
void nimble_subst_undo_dims(nimble_subst *s, nimble_subst_mark_t mark);

/* Unifies two types and gives the unified type (where one side has Any and
 * the other a constant, the result keeps Any). The error message is
 * "cannot unify A with B" followed by the part that differs. */
nimble_status_t nimble_type_unify(nimble_subst *s, const nimble_type *a, const nimble_type *b,
                                  const nimble_type **out);

/* The least upper bound of two types, for values that may be either (the
 * branches of an `if`, the arms of a `match`): dims that differ become Any
 * (variables are not bound), ranks that differ give Tensor[*, dtype],
 * tuples and ADT arguments join field by field, type variables bind as in
 * unification, functions must unify. Different dtypes or kinds of type are
 * an error: "no common type for A and B (...)". */
nimble_status_t nimble_type_join(nimble_subst *s, const nimble_type *a, const nimble_type *b,
                                 const nimble_type **out);

/* ---- Inference ------------------------------------------------------------ */

typedef struct nimble_typing nimble_typing;

/* Infers the types of every expression of every global function of `m`.
 * *out lives in the module's arena. On error the message names the place
 * (file:line:col), the expression and the types involved. */
nimble_status_t nimble_typing_infer_module(const nimble_module *m, nimble_typing **out);

/* The inferred type of an expression of the module (variables included,
 * with every binding applied); NULL for an expression the inference did
 * not visit. */
const nimble_type *nimble_typing_type_of(const nimble_typing *t, const nimble_expr *e);
/* The inferred type of global function `name`; NULL when absent. */
const nimble_type *nimble_typing_global_type(const nimble_typing *t, const char *name);

/* ---- Exhaustiveness of match ------------------------------------------------ */

/* Whether the arms of `match` (a NIMBLE_EXPR_MATCH) cover every value of
 * its scrutinee. When they do not, *missing (if non-NULL) gets an example
 * of a value no arm matches, as pattern text ("Cons(_, Nil)"), in `arena`.
 * Inference accepts partial matches (the VM fails at run time on a value
 * no arm matches); passes that want totality call this. */
nimble_status_t nimble_typing_match_exhaustive(nimble_arena *arena, const nimble_expr *match,
                                               bool *exhaustive, const char **missing);

/* Checks every match of every global function; the error names the first
 * partial one: "FILE:LINE:COL: match is not exhaustive: no arm matches
 * None". */
nimble_status_t nimble_typing_check_matches(const nimble_module *m);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_TYPING_H */
