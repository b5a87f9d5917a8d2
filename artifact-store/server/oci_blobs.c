/* Blob routes: reads with Range, and the upload protocol (monolithic POST,
 * chunked PATCH, resumable GET, closing PUT, DELETE, cross-repository
 * mount). Bodies stream into the upload session file; nothing is held in
 * memory. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http_errors.h"
#include "http_range.h"
#include "oci_request.h"

static void range_header(uint64_t size, char out[48]) {
  /* OCI convention (as distribution): an empty session reports "0-0". */
  snprintf(out, 48, "0-%" PRIu64, size > 0 ? size - 1 : 0);
}

static char *upload_location(const nimble_oci_request *req) {
  char *loc = NULL;
  if (asprintf(&loc, "/v2/%s/blobs/uploads/%s", req->route.name, req->upload_id) < 0) return NULL;
  return loc;
}

static enum MHD_Result upload_progress(struct MHD_Connection *c, nimble_oci_request *req,
                                       unsigned status, uint64_t size) {
  char *loc = upload_location(req);
  if (!loc) return MHD_NO;
  char range[48];
  range_header(size, range);
  struct MHD_Response *r = nimble_oci_text_response("", 0, NULL);
  if (r) {
    MHD_add_response_header(r, "Location", loc);
    MHD_add_response_header(r, "Range", range);
    MHD_add_response_header(r, "Docker-Upload-UUID", req->upload_id);
  }
  free(loc);
  return nimble_oci_respond(c, req, status, r, 0);
}

static enum MHD_Result blob_created(struct MHD_Connection *c, nimble_oci_request *req,
                                    const nimble_digest_t *digest) {
  char text[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(digest, text);
  char *loc = NULL;
  if (asprintf(&loc, "/v2/%s/blobs/%s", req->route.name, text) < 0) return MHD_NO;
  struct MHD_Response *r = nimble_oci_text_response("", 0, NULL);
  if (r) {
    MHD_add_response_header(r, "Location", loc);
    MHD_add_response_header(r, "Docker-Content-Digest", text);
  }
  free(loc);
  return nimble_oci_respond(c, req, MHD_HTTP_CREATED, r, 0);
}

/* --- blobs ------------------------------------------------------------ */

enum MHD_Result nimble_oci_blob_read(nimble_oci_context *ctx, struct MHD_Connection *c,
                                     nimble_oci_request *req) {
  nimble_digest_t digest;
  nimble_status_t s = nimble_digest_parse(req->route.arg, &digest);
  if (s) return nimble_oci_send_status(c, req, MHD_HTTP_BAD_REQUEST, NIMBLE_OCI_DIGEST_INVALID, s);
  int fd = -1;
  uint64_t size = 0;
  s = nimble_store_fs_blob_open(ctx->store, &digest, &fd, &size);
  if (s && nimble_status_code(s) == NIMBLE_NOT_FOUND)
    return nimble_oci_send_status(c, req, MHD_HTTP_NOT_FOUND, NIMBLE_OCI_BLOB_UNKNOWN, s);
  if (s) return nimble_oci_send_internal(c, req, s);

  uint64_t start = 0, length = size;
  nimble_http_range_result rr =
      nimble_http_range_parse(nimble_oci_header(c, "Range"), size, &start, &length);
  char content_range[96];
  if (rr == NIMBLE_RANGE_UNSATISFIABLE) {
    close(fd);
    snprintf(content_range, sizeof content_range, "bytes */%" PRIu64, size);
    char msg[128];
    snprintf(msg, sizeof msg, "range '%s' is outside the blob of %" PRIu64 " bytes",
             nimble_oci_header(c, "Range"), size);
    return nimble_oci_send_error(c, req, MHD_HTTP_RANGE_NOT_SATISFIABLE, NIMBLE_OCI_SIZE_INVALID,
                                 msg, "Content-Range", content_range, NULL);
  }
  /* libmicrohttpd owns fd from here and sends it with sendfile. */
  struct MHD_Response *r = MHD_create_response_from_fd_at_offset64(length, fd, start);
  if (!r) {
    close(fd);
    return MHD_NO;
  }
  char text[NIMBLE_DIGEST_STRING_LEN + 1], etag[NIMBLE_DIGEST_STRING_LEN + 3];
  nimble_digest_format(&digest, text);
  snprintf(etag, sizeof etag, "\"%s\"", text);
  MHD_add_response_header(r, "Content-Type", "application/octet-stream");
  MHD_add_response_header(r, "Docker-Content-Digest", text);
  MHD_add_response_header(r, "ETag", etag);
  MHD_add_response_header(r, "Accept-Ranges", "bytes");
  if (rr == NIMBLE_RANGE_PARTIAL) {
    snprintf(content_range, sizeof content_range, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, start,
             start + length - 1, size);
    MHD_add_response_header(r, "Content-Range", content_range);
    return nimble_oci_respond(c, req, MHD_HTTP_PARTIAL_CONTENT, r, length);
  }
  return nimble_oci_respond(c, req, MHD_HTTP_OK, r, length);
}

/* Refuses a body that would take the session past the size limit, from its
 * declared Content-Length, before reading any of it. */
static enum MHD_Result check_declared_size(nimble_oci_context *ctx, struct MHD_Connection *c,
                                           nimble_oci_request *req, uint64_t offset, int *refused) {
  uint64_t declared = 0;
  *refused = 1;
  int has = nimble_oci_content_length(c, &declared);
  if (has < 0)
    return nimble_oci_send_error(c, req, MHD_HTTP_BAD_REQUEST, NIMBLE_OCI_SIZE_INVALID,
                                 "Content-Length is not a number", NULL);
  uint64_t limit = nimble_store_fs_max_blob_size(ctx->store);
  if (declared > limit || offset > limit - declared) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "upload of %" PRIu64 " more bytes after %" PRIu64
             " would exceed the blob size limit of %" PRIu64 " bytes",
             declared, offset, limit);
    return nimble_oci_send_error(c, req, MHD_HTTP_CONTENT_TOO_LARGE, NIMBLE_OCI_SIZE_INVALID, msg,
                                 NULL);
  }
  *refused = 0;
  return MHD_YES;
}

