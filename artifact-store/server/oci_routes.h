/* The OCI distribution routes: URL parsing and the libmicrohttpd request
 * handler that serves them from a nimble_store_fs. */
#ifndef NIMBLE_STORE_OCI_ROUTES_H
#define NIMBLE_STORE_OCI_ROUTES_H

#include <microhttpd.h>
#include <stdatomic.h>
#include <stddef.h>

#include "auth.h"
#include "nimble/store_fs.h"

typedef enum nimble_oci_route_kind {
  NIMBLE_ROUTE_NONE = 0,   /* not an API path */
  NIMBLE_ROUTE_BASE,       /* /v2/ */
  NIMBLE_ROUTE_BLOB,       /* /v2/<name>/blobs/<digest> */
  NIMBLE_ROUTE_UPLOAD_NEW, /* /v2/<name>/blobs/uploads/ */
  NIMBLE_ROUTE_UPLOAD,     /* /v2/<name>/blobs/uploads/<id> */
  NIMBLE_ROUTE_MANIFEST,   /* /v2/<name>/manifests/<reference> */
  NIMBLE_ROUTE_TAGS,       /* /v2/<name>/tags/list */
  NIMBLE_ROUTE_METRICS,    /* /metrics (Prometheus text; not part of the OCI API) */
} nimble_oci_route_kind;

typedef struct nimble_oci_route {
  nimble_oci_route_kind kind;
  char *name; /* owned; the repository name, unchecked */
  char *arg;  /* owned; digest, upload id or reference (may be "") */
} nimble_oci_route;

/* Splits a (percent-decoded) URL path into a route. Names may contain '/',
 * so the route is read from the right: the last path segments decide the
 * kind and the rest is the name. The name is not checked here. Returns 0
 * when out of memory. Free with nimble_oci_route_deinit(). */
int nimble_oci_route_parse(const char *path, nimble_oci_route *out);
void nimble_oci_route_deinit(nimble_oci_route *route);

/* What the handler needs, owned by the server. */
typedef struct nimble_oci_context {
  nimble_store_fs *store;
  nimble_store_auth *auth; /* NULL: no tokens configured */
  int auth_reads;
  int quiet;
  unsigned max_connections;
  atomic_uint connections; /* open connections */
  atomic_uint requests;    /* requests between first call and completion */
  struct nimble_store_metrics *metrics; /* NULL: none kept */
} nimble_oci_context;

/* libmicrohttpd callbacks; cls is the nimble_oci_context. */
enum MHD_Result nimble_oci_handle(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls);
void nimble_oci_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                          enum MHD_RequestTerminationCode toe);
void nimble_oci_connection_event(void *cls, struct MHD_Connection *connection,
                                 void **socket_context, enum MHD_ConnectionNotificationCode toe);

#endif /* NIMBLE_STORE_OCI_ROUTES_H */
