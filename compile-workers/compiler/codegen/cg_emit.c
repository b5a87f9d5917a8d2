/* Lowering of loop-nest kernels to LLVM IR.
 *
 * Each kernel becomes three kinds of functions:
 *   - the exported entry point with the runtime's kernel ABI, which checks
 *     the arguments (count, rank, dtype, compact strides, extents >= 0)
 *     and dispatches to a variant;
 *   - internal variants: `name.aliased` for calls where an output overlaps
 *     another argument; `name.general`, whose buffer accesses carry
 *     alias-scope metadata saying they do not overlap; and, when the kernel
 *     declares specialisations, `name.divisible`, alias-free too and with
 *     the split tails those specialisations cover left out;
 *   - one internal body function per parallel loop, `name.parN`, called
 *     through env->parallel_for with a closure struct holding the argument
 *     array, env, the loop's start and every free variable's value.
 * Vectorized and unrolled loops carry llvm.loop metadata; LLVM's loop and
 * SLP vectorizers do the widening.
 *
 * Kernels with the same body under different names (a model's repeated
 * layers) can share one implementation (nimble_cg_emit_shared_kernel): the
 * entry point and variants become `IMPL`, a hidden function, and each
 * kernel's exported symbol calls it. Error messages do not name the kernel
 * (the VM does, from the symbol it called), so one body serves them all.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h>

#include "cg_internal.h"
#include "nimble/kernel_abi.h"

/* The layouts the generated code reads; x86_64 and aarch64 Linux share them. */
enum {
  T_DATA = offsetof(DLTensor, data),
  T_NDIM = offsetof(DLTensor, ndim),
  T_DTYPE = offsetof(DLTensor, dtype),
  T_SHAPE = offsetof(DLTensor, shape),
  T_STRIDES = offsetof(DLTensor, strides),
  T_BYTE_OFFSET = offsetof(DLTensor, byte_offset),
  E_STRUCT_SIZE = offsetof(nimble_kernel_env_t, struct_size),
  E_PARALLEL_FOR = offsetof(nimble_kernel_env_t, parallel_for),
  E_SET_ERROR = offsetof(nimble_kernel_env_t, set_error),
  E_SGEMM = offsetof(nimble_kernel_env_t, sgemm),
  E_SGEMM_EPILOGUE = offsetof(nimble_kernel_env_t, sgemm_epilogue),
  E_NUM_THREADS = offsetof(nimble_kernel_env_t, num_threads),
  E_CONV3X3 = offsetof(nimble_kernel_env_t, conv3x3),
  E_WS_ALLOC = offsetof(nimble_kernel_env_t, workspace_alloc),
  E_WS_FREE = offsetof(nimble_kernel_env_t, workspace_free),
};
_Static_assert(sizeof(void *) == 8 && sizeof(int64_t) == 8, "LP64 host expected");
/* The struct the generated code builds for sgemm_epilogue (epi_struct_ty). */
_Static_assert(offsetof(nimble_sgemm_epilogue_t, ldr) == 24 && offsetof(nimble_sgemm_epilogue_t, lo) == 32 &&
                   offsetof(nimble_sgemm_epilogue_t, hi) == 36 && sizeof(nimble_sgemm_epilogue_t) == 40,
               "nimble_sgemm_epilogue_t layout");

typedef struct cg_mod {
  LLVMModuleRef m;
  LLVMContextRef ctx;
  LLVMBuilderRef b;
  LLVMTypeRef i1, i8, i16, i32, i64, f32, f64, ptr, vd;
  LLVMTypeRef variant_ty, body_ty, pf_ty, set_error_ty, sgemm_ty, sgemm_epi_ty, epi_struct_ty, kernel_ty, conv3x3_ty;
  unsigned md_loop, md_scope, md_noalias;
  /* Per parameter of the current kernel: !alias.scope and !noalias lists. */
  LLVMMetadataRef scope_list[NIMBLE_LN_MAX_PARAMS], noalias_list[NIMBLE_LN_MAX_PARAMS];
  LLVMValueRef *vals; /* by variable id */
  int n_vals;
  const nimble_ln_kernel *k;
  nimble_status_t err;
  int n_outlined;
  int gpu; /* nvptx64: parallel loops over threads, no env */
  /* Emitting the aliased variant or the loops a runtime without sgemm
   * takes: loops neither vectorized nor unrolled (only in-place calls take
   * the one, only NIMBLE_SGEMM=none the other; keeping them small keeps the
   * optimiser's and instruction selection's work down). */
  int plain;
  /* The aliased variant of a kernel not built for in-place calls (all but
   * update_in_place's scatters, nimble_ln_kernel.in_place): the VM never
   * calls those with overlapping buffers (plan_memory hands a storage on
   * only once its tenant is dead, so an output never meets a live input),
   * so only other callers of the ABI can reach it, and it is left
   * unoptimised (optnone: no passes, fast instruction selection), at about
   * a fifth of a model's code generation less. */
  int optnone;
} cg_mod;

typedef struct cg_fn {
  cg_mod *cm;
  LLVMValueRef fn, args, env;
  LLVMValueRef data[NIMBLE_LN_MAX_PARAMS];
  LLVMValueRef shape[NIMBLE_LN_MAX_PARAMS][NIMBLE_LN_MAX_RANK];
  const nimble_ln_specialization_t *assume;
  int n_assume;
  int disjoint; /* the dispatcher checked outputs overlap no other buffer */
  /* GPU: this thread's global index and the grid's size, and whether the
   * statement being emitted is inside the parallel (threaded) loop. */
  LLVMValueRef gpu_tid, gpu_threads;
  int in_parallel;
  /* CPU: the function's one failure exit (set_error with `fail_msg`, the
   * message of the branch that came, then return 1), made on first use. */
  LLVMBasicBlockRef fail_block;
  LLVMValueRef fail_msg;
} cg_fn;

static void fail(cg_mod *cm, nimble_status_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(cg_mod *cm, nimble_status_code_t code, const char *fmt, ...) {
  if (cm->err) return;
  va_list ap;
  va_start(ap, fmt);
  nimble_status_t s = nimble_status_makev(code, fmt, ap);
  va_end(ap);
  cm->err = nimble_status_annotate(s, "kernel '%s'", cm->k ? cm->k->name : "?");
}

/* The LLVM type of a value. f16 and bf16 values live in float registers,
 * already rounded to their format; signedness is in the operations. */
static LLVMTypeRef lt(cg_mod *cm, nimble_ln_type_t t) {
  switch (t) {
  case NIMBLE_LN_F32:
  case NIMBLE_LN_F16:
  case NIMBLE_LN_BF16: return cm->f32;
  case NIMBLE_LN_F64: return cm->f64;
  case NIMBLE_LN_I64:
  case NIMBLE_LN_U64: return cm->i64;
  case NIMBLE_LN_I32:
  case NIMBLE_LN_U32: return cm->i32;
  case NIMBLE_LN_I16:
  case NIMBLE_LN_U16: return cm->i16;
  case NIMBLE_LN_BOOL: return cm->i1;
  case NIMBLE_LN_U8:
  case NIMBLE_LN_I8: return cm->i8;
  }
  return cm->i64;
}

/* The LLVM type of a stored element: f16/bf16 are 16-bit patterns. */
static LLVMTypeRef storage_type(cg_mod *cm, nimble_ln_type_t t) {
  return t == NIMBLE_LN_F16 || t == NIMBLE_LN_BF16 ? cm->i16 : lt(cm, t);
}

/* A float value (in its register type) rounded to f16/bf16; others as they are. */
static LLVMValueRef round_to(cg_mod *cm, nimble_ln_type_t t, LLVMValueRef v) {
  if (t == NIMBLE_LN_F16)
    return nimble_cg_f16_bits_to_f32(cm->m, cm->b, nimble_cg_f32_to_f16_bits(cm->m, cm->b, v));
  if (t == NIMBLE_LN_BF16)
    return nimble_cg_bf16_bits_to_f32(cm->m, cm->b, nimble_cg_f32_to_bf16_bits(cm->m, cm->b, v));
  return v;
}

/* Types the nvptx64 path handles (what the f32 models use). */
static int gpu_type_ok(nimble_ln_type_t t) {
  return t == NIMBLE_LN_F32 || t == NIMBLE_LN_I64 || t == NIMBLE_LN_I32 || t == NIMBLE_LN_BOOL ||
         t == NIMBLE_LN_U8;
}

static void set_var(cg_mod *cm, const nimble_ln_var *v, LLVMValueRef value) {
  if (v->id >= cm->n_vals) {
    int n = cm->n_vals ? cm->n_vals : 64;
    while (n <= v->id) n *= 2;
    LLVMValueRef *vals = realloc(cm->vals, (size_t)n * sizeof *vals);
    if (!vals) {
      fail(cm, NIMBLE_RESOURCE_EXHAUSTED, "out of memory");
      return;
    }
    memset(vals + cm->n_vals, 0, (size_t)(n - cm->n_vals) * sizeof *vals);
    cm->vals = vals;
    cm->n_vals = n;
  }
  cm->vals[v->id] = value;
}

static LLVMValueRef get_var(cg_mod *cm, const nimble_ln_var *v) {
  return v->id < cm->n_vals ? cm->vals[v->id] : NULL;
}

static LLVMValueRef ci64(cg_mod *cm, int64_t v) { return LLVMConstInt(cm->i64, (unsigned long long)v, 1); }
static LLVMValueRef ci32(cg_mod *cm, int32_t v) { return LLVMConstInt(cm->i32, (unsigned long long)(int64_t)v, 1); }

/* Loads a field at a byte offset from base. */
static LLVMValueRef load_at(cg_mod *cm, LLVMValueRef base, unsigned off, LLVMTypeRef ty) {
  LLVMValueRef idx = ci64(cm, off);
  LLVMValueRef p = LLVMBuildGEP2(cm->b, cm->i8, base, &idx, 1, "");
  return LLVMBuildLoad2(cm->b, ty, p, "");
}

static LLVMValueRef alloca_in_entry(cg_fn *f, LLVMTypeRef ty, const char *name) {
  LLVMBuilderRef tmp = LLVMCreateBuilderInContext(f->cm->ctx);
  LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(f->fn);
  LLVMValueRef first = LLVMGetFirstInstruction(entry);
  if (first) LLVMPositionBuilderBefore(tmp, first);
  else LLVMPositionBuilderAtEnd(tmp, entry);
  LLVMValueRef a = LLVMBuildAlloca(tmp, ty, name);
  LLVMDisposeBuilder(tmp);
  return a;
}

static LLVMBasicBlockRef new_block(cg_fn *f, const char *name) {
  return LLVMAppendBasicBlockInContext(f->cm->ctx, f->fn, name);
}

/* Marks fn optnone (which LLVM requires to come with noinline). */
static void set_optnone(cg_mod *cm, LLVMValueRef fn) {
  static const char *const names[] = {"optnone", "noinline"};
  for (int i = 0; i < 2; i++) {
    unsigned kind = LLVMGetEnumAttributeKindForName(names[i], strlen(names[i]));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(cm->ctx, kind, 0));
  }
}

/* Calls env->set_error(env, message) and returns 1. The message does not
 * name the kernel: the VM, which knows which kernel it called, names it in
 * the status it makes ("kernel 'name' failed with code 1: message"), so a
 * message is one string the linker merges across every kernel that may
 * report it (with the name in it, mobilenet_v2's messages were 460 KB of
 * its 1.3 MB kernel library, every byte of it hashed at load). Every
 * failure of a function branches to one exit that makes the call, so a
 * check costs a compare and a jump with its message's address (the entry
 * points' dozens of argument checks each had their own call). */
static void emit_fail_return(cg_fn *f, const char *message) {
  cg_mod *cm = f->cm;
  if (cm->gpu) {
    /* No error channel on the device: the host checks arguments before a
     * launch; a kernel given bad ones does nothing. */
    LLVMBuildRetVoid(cm->b);
    return;
  }
  LLVMBasicBlockRef here = LLVMGetInsertBlock(cm->b);
  LLVMValueRef msg = LLVMBuildGlobalStringPtr(cm->b, message, "msg");
  if (!f->fail_block) {
    f->fail_block = new_block(f, "fail");
    LLVMPositionBuilderAtEnd(cm->b, f->fail_block);
    f->fail_msg = LLVMBuildPhi(cm->b, cm->ptr, "fail_msg");
    LLVMValueRef set_error = load_at(cm, f->env, E_SET_ERROR, cm->ptr);
    LLVMValueRef args[2] = {f->env, f->fail_msg};
    /* set_error may be NULL in a hand-made env: skip the call then. */
    LLVMBasicBlockRef call = new_block(f, "set_error"), done = new_block(f, "failed");
    LLVMBuildCondBr(cm->b, LLVMBuildIsNull(cm->b, set_error, ""), done, call);
    LLVMPositionBuilderAtEnd(cm->b, call);
    LLVMBuildCall2(cm->b, cm->set_error_ty, set_error, args, 2, "");
    LLVMBuildBr(cm->b, done);
    LLVMPositionBuilderAtEnd(cm->b, done);
    LLVMBuildRet(cm->b, ci32(cm, 1));
    LLVMPositionBuilderAtEnd(cm->b, here);
  }
  LLVMAddIncoming(f->fail_msg, &msg, &here, 1);
  LLVMBuildBr(cm->b, f->fail_block);
}

