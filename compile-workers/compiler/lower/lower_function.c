/* One global function to bytecode: expressions to instructions, with
 * registers reused after each variable's last use.
 *
 * Register allocation is a reference count per register over a free list.
 * Before compiling a function we count every variable's uses; a use that
 * brings the count to zero hands the register back after the instruction
 * that reads it (so an instruction never writes a register it still reads).
 * Counting over the whole function is conservative across branches: a
 * variable used in both arms of an `if` lives until the second use is
 * compiled, which is always safe because the arms never run together.
 *
 * Each expression is compiled in one of three modes: TAIL (the function's
 * result: the path ends in Ret, a Goto for a self tail call, or Fatal),
 * VALUE (the caller gets a register holding one reference) and EFFECT (the
 * value is not needed: `let %u = invoke(...)` whose %u is unused). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lower/lower_internal.h"

typedef enum mode { TAIL, VALUE, EFFECT } mode;

typedef struct fn_ctx {
  lower_ctx *c;
  lw_func *f;
  int64_t self;   /* this function's position (self tail calls) */
  lw_map reg_of;  /* variable -> register */
  lw_map uses;    /* variable -> uses not yet compiled */
  uint32_t *refs; /* per register */
  uint32_t *free_regs;
  size_t num_free;
  uint32_t next_reg, cap_regs;
  int64_t *pending; /* registers to release after the current instruction */
  size_t num_pending, cap_pending;
} fn_ctx;

static nimble_status_t at(const nimble_expr *e, nimble_status_t s) {
  if (!s || !e) return s;
  char brief[96];
  nimble_ir_expr_brief(e, brief, sizeof brief);
  if (e->loc.file)
    return nimble_status_annotate(s, "%s:%u:%u (%s)", e->loc.file, e->loc.line, e->loc.col, brief);
  return nimble_status_annotate(s, "at %s", brief);
}

/* ---- registers ------------------------------------------------------------ */

/* A register never used before (above every one handed out). */
static nimble_status_t reg_alloc_fresh(fn_ctx *fc, int64_t *out) {
  if (fc->next_reg >= NIMBLE_MAX_REGISTERS)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "more than %d live registers", NIMBLE_MAX_REGISTERS);
  if (fc->next_reg == fc->cap_regs) {
    uint32_t cap = fc->cap_regs ? fc->cap_regs * 2 : 64;
    uint32_t *refs = realloc(fc->refs, cap * sizeof *refs);
    if (!refs) return NIMBLE_OOM_IN("lowering");
    fc->refs = refs;
    uint32_t *fr = realloc(fc->free_regs, cap * sizeof *fr);
    if (!fr) return NIMBLE_OOM_IN("lowering");
    fc->free_regs = fr;
    fc->cap_regs = cap;
  }
  uint32_t r = fc->next_reg++;
  fc->refs[r] = 1;
  *out = r;
  return nimble_ok();
}

static nimble_status_t reg_alloc(fn_ctx *fc, int64_t *out) {
  if (fc->num_free) {
    uint32_t r = fc->free_regs[--fc->num_free];
    fc->refs[r] = 1;
    *out = r;
    return nimble_ok();
  }
  return reg_alloc_fresh(fc, out);
}

static void reg_retain(fn_ctx *fc, int64_t r) { fc->refs[r]++; }

static void reg_release(fn_ctx *fc, int64_t r) {
  if (r < 0) return;
  if (--fc->refs[r] == 0) fc->free_regs[fc->num_free++] = (uint32_t)r;
}

static nimble_status_t pend(fn_ctx *fc, int64_t r) {
  if (fc->num_pending == fc->cap_pending) {
    size_t cap = fc->cap_pending ? fc->cap_pending * 2 : 32;
    int64_t *p = realloc(fc->pending, cap * sizeof *p);
    if (!p) return NIMBLE_OOM_IN("lowering");
    fc->pending = p;
    fc->cap_pending = cap;
  }
  fc->pending[fc->num_pending++] = r;
  return nimble_ok();
}

/* Releases what operands read since `mark` (after their instruction). */
static void flush(fn_ctx *fc, size_t mark) {
  while (fc->num_pending > mark) reg_release(fc, fc->pending[--fc->num_pending]);
}

/* Binds a variable to a register holding one reference it takes over. */
static nimble_status_t bind(fn_ctx *fc, const nimble_expr *var, int64_t r) {
  int64_t n = 0;
  lw_map_get(&fc->uses, var, &n);
  if (!lw_map_put(&fc->reg_of, var, r)) return NIMBLE_OOM_IN("lowering");
  if (n == 0) reg_release(fc, r); /* never read: free at once */
  return nimble_ok();
}

/* A use of a variable: its register, valid until the next flush. *last
 * (may be NULL) tells whether this was its last use. */
