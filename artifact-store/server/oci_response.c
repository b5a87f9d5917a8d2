/* Building and queueing responses: the API version header on every
 * response, OCI error bodies, and the request header accessors. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_errors.h"
#include "http_range.h"
#include "oci_request.h"

enum MHD_Result nimble_oci_respond(struct MHD_Connection *c, nimble_oci_request *req,
                                   unsigned status, struct MHD_Response *r, uint64_t body_size) {
  /* A response ends the request's use of its upload session: let go of the
   * lock now, not when libmicrohttpd reports completion, or a client's next
   * request on the session could find it still busy. */
  if (req->writer) {
    nimble_status_free(nimble_store_upload_writer_close(req->writer));
    req->writer = NULL;
  }
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Docker-Distribution-API-Version", "registry/2.0");
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  req->queued = 1;
  req->status = status;
  req->sent = strcmp(req->method, "HEAD") == 0 ? 0 : body_size;
  return ret;
}

struct MHD_Response *nimble_oci_text_response(const char *body, size_t len,
                                              const char *content_type) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
  if (r && content_type) MHD_add_response_header(r, "Content-Type", content_type);
  return r;
}

enum MHD_Result nimble_oci_empty(struct MHD_Connection *c, nimble_oci_request *req,
                                 unsigned status) {
  return nimble_oci_respond(c, req, status, nimble_oci_text_response("", 0, NULL), 0);
}

/* Sends an OCI error; `extra` header pairs (name, value, ..., NULL) follow. */
enum MHD_Result nimble_oci_send_error(struct MHD_Connection *c, nimble_oci_request *req,
                                      unsigned status, const char *code, const char *message, ...) {
  char *body = nimble_oci_error_body(code, message, NULL);
  if (!body) return MHD_NO;
  struct MHD_Response *r = nimble_oci_text_response(body, strlen(body), "application/json");
  size_t len = strlen(body);
  free(body);
  if (!r) return MHD_NO;
  va_list ap;
  va_start(ap, message);
  const char *name;
  while ((name = va_arg(ap, const char *)) != NULL) {
    const char *value = va_arg(ap, const char *);
    MHD_add_response_header(r, name, value);
  }
  va_end(ap);
  if (status == MHD_HTTP_UNAUTHORIZED)
    MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"nimble\"");
  return nimble_oci_respond(c, req, status, r, len);
}

/* Sends `s` (consumed) as an error with `code`. */
enum MHD_Result nimble_oci_send_status(struct MHD_Connection *c, nimble_oci_request *req,
                                       unsigned status, const char *code, nimble_status_t s) {
  enum MHD_Result ret = nimble_oci_send_error(c, req, status, code, nimble_status_message(s), NULL);
  nimble_status_free(s);
  return ret;
}

/* Faults of our own (disk, memory) are 500 UNKNOWN; everything else the
 * caller maps before reaching here. */
enum MHD_Result nimble_oci_send_internal(struct MHD_Connection *c, nimble_oci_request *req,
                                         nimble_status_t s) {
  if (nimble_status_code(s) == NIMBLE_RESOURCE_EXHAUSTED)
    return nimble_oci_send_status(c, req, MHD_HTTP_CONTENT_TOO_LARGE, NIMBLE_OCI_SIZE_INVALID, s);
  return nimble_oci_send_status(c, req, MHD_HTTP_INTERNAL_SERVER_ERROR, NIMBLE_OCI_UNKNOWN, s);
}

enum MHD_Result nimble_oci_method_not_allowed(struct MHD_Connection *c, nimble_oci_request *req,
                                              const char *allow) {
  char msg[96];
  snprintf(msg, sizeof msg, "method %s is not supported here (allowed: %s)", req->method, allow);
  return nimble_oci_send_error(c, req, MHD_HTTP_METHOD_NOT_ALLOWED, NIMBLE_OCI_UNSUPPORTED, msg,
                               "Allow", allow, NULL);
}

/* --- small helpers ---------------------------------------------------- */

const char *nimble_oci_header(struct MHD_Connection *c, const char *name) {
  return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

const char *nimble_oci_query(struct MHD_Connection *c, const char *name) {
  return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
}

/* Content-Length as declared; 0 when absent (chunked bodies are checked as
 * they stream). -1 when malformed. */
int nimble_oci_content_length(struct MHD_Connection *c, uint64_t *out) {
  const char *v = nimble_oci_header(c, "Content-Length");
  *out = 0;
  if (!v) return 0;
  return nimble_http_content_length_parse(v, out);
}

int nimble_oci_is_method(const nimble_oci_request *req, const char *m) {
  return strcmp(req->method, m) == 0;
}
