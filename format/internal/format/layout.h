/* The on-disk layout of an executable (docs/executable.md is the prose
 * description). All integers are little-endian.
 *
 * Internal to nimble_format and the runtime's loader (format/internal is on
 * no other library's include path): the builder writes this layout, the
 * loader reads it. */
#ifndef NIMBLE_FORMAT_LAYOUT_H
#define NIMBLE_FORMAT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "nimble/executable_format.h"
#include "nimble/status.h"

/* PNG-style magic: a high byte and CR LF / SUB / LF catch text-mode damage. */
#define NIMBLE_FILE_MAGIC "\x89NMB\r\n\x1a\n"
#define NIMBLE_FILE_MAGIC_LEN 8
#define NIMBLE_FILE_HEADER_SIZE 56     /* magic, version, count, file size, header digest */
#define NIMBLE_FILE_DIGEST_OFFSET 24   /* the header digest: SHA-256 of bytes [0, 24) and the table */
#define NIMBLE_SECTION_ENTRY_SIZE 24   /* kind, reserved, offset, size */
#define NIMBLE_MAX_SECTIONS 16

/* Every part (a section of the file, or a blob in the store) begins with
 * this header, so a part is self-describing on its own. */
#define NIMBLE_PART_MAGIC "NMBP"
#define NIMBLE_PART_HEADER_SIZE 16     /* magic, kind, version, reserved */
/* Every part ends with the SHA-256 of its bytes before it (docs/executable.md,
 * "Integrity"). Parsers see a part without it. */
#define NIMBLE_PART_DIGEST_SIZE 32
/* The last format version without digests, refused with a word to recompile. */
#define NIMBLE_FORMAT_VERSION_UNSEALED 1u

/* The signature part (kind 6, NIMBLE_PART_SIGNATURE): after the part header,
 * u32 algorithm (1: Ed25519), u32 reserved, the 32-byte public key and the
 * 64-byte signature of NIMBLE_SIGNED_PREFIX followed by the 32-byte
 * executable digest; then the part's own digest. */
#define NIMBLE_SIGNATURE_ALGORITHM_ED25519 1u
#define NIMBLE_SIGNATURE_BODY_SIZE (8 + 32 + 64)
#define NIMBLE_SIGNATURE_PART_SIZE (NIMBLE_PART_HEADER_SIZE + NIMBLE_SIGNATURE_BODY_SIZE + NIMBLE_PART_DIGEST_SIZE)
#define NIMBLE_SIGNED_PREFIX "nimble-executable-signature-v1\n"
/* The chunk digests part (kind 7, NIMBLE_PART_CHUNK_DIGESTS): after the
 * part header, u32 covered part kind (3: constants), u32 flags, u64 chunk
 * count, then the 32-byte SHA-256 of each of that part's 1 MiB chunks
 * (NIMBLE_PART_CHUNK_SIZE), whose SHA-256 is that part's digest; with flag
 * NIMBLE_CHUNK_DIGESTS_HAS_TABLE, then u64 table size (the constants' data
 * offset) and the SHA-256 of the constants part's bytes [0, table size),
 * so that a load hashes the table alone rather than the chunk holding it;
 * then the part's own digest. The builder writes it for a constants part
 * of at least NIMBLE_CHUNK_DIGESTS_MIN_CHUNKS chunks: with one chunk there
 * is nothing to defer (the chunk holding the table is verified at load).
 * Files written before the flag (flags 0) are still read: their table's
 * chunks are hashed at load. */
#define NIMBLE_CHUNK_DIGESTS_BODY_HEADER 16
#define NIMBLE_CHUNK_DIGESTS_HAS_TABLE 1u
#define NIMBLE_CHUNK_DIGESTS_TABLE_SIZE (8 + 32)
#define NIMBLE_CHUNK_DIGESTS_MIN_CHUNKS 2
/* The executable digest: SHA-256 of this prefix, then for each part but the
 * signature, in kind order, its kind (u32) and its 32-byte digest. */
#define NIMBLE_EXECUTABLE_DIGEST_PREFIX "nimble-executable-digest-v1\n"

/* Sections, constant data and kernel blobs start at multiples of this, so
 * a mapped file gives aligned tensors. */
#define NIMBLE_SECTION_ALIGN 64u

#define NIMBLE_MAX_STRING 4096u
#define NIMBLE_MAX_FUNCTIONS (1u << 20)
#define NIMBLE_MAX_INSTRUCTIONS (1u << 24)
#define NIMBLE_MAX_OPERANDS 65535u