static nimble_status_t use_var(fn_ctx *fc, const nimble_expr *var, bool *last, int64_t *out) {
  int64_t r, n = 0;
  if (!lw_map_get(&fc->reg_of, var, &r))
    return nimble_status_make(NIMBLE_INTERNAL, "variable %%%s is used where it is not bound",
                              var->u.var.name);
  lw_map_get(&fc->uses, var, &n);
  if (n <= 0) return nimble_status_make(NIMBLE_INTERNAL, "variable %%%s: use count", var->u.var.name);
  n--;
  if (!lw_map_put(&fc->uses, var, n)) return NIMBLE_OOM_IN("lowering");
  if (n == 0) NIMBLE_RETURN_IF_ERROR(pend(fc, r));
  if (last) *last = n == 0;
  *out = r;
  return nimble_ok();
}

/* ---- instructions --------------------------------------------------------- */

static nimble_status_t emit_f(fn_ctx *fc, int op, const int64_t *ops, size_t n, int func_operand,
                              size_t *pc) {
  lw_func *f = fc->f;
  if (n > NIMBLE_MAX_KERNEL_ARGS + 8)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "an instruction with %zu operands", n);
  if (f->n == f->cap) {
    size_t cap = f->cap ? f->cap * 2 : 64;
    lw_ins *ins = realloc(f->ins, cap * sizeof *ins);
    if (!ins) return NIMBLE_OOM_IN("lowering");
    f->ins = ins;
    f->cap = cap;
  }
  if (f->n >= (size_t)INT32_MAX) return nimble_status_make(NIMBLE_OUT_OF_RANGE, "function too long");
  lw_ins *i = &f->ins[f->n];
  memset(i, 0, sizeof *i);
  i->op = op;
  i->n = (uint32_t)n;
  i->func_operand = func_operand;
  if (n > 8) {
    i->big = malloc(n * sizeof *i->big);
    if (!i->big) return NIMBLE_OOM_IN("lowering");
  }
  if (n) memcpy(lw_ins_ops(i), ops, n * sizeof *ops);
  if (pc) *pc = f->n;
  f->n++;
  return nimble_ok();
}

/* EMIT(fc, MOVE, dst, src) and EMIT_PC(fc, &pc, GOTO, 0) (which records
 * the instruction's pc for patching) go through NIMBLE_EMIT: an operand
 * count that does not fit the instruction table fails to compile. */
typedef struct emit_at {
  fn_ctx *fc;
  size_t *pc;
} emit_at;

static nimble_status_t emit_at_pc(const emit_at *at, int op, const int64_t *ops, size_t n) {
  return emit_f(at->fc, op, ops, n, -1, at->pc);
}

#define EMIT_PC(fc, pcp, OP, ...) NIMBLE_EMIT(emit_at_pc, (&(emit_at){(fc), (pcp)}), OP, __VA_ARGS__)
#define EMIT(fc, OP, ...) EMIT_PC(fc, NULL, OP, __VA_ARGS__)
#define EMIT_FATAL(fc) NIMBLE_EMIT0(emit_at_pc, (&(emit_at){(fc), NULL}), FATAL)

static size_t pc_now(const fn_ctx *fc) { return fc->f->n; }

/* Sets operand k of the jump at `pc` so that it lands on `target`. */
static void patch(fn_ctx *fc, size_t pc, uint32_t k, size_t target) {
  lw_ins_ops(&fc->f->ins[pc])[k] = (int64_t)target - (int64_t)pc;
}

/* ---- use counts ----------------------------------------------------------- */

static nimble_status_t count_uses(fn_ctx *fc, const nimble_expr *e) {
  while (e) {
    switch (e->kind) {
      case NIMBLE_EXPR_VAR: {
        int64_t n = 0;
        lw_map_get(&fc->uses, e, &n);
        if (!lw_map_put(&fc->uses, e, n + 1)) return NIMBLE_OOM_IN("lowering");
        return nimble_ok();
      }
      case NIMBLE_EXPR_LET:
        NIMBLE_RETURN_IF_ERROR(count_uses(fc, e->u.let.value));
        e = e->u.let.body;
        continue;
      case NIMBLE_EXPR_CALL:
        NIMBLE_RETURN_IF_ERROR(count_uses(fc, e->u.call.callee));
        for (size_t i = 0; i < e->u.call.num_args; i++)
          NIMBLE_RETURN_IF_ERROR(count_uses(fc, e->u.call.args[i]));
        return nimble_ok();
      case NIMBLE_EXPR_IF:
        NIMBLE_RETURN_IF_ERROR(count_uses(fc, e->u.if_.cond));
        NIMBLE_RETURN_IF_ERROR(count_uses(fc, e->u.if_.then_branch));
        e = e->u.if_.else_branch;
        continue;
      case NIMBLE_EXPR_TUPLE:
        for (size_t i = 0; i < e->u.tuple.count; i++)
          NIMBLE_RETURN_IF_ERROR(count_uses(fc, e->u.tuple.fields[i]));
        return nimble_ok();
      case NIMBLE_EXPR_PROJ:
        e = e->u.proj.tuple;
        continue;
      case NIMBLE_EXPR_FUNC:
        e = e->u.func.body;
        continue;
      case NIMBLE_EXPR_MATCH:
        NIMBLE_RETURN_IF_ERROR(count_uses(fc, e->u.match.scrutinee));
        for (size_t i = 0; i < e->u.match.num_clauses; i++)
          NIMBLE_RETURN_IF_ERROR(count_uses(fc, e->u.match.clauses[i].body));
        return nimble_ok();
      default:
        return nimble_ok();
    }
  }
  return nimble_ok();
}

