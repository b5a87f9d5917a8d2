/* Loop-nest constructors: each checks its operands' types and records the
 * first problem in the arena, returning NULL, so builders can nest calls
 * freely and check once. */
#include <string.h>

#include <math.h>

#include "ln_internal.h"

const char *nimble_ln_type_name(nimble_ln_type_t t) {
  switch (t) {
  case NIMBLE_LN_F32: return "f32";
  case NIMBLE_LN_I64: return "i64";
  case NIMBLE_LN_I32: return "i32";
  case NIMBLE_LN_BOOL: return "bool";
  case NIMBLE_LN_U8: return "u8";
  case NIMBLE_LN_F64: return "f64";
  case NIMBLE_LN_F16: return "f16";
  case NIMBLE_LN_BF16: return "bf16";
  case NIMBLE_LN_I8: return "i8";
  case NIMBLE_LN_I16: return "i16";
  case NIMBLE_LN_U16: return "u16";
  case NIMBLE_LN_U32: return "u32";
  case NIMBLE_LN_U64: return "u64";
  }
  return "?";
}

int nimble_ln_type_is_float(nimble_ln_type_t t) {
  return t == NIMBLE_LN_F32 || t == NIMBLE_LN_F64 || t == NIMBLE_LN_F16 || t == NIMBLE_LN_BF16;
}

int nimble_ln_type_is_unsigned(nimble_ln_type_t t) {
  return t == NIMBLE_LN_U8 || t == NIMBLE_LN_U16 || t == NIMBLE_LN_U32 || t == NIMBLE_LN_U64;
}

int nimble_ln_type_is_int(nimble_ln_type_t t) {
  return t == NIMBLE_LN_I8 || t == NIMBLE_LN_I16 || t == NIMBLE_LN_I32 || t == NIMBLE_LN_I64 ||
         nimble_ln_type_is_unsigned(t);
}

int nimble_ln_type_bits(nimble_ln_type_t t) {
  switch (t) {
  case NIMBLE_LN_BOOL: return 1;
  case NIMBLE_LN_U8:
  case NIMBLE_LN_I8: return 8;
  case NIMBLE_LN_F16:
  case NIMBLE_LN_BF16:
  case NIMBLE_LN_I16:
  case NIMBLE_LN_U16: return 16;
  case NIMBLE_LN_F32:
  case NIMBLE_LN_I32:
  case NIMBLE_LN_U32: return 32;
  case NIMBLE_LN_F64:
  case NIMBLE_LN_I64:
  case NIMBLE_LN_U64: return 64;
  }
  return 0;
}

const char *nimble_ln_op_name(nimble_ln_op_t op) {
  static const char *const names[] = {
      "neg", "not", "abs", "exp", "tanh", "sigmoid", "erf", "sqrt", "log", "+", "-", "*", "/",
      "%", "min", "max", "pow", "<", "<=", ">", ">=", "==", "!=", "&&", "||", "<<", ">>",
      "sin", "cos", "atan", "maxnum"};
  if ((unsigned)op < sizeof names / sizeof names[0]) return names[op];
  return "?";
}

static int op_is_unary(nimble_ln_op_t op) {
  return op <= NIMBLE_LN_LOG || (op >= NIMBLE_LN_SIN && op <= NIMBLE_LN_ATAN);
}

nimble_ln_kernel *nimble_ln_kernel_create(nimble_ln_arena *arena, const char *name) {
  if (!name || !*name) {
    nimble_ln_arena_fail(arena, "kernel name is empty");
    return NULL;
  }
  for (const char *p = name; *p; p++) {
    char c = *p;
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
             (p != name && c >= '0' && c <= '9');
    if (!ok) {
      nimble_ln_arena_fail(arena, "kernel name '%s' is not a C identifier (character %d)", name,
                           (int)(p - name));
      return NULL;
    }
  }
  nimble_ln_kernel *k = nimble_ln_arena_alloc(arena, sizeof *k);
  if (!k) return NULL;
  k->name = nimble_ln_arena_strdup(arena, name);
  k->arena = arena;
  return k;
}

