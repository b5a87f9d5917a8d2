/* Compute definitions: the bridge from the IR to code generation.
 *
 * After the passes (nimble/passes.h), every fused primitive global
 * (`@"fused.…"`) is a small IR function of operator calls over its tensor
 * parameters. nimble_compute_primitive turns one such function into one
 * loop-nest kernel (nimble/loopnest.h) that nimble_codegen_build then
 * compiles:
 *
 *   nimble_ln_kernel *k;
 *   NIMBLE_RETURN_IF_ERROR(nimble_compute_primitive(m, "fused.dense_add_relu", NULL, arena, &k));
 *
 * The kernel's symbol is nimble_compute_kernel_symbol(name): the name
 * with '.' written as "__" (and any other character that is not a C
 * identifier character as "_xx" hex), e.g. "fused__dense_add_relu__1";
 * the shape function's symbol adds "__shape_func". Fused names never hold
 * "__" themselves, so the mapping is one-to-one for them.
 *
 * The kernel follows destination passing: its arguments are the
 * primitive's parameters in order, then the output (preallocated by the
 * VM). Extents are read from the DLTensors at run time, so symbolic and Any
 * dims are served by one kernel; static dims of the parameters' annotations
 * are checked at run time and used as constants.
 *
 * Inside a kernel, element-wise and injective operators (transpose,
 * reshape, slice, broadcast...) are index arithmetic over their inputs; at
 * most one "anchor" (a reduction, dense/matmul, conv2d, pooling, softmax,
 * layer norm) is computed per output element with its element-wise
 * epilogue inline. A primitive outside this coverage gets an
 * NIMBLE_UNIMPLEMENTED status naming the operator. docs/compute.md has the
 * coverage table.
 *
 * nimble_compute_shape_func builds the primitive's shape function as a
 * kernel: arguments are one 1-D int64 shape per parameter, then the output
 * shape (1-D int64 [rank]).
 *
 * Both functions only read the module (borrowed for the call) and allocate
 * every node of the kernel in `arena`, which owns the result.
 */
#ifndef NIMBLE_COMPUTE_H
#define NIMBLE_COMPUTE_H

#include <stdbool.h>
#include <stdint.h>

#include "nimble/ir.h"
#include "nimble/loopnest.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nimble_compute_options {
  int vector_width;  /* f32 lanes of the inner vectorized loop; 0: 8 (AVX2) */
  bool parallel;     /* chunk the outermost loop into parallel tasks */
  bool use_sgemm;    /* dense/matmul call env->sgemm when the runtime has it */
  /* Schedule knobs (nimble/tune_record.h; docs/tuning.md): how the work
   * is split, never an output element's arithmetic. 0: the default. */
  int64_t min_task_work; /* loop-body evaluations per parallel task at least; default 16384 */
  int64_t conv_block;    /* output floats per block of an sgemm-path convolution; default 65536 */
  const char *kernel_name; /* the exported symbol; NULL: nimble_compute_kernel_symbol(name) */
} nimble_compute_options_t;

/* vector width 8, parallel, sgemm allowed, default schedule knobs, kernel
 * named after the primitive. */
nimble_compute_options_t nimble_compute_default_options(void);

/* Builds the kernel of primitive global `name` of `m`. `options` may be
 * NULL (defaults). Errors: NOT_FOUND (no such global), INVALID_ARGUMENT
 * (not a primitive of tensor parameters), UNIMPLEMENTED (an operator or
 * dtype not covered, named). */
nimble_status_t nimble_compute_primitive(const nimble_module *m, const char *name,
                                         const nimble_compute_options_t *options,
                                         nimble_ln_arena *arena, nimble_ln_kernel **out);

/* Builds the data-independent shape function of primitive `name` as a
 * kernel named `<kernel symbol>__shape_func` (options->kernel_name
 * overrides the base). Arguments: the shape of each parameter (int64 [rank_i]), then
 * the output shape (int64 [out_rank]). Incompatible shapes fail the kernel
 * with a message naming the operator. */
nimble_status_t nimble_compute_shape_func(const nimble_module *m, const char *name,
                                          const nimble_compute_options_t *options,
                                          nimble_ln_arena *arena, nimble_ln_kernel **out);

/* Writes the kernel symbol of primitive `primitive` into buf (size bytes,
 * NUL-terminated); false when it does not fit or would not be a C
 * identifier. */
bool nimble_compute_kernel_symbol(const char *primitive, char *buf, size_t size);

/* Whether operator `op_name` has a compute definition (for coverage
 * reports). */
bool nimble_compute_supports_op(const char *op_name);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_COMPUTE_H */