/* ---- expressions ---------------------------------------------------------- */

static nimble_status_t expr(fn_ctx *fc, const nimble_expr *e, mode m, int64_t *out);

/* An operand: a register valid until the flush that follows its instruction. */
static nimble_status_t operand(fn_ctx *fc, const nimble_expr *e, int64_t *r) {
  if (e->kind == NIMBLE_EXPR_VAR) return use_var(fc, e, NULL, r);
  NIMBLE_RETURN_IF_ERROR(expr(fc, e, VALUE, r));
  return pend(fc, *r);
}

/* Ends an expression: Ret in tail position, the register in VALUE mode,
 * released in EFFECT mode. `r` holds one reference (or is -1 for unit). */
static nimble_status_t finish(fn_ctx *fc, mode m, int64_t r, int64_t *out) {
  if (r < 0 && m != EFFECT) {
    /* A unit value `()` that is needed after all. */
    NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &r));
    NIMBLE_RETURN_IF_ERROR(EMIT(fc, ALLOC_ADT, r, 0));
  }
  if (m == TAIL) {
    NIMBLE_RETURN_IF_ERROR(EMIT(fc, RET, r));
    reg_release(fc, r);
    return nimble_ok();
  }
  if (m == EFFECT) {
    reg_release(fc, r);
    *out = -1;
    return nimble_ok();
  }
  *out = r;
  return nimble_ok();
}

static bool is_i64_scalar(const nimble_expr *e) {
  return e->kind == NIMBLE_EXPR_CONSTANT && e->u.constant.rank == 0 &&
         e->u.constant.dtype == NIMBLE_DTYPE_INT64;
}

static const nimble_attr_value_t *attr(const nimble_expr *call, const char *name) {
  const nimble_op *op = call->u.call.callee->u.op.op;
  int k = nimble_op_attr_index(op, name);
  if (k < 0 || (size_t)k >= call->u.call.attrs.count) return NULL;
  return &call->u.call.attrs.values[k];
}

static nimble_status_t device_type(const char *name, int64_t *out) {
  if (strcmp(name, "cpu") == 0) *out = kDLCPU;
  else if (strcmp(name, "cuda") == 0) *out = kDLCUDA;
  else return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "unknown device '%s' (cpu or cuda)", name);
  return nimble_ok();
}

/* Operands of args[from..to) into ops[] (registers). */
static nimble_status_t operands(fn_ctx *fc, const nimble_expr *call, size_t from, size_t to, int64_t *ops) {
  for (size_t i = from; i < to; i++) NIMBLE_RETURN_IF_ERROR(operand(fc, call->u.call.args[i], &ops[i - from]));
  return nimble_ok();
}

