/* The artifact manifest: an OCI image manifest for Nimble executables. */
#include "nimble/manifest.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "json_codec.h"
#include "nimble/target.h"
#include "nimble/text_quote.h"

/* Layer media types this version understands (nimble/media_type.h); a
 * manifest holds at most one layer of each (kernels: one per device). */
static const char *const kLayerKinds[] = {
    NIMBLE_MEDIA_TYPE_METADATA,       NIMBLE_MEDIA_TYPE_BYTECODE,
    NIMBLE_MEDIA_TYPE_CONSTANTS,      NIMBLE_MEDIA_TYPE_KERNELS_X86_64,
    NIMBLE_MEDIA_TYPE_KERNELS_AARCH64, NIMBLE_MEDIA_TYPE_KERNELS_NVPTX,
};
#define LAYER_KIND_COUNT (sizeof(kLayerKinds) / sizeof(kLayerKinds[0]))

static const char kEmptyDigest[] =
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

static char *dup_str(const char *s) {
  size_t n = strlen(s);
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n + 1);
  return d;
}

static void free_annotations(nimble_annotation_t *a, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(a[i].key);
    free(a[i].value);
  }
  free(a);
}

static void descriptor_deinit(nimble_descriptor_t *d) {
  free(d->media_type);
  free_annotations(d->annotations, d->annotation_count);
  memset(d, 0, sizeof(*d));
}

void nimble_manifest_init(nimble_manifest_t *m) { memset(m, 0, sizeof(*m)); }

void nimble_manifest_deinit(nimble_manifest_t *m) {
  descriptor_deinit(&m->config);
  for (size_t i = 0; i < m->layer_count; i++) descriptor_deinit(&m->layers[i]);
  free(m->layers);
  free_annotations(m->annotations, m->annotation_count);
  memset(m, 0, sizeof(*m));
}

static nimble_status_t set_annotation(nimble_annotation_t **items, size_t *count, const char *key,
                                      const char *value) {
  if (!key || !key[0]) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "annotation: empty key");
  if (!value) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "annotation '%s': no value", key);
  char *v = dup_str(value);
  if (!v) return NIMBLE_OOM_IN("annotation");
  for (size_t i = 0; i < *count; i++) {
    if (strcmp((*items)[i].key, key) == 0) {
      free((*items)[i].value);
      (*items)[i].value = v;
      return nimble_ok();
    }
  }
  char *k = dup_str(key);
  nimble_annotation_t *grown = k ? realloc(*items, (*count + 1) * sizeof(**items)) : NULL;
  if (!grown) {
    free(k);
    free(v);
    return NIMBLE_OOM_IN("annotation");
  }
  grown[*count] = (nimble_annotation_t){k, v};
  *items = grown;
  (*count)++;
  return nimble_ok();
}

nimble_status_t nimble_descriptor_set_annotation(nimble_descriptor_t *d, const char *key,
                                                 const char *value) {
  return set_annotation(&d->annotations, &d->annotation_count, key, value);
}

nimble_status_t nimble_manifest_set_annotation(nimble_manifest_t *m, const char *key,
                                               const char *value) {
  return set_annotation(&m->annotations, &m->annotation_count, key, value);
}

const char *nimble_descriptor_annotation(const nimble_descriptor_t *d, const char *key) {
  for (size_t i = 0; i < d->annotation_count; i++)
    if (strcmp(d->annotations[i].key, key) == 0) return d->annotations[i].value;
  return NULL;
}

static int layer_kind_of(const char *media_type) {
  for (size_t i = 0; i < LAYER_KIND_COUNT; i++)
    if (strcmp(kLayerKinds[i], media_type) == 0) return (int)i;
  return -1;
}

const char *nimble_manifest_kernels_media_type(const char *triple) {
  return nimble_media_type_kernels(triple);
}

