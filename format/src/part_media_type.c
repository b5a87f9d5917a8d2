/* Names and media types of parts, and the header every part starts with. */
#include <string.h>

#include "format/byte_reader.h"
#include "format/layout.h"
#include "nimble/media_type.h"

/* Media types are nimble_base's (nimble/media_type.h, docs/artifacts.md):
 * the artifact manifest's names, spelled there once. */
#if defined(__x86_64__)
#define HOST_TRIPLE "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define HOST_TRIPLE "aarch64-linux-gnu"
#else
#define HOST_TRIPLE NULL
#endif

static const struct {
  nimble_part_kind_t kind;
  const char *name;
  const char *media_type; /* NULL: depends on the CPU */
} kParts[] = {
    {NIMBLE_PART_METADATA, "metadata", NIMBLE_MEDIA_TYPE_METADATA},
    {NIMBLE_PART_BYTECODE, "bytecode", NIMBLE_MEDIA_TYPE_BYTECODE},
    {NIMBLE_PART_CONSTANTS, "constants", NIMBLE_MEDIA_TYPE_CONSTANTS},
    {NIMBLE_PART_KERNELS_CPU, "cpu kernels", NULL},
    {NIMBLE_PART_KERNELS_CUDA, "cuda kernels", NIMBLE_MEDIA_TYPE_KERNELS_NVPTX},
    {NIMBLE_PART_SIGNATURE, "signature", NULL}, /* local files only, not a store layer */
    /* Local files only: without it a load verifies the constants eagerly. */
    {NIMBLE_PART_CHUNK_DIGESTS, "chunk digests", NULL},
};

const char *nimble_part_media_type_for_target(nimble_part_kind_t kind, const char *triple) {
  if (kind != NIMBLE_PART_KERNELS_CPU) {
    for (size_t i = 0; i < sizeof kParts / sizeof kParts[0]; i++)
      if (kParts[i].kind == kind) return kParts[i].media_type;
    return NULL;
  }
  /* Only the CPUs the artifact manifest has an ELF kernels type for. */
  const char *mt = nimble_media_type_kernels(triple);
  return nimble_media_type_kernels_elf_triple(mt, NULL) ? mt : NULL;
}

const char *nimble_part_media_type(nimble_part_kind_t kind) {
  return nimble_part_media_type_for_target(kind, HOST_TRIPLE);
}

size_t nimble_part_kernels_triple(const char *media_type, const char **triple) {
  return nimble_media_type_kernels_elf_triple(media_type, triple);
}

nimble_part_kind_t nimble_part_kind_from_media_type(const char *media_type) {
  if (!media_type) return (nimble_part_kind_t)0;
  for (size_t i = 0; i < sizeof kParts / sizeof kParts[0]; i++)
    if (kParts[i].media_type && strcmp(kParts[i].media_type, media_type) == 0)
      return kParts[i].kind;
  if (nimble_part_kernels_triple(media_type, NULL)) return NIMBLE_PART_KERNELS_CPU;
  return (nimble_part_kind_t)0;
}

const char *nimble_part_name(nimble_part_kind_t kind) {
  for (size_t i = 0; i < sizeof kParts / sizeof kParts[0]; i++)
    if (kParts[i].kind == kind) return kParts[i].name;
  return "unknown part";
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
  if (version == NIMBLE_FORMAT_VERSION_UNSEALED) {
    r.pos = 8;
    return nimble_reader_error(&r, NIMBLE_UNIMPLEMENTED,
                               "format version %u has no integrity digests and is no longer loaded: "
                               "recompile it (this runtime reads version %u)",
                               version, NIMBLE_EXECUTABLE_FORMAT_VERSION);
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