static nimble_status_t op_call(fn_ctx *fc, const nimble_expr *e, mode m, int64_t *out) {
  const nimble_op *op = e->u.call.callee->u.op.op;
  const char *name = op->name;
  size_t n = e->u.call.num_args;
  size_t mark = fc->num_pending;
  /* Built IR may skip nimble_ir_call_op's checks: the fixed-size operand
   * arrays below rely on the registry's arity. */
  if (n < (size_t)op->min_inputs || (op->max_inputs >= 0 && n > (size_t)op->max_inputs))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "operator '%s' with %zu arguments", name, n);
  int64_t dst = -1;
  int64_t a[4];
  if (strcmp(name, "shape_of") == 0) {
    NIMBLE_RETURN_IF_ERROR(operands(fc, e, 0, 1, a));
    NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &dst));
    NIMBLE_RETURN_IF_ERROR(EMIT(fc, SHAPE_OF, dst, a[0]));
  } else if (strcmp(name, "alloc_storage") == 0) {
    const nimble_attr_value_t *al = attr(e, "alignment"), *dev = attr(e, "device");
    int64_t dt = kDLCPU;
    if (dev) NIMBLE_RETURN_IF_ERROR(device_type(dev->s, &dt));
    int64_t align = al ? al->i : 64;
    if (align <= 0 || align > NIMBLE_MAX_ALIGNMENT || (align & (align - 1)))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "alignment %" PRId64 " (a power of two up to %d)",
                                align, NIMBLE_MAX_ALIGNMENT);
    NIMBLE_RETURN_IF_ERROR(operands(fc, e, 0, 1, a));
    NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &dst));
    NIMBLE_RETURN_IF_ERROR(EMIT(fc, ALLOC_STORAGE, dst, a[0], align, dt, 0, kDLUInt, 8, 1));
  } else if (strcmp(name, "alloc_tensor") == 0) {
    const nimble_attr_value_t *dtn = attr(e, "dtype"), *shape = attr(e, "shape");
    nimble_dtype_t dt = NIMBLE_DTYPE_FLOAT32;
    if (dtn && !nimble_dtype_from_name(dtn->s, strlen(dtn->s), &dt))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "unknown dtype '%s'", dtn->s);
    DLDataType d = lw_dl_dtype(dt);
    NIMBLE_RETURN_IF_ERROR(operands(fc, e, 0, n, a));
    NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &dst));
    if (n == 3) {
      NIMBLE_RETURN_IF_ERROR(EMIT(fc, ALLOC_TENSOR_REG, dst, a[0], a[1], a[2], d.code, d.bits, d.lanes));
    } else {
      size_t rank = shape ? shape->n : 0;
      if (rank > NIMBLE_MAX_NDIM)
        return nimble_status_make(NIMBLE_OUT_OF_RANGE, "a tensor of rank %zu (at most %d)", rank, NIMBLE_MAX_NDIM);
      int64_t ops[6 + NIMBLE_MAX_NDIM] = {dst, a[0], a[1], d.code, d.bits, d.lanes};
      for (size_t i = 0; i < rank; i++) ops[6 + i] = shape->ints[i];
      NIMBLE_RETURN_IF_ERROR(emit_f(fc, NIMBLE_OP_ALLOC_TENSOR, ops, 6 + rank, -1, NULL));
    }
  } else if (strcmp(name, "invoke") == 0 || strcmp(name, "invoke_shape_func") == 0) {
    bool shape_fn = name[6] != '\0';
    const nimble_attr_value_t *kern = attr(e, "kernel");
    if (!kern || !kern->s || !kern->s[0])
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s names no kernel", name);
    size_t nout;
    const nimble_attr_value_t *ranks = NULL;
    if (shape_fn) {
      ranks = attr(e, "out_ranks");
      nout = ranks ? ranks->n : 0;
      if (nout == 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "invoke_shape_func without out_ranks");
    } else {
      const nimble_attr_value_t *no = attr(e, "num_outputs");
      if (!no || no->i < 0 || (uint64_t)no->i > n)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "invoke of '%s': bad num_outputs", kern->s);
      nout = (size_t)no->i;
    }
    size_t total = n + (shape_fn ? nout : 0);
    if (total > NIMBLE_MAX_KERNEL_ARGS)
      return nimble_status_make(NIMBLE_OUT_OF_RANGE, "kernel '%s' with %zu arguments (at most %d)", kern->s,
                                total, NIMBLE_MAX_KERNEL_ARGS);
    const nimble_attr_value_t *md = shape_fn ? attr(e, "mode") : NULL;
    int64_t k;
    /* invoke device="cuda" (place_devices): the kernel is declared on the GPU. */
    const nimble_attr_value_t *kdev = shape_fn ? NULL : attr(e, "device");
    int64_t kdt = kDLCPU;
    if (kdev && kdev->s) NIMBLE_RETURN_IF_ERROR(device_type(kdev->s, &kdt));
    NIMBLE_RETURN_IF_ERROR(lw_kernel_on(fc->c, kern->s,
                                        shape_fn ? NIMBLE_LOWER_KERNEL_SHAPE_FUNC : NIMBLE_LOWER_KERNEL_COMPUTE,
                                        (uint32_t)nout, shape_fn ? (md ? md->s : "data_independent") : NULL,
                                        kdt == kDLCUDA, &k));
    int64_t *ops = malloc((total + 2) * sizeof *ops);
    if (!ops) return NIMBLE_OOM_IN("lowering");
    ops[0] = k;
    ops[1] = (int64_t)nout;
    nimble_status_t s = operands(fc, e, 0, n, ops + 2);
    /* A shape function's outputs: int64 [rank] tensors allocated here, on
     * the host. */
    for (size_t o = 0; !s && shape_fn && o < nout; o++) {
      int64_t rank = ranks->ints[o], size, st, off, t;
      if (rank < 0 || rank > NIMBLE_MAX_NDIM) {
        s = nimble_status_make(NIMBLE_OUT_OF_RANGE, "shape function output %zu has rank %" PRId64, o, rank);
        break;
      }
      if (!s) s = reg_alloc(fc, &size);
      if (!s) s = EMIT(fc, LOAD_CONSTI, size, rank ? 8 * rank : 8);
      if (!s) s = reg_alloc(fc, &st);
      if (!s) s = EMIT(fc, ALLOC_STORAGE, st, size, 64, kDLCPU, 0, kDLInt, 64, 1);
      if (!s) s = reg_alloc(fc, &off);
      if (!s) s = EMIT(fc, LOAD_CONSTI, off, 0);
      if (!s) s = reg_alloc(fc, &t);
      if (!s) s = EMIT(fc, ALLOC_TENSOR, t, st, off, kDLInt, 64, 1, rank);
      if (!s) {
        reg_release(fc, size);
        reg_release(fc, st);
        reg_release(fc, off);
        ops[2 + n + o] = t; /* keeps its reference until the tuple takes it */
      }
    }
    if (!s) s = emit_f(fc, NIMBLE_OP_INVOKE_PACKED, ops, total + 2, -1, NULL);
    if (!s && shape_fn) {
      /* The result is a tuple of the shapes (projections read it). */
      s = reg_alloc(fc, &dst);
      int64_t *adt = s ? NULL : malloc((nout + 2) * sizeof *adt);
      if (!s && !adt) s = NIMBLE_OOM_IN("lowering");
      if (!s) {
        adt[0] = dst;
        adt[1] = 0;
        memcpy(adt + 2, ops + 2 + n, nout * sizeof *adt);
        s = emit_f(fc, NIMBLE_OP_ALLOC_ADT, adt, nout + 2, -1, NULL);
        for (size_t o = 0; o < nout; o++) reg_release(fc, adt[2 + o]);
      }
      free(adt);
    }
    free(ops);
    NIMBLE_RETURN_IF_ERROR(s);
  } else if (strcmp(name, "device_copy") == 0) {
    /* ---- device_copy (place_devices): DeviceCopy dst, src, device, 0 ---- */
    const nimble_attr_value_t *dev = attr(e, "device");
    int64_t dt = kDLCPU;
    if (dev && dev->s) NIMBLE_RETURN_IF_ERROR(device_type(dev->s, &dt));
    NIMBLE_RETURN_IF_ERROR(operands(fc, e, 0, 1, a));
    NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &dst));
    NIMBLE_RETURN_IF_ERROR(EMIT(fc, DEVICE_COPY, dst, a[0], dt, 0));
  } else if (strcmp(name, "reshape_tensor") == 0) {
    NIMBLE_RETURN_IF_ERROR(operands(fc, e, 0, 2, a));
    NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &dst));
    NIMBLE_RETURN_IF_ERROR(EMIT(fc, RESHAPE_TENSOR, dst, a[0], a[1]));
  } else if (strcmp(name, "kill") == 0) {
    const nimble_expr *x = e->u.call.args[0];
    if (x->kind == NIMBLE_EXPR_VAR) {
      bool last;
      int64_t r;
      NIMBLE_RETURN_IF_ERROR(use_var(fc, x, &last, &r));
      /* Only the last holder of a register may drop its value (a pattern
       * variable or an alias may share it). */
      if (last && fc->refs[r] == 1) NIMBLE_RETURN_IF_ERROR(EMIT(fc, KILL_REGISTER, r));
    }
  } else {
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "operator '%s' outside a primitive function: lowering expects the "
                              "output of nimble_passes_run_default",
                              name);
  }
  flush(fc, mark);
  return finish(fc, m, dst, out);
}