/* Size and digest rules every descriptor obeys; `path` names it. */
static nimble_status_t check_descriptor(const nimble_descriptor_t *d, const char *path) {
  if (!d->media_type || !d->media_type[0]) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s.mediaType: missing", path);
  }
  if (d->size < 0) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s.size: %lld is negative", path,
                              (long long)d->size);
  }
  if (d->size > NIMBLE_BLOB_MAX_SIZE) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s.size: %lld is larger than %lld",
                              path, (long long)d->size, (long long)NIMBLE_BLOB_MAX_SIZE);
  }
  if (d->size == 0) {
    char text[NIMBLE_DIGEST_STRING_LEN + 1];
    nimble_digest_format(&d->digest, text);
    if (strcmp(text, kEmptyDigest) != 0) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s.digest: size is 0 but %s is not the digest of no bytes",
                                path, text);
    }
  }
  for (size_t i = 0; i < d->annotation_count; i++) {
    if (!d->annotations[i].key || !d->annotations[i].key[0]) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s.annotations: empty key", path);
    }
  }
  return nimble_ok();
}

static nimble_status_t check_layer(const nimble_manifest_t *m, size_t index) {
  char path[NIMBLE_JSON_PATH_MAX];
  nimble_json_path_index(path, "layers", index);
  const nimble_descriptor_t *d = &m->layers[index];
  NIMBLE_RETURN_IF_ERROR(check_descriptor(d, path));
  int kind = layer_kind_of(d->media_type);
  if (kind < 0) {
    char q[96];
    nimble_text_quote(d->media_type, strlen(d->media_type), q, sizeof(q));
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "%s.mediaType: unknown layer media type '%s'", path, q);
  }
  /* Constants and each device's kernels appear at most once; metadata and
   * bytecode too (that they appear at all is checked by the caller). */
  for (size_t k = 0; k < index; k++) {
    if (strcmp(m->layers[k].media_type, d->media_type) == 0) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s.mediaType: a second %s layer (the first is layers[%zu])",
                                path, d->media_type, k);
    }
  }
  return nimble_ok();
}

nimble_status_t nimble_manifest_validate(const nimble_manifest_t *m) {
  if (!m->config.media_type) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "config: missing");
  }
  NIMBLE_RETURN_IF_ERROR(check_descriptor(&m->config, "config"));
  if (strcmp(m->config.media_type, NIMBLE_MEDIA_TYPE_CONFIG) != 0) {
    char q[96];
    nimble_text_quote(m->config.media_type, strlen(m->config.media_type), q, sizeof(q));
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "config.mediaType: expected '%s', got '%s'",
                              NIMBLE_MEDIA_TYPE_CONFIG, q);
  }
  if (m->config.size > (int64_t)NIMBLE_MANIFEST_MAX_SIZE) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "config.size: %lld is over the %zu-byte limit for a config blob",
                              (long long)m->config.size, NIMBLE_MANIFEST_MAX_SIZE);
  }
  if (m->layer_count == 0) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "layers: needs at least 1 item, got 0");
  }
  if (m->layer_count > NIMBLE_MANIFEST_MAX_LAYERS) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "layers: %zu items is more than %d",
                              m->layer_count, NIMBLE_MANIFEST_MAX_LAYERS);
  }
  for (size_t i = 0; i < m->layer_count; i++) NIMBLE_RETURN_IF_ERROR(check_layer(m, i));
  /* Both are required for an executable a runtime can load. */
  static const char *const kRequired[] = {NIMBLE_MEDIA_TYPE_BYTECODE, NIMBLE_MEDIA_TYPE_METADATA};
  for (size_t i = 0; i < sizeof kRequired / sizeof kRequired[0]; i++) {
    if (!nimble_manifest_find_layer(m, kRequired[i])) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "layers: no %s layer", kRequired[i]);
    }
  }
  for (size_t i = 0; i < m->annotation_count; i++) {
    if (!m->annotations[i].key || !m->annotations[i].key[0]) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "annotations: empty key");
    }
  }
  return nimble_ok();
}