/* Maps a failure to open a session for writing. */
static enum MHD_Result session_error(struct MHD_Connection *c, nimble_oci_request *req,
                                     nimble_status_t s) {
  switch (nimble_status_code(s)) {
    case NIMBLE_NOT_FOUND:
    case NIMBLE_INVALID_ARGUMENT:
      return nimble_oci_send_status(c, req, MHD_HTTP_NOT_FOUND, NIMBLE_OCI_BLOB_UPLOAD_UNKNOWN, s);
    case NIMBLE_FAILED_PRECONDITION:
      return nimble_oci_send_status(c, req, MHD_HTTP_CONFLICT, NIMBLE_OCI_BLOB_UPLOAD_INVALID, s);
    default:
      return nimble_oci_send_internal(c, req, s);
  }
}

enum MHD_Result nimble_oci_upload_new(nimble_oci_context *ctx, struct MHD_Connection *c,
                                      nimble_oci_request *req) {
  if (!nimble_oci_is_method(req, "POST")) return nimble_oci_method_not_allowed(c, req, "POST");
  const char *mount = nimble_oci_query(c, "mount");
  nimble_digest_t digest;
  if (mount && nimble_status_consume(nimble_digest_parse(mount, &digest)) == NIMBLE_OK &&
      nimble_status_consume(nimble_store_fs_blob_stat(ctx->store, &digest, NULL)) == NIMBLE_OK) {
    /* Blobs are global, so a mount of a stored blob is already done. */
    return blob_created(c, req, &digest);
  }
  const char *digest_text = nimble_oci_query(c, "digest");
  uint64_t declared = 0;
  if (!digest_text && nimble_oci_content_length(c, &declared) != 0 && declared > 0)
    return nimble_oci_send_error(
        c, req, MHD_HTTP_BAD_REQUEST, NIMBLE_OCI_DIGEST_INVALID,
        "a POST with a body is a monolithic upload and needs ?digest=", NULL);
  if (digest_text) {
    nimble_status_t s = nimble_digest_parse(digest_text, &req->digest);
    if (s)
      return nimble_oci_send_status(c, req, MHD_HTTP_BAD_REQUEST, NIMBLE_OCI_DIGEST_INVALID, s);
    int refused;
    enum MHD_Result ret = check_declared_size(ctx, c, req, 0, &refused);
    if (refused) return ret;
  }
  nimble_status_t s = nimble_store_fs_upload_start(ctx->store, req->upload_id);
  if (s) return nimble_oci_send_internal(c, req, s);
  if (!digest_text) return upload_progress(c, req, MHD_HTTP_ACCEPTED, 0);
  s = nimble_store_fs_upload_open(ctx->store, req->upload_id, &req->writer, NULL);
  if (s) return nimble_oci_send_internal(c, req, s);
  req->body = NIMBLE_OCI_BODY_UPLOAD;
  req->commit = 1;
  req->fresh_session = 1;
  return MHD_YES;
}

