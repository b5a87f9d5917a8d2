/* The kernels of a lowered module: one loop-nest kernel per primitive the
 * lowering listed (nimble/compute.h), compiled and linked together by the
 * code generator into the builder's CPU kernel library. */
#include <stdlib.h>
#include <string.h>

#include "compile_kernels.h"
#include "nimble/codegen.h"
#include "nimble/compute.h"

nimble_status_t nimble_compile_kernels(const nimble_module *m, const nimble_lower_result *lr,
                                       nimble_compile_phase_clock *clock) {
  nimble_compile_result *r = clock->r;
  const nimble_compile_options_t *o = clock->o;
  size_t n = nimble_lower_num_primitives(lr);
  nimble_compile_phase_begin(clock, "compute");
  if (n == 0) {
    /* A program without kernels (pure control flow, or identity) needs no
     * library: the loader asks only for the devices the bytecode uses. */
    nimble_compile_phase_end(clock);
    return nimble_ok();
  }
  nimble_ln_arena *arena = NULL;
  NIMBLE_RETURN_IF_ERROR(nimble_ln_arena_create(&arena));
  const nimble_ln_kernel **kernels = calloc(n, sizeof *kernels);
  if (!kernels) {
    nimble_ln_arena_destroy(arena);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory for %zu kernels", n);
  }
  nimble_compute_options_t co = nimble_compute_default_options();
  /* NEON holds 4 float32 lanes, AVX2 8. */
  co.vector_width = r->target.kind == NIMBLE_TARGET_AARCH64 ? 4 : 8;
  nimble_status_t s = nimble_ok();
  for (size_t i = 0; i < n && !s; i++) {
    const nimble_lower_primitive_t *prim = nimble_lower_primitive_at(lr, i);
    if (prim->device != kDLCPU) {
      s = nimble_status_make(NIMBLE_UNIMPLEMENTED, "kernel '%s' of '%s': device %d is not supported by the driver",
                             prim->symbol, prim->name, (int)prim->device);
      break;
    }
    nimble_ln_kernel *k = NULL;
    co.kernel_name = prim->symbol;
    if (prim->kind == NIMBLE_LOWER_KERNEL_COMPUTE) {
      s = nimble_compute_primitive(m, prim->name, &co, arena, &k);
    } else if (prim->shape_mode && strcmp(prim->shape_mode, "data_independent") == 0) {
      s = nimble_compute_shape_func(m, prim->name, &co, arena, &k);
    } else {
      s = nimble_status_make(NIMBLE_UNIMPLEMENTED,
                             "the %s shape function of '%s' (a data-dependent or upper-bound output shape) "
                             "has no compute definition yet",
                             prim->shape_mode ? prim->shape_mode : "unknown", prim->name);
    }
    if (s) break;
    /* compute names shape functions "<name>__shape_func"; the bytecode
     * calls the symbol the lowering chose, so that is the one exported. */
    char *sym = nimble_ln_arena_strdup(arena, prim->symbol);
    if (!sym) {
      s = nimble_ln_arena_status(arena);
      if (!s) s = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory");
      break;
    }
    k->name = sym;
    kernels[i] = k;
    nimble_compile_phase_progress(clock, (int)((i + 1) * 100 / n));
  }
  if (s) {
    free(kernels);
    nimble_ln_arena_destroy(arena);
    return s;
  }
  nimble_compile_phase_end(clock);

  nimble_compile_phase_begin(clock, "codegen");
  char features[NIMBLE_TARGET_SPEC_MAX + 1];
  nimble_target_llvm_features(&r->target, features);
  nimble_codegen_options_t cg = nimble_codegen_default_options();
  cg.triple = nimble_target_host_triple(&r->target);
  cg.cpu = nimble_target_cpu(&r->target);
  cg.features = features;
  cg.opt_level = o->opt_level;
  if (o->lld) cg.lld = o->lld;
  nimble_codegen_output_t out;
  memset(&out, 0, sizeof out);
  s = nimble_codegen_build(kernels, n, &cg, &out);
  free(kernels);
  nimble_ln_arena_destroy(arena);
  NIMBLE_RETURN_IF_ERROR(s);
  s = nimble_builder_set_kernel_library(r->builder, NIMBLE_PART_KERNELS_CPU, out.shared_object,
                                        out.shared_object_size);
  nimble_codegen_output_deinit(&out);
  NIMBLE_RETURN_IF_ERROR(s);
  r->num_kernels = n;
  r->has_kernels = true;
  nimble_compile_phase_end(clock);
  return nimble_ok();
}