nimble_ln_param *nimble_ln_kernel_add_param(nimble_ln_kernel *k, const char *name,
                                            nimble_ln_type_t dtype, int rank, int is_output) {
  if (!k) return NULL;
  if (k->n_params >= NIMBLE_LN_MAX_PARAMS) {
    nimble_ln_arena_fail(k->arena, "kernel '%s': more than %d parameters", k->name,
                         NIMBLE_LN_MAX_PARAMS);
    return NULL;
  }
  if (rank < 0 || rank > NIMBLE_LN_MAX_RANK) {
    nimble_ln_arena_fail(k->arena, "kernel '%s': parameter '%s' has rank %d, outside [0, %d]",
                         k->name, name, rank, NIMBLE_LN_MAX_RANK);
    return NULL;
  }
  if (dtype == NIMBLE_LN_BOOL) {
    nimble_ln_arena_fail(k->arena,
                         "kernel '%s': parameter '%s': bool is not a tensor element type (bool "
                         "tensors are u8)",
                         k->name, name);
    return NULL;
  }
  if ((unsigned)dtype >= NIMBLE_LN_TYPE_COUNT) {
    nimble_ln_arena_fail(k->arena, "kernel '%s': parameter '%s': unknown element type %d", k->name,
                         name, (int)dtype);
    return NULL;
  }
  if (k->n_params > 0 && k->params[k->n_params - 1]->scratch) {
    nimble_ln_arena_fail(k->arena, "kernel '%s': parameter '%s' follows a scratch buffer", k->name, name);
    return NULL;
  }
  if (!is_output && k->n_params > 0 && k->params[k->n_params - 1]->is_output) {
    nimble_ln_arena_fail(k->arena, "kernel '%s': input '%s' follows an output", k->name, name);
    return NULL;
  }
  nimble_ln_param *p = nimble_ln_arena_alloc(k->arena, sizeof *p);
  if (!p) return NULL;
  p->name = nimble_ln_arena_strdup(k->arena, name);
  p->dtype = dtype;
  p->rank = rank;
  p->index = k->n_params;
  p->is_output = is_output;
  k->params[k->n_params++] = p;
  return p;
}

nimble_ln_param *nimble_ln_kernel_add_scratch(nimble_ln_kernel *k, const char *name,
                                              nimble_ln_type_t dtype, nimble_ln_expr *elements) {
  if (!k) return NULL;
  if (!elements || elements->type != NIMBLE_LN_I64) {
    nimble_ln_arena_fail(k->arena, "kernel '%s': scratch '%s' needs an i64 element count", k->name,
                         name ? name : "?");
    return NULL;
  }
  if (k->n_params == 0 || !k->params[k->n_params - 1]->is_output) {
    nimble_ln_arena_fail(k->arena, "kernel '%s': scratch '%s' must follow the outputs", k->name,
                         name ? name : "?");
    return NULL;
  }
  /* add_param refuses anything after a scratch buffer, so add it as an
   * output first and mark it. */
  nimble_ln_param *p = nimble_ln_kernel_add_param(k, name, dtype, 1, 1);
  if (p) p->scratch = elements;
  return p;
}

void nimble_ln_kernel_set_body(nimble_ln_kernel *k, nimble_ln_stmt *body) {
  if (k) k->body = body;
}

void nimble_ln_kernel_specialize(nimble_ln_kernel *k, nimble_ln_param *param, int axis,
                                 int64_t factor) {
  if (!k || !param) return;
  if (k->n_specs >= NIMBLE_LN_MAX_SPECIALIZATIONS || axis < 0 || axis >= param->rank ||
      factor <= 1) {
    nimble_ln_arena_fail(k->arena,
                         "kernel '%s': bad specialisation shape(%s, %d) %% %lld (at most %d, "
                         "axis within rank, factor > 1)",
                         k->name, param->name, axis, (long long)factor,
                         NIMBLE_LN_MAX_SPECIALIZATIONS);
    return;
  }
  k->specs[k->n_specs++] = (nimble_ln_specialization_t){param, axis, factor};
}

nimble_ln_var *nimble_ln_var_create(nimble_ln_arena *arena, const char *name, nimble_ln_type_t type) {
  nimble_ln_var *v = nimble_ln_arena_alloc(arena, sizeof *v);
  if (!v) return NULL;
  v->name = nimble_ln_arena_strdup(arena, name);
  v->type = type;
  v->id = nimble_ln_arena_next_var_id(arena);
  return v;
}

static nimble_ln_expr *new_expr(nimble_ln_arena *arena, nimble_ln_expr_kind_t kind,
                                nimble_ln_type_t type) {
  nimble_ln_expr *e = nimble_ln_arena_alloc(arena, sizeof *e);
  if (!e) return NULL;
  e->kind = kind;
  e->type = type;
  return e;
}

nimble_ln_expr *nimble_ln_f32(nimble_ln_arena *arena, double value) {
  nimble_ln_expr *e = new_expr(arena, NIMBLE_LN_E_CONST_F, NIMBLE_LN_F32);
  if (e) e->f = (float)value;
  return e;
}

nimble_ln_expr *nimble_ln_i64(nimble_ln_arena *arena, int64_t value) {
  nimble_ln_expr *e = new_expr(arena, NIMBLE_LN_E_CONST_I, NIMBLE_LN_I64);
  if (e) e->i = value;
  return e;
}