enum MHD_Result nimble_oci_upload_existing(nimble_oci_context *ctx, struct MHD_Connection *c,
                                           nimble_oci_request *req) {
  nimble_status_t s = nimble_store_fs_upload_id_check(req->route.arg);
  if (s)
    return nimble_oci_send_status(c, req, MHD_HTTP_NOT_FOUND, NIMBLE_OCI_BLOB_UPLOAD_UNKNOWN, s);
  memcpy(req->upload_id, req->route.arg, NIMBLE_STORE_UPLOAD_ID_LEN + 1);

  if (nimble_oci_is_method(req, "GET")) {
    uint64_t size = 0;
    s = nimble_store_fs_upload_size(ctx->store, req->upload_id, &size);
    if (s) return session_error(c, req, s);
    return upload_progress(c, req, MHD_HTTP_NO_CONTENT, size);
  }
  if (nimble_oci_is_method(req, "DELETE")) {
    s = nimble_store_fs_upload_cancel(ctx->store, req->upload_id);
    if (s) return session_error(c, req, s);
    return nimble_oci_empty(c, req, MHD_HTTP_NO_CONTENT);
  }
  if (!nimble_oci_is_method(req, "PATCH") && !nimble_oci_is_method(req, "PUT"))
    return nimble_oci_method_not_allowed(c, req, "GET, PATCH, PUT, DELETE");

  if (nimble_oci_is_method(req, "PUT")) {
    const char *digest_text = nimble_oci_query(c, "digest");
    if (!digest_text)
      return nimble_oci_send_error(c, req, MHD_HTTP_BAD_REQUEST, NIMBLE_OCI_DIGEST_INVALID,
                                   "closing an upload needs ?digest=", NULL);
    s = nimble_digest_parse(digest_text, &req->digest);
    if (s)
      return nimble_oci_send_status(c, req, MHD_HTTP_BAD_REQUEST, NIMBLE_OCI_DIGEST_INVALID, s);
    req->commit = 1;
  }
  uint64_t offset = 0;
  s = nimble_store_fs_upload_open(ctx->store, req->upload_id, &req->writer, &offset);
  if (s) return session_error(c, req, s);
  const char *cr = nimble_oci_header(c, "Content-Range");
  if (cr) {
    uint64_t start = 0, end = 0;
    s = nimble_http_content_range_parse(cr, &start, &end);
    if (s)
      return nimble_oci_send_status(c, req, MHD_HTTP_BAD_REQUEST, NIMBLE_OCI_BLOB_UPLOAD_INVALID,
                                    s);
    uint64_t declared = 0;
    if (start != offset ||
        (nimble_oci_content_length(c, &declared) > 0 && declared != end - start + 1)) {
      char *loc = upload_location(req);
      char range[48], msg[160];
      range_header(offset, range);
      snprintf(msg, sizeof msg,
               "chunk %" PRIu64 "-%" PRIu64 " does not continue the upload, which has %" PRIu64
               " bytes (or Content-Length disagrees)",
               start, end, offset);
      enum MHD_Result ret = nimble_oci_send_error(
          c, req, MHD_HTTP_RANGE_NOT_SATISFIABLE, NIMBLE_OCI_BLOB_UPLOAD_INVALID, msg, "Location",
          loc ? loc : "", "Range", range, "Docker-Upload-UUID", req->upload_id, NULL);
      free(loc);
      return ret;
    }
  }
  int refused;
  enum MHD_Result ret = check_declared_size(ctx, c, req, offset, &refused);
  if (refused) return ret;
  req->body = NIMBLE_OCI_BODY_UPLOAD;
  return MHD_YES;
}

enum MHD_Result nimble_oci_upload_finish(nimble_oci_context *ctx, struct MHD_Connection *c,
                                         nimble_oci_request *req) {
  nimble_status_t s = req->body_error;
  req->body_error = NULL;
  nimble_status_t closed = nimble_store_upload_writer_close(req->writer);
  req->writer = NULL;
  if (!s)
    s = closed;
  else
    nimble_status_free(closed);
  if (s) {
    if (req->fresh_session)
      nimble_status_free(nimble_store_fs_upload_cancel(ctx->store, req->upload_id));
    return nimble_oci_send_internal(c, req, s);
  }
  if (!req->commit) {
    uint64_t size = 0;
    s = nimble_store_fs_upload_size(ctx->store, req->upload_id, &size);
    if (s) return session_error(c, req, s);
    return upload_progress(c, req, MHD_HTTP_ACCEPTED, size);
  }
  s = nimble_store_fs_upload_commit(ctx->store, req->upload_id, &req->digest, NULL);
  if (!s) return blob_created(c, req, &req->digest);
  if (nimble_status_code(s) == NIMBLE_DATA_LOSS)
    return nimble_oci_send_status(c, req, MHD_HTTP_BAD_REQUEST, NIMBLE_OCI_DIGEST_INVALID, s);
  if (req->fresh_session)
    nimble_status_free(nimble_store_fs_upload_cancel(ctx->store, req->upload_id));
  if (nimble_status_code(s) == NIMBLE_NOT_FOUND ||
      nimble_status_code(s) == NIMBLE_FAILED_PRECONDITION)
    return session_error(c, req, s);
  return nimble_oci_send_internal(c, req, s);
}