/* Branches on ok; on the failing side reports message and returns. */
static void emit_require(cg_fn *f, LLVMValueRef ok, const char *message) {
  LLVMBasicBlockRef good = new_block(f, "ok"), bad = new_block(f, "bad");
  LLVMBuildCondBr(f->cm->b, ok, good, bad);
  LLVMPositionBuilderAtEnd(f->cm->b, bad);
  emit_fail_return(f, message);
  LLVMPositionBuilderAtEnd(f->cm->b, good);
}

/* Loads every parameter's data pointer (plus byte_offset) and extents. The
 * entry point has checked them; LLVM drops what a function does not use. */
static void setup_params_n(cg_fn *f, int n) {
  cg_mod *cm = f->cm;
  for (int i = 0; i < n; i++) {
    const nimble_ln_param *p = cm->k->params[i];
    LLVMValueRef idx = ci64(cm, i);
    LLVMValueRef t = LLVMBuildLoad2(cm->b, cm->ptr, LLVMBuildGEP2(cm->b, cm->ptr, f->args, &idx, 1, ""), "");
    LLVMValueRef data = load_at(cm, t, T_DATA, cm->ptr);
    LLVMValueRef off = load_at(cm, t, T_BYTE_OFFSET, cm->i64);
    f->data[i] = LLVMBuildGEP2(cm->b, cm->i8, data, &off, 1, p->name);
    LLVMValueRef shp = p->rank ? load_at(cm, t, T_SHAPE, cm->ptr) : NULL;
    for (int a = 0; a < p->rank; a++) {
      LLVMValueRef ai = ci64(cm, a);
      f->shape[i][a] = LLVMBuildLoad2(cm->b, cm->i64, LLVMBuildGEP2(cm->b, cm->i64, shp, &ai, 1, ""), "");
    }
  }
}

/* The caller's arguments: the parameters before any scratch buffer. */
static int n_args_of(const nimble_ln_kernel *k) {
  int n = k->n_params;
  while (n > 0 && k->params[n - 1]->scratch) n--;
  return n;
}

/* Inside variants and outlined bodies the argument array also holds the
 * scratch buffers (the entry point appends them). */
static void setup_params(cg_fn *f) { setup_params_n(f, f->cm->k->n_params); }

static LLVMValueRef emit_expr(cg_fn *f, const nimble_ln_expr *e);

static LLVMValueRef intrinsic1(cg_mod *cm, const char *name, LLVMTypeRef ty, LLVMValueRef a) {
  return nimble_cg_intrinsic(cm->m, cm->b, name, ty, &a, 1);
}
static LLVMValueRef intrinsic2(cg_mod *cm, const char *name, LLVMTypeRef ty, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef args[2] = {a, b};
  return nimble_cg_intrinsic(cm->m, cm->b, name, ty, args, 2);
}

/* Calls a libm function double(double) or float(float) (the kernel ABI
 * allows libm). */
static LLVMValueRef libm1(cg_mod *cm, const char *name, LLVMValueRef x) {
  LLVMTypeRef xt = LLVMTypeOf(x);
  LLVMTypeRef fty = LLVMFunctionType(xt, &xt, 1, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(cm->m, name);
  if (!fn) fn = LLVMAddFunction(cm->m, name, fty);
  return LLVMBuildCall2(cm->b, fty, fn, &x, 1, "");
}

/* exp, tanh, sigmoid, erf, sqrt, log in double precision: libm. */
static LLVMValueRef emit_math_f64(cg_mod *cm, nimble_ln_op_t op, LLVMValueRef a) {
  switch (op) {
  case NIMBLE_LN_EXP: return intrinsic1(cm, "llvm.exp", cm->f64, a);
  case NIMBLE_LN_LOG: return intrinsic1(cm, "llvm.log", cm->f64, a);
  case NIMBLE_LN_SQRT: return intrinsic1(cm, "llvm.sqrt", cm->f64, a);
  case NIMBLE_LN_TANH: return libm1(cm, "tanh", a);
  case NIMBLE_LN_ERF: return libm1(cm, "erf", a);
  case NIMBLE_LN_SIN: return libm1(cm, "sin", a);
  case NIMBLE_LN_COS: return libm1(cm, "cos", a);
  case NIMBLE_LN_ATAN: return libm1(cm, "atan", a);
  case NIMBLE_LN_SIGMOID: {
    /* As the f32 one: e = exp(-|x|) never overflows. */
    LLVMValueRef one = LLVMConstReal(cm->f64, 1.0);
    LLVMValueRef e = intrinsic1(cm, "llvm.exp", cm->f64, LLVMBuildFNeg(cm->b, intrinsic1(cm, "llvm.fabs", cm->f64, a), ""));
    LLVMValueRef neg = LLVMBuildFCmp(cm->b, LLVMRealOLT, a, LLVMConstReal(cm->f64, 0), "");
    return LLVMBuildFDiv(cm->b, LLVMBuildSelect(cm->b, neg, e, one, ""), LLVMBuildFAdd(cm->b, one, e, ""), "");
  }
  default: return NULL;
  }
}

static LLVMValueRef emit_unary(cg_fn *f, const nimble_ln_expr *e) {
  cg_mod *cm = f->cm;
  LLVMValueRef a = emit_expr(f, e->a);
  if (!a) return NULL;
  nimble_ln_type_t t = e->a->type;
  int is_f = nimble_ln_type_is_float(t);
  LLVMTypeRef ty = lt(cm, t);
  switch (e->op) {
  case NIMBLE_LN_NEG: return is_f ? LLVMBuildFNeg(cm->b, a, "") : LLVMBuildNeg(cm->b, a, "");
  case NIMBLE_LN_NOT: return LLVMBuildNot(cm->b, a, "");
  case NIMBLE_LN_ABS:
    if (is_f) return intrinsic1(cm, "llvm.fabs", ty, a);
    if (nimble_ln_type_is_unsigned(t)) return a;
    return intrinsic2(cm, "llvm.abs", ty, a, LLVMConstInt(cm->i1, 0, 0));
  default: break;
  }
  if (t == NIMBLE_LN_F64) {
    LLVMValueRef r = emit_math_f64(cm, e->op, a);
    if (r) return r;
  } else {
    /* f32, and f16/bf16 computed in f32 and rounded. */
    LLVMValueRef r = NULL;
    switch (e->op) {
    case NIMBLE_LN_EXP: r = nimble_cg_exp(cm->m, cm->b, a); break;
    case NIMBLE_LN_TANH: r = nimble_cg_tanh(cm->m, cm->b, a); break;
    case NIMBLE_LN_SIGMOID: r = nimble_cg_sigmoid(cm->m, cm->b, a); break;
    case NIMBLE_LN_ERF: r = nimble_cg_erf(cm->m, cm->b, a); break;
    case NIMBLE_LN_SQRT: r = intrinsic1(cm, "llvm.sqrt", ty, a); break;
    case NIMBLE_LN_LOG:
      if (cm->gpu) break; /* libm's logf is not there on the device */
      r = intrinsic1(cm, "llvm.log", ty, a);
      break;
    case NIMBLE_LN_SIN:
    case NIMBLE_LN_COS:
    case NIMBLE_LN_ATAN:
      if (cm->gpu) break;
      r = libm1(cm, e->op == NIMBLE_LN_SIN ? "sinf" : e->op == NIMBLE_LN_COS ? "cosf" : "atanf", a);
      break;
    default: break;
    }
    if (r) return round_to(cm, t, r);
  }
  if (cm->gpu && (e->op == NIMBLE_LN_LOG || e->op >= NIMBLE_LN_SIN))
    fail(cm, NIMBLE_UNIMPLEMENTED, "%s is not available on nvptx64", nimble_ln_op_name(e->op));
  else fail(cm, NIMBLE_INTERNAL, "unary operator %d not lowered", (int)e->op);
  return NULL;
}

/* Integer division that cannot trap: a zero divisor yields 0 and INT_MIN /
 * -1 wraps, instead of a SIGFPE in the runtime's process. Constant positive
 * divisors (all the index arithmetic) take the plain instruction. */
static LLVMValueRef safe_idiv(cg_mod *cm, LLVMValueRef a, LLVMValueRef b, LLVMTypeRef ty, int rem) {
  if (LLVMIsAConstantInt(b) && LLVMConstIntGetSExtValue(b) > 0)
    return rem ? LLVMBuildSRem(cm->b, a, b, "") : LLVMBuildSDiv(cm->b, a, b, "");
  LLVMValueRef zero = LLVMConstInt(ty, 0, 0), one = LLVMConstInt(ty, 1, 0);
  LLVMValueRef minus1 = LLVMConstAllOnes(ty);
  LLVMValueRef bad = LLVMBuildOr(cm->b, LLVMBuildICmp(cm->b, LLVMIntEQ, b, zero, ""),
                                 LLVMBuildICmp(cm->b, LLVMIntEQ, b, minus1, ""), "");
  LLVMValueRef safe_b = LLVMBuildSelect(cm->b, bad, one, b, "");
  LLVMValueRef q = rem ? LLVMBuildSRem(cm->b, a, safe_b, "") : LLVMBuildSDiv(cm->b, a, safe_b, "");
  LLVMValueRef special = rem ? zero : LLVMBuildSelect(cm->b, LLVMBuildICmp(cm->b, LLVMIntEQ, b, zero, ""),
                                                      zero, LLVMBuildSub(cm->b, zero, a, ""), "");
  return LLVMBuildSelect(cm->b, bad, special, q, "");
}

/* Unsigned division with the same guarantee: a zero divisor yields 0. */
static LLVMValueRef safe_udiv(cg_mod *cm, LLVMValueRef a, LLVMValueRef b, LLVMTypeRef ty, int rem) {
  if (LLVMIsAConstantInt(b) && LLVMConstIntGetZExtValue(b) != 0)
    return rem ? LLVMBuildURem(cm->b, a, b, "") : LLVMBuildUDiv(cm->b, a, b, "");
  LLVMValueRef zero = LLVMConstInt(ty, 0, 0);
  LLVMValueRef bad = LLVMBuildICmp(cm->b, LLVMIntEQ, b, zero, "");
  LLVMValueRef safe_b = LLVMBuildSelect(cm->b, bad, LLVMConstInt(ty, 1, 0), b, "");
  LLVMValueRef q = rem ? LLVMBuildURem(cm->b, a, safe_b, "") : LLVMBuildUDiv(cm->b, a, safe_b, "");
  return LLVMBuildSelect(cm->b, bad, zero, q, "");
}

/* a << b and a >> b without poison: counts outside [0, bits) give 0, or
 * the sign fill for an arithmetic right shift. */
static LLVMValueRef safe_shift(cg_mod *cm, LLVMValueRef a, LLVMValueRef b, LLVMTypeRef ty, int bits, int right,
                               int is_signed) {
  LLVMValueRef limit = LLVMConstInt(ty, (unsigned long long)bits, 0);
  LLVMValueRef in_range = LLVMBuildICmp(cm->b, LLVMIntULT, b, limit, "");
  LLVMValueRef n = LLVMBuildSelect(cm->b, in_range, b, LLVMConstInt(ty, 0, 0), "");
  LLVMValueRef r, out;
  if (!right) {
    r = LLVMBuildShl(cm->b, a, n, "");
    out = LLVMConstInt(ty, 0, 0);
  } else if (is_signed) {
    r = LLVMBuildAShr(cm->b, a, n, "");
    out = LLVMBuildAShr(cm->b, a, LLVMConstInt(ty, (unsigned long long)(bits - 1), 0), "");
  } else {
    r = LLVMBuildLShr(cm->b, a, n, "");
    out = LLVMConstInt(ty, 0, 0);
  }
  return LLVMBuildSelect(cm->b, in_range, r, out, "");
}

static LLVMValueRef emit_binary(cg_fn *f, const nimble_ln_expr *e) {
  cg_mod *cm = f->cm;
  LLVMValueRef a = emit_expr(f, e->a), b = emit_expr(f, e->b);
  if (!a || !b) return NULL;
  nimble_ln_type_t t = e->a->type;
  int is_f = nimble_ln_type_is_float(t);
  int is_u = nimble_ln_type_is_unsigned(t); /* and bool: compare unsigned */
  /* The index types keep the no-signed-wrap flags their arithmetic always
   * had (it helps the vectorizer); narrower and unsigned tensor data wrap
   * as NumPy's do. */
  int nsw = t == NIMBLE_LN_I64 || t == NIMBLE_LN_I32;
  LLVMTypeRef ty = lt(cm, t);
  LLVMBuilderRef B = cm->b;
  LLVMValueRef r = NULL;
  switch (e->op) {
  case NIMBLE_LN_ADD: r = is_f ? LLVMBuildFAdd(B, a, b, "") : nsw ? LLVMBuildNSWAdd(B, a, b, "") : LLVMBuildAdd(B, a, b, ""); break;
  case NIMBLE_LN_SUB: r = is_f ? LLVMBuildFSub(B, a, b, "") : nsw ? LLVMBuildNSWSub(B, a, b, "") : LLVMBuildSub(B, a, b, ""); break;
  case NIMBLE_LN_MUL: r = is_f ? LLVMBuildFMul(B, a, b, "") : nsw ? LLVMBuildNSWMul(B, a, b, "") : LLVMBuildMul(B, a, b, ""); break;
  case NIMBLE_LN_DIV:
    r = is_f ? LLVMBuildFDiv(B, a, b, "") : is_u ? safe_udiv(cm, a, b, ty, 0) : safe_idiv(cm, a, b, ty, 0);
    break;
  case NIMBLE_LN_REM:
    r = is_f ? LLVMBuildFRem(B, a, b, "") : is_u ? safe_udiv(cm, a, b, ty, 1) : safe_idiv(cm, a, b, ty, 1);
    break;
  case NIMBLE_LN_MIN:
  case NIMBLE_LN_MAX: {
    int mx = e->op == NIMBLE_LN_MAX;
    if (!is_f) return intrinsic2(cm, mx ? (is_u ? "llvm.umax" : "llvm.smax") : (is_u ? "llvm.umin" : "llvm.smin"), ty, a, b);
    /* NumPy's maximum/minimum: NaN when either side is NaN (maxnum would
     * drop it). Against a constant that is not NaN (Relu's 0, Clip's
     * bounds): b when it wins, else a (a NaN included), which is NumPy's
     * (a >= b || a is NaN) ? a : b and one vmaxps(b, a) on x86 (the form
     * below took a compare, a NaN test and a blend: a fifth of a
     * depthwise layer's time went to its ReLU6 pass). */
    LLVMBool loses = 0;
    if (LLVMIsAConstantFP(b) && !isnan(LLVMConstRealGetDouble(b, &loses)))
      return LLVMBuildSelect(B, LLVMBuildFCmp(B, mx ? LLVMRealOLT : LLVMRealOGT, a, b, ""), b, a, mx ? "max" : "min");
    /* Otherwise a when it wins or is NaN, else b (which may be NaN): as
     * (a wins ? a : b), which is one vmaxps(a, b) on x86 (b when either is
     * NaN), kept where a is a number: three instructions, where the or of
     * the two tests took four (a 3x3 max pool is little else). Written
     * with "a is NaN ? a : ..." InstCombine folds the two selects back
     * into the or; a freeze between them stops that but also stopped the
     * vectorizer (cnn's 2x2 pools went scalar). */
    LLVMValueRef wins = LLVMBuildFCmp(B, mx ? LLVMRealOGT : LLVMRealOLT, a, b, "");
    LLVMValueRef r = LLVMBuildSelect(B, wins, a, b, "");
    return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealORD, a, a, ""), r, a, mx ? "max" : "min");
  }
  case NIMBLE_LN_MAXNUM:
    /* The larger of two values of the type needs no rounding. */
    return intrinsic2(cm, "llvm.maxnum", ty, a, b);
  case NIMBLE_LN_POW:
    if (cm->gpu) {
      fail(cm, NIMBLE_UNIMPLEMENTED, "pow is not available on nvptx64");
      return NULL;
    }
    r = intrinsic2(cm, "llvm.pow", ty, a, b);
    break;
  case NIMBLE_LN_AND: return LLVMBuildAnd(B, a, b, "");
  case NIMBLE_LN_OR: return LLVMBuildOr(B, a, b, "");
  case NIMBLE_LN_SHL:
  case NIMBLE_LN_SHR:
    return safe_shift(cm, a, b, ty, nimble_ln_type_bits(t), e->op == NIMBLE_LN_SHR, !is_u);
  default: break;
  }
  if (r) return round_to(cm, t, r);
  static const LLVMRealPredicate fp[] = {LLVMRealOLT, LLVMRealOLE, LLVMRealOGT, LLVMRealOGE, LLVMRealOEQ,
                                         LLVMRealUNE};
  static const LLVMIntPredicate ip[] = {LLVMIntSLT, LLVMIntSLE, LLVMIntSGT, LLVMIntSGE, LLVMIntEQ, LLVMIntNE};
  static const LLVMIntPredicate up[] = {LLVMIntULT, LLVMIntULE, LLVMIntUGT, LLVMIntUGE, LLVMIntEQ, LLVMIntNE};
  if (e->op >= NIMBLE_LN_LT && e->op <= NIMBLE_LN_NE) {
    int i = e->op - NIMBLE_LN_LT;
    is_u = is_u || t == NIMBLE_LN_BOOL;
    return is_f ? LLVMBuildFCmp(B, fp[i], a, b, "") : LLVMBuildICmp(B, is_u ? up[i] : ip[i], a, b, "");
  }
  fail(cm, NIMBLE_INTERNAL, "binary operator %d not lowered", (int)e->op);
  return NULL;
}

