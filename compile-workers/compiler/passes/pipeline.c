/* The default pipeline: the passes in the order docs/passes.md explains,
 * with an optional type check after each and a hook that sees the module
 * after each (the future `nimble compile --dump-ir DIR`). */
#include "passes/pass_internal.h"

typedef struct pass_step {
  const char *name;
  nimble_status_t (*run)(nimble_module *m);
  int min_level;
} pass_step;

static nimble_status_t fuse_singletons(nimble_module *m) { return pass_fuse_ops(m, false); }

nimble_status_t nimble_passes_run_default(nimble_module *m, int opt_level, bool check_types,
                                          nimble_pass_dump_fn dump, void *user) {
  return nimble_passes_run_for_target(m, opt_level, check_types, false, dump, user);
}

nimble_status_t nimble_passes_run_for_target(nimble_module *m, int opt_level, bool check_types,
                                             bool place_devices, nimble_pass_dump_fn dump, void *user) {
  if (!m) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "run_default: no module");
  if (opt_level < 0 || opt_level > 3)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "run_default: opt level %d is not 0 to 3",
                              opt_level);
  static const pass_step steps[] = {
      {"to_anf", nimble_passes_to_anf, 0},
      {"simplify_shapes", nimble_passes_simplify_shapes, 1},
      {"fold_constants", nimble_passes_fold_constants, 1},
      {"eliminate_common_subexprs", nimble_passes_eliminate_common_subexprs, 1},
      {"eliminate_dead_code", nimble_passes_eliminate_dead_code, 1},
      /* scatters into dead, owned tensors write in place (LSTM's Y) */
      {"update_in_place", nimble_passes_update_in_place, 1},
      {"fuse_ops", NULL, 0}, /* groups from level 2, single ops below */
      {"manifest_memory", nimble_passes_manifest_memory, 0},
      /* shape_of of one tensor, asked for by several shape functions */
      {"eliminate_common_subexprs", nimble_passes_eliminate_common_subexprs, 1},
      /* cuda only: which invokes run on the GPU, and the copies */
      {"place_devices", nimble_passes_place_devices, 0},
      {"plan_memory", nimble_passes_plan_memory, 2},
      {"lift_lambdas", nimble_passes_lift_lambdas, 0},
  };
  if (check_types) {
    nimble_typing *t;
    NIMBLE_RETURN_IF_ERROR_CTX(nimble_typing_infer_module(m, &t), "before the passes");
  }
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    const pass_step *s = &steps[i];
    if (opt_level < s->min_level) continue;
    if (s->run == nimble_passes_place_devices && !place_devices) continue;
    nimble_status_t (*run)(nimble_module *) = s->run;
    if (!run) run = opt_level >= 2 ? nimble_passes_fuse_ops : fuse_singletons;
    /* Passes name the function at fault ("in @f: ..."); the pipeline
     * names the pass. */
    NIMBLE_RETURN_IF_ERROR_CTX(run(m), "pass %s", s->name);
    if (check_types) {
      nimble_typing *t;
      NIMBLE_RETURN_IF_ERROR_CTX(nimble_typing_infer_module(m, &t),
                                 "pass %s left an ill-typed module", s->name);
    }
    if (dump) NIMBLE_RETURN_IF_ERROR_CTX(dump(user, s->name, m), "dump after pass %s", s->name);
  }
  return nimble_ok();
}
