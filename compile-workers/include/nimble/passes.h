/* IR → IR passes: what turns a typed module into the optimized,
 * explicit-memory form that lowering to VM bytecode starts from.
 *
 *   nimble_passes_run_default(m, 2, dump, user);
 *
 * runs, in order (docs/passes.md explains each and its invariants):
 *   to_anf            nested calls bound to `let`s (A-normal form for calls)
 *   simplify_shapes   shape_of of static dims, reshape to the same shape,
 *                     arithmetic identities on integer shape values
 *   fold_constants    operators on constant inputs evaluated, `if` on a
 *                     constant condition resolved
 *   eliminate_common_subexprs   a pure `let` value computed before, in scope
 *   eliminate_dead_code         unused pure `let`s removed, effects kept
 *   fuse_ops          op calls grouped by fusion pattern into primitive
 *                     functions (globals named "fused.*"), each called once
 *   manifest_memory   each primitive call becomes alloc_storage /
 *                     alloc_tensor (sizes constant or from the shape
 *                     function) and an `invoke` with destination passing;
 *                     reshapes become views (reshape_tensor)
 *   eliminate_common_subexprs   again: one shape_of per tensor for all the
 *                     shape functions that read it
 *   plan_memory       storages reused by later tensors whose lifetimes do
 *                     not overlap; `kill` after each tensor's last use
 *   lift_lambdas      function literals become globals (closures take
 *                     their captured values as parameters)
 *
 * Every pass rewrites the module in place (nimble_module_replace_func and
 * nimble_module_add_func), allocating from the module's arena, and keeps it
 * well-typed: a pass that needs types runs nimble_typing_infer_module on
 * its input, and its output type-checks again. Errors name the pass and the
 * function.
 */
#ifndef NIMBLE_PASSES_H
#define NIMBLE_PASSES_H

#include <stdbool.h>

#include "nimble/ir.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The name prefix of primitive (fused) global functions: "fused." */
#define NIMBLE_PRIMITIVE_PREFIX "fused."

/* Whether global `name` is a primitive function (one kernel). */
bool nimble_passes_is_primitive(const char *name);

nimble_status_t nimble_passes_to_anf(nimble_module *m);
nimble_status_t nimble_passes_simplify_shapes(nimble_module *m);
nimble_status_t nimble_passes_fold_constants(nimble_module *m);
nimble_status_t nimble_passes_eliminate_common_subexprs(nimble_module *m);
nimble_status_t nimble_passes_eliminate_dead_code(nimble_module *m);
nimble_status_t nimble_passes_fuse_ops(nimble_module *m);
nimble_status_t nimble_passes_manifest_memory(nimble_module *m);
nimble_status_t nimble_passes_plan_memory(nimble_module *m);
/* Lambda lifting with closure conversion (the pipeline's last pass, what
 * the lowering to bytecode starts from): every function literal becomes a
 * global; one with captured variables becomes a closure global taking them
 * and returning the code, called where the literal was. */
nimble_status_t nimble_passes_lift_lambdas(nimble_module *m);

/* What plan_memory did, for tests and statistics. */
typedef struct nimble_memory_plan_stats {
  size_t storages_before; /* alloc_storage calls in the input */
  size_t storages_after;  /* alloc_storage calls left */
  size_t kills;           /* kill calls inserted */
} nimble_memory_plan_stats_t;
/* plan_memory, reporting what it did (stats may be NULL). */
nimble_status_t nimble_passes_plan_memory_stats(nimble_module *m, nimble_memory_plan_stats_t *stats);

/* Device placement for the cuda target (docs/passes.md, place_devices):
 * on the explicit-memory form, each primitive's invokes run on the GPU
 * (invoke device="cuda", outputs' alloc_storage device="cuda") unless the
 * primitive is host work (storage sizes, scalar and shape arithmetic,
 * data-dependent shapes, operators the PTX generator refuses); shape
 * functions stay on the CPU; device_copy is inserted once per value and
 * device where a value is read on the other device. Values that cross
 * function boundaries, containers and `if` conditions are on the CPU. */
nimble_status_t nimble_passes_place_devices(nimble_module *m);

/* What place_devices did, for tests and statistics. */
typedef struct nimble_device_placement_stats {
  size_t gpu_invokes;   /* invoke calls placed on the GPU */
  size_t cpu_invokes;   /* invoke calls left on the CPU */
  size_t copies_to_gpu; /* device_copy(..., device="cuda") inserted */
  size_t copies_to_cpu; /* device_copy(..., device="cpu") inserted */
} nimble_device_placement_stats_t;
/* place_devices, reporting what it did (stats may be NULL). */
nimble_status_t nimble_passes_place_devices_stats(nimble_module *m, nimble_device_placement_stats_t *stats);

/* update_in_place (before fuse_ops; docs/passes.md): a scatter_nd or
 * scatter_elements whose data input is dead after it and owned (fresh,
 * or a parameter every caller hands over) gets inplace=1, so it writes
 * into that tensor instead of a copy; calls that would hand over a tensor
 * still in use (a constant, an entry input, a value read later) get a
 * `copy` first. `main`'s parameters are never updated. */
nimble_status_t nimble_passes_update_in_place(nimble_module *m);

typedef struct nimble_inplace_stats {
  size_t in_place; /* scatters made to update their data in place */
  size_t copies;   /* copies inserted before calls, so the callee owns its argument */
} nimble_inplace_stats_t;
/* update_in_place, reporting what it did (stats may be NULL). */
nimble_status_t nimble_passes_update_in_place_stats(nimble_module *m, nimble_inplace_stats_t *stats);

/* Called after each pass with its name and the module (borrowed for the
 * call); a non-OK status stops the pipeline and is returned annotated. */
typedef nimble_status_t (*nimble_pass_dump_fn)(void *user, const char *pass_name,
                                               const nimble_module *m);

/* Runs the default pipeline. opt_level 0 runs only what lowering needs
 * (to_anf, fuse_ops with single-op groups, manifest_memory, lift_lambdas); 1 adds
 * simplification, folding, CSE and DCE; 2 and above also fuse groups and
 * plan memory. `dump` may be NULL. When check_types is true every pass's
 * output is type-checked (the error names the pass). */
nimble_status_t nimble_passes_run_default(nimble_module *m, int opt_level, bool check_types,
                                          nimble_pass_dump_fn dump, void *user);

/* The default pipeline for a target with a GPU when `place_devices` is
 * true: place_devices runs after manifest_memory (and its CSE), before
 * plan_memory, at every opt level. With false it is run_default. */
nimble_status_t nimble_passes_run_for_target(nimble_module *m, int opt_level, bool check_types,
                                             bool place_devices, nimble_pass_dump_fn dump, void *user);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_PASSES_H */
