/* Hand-written operator builders: a compute definition plus a default
 * schedule per kernel, built directly on the loop-nest IR. They are test
 * fixtures of the code generator (tests/codegen/): the compiler's own
 * kernels come from compute/ (docs/compute.md), which derives them from the
 * fused primitive functions. These exercise the IR, the schedules, the
 * emitter and the runtime's kernel ABI on kernels whose results a test can
 * check against plain C. */
#ifndef NIMBLE_TEST_OP_BUILDERS_H
#define NIMBLE_TEST_OP_BUILDERS_H

#include "nimble/codegen.h"

/* Each builder creates a kernel in `arena` (which owns it) and returns it through
 * *out; errors name the kernel and the problem. */

/* Element-wise over numpy broadcasting: inputs of rank <= out_rank
 * (<= 6) align to the output's trailing axes; an input axis broadcasts
 * when its extent is 1. `combine` builds the value from the inputs' loaded
 * values (in[i] are f32 expressions) and may call arena constructors. */
typedef nimble_ln_expr *(*nimble_codegen_combine_fn)(nimble_ln_arena *arena, nimble_ln_expr *const *in,
                                                     void *user);
nimble_status_t nimble_codegen_build_elementwise(nimble_ln_arena *arena, const char *name,
                                                 int n_inputs, const int *input_ranks, int out_rank,
                                                 nimble_codegen_combine_fn combine, void *user,
                                                 nimble_ln_kernel **out);
/* Convenience combines: user points to a nimble_ln_op_t. */
nimble_ln_expr *nimble_codegen_combine_unary(nimble_ln_arena *arena, nimble_ln_expr *const *in, void *op);
nimble_ln_expr *nimble_codegen_combine_binary(nimble_ln_arena *arena, nimble_ln_expr *const *in, void *op);

typedef enum nimble_codegen_reduce_kind {
  NIMBLE_CODEGEN_REDUCE_SUM = 0,
  NIMBLE_CODEGEN_REDUCE_MEAN,
  NIMBLE_CODEGEN_REDUCE_MAX,
} nimble_codegen_reduce_kind_t;

/* out = reduce(x, axis) with the axis removed (keepdims=0): x has `rank`
 * axes (1..6), out rank-1 (a scalar for rank 1). The epilogue, when given,
 * maps the reduced value (e.g. mean's division) before the store. */
nimble_status_t nimble_codegen_build_reduce(nimble_ln_arena *arena, const char *name, int rank,
                                            int axis, nimble_codegen_reduce_kind_t kind,
                                            nimble_ln_kernel **out);

/* Softmax over the last axis of a rank-`rank` f32 tensor (numerically
 * stable: subtracts the row maximum). */
nimble_status_t nimble_codegen_build_softmax(nimble_ln_arena *arena, const char *name, int rank,
                                             nimble_ln_kernel **out);

typedef enum nimble_codegen_epilogue {
  NIMBLE_CODEGEN_EPILOGUE_NONE = 0,
  NIMBLE_CODEGEN_EPILOGUE_BIAS,      /* + b[n] */
  NIMBLE_CODEGEN_EPILOGUE_BIAS_RELU, /* relu(+ b[n]) */
} nimble_codegen_epilogue_t;

/* y[M,N] = x[M,K] @ w[K,N] (+ bias[N], relu): calls env->sgemm when the
 * runtime provides it, else tiled vectorized loops; the epilogue is fused
 * into the output pass. Arguments: x, w, [bias], y. */
nimble_status_t nimble_codegen_build_dense(nimble_ln_arena *arena, const char *name,
                                           nimble_codegen_epilogue_t epilogue, nimble_ln_kernel **out);

#endif
