/* Loop-nest IR: the kernel-level IR that code generation lowers to LLVM.
 *
 * A kernel is a name, a list of tensor parameters (inputs, then outputs, in
 * the order of the runtime's kernel ABI) and a body statement. Tensors are
 * flat, C-contiguous buffers: a load or store names a parameter and a flat
 * element index, usually built with nimble_ln_flat_index() from loop
 * variables and the symbolic extents shape(param, axis), which the kernel
 * reads from its DLTensor arguments at run time. So one kernel serves every
 * shape.
 *
 * Expressions are typed (floats f32 f64 f16 bf16, signed integers i8 i16
 * i32 i64, unsigned u8 u16 u32 u64, and bool); statements are loops (with a
 * kind: serial, parallel, vectorized, unrolled), let bindings, mutable
 * scalar accumulators (decl/assign), stores, if, run-time checks that fail
 * the kernel with a message, and a call to the runtime's sgemm. Schedules
 * (nimble_ln_split, nimble_ln_chunk) rewrite loops; a kernel may declare a
 * specialisation ("extent e is divisible by w") and code generation then
 * emits a specialised variant, a general one and a dispatcher.
 *
 * Every node lives in a nimble_ln_arena and is freed with it. Constructors
 * never fail loudly: on bad input (mixed types, NULL operands, out of
 * memory) they return NULL, record the first error in the arena, and the
 * error surfaces as a status from nimble_ln_arena_status() or from code
 * generation. Nodes may be shared (a split's body appears in the main loop
 * and in its tail), so the IR is a DAG, never mutated after construction
 * except by the schedule helpers on loops they are given.
 */
#ifndef NIMBLE_LOOPNEST_H
#define NIMBLE_LOOPNEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nimble_ln_arena nimble_ln_arena;

typedef enum nimble_ln_type {
  NIMBLE_LN_F32 = 0,
  NIMBLE_LN_I64,
  NIMBLE_LN_I32,
  NIMBLE_LN_BOOL, /* results of comparisons; not a tensor element type */
  /* One byte, unsigned: uint8 tensors, and the element type of bool
   * tensors, which the runtime holds as DLPack {kDLUInt, 8, 1} (or TVM's
   * {kDLUInt, 1, 1}), one byte of 0 or 1 per element. A store into a u8
   * tensor also takes a bool value (written 0/1). */
  NIMBLE_LN_U8,
  NIMBLE_LN_F64,
  /* IEEE binary16 and bfloat16: stored as 16 bits; every operation on
   * them is computed in f32 and its result rounded to the type (to
   * nearest, ties to even), as NumPy does per operation. */
  NIMBLE_LN_F16,
  NIMBLE_LN_BF16,
  NIMBLE_LN_I8,
  NIMBLE_LN_I16,
  NIMBLE_LN_U16,
  NIMBLE_LN_U32,
  NIMBLE_LN_U64,
} nimble_ln_type_t;

