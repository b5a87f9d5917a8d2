/* Manifest validation: a minimal jansson walk of the descriptors a manifest
 * references, enough to refuse a manifest whose blobs are not stored.
 *
 * The rest of the document is stored byte-exact and not interpreted. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/store_fs.h"

typedef struct refs {
  nimble_digest_t *digests;
  int64_t *sizes;
  size_t count, cap;
} refs;

static nimble_status_t refs_push(refs *r, const nimble_digest_t *d, int64_t size) {
  if (r->count == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 8;
    nimble_digest_t *nd = realloc(r->digests, cap * sizeof *nd);
    if (!nd) return NIMBLE_OOM();
    r->digests = nd;
    int64_t *ns = realloc(r->sizes, cap * sizeof *ns);
    if (!ns) return NIMBLE_OOM();
    r->sizes = ns;
    r->cap = cap;
  }
  r->digests[r->count] = *d;
  r->sizes[r->count] = size;
  r->count++;
  return nimble_ok();
}

/* `where` names the descriptor in messages, e.g. "layers[2]". */
static nimble_status_t descriptor(json_t *desc, const char *where, refs *r) {
  if (!json_is_object(desc))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s is not a JSON object", where);
  json_t *media = json_object_get(desc, "mediaType");
  if (!json_is_string(media))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s.mediaType is missing or not a string",
                              where);
  json_t *size = json_object_get(desc, "size");
  if (!json_is_integer(size) || json_integer_value(size) < 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s.size is missing or not a non-negative integer", where);
  json_t *digest = json_object_get(desc, "digest");
  if (!json_is_string(digest))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s.digest is missing or not a string",
                              where);
  nimble_digest_t d;
  NIMBLE_RETURN_IF_ERROR_CTX(
      nimble_digest_parse_n(json_string_value(digest), json_string_length(digest), &d), "%s.digest",
      where);
  return refs_push(r, &d, (int64_t)json_integer_value(size));
}

static nimble_status_t walk(json_t *root, const char *media_type, refs *r) {
  if (!json_is_object(root))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "manifest is not a JSON object");
  int is_index =
      !strcmp(media_type, NIMBLE_MEDIA_TYPE_OCI_INDEX) || !strcmp(media_type, NIMBLE_MEDIA_TYPE_DOCKER_LIST);
  int is_manifest = !strcmp(media_type, NIMBLE_MEDIA_TYPE_OCI_MANIFEST) ||
                    !strcmp(media_type, NIMBLE_MEDIA_TYPE_DOCKER_MANIFEST);
  if (!is_index && !is_manifest)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "unsupported manifest media type '%s'",
                              media_type);
  json_t *declared = json_object_get(root, "mediaType");
  if (declared && (!json_is_string(declared) || strcmp(json_string_value(declared), media_type)))
    return nimble_status_make(
        NIMBLE_INVALID_ARGUMENT,
        "mediaType '%s' in the manifest differs from the Content-Type '%s'",
        json_is_string(declared) ? json_string_value(declared) : "(not a string)", media_type);
  json_t *version = json_object_get(root, "schemaVersion");
  if (!json_is_integer(version) || json_integer_value(version) != 2)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "schemaVersion must be the integer 2");
  char where[48];
  if (is_manifest) {
    NIMBLE_RETURN_IF_ERROR(descriptor(json_object_get(root, "config"), "config", r));
    json_t *layers = json_object_get(root, "layers");
    if (!json_is_array(layers))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "layers is missing or not an array");
    for (size_t i = 0; i < json_array_size(layers); i++) {
      snprintf(where, sizeof where, "layers[%zu]", i);
      NIMBLE_RETURN_IF_ERROR(descriptor(json_array_get(layers, i), where, r));
    }
  } else {
    json_t *manifests = json_object_get(root, "manifests");
    if (!json_is_array(manifests))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "manifests is missing or not an array");
    for (size_t i = 0; i < json_array_size(manifests); i++) {
      snprintf(where, sizeof where, "manifests[%zu]", i);
      NIMBLE_RETURN_IF_ERROR(descriptor(json_array_get(manifests, i), where, r));
    }
  }
  return nimble_ok();
}

nimble_status_t nimble_store_manifest_references(const void *bytes, size_t size,
                                                 const char *media_type, nimble_digest_t **out_refs,
                                                 int64_t **out_sizes, size_t *out_count) {
  json_error_t err;
  /* JSON_REJECT_DUPLICATES: a manifest whose keys appear twice could be read
   * differently by different clients. */
  json_t *root = json_loadb(bytes, size, JSON_REJECT_DUPLICATES, &err);
  if (!root)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "manifest is not valid JSON: %s at line %d, column %d", err.text,
                              err.line, err.column);
  if (!media_type) {
    json_t *declared = json_object_get(root, "mediaType");
    media_type = json_is_string(declared) ? json_string_value(declared) : NULL;
    if (!media_type) {
      json_decref(root);
      return nimble_status_make(
          NIMBLE_INVALID_ARGUMENT,
          "manifest has no media type: no Content-Type and no mediaType field");
    }
  }
  refs r = {0};
  nimble_status_t s = walk(root, media_type, &r);
  json_decref(root);
  if (s) {
    free(r.digests);
    free(r.sizes);
    return s;
  }
  *out_refs = r.digests;
  *out_count = r.count;
  if (out_sizes)
    *out_sizes = r.sizes;
  else
    free(r.sizes);
  return nimble_ok();
}
