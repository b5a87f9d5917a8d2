/* The bytecode part: the kernel table and the functions. Every instruction
 * is checked here, once, so the interpreter can trust operand counts and
 * indices: registers within the function's file, functions, kernels and
 * constants within their tables (constants are checked by the loader once
 * the pool is known), jumps inside the function. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/byte_reader.h"
#include "executable/executable.h"
#include "format/layout.h"
#include "nimble/bytecode.h"

typedef struct check_ctx {
  const nimble_bytecode_t *code;
  const nimble_function_t *fn;
  uint32_t fn_index;
  uint32_t pc;
  const int64_t *o;
  uint32_t n;
} check_ctx;

static nimble_status_t bad(const check_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static nimble_status_t bad(const check_ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nimble_status_t s = nimble_status_makev(NIMBLE_INVALID_ARGUMENT, fmt, ap);
  va_end(ap);
  return nimble_status_annotate(s, "bytecode: function %u '%s' pc %u (%s)", c->fn_index, c->fn->name, c->pc,
                                nimble_opcode_name(c->fn->instructions[c->pc].op));
}

static nimble_status_t want_count(const check_ctx *c, uint32_t exact) {
  if (c->n != exact) {
    return bad(c, "expects %u operands, has %u", exact, c->n);
  }
  return nimble_ok();
}

static nimble_status_t want_at_least(const check_ctx *c, uint32_t min) {
  if (c->n < min) {
    return bad(c, "expects at least %u operands, has %u", min, c->n);
  }
  return nimble_ok();
}

static nimble_status_t reg(const check_ctx *c, uint32_t k) {
  int64_t r = c->o[k];
  if (r < 0 || r >= (int64_t)c->fn->num_registers) {
    nimble_status_t s = bad(c, "operand %u: register %lld is out of range", k, (long long)r);
    return nimble_status_annotate(s, "(function has %u registers)", c->fn->num_registers);
  }
  return nimble_ok();
}

static nimble_status_t func(const check_ctx *c, uint32_t k) {
  int64_t f = c->o[k];
  if (f < 0 || f >= (int64_t)c->code->num_functions)
    return bad(c, "function index %lld is out of range", (long long)f);
  return nimble_ok();
}

static nimble_status_t dtype(const check_ctx *c, uint32_t k) {
  if (!nimble_dtype_valid((uint64_t)c->o[k], (uint64_t)c->o[k + 1], (uint64_t)c->o[k + 2]) ||
      c->o[k] < 0 || c->o[k + 1] < 0 || c->o[k + 2] < 0)
    return bad(c, "dtype (code %lld) is not supported", (long long)(c->o[k]));
  return nimble_ok();
}

static nimble_status_t jump(const check_ctx *c, uint32_t k) {
  int64_t off = c->o[k];
  int64_t target = (int64_t)c->pc + off;
  if (off < -(int64_t)NIMBLE_MAX_INSTRUCTIONS || off > (int64_t)NIMBLE_MAX_INSTRUCTIONS ||
      target < 0 || target >= (int64_t)c->fn->num_instructions)
    return bad(c, "jump offset %lld leaves the function", (long long)off);
  return nimble_ok();
}

/* One operand of kind `kind` (a schema letter, nimble/bytecode.h) at k. */
static nimble_status_t check_operand(const check_ctx *c, char kind, uint32_t k) {
  int64_t v = c->o[k];
  switch (kind) {
    case 'r': return reg(c, k);
    case 'f': return func(c, k);
    case 'k':
      if (v < 0 || v >= (int64_t)c->code->num_kernels)
        return bad(c, "kernel index %lld is out of range", (long long)v);
      return nimble_ok();
    case 'c':
      /* the pool's size is checked by the loader once the pool is read */
      if (v < 0 || v > UINT32_MAX) return bad(c, "constant index %lld is out of range", (long long)v);
      return nimble_ok();
    case 'i': return nimble_ok();
    case 'j': return jump(c, k);
    case 'a':
      if (v < 1 || v > NIMBLE_MAX_ALIGNMENT || (v & (v - 1)) != 0)
        return bad(c, "alignment %lld is not a power of two up to 4096", (long long)v);
      return nimble_ok();
    case 'D':
      if ((v != kDLCPU && v != kDLCUDA) || c->o[k + 1] < 0 || c->o[k + 1] > 1024)
        return bad(c, "device type %lld is not supported", (long long)v);
      return nimble_ok();
    case 'C': return dtype(c, k);
    case 'N': case 'B': case 'L': return nimble_ok(); /* checked with their D or C */
    case 'g':
      if (v < INT32_MIN || v > INT32_MAX) return bad(c, "tag %lld does not fit 32 bits", (long long)v);
      return nimble_ok();
    case 'x':
      if (v < 0 || v > UINT32_MAX) return bad(c, "field index %lld is out of range", (long long)v);
      return nimble_ok();
    case 'o':
      if (v < 0 || v > (int64_t)(c->n - k - 1))
        return bad(c, "output count %lld exceeds the argument count", (long long)v);
      return nimble_ok();
    case 'e':
      if (v < 0) return bad(c, "dim %lld is negative", (long long)v);
      return nimble_ok();
    default: return bad(c, "unknown operand kind '%c' in the instruction table", kind);
  }
}

