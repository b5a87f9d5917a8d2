/* The executable format, as the compiler writes it and the runtime reads it
 * (docs/executable.md): its version, the parts an executable is made of and
 * their media types, and the entry signatures its metadata declares.
 *
 * Part of nimble_format (format/), the small library both sides link: the
 * instruction set (nimble/bytecode.h), the kernel ABI (nimble/kernel_abi.h)
 * and the writer (nimble/executable_builder.h). The runtime's loader reads
 * what the builder writes; the compiler links the format without the
 * runtime.
 */
#ifndef NIMBLE_EXECUTABLE_FORMAT_H
#define NIMBLE_EXECUTABLE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "nimble/export.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The executable format version this build reads and writes. A loader
 * refuses any other version with NIMBLE_UNIMPLEMENTED. Version 2 added the
 * digests (docs/executable.md, "Integrity"). */
#define NIMBLE_EXECUTABLE_FORMAT_VERSION 2u

/* ---- Executable parts ---------------------------------------------------- */

/* The parts of an executable. In a `.nimble` file they are sections; in the
 * artifact store each is one blob (layer) of the OCI manifest, so a constant
 * pool shared by several targets is stored once. */
typedef enum nimble_part_kind {
  NIMBLE_PART_METADATA = 1,    /* target, producer, entries and signatures */
  NIMBLE_PART_BYTECODE = 2,    /* functions, instructions, kernel names */
  NIMBLE_PART_CONSTANTS = 3,   /* the constant pool (weights) */
  NIMBLE_PART_KERNELS_CPU = 4, /* an ELF shared object for the host CPU */
  NIMBLE_PART_KERNELS_CUDA = 5,/* a PTX module (issue 6) */
  NIMBLE_PART_SIGNATURE = 6,   /* an Ed25519 signature of the others (`nimble compile --sign`) */
  NIMBLE_PART_CHUNK_DIGESTS = 7, /* the constants' chunk SHA-256s, for verification on first use */
} nimble_part_kind_t;

/* The OCI media type of a part kind, as the artifact manifest names it
 * (docs/artifacts.md has the table: "application/vnd.nimble.executable.
 * metadata.v1", "application/vnd.nimble.bytecode.v1", ...); NULL for an
 * unknown kind. CPU kernels carry their CPU's triple, so this gives this
 * host's ("application/vnd.nimble.kernels.x86_64-linux-gnu.v1+elf"), NULL on
 * a CPU without one. Static string. */
NIMBLE_API const char *nimble_part_media_type(nimble_part_kind_t kind);

/* The same for an executable built for `triple` (nimble_executable_target(),
 * e.g. "aarch64-linux-gnu"): only CPU kernels depend on it; NULL for an
 * unknown kind or a triple the artifact manifest has no kernels type for.
 * Static string. */
NIMBLE_API const char *nimble_part_media_type_for_target(nimble_part_kind_t kind, const char *triple);

/* The part kind named by an OCI media type; 0 when unknown. Every
 * "application/vnd.nimble.kernels.<triple>.v1+elf" is CPU kernels, whatever
 * the triple (see nimble_part_kernels_triple for which CPU). */
NIMBLE_API nimble_part_kind_t nimble_part_kind_from_media_type(const char *media_type);

/* For a CPU kernels media type, points *triple (may be NULL) into
 * media_type at its triple and returns the triple's length (not
 * NUL-terminated there); 0 for any other media type. */
NIMBLE_API size_t nimble_part_kernels_triple(const char *media_type, const char **triple);

/* ---- Signature parts (docs/executable.md, "Signatures") -------------------
 * The layout of a signature part; the Ed25519 itself is the sign library's
 * (nimble/signature.h), used by nimble_fetch (nimble/fetch.h). */

#define NIMBLE_SIGNATURE_MESSAGE_MAX 64

/* The bytes an executable's signature signs, for its executable digest
 * (nimble_executable_digest's 32 bytes): writes them to `out` and returns
 * their count. */
NIMBLE_API size_t nimble_signature_message(const uint8_t digest[32], uint8_t out[NIMBLE_SIGNATURE_MESSAGE_MAX]);

/* A signature part (header, Ed25519 algorithm, key, signature, digest).
 * *part is malloc'ed. */
NIMBLE_API nimble_status_t nimble_signature_part_make(const uint8_t public_key[32], const uint8_t signature[64],
                                                      void **part, size_t *part_size);

/* Points into a signature part's body, as a loader check receives it:
 * INVALID_ARGUMENT unless it is an Ed25519 body of the right size. */
NIMBLE_API nimble_status_t nimble_signature_body_read(const void *body, size_t size, const uint8_t **public_key,
                                                      const uint8_t **signature);

/* A new `.nimble` image (malloc'ed): `image`'s sections with the part of
 * `kind` replaced by (or completed with) `part`, laid out afresh, its
 * header digest written. `image` must be one the loader accepts (its table
 * is trusted, bounds aside). */
NIMBLE_API nimble_status_t nimble_image_put_part(const void *image, size_t size, nimble_part_kind_t kind,
                                                 const void *part, size_t part_size, void **out,
                                                 size_t *out_size);

/* ---- Signature -----------------------------------------------------------
 * An entry's inputs and outputs, as the metadata part declares them. */

/* A dimension of a declared shape: a constant (symbol NULL, value >= 0), a
 * named symbolic dimension (symbol "seq", value -1; equal symbols in one
 * entry must bind to equal sizes), or Any (symbol "", value -1). */
typedef struct nimble_sig_dim_t {
  int64_t value;
  const char *symbol;
} nimble_sig_dim_t;

/* The ndim of an entry output whose rank is known only at run time (an
 * ONNX If whose branches give different ranks): no dims, only the dtype is
 * checked. Inputs always declare their rank. */
#define NIMBLE_NDIM_ANY (-1)

typedef struct nimble_tensor_info_t {
  const char *name;
  DLDataType dtype;
  DLDevice device;
  int32_t ndim;                 /* or NIMBLE_NDIM_ANY (outputs only) */
  const nimble_sig_dim_t *dims; /* ndim entries (none for NIMBLE_NDIM_ANY) */
} nimble_tensor_info_t;

typedef struct nimble_entry_info_t {
  const char *name;
  uint32_t num_inputs;
  uint32_t num_outputs;
  const nimble_tensor_info_t *inputs;
  const nimble_tensor_info_t *outputs;
} nimble_entry_info_t;

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_EXECUTABLE_FORMAT_H */
