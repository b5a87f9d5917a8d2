/* The farm's signature on what it publishes (docs/farm.md, "Signing"):
 * with --signing-key, every (repository, tag, manifest) the scheduler
 * vouches for, a worker's RESULT, a cache hit tagged for a job, a merged
 * job's name, gets a signature object (nimble/signature.h) pushed as the
 * config blob of a layerless OCI manifest tagged `<tag>.sig`. Runtimes
 * with the farm's public key check it before loading (docs/fetch.md). */
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "nimble/digest.h"
#include "nimble/manifest.h"

nimble_status_t sched_sign(nimble_scheduler *s, const char *repo, const char *tag,
                           const char *manifest) {
  if (!s->signing_key) return nimble_ok();
  if (strlen(tag) > NIMBLE_SIGNATURE_MAX_TAG)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "tag '%s' is longer than %d bytes: no room for its '%s' signature tag",
                              tag, NIMBLE_SIGNATURE_MAX_TAG, NIMBLE_SIGNATURE_TAG_SUFFIX);
  char *object = NULL, *sigman = NULL;
  size_t object_size = 0, sigman_size = 0;
  nimble_digest_t od;
  char odtext[NIMBLE_DIGEST_STRING_LEN + 1], sigtag[NIMBLE_SIGNATURE_MAX_TAG + 8];
  snprintf(sigtag, sizeof sigtag, "%s" NIMBLE_SIGNATURE_TAG_SUFFIX, tag);
  nimble_status_t st = nimble_signature_object(s->signing_key, repo, tag, manifest, &object, &object_size);
  if (!st) st = nimble_store_push_blob(s->store, repo, object, object_size, &od);
  if (!st) {
    nimble_digest_format(&od, odtext);
    st = nimble_signature_manifest(odtext, object_size, &sigman, &sigman_size);
  }
  if (!st)
    st = nimble_store_push_manifest(s->store, repo, sigtag, sigman, sigman_size,
                                    NIMBLE_MEDIA_TYPE_OCI_MANIFEST, NULL);
  if (!st) sched_log(s, "signed %s:%s -> %s", repo, tag, manifest);
  free(object);
  free(sigman);
  return st ? nimble_status_annotate(st, "signing %s:%s", repo, tag) : st;
}
