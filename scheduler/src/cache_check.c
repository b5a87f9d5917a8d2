/* The compile cache is served only while the store still has the artifact:
 * the manifest (pulled by digest, so its bytes are verified) and every blob
 * it references (HEAD). A store that lost a blob turns a hit into a miss.
 * A hit is then tagged under the name and target the job asked for, so that
 * `nimble fetch NAME --target=T` finds it whoever compiled it first. */
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "nimble/manifest.h"

void sched_cache_verify(nimble_scheduler *s, const char *name, const char *manifest,
                        const char *want_name, const char *tag, int *out_ok) {
  *out_ok = 0;
  uint8_t *bytes = NULL;
  size_t size = 0;
  char *media_type = NULL;
  nimble_status_t st =
      nimble_store_pull_manifest(s->store, name, manifest, &bytes, &size, &media_type, NULL);
  nimble_manifest_t m;
  nimble_manifest_init(&m);
  if (!st) st = nimble_manifest_decode(bytes, size, &m);
  int exists = 1;
  if (!st) st = nimble_store_blob_exists(s->store, name, &m.config.digest, &exists, NULL);
  for (size_t i = 0; !st && exists && i < m.layer_count; i++)
    st = nimble_store_blob_exists(s->store, name, &m.layers[i].digest, &exists, NULL);
  /* A hit served unsigned would be refused by every runtime that checks:
   * a hit that cannot be signed is a miss (the compile then signs), and is
   * signed before it is tagged. */
  if (!st && exists) st = sched_sign(s, want_name, tag, manifest);
  /* Tag it where the job wants it (also re-points a tag another model's
   * compile has since moved). */
  if (!st && exists)
    st = nimble_store_push_manifest(s->store, want_name, tag, bytes, size,
                                    media_type ? media_type : NIMBLE_MEDIA_TYPE_OCI_MANIFEST, NULL);
  free(bytes);
  free(media_type);
  if (st) {
    sched_log(s, "cache check of %s in %s: %s", manifest, name, nimble_status_message(st));
    nimble_status_free(st);
  } else {
    *out_ok = exists;
  }
  nimble_manifest_deinit(&m);
}

nimble_status_t sched_store_tag(nimble_scheduler *s, const char *from, const char *manifest,
                                const char *to, const char *tag) {
  uint8_t *bytes = NULL;
  size_t size = 0;
  char *media_type = NULL;
  nimble_status_t st =
      nimble_store_pull_manifest(s->store, from, manifest, &bytes, &size, &media_type, NULL);
  /* Signed first: a manifest that cannot be signed is never tagged. */
  if (!st) st = sched_sign(s, to, tag, manifest);
  if (!st)
    st = nimble_store_push_manifest(s->store, to, tag, bytes, size,
                                    media_type ? media_type : NIMBLE_MEDIA_TYPE_OCI_MANIFEST, NULL);
  if (st && !strstr(nimble_status_message(st), "signing "))
    st = nimble_status_annotate(st, "publishing %s:%s", to, tag);
  free(bytes);
  free(media_type);
  return st;
}
