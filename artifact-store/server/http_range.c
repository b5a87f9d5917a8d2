/* Byte ranges for blob reads and chunk uploads. */
#include "http_range.h"

#include <string.h>

/* Parses a decimal number at *p, advancing it; 0 on no digits or overflow. */
static int parse_u64(const char **p, uint64_t *out) {
  const char *s = *p;
  uint64_t v = 0;
  if (*s < '0' || *s > '9') return 0;
  while (*s >= '0' && *s <= '9') {
    unsigned d = (unsigned)(*s - '0');
    if (v > (UINT64_MAX - d) / 10) return 0;
    v = v * 10 + d;
    s++;
  }
  *p = s;
  *out = v;
  return 1;
}

static const char *skip_spaces(const char *p) {
  while (*p == ' ' || *p == '\t') p++;
  return p;
}

nimble_http_range_result nimble_http_range_parse(const char *header, uint64_t size,
                                                 uint64_t *out_start, uint64_t *out_length) {
  if (!header) return NIMBLE_RANGE_WHOLE;
  const char *p = skip_spaces(header);
  if (strncmp(p, "bytes", 5) != 0) return NIMBLE_RANGE_WHOLE;
  p = skip_spaces(p + 5);
  if (*p != '=') return NIMBLE_RANGE_WHOLE;
  p = skip_spaces(p + 1);
  uint64_t first = 0, last = 0;
  int has_first = parse_u64(&p, &first);
  if (*p != '-') return NIMBLE_RANGE_WHOLE;
  p++;
  int has_last = parse_u64(&p, &last);
  p = skip_spaces(p);
  if (*p != '\0') return NIMBLE_RANGE_WHOLE; /* several ranges, or junk */
  if (!has_first && !has_last) return NIMBLE_RANGE_WHOLE;
  if (has_first && has_last && last < first) return NIMBLE_RANGE_WHOLE; /* invalid: ignored */
  if (!has_first) {
    /* Suffix range: the last `last` bytes. */
    if (last == 0 || size == 0) return NIMBLE_RANGE_UNSATISFIABLE;
    uint64_t n = last < size ? last : size;
    *out_start = size - n;
    *out_length = n;
    return NIMBLE_RANGE_PARTIAL;
  }
  if (first >= size) return NIMBLE_RANGE_UNSATISFIABLE;
  uint64_t end = has_last && last < size - 1 ? last : size - 1;
  *out_start = first;
  *out_length = end - first + 1;
  return NIMBLE_RANGE_PARTIAL;
}

nimble_status_t nimble_http_content_range_parse(const char *header, uint64_t *out_start,
                                                uint64_t *out_end) {
  if (!header) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "Content-Range is missing");
  const char *p = skip_spaces(header);
  int unit = strncmp(p, "bytes ", 6) == 0;
  if (unit) p = skip_spaces(p + 6);
  uint64_t start, end;
  if (!parse_u64(&p, &start))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "Content-Range '%s': expected a start offset", header);
  if (*p != '-')
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "Content-Range '%s': expected '-' after %llu", header,
                              (unsigned long long)start);
  p++;
  if (!parse_u64(&p, &end))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "Content-Range '%s': expected an end offset",
                              header);
  if (unit && *p == '/') {
    p++;
    uint64_t total;
    if (*p == '*')
      p++;
    else if (!parse_u64(&p, &total) || total <= end)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "Content-Range '%s': bad total length",
                                header);
  }
  p = skip_spaces(p);
  if (*p != '\0')
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "Content-Range '%s': trailing characters",
                              header);
  if (end < start)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "Content-Range '%s': end %llu is before start %llu", header,
                              (unsigned long long)end, (unsigned long long)start);
  *out_start = start;
  *out_end = end;
  return nimble_ok();
}

int nimble_http_content_length_parse(const char *value, uint64_t *out) {
  uint64_t n = 0;
  *out = 0;
  if (!*value) return -1;
  for (const char *p = value; *p; p++) {
    if (*p < '0' || *p > '9' || n > (UINT64_MAX - 9) / 10) return -1;
    n = n * 10 + (uint64_t)(*p - '0');
  }
  *out = n;
  return 1;
}
