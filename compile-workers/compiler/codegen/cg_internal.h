/* Private to code generation: the LLVM-level helpers shared by the
 * emitter, the math approximations and the build driver. */
#ifndef NIMBLE_CG_INTERNAL_H
#define NIMBLE_CG_INTERNAL_H

#include <llvm-c/Core.h>
#include <stdbool.h>

#include "nimble/codegen.h"

/* Calls the overloaded intrinsic `name` (e.g. "llvm.fmuladd") at type ty. */
LLVMValueRef nimble_cg_intrinsic(LLVMModuleRef m, LLVMBuilderRef b, const char *name, LLVMTypeRef ty,
                                 LLVMValueRef *args, unsigned n);

/* Inline f32 approximations (scalar IR the loop vectorizer widens). */
LLVMValueRef nimble_cg_exp(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x);
LLVMValueRef nimble_cg_tanh(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x);
LLVMValueRef nimble_cg_sigmoid(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x);
LLVMValueRef nimble_cg_erf(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x);

/* 16-bit floats: i16 bit patterns to f32 (exact) and f32 to i16 bit
 * patterns rounded to nearest even (overflow to inf, NaN quiet), as
 * integer IR. */
LLVMValueRef nimble_cg_f16_bits_to_f32(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef h);
LLVMValueRef nimble_cg_f32_to_f16_bits(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x);
LLVMValueRef nimble_cg_bf16_bits_to_f32(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef h);
LLVMValueRef nimble_cg_f32_to_bf16_bits(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x);
/* A double rounded to float with round-to-odd, so that a further
 * narrowing (to f16/bf16) rounds once, correctly. */
LLVMValueRef nimble_cg_f64_to_f32_odd(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x);

/* Emits every kernel into `m` (whose triple and data layout are set), for
 * the CPU kernel ABI or, with gpu, as nvptx64 kernels. Returns the first
 * problem as a status. */
nimble_status_t nimble_cg_emit_kernels(LLVMModuleRef m, const nimble_ln_kernel *const *kernels,
                                       size_t n_kernels, int gpu);

/* One CPU kernel whose code is shared with other kernels of the same body
 * (the same canonical text but for the name): the implementation is the
 * hidden function `impl`, taking the kernel ABI's arguments, and the
 * exported `k->name` calls it (error messages do not name the kernel: the
 * VM does). With forwarder, `impl` is only declared (another kernel's
 * object defines it) and the module holds just the export. */
nimble_status_t nimble_cg_emit_shared_kernel(LLVMModuleRef m, const nimble_ln_kernel *k, const char *impl,
                                             int forwarder);

/* A kernel whose run is at most about a thousand scalar statements, all
 * loops of constant trip count (cg_light.c): built with a short pipeline
 * and fast instruction selection, since its speed cannot matter. */
bool nimble_cg_kernel_is_light(const nimble_ln_kernel *k);

#endif