/* float -> integer, saturating (NaN -> 0): fptosi/fptoui of NaN or an
 * out-of-range value is poison; the .sat intrinsics are defined. */
static LLVMValueRef float_to_int(cg_mod *cm, LLVMValueRef x, LLVMTypeRef from, LLVMTypeRef to, int to_unsigned) {
  LLVMTypeRef tys[2] = {to, from};
  const char *sat = to_unsigned ? "llvm.fptoui.sat" : "llvm.fptosi.sat";
  unsigned id = LLVMLookupIntrinsicID(sat, strlen(sat));
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(cm->m, id, tys, 2);
  return LLVMBuildCall2(cm->b, LLVMIntrinsicGetType(cm->ctx, id, tys, 2), fn, &x, 1, "");
}

static LLVMValueRef emit_cast(cg_fn *f, const nimble_ln_expr *e) {
  cg_mod *cm = f->cm;
  LLVMValueRef a = emit_expr(f, e->a);
  if (!a) return NULL;
  nimble_ln_type_t from = e->a->type, to = e->type;
  LLVMTypeRef fty = lt(cm, from), ty = lt(cm, to);
  int from_f = nimble_ln_type_is_float(from), to_f = nimble_ln_type_is_float(to);
  if (to == NIMBLE_LN_BOOL)
    return from_f ? LLVMBuildFCmp(cm->b, LLVMRealUNE, a, LLVMConstReal(fty, 0), "")
                  : LLVMBuildICmp(cm->b, LLVMIntNE, a, LLVMConstInt(fty, 0, 0), "");
  /* bool and the u* types are unsigned: they widen with zeros. */
  int from_unsigned = from == NIMBLE_LN_BOOL || nimble_ln_type_is_unsigned(from);
  if (!from_f && !to_f) return LLVMBuildIntCast2(cm->b, a, ty, !from_unsigned, "");
  if (!from_f) {
    /* integer -> float: one rounding to f32/f64; for f16 the integers f32
     * would round are beyond its range anyway, so rounding on to f16 is
     * exact; bf16 may round twice for integers above 2^24. */
    LLVMValueRef v = from_unsigned ? LLVMBuildUIToFP(cm->b, a, ty, "") : LLVMBuildSIToFP(cm->b, a, ty, "");
    return round_to(cm, to, v);
  }
  if (!to_f) return float_to_int(cm, a, fty, ty, nimble_ln_type_is_unsigned(to));
  /* float -> float */
  if (fty == ty) return round_to(cm, to, a); /* among f32, f16, bf16 (f32 registers) */
  if (to == NIMBLE_LN_F64) return LLVMBuildFPExt(cm->b, a, ty, "");
  /* from f64 */
  if (to == NIMBLE_LN_F32) return LLVMBuildFPTrunc(cm->b, a, ty, "");
  return round_to(cm, to, nimble_cg_f64_to_f32_odd(cm->m, cm->b, a));
}

/* The environment's member of type `ty` (`bytes` wide) at `offset`, or
 * `dflt` when struct_size does not cover it (an older runtime): the member
 * is only read when it exists. */
static LLVMValueRef emit_env_member(cg_fn *f, unsigned offset, unsigned bytes, LLVMTypeRef ty, LLVMValueRef dflt) {
  cg_mod *cm = f->cm;
  LLVMValueRef size = load_at(cm, f->env, E_STRUCT_SIZE, cm->i32);
  LLVMValueRef big = LLVMBuildICmp(cm->b, LLVMIntUGE, size, ci32(cm, (int)(offset + bytes)), "");
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(cm->b);
  LLVMBasicBlockRef rd = new_block(f, "env_read"), done = new_block(f, "env_known");
  LLVMBuildCondBr(cm->b, big, rd, done);
  LLVMPositionBuilderAtEnd(cm->b, rd);
  LLVMValueRef v = load_at(cm, f->env, offset, ty);
  LLVMBuildBr(cm->b, done);
  LLVMPositionBuilderAtEnd(cm->b, done);
  LLVMValueRef phi = LLVMBuildPhi(cm->b, ty, "env_member");
  LLVMValueRef vals[2] = {dflt, v};
  LLVMBasicBlockRef blocks[2] = {pre, rd};
  LLVMAddIncoming(phi, vals, blocks, 2);
  return phi;
}

/* Whether the environment has a non-NULL function pointer at `offset`
 * (env->sgemm or env->sgemm_epilogue). */
static LLVMValueRef emit_has_env_fn(cg_fn *f, unsigned offset) {
  cg_mod *cm = f->cm;
  LLVMValueRef fnp = emit_env_member(f, offset, 8, cm->ptr, LLVMConstNull(cm->ptr));
  return LLVMBuildIsNotNull(cm->b, fnp, "has_sgemm");
}

static LLVMValueRef emit_has_sgemm(cg_fn *f) { return emit_has_env_fn(f, E_SGEMM); }

/* env->num_threads as an i64, at least 1; 1 from an older runtime. */
static LLVMValueRef emit_num_threads(cg_fn *f) {
  cg_mod *cm = f->cm;
  LLVMValueRef t = emit_env_member(f, E_NUM_THREADS, 4, cm->i32, ci32(cm, 1));
  t = LLVMBuildZExt(cm->b, t, cm->i64, "num_threads");
  LLVMValueRef zero = LLVMBuildICmp(cm->b, LLVMIntEQ, t, ci64(cm, 0), "");
  return LLVMBuildSelect(cm->b, zero, ci64(cm, 1), t, "");
}

static LLVMValueRef element_ptr(cg_fn *f, const nimble_ln_param *p, LLVMValueRef index) {
  if (!f->data[p->index]) {
    fail(f->cm, NIMBLE_UNIMPLEMENTED, "scratch buffer '%s': no workspace on this target", p->name);
    return LLVMGetUndef(f->cm->ptr);
  }
  return LLVMBuildGEP2(f->cm->b, storage_type(f->cm, p->dtype), f->data[p->index], &index, 1, "");
}

/* In variants the dispatcher has proven alias-free, every access to a
 * parameter's buffer is tagged with that parameter's scope and as not
 * aliasing the others, which lets the SLP vectorizer widen straight-line
 * blocks and the loop vectorizer drop its run-time overlap checks. */
static LLVMValueRef tag_access(cg_fn *f, const nimble_ln_param *p, LLVMValueRef inst) {
  cg_mod *cm = f->cm;
  if (f->disjoint && cm->scope_list[p->index]) {
    LLVMSetMetadata(inst, cm->md_scope, LLVMMetadataAsValue(cm->ctx, cm->scope_list[p->index]));
    LLVMSetMetadata(inst, cm->md_noalias, LLVMMetadataAsValue(cm->ctx, cm->noalias_list[p->index]));
  }
  return inst;
}

/* A distinct node whose first operand is itself, followed by ops. */
static LLVMMetadataRef self_node(cg_mod *cm, LLVMMetadataRef *rest, unsigned n) {
  LLVMMetadataRef ops[4];
  LLVMMetadataRef tmp = LLVMTemporaryMDNode(cm->ctx, NULL, 0);
  ops[0] = tmp;
  for (unsigned i = 0; i < n; i++) ops[1 + i] = rest[i];
  LLVMMetadataRef node = LLVMMDNodeInContext2(cm->ctx, ops, n + 1);
  LLVMMetadataReplaceAllUsesWith(tmp, node);
  return node;
}

static void make_alias_scopes(cg_mod *cm) {
  const nimble_ln_kernel *k = cm->k;
  LLVMMetadataRef name = LLVMMDStringInContext2(cm->ctx, k->name, strlen(k->name));
  LLVMMetadataRef domain = self_node(cm, &name, 1);
  LLVMMetadataRef scopes[NIMBLE_LN_MAX_PARAMS];
  for (int i = 0; i < k->n_params; i++) {
    LLVMMetadataRef ops[2] = {domain, LLVMMDStringInContext2(cm->ctx, k->params[i]->name, strlen(k->params[i]->name))};
    scopes[i] = self_node(cm, ops, 2);
  }
  for (int i = 0; i < k->n_params; i++) {
    LLVMMetadataRef others[NIMBLE_LN_MAX_PARAMS];
    unsigned n = 0;
    for (int j = 0; j < k->n_params; j++)
      if (j != i) others[n++] = scopes[j];
    cm->scope_list[i] = LLVMMDNodeInContext2(cm->ctx, &scopes[i], 1);
    cm->noalias_list[i] = LLVMMDNodeInContext2(cm->ctx, others, n);
  }
}

