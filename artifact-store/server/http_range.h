/* HTTP byte ranges: the Range request header of blob reads and the
 * Content-Range header of chunked upload PATCHes. Pure functions, so the
 * parsing can be tested without a server. */
#ifndef NIMBLE_STORE_HTTP_RANGE_H
#define NIMBLE_STORE_HTTP_RANGE_H

#include <stdint.h>

#include "nimble/status.h"

typedef enum nimble_http_range_result {
  NIMBLE_RANGE_WHOLE = 0,        /* no usable Range header: send everything (200) */
  NIMBLE_RANGE_PARTIAL = 1,      /* one satisfiable range (206) */
  NIMBLE_RANGE_UNSATISFIABLE = 2 /* well formed but outside the content (416) */
} nimble_http_range_result;

/* Interprets a Range header (NULL when absent) against content of `size`
 * bytes, per RFC 9110 section 14: "bytes=a-b", "bytes=a-" and "bytes=-n".
 * A header that is malformed, or asks for several ranges, is ignored (the
 * RFC allows a server to ignore Range), giving NIMBLE_RANGE_WHOLE. For
 * PARTIAL, *out_start and *out_length say which bytes to send. */
nimble_http_range_result nimble_http_range_parse(const char *header, uint64_t size,
                                                 uint64_t *out_start, uint64_t *out_length);

/* Parses an upload chunk's Content-Range, "<start>-<end>" (the OCI form) or
 * "bytes <start>-<end>/<total or *>", inclusive. INVALID_ARGUMENT naming the
 * problem when malformed, end < start, or a number overflows. */
nimble_status_t nimble_http_content_range_parse(const char *header, uint64_t *out_start,
                                                uint64_t *out_end);

/* Parses a Content-Length value: 1 and *out for one or more decimal digits
 * (nothing else: no sign, no blanks) whose value fits 64 bits with room to
 * spare, -1 otherwise. *out is 0 unless 1 is returned. */
int nimble_http_content_length_parse(const char *value, uint64_t *out);

#endif /* NIMBLE_STORE_HTTP_RANGE_H */