nimble_ln_expr *nimble_ln_i32(nimble_ln_arena *arena, int32_t value) {
  nimble_ln_expr *e = new_expr(arena, NIMBLE_LN_E_CONST_I, NIMBLE_LN_I32);
  if (e) e->i = value;
  return e;
}

nimble_ln_expr *nimble_ln_u8(nimble_ln_arena *arena, uint8_t value) {
  nimble_ln_expr *e = new_expr(arena, NIMBLE_LN_E_CONST_I, NIMBLE_LN_U8);
  if (e) e->i = value;
  return e;
}

/* value rounded to `bits` significant bits (ties to even) with the
 * exponent range of binary16 (min_exp -14) or bfloat16 (-126) and
 * overflow to infinity past max. The codegen library does not link the
 * IR's dtype helpers, hence this small copy for constants. */
static double round_to_format(double value, int bits, int min_exp, double max, double overflow) {
  if (isnan(value) || isinf(value) || value == 0) return value;
  double a = fabs(value);
  if (a >= overflow) return copysign(INFINITY, value);
  int e;
  frexp(a, &e); /* a in [2^(e-1), 2^e) */
  if (e - 1 < min_exp) e = min_exp + 1; /* subnormals: fixed spacing */
  double ulp = ldexp(1.0, e - bits);
  double r = nearbyint(a / ulp) * ulp;
  if (r > max) return copysign(INFINITY, value);
  return copysign(r, value);
}

nimble_ln_expr *nimble_ln_const_f(nimble_ln_arena *arena, nimble_ln_type_t type, double value) {
  if (!nimble_ln_type_is_float(type)) {
    nimble_ln_arena_fail(arena, "float constant of type %s", nimble_ln_type_name(type));
    return NULL;
  }
  nimble_ln_expr *e = new_expr(arena, NIMBLE_LN_E_CONST_F, type);
  if (!e) return NULL;
  switch (type) {
  case NIMBLE_LN_F64: e->f = value; break;
  case NIMBLE_LN_F16: e->f = round_to_format(value, 11, -14, 65504.0, 65520.0); break;
  case NIMBLE_LN_BF16:
    e->f = round_to_format(value, 8, -126, 0x1.fep127, 0x1.ffp127);
    break;
  default: e->f = (float)value; break;
  }
  return e;
}

nimble_ln_expr *nimble_ln_const_i(nimble_ln_arena *arena, nimble_ln_type_t type, int64_t value) {
  if (!nimble_ln_type_is_int(type) && type != NIMBLE_LN_BOOL) {
    nimble_ln_arena_fail(arena, "integer constant of type %s", nimble_ln_type_name(type));
    return NULL;
  }
  nimble_ln_expr *e = new_expr(arena, NIMBLE_LN_E_CONST_I, type);
  if (!e) return NULL;
  int bits = nimble_ln_type_bits(type);
  uint64_t u = (uint64_t)value;
  if (bits < 64) {
    u &= (UINT64_C(1) << bits) - 1;
    /* Signed types keep the value sign-extended, unsigned ones zero-extended. */
    if (!nimble_ln_type_is_unsigned(type) && type != NIMBLE_LN_BOOL && (u >> (bits - 1)) & 1)
      u |= ~((UINT64_C(1) << bits) - 1);
  }
  e->i = (int64_t)u;
  return e;
}

nimble_ln_expr *nimble_ln_ref(nimble_ln_arena *arena, nimble_ln_var *var) {
  if (!var) return NULL;
  nimble_ln_expr *e = new_expr(arena, NIMBLE_LN_E_VAR, var->type);
  if (e) e->var = var;
  return e;
}

nimble_ln_expr *nimble_ln_shape(nimble_ln_arena *arena, nimble_ln_param *param, int axis) {
  if (!param) return NULL;
  if (axis < 0 || axis >= param->rank) {
    nimble_ln_arena_fail(arena, "shape(%s, %d): axis outside rank %d", param->name, axis,
                         param->rank);
    return NULL;
  }
  nimble_ln_expr *e = new_expr(arena, NIMBLE_LN_E_SHAPE, NIMBLE_LN_I64);
  if (e) {
    e->param = param;
    e->axis = axis;
  }
  return e;
}

nimble_ln_expr *nimble_ln_load(nimble_ln_arena *arena, nimble_ln_param *param, nimble_ln_expr *index) {
  if (!param || !index) return NULL;
  if (index->type != NIMBLE_LN_I64) {
    nimble_ln_arena_fail(arena, "load %s[...]: index has type %s, expected i64", param->name,
                         nimble_ln_type_name(index->type));
    return NULL;
  }
  nimble_ln_expr *e = new_expr(arena, NIMBLE_LN_E_LOAD, param->dtype);
  if (e) {
    e->param = param;
    e->a = index;
  }
  return e;
}