static LLVMValueRef emit_expr(cg_fn *f, const nimble_ln_expr *e) {
  cg_mod *cm = f->cm;
  if (cm->err) return NULL;
  if (cm->gpu && !gpu_type_ok(e->type)) {
    fail(cm, NIMBLE_UNIMPLEMENTED, "%s values are not supported on nvptx64 (f32, i32, i64 and bool are)",
         nimble_ln_type_name(e->type));
    return NULL;
  }
  switch (e->kind) {
  case NIMBLE_LN_E_CONST_F: return LLVMConstReal(lt(cm, e->type), e->f);
  case NIMBLE_LN_E_CONST_I: return LLVMConstInt(lt(cm, e->type), (unsigned long long)e->i, 1);
  case NIMBLE_LN_E_VAR: {
    LLVMValueRef v = get_var(cm, e->var);
    if (!v) {
      fail(cm, NIMBLE_INTERNAL, "variable '%s' has no value", e->var->name);
      return NULL;
    }
    return e->var->mutable_ ? LLVMBuildLoad2(cm->b, lt(cm, e->var->type), v, e->var->name) : v;
  }
  case NIMBLE_LN_E_SHAPE: return f->shape[e->param->index][e->axis];
  case NIMBLE_LN_E_LOAD: {
    LLVMValueRef idx = emit_expr(f, e->a);
    if (!idx) return NULL;
    LLVMValueRef v =
        tag_access(f, e->param, LLVMBuildLoad2(cm->b, storage_type(cm, e->type), element_ptr(f, e->param, idx), ""));
    if (e->type == NIMBLE_LN_F16) return nimble_cg_f16_bits_to_f32(cm->m, cm->b, v);
    if (e->type == NIMBLE_LN_BF16) return nimble_cg_bf16_bits_to_f32(cm->m, cm->b, v);
    return v;
  }
  case NIMBLE_LN_E_UNARY: return emit_unary(f, e);
  case NIMBLE_LN_E_BINARY: return emit_binary(f, e);
  case NIMBLE_LN_E_SELECT: {
    LLVMValueRef c = emit_expr(f, e->a), a = emit_expr(f, e->b), b = emit_expr(f, e->c);
    return (c && a && b) ? LLVMBuildSelect(cm->b, c, a, b, "") : NULL;
  }
  case NIMBLE_LN_E_FMA: {
    LLVMValueRef args[3] = {emit_expr(f, e->a), emit_expr(f, e->b), emit_expr(f, e->c)};
    if (!args[0] || !args[1] || !args[2]) return NULL;
    return nimble_cg_intrinsic(cm->m, cm->b, "llvm.fma", lt(cm, e->type), args, 3);
  }
  case NIMBLE_LN_E_CAST: return emit_cast(f, e);
  case NIMBLE_LN_E_HAS_SGEMM: return cm->gpu ? LLVMConstInt(cm->i1, 0, 0) : emit_has_sgemm(f);
  case NIMBLE_LN_E_HAS_SGEMM_EPILOGUE:
    return cm->gpu ? LLVMConstInt(cm->i1, 0, 0) : emit_has_env_fn(f, E_SGEMM_EPILOGUE);
  case NIMBLE_LN_E_NUM_THREADS: return cm->gpu ? ci64(cm, 1) : emit_num_threads(f);
  case NIMBLE_LN_E_HAS_CONV3X3: return cm->gpu ? LLVMConstInt(cm->i1, 0, 0) : emit_has_env_fn(f, E_CONV3X3);
  }
  fail(cm, NIMBLE_INTERNAL, "expression kind %d not lowered", (int)e->kind);
  return NULL;
}

/* ---- free variables of a parallel loop's body ---- */

typedef struct var_set {
  const nimble_ln_var *v[256];
  int n;
  int overflow;
} var_set;

static int set_has(const var_set *s, const nimble_ln_var *v) {
  for (int i = 0; i < s->n; i++)
    if (s->v[i] == v) return 1;
  return 0;
}
static void set_add(var_set *s, const nimble_ln_var *v) {
  if (set_has(s, v)) return;
  if (s->n >= 256) s->overflow = 1;
  else s->v[s->n++] = v;
}

static void free_in_expr(const nimble_ln_expr *e, const var_set *bound, var_set *out) {
  if (!e) return;
  if (e->kind == NIMBLE_LN_E_VAR && !set_has(bound, e->var)) set_add(out, e->var);
  free_in_expr(e->a, bound, out);
  free_in_expr(e->b, bound, out);
  free_in_expr(e->c, bound, out);
}

static void free_in_stmt(const nimble_ln_stmt *s, var_set *bound, var_set *out) {
  if (!s) return;
  int mark = bound->n;
  switch (s->kind) {
  case NIMBLE_LN_S_SEQ:
    for (size_t i = 0; i < s->n_stmts; i++) free_in_stmt(s->stmts[i], bound, out);
    break;
  case NIMBLE_LN_S_FOR:
    free_in_expr(s->begin, bound, out);
    free_in_expr(s->end, bound, out);
    set_add(bound, s->var);
    free_in_stmt(s->body, bound, out);
    break;
  case NIMBLE_LN_S_LET:
  case NIMBLE_LN_S_DECL:
    free_in_expr(s->value, bound, out);
    set_add(bound, s->var);
    free_in_stmt(s->body, bound, out);
    break;
  case NIMBLE_LN_S_ASSIGN:
    if (!set_has(bound, s->var)) set_add(out, s->var);
    free_in_expr(s->value, bound, out);
    break;
  case NIMBLE_LN_S_STORE:
    free_in_expr(s->index, bound, out);
    free_in_expr(s->value, bound, out);
    break;
  case NIMBLE_LN_S_IF:
    free_in_expr(s->value, bound, out);
    free_in_stmt(s->body, bound, out);
    free_in_stmt(s->else_, bound, out);
    break;
  case NIMBLE_LN_S_CHECK: free_in_expr(s->value, bound, out); break;
  case NIMBLE_LN_S_CONV3X3: {
    const nimble_ln_conv3x3_desc_t *d = &s->conv3x3;
    const nimble_ln_expr *es[] = {d->x_offset, d->w_offset, d->y_offset, d->c, d->h, d->width, d->k, d->pad_t,
                                  d->pad_l, d->oh, d->ow, d->row_bias ? d->row_bias_offset : NULL,
                                  d->residual ? d->residual_offset : NULL, d->residual ? d->ldr : NULL};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++)
      if (es[i]) free_in_expr(es[i], bound, out);
    break;
  }
  case NIMBLE_LN_S_SGEMM: {
    const nimble_ln_sgemm_desc_t *d = &s->sgemm;
    const nimble_ln_expr *es[] = {d->m, d->n, d->k, d->a_offset, d->b_offset, d->c_offset, d->lda, d->ldb, d->ldc};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) free_in_expr(es[i], bound, out);
    if (d->epilogue) {
      const nimble_ln_expr *eo[4] = {d->row_bias ? d->row_bias_offset : NULL, d->col_bias ? d->col_bias_offset : NULL,
                                     d->residual ? d->residual_offset : NULL, d->residual ? d->ldr : NULL};
      for (int i = 0; i < 4; i++)
        if (eo[i]) free_in_expr(eo[i], bound, out);
    }
    break;
  }
  }
  bound->n = mark;
}

/* ---- statements ---- */

static void emit_stmt(cg_fn *f, const nimble_ln_stmt *s);
static LLVMValueRef emit_epilogue_struct(cg_fn *f, const nimble_ln_param *const ps[3],
                                         const nimble_ln_expr *const os[3], const nimble_ln_expr *ldr, float lo,
                                         float hi);

/* Whether `e` reads has_sgemm() (an sgemm guard's condition). */
static int expr_reads_has_sgemm(const nimble_ln_expr *e) {
  if (!e) return 0;
  /* Not has_conv3x3(): its else is the sgemm path, which runtimes
   * without conv3x3 (older ones, NIMBLE_WINOGRAD=0) run in full. */
  if (e->kind == NIMBLE_LN_E_HAS_SGEMM || e->kind == NIMBLE_LN_E_HAS_SGEMM_EPILOGUE) return 1;
  return expr_reads_has_sgemm(e->a) || expr_reads_has_sgemm(e->b) || expr_reads_has_sgemm(e->c);
}

/* A loop hint: !{!"name"} (value NULL) or !{!"name", value}. */
static LLVMMetadataRef loop_hint(cg_mod *cm, const char *name, LLVMValueRef value) {
  LLVMMetadataRef ops[2] = {LLVMMDStringInContext2(cm->ctx, name, strlen(name)),
                            value ? LLVMValueAsMetadata(value) : NULL};
  return LLVMMDNodeInContext2(cm->ctx, ops, value ? 2 : 1);
}

static void set_loop_metadata(cg_mod *cm, LLVMValueRef latch_br, const nimble_ln_stmt *s) {
  LLVMMetadataRef ops[6];
  unsigned n = 1;
  if (cm->plain) {
    ops[n++] = loop_hint(cm, "llvm.loop.vectorize.enable", LLVMConstInt(cm->i1, 0, 0));
    ops[n++] = loop_hint(cm, "llvm.loop.unroll.disable", NULL);
  } else if (!s) {
    return;
  } else if (s->loop_kind == NIMBLE_LN_VECTORIZED) {
    ops[n++] = loop_hint(cm, "llvm.loop.vectorize.enable", LLVMConstInt(cm->i1, 1, 0));
    ops[n++] = loop_hint(cm, "llvm.loop.vectorize.width", ci32(cm, s->factor));
    if (s->no_unroll) ops[n++] = loop_hint(cm, "llvm.loop.unroll.disable", NULL);
    if (s->masked_tail) ops[n++] = loop_hint(cm, "llvm.loop.vectorize.predicate.enable", LLVMConstInt(cm->i1, 1, 0));
    if (s->interleave) ops[n++] = loop_hint(cm, "llvm.loop.interleave.count", ci32(cm, s->interleave));
  } else if (s->loop_kind == NIMBLE_LN_UNROLLED) {
    ops[n++] = loop_hint(cm, "llvm.loop.unroll.count", ci32(cm, s->factor));
  } else if (s->no_unroll) {
    ops[n++] = loop_hint(cm, "llvm.loop.unroll.disable", NULL);
  } else {
    return;
  }
  /* A loop ID is a distinct node whose first operand is itself. */
  LLVMMetadataRef tmp = LLVMTemporaryMDNode(cm->ctx, NULL, 0);
  ops[0] = tmp;
  LLVMMetadataRef id = LLVMMDNodeInContext2(cm->ctx, ops, n);
  LLVMMetadataReplaceAllUsesWith(tmp, id);
  LLVMSetMetadata(latch_br, cm->md_loop, LLVMMetadataAsValue(cm->ctx, id));
}

/* A split tail the current variant's assumptions make empty. */
static int tail_vanishes(const cg_fn *f, const nimble_ln_stmt *s) {
  if (!s->tail_param) return 0;
  for (int i = 0; i < f->n_assume; i++) {
    const nimble_ln_specialization_t *a = &f->assume[i];
    if (a->param == s->tail_param && a->axis == s->tail_axis && a->factor % s->tail_factor == 0) return 1;
  }
  return 0;
}

/* Whether some split tail in s vanishes under the kernel's specialisations:
 * otherwise the divisible variant would be the general one under another
 * name (a split of a constant extent has no tail to drop), and is not
 * emitted. */
static int some_tail_vanishes(const cg_fn *f, const nimble_ln_stmt *s) {
  if (!s) return 0;
  switch (s->kind) {
  case NIMBLE_LN_S_SEQ:
    for (size_t i = 0; i < s->n_stmts; i++)
      if (some_tail_vanishes(f, s->stmts[i])) return 1;
    return 0;
  case NIMBLE_LN_S_FOR:
    return tail_vanishes(f, s) || some_tail_vanishes(f, s->body);
  case NIMBLE_LN_S_IF:
    return some_tail_vanishes(f, s->body) || some_tail_vanishes(f, s->else_);
  default:
    return some_tail_vanishes(f, s->body);
  }
}

/* for v in [lo, hi) with v bound to a phi; body emitted by the caller's
 * callback through emit_stmt. Returns the latch branch. */
static void emit_counted_loop(cg_fn *f, LLVMValueRef lo, LLVMValueRef hi, const nimble_ln_stmt *s,
                              const nimble_ln_var *var, const nimble_ln_stmt *body) {
  cg_mod *cm = f->cm;
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(cm->b);
  LLVMBasicBlockRef header = new_block(f, "loop"), bb = new_block(f, "body"), latch = new_block(f, "latch"),
                    exit = new_block(f, "exit");
  LLVMBuildBr(cm->b, header);
  LLVMPositionBuilderAtEnd(cm->b, header);
  LLVMValueRef phi = LLVMBuildPhi(cm->b, cm->i64, var->name);
  LLVMBuildCondBr(cm->b, LLVMBuildICmp(cm->b, LLVMIntSLT, phi, hi, ""), bb, exit);
  LLVMPositionBuilderAtEnd(cm->b, bb);
  set_var(cm, var, phi);
  emit_stmt(f, body);
  LLVMBuildBr(cm->b, latch);
  LLVMPositionBuilderAtEnd(cm->b, latch);
  LLVMValueRef next = LLVMBuildNSWAdd(cm->b, phi, ci64(cm, 1), "");
  LLVMValueRef br = LLVMBuildBr(cm->b, header);
  set_loop_metadata(cm, br, s);
  LLVMValueRef vals[2] = {lo, next};
  LLVMBasicBlockRef blocks[2] = {pre, latch};
  LLVMAddIncoming(phi, vals, blocks, 2);
  LLVMPositionBuilderAtEnd(cm->b, exit);
}

/* GPU: the outermost parallel loop is a grid-stride loop over the
 * threads of the launch; parallel loops inside it run serially. */
