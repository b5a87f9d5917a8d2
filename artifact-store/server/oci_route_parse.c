/* Request paths to routes (nimble_oci_route_parse): a pure function of the
 * path, kept apart from the libmicrohttpd handler (oci_routes.c) so the
 * parsing can be tested and fuzzed without a server
 * (artifact-store/server/fuzz_store_request.c). */
#include <stdlib.h>
#include <string.h>

#include "oci_routes.h"

void nimble_oci_route_deinit(nimble_oci_route *route) {
  free(route->name);
  free(route->arg);
  memset(route, 0, sizeof *route);
}

static int ends_with(const char *s, size_t len, const char *suffix) {
  size_t n = strlen(suffix);
  return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

int nimble_oci_route_parse(const char *path, nimble_oci_route *out) {
  memset(out, 0, sizeof *out);
  if (strcmp(path, "/v2/") == 0 || strcmp(path, "/v2") == 0) {
    out->kind = NIMBLE_ROUTE_BASE;
    return 1;
  }
  if (strcmp(path, "/metrics") == 0) {
    out->kind = NIMBLE_ROUTE_METRICS;
    return 1;
  }
  if (strncmp(path, "/v2/", 4) != 0) return 1;
  const char *rest = path + 4;
  const char *slash = strrchr(rest, '/');
  if (!slash) return 1;
  const char *last = slash + 1;         /* final segment, may be empty */
  size_t head = (size_t)(slash - rest); /* rest[0..head) precedes it */
  nimble_oci_route_kind kind = NIMBLE_ROUTE_NONE;
  size_t name_len = 0;
  if (ends_with(rest, head, "/blobs/uploads")) {
    kind = *last ? NIMBLE_ROUTE_UPLOAD : NIMBLE_ROUTE_UPLOAD_NEW;
    name_len = head - strlen("/blobs/uploads");
  } else if (ends_with(rest, head, "/blobs") && *last) {
    kind = NIMBLE_ROUTE_BLOB;
    name_len = head - strlen("/blobs");
  } else if (ends_with(rest, head, "/manifests") && *last) {
    kind = NIMBLE_ROUTE_MANIFEST;
    name_len = head - strlen("/manifests");
  } else if (ends_with(rest, head, "/tags") && strcmp(last, "list") == 0) {
    kind = NIMBLE_ROUTE_TAGS;
    name_len = head - strlen("/tags");
  }
  if (kind == NIMBLE_ROUTE_NONE) return 1;
  out->name = strndup(rest, name_len);
  out->arg = strdup(kind == NIMBLE_ROUTE_TAGS ? "" : last);
  if (!out->name || !out->arg) {
    nimble_oci_route_deinit(out);
    return 0;
  }
  out->kind = kind;
  return 1;
}
