/* A bounds-checked little-endian reader over a byte range. Every read
 * checks what is left first, so no input can make the loader read outside
 * the bytes it was given; errors name the offset and what was being read.
 * Internal to nimble_format and the runtime's loader. */
#ifndef NIMBLE_FORMAT_BYTE_READER_H
#define NIMBLE_FORMAT_BYTE_READER_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/status.h"

typedef struct nimble_reader_t {
  const uint8_t *data; /* borrowed */
  size_t size;
  size_t pos;
  size_t base;         /* added to pos in messages: the part's file offset */
  const char *what;    /* the part's name, for messages */
} nimble_reader_t;

void nimble_reader_init(nimble_reader_t *r, const void *data, size_t size, const char *what);

/* "<what> at offset N: <message>", code DATA_LOSS when the data ends early
 * or INVALID_ARGUMENT otherwise. */
nimble_status_t nimble_reader_error(const nimble_reader_t *r, nimble_status_code_t code,
                                    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

nimble_status_t nimble_reader_u8(nimble_reader_t *r, const char *field, uint8_t *out);
nimble_status_t nimble_reader_u16(nimble_reader_t *r, const char *field, uint16_t *out);
nimble_status_t nimble_reader_u32(nimble_reader_t *r, const char *field, uint32_t *out);
nimble_status_t nimble_reader_i32(nimble_reader_t *r, const char *field, int32_t *out);
nimble_status_t nimble_reader_u64(nimble_reader_t *r, const char *field, uint64_t *out);
nimble_status_t nimble_reader_i64(nimble_reader_t *r, const char *field, int64_t *out);
/* A u32 length and that many bytes, at most NIMBLE_MAX_STRING, no NUL
 * inside. *out is a NUL-terminated heap copy the caller frees. */
nimble_status_t nimble_reader_string(nimble_reader_t *r, const char *field, char **out);
/* Checks that `count` records of at least `min_record` bytes can still
 * follow, before the caller allocates room for them. */
nimble_status_t nimble_reader_check_count(nimble_reader_t *r, const char *field, uint64_t count,
                                          uint64_t min_record);
/* Checks that nothing is left. */
nimble_status_t nimble_reader_expect_end(nimble_reader_t *r);

/* Little-endian stores for the writer side. */
static inline void nimble_put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void nimble_put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void nimble_put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t nimble_get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t nimble_get_u64(const uint8_t *p) {
  return (uint64_t)nimble_get_u32(p) | (uint64_t)nimble_get_u32(p + 4) << 32;
}

#endif