static void emit_parallel_gpu(cg_fn *f, const nimble_ln_stmt *s) {
  cg_mod *cm = f->cm;
  LLVMValueRef lo = emit_expr(f, s->begin), hi = emit_expr(f, s->end);
  if (!lo || !hi) return;
  LLVMValueRef n = LLVMBuildSub(cm->b, hi, lo, "");
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(cm->b);
  LLVMBasicBlockRef header = new_block(f, "grid_loop"), bb = new_block(f, "grid_body"), exit = new_block(f, "grid_exit");
  LLVMBuildBr(cm->b, header);
  LLVMPositionBuilderAtEnd(cm->b, header);
  LLVMValueRef t = LLVMBuildPhi(cm->b, cm->i64, "task");
  LLVMBuildCondBr(cm->b, LLVMBuildICmp(cm->b, LLVMIntSLT, t, n, ""), bb, exit);
  LLVMPositionBuilderAtEnd(cm->b, bb);
  set_var(cm, s->var, LLVMBuildNSWAdd(cm->b, lo, t, s->var->name));
  f->in_parallel++;
  emit_stmt(f, s->body);
  f->in_parallel--;
  LLVMValueRef next = LLVMBuildNSWAdd(cm->b, t, f->gpu_threads, "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(cm->b);
  LLVMBuildBr(cm->b, header);
  LLVMValueRef vals[2] = {f->gpu_tid, next};
  LLVMBasicBlockRef blocks[2] = {pre, latch};
  LLVMAddIncoming(t, vals, blocks, 2);
  LLVMPositionBuilderAtEnd(cm->b, exit);
}

static void emit_parallel(cg_fn *f, const nimble_ln_stmt *s) {
  cg_mod *cm = f->cm;
  if (cm->gpu) {
    if (f->in_parallel) {
      LLVMValueRef lo = emit_expr(f, s->begin), hi = emit_expr(f, s->end);
      if (lo && hi) emit_counted_loop(f, lo, hi, NULL, s->var, s->body);
    } else {
      emit_parallel_gpu(f, s);
    }
    return;
  }
  var_set bound = {.n = 0}, fv = {.n = 0};
  set_add(&bound, s->var);
  free_in_stmt(s->body, &bound, &fv);
  if (fv.overflow) {
    fail(cm, NIMBLE_RESOURCE_EXHAUSTED, "parallel loop '%s' has more than 256 free variables", s->var->name);
    return;
  }
  for (int i = 0; i < fv.n; i++)
    if (fv.v[i]->mutable_) {
      fail(cm, NIMBLE_INVALID_ARGUMENT, "parallel loop '%s' uses accumulator '%s' declared outside it",
           s->var->name, fv.v[i]->name);
      return;
    }
  LLVMValueRef lo = emit_expr(f, s->begin), hi = emit_expr(f, s->end);
  if (!lo || !hi) return;

  /* Closure: { args, env, lo, free values... } */
  LLVMTypeRef fields[3 + 256];
  fields[0] = cm->ptr;
  fields[1] = cm->ptr;
  fields[2] = cm->i64;
  for (int i = 0; i < fv.n; i++) fields[3 + i] = lt(cm, fv.v[i]->type);
  LLVMTypeRef cty = LLVMStructTypeInContext(cm->ctx, fields, (unsigned)(3 + fv.n), 0);

  char name[300];
  snprintf(name, sizeof name, "%s.par%d", cm->k->name, cm->n_outlined++);
  LLVMValueRef body_fn = LLVMAddFunction(cm->m, name, cm->body_ty);
  LLVMSetLinkage(body_fn, LLVMInternalLinkage);
  if (cm->optnone) set_optnone(cm, body_fn);

  /* Emit the outlined body, then come back. */
  LLVMBasicBlockRef resume = LLVMGetInsertBlock(cm->b);
  LLVMValueRef saved[256];
  for (int i = 0; i < fv.n; i++) saved[i] = get_var(cm, fv.v[i]);
  cg_fn g = {.cm = cm, .fn = body_fn, .assume = f->assume, .n_assume = f->n_assume, .disjoint = f->disjoint};
  LLVMPositionBuilderAtEnd(cm->b, LLVMAppendBasicBlockInContext(cm->ctx, body_fn, "entry"));
  LLVMValueRef closure = LLVMGetParam(body_fn, 2);
  g.args = LLVMBuildLoad2(cm->b, cm->ptr, LLVMBuildStructGEP2(cm->b, cty, closure, 0, ""), "args");
  g.env = LLVMBuildLoad2(cm->b, cm->ptr, LLVMBuildStructGEP2(cm->b, cty, closure, 1, ""), "env");
  LLVMValueRef base = LLVMBuildLoad2(cm->b, cm->i64, LLVMBuildStructGEP2(cm->b, cty, closure, 2, ""), "");
  for (int i = 0; i < fv.n; i++)
    set_var(cm, fv.v[i],
            LLVMBuildLoad2(cm->b, fields[3 + i], LLVMBuildStructGEP2(cm->b, cty, closure, (unsigned)(3 + i), ""),
                           fv.v[i]->name));
  setup_params(&g);
  set_var(cm, s->var, LLVMBuildNSWAdd(cm->b, base, LLVMGetParam(body_fn, 0), s->var->name));
  emit_stmt(&g, s->body);
  LLVMBuildRet(cm->b, ci32(cm, 0));
  for (int i = 0; i < fv.n; i++) set_var(cm, fv.v[i], saved[i]);
  LLVMPositionBuilderAtEnd(cm->b, resume);

  /* Fill the closure and run the tasks. */
  LLVMValueRef clo = alloca_in_entry(f, cty, "closure");
  LLVMBuildStore(cm->b, f->args, LLVMBuildStructGEP2(cm->b, cty, clo, 0, ""));
  LLVMBuildStore(cm->b, f->env, LLVMBuildStructGEP2(cm->b, cty, clo, 1, ""));
  LLVMBuildStore(cm->b, lo, LLVMBuildStructGEP2(cm->b, cty, clo, 2, ""));
  for (int i = 0; i < fv.n; i++) {
    LLVMValueRef v = get_var(cm, fv.v[i]);
    if (!v) {
      fail(cm, NIMBLE_INTERNAL, "parallel loop '%s': free variable '%s' has no value", s->var->name,
           fv.v[i]->name);
      return;
    }
    LLVMBuildStore(cm->b, v, LLVMBuildStructGEP2(cm->b, cty, clo, (unsigned)(3 + i), ""));
  }
  LLVMValueRef n = LLVMBuildSub(cm->b, hi, lo, "n_tasks");
  LLVMBasicBlockRef run = new_block(f, "par_run"), done = new_block(f, "par_done");
  LLVMBuildCondBr(cm->b, LLVMBuildICmp(cm->b, LLVMIntSGT, n, ci64(cm, 0), ""), run, done);
  LLVMPositionBuilderAtEnd(cm->b, run);
  LLVMValueRef pf = load_at(cm, f->env, E_PARALLEL_FOR, cm->ptr);
  LLVMBasicBlockRef via_pf = new_block(f, "par_pool"), serial = new_block(f, "par_serial"),
                    check = new_block(f, "par_check");
  LLVMBuildCondBr(cm->b, LLVMBuildIsNull(cm->b, pf, ""), serial, via_pf);
  LLVMPositionBuilderAtEnd(cm->b, via_pf);
  LLVMValueRef pargs[4] = {f->env, n, body_fn, clo};
  LLVMValueRef rc_pool = LLVMBuildCall2(cm->b, cm->pf_ty, pf, pargs, 4, "rc");
  LLVMBuildBr(cm->b, check);
  /* No thread pool: run the tasks in order, stopping at the first error. */
  LLVMPositionBuilderAtEnd(cm->b, serial);
  LLVMBasicBlockRef shead = new_block(f, "ser_loop"), sbody = new_block(f, "ser_body");
  LLVMBuildBr(cm->b, shead);
  LLVMPositionBuilderAtEnd(cm->b, shead);
  LLVMValueRef t = LLVMBuildPhi(cm->b, cm->i64, "task");
  LLVMValueRef more = LLVMBuildICmp(cm->b, LLVMIntSLT, t, n, "");
  LLVMBasicBlockRef ser_exit = new_block(f, "ser_exit");
  LLVMBuildCondBr(cm->b, more, sbody, ser_exit);
  LLVMPositionBuilderAtEnd(cm->b, sbody);
  LLVMValueRef bargs[3] = {t, n, clo};
  LLVMValueRef rc_one = LLVMBuildCall2(cm->b, cm->body_ty, body_fn, bargs, 3, "");
  LLVMValueRef t1 = LLVMBuildAdd(cm->b, t, ci64(cm, 1), "");
  LLVMBasicBlockRef sbody_end = LLVMGetInsertBlock(cm->b);
  LLVMBasicBlockRef ser_err = new_block(f, "ser_err");
  LLVMBuildCondBr(cm->b, LLVMBuildICmp(cm->b, LLVMIntEQ, rc_one, ci32(cm, 0), ""), shead, ser_err);
  LLVMValueRef tv[2] = {ci64(cm, 0), t1};
  LLVMBasicBlockRef tb[2] = {serial, sbody_end};
  LLVMAddIncoming(t, tv, tb, 2);
  LLVMPositionBuilderAtEnd(cm->b, ser_err);
  LLVMBuildBr(cm->b, check);
  LLVMPositionBuilderAtEnd(cm->b, ser_exit);
  LLVMBuildBr(cm->b, check);
  LLVMPositionBuilderAtEnd(cm->b, check);
  LLVMValueRef rc = LLVMBuildPhi(cm->b, cm->i32, "rc");
  LLVMValueRef rv[3] = {rc_pool, rc_one, ci32(cm, 0)};
  LLVMBasicBlockRef rb[3] = {via_pf, ser_err, ser_exit};
  LLVMAddIncoming(rc, rv, rb, 3);
  LLVMBasicBlockRef ret = new_block(f, "par_fail");
  LLVMBuildCondBr(cm->b, LLVMBuildICmp(cm->b, LLVMIntEQ, rc, ci32(cm, 0), ""), done, ret);
  LLVMPositionBuilderAtEnd(cm->b, ret);
  LLVMBuildRet(cm->b, rc);
  LLVMPositionBuilderAtEnd(cm->b, done);
}

static void emit_sgemm(cg_fn *f, const nimble_ln_sgemm_desc_t *d) {
  cg_mod *cm = f->cm;
  unsigned at = d->epilogue ? E_SGEMM_EPILOGUE : E_SGEMM;
  LLVMValueRef has = emit_has_env_fn(f, at);
  emit_require(f, has, d->epilogue ? "the runtime provides no sgemm_epilogue" : "the runtime provides no sgemm");
  LLVMValueRef fnp = load_at(cm, f->env, at, cm->ptr);
  LLVMValueRef m = emit_expr(f, d->m), n = emit_expr(f, d->n), k = emit_expr(f, d->k);
  LLVMValueRef ao = emit_expr(f, d->a_offset), bo = emit_expr(f, d->b_offset), co = emit_expr(f, d->c_offset);
  LLVMValueRef lda = emit_expr(f, d->lda), ldb = emit_expr(f, d->ldb), ldc = emit_expr(f, d->ldc);
  if (cm->err) return;
  LLVMValueRef args[13] = {ci32(cm, d->trans_a != 0), ci32(cm, d->trans_b != 0), m, n, k,
                           LLVMConstReal(cm->f32, d->alpha), element_ptr(f, d->a, ao), lda,
                           element_ptr(f, d->b, bo), ldb, LLVMConstReal(cm->f32, d->beta),
                           element_ptr(f, d->c, co), ldc};
  if (!d->epilogue) {
    LLVMBuildCall2(cm->b, cm->sgemm_ty, fnp, args, 13, "");
    return;
  }
  /* The nimble_sgemm_epilogue_t the call points to. */
  const nimble_ln_param *ps[3] = {d->row_bias, d->col_bias, d->residual};
  const nimble_ln_expr *os[3] = {d->row_bias_offset, d->col_bias_offset, d->residual_offset};
  LLVMValueRef epi = emit_epilogue_struct(f, ps, os, d->ldr, d->lo, d->hi);
  if (!epi) return;
  LLVMValueRef eargs[14];
  memcpy(eargs, args, sizeof args);
  eargs[13] = epi;
  LLVMBuildCall2(cm->b, cm->sgemm_epi_ty, fnp, eargs, 14, "");
}

/* The nimble_sgemm_epilogue_t in the entry block's frame, filled here:
 * params and offsets of the row bias, column bias and residual (NULL:
 * none), the residual's leading dimension, the clamp. NULL on failure. */
static LLVMValueRef emit_epilogue_struct(cg_fn *f, const nimble_ln_param *const ps[3],
                                         const nimble_ln_expr *const os[3], const nimble_ln_expr *ldr, float lo,
                                         float hi) {
  cg_mod *cm = f->cm;
  LLVMValueRef epi = alloca_in_entry(f, cm->epi_struct_ty, "epi");
  LLVMValueRef fields[6];
  for (int i = 0; i < 3; i++) {
    fields[i] = LLVMConstNull(cm->ptr);
    if (ps[i]) {
      LLVMValueRef off = emit_expr(f, os[i]);
      if (cm->err) return NULL;
      fields[i] = element_ptr(f, ps[i], off);
    }
  }
  fields[3] = ps[2] ? emit_expr(f, ldr) : LLVMConstInt(cm->i64, 0, 0);
  if (cm->err) return NULL;
  fields[4] = LLVMConstReal(cm->f32, lo);
  fields[5] = LLVMConstReal(cm->f32, hi);
  for (unsigned i = 0; i < 6; i++)
    LLVMBuildStore(cm->b, fields[i], LLVMBuildStructGEP2(cm->b, cm->epi_struct_ty, epi, i, ""));
  return epi;
}

static void emit_conv3x3(cg_fn *f, const nimble_ln_conv3x3_desc_t *d) {
  cg_mod *cm = f->cm;
  LLVMValueRef has = emit_has_env_fn(f, E_CONV3X3);
  emit_require(f, has, "the runtime provides no conv3x3");
  LLVMValueRef fnp = load_at(cm, f->env, E_CONV3X3, cm->ptr);
  const nimble_ln_expr *dims[8] = {d->c, d->h, d->width, d->k, d->pad_t, d->pad_l, d->oh, d->ow};
  LLVMValueRef args[12];
  for (int i = 0; i < 8; i++) args[i] = emit_expr(f, dims[i]);
  LLVMValueRef xo = emit_expr(f, d->x_offset), wo = emit_expr(f, d->w_offset), yo = emit_expr(f, d->y_offset);
  if (cm->err) return;
  args[8] = element_ptr(f, d->x, xo);
  args[9] = element_ptr(f, d->w, wo);
  args[10] = element_ptr(f, d->y, yo);
  const nimble_ln_param *ps[3] = {d->row_bias, NULL, d->residual};
  const nimble_ln_expr *os[3] = {d->row_bias_offset, NULL, d->residual_offset};
  args[11] = emit_epilogue_struct(f, ps, os, d->ldr, d->lo, d->hi);
  if (!args[11]) return;
  LLVMBuildCall2(cm->b, cm->conv3x3_ty, fnp, args, 12, "");
}

static void emit_stmt(cg_fn *f, const nimble_ln_stmt *s) {
  cg_mod *cm = f->cm;
  if (cm->err) return;
  switch (s->kind) {
  case NIMBLE_LN_S_SEQ:
    for (size_t i = 0; i < s->n_stmts; i++) emit_stmt(f, s->stmts[i]);
    return;
  case NIMBLE_LN_S_FOR: {
    if (tail_vanishes(f, s)) return;
    if (s->loop_kind == NIMBLE_LN_PARALLEL) {
      emit_parallel(f, s);
      return;
    }
    LLVMValueRef lo = emit_expr(f, s->begin), hi = emit_expr(f, s->end);
    if (!lo || !hi) return;
    emit_counted_loop(f, lo, hi, s, s->var, s->body);
    return;
  }
  case NIMBLE_LN_S_LET: {
    LLVMValueRef v = emit_expr(f, s->value);
    if (!v) return;
    set_var(cm, s->var, v);
    emit_stmt(f, s->body);
    return;
  }
  case NIMBLE_LN_S_DECL: {
    LLVMValueRef v = emit_expr(f, s->value);
    if (!v) return;
    LLVMValueRef slot = alloca_in_entry(f, lt(cm, s->var->type), s->var->name);
    LLVMBuildStore(cm->b, v, slot);
    set_var(cm, s->var, slot);
    emit_stmt(f, s->body);
    return;
  }
  case NIMBLE_LN_S_ASSIGN: {
    LLVMValueRef v = emit_expr(f, s->value);
    LLVMValueRef slot = get_var(cm, s->var);
    if (!v) return;
    if (!slot) {
      fail(cm, NIMBLE_INTERNAL, "assignment to '%s' outside its declaration", s->var->name);
      return;
    }
    LLVMBuildStore(cm->b, v, slot);
    return;
  }
  case NIMBLE_LN_S_STORE: {
    LLVMValueRef idx = emit_expr(f, s->index), v = emit_expr(f, s->value);
    if (!idx || !v) return;
    /* A bool stored into a u8 tensor is written as 0 or 1. */
    if (s->value->type == NIMBLE_LN_BOOL && s->param->dtype == NIMBLE_LN_U8) v = LLVMBuildZExt(cm->b, v, cm->i8, "");
    /* f16/bf16 values are already rounded: the conversion is exact. */
    if (s->param->dtype == NIMBLE_LN_F16) v = nimble_cg_f32_to_f16_bits(cm->m, cm->b, v);
    if (s->param->dtype == NIMBLE_LN_BF16) v = nimble_cg_f32_to_bf16_bits(cm->m, cm->b, v);
    if (cm->gpu && !f->in_parallel) {
      /* Outside the threaded loop every thread runs the statement: one
       * thread stores. */
      LLVMBasicBlockRef st = new_block(f, "thread0_store"), after = new_block(f, "after_store");
      LLVMBuildCondBr(cm->b, LLVMBuildICmp(cm->b, LLVMIntEQ, f->gpu_tid, ci64(cm, 0), ""), st, after);
      LLVMPositionBuilderAtEnd(cm->b, st);
      tag_access(f, s->param, LLVMBuildStore(cm->b, v, element_ptr(f, s->param, idx)));
      LLVMBuildBr(cm->b, after);
      LLVMPositionBuilderAtEnd(cm->b, after);
      return;
    }
    tag_access(f, s->param, LLVMBuildStore(cm->b, v, element_ptr(f, s->param, idx)));
    return;
  }
  case NIMBLE_LN_S_IF: {
    LLVMValueRef c = emit_expr(f, s->value);
    if (!c) return;
    if (LLVMIsAConstantInt(c)) {
      /* A condition known here (has_sgemm() on nvptx64): only the branch
       * taken is emitted. */
      const nimble_ln_stmt *taken = LLVMConstIntGetZExtValue(c) ? s->body : s->else_;
      if (taken) emit_stmt(f, taken);
      return;
    }
    LLVMBasicBlockRef then_b = new_block(f, "then"), else_b = new_block(f, "else"), join = new_block(f, "endif");
    LLVMBuildCondBr(cm->b, c, then_b, else_b);
    LLVMPositionBuilderAtEnd(cm->b, then_b);
    emit_stmt(f, s->body);
    LLVMBuildBr(cm->b, join);
    LLVMPositionBuilderAtEnd(cm->b, else_b);
    if (s->else_) {
      /* The else of an sgemm guard is what a runtime without sgemm runs;
       * every runtime carries its own sgemm kernels since they came in, so
       * only NIMBLE_SGEMM=none and empty products get here: plain loops,
       * about a quarter less code generation for a transformer. */
      int plain = cm->plain;
      if (expr_reads_has_sgemm(s->value)) cm->plain = 1;
      emit_stmt(f, s->else_);
      cm->plain = plain;
    }
    LLVMBuildBr(cm->b, join);
    LLVMPositionBuilderAtEnd(cm->b, join);
    return;
  }
  case NIMBLE_LN_S_CHECK: {
    LLVMValueRef c = emit_expr(f, s->value);
    if (c) emit_require(f, c, s->message);
    return;
  }
  case NIMBLE_LN_S_SGEMM:
    if (cm->gpu) fail(cm, NIMBLE_UNIMPLEMENTED, "sgemm calls are not available on nvptx64");
    else emit_sgemm(f, &s->sgemm);
    return;
  case NIMBLE_LN_S_CONV3X3:
    if (cm->gpu) fail(cm, NIMBLE_UNIMPLEMENTED, "conv3x3 calls are not available on nvptx64");
    else emit_conv3x3(f, &s->conv3x3);
    return;
  }
  fail(cm, NIMBLE_INTERNAL, "statement kind %d not lowered", (int)s->kind);
}

static LLVMValueRef emit_variant(cg_mod *cm, const char *suffix, const nimble_ln_specialization_t *assume,
                                 int n_assume, int disjoint) {
  char name[300];
  snprintf(name, sizeof name, "%s.%s", cm->k->name, suffix);
  LLVMValueRef fn = LLVMAddFunction(cm->m, name, cm->variant_ty);
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  if (cm->optnone) set_optnone(cm, fn);
  cg_fn f = {.cm = cm, .fn = fn, .args = LLVMGetParam(fn, 0), .env = LLVMGetParam(fn, 1),
             .assume = assume, .n_assume = n_assume, .disjoint = disjoint};
  LLVMPositionBuilderAtEnd(cm->b, LLVMAppendBasicBlockInContext(cm->ctx, fn, "entry"));
  setup_params(&f);
  emit_stmt(&f, cm->k->body);
  LLVMBuildRet(cm->b, ci32(cm, 0));
  return fn;
}

/* Bytes per element of a parameter. */
static unsigned param_bytes(const nimble_ln_param *p) { return (unsigned)nimble_ln_type_bits(p->dtype) / 8; }

/* DLPack type code of a parameter's elements. */
static unsigned dl_code(nimble_ln_type_t t) {
  if (t == NIMBLE_LN_BF16) return 4; /* kDLBfloat */
  if (nimble_ln_type_is_float(t)) return 2;
  return nimble_ln_type_is_unsigned(t) ? 1 : 0;
}

static const char *dtype_text(nimble_ln_type_t t) {
  switch (t) {
  case NIMBLE_LN_F32: return "float32 (DLPack code 2, 32 bits, 1 lane)";
  case NIMBLE_LN_F64: return "float64 (DLPack code 2, 64 bits, 1 lane)";
  case NIMBLE_LN_F16: return "float16 (DLPack code 2, 16 bits, 1 lane)";
  case NIMBLE_LN_BF16: return "bfloat16 (DLPack code 4, 16 bits, 1 lane)";
  case NIMBLE_LN_I8: return "int8 (DLPack code 0, 8 bits, 1 lane)";
  case NIMBLE_LN_I16: return "int16 (DLPack code 0, 16 bits, 1 lane)";
  case NIMBLE_LN_I32: return "int32 (DLPack code 0, 32 bits, 1 lane)";
  case NIMBLE_LN_U8: return "uint8 or bool (DLPack code 1 with 8 bits or 1 bit, or code 6 (bool) with 8 bits; 1 lane)";
  case NIMBLE_LN_U16: return "uint16 (DLPack code 1, 16 bits, 1 lane)";
  case NIMBLE_LN_U32: return "uint32 (DLPack code 1, 32 bits, 1 lane)";
  case NIMBLE_LN_U64: return "uint64 (DLPack code 1, 64 bits, 1 lane)";
  default: return "int64 (DLPack code 0, 64 bits, 1 lane)";
  }
}

/* Scratch buffers of one call: their workspace pointers, freed on return. */
typedef struct cg_scratch {
  LLVMValueRef ptr[NIMBLE_LN_MAX_PARAMS];
  int n;
} cg_scratch;

static void free_scratch(cg_fn *f, const cg_scratch *ws) {
  cg_mod *cm = f->cm;
  if (!ws->n) return;
  LLVMValueRef wfree = load_at(cm, f->env, E_WS_FREE, cm->ptr);
  LLVMTypeRef fp[2] = {cm->ptr, cm->ptr};
  LLVMTypeRef fty = LLVMFunctionType(cm->vd, fp, 2, 0);
  for (int i = 0; i < ws->n; i++) {
    LLVMValueRef a[2] = {f->env, ws->ptr[i]};
    LLVMBuildCall2(cm->b, fty, wfree, a, 2, "");
  }
}

/* Calls a variant, frees the scratch buffers, returns its code. */
static void ret_variant(cg_fn *f, LLVMValueRef variant, LLVMValueRef *vargs, const cg_scratch *ws) {
  cg_mod *cm = f->cm;
  LLVMValueRef rc = LLVMBuildCall2(cm->b, cm->variant_ty, variant, vargs, 2, "");
  free_scratch(f, ws);
  LLVMBuildRet(cm->b, rc);
}

/* Takes every scratch buffer from env->workspace_alloc and returns a new
 * argument array: the caller's arguments, then one DLTensor per buffer
 * (rank 1, its element count as the extent), so variants and outlined
 * bodies read it like any argument. */
static LLVMValueRef alloc_scratch(cg_fn *f, int na, cg_scratch *ws) {
  cg_mod *cm = f->cm;
  const nimble_ln_kernel *k = cm->k;
  LLVMValueRef arr = alloca_in_entry(f, LLVMArrayType(cm->ptr, (unsigned)k->n_params), "args_ws");
  for (int i = 0; i < na; i++) {
    LLVMValueRef idx = ci64(cm, i);
    LLVMValueRef t = LLVMBuildLoad2(cm->b, cm->ptr, LLVMBuildGEP2(cm->b, cm->ptr, f->args, &idx, 1, ""), "");
    LLVMBuildStore(cm->b, t, LLVMBuildGEP2(cm->b, cm->ptr, arr, &idx, 1, ""));
  }
  LLVMValueRef walloc = load_at(cm, f->env, E_WS_ALLOC, cm->ptr);
  LLVMTypeRef ap[3] = {cm->ptr, cm->i64, cm->i64};
  LLVMTypeRef aty = LLVMFunctionType(cm->ptr, ap, 3, 0);
  for (int i = na; i < k->n_params && !cm->err; i++) {
    const nimble_ln_param *p = k->params[i];
    LLVMValueRef n = emit_expr(f, p->scratch);
    if (!n) return f->args;
    n = LLVMBuildSelect(cm->b, LLVMBuildICmp(cm->b, LLVMIntSGT, n, ci64(cm, 0), ""), n, ci64(cm, 0), "");
    /* At least one element, so a NULL answer always means "no memory". */
    LLVMValueRef bytes = LLVMBuildMul(cm->b, LLVMBuildAdd(cm->b, n, ci64(cm, 1), ""), ci64(cm, param_bytes(p)), "");
    LLVMValueRef a[3] = {f->env, bytes, ci64(cm, 64)};
    LLVMValueRef mem = LLVMBuildCall2(cm->b, aty, walloc, a, 3, p->name);
    LLVMBasicBlockRef bad = new_block(f, "ws_fail"), good = new_block(f, "ws_ok");
    LLVMBuildCondBr(cm->b, LLVMBuildIsNull(cm->b, mem, ""), bad, good);
    LLVMPositionBuilderAtEnd(cm->b, bad);
    free_scratch(f, ws);
    char msg[300];
    snprintf(msg, sizeof msg, "the runtime gave no workspace for scratch buffer '%s'", p->name);
    emit_fail_return(f, msg);
    LLVMPositionBuilderAtEnd(cm->b, good);
    ws->ptr[ws->n++] = mem;
    /* DLTensor {data, device, ndim, dtype, shape, strides, byte_offset}. */
    LLVMValueRef t = alloca_in_entry(f, LLVMArrayType(cm->i8, sizeof(DLTensor)), "ws_tensor");
    LLVMSetAlignment(t, 16);
    LLVMValueRef shp = alloca_in_entry(f, cm->i64, "ws_shape");
    LLVMBuildStore(cm->b, n, shp);
    LLVMValueRef off;
    off = ci64(cm, T_DATA);
    LLVMBuildStore(cm->b, mem, LLVMBuildGEP2(cm->b, cm->i8, t, &off, 1, ""));
    off = ci64(cm, T_NDIM);
    LLVMBuildStore(cm->b, ci32(cm, 1), LLVMBuildGEP2(cm->b, cm->i8, t, &off, 1, ""));
    off = ci64(cm, T_SHAPE);
    LLVMBuildStore(cm->b, shp, LLVMBuildGEP2(cm->b, cm->i8, t, &off, 1, ""));
    off = ci64(cm, T_STRIDES);
    LLVMBuildStore(cm->b, LLVMConstNull(cm->ptr), LLVMBuildGEP2(cm->b, cm->i8, t, &off, 1, ""));
    off = ci64(cm, T_BYTE_OFFSET);
    LLVMBuildStore(cm->b, ci64(cm, 0), LLVMBuildGEP2(cm->b, cm->i8, t, &off, 1, ""));
    LLVMValueRef idx = ci64(cm, i);
    LLVMBuildStore(cm->b, t, LLVMBuildGEP2(cm->b, cm->ptr, arr, &idx, 1, ""));
  }
  return arr;
}

/* The exported entry point: argument checks, then the variant dispatch. */
static void emit_entry(cg_mod *cm, const char *impl, LLVMValueRef aliased, LLVMValueRef general,
                       LLVMValueRef divisible) {
  const nimble_ln_kernel *k = cm->k;
  LLVMValueRef fn = LLVMAddFunction(cm->m, impl ? impl : k->name, cm->kernel_ty);
  if (impl) LLVMSetVisibility(fn, LLVMHiddenVisibility);
  cg_fn f = {.cm = cm, .fn = fn, .args = LLVMGetParam(fn, 0), .env = LLVMGetParam(fn, 2)};
  LLVMPositionBuilderAtEnd(cm->b, LLVMAppendBasicBlockInContext(cm->ctx, fn, "entry"));
  /* Without an env large enough to hold set_error there is nobody to tell. */
  LLVMBasicBlockRef no_env = new_block(&f, "no_env"), has_env = new_block(&f, "has_env"),
                    env_ok = new_block(&f, "env_ok");
  LLVMBuildCondBr(cm->b, LLVMBuildIsNull(cm->b, f.env, ""), no_env, has_env);
  LLVMPositionBuilderAtEnd(cm->b, no_env);
  LLVMBuildRet(cm->b, ci32(cm, 1));
  LLVMPositionBuilderAtEnd(cm->b, has_env);
  LLVMValueRef size = load_at(cm, f.env, E_STRUCT_SIZE, cm->i32);
  LLVMBuildCondBr(cm->b, LLVMBuildICmp(cm->b, LLVMIntUGE, size, ci32(cm, E_SET_ERROR + 8), ""), env_ok, no_env);
  LLVMPositionBuilderAtEnd(cm->b, env_ok);

  char msg[400];
  int na = n_args_of(k);
  snprintf(msg, sizeof msg, "expects %d arguments (inputs then outputs)", na);
  emit_require(&f, LLVMBuildICmp(cm->b, LLVMIntEQ, LLVMGetParam(fn, 1), ci32(cm, na), ""), msg);
  emit_require(&f, LLVMBuildIsNotNull(cm->b, f.args, ""), "the argument array is NULL");
  for (int i = 0; i < na; i++) {
    const nimble_ln_param *p = k->params[i];
    LLVMValueRef idx = ci64(cm, i);
    LLVMValueRef t = LLVMBuildLoad2(cm->b, cm->ptr, LLVMBuildGEP2(cm->b, cm->ptr, f.args, &idx, 1, ""), "");
    snprintf(msg, sizeof msg, "argument %d ('%s') is NULL", i, p->name);
    emit_require(&f, LLVMBuildIsNotNull(cm->b, t, ""), msg);
    snprintf(msg, sizeof msg, "argument %d ('%s') must have rank %d", i, p->name, p->rank);
    emit_require(&f, LLVMBuildICmp(cm->b, LLVMIntEQ, load_at(cm, t, T_NDIM, cm->i32), ci32(cm, p->rank), ""), msg);
    unsigned code = dl_code(p->dtype);
    unsigned bits = param_bytes(p) * 8;
    LLVMValueRef code_v = load_at(cm, t, T_DTYPE, cm->i8), bits_v = load_at(cm, t, T_DTYPE + 1, cm->i8);
    LLVMValueRef code_bits_ok =
        LLVMBuildAnd(cm->b, LLVMBuildICmp(cm->b, LLVMIntEQ, code_v, LLVMConstInt(cm->i8, code, 0), ""),
                     LLVMBuildICmp(cm->b, LLVMIntEQ, bits_v, LLVMConstInt(cm->i8, bits, 0), ""), "");
    if (p->dtype == NIMBLE_LN_U8) {
      /* Bool tensors, one byte per element, come as {kDLUInt, 8, 1}, as
       * {kDLUInt, 1, 1} (TVM's bool, which the runtime's tensor files
       * write), or as {kDLBool = 6, 8, 1} from DLPack 0.8 on (the header
       * here predates it, hence the number). */
      LLVMValueRef uint1 = LLVMBuildAnd(cm->b, LLVMBuildICmp(cm->b, LLVMIntEQ, code_v, LLVMConstInt(cm->i8, 1, 0), ""),
                                        LLVMBuildICmp(cm->b, LLVMIntEQ, bits_v, LLVMConstInt(cm->i8, 1, 0), ""), "");
      LLVMValueRef dlbool = LLVMBuildAnd(cm->b, LLVMBuildICmp(cm->b, LLVMIntEQ, code_v, LLVMConstInt(cm->i8, 6, 0), ""),
                                         LLVMBuildICmp(cm->b, LLVMIntEQ, bits_v, LLVMConstInt(cm->i8, 8, 0), ""), "");
      code_bits_ok = LLVMBuildOr(cm->b, code_bits_ok, LLVMBuildOr(cm->b, uint1, dlbool, ""), "");
    }
    LLVMValueRef dt_ok = LLVMBuildAnd(
        cm->b, code_bits_ok,
        LLVMBuildICmp(cm->b, LLVMIntEQ, load_at(cm, t, T_DTYPE + 2, cm->i16), LLVMConstInt(cm->i16, 1, 0), ""), "");
    snprintf(msg, sizeof msg, "argument %d ('%s') must be %s", i, p->name, dtype_text(p->dtype));
    emit_require(&f, dt_ok, msg);
    /* A scalar may have a NULL shape; it has no extents to read. */
    LLVMValueRef shp = load_at(cm, t, T_SHAPE, cm->ptr);
    if (p->rank > 0) {
      snprintf(msg, sizeof msg, "argument %d ('%s') has a NULL shape", i, p->name);
      emit_require(&f, LLVMBuildIsNotNull(cm->b, shp, ""), msg);
    }
    LLVMValueRef ext[NIMBLE_LN_MAX_RANK];
    LLVMValueRef nonneg = LLVMConstInt(cm->i1, 1, 0);
    for (int a = 0; a < p->rank; a++) {
      LLVMValueRef ai = ci64(cm, a);
      ext[a] = LLVMBuildLoad2(cm->b, cm->i64, LLVMBuildGEP2(cm->b, cm->i64, shp, &ai, 1, ""), "");
      nonneg = LLVMBuildAnd(cm->b, nonneg, LLVMBuildICmp(cm->b, LLVMIntSGE, ext[a], ci64(cm, 0), ""), "");
    }
    snprintf(msg, sizeof msg, "argument %d ('%s') has a negative extent", i, p->name);
    emit_require(&f, nonneg, msg);
    /* The byte size must fit in 63 bits: index arithmetic (and the
     * dispatcher's overlap test) is signed 64-bit. */
    LLVMValueRef size = ci64(cm, param_bytes(p)), over = LLVMConstInt(cm->i1, 0, 0);
    unsigned smul = LLVMLookupIntrinsicID("llvm.smul.with.overflow", 23);
    LLVMValueRef smul_fn = LLVMGetIntrinsicDeclaration(cm->m, smul, &cm->i64, 1);
    LLVMTypeRef smul_ty = LLVMIntrinsicGetType(cm->ctx, smul, &cm->i64, 1);
    for (int a = 0; a < p->rank; a++) {
      LLVMValueRef ops[2] = {size, ext[a]};
      LLVMValueRef r = LLVMBuildCall2(cm->b, smul_ty, smul_fn, ops, 2, "");
      size = LLVMBuildExtractValue(cm->b, r, 0, "");
      over = LLVMBuildOr(cm->b, over, LLVMBuildExtractValue(cm->b, r, 1, ""), "");
    }
    snprintf(msg, sizeof msg, "argument %d ('%s') has more bytes than fit in 63 bits", i, p->name);
    emit_require(&f, LLVMBuildNot(cm->b, over, ""), msg);
    LLVMValueRef has_data = LLVMBuildOr(cm->b, LLVMBuildIsNotNull(cm->b, load_at(cm, t, T_DATA, cm->ptr), ""),
                                        LLVMBuildICmp(cm->b, LLVMIntEQ, size, ci64(cm, 0), ""), "");
    snprintf(msg, sizeof msg, "argument %d ('%s') has a NULL data pointer", i, p->name);
    emit_require(&f, has_data, msg);
    /* Strides: NULL means compact; otherwise every axis longer than 1 must
     * have its row-major stride. */
    LLVMValueRef strides = load_at(cm, t, T_STRIDES, cm->ptr);
    LLVMBasicBlockRef chk = new_block(&f, "strides"), after = new_block(&f, "strides_ok");
    LLVMBuildCondBr(cm->b, LLVMBuildIsNull(cm->b, strides, ""), after, chk);
    LLVMPositionBuilderAtEnd(cm->b, chk);
    LLVMValueRef expect = ci64(cm, 1), compact = LLVMConstInt(cm->i1, 1, 0);
    for (int a = p->rank - 1; a >= 0; a--) {
      LLVMValueRef ai = ci64(cm, a);
      LLVMValueRef st = LLVMBuildLoad2(cm->b, cm->i64, LLVMBuildGEP2(cm->b, cm->i64, strides, &ai, 1, ""), "");
      LLVMValueRef ok = LLVMBuildOr(cm->b, LLVMBuildICmp(cm->b, LLVMIntSLE, ext[a], ci64(cm, 1), ""),
                                    LLVMBuildICmp(cm->b, LLVMIntEQ, st, expect, ""), "");
      compact = LLVMBuildAnd(cm->b, compact, ok, "");
      expect = LLVMBuildMul(cm->b, expect, ext[a], "");
    }
    snprintf(msg, sizeof msg, "argument %d ('%s') is not C-contiguous", i, p->name);
    emit_require(&f, compact, msg);
    LLVMBuildBr(cm->b, after);
    LLVMPositionBuilderAtEnd(cm->b, after);
  }
  /* Dispatch. Outputs that overlap another argument (an in-place call)
   * take the plain variant; otherwise the alias-free ones, specialised
   * when every divisibility assumption holds. */
  LLVMValueRef vargs[2] = {f.args, f.env};
  setup_params_n(&f, na);
  cg_scratch ws = {0};
  if (na < k->n_params) vargs[0] = alloc_scratch(&f, na, &ws);
  LLVMValueRef bytes[NIMBLE_LN_MAX_PARAMS];
  for (int i = 0; i < na; i++) {
    LLVMValueRef n = ci64(cm, param_bytes(k->params[i]));
    for (int a = 0; a < k->params[i]->rank; a++) n = LLVMBuildMul(cm->b, n, f.shape[i][a], "");
    bytes[i] = n;
  }
  LLVMValueRef disjoint = LLVMConstInt(cm->i1, 1, 0);
  for (int i = 0; i < na; i++) {
    if (!k->params[i]->is_output) continue;
    LLVMValueRef lo_i = LLVMBuildPtrToInt(cm->b, f.data[i], cm->i64, "");
    LLVMValueRef hi_i = LLVMBuildAdd(cm->b, lo_i, bytes[i], "");
    for (int j = 0; j < na; j++) {
      if (j == i) continue;
      LLVMValueRef lo_j = LLVMBuildPtrToInt(cm->b, f.data[j], cm->i64, "");
      LLVMValueRef hi_j = LLVMBuildAdd(cm->b, lo_j, bytes[j], "");
      /* [lo_i, hi_i) and [lo_j, hi_j) are disjoint, or one of them is empty. */
      LLVMValueRef apart = LLVMBuildOr(cm->b, LLVMBuildICmp(cm->b, LLVMIntULE, hi_i, lo_j, ""),
                                       LLVMBuildICmp(cm->b, LLVMIntULE, hi_j, lo_i, ""), "");
      LLVMValueRef empty = LLVMBuildOr(cm->b, LLVMBuildICmp(cm->b, LLVMIntEQ, bytes[i], ci64(cm, 0), ""),
                                       LLVMBuildICmp(cm->b, LLVMIntEQ, bytes[j], ci64(cm, 0), ""), "");
      disjoint = LLVMBuildAnd(cm->b, disjoint, LLVMBuildOr(cm->b, apart, empty, ""), "");
    }
  }
  LLVMBasicBlockRef al = new_block(&f, "aliased"), fast = new_block(&f, "alias_free");
  LLVMBuildCondBr(cm->b, disjoint, fast, al);
  LLVMPositionBuilderAtEnd(cm->b, al);
  ret_variant(&f, aliased, vargs, &ws);
  LLVMPositionBuilderAtEnd(cm->b, fast);
  if (!divisible) {
    ret_variant(&f, general, vargs, &ws);
    return;
  }
  LLVMValueRef all = LLVMConstInt(cm->i1, 1, 0);
  for (int i = 0; i < k->n_specs; i++) {
    const nimble_ln_specialization_t *sp = &k->specs[i];
    LLVMValueRef r = LLVMBuildSRem(cm->b, f.shape[sp->param->index][sp->axis], ci64(cm, sp->factor), "");
    all = LLVMBuildAnd(cm->b, all, LLVMBuildICmp(cm->b, LLVMIntEQ, r, ci64(cm, 0), ""), "");
  }
  LLVMBasicBlockRef d = new_block(&f, "divisible"), g = new_block(&f, "general");
  LLVMBuildCondBr(cm->b, all, d, g);
  LLVMPositionBuilderAtEnd(cm->b, d);
  ret_variant(&f, divisible, vargs, &ws);
  LLVMPositionBuilderAtEnd(cm->b, g);
  ret_variant(&f, general, vargs, &ws);
}

static LLVMValueRef sreg(cg_mod *cm, const char *name) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(cm->m, id, NULL, 0);
  LLVMValueRef v = LLVMBuildCall2(cm->b, LLVMIntrinsicGetType(cm->ctx, id, NULL, 0), fn, NULL, 0, "");
  return LLVMBuildZExt(cm->b, v, cm->i64, "");
}

