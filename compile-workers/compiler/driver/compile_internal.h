/* Private to the compiler driver: the result's layout and the helpers the
 * pipeline's files share. It does not include the IR's headers: the IR's
 * nimble_dtype and the artifact config's clash, and compile_emit.c needs the
 * latter. */
#ifndef NIMBLE_COMPILE_INTERNAL_H
#define NIMBLE_COMPILE_INTERNAL_H

#include <stdbool.h>

#include "nimble/codegen.h"
#include "nimble/compile.h"
#include "nimble/executable_builder.h"

struct nimble_compile_result {
  nimble_executable_builder *builder; /* owned */
  /* The IR's arena (owned): the builder borrows the constants' data from
   * it, so it lives as long as the builder. */
  struct nimble_arena *arena;
  nimble_target_t target;
  char target_spec[NIMBLE_TARGET_SPEC_MAX + 1]; /* canonical */
  char *compiler_version;                       /* owned */
  nimble_digest_t model_digest;
  size_t num_kernels;
  bool has_kernels; /* a CPU kernel library was set */
  bool has_cuda_kernels; /* a CUDA (PTX) kernel library was set */
  nimble_codegen_stats_t codegen_stats; /* CPU kernels; .kernels owned */
  bool has_codegen_stats;
  nimble_compile_workload_t *workloads; /* owned; CPU compute kernels, when listed */
  size_t num_workloads;
  nimble_compile_phase_time_t phases[NIMBLE_COMPILE_MAX_PHASES];
  size_t num_phases;
};

/* The current phase: its start time, for the result's timings, and the
 * options' progress callback. */
typedef struct nimble_compile_phase_clock {
  const nimble_compile_options_t *o; /* borrowed */
  nimble_compile_result *r;          /* borrowed */
  const char *phase;                 /* static */
  double t0;
} nimble_compile_phase_clock;

double nimble_compile_now(void);
void nimble_compile_phase_begin(nimble_compile_phase_clock *c, const char *phase);
void nimble_compile_phase_progress(nimble_compile_phase_clock *c, int percent);
void nimble_compile_phase_end(nimble_compile_phase_clock *c);

#endif