static nimble_status_t new_descriptor(nimble_descriptor_t *d, const char *media_type,
                                      const nimble_digest_t *digest, int64_t size) {
  memset(d, 0, sizeof(*d));
  d->media_type = dup_str(media_type);
  if (!d->media_type) return NIMBLE_OOM();
  d->digest = *digest;
  d->size = size;
  return nimble_ok();
}

nimble_status_t nimble_manifest_set_config(nimble_manifest_t *m, const nimble_digest_t *digest,
                                           int64_t size) {
  nimble_descriptor_t d;
  NIMBLE_RETURN_IF_ERROR(new_descriptor(&d, NIMBLE_MEDIA_TYPE_CONFIG, digest, size));
  nimble_status_t s = check_descriptor(&d, "config");
  if (!s && size > (int64_t)NIMBLE_MANIFEST_MAX_SIZE) {
    s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                           "config.size: %lld is over the %zu-byte limit for a config blob",
                           (long long)size, NIMBLE_MANIFEST_MAX_SIZE);
  }
  if (s) {
    descriptor_deinit(&d);
    return s;
  }
  descriptor_deinit(&m->config);
  m->config = d;
  return nimble_ok();
}

nimble_status_t nimble_manifest_add_layer(nimble_manifest_t *m, const char *media_type,
                                          const nimble_digest_t *digest, int64_t size,
                                          const char *title) {
  if (!media_type) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "layer: no media type");
  if (m->layer_count >= NIMBLE_MANIFEST_MAX_LAYERS) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "layers: more than %d",
                              NIMBLE_MANIFEST_MAX_LAYERS);
  }
  nimble_descriptor_t *grown = realloc(m->layers, (m->layer_count + 1) * sizeof(*grown));
  if (!grown) return NIMBLE_OOM_IN("layers");
  m->layers = grown;
  nimble_descriptor_t *d = &m->layers[m->layer_count];
  nimble_status_t s = new_descriptor(d, media_type, digest, size);
  if (!s && title) s = nimble_descriptor_set_annotation(d, NIMBLE_ANNOTATION_TITLE, title);
  m->layer_count++;
  if (!s) s = check_layer(m, m->layer_count - 1);
  if (s) {
    m->layer_count--;
    descriptor_deinit(d);
  }
  return s;
}

const nimble_descriptor_t *nimble_manifest_find_layer(const nimble_manifest_t *m,
                                                      const char *media_type) {
  for (size_t i = 0; i < m->layer_count; i++)
    if (m->layers[i].media_type && strcmp(m->layers[i].media_type, media_type) == 0)
      return &m->layers[i];
  return NULL;
}

/* ---- encoding ---- */

static json_t *annotations_to_json(const nimble_annotation_t *a, size_t n) {
  json_t *obj = json_object();
  for (size_t i = 0; obj && i < n; i++) {
    if (json_object_set_new(obj, a[i].key, json_string(a[i].value)) != 0) {
      json_decref(obj);
      return NULL;
    }
  }
  return obj;
}

static json_t *descriptor_to_json(const nimble_descriptor_t *d) {
  char digest[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&d->digest, digest);
  json_t *obj = json_object();
  if (!obj) return NULL;
  int ok = json_object_set_new(obj, "mediaType", json_string(d->media_type)) == 0 &&
           json_object_set_new(obj, "digest", json_string(digest)) == 0 &&
           json_object_set_new(obj, "size", json_integer(d->size)) == 0;
  /* Empty annotations are left out, so "none" has one spelling. */
  if (ok && d->annotation_count) {
    ok = json_object_set_new(obj, "annotations",
                             annotations_to_json(d->annotations, d->annotation_count)) == 0;
  }
  if (!ok) {
    json_decref(obj);
    return NULL;
  }
  return obj;
}

