/* Turns a failed exchange into a status: the HTTP status and the OCI error
 * body ({"errors":[{"code":..,"message":..}]}) mapped to a nimble code, with
 * the method and URL named. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "client_internal.h"

static nimble_status_code_t code_for_http(long status, const char *oci_code) {
  /* The OCI code is more precise than the HTTP status where it speaks of
   * content that does not match its digest. */
  if (oci_code && (strcmp(oci_code, "DIGEST_INVALID") == 0 ||
                   strcmp(oci_code, "SIZE_INVALID") == 0))
    return NIMBLE_DATA_LOSS;
  switch (status) {
    case 400: return NIMBLE_INVALID_ARGUMENT;
    case 401: return NIMBLE_UNAUTHENTICATED;
    case 403: return NIMBLE_PERMISSION_DENIED;
    case 404: return NIMBLE_NOT_FOUND;
    case 405: return NIMBLE_UNIMPLEMENTED;
    case 408: return NIMBLE_DEADLINE_EXCEEDED;
    case 409: return NIMBLE_FAILED_PRECONDITION;
    case 413: return NIMBLE_RESOURCE_EXHAUSTED;
    case 416: return NIMBLE_OUT_OF_RANGE;
    case 429: return NIMBLE_RESOURCE_EXHAUSTED;
    case 501: return NIMBLE_UNIMPLEMENTED;
    default: break;
  }
  if (status >= 500) return NIMBLE_UNAVAILABLE;
  if (status >= 400) return NIMBLE_INVALID_ARGUMENT;
  /* 1xx/3xx/unexpected 2xx: the server did not follow the protocol. */
  return NIMBLE_INTERNAL;
}

/* Copies a JSON string into out, replacing control characters so a hostile
 * body cannot forge log lines. */
static void copy_clean(char *out, size_t cap, const char *s) {
  size_t i = 0;
  for (; s && *s && i + 1 < cap; s++) out[i++] = ((unsigned char)*s < 0x20) ? ' ' : *s;
  out[i] = '\0';
}

nimble_status_t store_response_error(const store_request_t *req, const store_response_t *r,
                                     int attempts) {
  char after[48] = "";
  if (attempts > 1) snprintf(after, sizeof(after), " (after %d attempts)", attempts);

  if (r->curl_code != CURLE_OK || r->status == 0) {
    nimble_status_code_t code = NIMBLE_UNAVAILABLE;
    if (r->curl_code == CURLE_OPERATION_TIMEDOUT) code = NIMBLE_DEADLINE_EXCEEDED;
    if (r->curl_code == CURLE_UNSUPPORTED_PROTOCOL || r->curl_code == CURLE_URL_MALFORMAT)
      code = NIMBLE_INVALID_ARGUMENT;
    if (r->curl_code == CURLE_PARTIAL_FILE) code = NIMBLE_DATA_LOSS;
    return nimble_status_make(code, "%s %s: %s%s", req->method, req->url,
                              r->curl_error[0] ? r->curl_error : curl_easy_strerror(r->curl_code),
                              after);
  }

  char oci_code[64] = "", oci_message[256] = "";
  if (r->body_size > 0 && r->body) {
    json_error_t jerr;
    json_t *root = json_loadb((const char *)r->body, r->body_size, 0, &jerr);
    json_t *errors = root ? json_object_get(root, "errors") : NULL;
    json_t *first = json_is_array(errors) ? json_array_get(errors, 0) : NULL;
    if (json_is_object(first)) {
      copy_clean(oci_code, sizeof(oci_code), json_string_value(json_object_get(first, "code")));
      copy_clean(oci_message, sizeof(oci_message),
                 json_string_value(json_object_get(first, "message")));
    }
    json_decref(root);
  }
  char auth[200] = "";
  if (r->status == 401 && r->www_authenticate) {
    char clean[160];
    copy_clean(clean, sizeof(clean), r->www_authenticate);
    snprintf(auth, sizeof(auth), " (WWW-Authenticate: %s)", clean);
  }
  return nimble_status_make(code_for_http(r->status, oci_code[0] ? oci_code : NULL),
                            "%s %s: HTTP %ld%s%s%s%s%s%s", req->method, req->url, r->status,
                            oci_code[0] ? " " : "", oci_code, oci_message[0] ? ": " : "",
                            oci_message, auth, after);
}
