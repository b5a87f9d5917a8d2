/* Kernel code generation: loop-nest kernels -> LLVM 16 -> a shared object
 * (x86_64, aarch64) or PTX text (nvptx64), plus the operator builders that
 * produce loop nests with a default schedule.
 *
 * On nvptx64 each kernel is an entry point
 * `void name(DLTensor *const *args, int32_t num_args)` whose argument array,
 * DLTensors, shape arrays and data are device-visible; the outermost
 * parallel loop becomes a grid-stride loop over all threads of the launch.
 * There is no env there: sgemm is never taken, log/pow are refused, and a
 * failed check makes the kernel return without writing (the host validates
 * before launching).
 *
 *   nimble_codegen_options_t o = nimble_codegen_default_options();
 *   nimble_codegen_output_t out;
 *   NIMBLE_RETURN_IF_ERROR(nimble_codegen_build(kernels, n, &o, &out));
 *   ... out.shared_object / out.shared_object_size ...
 *   nimble_codegen_output_deinit(&out);
 *
 * Every kernel follows the executable format's kernel ABI
 * (nimble/kernel_abi.h): int32_t name(DLTensor *const *args, int32_t
 * num_args, const nimble_kernel_env_t *env). The generated code checks the argument count,
 * each tensor's rank and dtype, that strides are NULL or compact, and the
 * kernel's own run-time checks, and reports failures through
 * env->set_error with a nonzero return. It calls nothing but env's members
 * (and, for log and pow, libm's logf/powf). The math functions exp, tanh,
 * sigmoid and erf are inline polynomial approximations (see
 * docs/codegen.md for their accuracy), so they vectorize.
 *
 * Safe to call from several threads at once (each call uses its own LLVM
 * context).
 */
#ifndef NIMBLE_CODEGEN_H
#define NIMBLE_CODEGEN_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/loopnest.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nimble_codegen_options {
  const char *triple;   /* "x86_64-linux-gnu" (default), "aarch64-linux-gnu", "nvptx64-nvidia-cuda" */
  const char *cpu;      /* NULL: x86-64-v3, generic (aarch64), sm_80 (nvptx64) */
  const char *features; /* NULL: "" (aarch64: "+neon") */
  int opt_level;        /* 0..3 */
  const char *lld;      /* linker program; NULL: "ld.lld-16" */
  int keep_ir;          /* also return the optimised module as text */
} nimble_codegen_options_t;

typedef struct nimble_codegen_output {
  uint8_t *shared_object; /* CPU targets: the linked .so; caller frees with _deinit */
  size_t shared_object_size;
  char *ptx;     /* nvptx64: PTX text */
  char *llvm_ir; /* keep_ir: the optimised module */
} nimble_codegen_output_t;

nimble_codegen_options_t nimble_codegen_default_options(void);

/* Generates, optimises and links one module holding every kernel. Kernels
 * are borrowed; on success *out holds caller-owned buffers (free with
 * nimble_codegen_output_deinit), on failure it is zeroed. */
nimble_status_t nimble_codegen_build(const nimble_ln_kernel *const *kernels, size_t n_kernels,
                                     const nimble_codegen_options_t *options,
                                     nimble_codegen_output_t *out);
void nimble_codegen_output_deinit(nimble_codegen_output_t *out);

/* Links an ELF relocatable object into a shared object by running `lld`
 * -shared in a private temporary directory, removed on every path. The
 * bytes are borrowed; *so_out is caller-owned (free()). */
nimble_status_t nimble_codegen_link_shared(const uint8_t *object, size_t object_size,
                                           const char *lld, uint8_t **so_out, size_t *so_size);

/* --- GPU thread mappings (nvptx64; cg_ptx_map.c, docs/targets.md). ---
 * A kernel built without parallel chunks (compute's parallel = false,
 * vector width 1) has one top-level loop nest over its output. The mapping
 * rewrites that nest into one PARALLEL loop, which the nvptx64 emitter
 * turns into a grid-stride loop over all threads of the launch. */
typedef enum nimble_codegen_thread_mapping {
  /* The perfect nest of output loops flattened: one thread per output
   * element; what is inside the nest (a reduction's accumulator loop, a
   * conv window, a softmax row) runs in that thread. */
  NIMBLE_CODEGEN_MAP_PER_OUTPUT = 0,
  /* Matrix products: the last two output axes in 16x16 tiles, one tile
   * per 256 consecutive threads (a block of 256 threads computes one tile,
   * so neighbouring threads share rows of A and columns of B); leading
   * axes (batch) outermost. Falls back to PER_OUTPUT below two axes. */
  NIMBLE_CODEGEN_MAP_TILED_2D,
} nimble_codegen_thread_mapping_t;

/* Applies `mapping` to k in place (new nodes in `arena`). A kernel whose
 * body has no single top-level loop, or whose top loop is already
 * parallel, is left as it is (every thread then runs it and thread 0
 * stores, which is correct but serial). */
nimble_status_t nimble_codegen_map_threads(nimble_ln_arena *arena, nimble_ln_kernel *k,
                                           nimble_codegen_thread_mapping_t mapping);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_CODEGEN_H */