/* The rules the schema cannot say: callee parameter counts and limits. */
static nimble_status_t check_counts(const check_ctx *c, uint16_t op) {
  const nimble_function_t *callee;
  switch (op) {
    case NIMBLE_OP_INVOKE:
      callee = &c->code->functions[c->o[1]];
      if (c->n - 2 != callee->num_params) {
        return bad(c, "function '%s' takes %u arguments, given %u", callee->name, callee->num_params,
                   c->n - 2);
      }
      return nimble_ok();
    case NIMBLE_OP_ALLOC_CLOSURE:
      callee = &c->code->functions[c->o[1]];
      if (c->n - 2 > callee->num_params) {
        return bad(c, "function '%s' takes %u arguments, %u captured", callee->name, callee->num_params,
                   c->n - 2);
      }
      return nimble_ok();
    case NIMBLE_OP_INVOKE_PACKED:
      if (c->n - 2 > NIMBLE_MAX_KERNEL_ARGS)
        return bad(c, "argument count %lld exceeds the limit", (long long)(c->n - 2));
      return nimble_ok();
    case NIMBLE_OP_ALLOC_TENSOR:
      if (c->n - 6 > NIMBLE_MAX_NDIM) return bad(c, "ndim %lld exceeds 32", (long long)(c->n - 6));
      return nimble_ok();
    default: return nimble_ok();
  }
}

/* Checks an instruction against its row of the table: the operand count,
 * each fixed operand by its kind, the counts, then the tail. */
static nimble_status_t check_instruction(const check_ctx *c) {
  uint16_t op = c->fn->instructions[c->pc].op;
  char tail;
  const char *schema = nimble_opcode_schema(op, &tail, NULL);
  if (!schema) return bad(c, "unknown opcode %lld", (long long)op);
  uint32_t fixed = (uint32_t)strlen(schema);
  NIMBLE_RETURN_IF_ERROR(tail ? want_at_least(c, fixed) : want_count(c, fixed));
  for (uint32_t k = 0; k < fixed; k++) NIMBLE_RETURN_IF_ERROR(check_operand(c, schema[k], k));
  NIMBLE_RETURN_IF_ERROR(check_counts(c, op));
  for (uint32_t k = fixed; k < c->n; k++) NIMBLE_RETURN_IF_ERROR(check_operand(c, tail, k));
  return nimble_ok();
}

static int is_terminator(uint16_t op) {
  return op == NIMBLE_OP_RET || op == NIMBLE_OP_GOTO || op == NIMBLE_OP_IF || op == NIMBLE_OP_FATAL;
}

static nimble_status_t parse_function(nimble_reader_t *r, uint32_t index, nimble_function_t *fn) {
  NIMBLE_RETURN_IF_ERROR(nimble_reader_string(r, "function name", &fn->name));
  size_t at = r->pos;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(r, "parameter count", &fn->num_params));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(r, "register count", &fn->num_registers));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(r, "instruction count", &fn->num_instructions));
  if (fn->num_registers > NIMBLE_MAX_REGISTERS || fn->num_params > fn->num_registers) {
    r->pos = at;
    return nimble_reader_error(r, NIMBLE_INVALID_ARGUMENT,
                               "function %u '%s': %u parameters and %u registers (at most %d, and "
                               "no fewer registers than parameters)",
                               index, fn->name, fn->num_params, fn->num_registers,
                               NIMBLE_MAX_REGISTERS);
  }
  if (fn->num_instructions == 0 || fn->num_instructions > NIMBLE_MAX_INSTRUCTIONS) {
    r->pos = at;
    return nimble_reader_error(r, NIMBLE_INVALID_ARGUMENT, "function %u '%s': %u instructions",
                               index, fn->name, fn->num_instructions);
  }
  NIMBLE_RETURN_IF_ERROR(nimble_reader_check_count(r, "instruction count", fn->num_instructions, 4));
  fn->instructions = calloc(fn->num_instructions, sizeof *fn->instructions);
  if (!fn->instructions) return NIMBLE_OOM();
  /* Operands are read in two passes: first count them (bounded by the bytes
   * left, 8 each), then store them in one array. */
  size_t start = r->pos;
  uint64_t total = 0;
  for (uint32_t i = 0; i < fn->num_instructions; i++) {
    uint16_t op, n;
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u16(r, "opcode", &op));
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u16(r, "operand count", &n));
    if (op >= NIMBLE_OP_COUNT_) {
      r->pos -= 4;
      return nimble_reader_error(r, NIMBLE_INVALID_ARGUMENT, "function %u '%s' pc %u: unknown opcode %u",
                                 index, fn->name, i, op);
    }
    NIMBLE_RETURN_IF_ERROR(nimble_reader_check_count(r, "operands", n, 8));
    fn->instructions[i].op = op;
    fn->instructions[i].num_operands = n;
    fn->instructions[i].first = (uint32_t)total;
    total += n;
    r->pos += (size_t)n * 8;
  }
  fn->operands = calloc(total ? total : 1, sizeof *fn->operands);
  if (!fn->operands) return NIMBLE_OOM();
  r->pos = start;
  for (uint32_t i = 0; i < fn->num_instructions; i++) {
    r->pos += 4;
    for (uint32_t k = 0; k < fn->instructions[i].num_operands; k++)
      NIMBLE_RETURN_IF_ERROR(nimble_reader_i64(r, "operand", &fn->operands[fn->instructions[i].first + k]));
  }
  if (!is_terminator(fn->instructions[fn->num_instructions - 1].op))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "bytecode: function %u '%s' does not end in Ret, Goto, If or Fatal "
                              "(it would run off its end)",
                              index, fn->name);
  return nimble_ok();
}

