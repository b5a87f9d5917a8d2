/* Names of parts and opcodes, and the header every part starts with. */
#include <string.h>

#include "executable/byte_reader.h"
#include "executable/executable.h"
#include "executable/format.h"
#include "nimble/bytecode.h"

static const struct {
  nimble_part_kind_t kind;
  const char *name;
  const char *media_type;
} kParts[] = {
    {NIMBLE_PART_METADATA, "metadata", "application/vnd.nimble.executable.metadata.v1"},
    {NIMBLE_PART_BYTECODE, "bytecode", "application/vnd.nimble.executable.bytecode.v1"},
    {NIMBLE_PART_CONSTANTS, "constants", "application/vnd.nimble.executable.constants.v1"},
    {NIMBLE_PART_KERNELS_CPU, "cpu kernels", "application/vnd.nimble.executable.kernels.elf.v1"},
    {NIMBLE_PART_KERNELS_CUDA, "cuda kernels", "application/vnd.nimble.executable.kernels.ptx.v1"},
};

const char *nimble_part_media_type(nimble_part_kind_t kind) {
  for (size_t i = 0; i < sizeof kParts / sizeof kParts[0]; i++)
    if (kParts[i].kind == kind) return kParts[i].media_type;
  return NULL;
}

nimble_part_kind_t nimble_part_kind_from_media_type(const char *media_type) {
  if (!media_type) return (nimble_part_kind_t)0;
  for (size_t i = 0; i < sizeof kParts / sizeof kParts[0]; i++)
    if (strcmp(kParts[i].media_type, media_type) == 0) return kParts[i].kind;
  return (nimble_part_kind_t)0;
}

const char *nimble_part_name(nimble_part_kind_t kind) {
  for (size_t i = 0; i < sizeof kParts / sizeof kParts[0]; i++)
    if (kParts[i].kind == kind) return kParts[i].name;
  return "unknown part";
}

static const char *const kOpNames[NIMBLE_OP_COUNT_] = {
    "Move",        "Ret",           "Invoke",       "InvokeClosure", "InvokePacked",
    "AllocStorage", "AllocTensor",  "AllocTensorReg", "AllocADT",    "AllocClosure",
    "GetField",    "GetTag",        "If",           "Goto",          "LoadConst",
    "LoadConsti",  "ShapeOf",       "ReshapeTensor", "DeviceCopy",   "KillRegister",
    "Fatal",
};

const char *nimble_opcode_name(int opcode) {
  if (opcode < 0 || opcode >= NIMBLE_OP_COUNT_) return "unknown";
  return kOpNames[opcode];
}

nimble_status_t nimble_part_header_check(const uint8_t *data, size_t size, size_t base,
                                         nimble_part_kind_t want, const char *what,
                                         uint32_t *version_out) {
  nimble_reader_t r;
  nimble_reader_init(&r, data, size, what);
  r.base = base;
  if (size < NIMBLE_PART_HEADER_SIZE)
    return nimble_reader_error(&r, NIMBLE_DATA_LOSS, "truncated: a part header needs %d bytes, %zu given",
                               NIMBLE_PART_HEADER_SIZE, size);
  if (memcmp(data, NIMBLE_PART_MAGIC, 4) != 0)
    return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "bad part magic (not a nimble part)");
  r.pos = 4;
  uint32_t kind, version, reserved;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "part kind", &kind));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "format version", &version));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "reserved", &reserved));
  if (kind != (uint32_t)want) {
    r.pos = 4;
    return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "part kind %u (%s), expected %u (%s)",
                               kind, nimble_part_name((nimble_part_kind_t)kind), (unsigned)want,
                               nimble_part_name(want));
  }
  if (version != NIMBLE_EXECUTABLE_FORMAT_VERSION) {
    r.pos = 8;
    return nimble_reader_error(&r, NIMBLE_UNIMPLEMENTED,
                               "format version %u is not supported (this runtime reads version %u)",
                               version, NIMBLE_EXECUTABLE_FORMAT_VERSION);
  }
  if (reserved != 0) {
    r.pos = 12;
    return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "reserved field is %u, expected 0", reserved);
  }
  if (version_out) *version_out = version;
  return nimble_ok();
}
