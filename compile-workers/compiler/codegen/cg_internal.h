/* Private to code generation: the LLVM-level helpers shared by the
 * emitter, the math approximations and the build driver. */
#ifndef NIMBLE_CG_INTERNAL_H
#define NIMBLE_CG_INTERNAL_H

#include <llvm-c/Core.h>

#include "nimble/codegen.h"

/* Calls the overloaded intrinsic `name` (e.g. "llvm.fmuladd") at type ty. */
LLVMValueRef nimble_cg_intrinsic(LLVMModuleRef m, LLVMBuilderRef b, const char *name, LLVMTypeRef ty,
                                 LLVMValueRef *args, unsigned n);

/* Inline f32 approximations (scalar IR the loop vectorizer widens). */
LLVMValueRef nimble_cg_exp(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x);
LLVMValueRef nimble_cg_tanh(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x);
LLVMValueRef nimble_cg_sigmoid(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x);
LLVMValueRef nimble_cg_erf(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x);

/* Emits every kernel into `m` (whose triple and data layout are set), for
 * the CPU kernel ABI or, with gpu, as nvptx64 kernels. Returns the first
 * problem as a status. */
nimble_status_t nimble_cg_emit_kernels(LLVMModuleRef m, const nimble_ln_kernel *const *kernels,
                                       size_t n_kernels, int gpu);

#endif
