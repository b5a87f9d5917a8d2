/* libFuzzer target for the fetcher's OCI manifest parser (oci_manifest.c):
 * the first bytes a fetch reads from a store. Built with clang-16 by
 * runtime/fetch/CMakeLists.txt (`cmake --build BUILD --target
 * fuzz_oci_manifest`) and run by bench/fuzz/run.sh; tests/fuzz replays the
 * corpus (tests/fuzz/oci_manifest/corpus) through this same function in
 * every build. docs/reliability.md, "Fuzzing".
 *
 * Beyond "no crash, no leak, no UB", an accepted manifest must hold what
 * the fetcher relies on (docs/artifacts.md): schemaVersion 2, Nimble's media
 * and artifact types, Nimble's config type, 1 to NIMBLE_FETCH_MAX_LAYERS
 * layers, each descriptor a non-empty NUL-free media type, a valid digest
 * and a size of at most 2^53-1; and jansson's reading of the same bytes
 * must give the same descriptors. Written back out as a manifest, the
 * result parses to the same struct. A refusal is INVALID_ARGUMENT,
 * UNIMPLEMENTED or RESOURCE_EXHAUSTED naming "manifest". Any violation
 * aborts. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci_manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what) {
  fprintf(stderr, "fuzz_oci_manifest: %s\n", what);
  abort();
}

static void check_descriptor(const nimble_fetch_descriptor_t *d, const json_t *j) {
  size_t n = strnlen(d->media_type, sizeof d->media_type);
  if (n == 0 || n == sizeof d->media_type) fail("media type empty or not terminated");
  if (!nimble_digest_valid(d->digest, strnlen(d->digest, sizeof d->digest)))
    fail("accepted an invalid digest");
  if (d->size > 9007199254740991ULL) fail("size over 2^53-1");
  /* jansson's reading of the same descriptor. */
  const char *mt = json_string_value(json_object_get(j, "mediaType"));
  const char *dg = json_string_value(json_object_get(j, "digest"));
  json_t *sz = json_object_get(j, "size");
  if (!mt || strcmp(mt, d->media_type) != 0) fail("media type differs from jansson's");
  if (!dg || strcmp(dg, d->digest) != 0) fail("digest differs from jansson's");
  if (!json_is_integer(sz) || (uint64_t)json_integer_value(sz) != d->size)
    fail("size differs from jansson's");
}

/* The manifest written back from the parsed struct. */
static char *write_back(const nimble_fetch_manifest_t *m, size_t *len) {
  size_t cap = 1024 + (m->layer_count + 1) * 2048, n = 0; /* \u00XX: 6 bytes a byte */
  char *out = malloc(cap);
  if (!out) fail("out of memory");
  n += (size_t)snprintf(out + n, cap - n,
                        "{\"schemaVersion\":2,\"mediaType\":\"%s\",\"artifactType\":\"%s\","
                        "\"config\":{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%llu},"
                        "\"layers\":[",
                        NIMBLE_MEDIA_TYPE_OCI_MANIFEST, NIMBLE_ARTIFACT_TYPE_EXECUTABLE,
                        m->config.media_type, m->config.digest,
                        (unsigned long long)m->config.size);
  for (size_t i = 0; i < m->layer_count; i++) {
    /* The media type goes through a JSON string escape. */
    json_t *s = json_string(m->layers[i].media_type);
    char *q = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
    if (!q) fail("a parsed media type is not valid UTF-8");
    n += (size_t)snprintf(out + n, cap - n, "%s{\"mediaType\":%s,\"digest\":\"%s\",\"size\":%llu}",
                          i ? "," : "", q, m->layers[i].digest,
                          (unsigned long long)m->layers[i].size);
    free(q);
    json_decref(s);
    if (n >= cap) fail("write-back buffer too small");
  }
  n += (size_t)snprintf(out + n, cap - n, "]}");
  if (n >= cap) fail("write-back buffer too small");
  *len = n;
  return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nimble_fetch_manifest_t *m = malloc(sizeof *m);
  if (!m) return 0;
  nimble_status_t s = nimble_fetch_manifest_parse(data, size, m);
  if (s) {
    nimble_status_code_t c = nimble_status_code(s);
    if (c != NIMBLE_INVALID_ARGUMENT && c != NIMBLE_UNIMPLEMENTED && c != NIMBLE_RESOURCE_EXHAUSTED)
      fail("refused with an unexpected code");
    if (!strstr(nimble_status_message(s), "manifest")) fail("the error does not say manifest");
    nimble_status_free(s);
    free(m);
    return 0;
  }
  if (m->layer_count < 1 || m->layer_count > NIMBLE_FETCH_MAX_LAYERS) fail("layer count out of range");
  if (strcmp(m->config.media_type, NIMBLE_MEDIA_TYPE_CONFIG) != 0) fail("config media type");

  json_error_t err;
  json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &err);
  if (!root) fail("accepted a document jansson refuses");
  json_t *sv = json_object_get(root, "schemaVersion");
  if (!json_is_integer(sv) || json_integer_value(sv) != 2) fail("schemaVersion is not 2");
  if (!json_is_string(json_object_get(root, "mediaType")) ||
      strcmp(json_string_value(json_object_get(root, "mediaType")), NIMBLE_MEDIA_TYPE_OCI_MANIFEST))
    fail("mediaType is not the OCI manifest's");
  if (!json_is_string(json_object_get(root, "artifactType")) ||
      strcmp(json_string_value(json_object_get(root, "artifactType")), NIMBLE_ARTIFACT_TYPE_EXECUTABLE))
    fail("artifactType is not Nimble's");
  check_descriptor(&m->config, json_object_get(root, "config"));
  json_t *layers = json_object_get(root, "layers");
  if (json_array_size(layers) != m->layer_count) fail("layer count differs from jansson's");
  for (size_t i = 0; i < m->layer_count; i++) check_descriptor(&m->layers[i], json_array_get(layers, i));
  json_decref(root);

  size_t len;
  char *text = write_back(m, &len);
  nimble_fetch_manifest_t *again = malloc(sizeof *again);
  if (!again) fail("out of memory");
  s = nimble_fetch_manifest_parse(text, len, again);
  if (s) {
    fprintf(stderr, "fuzz_oci_manifest: %s\n%s\n", nimble_status_message(s), text);
    fail("the written-back manifest does not parse");
  }
  if (memcmp(&again->config, &m->config, sizeof m->config) != 0 ||
      again->layer_count != m->layer_count ||
      memcmp(again->layers, m->layers, m->layer_count * sizeof m->layers[0]) != 0)
    fail("the written-back manifest parses differently");
  free(again);
  free(text);
  free(m);
  return 0;
}
