/* Manifest and tag routes: byte-exact manifests by tag or digest, and the
 * sorted, paginated tag list. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_errors.h"
#include "oci_request.h"

static enum MHD_Result manifest_lookup_error(struct MHD_Connection *c, nimble_oci_request *req,
                                             nimble_oci_context *ctx, nimble_status_t s) {
  switch (nimble_status_code(s)) {
    case NIMBLE_INVALID_ARGUMENT:
      return nimble_oci_send_status(
          c, req, MHD_HTTP_BAD_REQUEST,
          strchr(req->route.arg, ':') ? NIMBLE_OCI_DIGEST_INVALID : NIMBLE_OCI_MANIFEST_INVALID, s);
    case NIMBLE_NOT_FOUND:
      return nimble_oci_send_status(c, req, MHD_HTTP_NOT_FOUND,
                                    nimble_store_fs_repo_exists(ctx->store, req->route.name)
                                        ? NIMBLE_OCI_MANIFEST_UNKNOWN
                                        : NIMBLE_OCI_NAME_UNKNOWN,
                                    s);
    default:
      return nimble_oci_send_internal(c, req, s);
  }
}

enum MHD_Result nimble_oci_manifest_read(nimble_oci_context *ctx, struct MHD_Connection *c,
                                         nimble_oci_request *req) {
  void *bytes = NULL;
  size_t size = 0;
  char *media = NULL;
  nimble_digest_t digest;
  nimble_status_t s = nimble_store_fs_manifest_get(ctx->store, req->route.name, req->route.arg,
                                                   &bytes, &size, &media, &digest);
  if (s) return manifest_lookup_error(c, req, ctx, s);
  struct MHD_Response *r = MHD_create_response_from_buffer(size, bytes, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(bytes);
    free(media);
    return MHD_NO;
  }
  char text[NIMBLE_DIGEST_STRING_LEN + 1], etag[NIMBLE_DIGEST_STRING_LEN + 3];
  nimble_digest_format(&digest, text);
  snprintf(etag, sizeof etag, "\"%s\"", text);
  MHD_add_response_header(r, "Content-Type", media);
  MHD_add_response_header(r, "Docker-Content-Digest", text);
  MHD_add_response_header(r, "ETag", etag);
  free(media);
  return nimble_oci_respond(c, req, MHD_HTTP_OK, r, size);
}

enum MHD_Result nimble_oci_manifest_begin_put(nimble_oci_context *ctx, struct MHD_Connection *c,
                                              nimble_oci_request *req) {
  uint64_t declared = 0;
  int has = nimble_oci_content_length(c, &declared);
  if (has < 0)
    return nimble_oci_send_error(c, req, MHD_HTTP_BAD_REQUEST, NIMBLE_OCI_SIZE_INVALID,
                                 "Content-Length is not a number", NULL);
  if (declared > NIMBLE_STORE_MANIFEST_MAX) {
    char msg[128];
    snprintf(msg, sizeof msg, "manifest of %" PRIu64 " bytes exceeds the limit of %u bytes",
             declared, NIMBLE_STORE_MANIFEST_MAX);
    return nimble_oci_send_error(c, req, MHD_HTTP_CONTENT_TOO_LARGE, NIMBLE_OCI_SIZE_INVALID, msg,
                                 NULL);
  }
  const char *ct = nimble_oci_header(c, "Content-Type");
  if (ct) {
    /* Parameters (";charset=...") are not part of the media type. */
    size_t n = strcspn(ct, "; \t");
    req->content_type = strndup(ct, n);
    if (!req->content_type) return MHD_NO;
  }
  req->body = NIMBLE_OCI_BODY_MANIFEST;
  return MHD_YES;
}

