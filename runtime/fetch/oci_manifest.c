/* OCI manifest descriptors for the fetcher, over the strict JSON reader.
 * Members the fetcher does not need (annotations, subject, urls) are
 * ignored, as the OCI image spec asks. */
#include "oci_manifest.h"

#include <stdio.h>
#include <string.h>

#include "json_reader.h"

/* 2^53 - 1: the largest size every JSON reader holds exactly (artifacts.md). */
#define MAX_DESCRIPTOR_SIZE 9007199254740991LL

static nimble_status_t field_error(const char *where, const nimble_json_value *v, const char *fmt,
                                   const char *arg) {
  char msg[256];
  snprintf(msg, sizeof msg, fmt, arg);
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "manifest: %s: %s (at byte %zu)", where, msg,
                            v ? v->offset : 0);
}

static nimble_status_t read_descriptor(const nimble_json_value *d, const char *where,
                                       nimble_fetch_descriptor_t *out) {
  if (d->kind != NIMBLE_JSON_OBJECT)
    return field_error(where, d, "expected an object, got %s", nimble_json_kind_name(d->kind));
  char path[64];
  const nimble_json_value *mt = nimble_json_get(d, "mediaType");
  snprintf(path, sizeof path, "%s.mediaType", where);
  if (!mt) return field_error(path, d, "missing%s", "");
  if (mt->kind != NIMBLE_JSON_STRING)
    return field_error(path, mt, "expected a string, got %s", nimble_json_kind_name(mt->kind));
  if (mt->length == 0 || mt->length >= sizeof out->media_type || strlen(mt->string) != mt->length)
    return field_error(path, mt, "media type is empty, too long or holds NUL%s", "");
  memcpy(out->media_type, mt->string, mt->length + 1);

  const nimble_json_value *dg = nimble_json_get(d, "digest");
  snprintf(path, sizeof path, "%s.digest", where);
  if (!dg) return field_error(path, d, "missing%s", "");
  if (dg->kind != NIMBLE_JSON_STRING)
    return field_error(path, dg, "expected a string, got %s", nimble_json_kind_name(dg->kind));
  if (!nimble_digest_valid(dg->string, dg->length))
    return field_error(path, dg, "'%.80s' is not sha256:<64 lowercase hex>", dg->string);
  memcpy(out->digest, dg->string, 72);

  const nimble_json_value *sz = nimble_json_get(d, "size");
  snprintf(path, sizeof path, "%s.size", where);
  if (!sz) return field_error(path, d, "missing%s", "");
  if (sz->kind != NIMBLE_JSON_INT)
    return field_error(path, sz, "expected an integer, got %s", nimble_json_kind_name(sz->kind));
  if (sz->integer < 0 || sz->integer > MAX_DESCRIPTOR_SIZE) {
    char n[32];
    snprintf(n, sizeof n, "%lld", (long long)sz->integer);
    return field_error(path, sz, "%s is out of the range 0 to 2^53-1", n);
  }
  out->size = (uint64_t)sz->integer;
  return nimble_ok();
}

static nimble_status_t check_string(const nimble_json_value *root, const char *key,
                                    const char *want) {
  const nimble_json_value *v = nimble_json_get(root, key);
  if (!v) return field_error(key, root, "missing (expected '%s')", want);
  if (v->kind != NIMBLE_JSON_STRING)
    return field_error(key, v, "expected a string, got %s", nimble_json_kind_name(v->kind));
  if (strcmp(v->string, want) != 0 || strlen(want) != v->length) {
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "manifest: %s: expected '%s', got '%.200s'",
                              key, want, v->string);
  }
  return nimble_ok();
}

static nimble_status_t parse_tree(const nimble_json_value *root, nimble_fetch_manifest_t *out) {
  if (root->kind != NIMBLE_JSON_OBJECT)
    return field_error("document", root, "expected an object, got %s",
                       nimble_json_kind_name(root->kind));
  const nimble_json_value *sv = nimble_json_get(root, "schemaVersion");
  if (!sv) return field_error("schemaVersion", root, "missing%s", "");
  if (sv->kind != NIMBLE_JSON_INT || sv->integer != 2)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "manifest: schemaVersion: expected 2");
  NIMBLE_RETURN_IF_ERROR(check_string(root, "mediaType", NIMBLE_MEDIA_TYPE_OCI_MANIFEST));
  NIMBLE_RETURN_IF_ERROR(check_string(root, "artifactType", NIMBLE_ARTIFACT_TYPE_EXECUTABLE));
  const nimble_json_value *cfg = nimble_json_get(root, "config");
  if (!cfg) return field_error("config", root, "missing%s", "");
  NIMBLE_RETURN_IF_ERROR(read_descriptor(cfg, "config", &out->config));
  if (strcmp(out->config.media_type, NIMBLE_MEDIA_TYPE_CONFIG) != 0) {
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "manifest: config.mediaType: expected '%s', got '%s'",
                              NIMBLE_MEDIA_TYPE_CONFIG, out->config.media_type);
  }
  const nimble_json_value *layers = nimble_json_get(root, "layers");
  if (!layers) return field_error("layers", root, "missing%s", "");
  if (layers->kind != NIMBLE_JSON_ARRAY)
    return field_error("layers", layers, "expected an array, got %s",
                       nimble_json_kind_name(layers->kind));
  if (layers->length == 0 || layers->length > NIMBLE_FETCH_MAX_LAYERS) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "manifest: layers: %zu items, expected 1 to %d",
                              layers->length, NIMBLE_FETCH_MAX_LAYERS);
  }
  for (size_t i = 0; i < layers->length; i++) {
    char where[32];
    snprintf(where, sizeof where, "layers[%zu]", i);
    NIMBLE_RETURN_IF_ERROR(read_descriptor(&layers->items[i], where, &out->layers[i]));
  }
  out->layer_count = layers->length;
  return nimble_ok();
}

nimble_status_t nimble_fetch_manifest_parse(const void *data, size_t size,
                                            nimble_fetch_manifest_t *out) {
  memset(out, 0, sizeof *out);
  nimble_json_value *root;
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_json_parse(data, size, &root), "manifest");
  nimble_status_t s = parse_tree(root, out);
  nimble_json_free(root);
  return s;
}