typedef enum nimble_ln_op {
  /* unary */
  NIMBLE_LN_NEG = 0,
  NIMBLE_LN_NOT,
  NIMBLE_LN_ABS,
  NIMBLE_LN_EXP,
  NIMBLE_LN_TANH,
  NIMBLE_LN_SIGMOID,
  NIMBLE_LN_ERF,
  NIMBLE_LN_SQRT,
  NIMBLE_LN_LOG,
  /* binary */
  NIMBLE_LN_ADD,
  NIMBLE_LN_SUB,
  NIMBLE_LN_MUL,
  NIMBLE_LN_DIV, /* integers: truncating (unsigned for u*); a zero divisor gives 0, INT_MIN / -1 wraps */
  NIMBLE_LN_REM,
  NIMBLE_LN_MIN, /* floats: NaN if either operand is NaN (NumPy's minimum) */
  NIMBLE_LN_MAX,
  NIMBLE_LN_POW, /* floats only */
  NIMBLE_LN_LT,
  NIMBLE_LN_LE,
  NIMBLE_LN_GT,
  NIMBLE_LN_GE,
  NIMBLE_LN_EQ,
  NIMBLE_LN_NE,
  NIMBLE_LN_AND, /* bool only */
  NIMBLE_LN_OR,
  /* Integers: a << b, a >> b (logical for unsigned, arithmetic for
   * signed). A count outside [0, bits) gives 0 (>> of a negative signed
   * value: -1), never poison. */
  NIMBLE_LN_SHL,
  NIMBLE_LN_SHR,
  /* unary, floats: libm's sin, cos, atan (sinf ... for f32, f16, bf16);
   * compute definitions use them for f64, where no f32 approximation will
   * do. Not on nvptx64. */
  NIMBLE_LN_SIN,
  NIMBLE_LN_COS,
  NIMBLE_LN_ATAN,
  /* binary, floats: the larger, a NaN operand ignored (IEEE maxNum). For
   * reductions whose NaNs reach the result another way (softmax's row
   * maximum: a NaN makes the row's sum NaN anyway): LLVM vectorizes a
   * maxnum reduction, not NaN-propagating max's compare-and-select chain. */
  NIMBLE_LN_MAXNUM,
} nimble_ln_op_t;

typedef enum nimble_ln_loop_kind {
  NIMBLE_LN_SERIAL = 0,
  NIMBLE_LN_PARALLEL,   /* outlined; one task per iteration through env->parallel_for */
  NIMBLE_LN_VECTORIZED, /* factor = vector width (LLVM loop-vectorize metadata) */
  NIMBLE_LN_UNROLLED,   /* factor = unroll count */
} nimble_ln_loop_kind_t;

typedef struct nimble_ln_var {
  const char *name; /* arena-owned */
  nimble_ln_type_t type;
  int mutable_; /* declared by nimble_ln_decl: may be assigned */
  int id; /* unique within the arena, from 0 */
} nimble_ln_var;

typedef struct nimble_ln_param {
  const char *name; /* arena-owned */
  nimble_ln_type_t dtype;
  int rank;
  int index; /* position in the kernel's argument list */
  int is_output;
  /* A scratch buffer (nimble_ln_kernel_add_scratch): its element count.
   * NULL for the kernel's arguments. */
  struct nimble_ln_expr *scratch;
} nimble_ln_param;

typedef enum nimble_ln_expr_kind {
  NIMBLE_LN_E_CONST_F = 0,
  NIMBLE_LN_E_CONST_I,
  NIMBLE_LN_E_VAR,
  NIMBLE_LN_E_SHAPE,
  NIMBLE_LN_E_LOAD,
  NIMBLE_LN_E_UNARY,
  NIMBLE_LN_E_BINARY,
  NIMBLE_LN_E_SELECT,
  NIMBLE_LN_E_CAST,
  NIMBLE_LN_E_HAS_SGEMM, /* bool: the runtime provides env->sgemm */
  NIMBLE_LN_E_HAS_SGEMM_EPILOGUE, /* bool: the runtime provides env->sgemm_epilogue */
  NIMBLE_LN_E_FMA, /* floats: a * b + c rounded once (llvm.fma): the same bits on every target */
  NIMBLE_LN_E_NUM_THREADS, /* i64: env->num_threads (1 when the runtime has none, and on GPUs) */
  NIMBLE_LN_E_HAS_CONV3X3, /* bool: the runtime provides env->conv3x3 (false on GPUs) */
} nimble_ln_expr_kind_t;

typedef struct nimble_ln_expr nimble_ln_expr;
struct nimble_ln_expr {
  nimble_ln_expr_kind_t kind;
  nimble_ln_type_t type;
  nimble_ln_op_t op;
  double f;
  int64_t i;
  nimble_ln_var *var;
  nimble_ln_param *param;
  int axis;
  nimble_ln_expr *a, *b, *c;
};

