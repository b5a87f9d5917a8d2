/* Manifest uploads: PUT of the exact bytes under a tag or their digest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

/* A media type goes into a header line: printable ASCII only, so a caller's
 * string can never add a header of its own. */
static nimble_status_t check_media_type(const char *media_type) {
  if (!media_type || !*media_type)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "manifest media type is empty");
  size_t n = strlen(media_type);
  if (n > 255)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "manifest media type is %zu bytes, over 255",
                              n);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)media_type[i] < 0x20 || (unsigned char)media_type[i] > 0x7e)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "manifest media type: character %zu (0x%02x) is not printable "
                                "ASCII",
                                i, (unsigned char)media_type[i]);
  return nimble_ok();
}

nimble_status_t nimble_store_push_manifest(nimble_store_client *c, const char *repo,
                                           const char *tag, const void *bytes, size_t size,
                                           const char *media_type, nimble_digest_t *out_digest) {
  NIMBLE_RETURN_IF_ERROR(store_check_repo(repo));
  if (tag) NIMBLE_RETURN_IF_ERROR(store_check_tag(tag));
  NIMBLE_RETURN_IF_ERROR(check_media_type(media_type));
  if (!bytes || size == 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "manifest for %s is empty", repo);
  if (size > c->opts.max_manifest_size)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,
                              "manifest for %s is %zu bytes, over the %zu-byte cap", repo, size,
                              c->opts.max_manifest_size);
  nimble_digest_t d;
  nimble_digest_compute(bytes, size, &d);
  char dtext[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&d, dtext);
  char *url = NULL;
  NIMBLE_RETURN_IF_ERROR(store_url(c, repo, "manifests", tag ? tag : dtext, &url));
  store_body_t body = {.data = bytes, .fd = -1, .length = size};
  store_request_t req = {.method = "PUT", .url = url, .body = &body, .content_type = media_type};
  store_response_t resp = {0};
  store_retry_t retry;
  store_retry_begin(&retry);
  /* PUT of the same bytes is idempotent, so the whole request retries. */
  nimble_status_t s = store_http_with_retry(c, &req, &resp, &retry);
  if (!s && resp.status != 201 && resp.status != 200 && resp.status != 204)
    s = store_response_error(&req, &resp, retry.attempt);
  if (!s && resp.docker_digest) {
    nimble_digest_t said;
    s = nimble_digest_parse(resp.docker_digest, &said);
    if (s) s = nimble_status_annotate(s, "PUT %s: Docker-Content-Digest", url);
    else if (!nimble_digest_equal(&said, &d))
      s = nimble_status_make(NIMBLE_DATA_LOSS, "PUT %s: the store reports digest %s, expected %s",
                             url, resp.docker_digest, dtext);
  }
  store_response_clear(&resp);
  free(url);
  if (s) return s;
  if (out_digest) *out_digest = d;
  return nimble_ok();
}