nimble_ln_expr *nimble_ln_unary(nimble_ln_arena *arena, nimble_ln_op_t op, nimble_ln_expr *a) {
  if (!a) return NULL;
  if (!op_is_unary(op)) {
    nimble_ln_arena_fail(arena, "'%s' is not a unary operator", nimble_ln_op_name(op));
    return NULL;
  }
  int ok;
  int numeric = nimble_ln_type_is_float(a->type) || nimble_ln_type_is_int(a->type);
  switch (op) {
  case NIMBLE_LN_NEG:
  case NIMBLE_LN_ABS: ok = numeric; break;
  case NIMBLE_LN_NOT: ok = a->type == NIMBLE_LN_BOOL; break;
  default: ok = nimble_ln_type_is_float(a->type); break;
  }
  if (!ok) {
    nimble_ln_arena_fail(arena, "unary '%s' does not apply to %s", nimble_ln_op_name(op),
                         nimble_ln_type_name(a->type));
    return NULL;
  }
  nimble_ln_expr *e = new_expr(arena, NIMBLE_LN_E_UNARY, a->type);
  if (e) {
    e->op = op;
    e->a = a;
  }
  return e;
}

nimble_ln_expr *nimble_ln_binary(nimble_ln_arena *arena, nimble_ln_op_t op, nimble_ln_expr *a,
                                 nimble_ln_expr *b) {
  if (!a || !b) return NULL;
  if (op_is_unary(op)) {
    nimble_ln_arena_fail(arena, "'%s' is not a binary operator", nimble_ln_op_name(op));
    return NULL;
  }
  if (a->type != b->type) {
    nimble_ln_arena_fail(arena, "binary '%s' mixes %s and %s", nimble_ln_op_name(op),
                         nimble_ln_type_name(a->type), nimble_ln_type_name(b->type));
    return NULL;
  }
  nimble_ln_type_t result = a->type;
  int ok = 1;
  if (op >= NIMBLE_LN_LT && op <= NIMBLE_LN_NE) {
    ok = a->type != NIMBLE_LN_BOOL || op == NIMBLE_LN_EQ || op == NIMBLE_LN_NE;
    result = NIMBLE_LN_BOOL;
  } else if (op == NIMBLE_LN_AND || op == NIMBLE_LN_OR) {
    ok = a->type == NIMBLE_LN_BOOL;
  } else if (op == NIMBLE_LN_POW || op == NIMBLE_LN_MAXNUM) {
    ok = nimble_ln_type_is_float(a->type);
  } else if (op == NIMBLE_LN_SHL || op == NIMBLE_LN_SHR) {
    ok = nimble_ln_type_is_int(a->type);
  } else {
    ok = nimble_ln_type_is_float(a->type) || nimble_ln_type_is_int(a->type);
  }
  if (!ok) {
    nimble_ln_arena_fail(arena, "binary '%s' does not apply to %s", nimble_ln_op_name(op),
                         nimble_ln_type_name(a->type));
    return NULL;
  }
  nimble_ln_expr *e = new_expr(arena, NIMBLE_LN_E_BINARY, result);
  if (e) {
    e->op = op;
    e->a = a;
    e->b = b;
  }
  return e;
}

static nimble_ln_expr *ternary(nimble_ln_arena *arena, nimble_ln_expr_kind_t kind, nimble_ln_type_t type,
                               nimble_ln_expr *a, nimble_ln_expr *b, nimble_ln_expr *c) {
  nimble_ln_expr *e = new_expr(arena, kind, type);
  if (e) {
    e->a = a;
    e->b = b;
    e->c = c;
  }
  return e;
}

nimble_ln_expr *nimble_ln_fma(nimble_ln_arena *arena, nimble_ln_expr *a, nimble_ln_expr *b, nimble_ln_expr *c) {
  if (!a || !b || !c) return NULL;
  if (a->type != b->type || a->type != c->type || (a->type != NIMBLE_LN_F32 && a->type != NIMBLE_LN_F64)) {
    nimble_ln_arena_fail(arena, "fma(%s, %s, %s): needs three f32 or three f64 operands", nimble_ln_type_name(a->type),
                         nimble_ln_type_name(b->type), nimble_ln_type_name(c->type));
    return NULL;
  }
  return ternary(arena, NIMBLE_LN_E_FMA, a->type, a, b, c);
}

