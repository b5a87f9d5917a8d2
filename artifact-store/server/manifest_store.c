/* Manifests and tags of a repository.
 *
 * A manifest's bytes are stored as a blob (so they are content-addressed and
 * served byte-exact); the repository holds a revision link naming it, with
 * the media type it was pushed with beside it, and tag files pointing at
 * revisions. The link file is written last: it is what makes a revision
 * exist, so a crash before it leaves no half-pushed manifest visible. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store_fs_internal.h"

static int is_digest_reference(const char *reference) { return strchr(reference, ':') != NULL; }

static int media_type_supported(const char *m) {
  return !strcmp(m, NIMBLE_MEDIA_TYPE_OCI_MANIFEST) || !strcmp(m, NIMBLE_MEDIA_TYPE_OCI_INDEX) ||
         !strcmp(m, NIMBLE_MEDIA_TYPE_DOCKER_MANIFEST) || !strcmp(m, NIMBLE_MEDIA_TYPE_DOCKER_LIST);
}

/* The media type the manifest declares itself, or NULL; caller frees. */
static char *declared_media_type(const void *bytes, size_t size) {
  json_t *root = json_loadb(bytes, size, 0, NULL);
  json_t *m = root ? json_object_get(root, "mediaType") : NULL;
  char *out = json_is_string(m) ? strdup(json_string_value(m)) : NULL;
  json_decref(root);
  return out;
}

static nimble_status_t check_name_and_reference(const char *name, const char *reference,
                                                nimble_digest_t *out_digest, int *out_is_digest) {
  NIMBLE_RETURN_IF_ERROR(nimble_store_name_check(name));
  if (!reference) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "reference is missing");
  *out_is_digest = is_digest_reference(reference);
  if (*out_is_digest) return nimble_digest_parse(reference, out_digest);
  return nimble_store_tag_check(reference);
}

int nimble_store_fs_repo_exists(nimble_store_fs *store, const char *name) {
  if (nimble_status_consume(nimble_store_name_check(name)) != NIMBLE_OK) return 0;
  char *path = nimble_store_path(store, "repositories/%s/_manifests", name);
  struct stat st;
  int ok = path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
  free(path);
  return ok;
}

nimble_status_t nimble_store_fs_manifest_put(nimble_store_fs *store, const char *name,
                                             const char *reference, const char *media_type,
                                             const void *bytes, size_t size,
                                             nimble_digest_t *out_digest) {
  nimble_digest_t want;
  int by_digest = 0;
  NIMBLE_RETURN_IF_ERROR(check_name_and_reference(name, reference, &want, &by_digest));
  if (size > NIMBLE_STORE_MANIFEST_MAX)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,
                              "manifest of %zu bytes exceeds the limit of %u bytes", size,
                              NIMBLE_STORE_MANIFEST_MAX);
  char *declared = NULL;
  if (!media_type || !media_type_supported(media_type)) {
    /* Clients that send a generic Content-Type still name the type inside. */
    declared = declared_media_type(bytes, size);
    if (declared && media_type_supported(declared)) media_type = declared;
  }
  nimble_digest_t *refs = NULL;
  int64_t *sizes = NULL;
  size_t count = 0;
  nimble_status_t s =
      media_type ? nimble_store_manifest_references(bytes, size, media_type, &refs, &sizes, &count)
                 : nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                      "manifest has no media type: no Content-Type "
                                      "and no mediaType field");
  for (size_t i = 0; !s && i < count; i++) {
    uint64_t have = 0;
    s = nimble_store_fs_blob_stat(store, &refs[i], &have);
    if (s) {
      char where[48];
      if (!strcmp(media_type, NIMBLE_MEDIA_TYPE_OCI_INDEX) ||
          !strcmp(media_type, NIMBLE_MEDIA_TYPE_DOCKER_LIST))
        snprintf(where, sizeof where, "manifests[%zu]", i);
      else if (i == 0)
        snprintf(where, sizeof where, "config");
      else
        snprintf(where, sizeof where, "layers[%zu]", i - 1);
      s = nimble_status_annotate(s, "%s references a missing blob", where);
    } else if (have != (uint64_t)sizes[i]) {
      char text[NIMBLE_DIGEST_STRING_LEN + 1];
      nimble_digest_format(&refs[i], text);
      s = nimble_status_make(NIMBLE_FAILED_PRECONDITION,
                             "manifest gives blob %s size %lld, the stored blob has %llu bytes",
                             text, (long long)sizes[i], (unsigned long long)have);
    }
  }
  free(refs);
  free(sizes);

  nimble_digest_t digest;
  nimble_digest_compute(bytes, size, &digest);
  char text[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&digest, text);
  if (!s && by_digest && !nimble_digest_equal(&digest, &want))
    s = nimble_status_make(NIMBLE_DATA_LOSS, "manifest pushed as %s has digest %s", reference,
                           text);
  if (!s) s = nimble_store_fs_blob_put(store, bytes, size, &digest, NULL);

  char hex[65];
  nimble_digest_format_hex(&digest, hex);
  char line[NIMBLE_DIGEST_STRING_LEN + 2];
  snprintf(line, sizeof line, "%s\n", text);
  if (!s) {
    char *p = nimble_store_path(store, "repositories/%s/_manifests/revisions/sha256/%s/media_type",
                                name, hex);
    s = p ? nimble_store_write_atomic(store, p, media_type, strlen(media_type))
          : NIMBLE_OOM();
    free(p);
  }
  if (!s) {
    char *p =
        nimble_store_path(store, "repositories/%s/_manifests/revisions/sha256/%s/link", name, hex);
    s = p ? nimble_store_write_atomic(store, p, line, strlen(line))
          : NIMBLE_OOM();
    free(p);
  }
  if (!s) {
    /* The tags directory exists for every repository, tagged or not, so the
     * tag list of a repository pushed only by digest is empty, not unknown. */
    char *p = nimble_store_path(store, "repositories/%s/_manifests/tags", name);
    s = p ? nimble_store_mkdirs(p) : NIMBLE_OOM();
    free(p);
  }
  if (!s && !by_digest) {
    char *p = nimble_store_path(store, "repositories/%s/_manifests/tags/%s", name, reference);
    s = p ? nimble_store_write_atomic(store, p, line, strlen(line))
          : NIMBLE_OOM();
    free(p);
  }
  free(declared);
  if (s) return nimble_status_annotate(s, "pushing manifest %s:%s", name, reference);
  if (out_digest) *out_digest = digest;
  return nimble_ok();
}

