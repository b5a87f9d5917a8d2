/* A small, strict JSON reader: just enough for OCI manifests, so the runtime
 * needs no JSON library. It accepts objects, arrays, strings (with every
 * escape, UTF-8 checked), integers that fit int64, true, false and null; it
 * refuses real numbers, duplicate keys, trailing bytes, nesting deeper than
 * NIMBLE_JSON_MAX_DEPTH and documents over NIMBLE_JSON_MAX_SIZE. Errors are
 * INVALID_ARGUMENT and give the byte offset. Private to runtime/fetch. */
#ifndef NIMBLE_FETCH_JSON_READER_H
#define NIMBLE_FETCH_JSON_READER_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/status.h"

#define NIMBLE_JSON_MAX_DEPTH 32
#define NIMBLE_JSON_MAX_SIZE (4u << 20)
#define NIMBLE_JSON_MAX_VALUES 100000u

typedef enum nimble_json_kind_t {
  NIMBLE_JSON_NULL,
  NIMBLE_JSON_BOOL,
  NIMBLE_JSON_INT,
  NIMBLE_JSON_STRING,
  NIMBLE_JSON_ARRAY,
  NIMBLE_JSON_OBJECT,
} nimble_json_kind_t;

typedef struct nimble_json_value {
  nimble_json_kind_t kind;
  size_t offset;   /* byte offset of the value in the document */
  int64_t integer; /* INT; BOOL: 0 or 1 */
  char *string;    /* STRING: NUL-terminated (may hold NUL from \u0000: see length) */
  size_t length;   /* STRING: bytes; ARRAY/OBJECT: items */
  struct nimble_json_value *items; /* ARRAY/OBJECT: `length` values */
  char **keys;                     /* OBJECT: `length` keys */
} nimble_json_value;

/* Parses `size` bytes (borrowed). On success *out is a tree the caller frees
 * with nimble_json_free. */
nimble_status_t nimble_json_parse(const void *data, size_t size, nimble_json_value **out);
void nimble_json_free(nimble_json_value *v);

/* The member `key` of an object, or NULL (also when v is not an object). */
const nimble_json_value *nimble_json_get(const nimble_json_value *v, const char *key);

const char *nimble_json_kind_name(nimble_json_kind_t kind);

#endif
