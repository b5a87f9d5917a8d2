/* The OCI distribution routes served from the filesystem backend.
 *
 * libmicrohttpd calls the handler first with the headers, then once per
 * chunk of request body, then once more with no data. Everything that can be
 * decided from the headers (route, token, name, declared sizes) is decided
 * on the first call, so a refused upload is refused before its body is
 * read. Bodies stream straight to the upload file (blobs) or into a buffer
 * bounded at 4 MiB (manifests); a body error is remembered and reported
 * after the last chunk, the rest of the body being discarded. */
#include "oci_routes.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http_errors.h"
#include "oci_request.h"
#include "store_metrics.h"

static void request_free(nimble_oci_request *req) {
  if (!req) return;
  nimble_status_free(nimble_store_upload_writer_close(req->writer));
  nimble_status_free(req->body_error);
  nimble_oci_route_deinit(&req->route);
  free(req->manifest);
  free(req->content_type);
  free(req->early);
  free(req->path);
  free(req);
}

/* --- dispatch --------------------------------------------------------- */

static enum MHD_Result begin(nimble_oci_context *ctx, struct MHD_Connection *c,
                             nimble_oci_request *req) {
  if (ctx->max_connections && atomic_load(&ctx->connections) > ctx->max_connections) {
    char msg[96];
    snprintf(msg, sizeof msg, "more than %u connections are open; retry later",
             ctx->max_connections);
    return nimble_oci_send_error(c, req, MHD_HTTP_TOO_MANY_REQUESTS, NIMBLE_OCI_TOO_MANY_REQUESTS,
                                 msg, "Retry-After", "1", "Connection", "close", NULL);
  }
  int write = !nimble_oci_is_method(req, "GET") && !nimble_oci_is_method(req, "HEAD");
  if (ctx->auth && (write || ctx->auth_reads) &&
      !nimble_store_auth_check(ctx->auth, nimble_oci_header(c, "Authorization")))
    return nimble_oci_send_error(
        c, req, MHD_HTTP_UNAUTHORIZED, NIMBLE_OCI_UNAUTHORIZED,
        nimble_oci_header(c, "Authorization")
            ? "the bearer token is not valid"
            : "authentication required: send Authorization: Bearer <token>",
        NULL);
  nimble_oci_route *route = &req->route;
  if (route->kind == NIMBLE_ROUTE_METRICS) {
    if (!nimble_oci_is_method(req, "GET") && !nimble_oci_is_method(req, "HEAD"))
      return nimble_oci_method_not_allowed(c, req, "GET, HEAD");
    nimble_metrics_buf b;
    nimble_metrics_buf_init(&b);
    nimble_store_metrics_write(ctx->metrics, &b, atomic_load(&ctx->connections),
                               atomic_load(&ctx->requests));
    enum MHD_Result ret =
        b.failed || !b.data
            ? nimble_oci_send_error(c, req, MHD_HTTP_INTERNAL_SERVER_ERROR, NIMBLE_OCI_UNKNOWN,
                                    "out of memory writing the metrics", NULL)
            : nimble_oci_respond(c, req, MHD_HTTP_OK,
                                 nimble_oci_text_response(b.data, b.len, NIMBLE_METRICS_CONTENT_TYPE),
                                 b.len);
    nimble_metrics_buf_free(&b);
    return ret;
  }
  if (route->kind == NIMBLE_ROUTE_NONE)
    return nimble_oci_send_error(c, req, MHD_HTTP_NOT_FOUND, NIMBLE_OCI_UNSUPPORTED,
                                 "not an OCI distribution API path", NULL);
  if (route->kind == NIMBLE_ROUTE_BASE) {
    if (!nimble_oci_is_method(req, "GET") && !nimble_oci_is_method(req, "HEAD"))
      return nimble_oci_method_not_allowed(c, req, "GET, HEAD");
    return nimble_oci_respond(c, req, MHD_HTTP_OK,
                              nimble_oci_text_response("{}", 2, "application/json"), 2);
  }
  nimble_status_t s = nimble_store_name_check(route->name);
  if (s) return nimble_oci_send_status(c, req, MHD_HTTP_BAD_REQUEST, NIMBLE_OCI_NAME_INVALID, s);

  switch (route->kind) {
    case NIMBLE_ROUTE_BLOB:
      if (nimble_oci_is_method(req, "GET") || nimble_oci_is_method(req, "HEAD"))
        return nimble_oci_blob_read(ctx, c, req);
      return nimble_oci_method_not_allowed(c, req, "GET, HEAD");
    case NIMBLE_ROUTE_UPLOAD_NEW:
      return nimble_oci_upload_new(ctx, c, req);
    case NIMBLE_ROUTE_UPLOAD:
      return nimble_oci_upload_existing(ctx, c, req);
    case NIMBLE_ROUTE_MANIFEST:
      if (nimble_oci_is_method(req, "GET") || nimble_oci_is_method(req, "HEAD"))
        return nimble_oci_manifest_read(ctx, c, req);
      if (nimble_oci_is_method(req, "PUT")) return nimble_oci_manifest_begin_put(ctx, c, req);
      return nimble_oci_method_not_allowed(c, req, "GET, HEAD, PUT");
    case NIMBLE_ROUTE_TAGS:
      if (nimble_oci_is_method(req, "GET")) return nimble_oci_tags_list(ctx, c, req);
      return nimble_oci_method_not_allowed(c, req, "GET");
    default:
      return nimble_oci_send_error(c, req, MHD_HTTP_NOT_FOUND, NIMBLE_OCI_UNSUPPORTED,
                                   "unknown route", NULL);
  }
}