nimble_status_t nimble_manifest_encode(const nimble_manifest_t *m, char **out, size_t *out_size) {
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_manifest_validate(m), "manifest");
  json_t *root = json_object(), *layers = json_array();
  int ok = root && layers &&
           json_object_set_new(root, "schemaVersion", json_integer(2)) == 0 &&
           json_object_set_new(root, "mediaType", json_string(NIMBLE_MEDIA_TYPE_OCI_MANIFEST)) ==
               0 &&
           json_object_set_new(root, "artifactType",
                               json_string(NIMBLE_ARTIFACT_TYPE_EXECUTABLE)) == 0 &&
           json_object_set_new(root, "config", descriptor_to_json(&m->config)) == 0;
  for (size_t i = 0; ok && i < m->layer_count; i++) {
    ok = json_array_append_new(layers, descriptor_to_json(&m->layers[i])) == 0;
  }
  if (ok) {
    ok = json_object_set(root, "layers", layers) == 0;
  }
  if (ok && m->annotation_count) {
    ok = json_object_set_new(root, "annotations",
                             annotations_to_json(m->annotations, m->annotation_count)) == 0;
  }
  json_decref(layers);
  if (!ok) {
    json_decref(root);
    /* jansson refuses strings that are not UTF-8 (and fails on OOM). */
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "manifest: a media type or annotation is not valid UTF-8");
  }
  nimble_status_t s = nimble_json_dump_canonical(root, out, out_size);
  json_decref(root);
  return s;
}

/* ---- decoding ---- */

static nimble_status_t annotations_from_json(const json_t *obj, const char *path,
                                             nimble_annotation_t **items, size_t *count) {
  json_t *a = NULL;
  NIMBLE_RETURN_IF_ERROR(nimble_json_get_object(obj, path, "annotations", 0, &a));
  if (!a) return nimble_ok();
  char apath[NIMBLE_JSON_PATH_MAX];
  nimble_json_path_key(apath, path, "annotations");
  const char *key;
  json_t *v;
  json_object_foreach(a, key, v) {
    if (!json_is_string(v)) {
      char p[NIMBLE_JSON_PATH_MAX];
      nimble_json_path_key(p, apath, key);
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: expected a string, got %s", p,
                                nimble_json_type_name(v));
    }
    if (!key[0]) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: empty key", apath);
    NIMBLE_RETURN_IF_ERROR(set_annotation(items, count, key, json_string_value(v)));
  }
  return nimble_ok();
}

static nimble_status_t descriptor_from_json(const json_t *parent, const json_t *obj,
                                            const char *path, nimble_descriptor_t *d) {
  (void)parent;
  if (!json_is_object(obj)) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: expected an object, got %s", path,
                              nimble_json_type_name(obj));
  }
  const char *media_type = NULL;
  NIMBLE_RETURN_IF_ERROR(nimble_json_get_string(obj, path, "mediaType", 1, 255, &media_type));
  NIMBLE_RETURN_IF_ERROR(nimble_json_get_digest(obj, path, "digest", 1, &d->digest, NULL));
  /* Range is checked by check_descriptor so the messages match encode's. */
  NIMBLE_RETURN_IF_ERROR(
      nimble_json_get_int(obj, path, "size", 1, INT64_MIN, INT64_MAX, &d->size, NULL));
  d->media_type = dup_str(media_type);
  if (!d->media_type) return NIMBLE_OOM();
  NIMBLE_RETURN_IF_ERROR(annotations_from_json(obj, path, &d->annotations, &d->annotation_count));
  return check_descriptor(d, path);
}

