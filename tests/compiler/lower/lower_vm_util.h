/* The runtime side of the lowering suites: builders with the suite's
 * kernel library, running a lowered executable through the real loader
 * and VM, and reading its bytecode back from the serialised part.
 *
 * The suites that walk the IR reach the runtime only through these
 * helpers, which keeps each test file about one side. */
#ifndef NIMBLE_LOWER_VM_UTIL_H
#define NIMBLE_LOWER_VM_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "nimble/status.h"

typedef struct nimble_executable_builder nimble_executable_builder;

/* A builder for target "test" with the suite's kernels as the CPU kernel
 * library. Destroy with lt_builder_destroy. */
nimble_executable_builder *lt_builder(void);
void lt_builder_destroy(nimble_executable_builder *b);

/* A tensor in or out of a run. Outputs own `data` (lt_values_free). */
typedef struct lt_value {
  DLDataType dtype;
  int32_t ndim;
  int64_t shape[8];
  void *data;
} lt_value;

extern const DLDataType LT_F32, LT_I64;

/* Serialises `b`, loads it through the real loader, runs entry "main" on a
 * fresh VM (max_call_depth 0: the default) and copies out the outputs
 * (*n_out of them, at most max_out). The error of any step comes back. */
nimble_status_t lt_run(nimble_executable_builder *b, uint32_t max_call_depth, const lt_value *in,
                       uint32_t n_in, lt_value *out, uint32_t max_out, uint32_t *n_out);
void lt_values_free(lt_value *v, uint32_t n);

/* Loads the serialised builder through the real loader with every check
 * but the kernel library's symbols (NIMBLE_LOAD_NO_KERNELS). */
nimble_status_t lt_validate(nimble_executable_builder *b);

/* The entry's signature as the loader reads it, e.g.
 * "main(x[?n,2] b1[3]) -> output0[?n,2]" ("?" alone for Any). */
nimble_status_t lt_entry_signature(nimble_executable_builder *b, const char *entry, char *buf,
                                   size_t size);

/* One function of the serialised bytecode part. */
typedef struct lt_fn_stats {
  uint32_t params, registers, instructions;
  uint32_t count[32];      /* instructions per opcode */
  uint32_t gotos_to_start; /* Goto instructions that land on pc 0 */
  uint32_t self_invokes;   /* Invoke instructions calling the function itself */
  uint64_t adt_tags;       /* bit t set: an AllocADT of tag t (t < 64) */
} lt_fn_stats;

nimble_status_t lt_function_stats(nimble_executable_builder *b, const char *name, lt_fn_stats *out);

#endif
