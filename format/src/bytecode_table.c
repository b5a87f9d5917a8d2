/* The names and operand schemas of the instruction set, made from the one
 * table in nimble/bytecode.h. */
#include <stddef.h>

#include "nimble/bytecode.h"

typedef struct opcode_row {
  const char *name, *schema, *operand_names;
  char tail;
} opcode_row;

static const opcode_row kOpcodes[NIMBLE_OP_COUNT_] = {
#define ROW_(e, code, name, schema, tail, names) [code] = {name, schema, names, tail},
    NIMBLE_BYTECODE_TABLE(ROW_)
#undef ROW_
};

const char *nimble_opcode_name(int opcode) {
  if (opcode < 0 || opcode >= NIMBLE_OP_COUNT_) return "unknown";
  return kOpcodes[opcode].name;
}

const char *nimble_opcode_schema(int opcode, char *tail, const char **operand_names) {
  if (opcode < 0 || opcode >= NIMBLE_OP_COUNT_) return NULL;
  if (tail) *tail = kOpcodes[opcode].tail;
  if (operand_names) *operand_names = kOpcodes[opcode].operand_names;
  return kOpcodes[opcode].schema;
}