nimble_ln_expr *nimble_ln_select(nimble_ln_arena *arena, nimble_ln_expr *cond, nimble_ln_expr *a,
                                 nimble_ln_expr *b) {
  if (!cond || !a || !b) return NULL;
  if (cond->type != NIMBLE_LN_BOOL || a->type != b->type) {
    nimble_ln_arena_fail(arena, "select(%s, %s, %s): needs a bool condition and equal arm types",
                         nimble_ln_type_name(cond->type), nimble_ln_type_name(a->type),
                         nimble_ln_type_name(b->type));
    return NULL;
  }
  return ternary(arena, NIMBLE_LN_E_SELECT, a->type, cond, a, b);
}

nimble_ln_expr *nimble_ln_cast(nimble_ln_arena *arena, nimble_ln_type_t type, nimble_ln_expr *a) {
  if (!a) return NULL;
  if (a->type == type) return a;
  if ((unsigned)type >= NIMBLE_LN_TYPE_COUNT) {
    nimble_ln_arena_fail(arena, "cast to unknown type %d", (int)type);
    return NULL;
  }
  nimble_ln_expr *e = new_expr(arena, NIMBLE_LN_E_CAST, type);
  if (e) e->a = a;
  return e;
}

nimble_ln_expr *nimble_ln_has_sgemm(nimble_ln_arena *arena) {
  return new_expr(arena, NIMBLE_LN_E_HAS_SGEMM, NIMBLE_LN_BOOL);
}

nimble_ln_expr *nimble_ln_has_conv3x3(nimble_ln_arena *arena) {
  return new_expr(arena, NIMBLE_LN_E_HAS_CONV3X3, NIMBLE_LN_BOOL);
}

nimble_ln_expr *nimble_ln_has_sgemm_epilogue(nimble_ln_arena *arena) {
  return new_expr(arena, NIMBLE_LN_E_HAS_SGEMM_EPILOGUE, NIMBLE_LN_BOOL);
}

nimble_ln_expr *nimble_ln_num_threads(nimble_ln_arena *arena) {
  return new_expr(arena, NIMBLE_LN_E_NUM_THREADS, NIMBLE_LN_I64);
}

nimble_ln_expr *nimble_ln_extent_product(nimble_ln_arena *arena, nimble_ln_param *param, int from,
                                         int to) {
  nimble_ln_expr *p = NULL;
  for (int a = from; a < to; a++) {
    nimble_ln_expr *s = nimble_ln_shape(arena, param, a);
    p = p ? nimble_ln_binary(arena, NIMBLE_LN_MUL, p, s) : s;
    if (!p) return NULL;
  }
  return p ? p : nimble_ln_i64(arena, 1);
}

nimble_ln_expr *nimble_ln_flat_index(nimble_ln_arena *arena, nimble_ln_param *param,
                                     nimble_ln_expr *const *idx) {
  if (!param) return NULL;
  if (param->rank == 0) return nimble_ln_i64(arena, 0);
  nimble_ln_expr *e = idx[0];
  for (int a = 1; a < param->rank; a++) {
    e = nimble_ln_binary(arena, NIMBLE_LN_ADD,
                         nimble_ln_binary(arena, NIMBLE_LN_MUL, e, nimble_ln_shape(arena, param, a)),
                         idx[a]);
  }
  return e;
}

static nimble_ln_stmt *new_stmt(nimble_ln_arena *arena, nimble_ln_stmt_kind_t kind) {
  nimble_ln_stmt *s = nimble_ln_arena_alloc(arena, sizeof *s);
  if (s) s->kind = kind;
  return s;
}

nimble_ln_stmt *nimble_ln_for(nimble_ln_arena *arena, nimble_ln_var *var, nimble_ln_expr *begin,
                              nimble_ln_expr *end, nimble_ln_loop_kind_t kind, int factor,
                              nimble_ln_stmt *body) {
  if (!var || !begin || !end || !body) return NULL;
  if (var->type != NIMBLE_LN_I64 || begin->type != NIMBLE_LN_I64 || end->type != NIMBLE_LN_I64) {
    nimble_ln_arena_fail(arena, "loop '%s': variable and bounds must be i64", var->name);
    return NULL;
  }
  if ((kind == NIMBLE_LN_VECTORIZED || kind == NIMBLE_LN_UNROLLED) && (factor < 1 || factor > 64)) {
    nimble_ln_arena_fail(arena, "loop '%s': factor %d outside [1, 64]", var->name, factor);
    return NULL;
  }
  nimble_ln_stmt *s = new_stmt(arena, NIMBLE_LN_S_FOR);
  if (!s) return NULL;
  s->var = var;
  s->begin = begin;
  s->end = end;
  s->loop_kind = kind;
  s->factor = (kind == NIMBLE_LN_VECTORIZED || kind == NIMBLE_LN_UNROLLED) ? factor : 0;
  s->body = body;
  return s;
}