enum MHD_Result nimble_oci_manifest_finish(nimble_oci_context *ctx, struct MHD_Connection *c,
                                           nimble_oci_request *req) {
  if (req->body_error) {
    nimble_status_t s = req->body_error;
    req->body_error = NULL;
    return nimble_oci_send_internal(c, req, s);
  }
  nimble_digest_t digest;
  nimble_status_t s =
      nimble_store_fs_manifest_put(ctx->store, req->route.name, req->route.arg, req->content_type,
                                   req->manifest ? req->manifest : "", req->manifest_len, &digest);
  if (s) {
    switch (nimble_status_code(s)) {
      case NIMBLE_NOT_FOUND:
        return nimble_oci_send_status(c, req, MHD_HTTP_BAD_REQUEST,
                                      NIMBLE_OCI_MANIFEST_BLOB_UNKNOWN, s);
      case NIMBLE_DATA_LOSS:
        return nimble_oci_send_status(c, req, MHD_HTTP_BAD_REQUEST, NIMBLE_OCI_DIGEST_INVALID, s);
      case NIMBLE_INVALID_ARGUMENT:
      case NIMBLE_FAILED_PRECONDITION:
      case NIMBLE_UNIMPLEMENTED:
        return nimble_oci_send_status(c, req, MHD_HTTP_BAD_REQUEST, NIMBLE_OCI_MANIFEST_INVALID, s);
      default:
        return nimble_oci_send_internal(c, req, s);
    }
  }
  char text[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&digest, text);
  char *loc = NULL;
  if (asprintf(&loc, "/v2/%s/manifests/%s", req->route.name, text) < 0) return MHD_NO;
  struct MHD_Response *r = nimble_oci_text_response("", 0, NULL);
  if (r) {
    MHD_add_response_header(r, "Location", loc);
    MHD_add_response_header(r, "Docker-Content-Digest", text);
  }
  free(loc);
  return nimble_oci_respond(c, req, MHD_HTTP_CREATED, r, 0);
}

enum MHD_Result nimble_oci_tags_list(nimble_oci_context *ctx, struct MHD_Connection *c,
                                     nimble_oci_request *req) {
  char **tags = NULL;
  size_t count = 0;
  nimble_status_t s = nimble_store_fs_tags_list(ctx->store, req->route.name, &tags, &count);
  if (s && nimble_status_code(s) == NIMBLE_NOT_FOUND)
    return nimble_oci_send_status(c, req, MHD_HTTP_NOT_FOUND, NIMBLE_OCI_NAME_UNKNOWN, s);
  if (s) return nimble_oci_send_internal(c, req, s);
  /* Pagination: ?n=<max> and ?last=<tag> (tags after it, in order). */
  const char *n_text = nimble_oci_query(c, "n"), *last = nimble_oci_query(c, "last");
  size_t limit = SIZE_MAX;
  if (n_text) {
    char *end = NULL;
    unsigned long long v = strtoull(n_text, &end, 10);
    if (!*n_text || *end || n_text[0] == '-') {
      nimble_store_fs_tags_free(tags, count);
      return nimble_oci_send_error(c, req, MHD_HTTP_BAD_REQUEST, NIMBLE_OCI_UNSUPPORTED,
                                   "query parameter n is not a non-negative number", NULL);
    }
    limit = v < SIZE_MAX ? (size_t)v : SIZE_MAX;
  }
  size_t first = 0;
  while (last && first < count && strcmp(tags[first], last) <= 0) first++;
  json_t *list = json_array();
  size_t i = first;
  for (; i < count && (size_t)(i - first) < limit; i++)
    json_array_append_new(list, json_string(tags[i]));
  int more = i < count && i > first;
  char *link = NULL;
  if (more && asprintf(&link, "</v2/%s/tags/list?n=%zu&last=%s>; rel=\"next\"", req->route.name,
                       limit, tags[i - 1]) < 0)
    link = NULL;
  nimble_store_fs_tags_free(tags, count);
  json_t *body = json_pack("{s:s, s:o}", "name", req->route.name, "tags", list);
  char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
  json_decref(body);
  if (!text) {
    free(link);
    return MHD_NO;
  }
  size_t len = strlen(text);
  struct MHD_Response *r = nimble_oci_text_response(text, len, "application/json");
  free(text);
  if (r && link) MHD_add_response_header(r, "Link", link);
  free(link);
  return nimble_oci_respond(c, req, MHD_HTTP_OK, r, len);
}