/* GPU entry: void name(DLTensor *const *args, int32_t num_args), the
 * tensors and the array in device-visible memory. Same argument checks as
 * on the CPU (failures return), then the body, with the outermost parallel
 * loop spread over the grid. Marked a kernel in nvvm.annotations. */
static void emit_gpu_kernel(cg_mod *cm) {
  const nimble_ln_kernel *k = cm->k;
  LLVMTypeRef ps[2] = {cm->ptr, cm->i32};
  LLVMValueRef fn = LLVMAddFunction(cm->m, k->name, LLVMFunctionType(cm->vd, ps, 2, 0));
  cg_fn f = {.cm = cm, .fn = fn, .args = LLVMGetParam(fn, 0)};
  LLVMPositionBuilderAtEnd(cm->b, LLVMAppendBasicBlockInContext(cm->ctx, fn, "entry"));
  /* No workspace on the device: scratch buffers get no data pointer, and
   * code that reaches one fails to build (element_ptr). */
  int na = n_args_of(k);
  emit_require(&f, LLVMBuildICmp(cm->b, LLVMIntEQ, LLVMGetParam(fn, 1), ci32(cm, na), ""), "arity");
  emit_require(&f, LLVMBuildIsNotNull(cm->b, f.args, ""), "args");
  for (int i = 0; i < na; i++) {
    const nimble_ln_param *p = k->params[i];
    LLVMValueRef idx = ci64(cm, i);
    LLVMValueRef t = LLVMBuildLoad2(cm->b, cm->ptr, LLVMBuildGEP2(cm->b, cm->ptr, f.args, &idx, 1, ""), "");
    emit_require(&f, LLVMBuildIsNotNull(cm->b, t, ""), "null");
    emit_require(&f, LLVMBuildICmp(cm->b, LLVMIntEQ, load_at(cm, t, T_NDIM, cm->i32), ci32(cm, p->rank), ""), "rank");
  }
  f.gpu_tid = LLVMBuildAdd(cm->b, LLVMBuildMul(cm->b, sreg(cm, "llvm.nvvm.read.ptx.sreg.ctaid.x"),
                                               sreg(cm, "llvm.nvvm.read.ptx.sreg.ntid.x"), ""),
                           sreg(cm, "llvm.nvvm.read.ptx.sreg.tid.x"), "gtid");
  f.gpu_threads = LLVMBuildMul(cm->b, sreg(cm, "llvm.nvvm.read.ptx.sreg.nctaid.x"),
                               sreg(cm, "llvm.nvvm.read.ptx.sreg.ntid.x"), "gthreads");
  setup_params_n(&f, na);
  emit_stmt(&f, k->body);
  LLVMBuildRetVoid(cm->b);
  LLVMValueRef md[3] = {fn, LLVMMDStringInContext(cm->ctx, "kernel", 6), ci32(cm, 1)};
  LLVMAddNamedMetadataOperand(cm->m, "nvvm.annotations", LLVMMDNodeInContext(cm->ctx, md, 3));
}

