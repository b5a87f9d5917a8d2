/* The VM's instruction set: opcodes and the operands each one takes.
 *
 * An instruction is an opcode and a list of signed 64-bit operands. Register
 * operands ("r") index the current function's register file; "imm" operands
 * are constants. The VM follows the Relay VM's semantics (docs/vm.md). The
 * loader checks every operand before anything runs: counts, register,
 * function, kernel and constant indices, jump targets and dtypes.
 *
 * The code generator emits these through nimble/executable_builder.h.
 */
#ifndef NIMBLE_BYTECODE_H
#define NIMBLE_BYTECODE_H

#include <stdint.h>

#include "nimble/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The instruction set, one row per opcode: the one place it is written
 * down. From it come the opcode enum, the names, the loader's operand checks
 * (runtime/src/executable/bytecode_parse.c walks the schema), the
 * disassembler (nimble_executable_disassemble) and the arity check of
 * NIMBLE_EMIT, which the compiler's lowering uses. Only the interpreter's
 * semantics are written by hand (runtime/src/vm/vm_interpreter.c, which
 * switches over every opcode; docs/vm.md describes each).
 *
 *   X(ENUM, code, "Name", "schema", tail, "operand names")
 *
 * The schema has one letter per fixed operand:
 *   r  a register of the current function
 *   f  a function index              k  a kernel index
 *   c  a constant-pool index         i  an immediate integer
 *   j  a jump offset (pc += offset, inside the function)
 *   a  an alignment: a power of two up to NIMBLE_MAX_ALIGNMENT
 *   D  a device type (kDLCPU, kDLCUDA)   N  its device id (0..1024)
 *   C  a DLPack dtype code   B  its bits   L  its lanes (one dtype: CBL)
 *   g  an ADT tag (fits int32)       x  a field index (fits uint32)
 *   o  the output count of InvokePacked (at most its argument count)
 *   e  a tensor extent (>= 0)
 * `tail` is the kind of the operands after the fixed ones ('r' registers,
 * 'e' extents), or 0 when there are none. Rules beyond the schema, which
 * the loader also checks: Invoke passes exactly the callee's parameter
 * count, AllocClosure captures at most that many, InvokePacked takes at
 * most NIMBLE_MAX_KERNEL_ARGS arguments and AllocTensor at most
 * NIMBLE_MAX_NDIM dims. Operand names (space-separated, the tail's last;
 * a dtype's or device's later parts as NAME.bits, NAME.id) are for the
 * disassembler and docs/vm.md.
 *
 * Semantics in brief (docs/vm.md has the whole story):
 *   Invoke args fill the callee's params; InvokeClosure's callee params are
 *   the captured values, then args; InvokePacked's args are tensor
 *   registers, inputs then the `outputs` preallocated outputs;
 *   AllocStorage's size and AllocTensor's offset are registers holding an
 *   integer scalar (bytes); AllocTensorReg's shape is a 1-D int64 tensor;
 *   GetTag and LoadConsti write an int64 scalar tensor, ShapeOf a 1-D int64
 *   CPU tensor; If compares two integer scalars and moves the pc by `true`
 *   when they are equal, else by `false`; ReshapeTensor makes a view;
 *   KillRegister drops a value; Fatal stops with an error. */
#define NIMBLE_BYTECODE_TABLE(X)                                                              \
  X(MOVE, 0, "Move", "rr", 0, "dst src")                                                       \
  X(RET, 1, "Ret", "r", 0, "src")                                                              \
  X(INVOKE, 2, "Invoke", "rf", 'r', "dst func args")                                           \
  X(INVOKE_CLOSURE, 3, "InvokeClosure", "rr", 'r', "dst closure args")                         \
  X(INVOKE_PACKED, 4, "InvokePacked", "ko", 'r', "kernel outputs args")                        \
  X(ALLOC_STORAGE, 5, "AllocStorage", "rraDNCBL", 0,                                           \
    "dst size alignment device device.id hint hint.bits hint.lanes")                 \
  X(ALLOC_TENSOR, 6, "AllocTensor", "rrrCBL", 'e', "dst storage offset dtype dtype.bits dtype.lanes dims")   \
  X(ALLOC_TENSOR_REG, 7, "AllocTensorReg", "rrrrCBL", 0, "dst storage offset shape dtype dtype.bits dtype.lanes") \
  X(ALLOC_ADT, 8, "AllocADT", "rg", 'r', "dst tag fields")                                     \
  X(ALLOC_CLOSURE, 9, "AllocClosure", "rf", 'r', "dst func captured")                          \
  X(GET_FIELD, 10, "GetField", "rrx", 0, "dst object index")                                   \
  X(GET_TAG, 11, "GetTag", "rr", 0, "dst object")                                              \
  X(IF, 12, "If", "rrjj", 0, "test target true false")                                         \
  X(GOTO, 13, "Goto", "j", 0, "offset")                                                        \
  X(LOAD_CONST, 14, "LoadConst", "rc", 0, "dst constant")                                      \
  X(LOAD_CONSTI, 15, "LoadConsti", "ri", 0, "dst value")                                       \
  X(SHAPE_OF, 16, "ShapeOf", "rr", 0, "dst tensor")                                            \
  X(RESHAPE_TENSOR, 17, "ReshapeTensor", "rrr", 0, "dst tensor shape")                         \
  X(DEVICE_COPY, 18, "DeviceCopy", "rrDN", 0, "dst src device device.id")                 \
  X(KILL_REGISTER, 19, "KillRegister", "r", 0, "reg")                                          \
  X(FATAL, 20, "Fatal", "", 0, "")

