/* Bounds-checked reading of the executable's little-endian fields. */
#include "format/byte_reader.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/layout.h"

void nimble_reader_init(nimble_reader_t *r, const void *data, size_t size, const char *what) {
  r->data = data;
  r->size = size;
  r->pos = 0;
  r->base = 0;
  r->what = what;
}

nimble_status_t nimble_reader_error(const nimble_reader_t *r, nimble_status_code_t code,
                                    const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nimble_status_t s = nimble_status_makev(code, fmt, ap);
  va_end(ap);
  return nimble_status_annotate(s, "%s at offset %zu", r->what, r->base + r->pos);
}

static nimble_status_t need(nimble_reader_t *r, const char *field, size_t n) {
  if (r->size - r->pos < n)
    return nimble_reader_error(r, NIMBLE_DATA_LOSS,
                               "truncated: %s needs %zu bytes, %zu left", field, n,
                               r->size - r->pos);
  return nimble_ok();
}

nimble_status_t nimble_reader_u8(nimble_reader_t *r, const char *field, uint8_t *out) {
  NIMBLE_RETURN_IF_ERROR(need(r, field, 1));
  *out = r->data[r->pos++];
  return nimble_ok();
}

nimble_status_t nimble_reader_u16(nimble_reader_t *r, const char *field, uint16_t *out) {
  NIMBLE_RETURN_IF_ERROR(need(r, field, 2));
  *out = (uint16_t)(r->data[r->pos] | r->data[r->pos + 1] << 8);
  r->pos += 2;
  return nimble_ok();
}

nimble_status_t nimble_reader_u32(nimble_reader_t *r, const char *field, uint32_t *out) {
  NIMBLE_RETURN_IF_ERROR(need(r, field, 4));
  *out = nimble_get_u32(r->data + r->pos);
  r->pos += 4;
  return nimble_ok();
}

nimble_status_t nimble_reader_i32(nimble_reader_t *r, const char *field, int32_t *out) {
  uint32_t v;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(r, field, &v));
  memcpy(out, &v, sizeof v);
  return nimble_ok();
}

nimble_status_t nimble_reader_u64(nimble_reader_t *r, const char *field, uint64_t *out) {
  NIMBLE_RETURN_IF_ERROR(need(r, field, 8));
  *out = nimble_get_u64(r->data + r->pos);
  r->pos += 8;
  return nimble_ok();
}

nimble_status_t nimble_reader_i64(nimble_reader_t *r, const char *field, int64_t *out) {
  uint64_t v;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u64(r, field, &v));
  memcpy(out, &v, sizeof v);
  return nimble_ok();
}

nimble_status_t nimble_reader_string(nimble_reader_t *r, const char *field, char **out) {
  uint32_t len;
  size_t at = r->pos;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(r, field, &len));
  if (len > NIMBLE_MAX_STRING) {
    r->pos = at;
    return nimble_reader_error(r, NIMBLE_INVALID_ARGUMENT, "%s: length %u exceeds the limit of %u",
                               field, len, NIMBLE_MAX_STRING);
  }
  NIMBLE_RETURN_IF_ERROR(need(r, field, len));
  if (memchr(r->data + r->pos, 0, len) != NULL)
    return nimble_reader_error(r, NIMBLE_INVALID_ARGUMENT, "%s contains a NUL byte", field);
  char *s = malloc((size_t)len + 1);
  if (!s) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory reading %s", field);
  memcpy(s, r->data + r->pos, len);
  s[len] = '\0';
  r->pos += len;
  *out = s;
  return nimble_ok();
}

nimble_status_t nimble_reader_check_count(nimble_reader_t *r, const char *field, uint64_t count,
                                          uint64_t min_record) {
  uint64_t left = r->size - r->pos;
  if (min_record != 0 && count > left / min_record)
    return nimble_reader_error(r, NIMBLE_DATA_LOSS,
                               "%s: count %llu cannot fit in the %llu bytes left", field,
                               (unsigned long long)count, (unsigned long long)left);
  return nimble_ok();
}

nimble_status_t nimble_reader_expect_end(nimble_reader_t *r) {
  if (r->pos != r->size)
    return nimble_reader_error(r, NIMBLE_INVALID_ARGUMENT, "%zu unexpected trailing bytes",
                               r->size - r->pos);
  return nimble_ok();
}
