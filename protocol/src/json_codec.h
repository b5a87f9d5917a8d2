/* Canonical JSON and checked field access (private to protocol/).
 *
 * Every JSON document Nimble hashes or sends is written one way: compact,
 * keys sorted by bytes, integers only. Reading goes through bounded loads
 * (size cap, duplicate keys rejected) and getters whose errors name the
 * field by its path ("layers[2].digest: ..."). */
#ifndef NIMBLE_PROTOCOL_JSON_CODEC_H
#define NIMBLE_PROTOCOL_JSON_CODEC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "nimble/digest.h"
#include "nimble/status.h"

/* Paths such as "entries[3].inputs[12].shape[2]" fit easily. */
#define NIMBLE_JSON_PATH_MAX 160

/* Parses `size` bytes (at most `max`) into an object. `what` names the
 * document in errors. Caller owns *out (json_decref). */
nimble_status_t nimble_json_load_object(const void *data, size_t size, size_t max,
                                        const char *what, json_t **out);

/* Canonical bytes of j (compact, sorted keys), NUL-terminated. Caller frees
 * *out with free(). Fails on a real number anywhere in j. */
nimble_status_t nimble_json_dump_canonical(const json_t *j, char **out, size_t *out_size);

/* Fails (INVALID_ARGUMENT) naming the first real number inside j, whose own
 * path is `path` (may be ""). Canonical documents carry integers only. */
nimble_status_t nimble_json_check_no_real(const json_t *j, const char *path);

/* "string", "integer", "real", "object", ... for error messages. */
const char *nimble_json_type_name(const json_t *j);

/* Writes "path.key" (or "key" when path is "") into out. */
void nimble_json_path_key(char out[NIMBLE_JSON_PATH_MAX], const char *path, const char *key);
/* Writes "path[index]" into out. */
void nimble_json_path_index(char out[NIMBLE_JSON_PATH_MAX], const char *path, size_t index);

/* Getters: `path` is the object's own path. A missing required field, a
 * wrong type or a bad value is an INVALID_ARGUMENT naming "path.key". An
 * absent optional field leaves *out untouched and *present (when given) 0.
 * Returned pointers are borrowed from obj. */
nimble_status_t nimble_json_get_string(const json_t *obj, const char *path, const char *key,
                                       int required, size_t max_len, const char **out);
nimble_status_t nimble_json_get_int(const json_t *obj, const char *path, const char *key,
                                    int required, int64_t min, int64_t max, int64_t *out,
                                    int *present);
nimble_status_t nimble_json_get_bool(const json_t *obj, const char *path, const char *key,
                                     int required, int *out, int *present);
nimble_status_t nimble_json_get_digest(const json_t *obj, const char *path, const char *key,
                                       int required, nimble_digest_t *out, int *present);
nimble_status_t nimble_json_get_object(const json_t *obj, const char *path, const char *key,
                                       int required, json_t **out);
nimble_status_t nimble_json_get_array(const json_t *obj, const char *path, const char *key,
                                      int required, size_t min_len, size_t max_len, json_t **out);

/* Checks that j is an object of scalars (string, integer, boolean): the
 * shape of compile options. Errors name "path.key". */
nimble_status_t nimble_json_check_scalar_object(const json_t *j, const char *path);

#endif /* NIMBLE_PROTOCOL_JSON_CODEC_H */