typedef enum nimble_opcode {
#define NIMBLE_BC_ENUM_(e, code, name, schema, tail, names) NIMBLE_OP_##e = code,
  NIMBLE_BYTECODE_TABLE(NIMBLE_BC_ENUM_)
#undef NIMBLE_BC_ENUM_
#define NIMBLE_BC_COUNT_(e, code, name, schema, tail, names) +1
  NIMBLE_OP_COUNT_ = 0 NIMBLE_BYTECODE_TABLE(NIMBLE_BC_COUNT_)
#undef NIMBLE_BC_COUNT_
} nimble_opcode_t;

/* Per opcode: its fixed operand count (the schema's length) and whether a
 * tail may follow, as compile-time constants for NIMBLE_EMIT. */
enum {
#define NIMBLE_BC_ARITY_(e, code, name, schema, tail, names) \
  NIMBLE_OP_##e##_FIXED_ = (int)sizeof(schema) - 1, NIMBLE_OP_##e##_TAIL_ = (tail) != 0,
  NIMBLE_BYTECODE_TABLE(NIMBLE_BC_ARITY_)
#undef NIMBLE_BC_ARITY_
};

/* The opcode's name ("InvokePacked"); "unknown" outside the set. Static. */
NIMBLE_API const char *nimble_opcode_name(int opcode);

/* The opcode's schema (see above), its tail kind (0: none) and operand
 * names; NULL schema outside the set. Static strings. */
NIMBLE_API const char *nimble_opcode_schema(int opcode, char *tail, const char **operand_names);

/* Emits ENUM (MOVE, INVOKE_PACKED, ...) with the given operands through
 * `emit(ctx, opcode, operands, count)`, failing to compile when the
 * operand count does not fit the table: exactly the schema's length, or at
 * least it when a tail may follow. For code generators; tests that build
 * malformed bytecode on purpose call nimble_builder_emit directly. */
#define NIMBLE_EMIT(emit, ctx, ENUM, ...)                                                        \
  ((void)sizeof(struct {                                                                       \
     int nimble_emit_operand_count_fits_the_table                                              \
         : (NIMBLE_OP_##ENUM##_TAIL_                                                           \
                ? NIMBLE_EMIT_N_(__VA_ARGS__) >= NIMBLE_OP_##ENUM##_FIXED_                       \
                : NIMBLE_EMIT_N_(__VA_ARGS__) == NIMBLE_OP_##ENUM##_FIXED_) ? 1 : -1;           \
   }),                                                                                         \
   emit((ctx), NIMBLE_OP_##ENUM, (const int64_t[]){__VA_ARGS__}, NIMBLE_EMIT_N_(__VA_ARGS__)))
#define NIMBLE_EMIT_N_(...) (sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
/* The same for an opcode without operands (Fatal). */
#define NIMBLE_EMIT0(emit, ctx, ENUM)                                                            \
  ((void)sizeof(struct { int nimble_emit_operand_count_fits_the_table : NIMBLE_OP_##ENUM##_FIXED_ == 0 ? 1 : -1; }), \
   emit((ctx), NIMBLE_OP_##ENUM, NULL, 0))

/* Limits the loader enforces. */
#define NIMBLE_MAX_NDIM 32
#define NIMBLE_MAX_REGISTERS 65536
#define NIMBLE_MAX_KERNEL_ARGS 1024
#define NIMBLE_MAX_ALIGNMENT 4096

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_BYTECODE_H */