nimble_ln_stmt *nimble_ln_let(nimble_ln_arena *arena, nimble_ln_var *var, nimble_ln_expr *value,
                              nimble_ln_stmt *body) {
  if (!var || !value || !body) return NULL;
  if (var->type != value->type) {
    nimble_ln_arena_fail(arena, "let %s: %s bound to a %s value", var->name,
                         nimble_ln_type_name(var->type), nimble_ln_type_name(value->type));
    return NULL;
  }
  nimble_ln_stmt *s = new_stmt(arena, NIMBLE_LN_S_LET);
  if (!s) return NULL;
  s->var = var;
  s->value = value;
  s->body = body;
  return s;
}

nimble_ln_stmt *nimble_ln_decl(nimble_ln_arena *arena, nimble_ln_var *var, nimble_ln_expr *init,
                               nimble_ln_stmt *body) {
  nimble_ln_stmt *s = nimble_ln_let(arena, var, init, body);
  if (!s) return NULL;
  s->kind = NIMBLE_LN_S_DECL;
  var->mutable_ = 1;
  return s;
}

nimble_ln_stmt *nimble_ln_assign(nimble_ln_arena *arena, nimble_ln_var *var, nimble_ln_expr *value) {
  if (!var || !value) return NULL;
  if (var->type != value->type) {
    nimble_ln_arena_fail(arena, "%s = ...: %s assigned a %s value", var->name,
                         nimble_ln_type_name(var->type), nimble_ln_type_name(value->type));
    return NULL;
  }
  nimble_ln_stmt *s = new_stmt(arena, NIMBLE_LN_S_ASSIGN);
  if (!s) return NULL;
  s->var = var;
  s->value = value;
  return s;
}

nimble_ln_stmt *nimble_ln_store(nimble_ln_arena *arena, nimble_ln_param *param,
                                nimble_ln_expr *index, nimble_ln_expr *value) {
  if (!param || !index || !value) return NULL;
  if (!param->is_output) {
    nimble_ln_arena_fail(arena, "store to '%s', which is an input", param->name);
    return NULL;
  }
  /* A bool value stored into a u8 tensor is written as 0 or 1. */
  int value_ok = value->type == param->dtype ||
                 (param->dtype == NIMBLE_LN_U8 && value->type == NIMBLE_LN_BOOL);
  if (index->type != NIMBLE_LN_I64 || !value_ok) {
    nimble_ln_arena_fail(arena, "store %s[%s] = %s: expected an i64 index and a %s value",
                         param->name, nimble_ln_type_name(index->type),
                         nimble_ln_type_name(value->type), nimble_ln_type_name(param->dtype));
    return NULL;
  }
  nimble_ln_stmt *s = new_stmt(arena, NIMBLE_LN_S_STORE);
  if (!s) return NULL;
  s->param = param;
  s->index = index;
  s->value = value;
  return s;
}

nimble_ln_stmt *nimble_ln_if(nimble_ln_arena *arena, nimble_ln_expr *cond, nimble_ln_stmt *then_,
                             nimble_ln_stmt *else_) {
  if (!cond || !then_) return NULL;
  if (cond->type != NIMBLE_LN_BOOL) {
    nimble_ln_arena_fail(arena, "if: condition has type %s, expected bool",
                         nimble_ln_type_name(cond->type));
    return NULL;
  }
  nimble_ln_stmt *s = new_stmt(arena, NIMBLE_LN_S_IF);
  if (!s) return NULL;
  s->value = cond;
  s->body = then_;
  s->else_ = else_;
  return s;
}

nimble_ln_stmt *nimble_ln_check(nimble_ln_arena *arena, nimble_ln_expr *cond, const char *message) {
  if (!cond) return NULL;
  if (cond->type != NIMBLE_LN_BOOL) {
    nimble_ln_arena_fail(arena, "check: condition has type %s, expected bool",
                         nimble_ln_type_name(cond->type));
    return NULL;
  }
  nimble_ln_stmt *s = new_stmt(arena, NIMBLE_LN_S_CHECK);
  if (!s) return NULL;
  s->value = cond;
  s->message = nimble_ln_arena_strdup(arena, message);
  return s;
}

nimble_ln_stmt *nimble_ln_seq(nimble_ln_arena *arena, nimble_ln_stmt *const *stmts, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!stmts[i]) return NULL;
  nimble_ln_stmt *s = new_stmt(arena, NIMBLE_LN_S_SEQ);
  if (!s) return NULL;
  if (n) {
    s->stmts = nimble_ln_arena_alloc(arena, n * sizeof *s->stmts);
    if (!s->stmts) return NULL;
    memcpy(s->stmts, stmts, n * sizeof *s->stmts);
  }
  s->n_stmts = n;
  return s;
}

nimble_ln_stmt *nimble_ln_seq2(nimble_ln_arena *arena, nimble_ln_stmt *a, nimble_ln_stmt *b) {
  nimble_ln_stmt *both[2] = {a, b};
  return nimble_ln_seq(arena, both, 2);
}