/* The types and metadata kinds every kernel uses, in m's context. */
static void cg_mod_init(cg_mod *cm, LLVMModuleRef m, int gpu) {
  memset(cm, 0, sizeof *cm);
  cm->m = m;
  cm->ctx = LLVMGetModuleContext(m);
  cm->gpu = gpu;
  cm->b = LLVMCreateBuilderInContext(cm->ctx);
  cm->i1 = LLVMInt1TypeInContext(cm->ctx);
  cm->i8 = LLVMInt8TypeInContext(cm->ctx);
  cm->i16 = LLVMInt16TypeInContext(cm->ctx);
  cm->i32 = LLVMInt32TypeInContext(cm->ctx);
  cm->i64 = LLVMInt64TypeInContext(cm->ctx);
  cm->f32 = LLVMFloatTypeInContext(cm->ctx);
  cm->f64 = LLVMDoubleTypeInContext(cm->ctx);
  cm->ptr = LLVMPointerTypeInContext(cm->ctx, 0);
  cm->vd = LLVMVoidTypeInContext(cm->ctx);
  LLVMTypeRef p3[3] = {cm->ptr, cm->ptr, cm->ptr};
  /* Variants take (args, env). */
  cm->variant_ty = LLVMFunctionType(cm->i32, p3, 2, 0);
  cm->set_error_ty = LLVMFunctionType(cm->vd, p3, 2, 0);
  LLVMTypeRef kp[3] = {cm->ptr, cm->i32, cm->ptr};
  cm->kernel_ty = LLVMFunctionType(cm->i32, kp, 3, 0);
  LLVMTypeRef bp[3] = {cm->i64, cm->i64, cm->ptr};
  cm->body_ty = LLVMFunctionType(cm->i32, bp, 3, 0);
  LLVMTypeRef pp[4] = {cm->ptr, cm->i64, cm->ptr, cm->ptr};
  cm->pf_ty = LLVMFunctionType(cm->i32, pp, 4, 0);
  LLVMTypeRef sp[13] = {cm->i32, cm->i32, cm->i64, cm->i64, cm->i64, cm->f32, cm->ptr,
                        cm->i64, cm->ptr, cm->i64, cm->f32, cm->ptr, cm->i64};
  cm->sgemm_ty = LLVMFunctionType(cm->vd, sp, 13, 0);
  LLVMTypeRef ep[14] = {cm->i32, cm->i32, cm->i64, cm->i64, cm->i64, cm->f32, cm->ptr,
                        cm->i64, cm->ptr, cm->i64, cm->f32, cm->ptr, cm->i64, cm->ptr};
  cm->sgemm_epi_ty = LLVMFunctionType(cm->vd, ep, 14, 0);
  /* nimble_conv3x3_fn: eight sizes, x, w, y, the epilogue. */
  LLVMTypeRef cp[12] = {cm->i64, cm->i64, cm->i64, cm->i64, cm->i64, cm->i64,
                        cm->i64, cm->i64, cm->ptr, cm->ptr, cm->ptr, cm->ptr};
  cm->conv3x3_ty = LLVMFunctionType(cm->vd, cp, 12, 0);
  /* nimble_sgemm_epilogue_t: three pointers, ldr, lo, hi. */
  LLVMTypeRef ef[6] = {cm->ptr, cm->ptr, cm->ptr, cm->i64, cm->f32, cm->f32};
  cm->epi_struct_ty = LLVMStructTypeInContext(cm->ctx, ef, 6, 0);
  cm->md_loop = LLVMGetMDKindIDInContext(cm->ctx, "llvm.loop", 9);
  cm->md_scope = LLVMGetMDKindIDInContext(cm->ctx, "alias.scope", 11);
  cm->md_noalias = LLVMGetMDKindIDInContext(cm->ctx, "noalias", 7);
}