nimble_status_t nimble_bytecode_parse(const uint8_t *data, size_t size, size_t base,
                                      nimble_bytecode_t *c) {
  memset(c, 0, sizeof *c);
  NIMBLE_RETURN_IF_ERROR(
      nimble_part_header_check(data, size, base, NIMBLE_PART_BYTECODE, "bytecode", NULL));
  nimble_reader_t r;
  nimble_reader_init(&r, data, size, "bytecode");
  r.base = base;
  r.pos = NIMBLE_PART_HEADER_SIZE;
  uint32_t nk;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "kernel count", &nk));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_check_count(&r, "kernel count", nk, 8));
  c->kernels = calloc(nk ? nk : 1, sizeof *c->kernels);
  if (!c->kernels) return NIMBLE_OOM();
  for (uint32_t i = 0; i < nk; i++) {
    int32_t dev;
    c->num_kernels = i + 1;
    NIMBLE_RETURN_IF_ERROR(nimble_reader_string(&r, "kernel symbol", &c->kernels[i].symbol));
    if (c->kernels[i].symbol[0] == '\0')
      return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "kernel %u has an empty symbol", i);
    NIMBLE_RETURN_IF_ERROR(nimble_reader_i32(&r, "kernel device", &dev));
    if (dev != kDLCPU && dev != kDLCUDA) {
      r.pos -= 4;
      return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "kernel %u '%s': unsupported device type %d",
                                 i, c->kernels[i].symbol, dev);
    }
    c->kernels[i].device = (DLDeviceType)dev;
  }
  c->num_kernels = nk;
  uint32_t nf;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "function count", &nf));
  if (nf == 0 || nf > NIMBLE_MAX_FUNCTIONS) {
    r.pos -= 4;
    return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "function count %u (1 to %u allowed)", nf,
                               NIMBLE_MAX_FUNCTIONS);
  }
  NIMBLE_RETURN_IF_ERROR(nimble_reader_check_count(&r, "function count", nf, 20));
  c->functions = calloc(nf, sizeof *c->functions);
  if (!c->functions) return NIMBLE_OOM();
  for (uint32_t i = 0; i < nf; i++) {
    c->num_functions = i + 1;
    NIMBLE_RETURN_IF_ERROR(parse_function(&r, i, &c->functions[i]));
  }
  NIMBLE_RETURN_IF_ERROR(nimble_reader_expect_end(&r));
  /* Operands are checked once every function's parameter count is known,
   * since Invoke and AllocClosure check against their callee. */
  for (uint32_t i = 0; i < nf; i++) {
    const nimble_function_t *fn = &c->functions[i];
    for (uint32_t pc = 0; pc < fn->num_instructions; pc++) {
      check_ctx ctx = {c, fn, i, pc, fn->operands + fn->instructions[pc].first,
                       fn->instructions[pc].num_operands};
      NIMBLE_RETURN_IF_ERROR(check_instruction(&ctx));
      if (fn->instructions[pc].op == NIMBLE_OP_INVOKE_PACKED &&
          fn->instructions[pc].num_operands - 2u > c->max_kernel_args)
        c->max_kernel_args = fn->instructions[pc].num_operands - 2u;
    }
  }
  return nimble_ok();
}

void nimble_bytecode_deinit(nimble_bytecode_t *c) {
  for (uint32_t i = 0; i < c->num_kernels; i++) free(c->kernels[i].symbol);
  free(c->kernels);
  for (uint32_t i = 0; i < c->num_functions; i++) {
    free(c->functions[i].name);
    free(c->functions[i].instructions);
    free(c->functions[i].operands);
  }
  free(c->functions);
  memset(c, 0, sizeof *c);
}