typedef enum nimble_ln_stmt_kind {
  NIMBLE_LN_S_SEQ = 0,
  NIMBLE_LN_S_FOR,
  NIMBLE_LN_S_LET,
  NIMBLE_LN_S_DECL,
  NIMBLE_LN_S_ASSIGN,
  NIMBLE_LN_S_STORE,
  NIMBLE_LN_S_IF,
  NIMBLE_LN_S_CHECK,
  NIMBLE_LN_S_SGEMM,
  NIMBLE_LN_S_CONV3X3,
} nimble_ln_stmt_kind_t;

/* C[m,n] = alpha * op(A) * op(B) + beta * C, row-major, through env->sgemm.
 * Offsets are element offsets into the parameters' buffers. With
 * `epilogue`, through env->sgemm_epilogue instead: then each C[i, j] gets
 * + row_bias[row_bias_offset + i], + col_bias[col_bias_offset + j] and +
 * residual[residual_offset + i * ldr + j] (each only when its parameter is
 * not NULL) and is clamped to [lo, hi] keeping NaN; only under
 * has_sgemm_epilogue(). */
typedef struct nimble_ln_sgemm_desc {
  int trans_a, trans_b;
  nimble_ln_expr *m, *n, *k;
  float alpha, beta;
  nimble_ln_param *a, *b, *c;
  nimble_ln_expr *a_offset, *b_offset, *c_offset;
  nimble_ln_expr *lda, *ldb, *ldc;
  int epilogue; /* nonzero: through env->sgemm_epilogue */
  nimble_ln_param *row_bias, *col_bias, *residual;
  nimble_ln_expr *row_bias_offset, *col_bias_offset, *residual_offset, *ldr;
  float lo, hi;
} nimble_ln_sgemm_desc_t;

/* One image of a 3x3 convolution with unit strides and dilations, one
 * group, through env->conv3x3 (nimble/kernel_abi.h: the runtime's
 * Winograd convolution): x at x_offset ([c][h][w]), w at w_offset
 * ([k][c][3][3]), y at y_offset ([k][oh][ow]), element offsets. Each
 * output then gets + row_bias[row_bias_offset + channel], + residual[
 * residual_offset + channel * ldr + pixel] (each only when its parameter
 * is not NULL) and the clamp to [lo, hi] keeping NaN, as sgemm's
 * epilogue on C[channel, pixel]. Only under has_conv3x3(). */
typedef struct nimble_ln_conv3x3_desc {
  nimble_ln_param *x, *w, *y;
  nimble_ln_expr *x_offset, *w_offset, *y_offset;
  nimble_ln_expr *c, *h, *width, *k, *pad_t, *pad_l, *oh, *ow;
  nimble_ln_param *row_bias, *residual;
  nimble_ln_expr *row_bias_offset, *residual_offset, *ldr;
  float lo, hi;
} nimble_ln_conv3x3_desc_t;

typedef struct nimble_ln_stmt nimble_ln_stmt;
struct nimble_ln_stmt {
  nimble_ln_stmt_kind_t kind;
  /* FOR: var in [begin, end); LET/DECL/ASSIGN: var, value */
  nimble_ln_var *var;
  nimble_ln_expr *begin, *end;
  nimble_ln_loop_kind_t loop_kind;
  int factor;
  /* FOR: LLVM unrolls it neither fully nor partly (nimble_ln_no_unroll). */
  bool no_unroll;
  /* FOR, vectorized: the iterations past the last whole vector run as one
   * masked vector step, not one scalar step each (nimble_ln_masked_tail). */
  bool masked_tail;
  /* FOR, vectorized: LLVM's interleave count (vectors of iterations side
   * by side); 0: LLVM's choice (nimble_ln_kernel_set_interleave). */
  int interleave;
  /* A split's tail loop runs no iteration when shape(tail_param, tail_axis)
   * is divisible by tail_factor; a specialised variant drops it. */
  nimble_ln_param *tail_param;
  int tail_axis;
  int64_t tail_factor;
  nimble_ln_expr *value; /* LET/DECL/ASSIGN/STORE value; IF/CHECK condition */
  nimble_ln_param *param; /* STORE */
  nimble_ln_expr *index;  /* STORE flat element index */
  nimble_ln_stmt *body;   /* FOR/LET/DECL body; IF then */
  nimble_ln_stmt *else_;  /* IF else (may be NULL) */
  nimble_ln_stmt **stmts; /* SEQ */
  size_t n_stmts;
  const char *message;    /* CHECK */
  nimble_ln_sgemm_desc_t sgemm;
  nimble_ln_conv3x3_desc_t conv3x3;
};