/* dtypes the runtime accepts: int, uint, float, bfloat, complex of 8 to 128
 * bits in 1 to 64 lanes, and bool: {kDLUInt, 1 bit, 1 lane}, stored one
 * byte (0 or 1) per element as TVM does, so that it stays apart from uint8. */
static inline int nimble_dtype_valid(uint64_t code, uint64_t bits, uint64_t lanes) {
  if (code == 1 && bits == 1 && lanes == 1) return 1;
  int code_ok = code == 0 || code == 1 || code == 2 || code == 4 || code == 5;
  int bits_ok = bits == 8 || bits == 16 || bits == 32 || bits == 64 || bits == 128;
  return code_ok && bits_ok && lanes >= 1 && lanes <= 64;
}

/* DLPack 0.8's kDLBool (the Debian header predates it): {6, 8 bits, 1 lane}
 * is accepted wherever the runtime's bool {kDLUInt, 1, 1} is expected. */
#define NIMBLE_DL_BOOL_CODE 6
static inline int nimble_dtype_is_bool(uint64_t code, uint64_t bits, uint64_t lanes) {
  return lanes == 1 && ((code == 1 && bits == 1) || (code == NIMBLE_DL_BOOL_CODE && bits == 8));
}
/* The bytes of a compact tensor of `ndim` dims `shape` and `dtype` (sub-byte
 * dtypes rounded up per element). 0 (false) when a dim is negative or the
 * size overflows or is over 2^62. */
_Bool nimble_tensor_nbytes(int32_t ndim, const int64_t *shape, DLDataType dtype, uint64_t *out);

/* A part kind's name for messages ("metadata", "cpu kernels"). */
const char *nimble_part_name(nimble_part_kind_t kind);

/* Reads a part header and checks magic, kind and version. `base` is the
 * part's offset in its file and `what` its name, for messages. */
nimble_status_t nimble_part_header_check(const uint8_t *data, size_t size, size_t base,
                                         nimble_part_kind_t want, const char *what,
                                         uint32_t *version_out);

/* ---- Integrity (format/src/integrity.c) ---------------------------------- */

/* A part's digest covers its first size - 32 bytes in chunks of this many:
 * the SHA-256 of the chunks' SHA-256s, in order (the last chunk may be
 * shorter). */
#define NIMBLE_PART_CHUNK_SIZE ((size_t)1 << 20)

/* The digest of `size` bytes as a part's trailer holds it (chunks above),
 * hashed on up to 8 threads when there are several chunks
 * (format/src/part_digest.c). */
void nimble_part_digest(const uint8_t *data, size_t size, uint8_t out[32]);

/* The number of chunks of `size` bytes (0 for 0 bytes). */
static inline size_t nimble_part_chunk_count(size_t size) {
  return (size + NIMBLE_PART_CHUNK_SIZE - 1) / NIMBLE_PART_CHUNK_SIZE;
}

/* The SHA-256 of each chunk of `size` bytes, into out (chunk count x 32
 * bytes), hashed on up to 8 threads like nimble_part_digest. */
void nimble_part_chunk_digests(const uint8_t *data, size_t size, uint8_t *out);

/* Writes a part's digest (nimble_part_digest of its first size - 32 bytes)
 * into its last 32. `size` is at least NIMBLE_PART_DIGEST_SIZE. */
void nimble_part_seal(uint8_t *data, size_t size);

/* Checks a part's digest. `base` is the part's offset in its file and `what`
 * its name for messages ("constants section", "constants part"); a mismatch
 * is NIMBLE_DATA_LOSS: "constants section (offset 4096, 12288 bytes): digest
 * mismatch: ...". */
nimble_status_t nimble_part_digest_check(const uint8_t *data, size_t size, size_t base, const char *what);

/* The header digest of an image with `count` sections (the table must lie
 * within `size`): SHA-256 of bytes [0, 24) and of the section table. */
void nimble_image_header_digest(const uint8_t *data, uint32_t count, uint8_t out[32]);

/* Recomputes the header digest and every section's digest of a `.nimble`
 * image in place, and the constants' chunk digests when the image has them,
 * as far as its header and table allow (sections outside the image or too
 * small are left alone): the builder and join use it, and
 * tests and the fuzzer use it to reach the parsers behind the digests. */
void nimble_image_reseal(uint8_t *data, size_t size);

/* The executable digest over the digests of `n` parts (kind and part
 * bytes, any order; a signature part is skipped), each at least 32 bytes. */
void nimble_executable_digest_of(const nimble_part_kind_t *kinds, const uint8_t *const *parts,
                                 const size_t *sizes, size_t n, uint8_t out[32]);

#endif /* NIMBLE_FORMAT_LAYOUT_H */