/* A self tail call: the arguments move into the parameters, then a jump
 * to the function's start. Sources that are parameter registers about to
 * be overwritten are copied aside first (a parallel move). */
static nimble_status_t self_tail_call(fn_ctx *fc, const nimble_expr *e) {
  size_t n = e->u.call.num_args, mark = fc->num_pending;
  int64_t *src = calloc(n ? n : 1, sizeof *src);
  if (!src) return NIMBLE_OOM_IN("lowering");
  nimble_status_t s = operands(fc, e, 0, n, src);
  for (size_t i = 0; !s && i < n; i++) {
    if (src[i] == (int64_t)i || src[i] >= (int64_t)n) continue;
    /* A fresh register above the parameters (not one from the free
     * list, which may hold freed parameter registers). */
    int64_t t;
    s = reg_alloc_fresh(fc, &t);
    if (!s) s = EMIT(fc, MOVE, t, src[i]);
    if (!s) s = pend(fc, t);
    src[i] = t;
  }
  for (size_t i = 0; !s && i < n; i++)
    if (src[i] != (int64_t)i) s = EMIT(fc, MOVE, (int64_t)i, src[i]);
  if (!s) s = EMIT(fc, GOTO, -(int64_t)pc_now(fc));
  free(src);
  flush(fc, mark);
  return s;
}

static nimble_status_t call(fn_ctx *fc, const nimble_expr *e, mode m, int64_t *out) {
  const nimble_expr *callee = e->u.call.callee;
  size_t n = e->u.call.num_args;
  if (callee->kind == NIMBLE_EXPR_OP) return op_call(fc, e, m, out);
  if (n > NIMBLE_MAX_KERNEL_ARGS)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "a call with %zu arguments", n);
  int op;
  int64_t head, pos = -1;
  if (callee->kind == NIMBLE_EXPR_GLOBAL) {
    const char *g = callee->u.global.name;
    if (nimble_passes_is_primitive(g))
      return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                                "call of primitive @\"%s\" without explicit memory: run "
                                "manifest_memory before lowering",
                                g);
    pos = lw_find_func(fc->c, g);
    if (pos < 0) return nimble_status_make(NIMBLE_NOT_FOUND, "call of unknown global @%s", g);
    const lw_func *f = &fc->c->funcs[pos];
    size_t want = f->global->u.func.num_params;
    if (n != want)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "@%s takes %zu arguments, given %zu", g, want, n);
    if (m == TAIL && pos == fc->self && !f->closure) return self_tail_call(fc, e);
    op = f->closure ? NIMBLE_OP_ALLOC_CLOSURE : NIMBLE_OP_INVOKE;
    head = pos;
  } else if (callee->kind == NIMBLE_EXPR_CONSTRUCTOR) {
    const nimble_constructor *k = callee->u.ctor.ctor;
    if (n != k->num_fields)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "constructor %s takes %zu fields, given %zu",
                                k->name, k->num_fields, n);
    op = NIMBLE_OP_ALLOC_ADT;
    head = k->tag;
  } else {
    op = NIMBLE_OP_INVOKE_CLOSURE;
    head = -1;
  }
  size_t mark = fc->num_pending;
  int64_t *ops = malloc((n + 2) * sizeof *ops);
  if (!ops) return NIMBLE_OOM_IN("lowering");
  nimble_status_t s = nimble_ok();
  if (op == NIMBLE_OP_INVOKE_CLOSURE) s = operand(fc, callee, &head);
  if (!s) s = operands(fc, e, 0, n, ops + 2);
  int64_t dst = -1;
  if (!s) s = reg_alloc(fc, &dst);
  if (!s) {
    ops[0] = dst;
    ops[1] = head;
    s = emit_f(fc, op, ops, n + 2, pos >= 0 ? 1 : -1, NULL);
  }
  free(ops);
  NIMBLE_RETURN_IF_ERROR(s);
  flush(fc, mark);
  return finish(fc, m, dst, out);
}