#define NIMBLE_LN_TYPE_COUNT (NIMBLE_LN_U64 + 1)
#define NIMBLE_LN_MAX_PARAMS 16
#define NIMBLE_LN_MAX_RANK 8
#define NIMBLE_LN_MAX_SPECIALIZATIONS 4

typedef struct nimble_ln_specialization {
  nimble_ln_param *param;
  int axis;
  int64_t factor;
} nimble_ln_specialization_t;

typedef struct nimble_ln_kernel {
  const char *name; /* the exported symbol */
  nimble_ln_param *params[NIMBLE_LN_MAX_PARAMS];
  int n_params;
  nimble_ln_stmt *body;
  /* When every one holds at run time the dispatcher calls the specialised
   * variant (tail loops they cover removed); otherwise the general one. */
  nimble_ln_specialization_t specs[NIMBLE_LN_MAX_SPECIALIZATIONS];
  int n_specs;
  /* Called with an output over an input (update_in_place's scatters write
   * into their data tensor): its aliased variant is optimised like the
   * others; a kernel without it gets an unoptimised one (docs/codegen.md). */
  int in_place;
  /* NIMBLE_LN_ISA_X86_64_V4: built for x86-64-v4 whatever the target's
   * CPU (an x86 kernel's AVX-512 clone, NIMBLE_KERNEL_AVX512_SUFFIX). */
  int isa;
  nimble_ln_arena *arena;
} nimble_ln_kernel;

enum { NIMBLE_LN_ISA_TARGET = 0, NIMBLE_LN_ISA_X86_64_V4 = 1 };

/* Whether a vectorized loop of k evaluates exp, tanh, sigmoid or erf:
 * the kernels whose time is arithmetic on vectors, which twice the lanes
 * speed up (an LSTM's gates, a GELU, a softmax's exponentials). */
bool nimble_ln_kernel_vector_transcendental(const nimble_ln_kernel *k);
/* Whether k has a vectorized loop at all. */
bool nimble_ln_kernel_vectorized(const nimble_ln_kernel *k);
/* Sets the interleave count n (1, 2 or 4) on every vectorized loop of k
 * that carries no reduction (interleaving one would add its partial sums
 * in another order); returns how many loops it set. */
int nimble_ln_kernel_set_interleave(nimble_ln_kernel *k, int n);
/* Whether k's results are the same bits at any vector width: no
 * vectorized loop of it carries a reduction (a sum's lanes are added in
 * an order that depends on their number). */
bool nimble_ln_kernel_lane_exact(const nimble_ln_kernel *k);

/* One kernel from ks[0 .. n) (n <= NIMBLE_LN_MAX_SIZE_SCHEDULES), built in
 * one arena for the same computation under different schedules (the same
 * arguments: names, types, ranks, order): a call whose first output has
 * at most bounds[i] elements (bounds rising, n - 1 of them) runs ks[i]'s
 * body, the first such i; a larger one ks[n - 1]'s. Returns ks[0], which
 * becomes that kernel: the others' bodies and scratch buffers move into
 * it (their parameter references rewritten in place), so none of ks[1 ..
 * n) may be used after. A scratch buffer at the same place and of the
 * same type is shared (at the larger size); specialisations are united as
 * far as NIMBLE_LN_MAX_SPECIALIZATIONS allows. NULL, the arena failed,
 * when the arguments differ or the buffers do not fit. */
