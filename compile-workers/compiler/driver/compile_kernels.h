/* Private to the compiler driver: the kernel phases (compute, codegen). */
#ifndef NIMBLE_COMPILE_KERNELS_H
#define NIMBLE_COMPILE_KERNELS_H

#include "compile_internal.h"
#include "nimble/ir.h"
#include "nimble/lower.h"

/* Generates every kernel the lowering listed (phase "compute"), compiles
 * and links them into one shared object for the result's target (phase
 * "codegen") and sets it as the builder's CPU kernel library. */
nimble_status_t nimble_compile_kernels(const nimble_module *m, const nimble_lower_result *lr,
                                       nimble_compile_phase_clock *clock);

#endif
