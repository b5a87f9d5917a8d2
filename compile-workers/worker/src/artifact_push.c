/* The parts directory the compiler writes (docs/farm.md):
 *
 *   config.json   the artifact config blob (protocol/artifact_config.h)
 *   parts.json    {"layers":[{"file":"bytecode","mediaType":"..."}, ...]}
 *   <file>...     one file per layer, in the order listed
 *
 * Nothing is trusted: names must be plain file names, the config must
 * decode and describe this task, and the manifest must validate before
 * anything is pushed. */
#include "artifact_push.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nimble/artifact_config.h"
#include "nimble/manifest.h"

#define PARTS_MAX_INDEX (64 * 1024)

static nimble_status_t read_small_file(const char *path, size_t cap, char **out, size_t *out_size) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return nimble_status_make(NIMBLE_NOT_FOUND, "'%s' is missing", path);
  char *buf = malloc(cap + 1);
  if (!buf) {
    fclose(f);
    return NIMBLE_OOM();
  }
  size_t n = fread(buf, 1, cap + 1, f);
  fclose(f);
  if (n > cap) {
    free(buf);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "'%s' is over %zu bytes", path, cap);
  }
  buf[n] = '\0';
  *out = buf;
  *out_size = n;
  return nimble_ok();
}

static int plain_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 128 || s[0] == '.') return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      return 0;
  }
  return strcmp(s, "config.json") && strcmp(s, "parts.json");
}

static nimble_status_t check_config(const char *dir, const artifact_expect *expect,
                                    const char *bytes, size_t size) {
  nimble_artifact_config_t cfg;
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_artifact_config_decode(bytes, size, &cfg), "%s/config.json",
                             dir);
  nimble_status_t st = nimble_ok();
  char want[NIMBLE_DIGEST_STRING_LEN + 1], got[NIMBLE_DIGEST_STRING_LEN + 1];
  if (strcmp(cfg.target, expect->target)) {
    st = nimble_status_make(NIMBLE_INTERNAL, "%s/config.json: target is '%s', the task asked for '%s'",
                            dir, cfg.target, expect->target);
  } else if (!nimble_digest_equal(&cfg.model, expect->model)) {
    nimble_digest_format(&cfg.model, got);
    nimble_digest_format(expect->model, want);
    st = nimble_status_make(NIMBLE_INTERNAL, "%s/config.json: model is %s, the task compiled %s",
                            dir, got, want);
  } else if (strcmp(cfg.compiler_version, expect->compiler_version)) {
    st = nimble_status_make(NIMBLE_INTERNAL,
                            "%s/config.json: compiler version is '%s', this worker runs '%s'", dir,
                            cfg.compiler_version, expect->compiler_version);
  }
  nimble_artifact_config_deinit(&cfg);
  return st;
}

static nimble_status_t build_and_push(nimble_store_client *store, const char *dir, const char *repo,
                                      const json_t *layers, nimble_manifest_t *m) {
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", dir);
  nimble_digest_t d;
  uint64_t size;
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_store_push_blob_file(store, repo, path, &d, &size),
                             "pushing config.json");
  NIMBLE_RETURN_IF_ERROR(nimble_manifest_set_config(m, &d, (int64_t)size));
  for (size_t i = 0; i < json_array_size(layers); i++) {
    const json_t *l = json_array_get(layers, i);
    const char *file = json_string_value(json_object_get(l, "file"));
    const char *media = json_string_value(json_object_get(l, "mediaType"));
    if (!json_is_object(l) || !file || !media)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s/parts.json: layers[%zu]: needs string members file and mediaType",
                                dir, i);
    if (!plain_name(file))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s/parts.json: layers[%zu].file: '%s' is not a plain file name", dir,
                                i, file);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    struct stat stt;
    if (stat(path, &stt) != 0 || !S_ISREG(stt.st_mode))
      return nimble_status_make(NIMBLE_NOT_FOUND, "%s/parts.json: layers[%zu]: '%s' is missing",
                                dir, i, file);
    NIMBLE_RETURN_IF_ERROR_CTX(nimble_store_push_blob_file(store, repo, path, &d, &size),
                               "pushing %s", file);
    NIMBLE_RETURN_IF_ERROR_CTX(nimble_manifest_add_layer(m, media, &d, (int64_t)size, file),
                               "%s/parts.json: layers[%zu]", dir, i);
  }
  return nimble_ok();
}

nimble_status_t artifact_push_parts(nimble_store_client *store, const char *dir, const char *repo,
                                    const char *tag, const artifact_expect *expect,
                                    nimble_digest_t *out_manifest) {
  char path[4096];
  char *cfg = NULL, *index = NULL;
  size_t cfg_size, index_size;
  snprintf(path, sizeof path, "%s/config.json", dir);
  NIMBLE_RETURN_IF_ERROR(read_small_file(path, NIMBLE_MANIFEST_MAX_SIZE, &cfg, &cfg_size));
  nimble_status_t st = check_config(dir, expect, cfg, cfg_size);
  free(cfg);
  if (st) return st;
  snprintf(path, sizeof path, "%s/parts.json", dir);
  NIMBLE_RETURN_IF_ERROR(read_small_file(path, PARTS_MAX_INDEX, &index, &index_size));
  json_error_t jerr;
  json_t *root = json_loadb(index, index_size, JSON_REJECT_DUPLICATES, &jerr);
  free(index);
  if (!root)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s/parts.json: line %d: %s", dir, jerr.line,
                              jerr.text);
  const json_t *layers = json_object_get(root, "layers");
  if (!json_is_array(layers) || json_array_size(layers) == 0 ||
      json_array_size(layers) > NIMBLE_MANIFEST_MAX_LAYERS) {
    json_decref(root);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s/parts.json: layers: expected an array of 1 to %d parts", dir,
                              NIMBLE_MANIFEST_MAX_LAYERS);
  }
  nimble_manifest_t m;
  nimble_manifest_init(&m);
  st = build_and_push(store, dir, repo, layers, &m);
  json_decref(root);
  if (!st) st = nimble_manifest_check_target(&m, expect->target);
  char *bytes = NULL;
  size_t n = 0;
  if (!st) {
    /* Validation happens here (a metadata and a bytecode layer, known
     * media types): name the compiler's index as the place at fault. */
    st = nimble_manifest_encode(&m, &bytes, &n);
    if (st) st = nimble_status_annotate(st, "%s/parts.json", dir);
  }
  if (!st)
    st = nimble_store_push_manifest(store, repo, tag, bytes, n, NIMBLE_MEDIA_TYPE_OCI_MANIFEST,
                                    out_manifest);
  free(bytes);
  nimble_manifest_deinit(&m);
  return st;
}