static void consume(nimble_oci_request *req, const char *data, size_t size) {
  req->received += size;
  if (req->body_error) return; /* discard the rest */
  if (req->body == NIMBLE_OCI_BODY_UPLOAD) {
    req->body_error = nimble_store_upload_writer_write(req->writer, data, size);
  } else if (req->body == NIMBLE_OCI_BODY_MANIFEST) {
    if (size > NIMBLE_STORE_MANIFEST_MAX - req->manifest_len) {
      req->body_error =
          nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "manifest exceeds the limit of %u bytes",
                             NIMBLE_STORE_MANIFEST_MAX);
      return;
    }
    if (req->manifest_len + size > req->manifest_cap) {
      size_t cap = req->manifest_cap ? req->manifest_cap : 4096;
      while (cap < req->manifest_len + size) cap *= 2;
      char *n = realloc(req->manifest, cap);
      if (!n) {
        req->body_error = NIMBLE_OOM();
        return;
      }
      req->manifest = n;
      req->manifest_cap = cap;
    }
    memcpy(req->manifest + req->manifest_len, data, size);
    req->manifest_len += size;
  }
}

enum MHD_Result nimble_oci_handle(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls) {
  nimble_oci_context *ctx = cls;
  nimble_oci_request *req = *req_cls;
  if (!req) {
    req = calloc(1, sizeof *req);
    if (!req) return MHD_NO;
    atomic_fetch_add(&ctx->requests, 1);
    *req_cls = req;
    clock_gettime(CLOCK_MONOTONIC, &req->started);
    snprintf(req->method, sizeof req->method, "%s", method);
    req->path = strdup(url);
    if (!req->path || !nimble_oci_route_parse(url, &req->route)) return MHD_NO;
    /* A request without a body, or with a small one, is judged after the
     * body has arrived (a small body is held in memory meanwhile): a
     * response queued before libmicrohttpd has read the whole request costs
     * the keep-alive, and closing a socket with unread bytes in it sends a
     * reset that can destroy the response before the client reads it. A
     * large or chunked body is judged on its headers, before it is read, so
     * a refused upload costs nothing (clients that send Expect:
     * 100-continue then never send the body at all). */
    uint64_t declared = 0;
    int has_length = nimble_oci_content_length(connection, &declared);
    if (nimble_oci_header(connection, "Transfer-Encoding") || has_length < 0 ||
        declared > NIMBLE_OCI_SMALL_BODY)
      return begin(ctx, connection, req);
    req->deferred = 1;
    return MHD_YES;
  }
  if (req->deferred) {
    if (*upload_data_size) {
      /* libmicrohttpd frames the body by Content-Length, so this stays
       * within the declared NIMBLE_OCI_SMALL_BODY bytes. */
      size_t n = *upload_data_size;
      if (n > NIMBLE_OCI_SMALL_BODY - req->early_len) return MHD_NO;
      if (!req->early && !(req->early = malloc(NIMBLE_OCI_SMALL_BODY))) return MHD_NO;
      memcpy(req->early + req->early_len, upload_data, n);
      req->early_len += n;
      *upload_data_size = 0;
      return MHD_YES;
    }
    req->deferred = 0;
    enum MHD_Result ret = begin(ctx, connection, req);
    if (ret != MHD_YES || req->queued) return ret;
    if (req->early_len) consume(req, req->early, req->early_len);
  }
  if (*upload_data_size) {
    if (!req->queued) consume(req, upload_data, *upload_data_size);
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (req->queued) return MHD_YES;
  if (req->body == NIMBLE_OCI_BODY_UPLOAD) return nimble_oci_upload_finish(ctx, connection, req);
  if (req->body == NIMBLE_OCI_BODY_MANIFEST)
    return nimble_oci_manifest_finish(ctx, connection, req);
  return nimble_oci_send_error(connection, req, MHD_HTTP_INTERNAL_SERVER_ERROR, NIMBLE_OCI_UNKNOWN,
                               "request ended without a response", NULL);
}

/* Writes `s` to the log with control characters escaped: URLs arrive
 * percent-decoded and could otherwise forge log lines. */
static void log_escaped(FILE *f, const char *s) {
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch < 0x20 || ch == 0x7f)
      fprintf(f, "\\x%02x", ch);
    else
      fputc(ch, f);
  }
}

