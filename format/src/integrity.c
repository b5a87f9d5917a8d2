/* The digests that cover every byte of an executable (docs/executable.md,
 * "Integrity"): each part ends with the digest of the bytes before it
 * (SHA-256 over 1 MiB chunks, format/src/part_digest.c), and a `.nimble`
 * file's header carries the SHA-256 of the header and section table; the
 * loader requires the bytes between sections to be zero. The hashing is
 * base's SHA-256 (SHA-NI / ARMv8 where the CPU has them). */
#include <stdlib.h>
#include <string.h>

#include "format/byte_reader.h"
#include "format/layout.h"
#include "nimble/digest.h"

void nimble_part_seal(uint8_t *data, size_t size) {
  nimble_part_digest(data, size - NIMBLE_PART_DIGEST_SIZE, data + size - NIMBLE_PART_DIGEST_SIZE);
}

nimble_status_t nimble_part_digest_check(const uint8_t *data, size_t size, size_t base, const char *what) {
  if (size < NIMBLE_PART_HEADER_SIZE + NIMBLE_PART_DIGEST_SIZE)
    return nimble_status_make(NIMBLE_DATA_LOSS,
                              "%s (offset %zu, %zu bytes): truncated: a part needs at least %d bytes "
                              "(its header and its digest)",
                              what, base, size, NIMBLE_PART_HEADER_SIZE + NIMBLE_PART_DIGEST_SIZE);
  nimble_digest_t got, want;
  nimble_part_digest(data, size - NIMBLE_PART_DIGEST_SIZE, got.bytes);
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
  uint8_t *consts = NULL, *list = NULL;
  size_t consts_len = 0, list_len = 0;
  for (uint32_t i = 0; i < count; i++) {
    const uint8_t *e = data + NIMBLE_FILE_HEADER_SIZE + (size_t)i * NIMBLE_SECTION_ENTRY_SIZE;
    uint64_t off = nimble_get_u64(e + 8), len = nimble_get_u64(e + 16);
    if (off >= NIMBLE_FILE_HEADER_SIZE + (uint64_t)count * NIMBLE_SECTION_ENTRY_SIZE && off <= size &&
        len <= size - off && len >= NIMBLE_PART_DIGEST_SIZE) {
      nimble_part_seal(data + off, (size_t)len);
      if (nimble_get_u32(e) == NIMBLE_PART_CONSTANTS) consts = data + off, consts_len = (size_t)len;
      if (nimble_get_u32(e) == NIMBLE_PART_CHUNK_DIGESTS) list = data + off, list_len = (size_t)len;
    }
  }
  /* The chunk list (and the table's digest after it) is a digest too:
   * rewritten from the constants when its place fits them (and resealed),
   * so that a changed weight or table still loads. */
  if (consts && list) {
    size_t chunks = nimble_part_chunk_count(consts_len - NIMBLE_PART_DIGEST_SIZE);
    size_t at = NIMBLE_PART_HEADER_SIZE + NIMBLE_CHUNK_DIGESTS_BODY_HEADER;
    int has_table = (nimble_get_u32(list + at - 12) & NIMBLE_CHUNK_DIGESTS_HAS_TABLE) != 0;
    size_t want = at + 32 * chunks + (has_table ? NIMBLE_CHUNK_DIGESTS_TABLE_SIZE : 0) + NIMBLE_PART_DIGEST_SIZE;
    if (list_len == want && nimble_get_u64(list + at - 8) == chunks) {
      nimble_part_chunk_digests(consts, consts_len - NIMBLE_PART_DIGEST_SIZE, list + at);
      uint8_t *table = list + at + 32 * chunks;
      uint64_t table_size = has_table ? nimble_get_u64(table) : 0;
      if (has_table && table_size <= consts_len - NIMBLE_PART_DIGEST_SIZE) {
        nimble_digest_t d;
        nimble_digest_compute(consts, (size_t)table_size, &d);
        memcpy(table + 8, d.bytes, 32);
      }
      nimble_part_seal(list, list_len);
    }
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

/* ---- Signature parts ------------------------------------------------------ */

size_t nimble_signature_message(const uint8_t digest[32], uint8_t out[NIMBLE_SIGNATURE_MESSAGE_MAX]) {
  size_t n = strlen(NIMBLE_SIGNED_PREFIX);
  memcpy(out, NIMBLE_SIGNED_PREFIX, n);
  memcpy(out + n, digest, 32);
  return n + 32;
}

nimble_status_t nimble_signature_part_make(const uint8_t public_key[32], const uint8_t signature[64],
                                           void **part, size_t *part_size) {
  uint8_t *p = calloc(1, NIMBLE_SIGNATURE_PART_SIZE);
  if (!p) return NIMBLE_OOM_IN("signature part");
  memcpy(p, NIMBLE_PART_MAGIC, 4);
  nimble_put_u32(p + 4, NIMBLE_PART_SIGNATURE);
  nimble_put_u32(p + 8, NIMBLE_EXECUTABLE_FORMAT_VERSION);
  uint8_t *body = p + NIMBLE_PART_HEADER_SIZE;
  nimble_put_u32(body, NIMBLE_SIGNATURE_ALGORITHM_ED25519);
  memcpy(body + 8, public_key, 32);
  memcpy(body + 40, signature, 64);
  nimble_part_seal(p, NIMBLE_SIGNATURE_PART_SIZE);
  *part = p;
  *part_size = NIMBLE_SIGNATURE_PART_SIZE;
  return nimble_ok();
}

nimble_status_t nimble_signature_body_read(const void *body, size_t size, const uint8_t **public_key,
                                           const uint8_t **signature) {
  const uint8_t *b = body;
  if (!b || size != NIMBLE_SIGNATURE_BODY_SIZE || nimble_get_u32(b) != NIMBLE_SIGNATURE_ALGORITHM_ED25519)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "signature: not an Ed25519 signature part body");
  *public_key = b + 8;
  *signature = b + 40;
  return nimble_ok();
}

nimble_status_t nimble_image_put_part(const void *image, size_t size, nimble_part_kind_t kind, const void *part,
                                      size_t part_size, void **out, size_t *out_size) {
  const uint8_t *img = image;
  if (!img || !part || !out || !out_size || size < NIMBLE_FILE_HEADER_SIZE)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "put_part: NULL argument or not an image");
  uint32_t count = nimble_get_u32(img + 12);
  if (count > NIMBLE_MAX_SECTIONS || NIMBLE_FILE_HEADER_SIZE + (size_t)count * NIMBLE_SECTION_ENTRY_SIZE > size)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "put_part: a section table outside the image");
  const uint8_t *datas[NIMBLE_MAX_SECTIONS + 1];
  size_t sizes[NIMBLE_MAX_SECTIONS + 1];
  uint32_t kinds[NIMBLE_MAX_SECTIONS + 1], n = 0;
  for (uint32_t i = 0; i < count; i++) {
    const uint8_t *e = img + NIMBLE_FILE_HEADER_SIZE + (size_t)i * NIMBLE_SECTION_ENTRY_SIZE;
    uint64_t off = nimble_get_u64(e + 8), len = nimble_get_u64(e + 16);
    if (off > size || len > size - off)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "put_part: section %u lies outside the image", i);
    if (nimble_get_u32(e) == (uint32_t)kind) continue; /* replaced */
    kinds[n] = nimble_get_u32(e);
    datas[n] = img + off;
    sizes[n++] = (size_t)len;
  }
  if (n == NIMBLE_MAX_SECTIONS)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "put_part: the image has %d sections already",
                              NIMBLE_MAX_SECTIONS);
  kinds[n] = (uint32_t)kind;
  datas[n] = part;
  sizes[n++] = part_size;
  size_t total = NIMBLE_FILE_HEADER_SIZE + (size_t)n * NIMBLE_SECTION_ENTRY_SIZE;
  for (uint32_t i = 0; i < n; i++) {
    total = (total + NIMBLE_SECTION_ALIGN - 1) / NIMBLE_SECTION_ALIGN * NIMBLE_SECTION_ALIGN;
    if (sizes[i] > SIZE_MAX / 2 - total)
      return nimble_status_make(NIMBLE_OUT_OF_RANGE, "put_part: the image would be too large");
    total += sizes[i];
  }
  uint8_t *o = calloc(1, total);
  if (!o) return NIMBLE_OOM_IN("put_part");
  memcpy(o, img, NIMBLE_FILE_DIGEST_OFFSET);
  nimble_put_u32(o + 12, n);
  nimble_put_u64(o + 16, total);
  size_t at = NIMBLE_FILE_HEADER_SIZE + (size_t)n * NIMBLE_SECTION_ENTRY_SIZE;
  for (uint32_t i = 0; i < n; i++) {
    at = (at + NIMBLE_SECTION_ALIGN - 1) / NIMBLE_SECTION_ALIGN * NIMBLE_SECTION_ALIGN;
    uint8_t *e = o + NIMBLE_FILE_HEADER_SIZE + (size_t)i * NIMBLE_SECTION_ENTRY_SIZE;
    nimble_put_u32(e, kinds[i]);
    nimble_put_u64(e + 8, at);
    nimble_put_u64(e + 16, sizes[i]);
    memcpy(o + at, datas[i], sizes[i]);
    at += sizes[i];
  }
  nimble_image_header_digest(o, n, o + NIMBLE_FILE_DIGEST_OFFSET);
  *out = o;
  *out_size = total;
  return nimble_ok();
}
