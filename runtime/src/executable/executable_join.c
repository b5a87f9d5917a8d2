/* Parts to one `.nimble` file image: what `nimble fetch -o FILE.nimble`
 * writes from the store's layers. The layout is docs/executable.md's: the
 * file header, the section table, then each part as a section at a
 * multiple of 64 bytes, and the header digest over the header and table
 * (each part carries its own digest, docs/executable.md "Integrity").
 * Nothing inside a part is interpreted beyond its header; the loader
 * validates the rest, digests first, when the file is loaded. */
#include <stdlib.h>
#include <string.h>

#include "format/byte_reader.h"
#include "format/layout.h"
#include "nimble/runtime.h"

nimble_status_t nimble_executable_join_parts(const nimble_executable_part_t *parts, size_t num_parts,
                                             void **data, size_t *size) {
  *data = NULL;
  *size = 0;
  if (num_parts == 0 || num_parts > NIMBLE_MAX_SECTIONS)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "join: %zu parts (1 to %d)", num_parts, NIMBLE_MAX_SECTIONS);
  uint32_t version = 0;
  unsigned seen = 0;
  uint64_t total = NIMBLE_FILE_HEADER_SIZE + (uint64_t)num_parts * NIMBLE_SECTION_ENTRY_SIZE;
  for (size_t i = 0; i < num_parts; i++) {
    const uint8_t *p = parts[i].data;
    if (!p || parts[i].size < NIMBLE_PART_HEADER_SIZE || memcmp(p, NIMBLE_PART_MAGIC, 4) != 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "join: part %zu does not start with a part header (NMBP)", i);
    uint32_t kind = nimble_get_u32(p + 4), v = nimble_get_u32(p + 8);
    if (kind != (uint32_t)parts[i].kind)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "join: part %zu is of kind %u, its header says %u", i,
                                (unsigned)parts[i].kind, kind);
    if (kind < NIMBLE_PART_METADATA || kind > NIMBLE_PART_CHUNK_DIGESTS)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "join: part %zu has unknown kind %u", i, kind);
    if (seen & (1u << kind))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "join: two parts of kind %u", kind);
    seen |= 1u << kind;
    if (i == 0) version = v;
    else if (v != version)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "join: part %zu is format version %u, part 0 version %u", i,
                                v, version);
    total = (total + NIMBLE_SECTION_ALIGN - 1) / NIMBLE_SECTION_ALIGN * NIMBLE_SECTION_ALIGN;
    if (parts[i].size > (UINT64_C(1) << 46) || total + parts[i].size > (UINT64_C(1) << 46))
      return nimble_status_make(NIMBLE_OUT_OF_RANGE, "join: the parts add up to more than 64 TiB");
    total += parts[i].size;
  }
  if (total > SIZE_MAX) return nimble_status_make(NIMBLE_OUT_OF_RANGE, "join: %llu bytes do not fit in memory",
                                                  (unsigned long long)total);
  uint8_t *out = calloc(1, (size_t)total);
  if (!out) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "join: out of memory for %llu bytes",
                                      (unsigned long long)total);
  memcpy(out, NIMBLE_FILE_MAGIC, NIMBLE_FILE_MAGIC_LEN);
  nimble_put_u32(out + 8, version);
  nimble_put_u32(out + 12, (uint32_t)num_parts);
  nimble_put_u64(out + 16, total);
  uint64_t at = NIMBLE_FILE_HEADER_SIZE + (uint64_t)num_parts * NIMBLE_SECTION_ENTRY_SIZE;
  for (size_t i = 0; i < num_parts; i++) {
    at = (at + NIMBLE_SECTION_ALIGN - 1) / NIMBLE_SECTION_ALIGN * NIMBLE_SECTION_ALIGN;
    uint8_t *e = out + NIMBLE_FILE_HEADER_SIZE + i * NIMBLE_SECTION_ENTRY_SIZE;
    nimble_put_u32(e, (uint32_t)parts[i].kind);
    nimble_put_u32(e + 4, 0);
    nimble_put_u64(e + 8, at);
    nimble_put_u64(e + 16, parts[i].size);
    memcpy(out + at, parts[i].data, parts[i].size);
    at += parts[i].size;
  }
  /* The parts carry their own digests; the header's covers the new table. */
  nimble_image_header_digest(out, (uint32_t)num_parts, out + NIMBLE_FILE_DIGEST_OFFSET);
  *data = out;
  *size = (size_t)total;
  return nimble_ok();
}