static const char *route_name(nimble_oci_route_kind kind) {
  switch (kind) {
    case NIMBLE_ROUTE_BASE: return "base";
    case NIMBLE_ROUTE_BLOB: return "blob";
    case NIMBLE_ROUTE_UPLOAD_NEW:
    case NIMBLE_ROUTE_UPLOAD: return "upload";
    case NIMBLE_ROUTE_MANIFEST: return "manifest";
    case NIMBLE_ROUTE_TAGS: return "tags";
    case NIMBLE_ROUTE_METRICS: return "metrics";
    default: return "other";
  }
}

void nimble_oci_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                          enum MHD_RequestTerminationCode toe) {
  nimble_oci_context *ctx = cls;
  nimble_oci_request *req = *req_cls;
  if (!req) return;
  *req_cls = NULL;
  if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && req->writer) {
    /* The client went away mid-body. A monolithic upload's session was
     * never given out, so it is dropped; a chunked session keeps the bytes
     * received so far and can be resumed. */
    nimble_status_free(nimble_store_upload_writer_close(req->writer));
    req->writer = NULL;
    if (req->fresh_session)
      nimble_status_free(nimble_store_fs_upload_cancel(ctx->store, req->upload_id));
  }
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  double ms = (double)(now.tv_sec - req->started.tv_sec) * 1e3 +
              (double)(now.tv_nsec - req->started.tv_nsec) / 1e6;
  nimble_store_metrics_request(ctx->metrics, req->method, route_name(req->route.kind),
                               req->queued ? req->status : 0,
                               toe == MHD_REQUEST_TERMINATED_COMPLETED_OK, req->received,
                               toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? req->sent : 0,
                               ms / 1000.0);
  if (!ctx->quiet) {
    flockfile(stderr);
    fprintf(stderr, "nimble-store: %s ", req->method);
    log_escaped(stderr, req->path);
    if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
      fprintf(stderr, " %u", req->status);
    else
      fprintf(stderr, " %u(aborted)", req->status);
    fprintf(stderr, " in=%" PRIu64 " out=%" PRIu64 " %.1fms\n", req->received, req->sent, ms);
    funlockfile(stderr);
  }
  request_free(req);
  atomic_fetch_sub(&ctx->requests, 1);
}

void nimble_oci_connection_event(void *cls, struct MHD_Connection *connection,
                                 void **socket_context, enum MHD_ConnectionNotificationCode toe) {
  nimble_oci_context *ctx = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED)
    atomic_fetch_add(&ctx->connections, 1);
  else if (toe == MHD_CONNECTION_NOTIFY_CLOSED)
    atomic_fetch_sub(&ctx->connections, 1);
}
