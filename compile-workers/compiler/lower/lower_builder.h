/* Private to the lowering: the executable builder calls it makes, with
 * types of their own, so the files that walk the IR reach the runtime's
 * builder only through these wrappers (lower_builder.c). */
#ifndef NIMBLE_LOWER_BUILDER_H
#define NIMBLE_LOWER_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "nimble/bytecode.h"
#include "nimble/status.h"

typedef struct nimble_executable_builder nimble_executable_builder;

/* A tensor of the entry's signature: dims[i] >= 0 a constant, else
 * symbolic (symbols[i] the name, "" for Any). Borrowed for the call. */
typedef struct lw_sig {
  const char *name;
  DLDataType dtype;
  int32_t ndim; /* -1 (NIMBLE_NDIM_ANY): an output whose rank is known at run time only */
  const int64_t *dims;
  const char *const *symbols;
} lw_sig;

nimble_status_t lw_b_add_kernel(nimble_executable_builder *b, const char *symbol, int device,
                                uint32_t *index);
/* borrow: the builder keeps t's data without copying it
 * (nimble_lower_options_t.borrow_constants). */
nimble_status_t lw_b_add_constant(nimble_executable_builder *b, const DLTensor *t, bool borrow,
                                  uint32_t *index);
nimble_status_t lw_b_add_function(nimble_executable_builder *b, const char *name, uint32_t params,
                                  uint32_t registers, uint32_t *index);
nimble_status_t lw_b_emit(nimble_executable_builder *b, uint32_t func, int op, const int64_t *ops,
                          uint32_t n);
nimble_status_t lw_b_add_entry(nimble_executable_builder *b, const char *name, uint32_t func,
                               const lw_sig *in, uint32_t num_in, const lw_sig *out,
                               uint32_t num_out);

#endif