static nimble_status_t if_expr(fn_ctx *fc, const nimble_expr *e, mode m, int64_t *out) {
  size_t mark = fc->num_pending;
  int64_t cond, zero, dst = -1;
  NIMBLE_RETURN_IF_ERROR(operand(fc, e->u.if_.cond, &cond));
  NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &zero));
  NIMBLE_RETURN_IF_ERROR(pend(fc, zero));
  NIMBLE_RETURN_IF_ERROR(EMIT(fc, LOAD_CONSTI, zero, 0));
  /* cond == 0 jumps to the else branch; any other value falls through. */
  size_t jump;
  NIMBLE_RETURN_IF_ERROR(EMIT_PC(fc, &jump, IF, cond, zero, 0, 1));
  flush(fc, mark);
  if (m != TAIL) NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &dst));
  const nimble_expr *branches[2] = {e->u.if_.then_branch, e->u.if_.else_branch};
  size_t to_end = 0;
  for (int b = 0; b < 2; b++) {
    if (b == 1) patch(fc, jump, 2, pc_now(fc));
    if (m == TAIL) {
      NIMBLE_RETURN_IF_ERROR(expr(fc, branches[b], TAIL, NULL));
      continue;
    }
    int64_t r;
    NIMBLE_RETURN_IF_ERROR(expr(fc, branches[b], VALUE, &r));
    NIMBLE_RETURN_IF_ERROR(EMIT(fc, MOVE, dst, r));
    reg_release(fc, r);
    if (b == 0) NIMBLE_RETURN_IF_ERROR(EMIT_PC(fc, &to_end, GOTO, 0));
  }
  if (m != TAIL) patch(fc, to_end, 0, pc_now(fc));
  if (m == TAIL) return nimble_ok();
  return finish(fc, m, dst, out);
}

/* ---- match ---------------------------------------------------------------- */

typedef struct jumps {
  size_t *pcs;
  size_t n, cap;
} jumps;

static nimble_status_t jumps_add(jumps *j, size_t pc) {
  if (j->n == j->cap) {
    size_t cap = j->cap ? j->cap * 2 : 8;
    size_t *p = realloc(j->pcs, cap * sizeof *p);
    if (!p) return NIMBLE_OOM_IN("lowering");
    j->pcs = p;
    j->cap = cap;
  }
  j->pcs[j->n++] = pc;
  return nimble_ok();
}

/* Emits the tests of pattern `p` against the value in register r (when
 * `check`; the last arm of an exhaustive match needs none) and binds its
 * variables. Failing tests are If instructions whose false offset
 * (operand 3) is patched later to the next arm. */
static nimble_status_t pattern(fn_ctx *fc, const nimble_pattern *p, int64_t r, bool check, jumps *fails) {
  switch (p->kind) {
    case NIMBLE_PATTERN_WILDCARD:
      return nimble_ok();
    case NIMBLE_PATTERN_VAR:
      reg_retain(fc, r);
      return bind(fc, p->var, r);
    case NIMBLE_PATTERN_CTOR:
    case NIMBLE_PATTERN_TUPLE: {
      if (p->kind == NIMBLE_PATTERN_CTOR && check && p->ctor->owner->num_ctors > 1) {
        int64_t tag, want;
        size_t pc;
        NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &tag));
        NIMBLE_RETURN_IF_ERROR(EMIT(fc, GET_TAG, tag, r));
        NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &want));
        NIMBLE_RETURN_IF_ERROR(EMIT(fc, LOAD_CONSTI, want, p->ctor->tag));
        /* Equal tags fall through; different ones go to the next arm. */
        NIMBLE_RETURN_IF_ERROR(EMIT_PC(fc, &pc, IF, tag, want, 1, 0));
        NIMBLE_RETURN_IF_ERROR(jumps_add(fails, pc));
        reg_release(fc, tag);
        reg_release(fc, want);
      }
      for (size_t i = 0; i < p->num_subs; i++) {
        const nimble_pattern *sub = p->subs[i];
        if (sub->kind == NIMBLE_PATTERN_WILDCARD) continue;
        int64_t fr;
        NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &fr));
        NIMBLE_RETURN_IF_ERROR(EMIT(fc, GET_FIELD, fr, r, (int64_t)i));
        NIMBLE_RETURN_IF_ERROR(pattern(fc, sub, fr, check, fails));
        reg_release(fc, fr);
      }
      return nimble_ok();
    }
  }
  return nimble_status_make(NIMBLE_INTERNAL, "unknown pattern kind %d", (int)p->kind);
}

