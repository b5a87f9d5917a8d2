/* The on-disk layout of an executable (docs/executable.md is the prose
 * description). All integers are little-endian. */
#ifndef NIMBLE_RUNTIME_FORMAT_H
#define NIMBLE_RUNTIME_FORMAT_H

#include <stdint.h>

/* PNG-style magic: a high byte and CR LF / SUB / LF catch text-mode damage. */
#define NIMBLE_FILE_MAGIC "\x89NMB\r\n\x1a\n"
#define NIMBLE_FILE_MAGIC_LEN 8
#define NIMBLE_FILE_HEADER_SIZE 24     /* magic, version, count, file size */
#define NIMBLE_SECTION_ENTRY_SIZE 24   /* kind, reserved, offset, size */
#define NIMBLE_MAX_SECTIONS 16

/* Every part (a section of the file, or a blob in the store) begins with
 * this header, so a part is self-describing on its own. */
#define NIMBLE_PART_MAGIC "NMBP"
#define NIMBLE_PART_HEADER_SIZE 16     /* magic, kind, version, reserved */

/* Sections, constant data and kernel blobs start at multiples of this, so
 * a mapped file gives aligned tensors. */
#define NIMBLE_SECTION_ALIGN 64u

#define NIMBLE_MAX_STRING 4096u
#define NIMBLE_MAX_FUNCTIONS (1u << 20)
#define NIMBLE_MAX_INSTRUCTIONS (1u << 24)
#define NIMBLE_MAX_OPERANDS 65535u

/* dtypes the runtime accepts: int, uint, float, bfloat, complex of 8 to 128
 * bits in 1 to 64 lanes. */
static inline int nimble_dtype_valid(uint64_t code, uint64_t bits, uint64_t lanes) {
  int code_ok = code == 0 || code == 1 || code == 2 || code == 4 || code == 5;
  int bits_ok = bits == 8 || bits == 16 || bits == 32 || bits == 64 || bits == 128;
  return code_ok && bits_ok && lanes >= 1 && lanes <= 64;
}
#endif