/* The checks the runtime calls (sgemm, conv3x3) share, failing the arena
 * with `what`'s name: every size and offset present and i64 (a missing
 * one is an earlier failure, already recorded); two f32 inputs and an f32
 * output; the epilogue's parameters f32 with i64 offsets, and a residual's
 * i64 leading dimension. */
static bool call_sizes_ok(nimble_ln_arena *arena, const char *what, const nimble_ln_expr *const *ints, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!ints[i]) return false;
    if (ints[i]->type != NIMBLE_LN_I64) {
      nimble_ln_arena_fail(arena, "%s: size and offset expressions must be i64", what);
      return false;
    }
  }
  return true;
}

static bool call_operands_ok(nimble_ln_arena *arena, const char *what, const nimble_ln_param *in0,
                             const nimble_ln_param *in1, const nimble_ln_param *out, const char *names) {
  if (!in0 || !in1 || !out) return false;
  if (in0->dtype != NIMBLE_LN_F32 || in1->dtype != NIMBLE_LN_F32 || out->dtype != NIMBLE_LN_F32 || !out->is_output) {
    nimble_ln_arena_fail(arena, "%s: %s", what, names);
    return false;
  }
  return true;
}

static bool call_epilogue_ok(nimble_ln_arena *arena, const char *what, const nimble_ln_param *const *ps,
                             const nimble_ln_expr *const *os, int n, const nimble_ln_param *residual,
                             const nimble_ln_expr *ldr) {
  for (int i = 0; i < n; i++)
    if (ps[i] && (ps[i]->dtype != NIMBLE_LN_F32 || !os[i] || os[i]->type != NIMBLE_LN_I64)) {
      nimble_ln_arena_fail(arena, "%s: the epilogue's biases and residual must be f32 with i64 offsets", what);
      return false;
    }
  if (residual && (!ldr || ldr->type != NIMBLE_LN_I64)) {
    nimble_ln_arena_fail(arena, "%s: the epilogue's residual needs an i64 leading dimension", what);
    return false;
  }
  return true;
}

nimble_ln_stmt *nimble_ln_sgemm(nimble_ln_arena *arena, const nimble_ln_sgemm_desc_t *d) {
  const nimble_ln_expr *ints[] = {d->m, d->n, d->k, d->a_offset, d->b_offset, d->c_offset,
                                  d->lda, d->ldb, d->ldc};
  if (!call_sizes_ok(arena, "sgemm", ints, sizeof ints / sizeof ints[0]) ||
      !call_operands_ok(arena, "sgemm", d->a, d->b, d->c, "A, B and C must be f32 and C an output"))
    return NULL;
  const nimble_ln_param *ps[3] = {d->row_bias, d->col_bias, d->residual};
  const nimble_ln_expr *os[3] = {d->row_bias_offset, d->col_bias_offset, d->residual_offset};
  if (d->epilogue && !call_epilogue_ok(arena, "sgemm", ps, os, 3, d->residual, d->ldr)) return NULL;
  nimble_ln_stmt *s = new_stmt(arena, NIMBLE_LN_S_SGEMM);
  if (s) s->sgemm = *d;
  return s;
}

nimble_ln_stmt *nimble_ln_conv3x3(nimble_ln_arena *arena, const nimble_ln_conv3x3_desc_t *d) {
  const nimble_ln_expr *ints[] = {d->x_offset, d->w_offset, d->y_offset, d->c, d->h,     d->width,
                                  d->k,        d->pad_t,    d->pad_l,    d->oh, d->ow};
  const nimble_ln_param *ps[2] = {d->row_bias, d->residual};
  const nimble_ln_expr *os[2] = {d->row_bias_offset, d->residual_offset};
  if (!call_sizes_ok(arena, "conv3x3", ints, sizeof ints / sizeof ints[0]) ||
      !call_operands_ok(arena, "conv3x3", d->x, d->w, d->y, "x, w and y must be f32 and y an output") ||
      !call_epilogue_ok(arena, "conv3x3", ps, os, 2, d->residual, d->ldr))
    return NULL;
  nimble_ln_stmt *s = new_stmt(arena, NIMBLE_LN_S_CONV3X3);
  if (s) s->conv3x3 = *d;
  return s;
}

nimble_ln_stmt *nimble_ln_masked_tail(nimble_ln_stmt *s) {
  if (s && s->kind == NIMBLE_LN_S_FOR && s->loop_kind == NIMBLE_LN_VECTORIZED) s->masked_tail = true;
  return s;
}

