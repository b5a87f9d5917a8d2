/* Executable builder: puts an executable together in memory and serialises
 * it to the real format (one `.nimble` image, or one part at a time).
 *
 * The builder checks only its own API use (NULL pointers, unknown function
 * indices when emitting); it writes whatever bytecode it is given, so tests
 * can build invalid programs and watch the loader refuse them. The loader
 * is the one place that validates.
 *
 *   nimble_executable_builder *b;
 *   nimble_builder_create("x86_64-linux-gnu", &b);
 *   uint32_t f, k;
 *   nimble_builder_add_kernel(b, "vadd", kDLCPU, &k);
 *   nimble_builder_add_function(b, "main", 2, 4, &f);
 *   NIMBLE_BUILDER_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 0, 1, 2);
 *   ...
 *   nimble_builder_serialize(b, &bytes, &size);   // caller frees bytes
 */
#ifndef NIMBLE_EXECUTABLE_BUILDER_H
#define NIMBLE_EXECUTABLE_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "nimble/bytecode.h"
#include "nimble/executable_format.h"
#include "nimble/export.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nimble_executable_builder nimble_executable_builder;

/* Creates an empty builder for `target` (copied). Caller destroys *out. */
NIMBLE_API nimble_status_t nimble_builder_create(const char *target, nimble_executable_builder **out);
NIMBLE_API void nimble_builder_destroy(nimble_executable_builder *b);

/* Metadata strings (copied). Defaults: producer "nimble <version>", digest "". */
NIMBLE_API nimble_status_t nimble_builder_set_producer(nimble_executable_builder *b, const char *producer);
NIMBLE_API nimble_status_t nimble_builder_set_source_digest(nimble_executable_builder *b, const char *digest);

/* Overrides the format version written into the header and every part
 * (tests use it to make versions the loader does not know). */
NIMBLE_API void nimble_builder_set_format_version(nimble_executable_builder *b, uint32_t version);

/* Declares a kernel the bytecode calls by index; its symbol is looked up in
 * the kernel library of `device` at load time. */
NIMBLE_API nimble_status_t nimble_builder_add_kernel(nimble_executable_builder *b, const char *symbol,
                                                     DLDeviceType device, uint32_t *index_out);

/* Sets the kernel library for a device part (NIMBLE_PART_KERNELS_CPU or
 * NIMBLE_PART_KERNELS_CUDA); the bytes are copied. */
NIMBLE_API nimble_status_t nimble_builder_set_kernel_library(nimble_executable_builder *b,
                                                             nimble_part_kind_t kind, const void *data,
                                                             size_t size);

/* Adds a constant: a compact row-major tensor whose data is copied now.
 * `tensor->device` is recorded (the data must be readable from the host). */
NIMBLE_API nimble_status_t nimble_builder_add_constant(nimble_executable_builder *b, const DLTensor *tensor,
                                                       uint32_t *index_out);

/* The same without the copy: the builder keeps a pointer to the data, which
 * must stay readable and unchanged until the builder is destroyed (the
 * compiler's IR constants, which live as long as its result: a model's
 * weights are not copied once more on the way to the file). */
NIMBLE_API nimble_status_t nimble_builder_add_constant_borrowed(nimble_executable_builder *b,
                                                                const DLTensor *tensor, uint32_t *index_out);

/* Adds a function with `num_params` parameters (registers 0..num_params-1
 * on entry) and a register file of `num_registers`. */
NIMBLE_API nimble_status_t nimble_builder_add_function(nimble_executable_builder *b, const char *name,
                                                       uint32_t num_params, uint32_t num_registers,
                                                       uint32_t *index_out);

/* Appends an instruction to function `func`. `operands` is copied. */
NIMBLE_API nimble_status_t nimble_builder_emit(nimble_executable_builder *b, uint32_t func, int opcode,
                                               const int64_t *operands, uint32_t num_operands);

/* The number of instructions function `func` has so far (the pc of the
 * next one); 0 for an unknown function. */
NIMBLE_API uint32_t nimble_builder_function_size(const nimble_executable_builder *b, uint32_t func);

/* Convenience: NIMBLE_BUILDER_EMIT(b, f, NIMBLE_OP_MOVE, 1, 0). */
#define NIMBLE_BUILDER_EMIT(b, f, op, ...)                                          \
  nimble_builder_emit((b), (f), (op), (const int64_t[]){__VA_ARGS__},               \
                      (uint32_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define NIMBLE_BUILDER_EMIT0(b, f, op) nimble_builder_emit((b), (f), (op), NULL, 0)

/* Declares an entry: `func` runs it; inputs and outputs (names, dtypes,
 * shapes, all copied) form its signature. */
NIMBLE_API nimble_status_t nimble_builder_add_entry(nimble_executable_builder *b, const char *name,
                                                    uint32_t func, const nimble_tensor_info_t *inputs,
                                                    uint32_t num_inputs, const nimble_tensor_info_t *outputs,
                                                    uint32_t num_outputs);

/* Serialises a whole `.nimble` image. Caller frees *data with free(). */
NIMBLE_API nimble_status_t nimble_builder_serialize(const nimble_executable_builder *b, void **data,
                                                    size_t *size);

/* Serialises one part, as the artifact store keeps it. Caller frees *data.
 * NIMBLE_NOT_FOUND for a kernel part the builder has no library for. */
NIMBLE_API nimble_status_t nimble_builder_serialize_part(const nimble_executable_builder *b,
                                                         nimble_part_kind_t kind, void **data, size_t *size);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_EXECUTABLE_BUILDER_H */