static nimble_status_t read_link(const char *path, nimble_digest_t *out) {
  char *text = NULL;
  size_t n = 0;
  NIMBLE_RETURN_IF_ERROR(nimble_store_read_file(path, 256, &text, &n));
  while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r')) text[--n] = '\0';
  nimble_status_t s = nimble_digest_parse(text, out);
  free(text);
  if (s) {
    nimble_status_t corrupt = nimble_status_make(NIMBLE_DATA_LOSS, "link file %s is corrupt: %s",
                                                 path, nimble_status_message(s));
    nimble_status_free(s);
    return corrupt;
  }
  return nimble_ok();
}

nimble_status_t nimble_store_fs_manifest_resolve(nimble_store_fs *store, const char *name,
                                                 const char *reference,
                                                 nimble_digest_t *out_digest) {
  nimble_digest_t digest;
  int by_digest = 0;
  NIMBLE_RETURN_IF_ERROR(check_name_and_reference(name, reference, &digest, &by_digest));
  if (!nimble_store_fs_repo_exists(store, name))
    return nimble_status_make(NIMBLE_NOT_FOUND, "repository '%s' is unknown", name);
  if (!by_digest) {
    char *p = nimble_store_path(store, "repositories/%s/_manifests/tags/%s", name, reference);
    if (!p) return NIMBLE_OOM();
    nimble_status_t s = read_link(p, &digest);
    free(p);
    if (s && nimble_status_code(s) == NIMBLE_NOT_FOUND) {
      nimble_status_free(s);
      return nimble_status_make(NIMBLE_NOT_FOUND, "tag '%s' is unknown in repository '%s'",
                                reference, name);
    }
    NIMBLE_RETURN_IF_ERROR(s);
  }
  char hex[65];
  nimble_digest_format_hex(&digest, hex);
  char *p =
      nimble_store_path(store, "repositories/%s/_manifests/revisions/sha256/%s/link", name, hex);
  if (!p) return NIMBLE_OOM();
  nimble_digest_t linked;
  nimble_status_t s = read_link(p, &linked);
  free(p);
  if (s && nimble_status_code(s) == NIMBLE_NOT_FOUND) {
    nimble_status_free(s);
    return nimble_status_make(NIMBLE_NOT_FOUND, "manifest sha256:%s is unknown in repository '%s'",
                              hex, name);
  }
  NIMBLE_RETURN_IF_ERROR(s);
  if (!nimble_digest_equal(&linked, &digest))
    return nimble_status_make(NIMBLE_DATA_LOSS,
                              "revision link of sha256:%s in '%s' names another digest", hex, name);
  *out_digest = digest;
  return nimble_ok();
}

