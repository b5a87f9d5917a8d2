/* The digests that cover every byte of an executable (docs/executable.md,
 * "Integrity"): each part ends with the SHA-256 of the bytes before it, and
 * a `.nimble` file's header carries the SHA-256 of the header and section
 * table; the loader requires the bytes between sections to be zero. The
 * hashing is base's SHA-256 (SHA-NI / ARMv8 where the CPU has them). */
#include <string.h>

#include "format/byte_reader.h"
#include "format/layout.h"
#include "nimble/digest.h"

void nimble_part_seal(uint8_t *data, size_t size) {
  nimble_digest_t d;
  nimble_digest_compute(data, size - NIMBLE_PART_DIGEST_SIZE, &d);
  memcpy(data + size - NIMBLE_PART_DIGEST_SIZE, d.bytes, NIMBLE_PART_DIGEST_SIZE);
}

nimble_status_t nimble_part_digest_check(const uint8_t *data, size_t size, size_t base, const char *what) {
  if (size < NIMBLE_PART_HEADER_SIZE + NIMBLE_PART_DIGEST_SIZE)
    return nimble_status_make(NIMBLE_DATA_LOSS,
                              "%s (offset %zu, %zu bytes): truncated: a part needs at least %d bytes "
                              "(its header and its digest)",
                              what, base, size, NIMBLE_PART_HEADER_SIZE + NIMBLE_PART_DIGEST_SIZE);
  nimble_digest_t got, want;
  nimble_digest_compute(data, size - NIMBLE_PART_DIGEST_SIZE, &got);
  memcpy(want.bytes, data + size - NIMBLE_PART_DIGEST_SIZE, NIMBLE_PART_DIGEST_SIZE);
  if (!nimble_digest_equal(&got, &want))
    return nimble_status_make(NIMBLE_DATA_LOSS,
                              "%s (offset %zu, %zu bytes): digest mismatch: the bytes are not the ones "
                              "the compiler wrote (corrupted or modified); refusing to load it",
                              what, base, size);
  return nimble_ok();
}

void nimble_image_header_digest(const uint8_t *data, uint32_t count, uint8_t out[32]) {
  nimble_digest_ctx_t ctx;
  nimble_digest_ctx_init(&ctx);
  nimble_digest_ctx_update(&ctx, data, NIMBLE_FILE_DIGEST_OFFSET);
  nimble_digest_ctx_update(&ctx, data + NIMBLE_FILE_HEADER_SIZE, (size_t)count * NIMBLE_SECTION_ENTRY_SIZE);
  nimble_digest_t d;
  nimble_digest_ctx_final(&ctx, &d);
  memcpy(out, d.bytes, 32);
}

void nimble_image_reseal(uint8_t *data, size_t size) {
  if (size < NIMBLE_FILE_HEADER_SIZE) return;
  uint32_t count = nimble_get_u32(data + 12);
  if (count > NIMBLE_MAX_SECTIONS || NIMBLE_FILE_HEADER_SIZE + (size_t)count * NIMBLE_SECTION_ENTRY_SIZE > size)
    return;
  for (uint32_t i = 0; i < count; i++) {
    const uint8_t *e = data + NIMBLE_FILE_HEADER_SIZE + (size_t)i * NIMBLE_SECTION_ENTRY_SIZE;
    uint64_t off = nimble_get_u64(e + 8), len = nimble_get_u64(e + 16);
    if (off >= NIMBLE_FILE_HEADER_SIZE + (uint64_t)count * NIMBLE_SECTION_ENTRY_SIZE && off <= size &&
        len <= size - off && len >= NIMBLE_PART_DIGEST_SIZE)
      nimble_part_seal(data + off, (size_t)len);
  }
  nimble_image_header_digest(data, count, data + NIMBLE_FILE_DIGEST_OFFSET);
}

void nimble_executable_digest_of(const nimble_part_kind_t *kinds, const uint8_t *const *parts,
                                 const size_t *sizes, size_t n, uint8_t out[32]) {
  nimble_digest_ctx_t ctx;
  nimble_digest_ctx_init(&ctx);
  nimble_digest_ctx_update(&ctx, NIMBLE_EXECUTABLE_DIGEST_PREFIX, strlen(NIMBLE_EXECUTABLE_DIGEST_PREFIX));
  /* Kind order, whatever order the parts come in (a file's sections, a
   * directory's files): the digest names the executable, not its layout. */
  for (uint32_t k = NIMBLE_PART_METADATA; k < NIMBLE_PART_SIGNATURE; k++)
    for (size_t i = 0; i < n; i++) {
      if ((uint32_t)kinds[i] != k) continue;
      uint8_t kb[4];
      nimble_put_u32(kb, k);
      nimble_digest_ctx_update(&ctx, kb, 4);
      nimble_digest_ctx_update(&ctx, parts[i] + sizes[i] - NIMBLE_PART_DIGEST_SIZE, NIMBLE_PART_DIGEST_SIZE);
    }
  nimble_digest_t d;
  nimble_digest_ctx_final(&ctx, &d);
  memcpy(out, d.bytes, 32);
}