static nimble_status_t match_expr(fn_ctx *fc, const nimble_expr *e, mode m, int64_t *out) {
  size_t mark = fc->num_pending;
  int64_t scrut, dst = -1;
  NIMBLE_RETURN_IF_ERROR(operand(fc, e->u.match.scrutinee, &scrut));
  /* The scrutinee stays for every arm's tests. */
  reg_retain(fc, scrut);
  flush(fc, mark);
  bool exhaustive = false;
  NIMBLE_RETURN_IF_ERROR(nimble_typing_match_exhaustive(fc->c->arena, e, &exhaustive, NULL));
  if (m != TAIL) NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &dst));
  jumps ends = {0}, fails = {0};
  nimble_status_t s = nimble_ok();
  size_t nc = e->u.match.num_clauses;
  for (size_t i = 0; !s && i < nc; i++) {
    bool last = i + 1 == nc;
    fails.n = 0;
    s = pattern(fc, e->u.match.clauses[i].pattern, scrut, !(last && exhaustive), &fails);
    if (s) break;
    if (m == TAIL) {
      s = expr(fc, e->u.match.clauses[i].body, TAIL, NULL);
    } else {
      int64_t r;
      s = expr(fc, e->u.match.clauses[i].body, VALUE, &r);
      if (!s) s = EMIT(fc, MOVE, dst, r);
      if (!s) reg_release(fc, r);
      bool falls_to_more = !last || fails.n > 0;
      size_t pc;
      if (!s && falls_to_more) s = EMIT_PC(fc, &pc, GOTO, 0);
      if (!s && falls_to_more) s = jumps_add(&ends, pc);
    }
    for (size_t k = 0; !s && k < fails.n; k++) patch(fc, fails.pcs[k], 3, pc_now(fc));
    /* After the last arm, failing tests land on the Fatal below. */
    if (!s && last && fails.n > 0) s = EMIT_FATAL(fc);
  }
  if (!s && nc == 0) s = EMIT_FATAL(fc);
  for (size_t k = 0; !s && k < ends.n; k++) patch(fc, ends.pcs[k], 0, pc_now(fc));
  free(ends.pcs);
  free(fails.pcs);
  reg_release(fc, scrut);
  NIMBLE_RETURN_IF_ERROR(s);
  if (m == TAIL) return nimble_ok();
  return finish(fc, m, dst, out);
}

/* ---- the dispatcher -------------------------------------------------------- */