static void cg_mod_deinit(cg_mod *cm) {
  LLVMDisposeBuilder(cm->b);
  free(cm->vals);
}

/* A CPU kernel's variants and entry point (named impl when not NULL). */
static void emit_cpu_kernel(cg_mod *cm, const char *impl) {
  make_alias_scopes(cm);
  cm->plain = 1;
  cm->optnone = !cm->k->in_place;
  LLVMValueRef aliased = emit_variant(cm, "aliased", NULL, 0, 0);
  cm->optnone = 0;
  cm->plain = 0;
  LLVMValueRef general = cm->err ? NULL : emit_variant(cm, "general", NULL, 0, 1);
  LLVMValueRef divisible = NULL;
  cg_fn probe = {.cm = cm, .assume = cm->k->specs, .n_assume = cm->k->n_specs};
  if (!cm->err && cm->k->n_specs && some_tail_vanishes(&probe, cm->k->body))
    divisible = emit_variant(cm, "divisible", cm->k->specs, cm->k->n_specs, 1);
  if (!cm->err) emit_entry(cm, impl, aliased, general, divisible);
}

nimble_status_t nimble_cg_emit_kernels(LLVMModuleRef m, const nimble_ln_kernel *const *kernels,
                                       size_t n_kernels, int gpu) {
  cg_mod cm;
  cg_mod_init(&cm, m, gpu);
  for (size_t i = 0; i < n_kernels && !cm.err; i++) {
    cm.k = kernels[i];
    cm.n_outlined = 0;
    if (LLVMGetNamedFunction(m, cm.k->name)) {
      fail(&cm, NIMBLE_ALREADY_EXISTS, "a kernel with this name is already in the module");
      break;
    }
    if (gpu) {
      for (int p = 0; p < cm.k->n_params && !cm.err; p++)
        if (!gpu_type_ok(cm.k->params[p]->dtype))
          fail(&cm, NIMBLE_UNIMPLEMENTED, "parameter '%s' is %s: nvptx64 kernels take f32, i32, i64 and u8 tensors",
               cm.k->params[p]->name, nimble_ln_type_name(cm.k->params[p]->dtype));
      if (!cm.err) emit_gpu_kernel(&cm);
      continue;
    }
    emit_cpu_kernel(&cm, NULL);
  }
  nimble_status_t s = cm.err;
  cm.err = NULL;
  cg_mod_deinit(&cm);
  return s;
}

/* The exported entry point of a kernel with a shared implementation: a
 * tail call of impl_fn. */
static void emit_shared_entry(cg_mod *cm, LLVMValueRef impl_fn) {
  LLVMValueRef fn = LLVMAddFunction(cm->m, cm->k->name, cm->kernel_ty);
  LLVMPositionBuilderAtEnd(cm->b, LLVMAppendBasicBlockInContext(cm->ctx, fn, "entry"));
  LLVMValueRef args[3] = {LLVMGetParam(fn, 0), LLVMGetParam(fn, 1), LLVMGetParam(fn, 2)};
  LLVMValueRef rc = LLVMBuildCall2(cm->b, cm->kernel_ty, impl_fn, args, 3, "");
  LLVMSetTailCall(rc, 1);
  LLVMBuildRet(cm->b, rc);
}

nimble_status_t nimble_cg_emit_shared_kernel(LLVMModuleRef m, const nimble_ln_kernel *k, const char *impl,
                                             int forwarder) {
  cg_mod cm;
  cg_mod_init(&cm, m, 0);
  cm.k = k;
  if (LLVMGetNamedFunction(m, k->name) || LLVMGetNamedFunction(m, impl))
    fail(&cm, NIMBLE_ALREADY_EXISTS, "a kernel with this name is already in the module");
  /* A forwarder only declares the implementation another object defines. */
  if (!cm.err && !forwarder) emit_cpu_kernel(&cm, impl);
  if (!cm.err) {
    LLVMValueRef impl_fn = LLVMGetNamedFunction(m, impl);
    if (forwarder) {
      impl_fn = LLVMAddFunction(m, impl, cm.kernel_ty);
      LLVMSetVisibility(impl_fn, LLVMHiddenVisibility);
    }
    emit_shared_entry(&cm, impl_fn);
  }
  nimble_status_t s = cm.err;
  cm.err = NULL;
  cg_mod_deinit(&cm);
  return s;
}
