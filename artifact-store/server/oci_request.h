/* Private to the HTTP layer: the state of one request and the helpers the
 * route handlers (oci_blobs.c, oci_manifests.c) share to build responses. */
#ifndef NIMBLE_STORE_OCI_REQUEST_H
#define NIMBLE_STORE_OCI_REQUEST_H

#include <microhttpd.h>
#include <stdint.h>
#include <time.h>

#include "oci_routes.h"

/* Bodies up to this size are read before the request is judged. */
#define NIMBLE_OCI_SMALL_BODY ((size_t)64 * 1024)

/* What the request body is for. */
typedef enum nimble_oci_body_mode {
  NIMBLE_OCI_BODY_IGNORE,   /* none expected; discarded */
  NIMBLE_OCI_BODY_UPLOAD,   /* streamed into an upload session */
  NIMBLE_OCI_BODY_MANIFEST, /* buffered, at most 4 MiB */
} nimble_oci_body_mode;

/* One request, from its first handler call to its completion. */
typedef struct nimble_oci_request {
  nimble_oci_route route;
  char method[16];
  char *path; /* owned, for the log line */
  struct timespec started;
  nimble_oci_body_mode body;
  nimble_store_upload_writer *writer; /* owned while the body streams */
  char upload_id[NIMBLE_STORE_UPLOAD_ID_LEN + 1];
  int commit;             /* commit the upload after the body */
  int fresh_session;      /* session made by this request: drop it on failure */
  nimble_digest_t digest; /* for commit */
  char *manifest;         /* owned manifest body */
  size_t manifest_len, manifest_cap;
  char *content_type; /* owned, the manifest's */
  uint64_t received;
  nimble_status_t body_error; /* first failure while reading the body */
  int queued;                 /* a response is queued */
  int deferred;               /* begin() waits for the end of the body */
  char *early;                /* owned; the small body held until then */
  size_t early_len;
  unsigned status;
  uint64_t sent;
} nimble_oci_request;

/* --- responses (oci_response.c) --------------------------------------- */

/* Queues `r` (consumed; NULL gives MHD_NO) with the API version header and
 * records status and body size for the log. */
enum MHD_Result nimble_oci_respond(struct MHD_Connection *c, nimble_oci_request *req,
                                   unsigned status, struct MHD_Response *r, uint64_t body_size);
/* A response holding a copy of `body`; content_type may be NULL. */
struct MHD_Response *nimble_oci_text_response(const char *body, size_t len,
                                              const char *content_type);
enum MHD_Result nimble_oci_empty(struct MHD_Connection *c, nimble_oci_request *req,
                                 unsigned status);
/* Sends an OCI error body; header name/value pairs follow, then NULL. */
enum MHD_Result nimble_oci_send_error(struct MHD_Connection *c, nimble_oci_request *req,
                                      unsigned status, const char *code, const char *message, ...)
    __attribute__((sentinel));
/* Sends `s` (consumed) as an error with `code`. */
enum MHD_Result nimble_oci_send_status(struct MHD_Connection *c, nimble_oci_request *req,
                                       unsigned status, const char *code, nimble_status_t s);
/* Our own faults: 413 SIZE_INVALID for RESOURCE_EXHAUSTED, else 500 UNKNOWN. */
enum MHD_Result nimble_oci_send_internal(struct MHD_Connection *c, nimble_oci_request *req,
                                         nimble_status_t s);
enum MHD_Result nimble_oci_method_not_allowed(struct MHD_Connection *c, nimble_oci_request *req,
                                              const char *allow);

/* Request header and query values, borrowed from libmicrohttpd; NULL when absent. */
const char *nimble_oci_header(struct MHD_Connection *c, const char *name);
const char *nimble_oci_query(struct MHD_Connection *c, const char *name);
/* Content-Length: 1 and *out when present, 0 when absent, -1 when malformed. */
int nimble_oci_content_length(struct MHD_Connection *c, uint64_t *out);
int nimble_oci_is_method(const nimble_oci_request *req, const char *m);

/* --- route handlers (oci_blobs.c, oci_manifests.c) -------------------- */

/* Each either queues a response, or sets req->body and returns MHD_YES to
 * receive the body; the *_finish functions answer after the last chunk. */
enum MHD_Result nimble_oci_blob_read(nimble_oci_context *ctx, struct MHD_Connection *c,
                                     nimble_oci_request *req);
enum MHD_Result nimble_oci_upload_new(nimble_oci_context *ctx, struct MHD_Connection *c,
                                      nimble_oci_request *req);
enum MHD_Result nimble_oci_upload_existing(nimble_oci_context *ctx, struct MHD_Connection *c,
                                           nimble_oci_request *req);
enum MHD_Result nimble_oci_upload_finish(nimble_oci_context *ctx, struct MHD_Connection *c,
                                         nimble_oci_request *req);
enum MHD_Result nimble_oci_manifest_read(nimble_oci_context *ctx, struct MHD_Connection *c,
                                         nimble_oci_request *req);
enum MHD_Result nimble_oci_manifest_begin_put(nimble_oci_context *ctx, struct MHD_Connection *c,
                                              nimble_oci_request *req);
enum MHD_Result nimble_oci_manifest_finish(nimble_oci_context *ctx, struct MHD_Connection *c,
                                           nimble_oci_request *req);
enum MHD_Result nimble_oci_tags_list(nimble_oci_context *ctx, struct MHD_Connection *c,
                                     nimble_oci_request *req);

#endif /* NIMBLE_STORE_OCI_REQUEST_H */
