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

#include "nimble/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Operand layouts (dst and src are registers):
 *   MOVE              dst, src
 *   RET               src                      return src to the caller
 *   INVOKE            dst, func, args...       args fill the callee's params
 *   INVOKE_CLOSURE    dst, closure, args...    params = captured, then args
 *   INVOKE_PACKED     kernel, num_outputs, args...
 *                     args are tensor registers: inputs, then the
 *                     num_outputs preallocated outputs
 *   ALLOC_STORAGE     dst, size, alignment, device_type, device_id,
 *                     hint_code, hint_bits, hint_lanes
 *                     size: register holding an integer scalar (bytes)
 *   ALLOC_TENSOR      dst, storage, offset, code, bits, lanes, dims...
 *                     offset: register holding an integer scalar (bytes);
 *                     the shape is the constant dims (ndim = their count)
 *   ALLOC_TENSOR_REG  dst, storage, offset, shape, code, bits, lanes
 *                     shape: register holding a 1-D int64 tensor
 *   ALLOC_ADT         dst, tag, fields...
 *   ALLOC_CLOSURE     dst, func, captured...
 *   GET_FIELD         dst, object, index
 *   GET_TAG           dst, object                dst: int64 scalar tensor
 *   IF                test, target, true_offset, false_offset
 *                     both registers hold integer scalars; the pc moves by
 *                     true_offset when they are equal, else false_offset
 *   GOTO              offset                     pc += offset
 *   LOAD_CONST        dst, constant_index
 *   LOAD_CONSTI       dst, value                 dst: int64 scalar tensor
 *   SHAPE_OF          dst, tensor                dst: 1-D int64 CPU tensor
 *   RESHAPE_TENSOR    dst, tensor, shape         a view with a new shape
 *   DEVICE_COPY       dst, src, dst_device_type, dst_device_id
 *   KILL_REGISTER     reg                        drops the register's value
 *   FATAL             (none)                     stops with an error
 */
typedef enum nimble_opcode {
  NIMBLE_OP_MOVE = 0,
  NIMBLE_OP_RET = 1,
  NIMBLE_OP_INVOKE = 2,
  NIMBLE_OP_INVOKE_CLOSURE = 3,
  NIMBLE_OP_INVOKE_PACKED = 4,
  NIMBLE_OP_ALLOC_STORAGE = 5,
  NIMBLE_OP_ALLOC_TENSOR = 6,
  NIMBLE_OP_ALLOC_TENSOR_REG = 7,
  NIMBLE_OP_ALLOC_ADT = 8,
  NIMBLE_OP_ALLOC_CLOSURE = 9,
  NIMBLE_OP_GET_FIELD = 10,
  NIMBLE_OP_GET_TAG = 11,
  NIMBLE_OP_IF = 12,
  NIMBLE_OP_GOTO = 13,
  NIMBLE_OP_LOAD_CONST = 14,
  NIMBLE_OP_LOAD_CONSTI = 15,
  NIMBLE_OP_SHAPE_OF = 16,
  NIMBLE_OP_RESHAPE_TENSOR = 17,
  NIMBLE_OP_DEVICE_COPY = 18,
  NIMBLE_OP_KILL_REGISTER = 19,
  NIMBLE_OP_FATAL = 20,
  NIMBLE_OP_COUNT_ = 21
} nimble_opcode_t;

/* The opcode's name ("InvokePacked"); "unknown" outside the set. Static. */
NIMBLE_API const char *nimble_opcode_name(int opcode);

/* Limits the loader enforces. */
#define NIMBLE_MAX_NDIM 32
#define NIMBLE_MAX_REGISTERS 65536
#define NIMBLE_MAX_KERNEL_ARGS 1024
#define NIMBLE_MAX_ALIGNMENT 4096

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_BYTECODE_H */