static nimble_status_t manifest_from_json(const json_t *root, nimble_manifest_t *m) {
  int64_t version;
  NIMBLE_RETURN_IF_ERROR(
      nimble_json_get_int(root, "", "schemaVersion", 1, INT64_MIN, INT64_MAX, &version, NULL));
  if (version != 2) {
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "schemaVersion: %lld is not supported (only 2)",
                              (long long)version);
  }
  const char *media_type, *artifact_type;
  NIMBLE_RETURN_IF_ERROR(nimble_json_get_string(root, "", "mediaType", 1, 255, &media_type));
  if (strcmp(media_type, NIMBLE_MEDIA_TYPE_OCI_MANIFEST) != 0) {
    char q[96];
    nimble_text_quote(media_type, strlen(media_type), q, sizeof(q));
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "mediaType: expected '%s', got '%s'",
                              NIMBLE_MEDIA_TYPE_OCI_MANIFEST, q);
  }
  NIMBLE_RETURN_IF_ERROR(nimble_json_get_string(root, "", "artifactType", 1, 255, &artifact_type));
  if (strcmp(artifact_type, NIMBLE_ARTIFACT_TYPE_EXECUTABLE) != 0) {
    char q[96];
    nimble_text_quote(artifact_type, strlen(artifact_type), q, sizeof(q));
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "artifactType: expected '%s', got '%s'",
                              NIMBLE_ARTIFACT_TYPE_EXECUTABLE, q);
  }
  json_t *config = NULL, *layers = NULL;
  NIMBLE_RETURN_IF_ERROR(nimble_json_get_object(root, "", "config", 1, &config));
  NIMBLE_RETURN_IF_ERROR(descriptor_from_json(root, config, "config", &m->config));
  NIMBLE_RETURN_IF_ERROR(
      nimble_json_get_array(root, "", "layers", 1, 1, NIMBLE_MANIFEST_MAX_LAYERS, &layers));
  size_t n = json_array_size(layers);
  m->layers = calloc(n, sizeof(*m->layers));
  if (!m->layers) return NIMBLE_OOM_IN("layers");
  for (size_t i = 0; i < n; i++) {
    char path[NIMBLE_JSON_PATH_MAX];
    nimble_json_path_index(path, "layers", i);
    m->layer_count = i + 1; /* so deinit frees what this item got */
    NIMBLE_RETURN_IF_ERROR(descriptor_from_json(layers, json_array_get(layers, i), path,
                                                &m->layers[i]));
  }
  NIMBLE_RETURN_IF_ERROR(annotations_from_json(root, "", &m->annotations, &m->annotation_count));
  return nimble_manifest_validate(m);
}

nimble_status_t nimble_manifest_decode(const void *data, size_t size, nimble_manifest_t *out) {
  json_t *root;
  nimble_manifest_init(out);
  NIMBLE_RETURN_IF_ERROR(
      nimble_json_load_object(data, size, NIMBLE_MANIFEST_MAX_SIZE, "manifest", &root));
  nimble_status_t s = manifest_from_json(root, out);
  json_decref(root);
  if (s) {
    nimble_manifest_deinit(out);
    return nimble_status_annotate(s, "manifest");
  }
  return nimble_ok();
}

nimble_status_t nimble_manifest_check_target(const nimble_manifest_t *m, const char *target_spec) {
  nimble_target_t t;
  NIMBLE_RETURN_IF_ERROR(nimble_target_parse(target_spec, &t));
  const char *host = nimble_target_host_triple(&t), *device = nimble_target_device_triple(&t);
  for (size_t i = 0; i < m->layer_count; i++) {
    /* A kernels layer of a known type: "<prefix><triple>.v1+<format>". */
    const char *mt = m->layers[i].media_type;
    size_t prefix = sizeof NIMBLE_MEDIA_TYPE_KERNELS_PREFIX - 1;
    if (layer_kind_of(mt) < 0 || strncmp(mt, NIMBLE_MEDIA_TYPE_KERNELS_PREFIX, prefix) != 0)
      continue;
    const char *host_mt = nimble_media_type_kernels(host);
    const char *device_mt = device ? nimble_media_type_kernels(device) : NULL;
    if (!(host_mt && strcmp(mt, host_mt) == 0) && !(device_mt && strcmp(mt, device_mt) == 0)) {
      int triple_len = (int)(strrchr(mt, '.') - (mt + prefix));
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "layers[%zu]: %.*s kernels do not belong to target '%s'", i,
                                triple_len, mt + prefix, target_spec);
    }
  }
  return nimble_ok();
}
