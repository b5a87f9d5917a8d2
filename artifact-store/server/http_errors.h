/* OCI distribution error responses: the JSON body
 * {"errors":[{"code":"...","message":"...","detail":...}]} and the codes the
 * spec defines. */
#ifndef NIMBLE_STORE_HTTP_ERRORS_H
#define NIMBLE_STORE_HTTP_ERRORS_H

#include "nimble/status.h"

/* Error codes of the OCI distribution spec (plus UNKNOWN for our own faults). */
#define NIMBLE_OCI_BLOB_UNKNOWN "BLOB_UNKNOWN"
#define NIMBLE_OCI_BLOB_UPLOAD_INVALID "BLOB_UPLOAD_INVALID"
#define NIMBLE_OCI_BLOB_UPLOAD_UNKNOWN "BLOB_UPLOAD_UNKNOWN"
#define NIMBLE_OCI_DIGEST_INVALID "DIGEST_INVALID"
#define NIMBLE_OCI_MANIFEST_BLOB_UNKNOWN "MANIFEST_BLOB_UNKNOWN"
#define NIMBLE_OCI_MANIFEST_INVALID "MANIFEST_INVALID"
#define NIMBLE_OCI_MANIFEST_UNKNOWN "MANIFEST_UNKNOWN"
#define NIMBLE_OCI_NAME_INVALID "NAME_INVALID"
#define NIMBLE_OCI_NAME_UNKNOWN "NAME_UNKNOWN"
#define NIMBLE_OCI_SIZE_INVALID "SIZE_INVALID"
#define NIMBLE_OCI_UNAUTHORIZED "UNAUTHORIZED"
#define NIMBLE_OCI_DENIED "DENIED"
#define NIMBLE_OCI_UNSUPPORTED "UNSUPPORTED"
#define NIMBLE_OCI_TOO_MANY_REQUESTS "TOO_MANY_REQUESTS"
#define NIMBLE_OCI_UNKNOWN "UNKNOWN"

/* The error body for one error. `detail` may be NULL (then the body carries
 * "detail": null). Caller frees the result; NULL only when out of memory. */
char *nimble_oci_error_body(const char *code, const char *message, const char *detail);

#endif /* NIMBLE_STORE_HTTP_ERRORS_H */