static nimble_status_t expr(fn_ctx *fc, const nimble_expr *e, mode m, int64_t *out) {
  /* A `let` chain is walked in a loop: long chains cost no stack. */
  while (e->kind == NIMBLE_EXPR_LET) {
    const nimble_expr *var = e->u.let.var, *value = e->u.let.value, *body = e->u.let.body;
    int64_t n = 0;
    lw_map_get(&fc->uses, var, &n);
    /* `let %v = f(...); %v` at the end of a function is a tail call. */
    if (m == TAIL && body == var && n == 1 && value->kind == NIMBLE_EXPR_CALL)
      return at(value, call(fc, value, TAIL, NULL));
    int64_t r;
    NIMBLE_RETURN_IF_ERROR(at(value, expr(fc, value, n > 0 ? VALUE : EFFECT, &r)));
    if (r >= 0) NIMBLE_RETURN_IF_ERROR(bind(fc, var, r));
    e = body;
  }
  int64_t r = -1;
  switch (e->kind) {
    case NIMBLE_EXPR_VAR: {
      bool last;
      size_t mark = fc->num_pending;
      if (m == EFFECT) {
        NIMBLE_RETURN_IF_ERROR(use_var(fc, e, &last, &r));
        flush(fc, mark);
        *out = -1;
        return nimble_ok();
      }
      NIMBLE_RETURN_IF_ERROR(use_var(fc, e, &last, &r));
      reg_retain(fc, r); /* the caller's reference */
      flush(fc, mark);
      return finish(fc, m, r, out);
    }
    case NIMBLE_EXPR_CONSTANT: {
      if (m == EFFECT) {
        *out = -1;
        return nimble_ok();
      }
      NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &r));
      if (is_i64_scalar(e)) {
        int64_t v;
        memcpy(&v, e->u.constant.data, sizeof v);
        NIMBLE_RETURN_IF_ERROR(EMIT(fc, LOAD_CONSTI, r, v));
      } else {
        int64_t k;
        NIMBLE_RETURN_IF_ERROR(lw_constant(fc->c, e, &k));
        NIMBLE_RETURN_IF_ERROR(EMIT(fc, LOAD_CONST, r, k));
      }
      return finish(fc, m, r, out);
    }
    case NIMBLE_EXPR_GLOBAL: {
      const char *g = e->u.global.name;
      int64_t pos = lw_find_func(fc->c, g);
      if (pos < 0 || fc->c->funcs[pos].closure)
        return nimble_status_make(NIMBLE_UNIMPLEMENTED, "global @%s used as a value (%s)", g,
                                  pos < 0 ? "a primitive or unknown" : "it makes a closure");
      NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &r));
      /* A global function as a value: a closure that captures nothing. */
      NIMBLE_RETURN_IF_ERROR(emit_f(fc, NIMBLE_OP_ALLOC_CLOSURE, (const int64_t[]){r, pos}, 2, 1, NULL));
      return finish(fc, m, r, out);
    }
    case NIMBLE_EXPR_CONSTRUCTOR: {
      const nimble_constructor *k = e->u.ctor.ctor;
      if (k->num_fields)
        return nimble_status_make(NIMBLE_UNIMPLEMENTED, "constructor %s used as a function value", k->name);
      NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &r));
      NIMBLE_RETURN_IF_ERROR(EMIT(fc, ALLOC_ADT, r, k->tag));
      return finish(fc, m, r, out);
    }
    case NIMBLE_EXPR_CALL:
      return call(fc, e, m, out);
    case NIMBLE_EXPR_IF:
      return if_expr(fc, e, m, out);
    case NIMBLE_EXPR_MATCH:
      return at(e, match_expr(fc, e, m, out));
    case NIMBLE_EXPR_TUPLE: {
      size_t n = e->u.tuple.count, mark = fc->num_pending;
      int64_t *ops = malloc((n + 2) * sizeof *ops);
      if (!ops) return NIMBLE_OOM_IN("lowering");
      nimble_status_t s = nimble_ok();
      for (size_t i = 0; !s && i < n; i++) s = operand(fc, e->u.tuple.fields[i], &ops[2 + i]);
      if (!s) s = reg_alloc(fc, &r);
      if (!s) {
        ops[0] = r;
        ops[1] = 0;
        s = emit_f(fc, NIMBLE_OP_ALLOC_ADT, ops, n + 2, -1, NULL);
      }
      free(ops);
      NIMBLE_RETURN_IF_ERROR(s);
      flush(fc, mark);
      return finish(fc, m, r, out);
    }
    case NIMBLE_EXPR_PROJ: {
      size_t mark = fc->num_pending;
      int64_t t;
      NIMBLE_RETURN_IF_ERROR(operand(fc, e->u.proj.tuple, &t));
      NIMBLE_RETURN_IF_ERROR(reg_alloc(fc, &r));
      NIMBLE_RETURN_IF_ERROR(EMIT(fc, GET_FIELD, r, t, (int64_t)e->u.proj.index));
      flush(fc, mark);
      return finish(fc, m, r, out);
    }
    case NIMBLE_EXPR_FUNC:
      return at(e, nimble_status_make(NIMBLE_UNIMPLEMENTED,
                                      "a function literal inside a function: run lift_lambdas before "
                                      "lowering"));
    case NIMBLE_EXPR_OP:
      return at(e, nimble_status_make(NIMBLE_UNIMPLEMENTED, "operator '%s' used as a value",
                                      e->u.op.op->name));
    default:
      return nimble_status_make(NIMBLE_INTERNAL, "unknown expression kind %d", (int)e->kind);
  }
}

nimble_status_t lw_compile_function(lower_ctx *c, lw_func *f) {
  fn_ctx fc;
  memset(&fc, 0, sizeof fc);
  fc.c = c;
  fc.f = f;
  fc.self = f - c->funcs;
  nimble_status_t s = count_uses(&fc, f->code->u.func.body);
  /* Parameters arrive in registers 0..n-1: the captured values first for a
   * closure, then the code's own parameters. */
  for (uint32_t i = 0; !s && i < f->num_params; i++) {
    int64_t r;
    s = reg_alloc(&fc, &r); /* the free list is empty: r == i */
  }
  const nimble_expr *lists[2] = {f->global, f->closure ? f->code : NULL};
  int64_t next = 0;
  for (int l = 0; !s && l < 2; l++) {
    if (!lists[l]) continue;
    for (size_t i = 0; !s && i < lists[l]->u.func.num_params; i++)
      s = bind(&fc, lists[l]->u.func.params[i], next++);
  }
  if (!s) s = expr(&fc, f->code->u.func.body, TAIL, NULL);
  f->num_registers = fc.next_reg > f->num_params ? fc.next_reg : f->num_params;
  if (f->num_registers == 0) f->num_registers = 1;
  lw_map_free(&fc.reg_of);
  lw_map_free(&fc.uses);
  free(fc.refs);
  free(fc.free_regs);
  free(fc.pending);
  return s;
}