nimble_ln_stmt *nimble_ln_no_unroll(nimble_ln_stmt *s) {
  if (!s) return NULL;
  if (s->kind == NIMBLE_LN_S_SEQ) {
    for (size_t i = 0; i < s->n_stmts; i++) nimble_ln_no_unroll(s->stmts[i]);
  } else if (s->kind == NIMBLE_LN_S_FOR) {
    s->no_unroll = true;
    if (s->body && (s->body->kind == NIMBLE_LN_S_FOR || s->body->kind == NIMBLE_LN_S_SEQ)) nimble_ln_no_unroll(s->body);
  }
  return s;
}

static bool expr_transcendental(const nimble_ln_expr *e) {
  if (!e) return false;
  if (e->kind == NIMBLE_LN_E_UNARY && (e->op == NIMBLE_LN_EXP || e->op == NIMBLE_LN_TANH ||
                                       e->op == NIMBLE_LN_SIGMOID || e->op == NIMBLE_LN_ERF))
    return true;
  return expr_transcendental(e->a) || expr_transcendental(e->b) || expr_transcendental(e->c);
}

/* Whether s, inside a vectorized loop when `vec`, evaluates one there. */
static bool stmt_vector_transcendental(const nimble_ln_stmt *s, bool vec) {
  if (!s) return false;
  if (s->kind == NIMBLE_LN_S_FOR && s->loop_kind == NIMBLE_LN_VECTORIZED) vec = true;
  if (vec && (expr_transcendental(s->value) || expr_transcendental(s->index))) return true;
  if (stmt_vector_transcendental(s->body, vec) || stmt_vector_transcendental(s->else_, vec)) return true;
  for (size_t i = 0; i < s->n_stmts; i++)
    if (stmt_vector_transcendental(s->stmts[i], vec)) return true;
  return false;
}

bool nimble_ln_kernel_vector_transcendental(const nimble_ln_kernel *k) {
  return k && stmt_vector_transcendental(k->body, false);
}

static bool stmt_vectorized(const nimble_ln_stmt *s) {
  if (!s) return false;
  if (s->kind == NIMBLE_LN_S_FOR && s->loop_kind == NIMBLE_LN_VECTORIZED) return true;
  if (stmt_vectorized(s->body) || stmt_vectorized(s->else_)) return true;
  for (size_t i = 0; i < s->n_stmts; i++)
    if (stmt_vectorized(s->stmts[i])) return true;
  return false;
}

bool nimble_ln_kernel_vectorized(const nimble_ln_kernel *k) { return k && stmt_vectorized(k->body); }

/* The variables declared inside the vectorized loop being walked: one
 * per lane, so assigning them is no reduction. */
typedef struct lane_decl {
  const nimble_ln_var *var;
  const struct lane_decl *up;
} lane_decl;

/* Whether s, inside a vectorized loop when `vec`, assigns a variable
 * declared outside that loop: an accumulator carried across iterations,
 * whose lanes' partial results are combined at the loop's end (the
 * vectorizer reorders a forced loop's reduction). */
static bool stmt_vector_reduction(const nimble_ln_stmt *s, bool vec, const lane_decl *decls) {
  if (!s) return false;
  if (s->kind == NIMBLE_LN_S_FOR && s->loop_kind == NIMBLE_LN_VECTORIZED) vec = true;
  if (vec && s->kind == NIMBLE_LN_S_ASSIGN) {
    const lane_decl *d = decls;
    while (d && d->var != s->var) d = d->up;
    if (!d) return true;
  }
  lane_decl here = {s->var, decls};
  const lane_decl *inner = vec && s->kind == NIMBLE_LN_S_DECL ? &here : decls;
  if (stmt_vector_reduction(s->body, vec, inner) || stmt_vector_reduction(s->else_, vec, decls)) return true;
  for (size_t i = 0; i < s->n_stmts; i++)
    if (stmt_vector_reduction(s->stmts[i], vec, decls)) return true;
  return false;
}

bool nimble_ln_kernel_lane_exact(const nimble_ln_kernel *k) { return k && !stmt_vector_reduction(k->body, false, NULL); }

static int stmt_set_interleave(nimble_ln_stmt *s, int n) {
  if (!s) return 0;
  if (s->kind == NIMBLE_LN_S_FOR && s->loop_kind == NIMBLE_LN_VECTORIZED) {
    if (stmt_vector_reduction(s, false, NULL)) return 0;
    s->interleave = n;
    return 1;
  }
  int set = stmt_set_interleave(s->body, n) + stmt_set_interleave(s->else_, n);
  for (size_t i = 0; i < s->n_stmts; i++) set += stmt_set_interleave(s->stmts[i], n);
  return set;
}

int nimble_ln_kernel_set_interleave(nimble_ln_kernel *k, int n) { return k ? stmt_set_interleave(k->body, n) : 0; }