#define NIMBLE_LN_MAX_SIZE_SCHEDULES 4
nimble_ln_kernel *nimble_ln_kernel_by_size(nimble_ln_kernel *const *ks, const int64_t *bounds, int n);

/* Arena. */
nimble_status_t nimble_ln_arena_create(nimble_ln_arena **out);
void nimble_ln_arena_destroy(nimble_ln_arena *arena);
/* The first construction error recorded in the arena, as a new status
 * (caller owns), or nimble_ok(). */
nimble_status_t nimble_ln_arena_status(const nimble_ln_arena *arena);
/* Records a construction error (the first one wins). */
void nimble_ln_arena_fail(nimble_ln_arena *arena, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Zeroed arena memory, NULL (and the arena marked failed) when out of memory. */
void *nimble_ln_arena_alloc(nimble_ln_arena *arena, size_t bytes);
char *nimble_ln_arena_strdup(nimble_ln_arena *arena, const char *s);

const char *nimble_ln_type_name(nimble_ln_type_t t);
/* Classes of the types: floats (f32 f64 f16 bf16), integers (signed and
 * unsigned, not bool), unsigned integers; bits of a stored element. */
int nimble_ln_type_is_float(nimble_ln_type_t t);
int nimble_ln_type_is_int(nimble_ln_type_t t);
int nimble_ln_type_is_unsigned(nimble_ln_type_t t);
int nimble_ln_type_bits(nimble_ln_type_t t);
const char *nimble_ln_op_name(nimble_ln_op_t op);

/* Kernels and parameters. Names are copied into the arena. */
nimble_ln_kernel *nimble_ln_kernel_create(nimble_ln_arena *arena, const char *name);
nimble_ln_param *nimble_ln_kernel_add_param(nimble_ln_kernel *k, const char *name,
                                            nimble_ln_type_t dtype, int rank, int is_output);
/* A rank-1 scratch buffer of `elements` elements (an i64 expression of
 * constants and shape() reads of the kernel's arguments), after every
 * argument: it is not passed by the caller; the entry point takes it from
 * env->workspace_alloc (64-byte aligned) before the body runs, frees it
 * after, and fails with a message when the runtime cannot provide it.
 * Loads, stores and sgemm use it like any parameter; its contents start
 * undefined. nvptx64 has no workspace: a kernel whose code reaches a
 * scratch buffer there fails to build (NIMBLE_UNIMPLEMENTED). */
nimble_ln_param *nimble_ln_kernel_add_scratch(nimble_ln_kernel *k, const char *name,
                                              nimble_ln_type_t dtype, nimble_ln_expr *elements);
void nimble_ln_kernel_set_body(nimble_ln_kernel *k, nimble_ln_stmt *body);
/* Declares the specialised variant's assumption shape(param, axis) % factor == 0. */
void nimble_ln_kernel_specialize(nimble_ln_kernel *k, nimble_ln_param *param, int axis,
                                 int64_t factor);
/* Checks the kernel is complete and well formed: body set, every variable
 * bound where used, types consistent, no arena error. */
nimble_status_t nimble_ln_kernel_validate(const nimble_ln_kernel *k);

nimble_ln_var *nimble_ln_var_create(nimble_ln_arena *arena, const char *name, nimble_ln_type_t type);

/* Expressions. */
nimble_ln_expr *nimble_ln_f32(nimble_ln_arena *arena, double value);
nimble_ln_expr *nimble_ln_i64(nimble_ln_arena *arena, int64_t value);
nimble_ln_expr *nimble_ln_i32(nimble_ln_arena *arena, int32_t value);
nimble_ln_expr *nimble_ln_u8(nimble_ln_arena *arena, uint8_t value);
/* A constant of any float type, rounded to it (f16/bf16: to nearest even). */
nimble_ln_expr *nimble_ln_const_f(nimble_ln_arena *arena, nimble_ln_type_t type, double value);
/* A constant of any integer type (or bool), wrapped to its width. */
nimble_ln_expr *nimble_ln_const_i(nimble_ln_arena *arena, nimble_ln_type_t type, int64_t value);
nimble_ln_expr *nimble_ln_ref(nimble_ln_arena *arena, nimble_ln_var *var);
nimble_ln_expr *nimble_ln_shape(nimble_ln_arena *arena, nimble_ln_param *param, int axis);
nimble_ln_expr *nimble_ln_load(nimble_ln_arena *arena, nimble_ln_param *param, nimble_ln_expr *index);
nimble_ln_expr *nimble_ln_unary(nimble_ln_arena *arena, nimble_ln_op_t op, nimble_ln_expr *a);
nimble_ln_expr *nimble_ln_binary(nimble_ln_arena *arena, nimble_ln_op_t op, nimble_ln_expr *a,
                                 nimble_ln_expr *b);
/* a * b + c with one rounding (f32 or f64, all three of one type). */
nimble_ln_expr *nimble_ln_fma(nimble_ln_arena *arena, nimble_ln_expr *a, nimble_ln_expr *b, nimble_ln_expr *c);
nimble_ln_expr *nimble_ln_select(nimble_ln_arena *arena, nimble_ln_expr *cond, nimble_ln_expr *a,
                                 nimble_ln_expr *b);
nimble_ln_expr *nimble_ln_cast(nimble_ln_arena *arena, nimble_ln_type_t type, nimble_ln_expr *a);
nimble_ln_expr *nimble_ln_has_sgemm(nimble_ln_arena *arena);
nimble_ln_expr *nimble_ln_has_sgemm_epilogue(nimble_ln_arena *arena);
nimble_ln_expr *nimble_ln_num_threads(nimble_ln_arena *arena);
nimble_ln_expr *nimble_ln_has_conv3x3(nimble_ln_arena *arena);
/* Row-major flat index of param at idx[0..rank): ((i0*s1 + i1)*s2 + i2)... */
nimble_ln_expr *nimble_ln_flat_index(nimble_ln_arena *arena, nimble_ln_param *param,
                                     nimble_ln_expr *const *idx);
/* Product of shape(param, axis) for axis in [from, to); 1 when empty. */
nimble_ln_expr *nimble_ln_extent_product(nimble_ln_arena *arena, nimble_ln_param *param, int from,
                                         int to);

/* Statements. */
nimble_ln_stmt *nimble_ln_for(nimble_ln_arena *arena, nimble_ln_var *var, nimble_ln_expr *begin,
                              nimble_ln_expr *end, nimble_ln_loop_kind_t kind, int factor,
                              nimble_ln_stmt *body);
nimble_ln_stmt *nimble_ln_let(nimble_ln_arena *arena, nimble_ln_var *var, nimble_ln_expr *value,
                              nimble_ln_stmt *body);
/* Makes `var` mutable, initialised to init, for the extent of body. */
nimble_ln_stmt *nimble_ln_decl(nimble_ln_arena *arena, nimble_ln_var *var, nimble_ln_expr *init,
                               nimble_ln_stmt *body);
nimble_ln_stmt *nimble_ln_assign(nimble_ln_arena *arena, nimble_ln_var *var, nimble_ln_expr *value);
nimble_ln_stmt *nimble_ln_store(nimble_ln_arena *arena, nimble_ln_param *param,
                                nimble_ln_expr *index, nimble_ln_expr *value);
nimble_ln_stmt *nimble_ln_if(nimble_ln_arena *arena, nimble_ln_expr *cond, nimble_ln_stmt *then_,
                             nimble_ln_stmt *else_);
/* Fails the kernel (env->set_error(message), nonzero return) unless cond. */
nimble_ln_stmt *nimble_ln_check(nimble_ln_arena *arena, nimble_ln_expr *cond, const char *message);
nimble_ln_stmt *nimble_ln_seq(nimble_ln_arena *arena, nimble_ln_stmt *const *stmts, size_t n);
nimble_ln_stmt *nimble_ln_seq2(nimble_ln_arena *arena, nimble_ln_stmt *a, nimble_ln_stmt *b);
nimble_ln_stmt *nimble_ln_sgemm(nimble_ln_arena *arena, const nimble_ln_sgemm_desc_t *desc);
nimble_ln_stmt *nimble_ln_conv3x3(nimble_ln_arena *arena, const nimble_ln_conv3x3_desc_t *desc);

/* Schedules. Each takes a FOR statement and returns the statement that
 * replaces it; the original is left as it was (its body is shared). */

/* for v in [b,e) -> for vo in [0,(e-b)/f): for vi in [0,f) inner_kind: let v = b+vo*f+vi: body
 * followed by the tail loop for v in [b+((e-b)/f)*f, e) (the original kind).
 * When b is 0 and e is shape(p, a), the tail is marked as vanishing when
 * shape(p, a) % f == 0, for the specialised variant. */
nimble_ln_stmt *nimble_ln_split(nimble_ln_arena *arena, const nimble_ln_stmt *loop, int64_t factor,
                                nimble_ln_loop_kind_t inner_kind, int inner_factor);
/* for v in [b,e) -> the whole vectors of nimble_ln_split (factor lanes),
 * then, for a remainder, one more whole vector ending at e that overlaps
 * the one before it: no scalar tail (a 27-wide row with 8 lanes was 3
 * vectors and 3 scalar steps, now 4 vectors). A loop shorter than one
 * vector runs serially. Valid only when the body's iterations are
 * independent and running one twice stores the same values again: each
 * stores a function of memory that no iteration of the loop writes. */
nimble_ln_stmt *nimble_ln_split_overlap(nimble_ln_arena *arena, const nimble_ln_stmt *loop, int64_t factor);
/* for v in [b,e) -> parallel for c in [0, ceil((e-b)/chunk)): for v in
 * [b+c*chunk, min(e, b+(c+1)*chunk)) (original kind): body. chunk is an
 * i64 expression evaluated once, and must be positive. */
nimble_ln_stmt *nimble_ln_chunk(nimble_ln_arena *arena, const nimble_ln_stmt *loop,
                                nimble_ln_expr *chunk);
/* Marks the FOR loops of s (s itself, or a split's loops: the statements
 * of a SEQ and the bodies of FORs down to the first other statement) not
 * to be unrolled, and returns s. For a vectorized loop of a constant trip
 * count inside another: LLVM unrolls short constant loops fully before it
 * vectorizes, and the straight-line copies it then vectorizes across rows
 * came out as shuffles (bert's layer norms, 4x slower). */
nimble_ln_stmt *nimble_ln_no_unroll(nimble_ln_stmt *s);
/* Marks a vectorized FOR loop's remainder to run as a masked vector step
 * (llvm.loop.vectorize.predicate.enable) and returns s; other statements
 * are returned as they are. For short rows whose length is not a multiple
 * of the vector (a 7x7 plane's 7 pixels with 8 lanes were 7 scalar steps);
 * on every loop it cost mobilenet_v2 17%, the mask being computed on every
 * step of the long ones. */
nimble_ln_stmt *nimble_ln_masked_tail(nimble_ln_stmt *s);
/* A copy of the loop with another kind and factor. */
nimble_ln_stmt *nimble_ln_with_kind(nimble_ln_arena *arena, const nimble_ln_stmt *loop,
                                    nimble_ln_loop_kind_t kind, int factor);

/* Text form, for debugging and tests. Caller frees the string (free()). */
nimble_status_t nimble_ln_kernel_print(const nimble_ln_kernel *k, char **out);
/* The canonical text of k, the kernel cache's key (nimble_codegen_kernel_key):
 * two kernels print the same exactly when code generation sees the same
 * kernel (variables numbered by first appearance with their types, every
 * expression's type, floats in hex, every sgemm field). Not for reading. */
nimble_status_t nimble_ln_kernel_print_canonical(const nimble_ln_kernel *k, char **out);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_LOOPNEST_H */
