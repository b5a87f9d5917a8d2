/* Lowering: the optimized IR (after nimble_passes_run_default) to VM
 * bytecode, written into an executable builder.
 *
 * The input is the passes' output: A-normal form, fused primitives named
 * `@"fused.…"`, explicit memory (alloc_storage, alloc_tensor, invoke,
 * invoke_shape_func, reshape_tensor, kill, shape_of) and lambda-lifted
 * globals. Every non-primitive global becomes one VM function; primitives
 * become kernels that the code generator must produce, listed in the
 * result (name, symbol, the primitive's IR function, device). docs/lowering.md
 * gives the mapping from each IR form to instructions, the calling
 * convention, register allocation and the mangling of kernel symbols.
 *
 *   nimble_executable_builder *b;
 *   const nimble_lower_result *r;
 *   nimble_builder_create("x86_64-linux-gnu", &b);
 *   NIMBLE_RETURN_IF_ERROR(nimble_lower_module(m, NULL, b, &r));
 *   for (size_t i = 0; i < nimble_lower_num_primitives(r); i++)
 *     ... generate nimble_lower_primitive_at(r, i) ...
 *   nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CPU, so, so_size);
 *   nimble_builder_serialize(b, &bytes, &size);
 *
 * The builder should be empty: lowering adds functions, kernels, constants
 * and the entry. The result lives in the module's arena.
 */
#ifndef NIMBLE_LOWER_H
#define NIMBLE_LOWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "nimble/ir.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The executable format's builder (nimble/executable_builder.h, in
 * nimble_format), only declared here so that users of the lowering need not
 * see the format's headers. */
typedef struct nimble_executable_builder nimble_executable_builder;

typedef struct nimble_lower_options {
  /* The global that becomes the executable's entry, and the entry's name
   * ("main" for both by default). */
  const char *entry;
  /* Where compute kernels run (kDLCPU by default). Shape functions and
   * storage-size primitives always run on the CPU. */
  DLDeviceType kernel_device;
  /* Prepended to every kernel symbol ("nimble_k_" by default; at most 64
   * bytes of [A-Za-z0-9_]), e.g. to keep two models' kernels apart in one
   * library. */
  const char *symbol_prefix;
  /* The entry's output names, in order, e.g. an ONNX graph's output names
   * (NULL: none). An output without a name here (NULL or "", or past
   * num_output_names) is called "output<i>": output0, output1, ... When
   * given, num_output_names must equal the entry's output count. */
  const char *const *output_names;
  size_t num_output_names;
  /* The builder borrows the IR constants' data instead of copying it
   * (nimble_builder_add_constant_borrowed): the module's arena must then
   * outlive the builder. Off by default. */
  bool borrow_constants;
} nimble_lower_options_t;

/* Fills the defaults. */
void nimble_lower_options_init(nimble_lower_options_t *options);

/* What a kernel computes. */
typedef enum nimble_lower_kernel_kind {
  NIMBLE_LOWER_KERNEL_COMPUTE = 0, /* the primitive: inputs, then outputs */
  NIMBLE_LOWER_KERNEL_SHAPE_FUNC,  /* its shape function (host CPU) */
} nimble_lower_kernel_kind_t;

/* One kernel the code generator must produce. */
typedef struct nimble_lower_primitive {
  const char *name;   /* the primitive global, e.g. "fused.dense_add_relu" */
  const char *symbol; /* the exported symbol, e.g. "nimble_k_fused_dense_add_relu" */
  const nimble_expr *func; /* the primitive's IR function (NIMBLE_EXPR_FUNC) */
  nimble_lower_kernel_kind_t kind;
  DLDeviceType device;
  /* COMPUTE: the outputs the bytecode passes (after the inputs); for an
   * upper-bound primitive this counts the extra int64 [rank] shape outputs
   * too. SHAPE_FUNC: the number of int64 [rank] shapes it writes. */
  uint32_t num_outputs;
  /* SHAPE_FUNC: "data_independent" (inputs are 1-D int64 shapes),
   * "data_dependent" or "upper_bound" (inputs are the tensors). NULL for
   * COMPUTE. */
  const char *shape_mode;
  uint32_t kernel_index; /* its index in the builder's kernel table */
} nimble_lower_primitive_t;

/* One VM function made from a global. */
typedef struct nimble_lower_function {
  const char *name;        /* the global */
  uint32_t index;          /* in the builder */
  uint32_t num_params;     /* captured values first for a closure */
  uint32_t num_registers;
  uint32_t num_instructions;
} nimble_lower_function_t;

typedef struct nimble_lower_result nimble_lower_result;

/* Lowers every non-primitive global of `m` into `builder` (borrowed, not
 * serialised) and declares the entry (options->entry, default "main"):
 * inputs named after its parameters, outputs after options->output_names
 * or else "output0", "output1", ...,
 * dtypes and shapes (symbolic dims by name) from the inferred types.
 * `options` may be NULL. *out (may be NULL) lives in m's arena. Errors
 * name the global and the expression at fault. */
nimble_status_t nimble_lower_module(const nimble_module *m, const nimble_lower_options_t *options,
                                    nimble_executable_builder *builder,
                                    const nimble_lower_result **out);

/* The kernels, in order of first use (borrowed from the result). */
size_t nimble_lower_num_primitives(const nimble_lower_result *r);
const nimble_lower_primitive_t *nimble_lower_primitive_at(const nimble_lower_result *r, size_t i);

/* The VM functions, in module order (borrowed from the result). */
size_t nimble_lower_num_functions(const nimble_lower_result *r);
const nimble_lower_function_t *nimble_lower_function_at(const nimble_lower_result *r, size_t i);
/* The function made from global `name`; NULL when there is none. */
const nimble_lower_function_t *nimble_lower_find_function(const nimble_lower_result *r,
                                                          const char *name);

/* The base symbol of a primitive name: the prefix (NULL: "nimble_k_"),
 * then the name with '.' as '_' and any byte outside [A-Za-z0-9_] as
 * "_xHH". Lowering appends
 * "_shape" for shape functions and "_N" where two names would collide, so
 * read symbols from the result. Writes at most `size` bytes (terminated);
 * returns false when the buffer is too small. */
bool nimble_lower_mangle(const char *prefix, const char *name, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_LOWER_H */