nimble_status_t nimble_store_fs_manifest_get(nimble_store_fs *store, const char *name,
                                             const char *reference, void **out_bytes,
                                             size_t *out_size, char **out_media_type,
                                             nimble_digest_t *out_digest) {
  nimble_digest_t digest;
  NIMBLE_RETURN_IF_ERROR(nimble_store_fs_manifest_resolve(store, name, reference, &digest));
  char hex[65];
  nimble_digest_format_hex(&digest, hex);
  char *media = NULL;
  if (out_media_type) {
    char *p = nimble_store_path(store, "repositories/%s/_manifests/revisions/sha256/%s/media_type",
                                name, hex);
    if (!p) return NIMBLE_OOM();
    nimble_status_t s = nimble_store_read_file(p, 256, &media, NULL);
    free(p);
    NIMBLE_RETURN_IF_ERROR_CTX(s, "media type of manifest sha256:%s", hex);
  }
  char *bytes = NULL;
  size_t size = 0;
  if (out_bytes) {
    char *p = nimble_store_blob_path(store, &digest);
    nimble_status_t s = p ? nimble_store_read_file(p, NIMBLE_STORE_MANIFEST_MAX, &bytes, &size)
                          : NIMBLE_OOM();
    free(p);
    if (s) {
      free(media);
      return nimble_status_annotate(s, "manifest sha256:%s in '%s'", hex, name);
    }
    nimble_digest_t check;
    nimble_digest_compute(bytes, size, &check);
    if (!nimble_digest_equal(&check, &digest)) {
      free(media);
      free(bytes);
      return nimble_status_make(NIMBLE_DATA_LOSS, "stored manifest sha256:%s is corrupt", hex);
    }
  }
  if (out_bytes) *out_bytes = bytes;
  if (out_size) *out_size = size;
  if (out_media_type) *out_media_type = media;
  if (out_digest) *out_digest = digest;
  return nimble_ok();
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

void nimble_store_fs_tags_free(char **tags, size_t count) {
  for (size_t i = 0; tags && i < count; i++) free(tags[i]);
  free(tags);
}

nimble_status_t nimble_store_fs_tags_list(nimble_store_fs *store, const char *name,
                                          char ***out_tags, size_t *out_count) {
  NIMBLE_RETURN_IF_ERROR(nimble_store_name_check(name));
  if (!nimble_store_fs_repo_exists(store, name))
    return nimble_status_make(NIMBLE_NOT_FOUND, "repository '%s' is unknown", name);
  char *p = nimble_store_path(store, "repositories/%s/_manifests/tags", name);
  if (!p) return NIMBLE_OOM();
  DIR *dir = opendir(p);
  if (!dir) {
    nimble_status_t s =
        errno == ENOENT ? nimble_ok()
                        : nimble_status_make(NIMBLE_IO_ERROR, "opening %s: %s", p, strerror(errno));
    free(p);
    if (!s) {
      *out_tags = NULL;
      *out_count = 0;
    }
    return s;
  }
  free(p);
  char **tags = NULL;
  size_t count = 0, cap = 0;
  nimble_status_t s = nimble_ok();
  struct dirent *e;
  while (!s && (e = readdir(dir)) != NULL) {
    if (nimble_status_consume(nimble_store_tag_check(e->d_name)) != NIMBLE_OK) continue;
    if (count == cap) {
      cap = cap ? cap * 2 : 16;
      char **n = realloc(tags, cap * sizeof *n);
      if (!n) {
        s = NIMBLE_OOM();
        break;
      }
      tags = n;
    }
    if (!(tags[count] = strdup(e->d_name)))
      s = NIMBLE_OOM();
    else
      count++;
  }
  closedir(dir);
  if (s) {
    nimble_store_fs_tags_free(tags, count);
    return s;
  }
  if (count) qsort(tags, count, sizeof *tags, compare_strings);
  *out_tags = tags;
  *out_count = count;
  return nimble_ok();
}
